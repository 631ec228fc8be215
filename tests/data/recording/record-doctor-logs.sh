#!/bin/bash
# Issue 12 after issue 10's merge: record the fabric doctor through scripts/nccl-launcher.sh, with real
# mpirun (--tag-output), the NCCL log filter and NCCL_DEBUG=INFO in the doctor's runs, on one 2-GPU
# machine. Fake hosts node-0..3 as in record-nccl-logs.sh (the fake-ssh shim: its own UTS namespace
# per "host"), so NCCL talks over sockets: under `auto` the launcher must see that in the condensed
# lines and run the doctor. Run from the repository root with NCCL_TESTS_SRC=<nccl-tests v2.19.6
# source>; writes $OUT/summary.txt and $OUT/doctor-*.log.
set -u
ROOT=$(pwd)
W=/tmp/i12rec
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

# what components/nccl_job.py doctor_env would hand an ND H200 v5 job, with this machine's sizes
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
