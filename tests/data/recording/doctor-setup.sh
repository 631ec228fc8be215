# Sourced by record-doctor-logs.sh and record-doctor-killed.sh (set W, OUT, NCCL_TESTS_SRC first): builds
# all_reduce_perf against the pip NCCL, puts the fake-ssh shim on PATH, exports the job's NCCL and MPI
# environment and the launcher's patterns, and names four fake hosts node-0..3 in $W/hosts4.
# shellcheck shell=bash
ROOT=$(pwd)
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
# the job's NCCL environment (components/fabric/nccl_settings.py), this machine's interface
export NCCL_IB_DISABLE=0 NCCL_NET_GDR_LEVEL=SYS NCCL_SOCKET_IFNAME=$IF NCCL_NET_PLUGIN=none NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,NET CUDA_DEVICE_ORDER=PCI_BUS_ID UCX_TLS=tcp UCX_NET_DEVICES=$IF
export NCCL_NVLS_ENABLE=0  # the machine's rule
export OMPI_MCA_plm=rsh OMPI_MCA_plm_rsh_agent="$W/bin/ssh" OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self \
  OMPI_MCA_btl_tcp_if_include=$IF
# the patterns components/fabric/nccl_job.py hands the launcher (verify/launcher_env.py)
while IFS= read -r -d '' kv; do export "$kv"; done < <(cd "$ROOT" && python3 -m verify.launcher_env)
export PATH="$W/bin:$PATH" LD_LIBRARY_PATH="$NCCL_DIR/lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}"
for net in 203.0.113 198.51.100 198.18.0; do hostname -I | grep -q "$net\." || break; done
for i in 0 1 2 3; do echo "$net.$((i + 1)) node-$i" >>/etc/hosts; done
printf 'node-%s\n' 0 1 2 3 >"$W/hosts4"
