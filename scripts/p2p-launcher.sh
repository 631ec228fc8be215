#!/usr/bin/env bash
# The CPU-only fabric test's launcher (HB / HX sizes): runs in the `mpimaster` pod of the Volcano job
# (mounted from the `<job>-launcher` ConfigMap). Reads the two worker hosts that Volcano's svc plugin
# writes, waits (bounded) until both workers' sshd answer, then runs OSU `osu_bw` and `osu_latency`
# with one rank on each worker, so every byte crosses the InfiniBand link between the two nodes.
# The binaries are on the workers, not here: each worker's `osu-build` initContainer
# (scripts/build-osu.sh) put them into OSU_DIR on an emptyDir that its worker container mounts, and
# the launcher checks over ssh that both workers have them before running anything.
# Its stdout is the log that `python -m verify` parses (verify/osu.py). Exit status: the first
# failing mpirun's, or 2 for a missing input (OSU_DIR unset, no hostfile, no osu_bw/osu_latency in
# OSU_DIR on a worker), 3 for a wrong number of workers, 4 for a worker whose sshd never answered.
#
# Inputs (environment; the job sets every one, components/fabric/p2p_job.py and components/fabric/mpi_job.py: no
# defaults here, so each value has one source; a missing one stops it with one line, exit 2):
#   OSU_DIR           directory of osu_bw / osu_latency on the workers (the job: /opt/osu/bin)
#   OSU_BW_ARGS       extra arguments of osu_bw (e.g. "-m 1:8388608"); may be empty
#   OSU_LATENCY_ARGS  extra arguments of osu_latency; may be empty
#   HOSTFILE          the worker hosts, one a line (Volcano's svc plugin writes it)
#   MPI_HOME          Open MPI; passed as --prefix for the remote orted
#   SSH_WAIT_SECONDS  how long to wait for both workers' sshd together
#   SSH_POLL_SECONDS  pause between attempts
#   POD_IFNAME        the pod network's interface, for mpirun's own channel
# Every UCX_* variable of this container, PATH and LD_LIBRARY_PATH are forwarded with -x.
set -euo pipefail

log() { echo "[p2p-launcher $(date -u +%H:%M:%S)] $*" >&2; }
die() { local code=$1; shift; log "error: $*"; exit "$code"; }

for v in OSU_DIR HOSTFILE MPI_HOME SSH_WAIT_SECONDS SSH_POLL_SECONDS POD_IFNAME; do
  [ -n "${!v:-}" ] || die 2 "$v is not set (the job sets it: components/fabric/p2p_job.py, components/fabric/mpi_job.py)"
done
for v in OSU_BW_ARGS OSU_LATENCY_ARGS; do  # may be empty, but set
  [ -n "${!v+set}" ] || die 2 "$v is not set (the job sets it, empty or not: components/fabric/p2p_job.py)"
done
hostfile_in=$HOSTFILE
mpi_home=$MPI_HOME
wait_s=$SSH_WAIT_SECONDS

[ -r "$hostfile_in" ] || die 2 "no hostfile at $hostfile_in (does the job have the svc plugin?)"
mapfile -t hosts < <(grep -v '^[[:space:]]*$' "$hostfile_in")
[ "${#hosts[@]}" -eq 2 ] || die 3 "expected 2 workers in $hostfile_in, found ${#hosts[@]}: ${hosts[*]:-none}"

start=$SECONDS
for h in "${hosts[@]}"; do
  until ssh -o BatchMode=yes -o ConnectTimeout=5 "$h" true >/dev/null 2>&1; do
    [ $((SECONDS - start)) -lt "$wait_s" ] || die 4 "worker $h: sshd did not answer within ${wait_s}s"
    sleep "$SSH_POLL_SECONDS"
  done
  log "worker $h: sshd answers"
  for b in osu_bw osu_latency; do
    # shellcheck disable=SC2029  # OSU_DIR is expanded here on purpose: the same path on every worker
    ssh -o BatchMode=yes -o ConnectTimeout=5 "$h" test -x "$OSU_DIR/$b" ||
      die 2 "worker $h: no executable $OSU_DIR/$b (see its osu-build initContainer's log)"
  done
done
log "both workers have osu_bw and osu_latency in $OSU_DIR"

forward=()
while IFS= read -r var; do forward+=(-x "$var"); done < <(compgen -e | grep -E '^UCX_' | sort)
for var in PATH LD_LIBRARY_PATH; do if [ -n "${!var:-}" ]; then forward+=(-x "$var"); fi; done

run() {
  local bench=$1; shift
  local cmd=(mpirun --prefix "$mpi_home" --allow-run-as-root
    -np 2 -npernode 1 --host "${hosts[0]}:1,${hosts[1]}:1"
    -mca plm_rsh_no_tree_spawn 1
    # the launch itself on the pod network; the measured traffic goes through UCX (pml ucx) over RDMA
    -mca oob_tcp_if_include "$POD_IFNAME"
    -mca pml ucx -mca coll ^hcoll
    "${forward[@]}"
    "$OSU_DIR/$bench" "$@")
  log "running: ${cmd[*]}"
  "${cmd[@]}"
}

read -r -a bw_args <<<"$OSU_BW_ARGS"
read -r -a lat_args <<<"$OSU_LATENCY_ARGS"
rc=0
run osu_bw "${bw_args[@]}" || rc=$?
[ "$rc" -ne 0 ] || run osu_latency "${lat_args[@]}" || rc=$?
log "done with status $rc"
exit "$rc"
