#!/bin/bash
# Issue 12 after issue 10's merge: record the fabric doctor through scripts/nccl-launcher.sh, with real
# mpirun (--tag-output), the NCCL log filter and NCCL_DEBUG=INFO in the doctor's runs, on one 2-GPU
# machine. Fake hosts node-0..3 as in record-nccl-logs.sh (the fake-ssh shim: its own UTS namespace
# per "host"), so NCCL talks over sockets: under `auto` the launcher must see that in the condensed
# lines and run the doctor. Run from the repository root with NCCL_TESTS_SRC=<nccl-tests v2.19.6
# source>; writes $OUT/summary.txt and $OUT/doctor-*.log.
set -u
W=/tmp/i12rec
source "$(dirname "$0")/doctor-setup.sh"

# what components/fabric/nccl_job.py doctor_env would hand an ND H200 v5 job, with this machine's sizes
doctor_env=(DOCTOR=auto DOCTOR_SECONDS=150 DOCTOR_PASS_BUSBW_GBPS=300
  "DOCTOR_PAIR_ROUNDS=0-3 1-2;0-2 1-3;0-1 2-3" "DOCTOR_PAIR_ARGS=-b 256M -e 256M -f 2 -g 1"
  "DOCTOR_NODE_ARGS=-b 256M -e 256M -f 2 -g 1" DOCTOR_PAIR_SLOW_BELOW_GBPS=100 DOCTOR_HCA_PAIRS=2)
t0=$SECONDS
env NODES=4 GPUS_PER_NODE=1 ALL_REDUCE_ARGS="-b 8 -e 256M -f 2 -g 1" ALL_REDUCE_BIN="$W/build/all_reduce_perf" \
  HOSTFILE="$W/hosts4" MPI_HOME="$MPI_PREFIX" MPI_MAP_BIND="-npernode 1 --bind-to none" SSH_WAIT_SECONDS=30 \
  SSH_POLL_SECONDS=1 POD_IFNAME="$IF" FAKE_SSH_SPREAD_GPUS=2 "${doctor_env[@]}" \
  timeout -k 10 300 bash "$ROOT/scripts/nccl-launcher.sh" >"$OUT/doctor-auto-sockets-4x1.log" 2>&1
echo "=== auto, 4 x 1 GPU: rc=$? $((SECONDS - t0)) s, $(wc -c <"$OUT/doctor-auto-sockets-4x1.log") bytes"
grep -E '^# aks-infiniband|NCCL INFO lines:|exited with status' "$OUT/doctor-auto-sockets-4x1.log"
echo "=== done in $((SECONDS - START)) s"
