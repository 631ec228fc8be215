#!/bin/bash
# A doctor round stopped by a signal keeps what its steps printed: scripts/nccl-launcher.sh with real
# mpirun and NCCL, DOCTOR=always, and a SIGTERM sent while the first round's pairs are still running
# (as the kubelet does at the pod's deadline, or Volcano when it ends the job). Derived from
# record-doctor-logs.sh (its setup is doctor-setup.sh); one GPU shared by four fake hosts. Run from the
# repository root with NCCL_TESTS_SRC=<nccl-tests v2.19.6 source>; writes $OUT/summary.txt and
# $OUT/doctor-killed-4x1.log (kept as tests/data/doctor-launcher_killed-4x1_h200x1-fake-hosts.*).
set -u
W=/tmp/killrec
source "$(dirname "$0")/doctor-setup.sh"

# what components/fabric/nccl_job.py doctor_env hands the job, with long pair runs so the round is still
# running when the signal comes
doctor_env=(DOCTOR=always DOCTOR_SECONDS=400 DOCTOR_PASS_BUSBW_GBPS=300
  "DOCTOR_PAIR_ROUNDS=0-1 2-3;0-2 1-3;0-3 1-2" "DOCTOR_PAIR_ARGS=-b 8M -e 2G -f 2 -g 1 -n 60"
  "DOCTOR_NODE_ARGS=-b 8M -e 8M -f 2 -g 1" DOCTOR_PAIR_SLOW_BELOW_GBPS=100 DOCTOR_HCA_PAIRS=0)
LOG="$OUT/doctor-killed-4x1.log"
t0=$SECONDS
env NODES=4 GPUS_PER_NODE=1 ALL_REDUCE_ARGS="-b 8 -e 64M -f 2 -g 1" ALL_REDUCE_BIN="$W/build/all_reduce_perf" \
  HOSTFILE="$W/hosts4" MPI_HOME="$MPI_PREFIX" MPI_MAP_BIND="-npernode 1 --bind-to none" SSH_WAIT_SECONDS=30 \
  SSH_POLL_SECONDS=1 POD_IFNAME="$IF" FAKE_SSH_SPREAD_GPUS=1 "${doctor_env[@]}" \
  bash "$ROOT/scripts/nccl-launcher.sh" >"$LOG" 2>&1 &
LAUNCHER=$!
# wait until the first round's pair runs have printed rows (their per-step files under the launcher's
# work dir are not in the log yet), then stop the launcher as the kubelet would
for _ in $(seq 1 240); do
  sleep 1
  # a pair step's file (its header names maxBytes 2 GiB) holds its first row (8 MiB) while the larger
  # sizes still run
  f=$(grep -l "maxBytes 2147483648" /tmp/tmp.*/* 2>/dev/null | head -1)
  [ -n "$f" ] && grep -qE "^[^#]*[[:space:]]8388608[[:space:]]" "$f" && { sleep 3; break; }
  [ $((SECONDS - t0)) -gt 100 ] && break
done
echo "=== before the signal: processes, and the steps' files"
ps -eo pid,etimes,args | grep -E "all_reduce|mpirun|orted|stdbuf" | grep -v grep | cut -c1-200 | head -20
for f in /tmp/tmp.*/*; do [ -f "$f" ] && echo "--- $f: $(wc -l <"$f") lines" && tail -3 "$f" | cut -c1-160; done 2>/dev/null | tail -40
echo "=== sending SIGTERM after $((SECONDS - t0)) s"
kill -TERM "$LAUNCHER"
wait "$LAUNCHER"; echo "=== launcher rc=$? $((SECONDS - t0)) s, $(wc -c <"$LOG") bytes"
grep -E '^# aks-infiniband|stopped by a signal|exited with status' "$LOG"
echo "=== what the killed steps had printed, as the log keeps it:"
sed -n '/doctor-skip step=pair/,$p' "$LOG" | grep -vE '^\[' | head -40
pkill -f all_reduce_perf || true
echo "=== done in $((SECONDS - START)) s"
