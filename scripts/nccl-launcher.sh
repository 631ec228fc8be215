#!/usr/bin/env bash
# The fabric test's launcher: runs in the `mpimaster` pod of the Volcano job (mounted from the
# `nccl-launcher` ConfigMap). Reads the worker hosts that Volcano's svc plugin writes, waits
# (bounded) until every worker's sshd answers, then runs all_reduce_perf under mpirun with one rank
# per GPU. Its stdout is the log that `python -m verify collect` parses. Exit status: mpirun's, or
# 2 for a missing input, 3 for a wrong number of workers, 4 for a worker whose sshd never answered.
#
# The log keeps what the verdict reads and stays small at any scale. Every rank prints NCCL's INFO
# lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET): 6-18 KB per rank measured, ~7-11 MB at 64
# nodes x 8 GPUs extrapolated (docs/fabric-verdict.md), near the size at which kubelet rotates a
# container log (upstream 10 MiB; AKS containerLogMaxSizeMB, 50 by default); the API then returns
# only the newest file, without the header or the transport lines. So mpirun's output
# goes through condense_nccl_log below: nccl-tests' own lines, NCCL WARN lines and everything
# else pass unchanged; of NCCL's INFO lines only those that say which transport was used are kept
# (network, HCAs, GPUDirect RDMA, every inter-node connection), each distinct one once per host.
# `nccl-launcher.sh --condense-nccl-log < raw.log` applies the same filter to a saved log.
#
# Inputs (environment; the job sets them from the SKU catalog and the stack configuration):
#   NODES             workers expected (the pool's node count)
#   GPUS_PER_NODE     ranks per worker (the catalog's GPUs per VM)
#   ALL_REDUCE_ARGS   arguments of all_reduce_perf, e.g. "-b 8 -e 16G -f 2 -g 1"
#   ALL_REDUCE_BIN    default /opt/nccl_tests/build/all_reduce_perf (the nccl-tests image's path)
#   HOSTFILE          default /etc/volcano/mpiworker.host (Volcano svc plugin, one host a line)
#   MPI_HOME          default /opt/hpcx/ompi (HPC-X OpenMPI); passed as --prefix so that the remote
#                     orted finds its binaries and libraries over a non-login ssh shell
#   MPI_MAP_BIND      how mpirun maps and binds the ranks of a node (components/nccl_settings.py
#                     binding(): Azure's core binding on ND v5); default
#                     "-npernode $GPUS_PER_NODE --bind-to none"
#   SSH_WAIT_SECONDS  how long to wait for all workers' sshd together (default 600)
#   SSH_POLL_SECONDS  pause between attempts (default 5)
#   POD_IFNAME        the pod network's interface, for mpirun's own channel (default eth0)
#   LAUNCHER_NCCL_LOG condensed (default) or full: full keeps every NCCL INFO line (a short
#                     debugging run, or a pool whose containerLogMaxSizeMB was raised)
# Every NCCL_*, UCX_* and SHARP_* variable of this container, and CUDA_DEVICE_ORDER, PATH and
# LD_LIBRARY_PATH, is forwarded to the ranks with -x: the job spec is the one place they are set.
set -euo pipefail

# The filter, in awk (every image has one). A line is NCCL's when it holds
# "HOST:PID:TID [DEV] NCCL INFO " (NVIDIA/nccl src/debug.cc, 2.18-2.29), after mpirun's
# "[JOB,RANK]<stdout>:" tag. Kept: the INFO messages matched by KEEP, once per host and message;
# every connection line ("[send] via NET/IB/0/GDRDMA", "[receive] via NET/Socket/0", CollNet's
# "via COLLNET/..."), since each is its own channel. Dropped: the rest of INFO (topology, tuning,
# intra-node P2P/SHM channels, allocations). The last line counts both.
condense_nccl_log() {
  awk '
    BEGIN {
      KEEP = "^(NCCL version |Using network |NET/[^ ]+ : Using|NET/IB : No device found|NET/Plugin|" \
             "comm 0x[0-9a-f]+ rank [0-9]+ nRanks [0-9]+ nNodes )|GPU Direct RDMA"
      CONNECTION = "\\[(send|receive)\\] via "
    }
    {
      at = index($0, " NCCL INFO ")
      if (at == 0) { print; fflush(); next }
      message = substr($0, at + 11)
      head = substr($0, 1, at)
      host = head
      if (match(head, /[^ :\]>]+:[0-9]+:[0-9]+ \[[0-9]+\] $/)) host = substr(head, RSTART)
      sub(/:.*/, "", host)
      if (message ~ CONNECTION) { kept++; print; fflush(); next }
      if (message ~ KEEP && !((host, message) in seen)) { seen[host, message] = 1; kept++; print; fflush(); next }
      dropped++
    }
    END { printf "[nccl-launcher] NCCL INFO lines: %d kept, %d dropped (LAUNCHER_NCCL_LOG=full keeps all)\n", kept, dropped }
  '
}
if [ "${1:-}" = "--condense-nccl-log" ]; then
  condense_nccl_log
  exit
fi

log() { echo "[nccl-launcher $(date -u +%H:%M:%S)] $*" >&2; }
die() { local code=$1; shift; log "error: $*"; exit "$code"; }

[ -n "${NODES:-}" ] || die 2 "NODES is not set"
[ -n "${GPUS_PER_NODE:-}" ] || die 2 "GPUS_PER_NODE is not set"
[ -n "${ALL_REDUCE_ARGS:-}" ] || die 2 "ALL_REDUCE_ARGS is not set"
hostfile_in="${HOSTFILE:-/etc/volcano/mpiworker.host}"
bench="${ALL_REDUCE_BIN:-/opt/nccl_tests/build/all_reduce_perf}"
mpi_home="${MPI_HOME:-/opt/hpcx/ompi}"
wait_s="${SSH_WAIT_SECONDS:-600}"
poll_s="${SSH_POLL_SECONDS:-5}"
pod_ifname="${POD_IFNAME:-eth0}"
nccl_log="${LAUNCHER_NCCL_LOG:-condensed}"
case "$nccl_log" in condensed | full) ;; *) die 2 "LAUNCHER_NCCL_LOG is '$nccl_log'; expected condensed or full" ;; esac

# 1. The workers, as Volcano's svc plugin names them (<job>-mpiworker-<i>.<job>).
[ -r "$hostfile_in" ] || die 2 "no hostfile at $hostfile_in (does the job have the svc plugin?)"
mapfile -t hosts < <(grep -v '^[[:space:]]*$' "$hostfile_in")
if [ "${#hosts[@]}" -ne "$NODES" ]; then
  die 3 "expected $NODES workers in $hostfile_in, found ${#hosts[@]}: ${hosts[*]:-none}"
fi

# 2. Wait until each worker's sshd answers (the ssh plugin's key is mounted at /root/.ssh).
start=$SECONDS
for h in "${hosts[@]}"; do
  until ssh -o BatchMode=yes -o ConnectTimeout=5 "$h" true >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$wait_s" ]; then
      die 4 "worker $h: sshd did not answer within ${wait_s}s (is the pod running? kubectl describe pod)"
    fi
    sleep "$poll_s"
  done
  log "worker $h: sshd answers"
done

# 3. An OpenMPI hostfile with one slot per GPU, so -npernode never oversubscribes.
hostfile=$(mktemp)
for h in "${hosts[@]}"; do echo "$h slots=$GPUS_PER_NODE"; done >"$hostfile"

np=$((NODES * GPUS_PER_NODE))
forward=()
while IFS= read -r var; do
  forward+=(-x "$var")
done < <(compgen -e | grep -E '^(NCCL_|UCX_|SHARP_)' | sort)
for var in CUDA_DEVICE_ORDER PATH LD_LIBRARY_PATH; do
  if [ -n "${!var:-}" ]; then forward+=(-x "$var"); fi
done
read -r -a bench_args <<<"$ALL_REDUCE_ARGS"
read -r -a map_bind <<<"${MPI_MAP_BIND:--npernode $GPUS_PER_NODE --bind-to none}"

cmd=(mpirun --prefix "$mpi_home" --allow-run-as-root
  -np "$np" --hostfile "$hostfile"
  # "[JOB,RANK]<stdout>:" before every line: interleaved ranks stay attributable
  --tag-output
  # ranks per node and their CPU binding, per ND generation (MPI_MAP_BIND above)
  "${map_bind[@]}"
  # mpirun starts every orted itself, so workers need not ssh to each other.
  -mca plm_rsh_no_tree_spawn 1
  # mpirun's out-of-band channel on the pod network. MPI's own messages go through UCX (HPC-X's
  # default PML), which UCX_NET_DEVICES=eth0 keeps there; NCCL alone uses InfiniBand.
  -mca oob_tcp_if_include "$pod_ifname"
  # HPC-X's HCOLL would probe the HCAs for MPI collectives that this test does not need.
  -mca coll ^hcoll
  "${forward[@]}"
  "$bench" "${bench_args[@]}")
log "nodes=$NODES gpus_per_node=$GPUS_PER_NODE np=$np map/bind: ${map_bind[*]}"
log "running: ${cmd[*]}"
set +e
if [ "$nccl_log" = full ]; then
  "${cmd[@]}"
  rc=$?
else
  "${cmd[@]}" | condense_nccl_log
  statuses=("${PIPESTATUS[@]}")
  rc=${statuses[0]}
  if [ "$rc" -eq 0 ] && [ "${statuses[1]}" -ne 0 ]; then rc=${statuses[1]}; fi
fi
set -e
log "mpirun exited with status $rc"
exit "$rc"
