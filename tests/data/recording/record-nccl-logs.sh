#!/bin/bash
# Issue 10: record real NCCL INFO logs through scripts/nccl-launcher.sh on one 2-GPU machine.
# Fake hosts node-0..node-N-1: the ssh shim in bin/ runs each "remote" command in its own UTS
# namespace with that hostname. Writes $OUT/summary.txt (this output) and $OUT/recordings.tar.gz.
set -u
D=$(cd "$(dirname "$0")" && pwd)  # holds nccl-launcher.sh, bin/ssh (fake-ssh here), nccl-tests/ (v2.19.6)
W=/tmp/i10work
R=$W/rec
mkdir -p "$W" "$R"
START=$SECONDS
DEADLINE=${DEADLINE:-400}
exec > >(tee "$OUT/summary.txt") 2>&1

echo "=== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "=== uname: $(uname -a)"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,compute_mode --format=csv 2>&1
nvidia-smi topo -m 2>&1 | head -8
command -v nvcc && nvcc --version | tail -2
command -v mpirun && mpirun --version 2>&1 | head -1
command -v unshare hostname awk
ls /sys/class/net
IF=$(ls /sys/class/net | grep -v '^lo$' | head -1)
IF=${IF:-lo}
echo "=== interface: $IF $(cat /sys/class/net/$IF/operstate 2>/dev/null)"
# NCCL_DIR=<a build with include/ and lib/libnccl.so.2> records another NCCL than the pip one (issue 20: 2.30.4)
NCCL_DIR=${NCCL_DIR:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)}
echo "=== nvidia-nccl-cu13 $(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))' 2>&1) at $NCCL_DIR"
ls "$NCCL_DIR" "$NCCL_DIR/lib" "$NCCL_DIR/include" 2>&1 | head -20
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
MPIRUN=$(readlink -f "$(command -v mpirun)")
MPI_PREFIX=$(dirname "$(dirname "$MPIRUN")")
echo "=== CUDA_HOME=$CUDA_HOME MPIRUN=$MPIRUN MPI_PREFIX=$MPI_PREFIX orted=$(ls $MPI_PREFIX/bin/orted 2>&1)"

# --- build nccl-tests (all_reduce_perf only) against the pip NCCL ---------------------------------
mkdir -p "$W/nccl/lib" "$W/mpi"
ln -sfn "$NCCL_DIR/include" "$W/nccl/include"
ln -sf "$NCCL_DIR/lib/libnccl.so.2" "$W/nccl/lib/libnccl.so"
ln -sf "$NCCL_DIR/lib/libnccl.so.2" "$W/nccl/lib/libnccl.so.2"
if command -v mpicc >/dev/null; then
  ln -sfn "$(mpicc --showme:incdirs | awk '{print $1}')" "$W/mpi/include"
  ln -sfn "$(mpicc --showme:libdirs | awk '{print $1}')" "$W/mpi/lib"
else
  ln -sfn "$(dirname "$(find / -name mpi.h -path '*openmpi*' 2>/dev/null | head -1)")" "$W/mpi/include"
  ln -sfn "$(dirname "$(find / -name 'libmpi.so' 2>/dev/null | head -1)")" "$W/mpi/lib"
fi
ls -l "$W/mpi/"
cp -r "$D/nccl-tests" "$W/src"
( cd "$W/src" && make -C src -j32 MPI=1 MPI_HOME="$W/mpi" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$W/nccl" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$W/build" "$W/build/all_reduce_perf" ) > "$R/build.log" 2>&1
echo "=== build rc=$? ($((SECONDS - START)) s)"; tail -3 "$R/build.log"
[ -x "$W/build/all_reduce_perf" ] || { tail -40 "$R/build.log"; tar -C "$W" -czf "$OUT/recordings.tar.gz" rec; exit 1; }

# --- the environment the job sets (components/fabric/nccl_job.py nccl_env), this machine's interface -----
export NCCL_IB_DISABLE=0 NCCL_NET_GDR_LEVEL=SYS NCCL_IB_PCI_RELAXED_ORDERING=1 NCCL_SOCKET_IFNAME=$IF \
  NCCL_NET_PLUGIN=none NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET CUDA_DEVICE_ORDER=PCI_BUS_ID \
  UCX_TLS=tcp UCX_NET_DEVICES=$IF
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the machine's rule
# This machine's OpenMPI: launch over the ssh shim, TCP between the fake hosts.
export OMPI_MCA_plm=rsh OMPI_MCA_plm_rsh_agent="$D/bin/ssh" OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self \
  OMPI_MCA_btl_tcp_if_include=$IF
# the patterns components/fabric/nccl_job.py hands the launcher (verify/launcher_env.py)
while IFS= read -r -d '' kv; do export "$kv"; done < <(cd "${ROOT:-$PWD}" && python3 -m verify.launcher_env)  # from the repository root
export PATH="$D/bin:$PATH" LD_LIBRARY_PATH="$NCCL_DIR/lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
# node-N must resolve to an address that is not this machine's, or mpirun runs its ranks here unshimmed
for net in 203.0.113 198.51.100 198.18.0; do hostname -I | grep -q "$net\." || break; done
for i in $(seq 0 63); do echo "$net.$((i + 1)) node-$i" >> /etc/hosts; done
echo "=== fake hosts on $net.0/24 (this machine: $(hostname -I))"
echo "=== shim: $(ssh -o BatchMode=yes node-3 hostname 2>&1)"
timeout 30 mpirun --allow-run-as-root -np 2 -npernode 1 --host node-0:1,node-1:1 --tag-output hostname 2>&1 | head -5
if [ "$(ssh node-3 hostname 2>/dev/null)" != node-3 ]; then
  echo "=== unshare --uts does not work here: NCCL_HOSTID fallback (one hostname in the log)"
  export FAKE_SSH_NO_UNSHARE=1
fi
env | grep -E '^(NCCL_|UCX_|OMPI_MCA|CUDA_DEVICE_ORDER)' | sort > "$R/environment.txt"

run() {  # NAME NODES GPUS_PER_NODE "ALL_REDUCE_ARGS" [VAR=value ...]; RUNS=<regex> picks runs by name
  local name=$1 nodes=$2 gpn=$3 args=$4
  shift 4
  if ! [[ $name =~ ${RUNS:-.} ]]; then return; fi
  if [ $((SECONDS - START)) -gt "$DEADLINE" ]; then echo "=== $name: skipped (deadline)"; return; fi
  local hf="$R/$name.hosts" t0=$SECONDS
  : >"$hf"
  for i in $(seq 0 $((nodes - 1))); do echo "node-$i" >>"$hf"; done
  echo "env NODES=$nodes GPUS_PER_NODE=$gpn ALL_REDUCE_ARGS='$args' ALL_REDUCE_BIN=$W/build/all_reduce_perf HOSTFILE=$hf MPI_HOME=$MPI_PREFIX SSH_WAIT_SECONDS=30 SSH_POLL_SECONDS=1 POD_IFNAME=$IF LAUNCHER_NCCL_LOG=full $* bash nccl-launcher.sh" >"$R/$name.cmd"
  env NODES="$nodes" GPUS_PER_NODE="$gpn" ALL_REDUCE_ARGS="$args" ALL_REDUCE_BIN="$W/build/all_reduce_perf" \
    HOSTFILE="$hf" MPI_HOME="$MPI_PREFIX" SSH_WAIT_SECONDS=30 SSH_POLL_SECONDS=1 POD_IFNAME="$IF" \
    LAUNCHER_NCCL_LOG=full "$@" timeout -k 10 150 bash "$D/nccl-launcher.sh" >"$R/$name.log" 2>&1
  local rc=$?
  bash "$D/nccl-launcher.sh" --condense-nccl-log <"$R/$name.log" >"$R/$name.condensed.log"
  echo "=== $name: rc=$rc $((SECONDS - t0)) s, $(wc -c <"$R/$name.log") bytes raw, $(wc -c <"$R/$name.condensed.log") condensed; $(grep -c 'NCCL INFO' "$R/$name.log") INFO lines; $(grep -m1 -o 'Using network [A-Za-z0-9_]*' "$R/$name.log"); $(grep -m1 -o 'nNodes [0-9]* localRanks [0-9]*' "$R/$name.log")"
  grep -E '^\[1,0\]<stdout>: +(1048576|1073741824|67108864|8589934592) ' "$R/$name.log" | head -2
  [ "$rc" -eq 0 ] || tail -15 "$R/$name.log"
}

# a) a real NET/Socket fallback across two fake hosts: 1 GPU each, then 2 GPUs each
run socket-2x1 2 1 "-b 8 -e 1G -f 2 -g 1 -n 5 -w 1" FAKE_SSH_SPREAD_GPUS=${SPREAD:-2}
# c) one node, 2 GPUs: P2P/NVLink, no inter-node channel
run single-1x2 1 2 "-b 8 -e 8G -f 2 -g 1"
run socket-2x2 2 2 "-b 8 -e 64M -f 2 -g 1 -n 5 -w 1"
# b) log size against rank count
for n in 4 8 16; do run scale-${n}x1 "$n" 1 "-b 8 -e 1M -f 2 -g 1 -n 2 -w 1" FAKE_SSH_SPREAD_GPUS=${SPREAD:-2}; done
for n in 4 8; do run scale-${n}x2 "$n" 2 "-b 8 -e 1M -f 2 -g 1 -n 2 -w 1"; done
run scale-32x1 32 1 "-b 8 -e 1M -f 2 -g 1 -n 2 -w 1" FAKE_SSH_SPREAD_GPUS=${SPREAD:-2}
run scale-16x2 16 2 "-b 8 -e 1M -f 2 -g 1 -n 2 -w 1"

# per-rank bytes of NCCL INFO output, by run (the tag [1,RANK] names the rank)
python3 - "$R" <<'PY'
import collections, pathlib, re, sys
tag = re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:")
print(f"{'run':<14}{'ranks':>6}{'raw B':>10}{'INFO B/rank':>12}{'min':>8}{'max':>8}{'condensed B':>12}")
for log in sorted(pathlib.Path(sys.argv[1]).glob("*.log")):
    if log.name.endswith((".condensed.log", "build.log")):
        continue
    per = collections.Counter()
    for line in log.read_text(errors="replace").splitlines(keepends=True):
        m = tag.match(line)
        if m and " NCCL INFO " in line:
            per[int(m.group(1))] += len(line.encode())
    cond = log.with_name(log.name.replace(".log", ".condensed.log"))
    if per:
        v = list(per.values())
        print(f"{log.stem:<14}{len(per):>6}{log.stat().st_size:>10}{sum(v)/len(v):>12.0f}{min(v):>8}{max(v):>8}"
              f"{cond.stat().st_size if cond.exists() else 0:>12}")
PY
tar -C "$W" -czf "$OUT/recordings.tar.gz" rec
echo "=== done in $((SECONDS - START)) s; $(du -h "$OUT/recordings.tar.gz" | cut -f1)"
