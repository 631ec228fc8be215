#!/bin/bash
# A doctor round stopped by a signal keeps what its steps printed: scripts/nccl-launcher.sh with real
# mpirun and NCCL, DOCTOR=always, and a SIGTERM sent while the first round's pairs are still running
# (as the kubelet does at the pod's deadline, or Volcano when it ends the job). Derived from
# record-doctor-logs.sh; one GPU shared by the fake hosts. Fake hosts node-0..3 as in record-nccl-logs.sh (the fake-ssh shim: its own UTS namespace
# per "host"), so NCCL talks over sockets: under `auto` the launcher must see that in the condensed
# lines and run the doctor. Run from the repository root with NCCL_TESTS_SRC=<nccl-tests v2.19.6
# source>; writes $OUT/summary.txt and $OUT/doctor-*.log.
set -u
ROOT=$(pwd)
W=/tmp/killrec
mkdir -p "$W/bin"
START=$SECONDS
exec > >(tee "$OUT/summary.txt") 2>&1
echo "=== date: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1
command -v mpirun && mpirun --version 2>&1 | head -1
IF=$(ls /sys/class/net | grep -v '^lo$' | head -1)
NCCL_DIR=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
echo "=== interface $IF; nvidia-nccl-cu13 $(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))' 2>&1)"
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
MPI_PREFIX=$(dirname "$(dirname "$(readlink -f "$(command -v mpirun)")")")

# all_reduce_perf against the pip NCCL (as record-nccl-logs.sh)
mkdir -p "$W/nccl/lib" "$W/mpi"
ln -sfn "$NCCL_DIR/include" "$W/nccl/include"
ln -sf "$NCCL_DIR/lib/libnccl.so.2" "$W/nccl/lib/libnccl.so"
ln -sf "$NCCL_DIR/lib/libnccl.so.2" "$W/nccl/lib/libnccl.so.2"
ln -sfn "$(mpicc --showme:incdirs | awk '{print $1}')" "$W/mpi/include"
ln -sfn "$(mpicc --showme:libdirs | awk '{print $1}')" "$W/mpi/lib"
cp -r "$NCCL_TESTS_SRC" "$W/src"
( cd "$W/src" && make -C src -j32 MPI=1 MPI_HOME="$W/mpi" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$W/nccl" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$W/build" "$W/build/all_reduce_perf" ) >"$W/build.log" 2>&1
echo "=== build rc=$? ($((SECONDS - START)) s)"
[ -x "$W/build/all_reduce_perf" ] || { tail -30 "$W/build.log"; exit 1; }

cp "$ROOT/tests/data/recording/fake-ssh" "$W/bin/ssh" && chmod +x "$W/bin/ssh"
# the job's NCCL environment (components/nccl_settings.py), this machine's interface
export NCCL_IB_DISABLE=0 NCCL_NET_GDR_LEVEL=SYS NCCL_SOCKET_IFNAME=$IF NCCL_NET_PLUGIN=none NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,NET CUDA_DEVICE_ORDER=PCI_BUS_ID UCX_TLS=tcp UCX_NET_DEVICES=$IF
export NCCL_NVLS_ENABLE=0  # the machine's rule
export OMPI_MCA_plm=rsh OMPI_MCA_plm_rsh_agent="$W/bin/ssh" OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self \
  OMPI_MCA_btl_tcp_if_include=$IF
# the patterns components/nccl_job.py hands the launcher (verify/launcher_env.py)
while IFS= read -r -d '' kv; do export "$kv"; done < <(cd "$ROOT" && python3 -m verify.launcher_env)
export PATH="$W/bin:$PATH" LD_LIBRARY_PATH="$NCCL_DIR/lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
for net in 203.0.113 198.51.100 198.18.0; do hostname -I | grep -q "$net\." || break; done
for i in 0 1 2 3; do echo "$net.$((i + 1)) node-$i" >>/etc/hosts; done
printf 'node-%s\n' 0 1 2 3 >"$W/hosts4"

# what components/nccl_job.py doctor_env hands the job, with long pair runs so the round is still
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
