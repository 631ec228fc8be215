#!/usr/bin/env bash
# The fabric test's launcher: runs in the `mpimaster` pod of the Volcano job (mounted from the
# `nccl-launcher` ConfigMap). Reads the worker hosts that Volcano's svc plugin writes, waits
# (bounded) until every worker's sshd answers, then runs all_reduce_perf under mpirun with one rank
# per GPU. Then, when asked to, the fabric doctor: per-node checks, pairwise 2-node all-reduces and
# per-HCA ib_write_bw that let `python -m verify` name the node or HCA behind a slow fabric.
# Its stdout is the log that `python -m verify collect` parses; sections start with one marker line,
# `# aks-infiniband <section> key=value ...` (docs/fabric-doctor.md lists them). Exit status: the
# all-nodes mpirun's (the doctor never changes it), or 2 for a missing input, 3 for a wrong number
# of workers, 4 for a worker whose sshd never answered.
#
# The log keeps what the verdict reads and stays small at any scale. Every rank prints NCCL's INFO
# lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET): 6-18 KB per rank measured, ~7-11 MB at 64
# nodes x 8 GPUs extrapolated (docs/fabric-test.md), near the size at which kubelet rotates a
# container log (upstream 10 MiB; AKS containerLogMaxSizeMB, 50 by default); the API then returns
# only the newest file, without the header or the transport lines. So mpirun's output goes through
# condense_nccl_log below: of NCCL's INFO lines only those verify reads are kept, each distinct one
# once per host, and every inter-node connection (the doctor's runs: once per host and path).
# `nccl-launcher.sh --condense-nccl-log < raw.log` applies the same filter to a saved log (with the
# LOG_*_ERE values below in the environment).
#
# This script holds no parsing or transport rule and no value of its own: every pattern it matches,
# every figure it compares and every setting is computed by Python at deploy time (verify/launcher_env.py,
# components/fabric/nccl_job.py, components/fabric/mpi_job.py) and handed over below; the awk programs here know no
# log format. A missing input stops it with one line (exit 2). (The test image need not have python3:
# docs/fabric-doctor.md.)
#
# Inputs (environment; the job sets every one, from the SKU catalog, verify/ and the stack configuration):
#   NODES             workers expected (the pool's node count)
#   GPUS_PER_NODE     ranks per worker (the catalog's GPUs per VM)
#   ALL_REDUCE_ARGS   arguments of all_reduce_perf, e.g. "-b 8 -e 16G -f 2 -g 1"
#   ALL_REDUCE_BIN    all_reduce_perf's path in the image (components/fabric/nccl_job.py)
#   HOSTFILE          the worker hosts, one a line (Volcano's svc plugin writes it: components/fabric/mpi_job.py)
#   MPI_HOME          HPC-X OpenMPI; passed as --prefix so that the remote orted finds its binaries and
#                     libraries over a non-login ssh shell
#   MPI_MAP_BIND      how mpirun maps and binds the ranks of a node (components/fabric/nccl_settings.py
#                     binding(): Azure's core binding on ND v5)
#   SSH_WAIT_SECONDS  how long to wait for all workers' sshd together (components/fabric/mpi_job.py)
#   SSH_POLL_SECONDS  pause between attempts
#   POD_IFNAME        the pod network's interface, for mpirun's own channel
#   LAUNCHER_NCCL_LOG condensed or full: full keeps every NCCL INFO line, the doctor's runs' too (a short
#                     debugging run, or a pool whose containerLogMaxSizeMB was raised)
#   LOG_TAG_ERE, LOG_ROW_ERE, LOG_NCCL_LINE_ERE, LOG_NCCL_INFO_ERE, LOG_NCCL_HOST_ERE, LOG_NCCL_KEEP_ERE,
#   LOG_NCCL_CONNECTION_ERE  the filter's patterns (verify.launcher_env.log_filter_env): mpirun's tag, an
#                     nccl-tests row's first columns, an NCCL line, an INFO line, its host, the INFO
#                     messages kept once per host, a connection line
#   LOG_RESULT_ROW_ERE, LOG_RESULT_OK_ERE, LOG_RESULT_FIELDS  a result row, one with no wrong
#                     element, and the fields of its size and busbw (verify.launcher_env.result_env)
# The doctor (fabricTest.doctor; components/fabric/nccl_job.py computes every value from the catalog, verify/
# and the configuration, in every mode: a re-test sets the doctor's values on the day-0 job's spec):
#   DOCTOR                 auto | always | never: the mode, for the doctor marker
#   DOCTOR_RUN             yes | no: decided before the pod started (the mode, the node count), with
#                          DOCTOR_RUN_REASON; by-result (auto on two or more nodes): it runs only when the
#                          all-nodes run is not PASS by what this script can read of it cheaply: it failed
#                          or printed no result at its largest size; a DOCTOR_RUN_IF rule holds; it is
#                          below DOCTOR_PASS_BUSBW_GBPS; or no pass line is known
#   DOCTOR_RUN_IF          the all-nodes verdict's transport rules (verify.launcher_env.transport_rules):
#                          one a line, "reason<TAB>ERE" (a line matches) or "reason<TAB>ERE<TAB>ITEM<TAB>MIN"
#                          (a line matches with fewer than MIN matches of ITEM); the first that holds
#   DOCTOR_SECONDS         the doctor's time budget (fabricTest.doctorMinutes); each step gets what is left,
#                          then is skipped
#   DOCTOR_PASS_BUSBW_GBPS the busbw at the largest size at and above which the all-nodes verdict
#                          can be PASS (verify.verdict.pass_line_gbps); empty: unknown
#   DOCTOR_PAIR_ROUNDS     rounds of node-index pairs, "0-3 1-2;0-2 1-3" (verify.doctor.plan_pairs); may be empty
#   DOCTOR_ALLREDUCE_PAIR  the node-index pair that the all-nodes run is, "0-1" on two nodes; empty: none
#   DOCTOR_PAIR_ARGS       all_reduce_perf arguments of a pair run
#   DOCTOR_NODE_ARGS       all_reduce_perf arguments of a node's single-node run (Azure's gate size)
#   DOCTOR_NODE_MAP_BIND   how mpirun maps and binds the ranks of that run
#   DOCTOR_NODE_ENV        "NAME=VALUE ..." (values without spaces): the job's settings that run sets
#                          otherwise (-x NAME=VALUE instead of forwarding NAME); may be empty
#   DOCTOR_PAIR_SLOW_BELOW_GBPS  a pair below this (or failed) gets per-HCA ib_write_bw: where a 2-node
#                          verdict starts to PASS (verify.doctor_checks.Expectations.pair_slow_below_gbps); empty: none
#   DOCTOR_HCA_PAIRS       at most this many slow pairs get per-HCA ib_write_bw
#   DOCTOR_PARALLEL        at most this many nodes' checks, or pairs, at a time: each is an mpirun in this pod
#   PERFTEST_MEMORY        cuda | host: the memory ib_write_bw moves, that of the size's gate (catalog
#                          LinkExpectation.gate_memory): cuda adds --use_cuda=<the HCA's index>
#   PERFTEST_ARGS          ib_write_bw arguments: Azure's health check's for that memory (components/fabric/nccl_job.py)
#   PERFTEST_START_SECONDS pause between starting an ib_write_bw server and its client
#   PERFTEST_SECONDS       the most one HCA's ib_write_bw may take
#   HCA_PORT_ERE, HCA_DEVICE_PREFIX_ERE, HCA_DEVICE_ERE, HCA_FIELD_ERE, HCA_LINK_LAYER_ERE, HCA_INFINIBAND_ERE
#                          how a node's HCA listing names its InfiniBand devices (verify.launcher_env
#                          hca_listing_env: verify/hca.py's rule)
# Every NCCL_*, UCX_* and SHARP_* variable of this container, and CUDA_DEVICE_ORDER, PATH and
# LD_LIBRARY_PATH, is forwarded to the ranks with -x: the job spec is the one place they are set.
set -euo pipefail

# The filter, in awk (every image has one), with verify's patterns (LOG_*_ERE). An NCCL INFO line
# is kept when its message matches LOG_NCCL_KEEP_ERE, once per host and message; a connection line
# (LOG_NCCL_CONNECTION_ERE) always, or with the argument `once` only the first of each per host and path;
# the rest of INFO is dropped; every other line passes. An NCCL line glued onto a row's first columns
# (LOG_ROW_ERE; NCCL connects lazily since 2.22) is filtered as any, and the columns are printed with
# the row's rest, the next other line of that rank. The last line counts what was kept and dropped.
# (named LOG_*, not NCCL_*: every NCCL_* variable is forwarded to the ranks)
filter_patterns=(LOG_TAG_ERE LOG_ROW_ERE LOG_NCCL_LINE_ERE LOG_NCCL_INFO_ERE LOG_NCCL_HOST_ERE LOG_NCCL_KEEP_ERE
  LOG_NCCL_CONNECTION_ERE)
require() {
  local v
  for v in "$@"; do
    [ -n "${!v:-}" ] || die 2 "$v is not set (the job sets it: components/fabric/nccl_job.py)"
  done
}
# Inputs that may be empty (an empty value means something: no pass line, no pair rounds), but are set.
require_set() {
  local v
  for v in "$@"; do
    [ -n "${!v+set}" ] || die 2 "$v is not set (the job sets it, empty or not: components/fabric/nccl_job.py)"
  done
}
condense_nccl_log() {
  awk -v once="${1:-}" '
    BEGIN {
      TAG = ENVIRON["LOG_TAG_ERE"]; ROW = ENVIRON["LOG_ROW_ERE"]; NCCL = ENVIRON["LOG_NCCL_LINE_ERE"]
      INFO = ENVIRON["LOG_NCCL_INFO_ERE"]; HOST = ENVIRON["LOG_NCCL_HOST_ERE"]; KEEP = ENVIRON["LOG_NCCL_KEEP_ERE"]
      CONNECTION = ENVIRON["LOG_NCCL_CONNECTION_ERE"]
    }
    function out(text) { print text; fflush() }
    {
      tag = ""; line = $0
      if (match(line, TAG)) { tag = substr(line, 1, RLENGTH); line = substr(line, RLENGTH + 1) }
      rank = tag; sub(/[ \t]+$/, "", rank)
      if (match(line, ROW)) {
        n = RLENGTH
        if (match(substr(line, n + 1), NCCL)) { held[rank] = tag substr(line, 1, n); line = substr(line, n + 1) }
      }
      if (!match(line, NCCL)) {
        if ((rank in held) && line ~ /[^ \t]/) { out(held[rank] " " line); delete held[rank] } else out($0)
        next
      }
      if (!match(line, INFO)) { out(tag line); next }
      message = substr(line, RSTART + RLENGTH)
      host = substr(line, RSTART, RLENGTH)
      if (match(host, HOST)) host = substr(host, RSTART, RLENGTH)
      if (match(message, CONNECTION)) {
        path = substr(message, RSTART)
        if (once == "once" && ((host, path) in seen)) { dropped++; next }
        seen[host, path] = 1; kept++; out(tag line); next
      }
      if (message ~ KEEP && !((host, message) in seen)) { seen[host, message] = 1; kept++; out(tag line); next }
      dropped++
    }
    END {
      for (r in held) print held[r]
      printf "[nccl-launcher] NCCL INFO lines: %d kept, %d dropped (LAUNCHER_NCCL_LOG=full keeps all)\n", kept, dropped
    }
  '
}
# (the time by bash's own strftime, in UTC as `date -u`: no process per line)
log() { local now; TZ=UTC0 printf -v now '%(%H:%M:%S)T' -1; echo "[nccl-launcher $now] $*" >&2; }
die() { local code=$1; shift; log "error: $*"; exit "$code"; }
if [ "${1:-}" = "--condense-nccl-log" ]; then
  require "${filter_patterns[@]}"
  condense_nccl_log
  exit
fi

marker() { echo "# aks-infiniband $*"; }

require NODES GPUS_PER_NODE ALL_REDUCE_ARGS ALL_REDUCE_BIN HOSTFILE MPI_HOME MPI_MAP_BIND SSH_WAIT_SECONDS \
  SSH_POLL_SECONDS POD_IFNAME LAUNCHER_NCCL_LOG "${filter_patterns[@]}" LOG_RESULT_ROW_ERE LOG_RESULT_OK_ERE \
  LOG_RESULT_FIELDS DOCTOR DOCTOR_RUN DOCTOR_SECONDS
require_set DOCTOR_RUN_REASON DOCTOR_PASS_BUSBW_GBPS
hostfile_in=$HOSTFILE
bench=$ALL_REDUCE_BIN
mpi_home=$MPI_HOME
wait_s=$SSH_WAIT_SECONDS
poll_s=$SSH_POLL_SECONDS
pod_ifname=$POD_IFNAME
nccl_log=$LAUNCHER_NCCL_LOG
case "$nccl_log" in condensed | full) ;; *) die 2 "LAUNCHER_NCCL_LOG is '$nccl_log'; expected condensed or full" ;; esac
# mpirun's output on its way to the log: condensed (`once`: the doctor's runs), or all of it
nccl_log_filter() {
  if [ "$nccl_log" = full ]; then cat; else condense_nccl_log "$@"; fi
}
doctor=$DOCTOR
case "$doctor" in auto | always | never) ;; *) die 2 "DOCTOR must be auto, always or never, got '$doctor'" ;; esac
case "$DOCTOR_RUN" in
  yes | no | by-result) ;;
  *) die 2 "DOCTOR_RUN must be yes, no or by-result, got '$DOCTOR_RUN'" ;;
esac
if [ "$DOCTOR_RUN" != no ]; then  # the doctor's plan and figures, which it reads only when it may run
  require DOCTOR_RUN_IF DOCTOR_PAIR_ARGS DOCTOR_NODE_ARGS DOCTOR_NODE_MAP_BIND DOCTOR_HCA_PAIRS DOCTOR_PARALLEL PERFTEST_MEMORY \
    PERFTEST_ARGS PERFTEST_START_SECONDS PERFTEST_SECONDS HCA_PORT_ERE HCA_DEVICE_PREFIX_ERE HCA_DEVICE_ERE \
    HCA_FIELD_ERE HCA_LINK_LAYER_ERE HCA_INFINIBAND_ERE
  require_set DOCTOR_PAIR_ROUNDS DOCTOR_ALLREDUCE_PAIR DOCTOR_NODE_ENV DOCTOR_PAIR_SLOW_BELOW_GBPS
fi

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
work=$(mktemp -d)
hostfile="$work/hostfile"
for h in "${hosts[@]}"; do echo "$h slots=$GPUS_PER_NODE"; done >"$hostfile"

np=$((NODES * GPUS_PER_NODE))
forward=()
while IFS= read -r var; do forward+=(-x "$var"); done < <(compgen -e | grep -E '^(NCCL_|UCX_|SHARP_)' | sort)
for var in CUDA_DEVICE_ORDER PATH LD_LIBRARY_PATH; do
  if [ -n "${!var:-}" ]; then forward+=(-x "$var"); fi
done
read -r -a bench_args <<<"$ALL_REDUCE_ARGS"
read -r -a map_bind <<<"$MPI_MAP_BIND"
# The doctor's single-node all-reduce as Azure's health check runs it (components/fabric/nccl_job.py says
# why): DOCTOR_NODE_MAP_BIND, and the job's settings but those DOCTOR_NODE_ENV sets instead.
node_map_bind=() node_forward=()
if [ "$DOCTOR_RUN" != no ]; then
  read -r -a node_map_bind <<<"$DOCTOR_NODE_MAP_BIND"
  read -r -a node_set <<<"$DOCTOR_NODE_ENV"
  for ((i = 1; i < ${#forward[@]}; i += 2)); do  # forward is -x NAME -x NAME ...
    keep=1
    for a in "${node_set[@]}"; do if [ "${a%%=*}" = "${forward[i]}" ]; then keep=; fi; done
    if [ -n "$keep" ]; then node_forward+=(-x "${forward[i]}"); fi
  done
  for a in "${node_set[@]}"; do node_forward+=(-x "$a"); done
fi

mpi=(mpirun --prefix "$mpi_home" --allow-run-as-root
  # "[JOB,RANK]<stdout>:" before every line: interleaved ranks stay attributable
  --tag-output
  # mpirun starts every orted itself, so workers need not ssh to each other.
  -mca plm_rsh_no_tree_spawn 1
  # mpirun's out-of-band channel on the pod network. MPI's own messages go through UCX (HPC-X's
  # default PML), which UCX_NET_DEVICES=eth0 keeps there; NCCL alone uses InfiniBand.
  -mca oob_tcp_if_include "$pod_ifname"
  # HPC-X's HCOLL would probe the HCAs for MPI collectives that this test does not need.
  -mca coll ^hcoll)
# ranks per node and their CPU binding, per ND generation (MPI_MAP_BIND above)
cmd=("${mpi[@]}" -np "$np" --hostfile "$hostfile" "${map_bind[@]}" "${forward[@]}" "$bench" "${bench_args[@]}")
log "nodes=$NODES gpus_per_node=$GPUS_PER_NODE np=$np map/bind: ${map_bind[*]}"
log "running: ${cmd[*]}"
marker "allreduce hosts=$(IFS=,; echo "${hosts[*]}")"
set +e
"${cmd[@]}" | nccl_log_filter | tee "$work/allreduce.out"
statuses=("${PIPESTATUS[@]}")
rc=${statuses[0]}
if [ "$rc" -eq 0 ] && [ "${statuses[1]}" -ne 0 ]; then rc=${statuses[1]}; fi
set -e
log "mpirun exited with status $rc"

# --- the fabric doctor ---------------------------------------------------------------------------
# busbw at the largest size of an all_reduce_perf output (the condensed form: whole rows), as
# verify.launcher_env.result_env says to read it; nothing when there is no row or a row has a wrong
# element.
largest_busbw() {
  condense_nccl_log <"$1" | awk '
    BEGIN { TAG = ENVIRON["LOG_TAG_ERE"]; ROW = ENVIRON["LOG_RESULT_ROW_ERE"]; OK = ENVIRON["LOG_RESULT_OK_ERE"]
            split(ENVIRON["LOG_RESULT_FIELDS"], f, " "); max = -1 }
    { sub(TAG, "") }
    $0 ~ ROW { if ($0 !~ OK) bad = 1; else if ($f[1] + 0 >= max) { max = $f[1] + 0; bw = $f[2] } }
    END { if (bw != "" && !bad) print bw }'
}
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
# Seconds a command may take: what is left of the budget, at most $1 when given, at least 1
# (`timeout 0` would mean no limit at all); in $limit (set, not printed: no subshell per step).
bound() {
  limit=$((deadline - SECONDS))
  if [ -n "${1:-}" ] && [ "$1" -lt "$limit" ]; then limit=$1; fi
  if [ "$limit" -lt 1 ]; then limit=1; fi
}
# A step runs only with time left in the budget; it is bounded by what is left.
have_time() {
  if [ $((deadline - SECONDS)) -gt 0 ]; then return 0; fi
  marker "doctor-skip step=$1 reason=time-budget budget_s=$budget"
  return 1
}
# A step's command, its output to $1 and its exit status to $1.status.
step() {
  local out=$1 status=0
  shift
  "$@" >"$out" 2>&1 || status=$?
  echo "$status" >"$out.status"
}
# Killed by `timeout` (status 124) where the limit was what was left of the budget: the step was cut
# short, which says nothing about the node.
timed_out() {
  local status=
  { read -r status <"$1.status" || true; } 2>/dev/null  # a line, from step or allreduce_on; none: not (yet) ended
  [ "$status" = 124 ]
}
# A step's section: its marker (`node host=a check=hca`, ...) and its output; or, when the budget cut
# it short, `doctor-skip step=<section> <its attributes> reason=time-budget`, so that no result is read
# from it (what it printed follows as evidence); or, for a step still running when the launcher is
# stopped (no status yet), the same with reason=killed.
section() {
  local out=$1 name=$2
  shift 2
  if [ ! -e "$out.status" ]; then
    marker "doctor-skip step=$name $* reason=killed"
  elif timed_out "$out"; then
    marker "doctor-skip step=$name $* reason=time-budget budget_s=$budget"
  else
    marker "$name $*"
  fi
  cat "$out" 2>/dev/null || true
}

# The doctor's steps run in the background (`started` records each); their sections reach the log
# in the order they were started, each as soon as it and those before it have ended, not when the
# whole round has: `settle N` prints them until at most N are left running. A SIGTERM (the pods'
# deadline, a deletion) prints every step not printed yet, what it had printed so far included,
# so that a round cut short still leaves its lines in the log.
pending=()  # "pid<TAB>output file<TAB>section name and attributes", oldest first
started() { pending+=("$1"$'\t'"$2"$'\t'"$3"); }
settle() {
  local keep=${1:-0} pid out what
  while [ "${#pending[@]}" -gt "$keep" ]; do
    IFS=$'\t' read -r pid out what <<<"${pending[0]}"
    wait "$pid" || true
    pending=("${pending[@]:1}")
    # shellcheck disable=SC2086  # "name key=value ...": values have no spaces
    section "$out" $what
  done
}
stopped() {
  local entry pid out what
  trap - TERM INT HUP
  for entry in "${pending[@]}"; do
    IFS=$'\t' read -r pid out what <<<"$entry"
    # shellcheck disable=SC2086
    section "$out" $what
  done
  log "stopped by a signal: the doctor's unfinished steps are in the log as doctor-skip reason=killed"
  exit 143
}
trap stopped TERM INT HUP

# The reason of the first DOCTOR_RUN_IF rule that a line of $1 satisfies (the all-nodes verdict's
# transport rules, verify.launcher_env.transport_rules), or nothing. The condensed lines keep every
# line these rules read. Not checked: the verdict's WARNs about an incomplete collected log (a silent
# host, a host without 'NET/IB : Using', another rank count), which this complete copy cannot show
# (docs/fabric-doctor.md).
run_if() {
  awk 'BEGIN {
         n = split(ENVIRON["DOCTOR_RUN_IF"], rules, "\n")
         for (i = 1; i <= n; i++) { split(rules[i], r, "\t"); reason[i] = r[1]; line[i] = r[2]; item[i] = r[3]; least[i] = r[4] + 0 }
       }
       { for (i = 1; i <= n; i++) if (!(i in hit) && $0 ~ line[i]) {
           copy = $0
           if (item[i] == "" || gsub(item[i], "&", copy) < least[i]) hit[i] = 1
         } }
       END { for (i = 1; i <= n; i++) if (i in hit) { print reason[i]; exit } }' "$1"
}

# all_reduce_perf over the given hosts (all their GPUs), output to a file, bounded by the budget:
# `node` (one host) as Azure's health check runs it (node_map_bind, node_forward), `pair` as the
# all-nodes run. NCCL_DEBUG as the all-nodes run's (the job's), so that each run's transport is
# evidence too; the filter keeps one connection line per host and path (condense_nccl_log once).
allreduce_on() {
  local kind=$1 out=$2 args=$3
  shift 3
  local spec=() h status=0 host_list
  for h in "$@"; do spec+=("$h:$GPUS_PER_NODE"); done
  printf -v host_list '%s,' "${spec[@]}"  # "host:slots,...," (its last comma dropped below)
  local -a a how=("${map_bind[@]}") env=("${forward[@]}")
  if [ "$kind" = node ]; then how=("${node_map_bind[@]}") env=("${node_forward[@]}"); fi
  read -r -a a <<<"$args"
  bound
  timeout "$limit" "${mpi[@]}" -np $(($# * GPUS_PER_NODE)) "${how[@]}" \
    --host "${host_list%,}" "${env[@]}" "$bench" "${a[@]}" 2>&1 | nccl_log_filter once >"$out" ||
    status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "# launcher: mpirun on $* exited with status $status (124: the doctor's time budget ran out)" >>"$out"
  fi
  echo "$status" >"$out.status"
}

# The node's HCA ports as ibstatus prints them, read from sysfs (no infiniband-diags needed) with the
# shell's own `read`: no process per file (8 HCAs x 4 files per node).
# shellcheck disable=SC2016  # expanded on the worker
hca_listing='for p in /sys/class/infiniband/*/ports/*; do [ -d "$p" ] || continue; d=${p%/ports/*}; d=${d##*/};
  printf "Infiniband device '"'"'%s'"'"' port %s status:\n" "$d" "${p##*/}";
  for f in state phys_state rate link_layer; do v=; { read -r v <"$p/$f"; } 2>/dev/null; printf "\t%s:\t %s\n" "$f" "$v"; done;
  done'

node_checks() {
  local i h at_once=$((3 * (DOCTOR_PARALLEL - 1)))
  have_time node-checks || return 0
  for i in "${!hosts[@]}"; do
    settle "$at_once"  # three steps a node
    h=${hosts[i]}
    bound
    step "$work/node.$i.hca" timeout "$limit" ssh -o BatchMode=yes "$h" "$hca_listing" &
    started $! "$work/node.$i.hca" "node host=$h check=hca"
    bound
    step "$work/node.$i.gpus" timeout "$limit" ssh -o BatchMode=yes "$h" nvidia-smi -L &
    started $! "$work/node.$i.gpus" "node host=$h check=gpus"
    allreduce_on node "$work/node.$i.allreduce" "$DOCTOR_NODE_ARGS" "$h" &
    started $! "$work/node.$i.allreduce" "node host=$h check=allreduce"
  done
  settle 0
}

slow_pairs=()  # "a b" index pairs, in the order found
note_if_slow() {
  local pair=$1 out=$2 busbw
  [ -n "$DOCTOR_PAIR_SLOW_BELOW_GBPS" ] || return 0
  if timed_out "$out"; then return 0; fi  # cut short by the budget: not a measurement
  busbw=$(largest_busbw "$out")
  if [ -z "$busbw" ] || below "$busbw" "$DOCTOR_PAIR_SLOW_BELOW_GBPS"; then slow_pairs+=("$pair"); fi
}

pair_rounds() {
  local r=0 round pair a b
  local -a rounds pairs
  IFS=';' read -r -a rounds <<<"$DOCTOR_PAIR_ROUNDS"
  for round in "${rounds[@]}"; do
    r=$((r + 1))
    have_time "pairs-round-$r" || continue
    read -r -a pairs <<<"$round"
    for pair in "${pairs[@]}"; do
      settle $((DOCTOR_PARALLEL - 1))
      a=${pair%-*} b=${pair#*-}
      allreduce_on pair "$work/pair.$r.$pair" "$DOCTOR_PAIR_ARGS" "${hosts[a]}" "${hosts[b]}" &
      started $! "$work/pair.$r.$pair" "pair round=$r hosts=${hosts[a]},${hosts[b]}"
    done
    settle 0  # a node is in one pair of a round: the next round waits for this one
    for pair in "${pairs[@]}"; do
      note_if_slow "${pair%-*} ${pair#*-}" "$work/pair.$r.$pair"
    done
  done
}

# ib_write_bw between two nodes over each of the first node's InfiniBand HCAs (the same device
# name on the other node): server on the second node, client on the first; one HCA at a time, each
# bounded (on the worker too, so that a server whose client never came does not linger). As Azure's
# health checks measure the gates it is judged by (Azure/azurehpc-health-checks@0e0a1ac): PERFTEST_ARGS
# (components/fabric/nccl_job.py has them and their source), with cuda `--use_cuda=$dev_idx`, dev_idx the HCA's
# index among the node's InfiniBand HCAs in name order (ibstat -l, customTests/azure_ib_write_bw_gdr.nhc);
# both under `numactl` on the HCA's NUMA node (/sys/class/infiniband/$dev/device/numa_node: `-N $n -m
# $n` in the GDR check, `--membind=$n -C $core` in the other); here `numactl -N $n -m $n`, or, where
# the image has no numactl, `taskset -c` on that node's CPUs (/sys/devices/system/node/node$n/cpulist);
# unbound when the node is unknown (-1) or the pod's cpuset refuses the binding. The worker prints the
# binding it used, and its name as `hostname` prints it (the kernel's, /proc/sys/kernel/hostname; not
# $HOSTNAME, which a shell may take from its environment). The node and the name by the shell's own
# `read`: no process per HCA (the cpulist by cat: dash's read gets nothing from that file).
# shellcheck disable=SC2016  # expanded on the worker
numa_bind='n=-1; { read -r n <"/sys/class/infiniband/$dev/device/numa_node"; } 2>/dev/null; bind=;
  if [ "${n:--1}" -ge 0 ] 2>/dev/null; then
    if command -v numactl >/dev/null 2>&1 && numactl -N "$n" -m "$n" true 2>/dev/null; then bind="numactl -N $n -m $n";
    elif cpus=$(cat "/sys/devices/system/node/node$n/cpulist" 2>/dev/null) && taskset -c "$cpus" true 2>/dev/null; then
      bind="taskset -c $cpus"; fi
  fi
  { read -r name </proc/sys/kernel/hostname; } 2>/dev/null || name=$(hostname)
  echo "# launcher: ib_write_bw over $dev on $name: NUMA node $n, binding: ${bind:-none}"'
# The InfiniBand devices of a node's HCA listing (node_checks' `check=hca` step, the lines verify/hca.py
# parses), in name order, by verify's rule handed over as patterns (HCA_*_ERE): each port's header names
# its device, its field lines follow (another non-blank line ends it); the port is InfiniBand unless its
# link_layer line says something else.
infiniband_devices() {
  awk 'BEGIN { PORT = ENVIRON["HCA_PORT_ERE"]; PREFIX = ENVIRON["HCA_DEVICE_PREFIX_ERE"]; NAME = ENVIRON["HCA_DEVICE_ERE"]
               FIELD = ENVIRON["HCA_FIELD_ERE"]; LAYER = ENVIRON["HCA_LINK_LAYER_ERE"]; IB = ENVIRON["HCA_INFINIBAND_ERE"] }
       function port_end() { if (dev != "" && ib) print dev; dev = "" }
       $0 ~ PORT { port_end(); line = $0; sub(PREFIX, "", line); match(line, NAME); dev = substr(line, 1, RLENGTH); ib = 1; next }
       dev == "" { next }
       match($0, LAYER) { ib = substr($0, RLENGTH + 1) ~ IB; next }
       $0 !~ FIELD && $0 ~ /[^ \t]/ { port_end() }
       END { port_end() }' "$1" | sort -u
}
hca_bandwidth() {
  local a=$1 b=$2 dev port=18515 server cap status k=0 gpu
  local memory=$PERFTEST_MEMORY args=$PERFTEST_ARGS
  local devs=""
  # none when the node checks were skipped or cut short (the budget): then there is nothing to measure
  if [ -r "$work/node.$a.hca" ] && ! timed_out "$work/node.$a.hca"; then
    devs=$(infiniband_devices "$work/node.$a.hca")
  fi
  if [ -z "$devs" ]; then
    marker "doctor-skip step=hca-bw hosts=${hosts[a]},${hosts[b]} reason=no-infiniband-hca-listed"
    return 0
  fi
  for dev in $devs; do
    have_time "hca-bw-$dev" || return 0
    bound "$PERFTEST_SECONDS"
    cap=$limit
    gpu=""
    if [ "$memory" = cuda ]; then gpu="--use_cuda=$k"; fi
    local run="dev=$dev; $numa_bind; CUDA_DEVICE_ORDER=PCI_BUS_ID exec timeout $cap \$bind ib_write_bw -d $dev -p $port $args $gpu"
    timeout "$cap" ssh -o BatchMode=yes "${hosts[b]}" "$run" >"$work/bw.server" 2>&1 &
    server=$!
    sleep "$PERFTEST_START_SECONDS"
    step "$work/bw.client" timeout "$cap" ssh -o BatchMode=yes "${hosts[a]}" "$run ${hosts[b]}"
    read -r status <"$work/bw.client.status"
    if [ "$status" -ne 0 ]; then
      echo "# launcher: ib_write_bw client exited with status $status (124: timed out)" >>"$work/bw.client"
    fi
    # 124 at the HCA's own limit (PERFTEST_SECONDS) is the HCA's result, a failure; only at what was
    # left of the budget is it a skip
    if [ "$status" = 124 ] && [ "$cap" -ge "$PERFTEST_SECONDS" ]; then echo 1 >"$work/bw.client.status"; fi
    section "$work/bw.client" hca-bw "hosts=${hosts[a]},${hosts[b]}" "hca=$dev" "memory=$memory"
    wait "$server" || true
    port=$((port + 1)) k=$((k + 1))
  done
}

busbw=$(largest_busbw "$work/allreduce.out")
# Whether the doctor runs: the job's decision (DOCTOR_RUN yes or no: the mode, the node count), or, under
# auto on two or more nodes, the all-nodes run's result by the job's rules and figures.
if [ "$DOCTOR_RUN" != by-result ]; then
  run=$DOCTOR_RUN reason=$DOCTOR_RUN_REASON
else
  transport=$(run_if "$work/allreduce.out")
  if [ "$rc" -ne 0 ] || [ -z "$busbw" ]; then
    run=yes reason=allreduce-failed
  elif [ -n "$transport" ]; then
    run=yes reason=$transport
  elif [ -z "$DOCTOR_PASS_BUSBW_GBPS" ]; then
    run=yes reason=no-pass-line
  elif below "$busbw" "$DOCTOR_PASS_BUSBW_GBPS"; then
    run=yes reason=allreduce-below-pass-line
  else
    run=no reason=allreduce-passed
  fi
fi
budget=$DOCTOR_SECONDS
marker "doctor mode=$doctor run=$run reason=$reason busbw_gbps=$busbw" \
  "pass_gbps=$DOCTOR_PASS_BUSBW_GBPS budget_s=$budget"
if [ "$run" = yes ]; then
  log "fabric doctor: $reason; budget ${budget}s"
  began=$SECONDS
  deadline=$((SECONDS + budget))
  node_checks
  pair_rounds
  if [ -n "$DOCTOR_ALLREDUCE_PAIR" ]; then  # the all-nodes run is a pair (two nodes): its result is the pair's
    note_if_slow "${DOCTOR_ALLREDUCE_PAIR%-*} ${DOCTOR_ALLREDUCE_PAIR#*-}" "$work/allreduce.out"
  fi
  for pair in "${slow_pairs[@]:0:$DOCTOR_HCA_PAIRS}"; do
    # shellcheck disable=SC2086  # "a b"
    hca_bandwidth $pair
  done
  marker "doctor-end elapsed_s=$((SECONDS - began)) budget_s=$budget"
fi
exit "$rc"
