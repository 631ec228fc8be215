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
# nodes x 8 GPUs extrapolated (docs/fabric-verdict.md), near the size at which kubelet rotates a
# container log (upstream 10 MiB; AKS containerLogMaxSizeMB, 50 by default); the API then returns
# only the newest file, without the header or the transport lines. So mpirun's output
# goes through condense_nccl_log below: nccl-tests' own lines, NCCL WARN lines and everything
# else pass unchanged; of NCCL's INFO lines only those that say which transport was used are kept
# (network, HCAs, GPUDirect RDMA, every inter-node connection), each distinct one once per host.
# The doctor's runs go through it too, with connection lines also once per host and path: their
# transport is evidence (a pair that fell back to sockets), their channel count is not, and at 64
# nodes they are a few hundred runs (docs/fabric-doctor.md).
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
#   LAUNCHER_NCCL_LOG condensed (default) or full: full keeps every NCCL INFO line, the doctor's
#                     runs' too (a short debugging run, or a pool whose containerLogMaxSizeMB was raised)
# The doctor (fabricTest.doctor; components/nccl_job.py computes every figure from the catalog and
# verify/, so no rule is written here twice):
#   DOCTOR                 auto | always | never (default never): auto runs it only when the all-nodes
#                          run is not PASS by what this script can read of it cheaply: it failed or
#                          printed no result at its largest size; NCCL used TCP sockets; an inter-node
#                          connection ran without GPUDirect RDMA where DOCTOR_EXPECT_GDRDMA is 1; a
#                          host opened fewer than DOCTOR_HCAS_PER_NODE InfiniBand HCAs; it is below
#                          DOCTOR_PASS_BUSBW_GBPS; or no pass line is known
#   DOCTOR_EXPECT_GDRDMA   1 when the size's inter-node connections must use GPUDirect RDMA (ND sizes)
#   DOCTOR_HCAS_PER_NODE   the InfiniBand HCAs each host should open (empty: not checked)
#   DOCTOR_SECONDS         the doctor's time budget; each step gets what is left, then is skipped
#   DOCTOR_PASS_BUSBW_GBPS the busbw at the largest size at and above which the all-nodes verdict
#                          can be PASS (verify.verdict.pass_line_gbps); empty: unknown
#   DOCTOR_PAIR_ROUNDS     rounds of node-index pairs, "0-3 1-2;0-2 1-3" (verify.doctor.plan_pairs)
#   DOCTOR_PAIR_ARGS       all_reduce_perf arguments of a pair run
#   DOCTOR_NODE_ARGS       all_reduce_perf arguments of a node's single-node run (Azure's gate size)
#   DOCTOR_PAIR_SLOW_BELOW_GBPS  a pair below this (or failed) gets per-HCA ib_write_bw: where a 2-node
#                          verdict starts to PASS (verify.doctor.Expectations.pair_slow_below_gbps); empty: none
#   DOCTOR_HCA_PAIRS       at most this many slow pairs get per-HCA ib_write_bw (default 2)
#   DOCTOR_PARALLEL        at most this many nodes' checks, or pairs, at a time (default 16): each is an
#                          mpirun in this pod, which requests one core
#   PERFTEST_MEMORY        cuda | host (default host): the memory ib_write_bw moves, that of the size's
#                          gate (catalog LinkExpectation.gate_memory): cuda adds --use_cuda=<the HCA's index>
#   PERFTEST_ARGS          ib_write_bw arguments; default Azure's health check's for that memory (below)
#   PERFTEST_START_SECONDS pause between starting an ib_write_bw server and its client (default 2)
#   PERFTEST_SECONDS       the most one HCA's ib_write_bw may take (default 60)
# Every NCCL_*, UCX_* and SHARP_* variable of this container, and CUDA_DEVICE_ORDER, PATH and
# LD_LIBRARY_PATH, is forwarded to the ranks with -x: the job spec is the one place they are set.
set -euo pipefail

# The filter, in awk (every image has one). A line is NCCL's when it holds
# "HOST:PID:TID [DEV] NCCL INFO " (NVIDIA/nccl src/debug.cc, 2.18-2.29), after mpirun's
# "[JOB,RANK]<stdout>:" tag. Kept: the INFO messages matched by KEEP, once per host and message;
# every connection line ("[send] via NET/IB/0/GDRDMA", "[receive] via NET/Socket/0", CollNet's
# "via COLLNET/..."), since each is its own channel; with the argument `once`, only the first of each
# direction and path per host. Dropped: the rest of INFO (topology, tuning, intra-node P2P/SHM
# channels, allocations). The last line counts both.
# NCCL connects lazily (2.22+), so rank 0 may log between the first five columns of an nccl-tests
# row and the rest ("  8589934592  2147483648  float  sum  -1HOST:PID:TID [0] NCCL INFO ..."): those
# columns are printed as a line of their own (the row's rest follows on a later line, as it came),
# and what follows them is filtered as any NCCL line. The root column is read as -1 first (all_reduce_perf's),
# then as digits (verify/loglines.py ROW_COLUMNS reads it the same way).
condense_nccl_log() {
  awk -v once="${1:-}" '
    BEGIN {
      KEEP = "^(NCCL version |Using network |NET/[^ ]+ : Using|NET/IB : No device found|NET/Plugin|" \
             "comm 0x[0-9a-f]+ rank [0-9]+ nRanks [0-9]+ nNodes )|GPU Direct RDMA"
      CONNECTION = "\\[(send|receive)\\] via "
      TAG = "^\\[[0-9]+,[0-9]+\\]<std(out|err)>: ?"
      ROW = "^[ \t]*[0-9]+[ \t]+[0-9]+[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+"
    }
    {
      at = index($0, " NCCL INFO ")
      if (at == 0) { print; fflush(); next }
      tag = ""; line = $0
      if (match(line, TAG)) { tag = substr(line, 1, RLENGTH); line = substr(line, RLENGTH + 1) }
      if (match(line, ROW)) {
        columns = RLENGTH; root = substr(line, columns + 1); n = 0
        if (substr(root, 1, 2) == "-1") n = 2
        else if (match(root, /^[0-9]+/)) n = RLENGTH
        if (n) {
          print tag substr(line, 1, columns + n); fflush()
          $0 = tag substr(line, columns + n + 1)
          at = index($0, " NCCL INFO ")
        }
      }
      message = substr($0, at + 11)
      head = substr($0, 1, at)
      host = head
      if (match(head, /[^ :\]>]+:[0-9]+:[0-9]+ \[[0-9]+\] $/)) host = substr(head, RSTART)
      sub(/:.*/, "", host)
      if (match(message, CONNECTION)) {
        path = substr(message, RSTART)
        if (once == "once" && ((host, path) in seen)) { dropped++; next }
        seen[host, path] = 1; kept++; print; fflush(); next
      }
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
marker() { echo "# aks-infiniband $*"; }

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
# mpirun's output on its way to the log: condensed (`once`: the doctor's runs), or all of it
nccl_log_filter() {
  if [ "$nccl_log" = full ]; then cat; else condense_nccl_log "$@"; fi
}
doctor="${DOCTOR:-never}"
case "$doctor" in auto | always | never) ;; *) die 2 "DOCTOR must be auto, always or never, got '$doctor'" ;; esac

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
forward=() node_forward=()
while IFS= read -r var; do
  forward+=(-x "$var")
  if [ "$var" != NCCL_TOPO_FILE ]; then node_forward+=(-x "$var"); fi
done < <(compgen -e | grep -E '^(NCCL_|UCX_|SHARP_)' | sort)
for var in CUDA_DEVICE_ORDER PATH LD_LIBRARY_PATH; do
  if [ -n "${!var:-}" ]; then forward+=(-x "$var") node_forward+=(-x "$var"); fi
done
read -r -a bench_args <<<"$ALL_REDUCE_ARGS"
read -r -a map_bind <<<"${MPI_MAP_BIND:--npernode $GPUS_PER_NODE --bind-to none}"
# The doctor's single-node all-reduce as Azure's health check runs the one its gate was set with
# (Azure/azurehpc-health-checks@0e0a1ac customTests/azure_nccl_allreduce.nhc: `--map-by
# ppr:$gpu_count:node -bind-to numa`, `-x NCCL_TOPO_FILE=`): an empty NCCL_TOPO_FILE is how Azure fixed
# spurious H100/H200 failures of exactly this check (issue #142, PR #143, commit 67ca751), so the
# job's topology file is not forwarded to it. The job's other settings are.
node_map_bind=(--map-by "ppr:$GPUS_PER_NODE:node" --bind-to numa)
node_forward+=(-x NCCL_TOPO_FILE=)

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
# busbw (out of place, GB/s) at the largest size of an all_reduce_perf output; nothing when there is
# no row or a row has #wrong > 0. Lines may carry mpirun --tag-output's "[job,rank]<stdout>:". A row
# may come in two pieces, its first five columns (alone, or with an NCCL line glued on) and, on a
# later line, the rest (see condense_nccl_log).
largest_busbw() {
  awk 'function row(size, busbw, wrong) {
         if (wrong != "0" && wrong != "N/A") bad = 1
         if (size + 0 >= max) { max = size + 0; bw = busbw }
       }
       { sub(/^\[[0-9]+,[0-9]+\]<std(out|err)>: ?/, "") }
       $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $5 ~ /^-?[0-9]+/ && (NF == 5 || / NCCL (INFO|WARN) /) { head = $1; next }
       head != "" && NF >= 8 && $1 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ { row(head, $3, $4); head = ""; next }
       $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $5 ~ /^-?[0-9]+$/ && NF >= 9 && $8 ~ /^[0-9.]+$/ { row($1, $8, $9) }
       END { if (bw != "" && !bad) print bw }' "$1"
}
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
# Seconds a command may take: what is left of the budget, at most $1 when given, at least 1
# (`timeout 0` would mean no limit at all).
bound() {
  local s=$((deadline - SECONDS))
  if [ -n "${1:-}" ] && [ "$1" -lt "$s" ]; then s=$1; fi
  if [ "$s" -lt 1 ]; then s=1; fi
  echo "$s"
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
timed_out() { [ "$(cat "$1.status" 2>/dev/null)" = 124 ]; }
# A step's section: its marker (`node host=a check=hca`, ...) and its output; or, when the budget cut
# it short, `doctor-skip step=<section> <its attributes> reason=time-budget`, so that no result is read
# from it (what it printed follows as evidence).
section() {
  local out=$1 name=$2
  shift 2
  if timed_out "$out"; then
    marker "doctor-skip step=$name $* reason=time-budget budget_s=$budget"
  else
    marker "$name $*"
  fi
  cat "$out"
}

# What the all-nodes run's NCCL lines say against a PASS, as verify.verdict's transport rules do
# (FAIL: TCP sockets; an RDMA connection without GPUDirect RDMA where it is expected; WARN: a host
# that opened fewer InfiniBand HCAs): the reason code, or nothing. Reads the condensed lines, which
# keep all of these; a log without NCCL INFO lines says nothing here, as it says nothing to verify.
# Not checked: the verdict's WARNs about an incomplete collected log (a silent host, a host without
# 'NET/IB : Using', another rank count), which this complete copy cannot show (docs/fabric-doctor.md).
transport_problem() {
  awk -v gdr="${DOCTOR_EXPECT_GDRDMA:-0}" -v hcas="${DOCTOR_HCAS_PER_NODE:-}" '
    !/ NCCL INFO / { next }
    / NCCL INFO Using network Socket/ || /\] via NET\/Socket\// { sockets = 1 }
    /\[(send|receive)\] via (NET|COLLNET)\// && !/ via NET\/Socket\// && !/\/GDRDMA/ { no_gdr = 1 }
    / NCCL INFO NET\/IB : Using/ && hcas != "" {
      line = $0; n = 0
      while (match(line, /\[[0-9]+\][^] :[]+:[0-9]+\/IB/)) {
        dev = substr(line, RSTART, RLENGTH); n += 1 + gsub(/\+/, "", dev)  # mlx5_0+mlx5_1: NCCL merged two
        line = substr(line, RSTART + RLENGTH)
      }
      if (n < hcas + 0) few = 1
    }
    END {
      if (sockets) print "allreduce-sockets"
      else if (no_gdr && gdr == "1") print "allreduce-no-gdrdma"
      else if (few) print "allreduce-fewer-hcas"
    }' "$1"
}

# all_reduce_perf over the given hosts (all their GPUs), output to a file, bounded by the budget:
# `node` (one host) as Azure's health check runs it (node_map_bind, node_forward), `pair` as the
# all-nodes run. NCCL_DEBUG as the all-nodes run's (the job's), so that each run's transport is
# evidence too; the filter keeps one connection line per host and path (condense_nccl_log once).
allreduce_on() {
  local kind=$1 out=$2 args=$3
  shift 3
  local spec=() h status=0
  for h in "$@"; do spec+=("$h:$GPUS_PER_NODE"); done
  local -a a how=("${map_bind[@]}") env=("${forward[@]}")
  if [ "$kind" = node ]; then how=("${node_map_bind[@]}") env=("${node_forward[@]}"); fi
  read -r -a a <<<"$args"
  timeout "$(bound)" "${mpi[@]}" -np $(($# * GPUS_PER_NODE)) "${how[@]}" \
    --host "$(IFS=,; echo "${spec[*]}")" "${env[@]}" "$bench" "${a[@]}" 2>&1 | nccl_log_filter once >"$out" ||
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

# After every DOCTOR_PARALLEL launches, wait for them all (batches bound this pod's load at 64 nodes).
batch() {
  if [ $(($1 % ${DOCTOR_PARALLEL:-16})) -eq 0 ]; then wait || true; fi
}

node_checks() {
  local i h check
  have_time node-checks || return 0
  for i in "${!hosts[@]}"; do
    batch "$i"
    h=${hosts[i]}
    step "$work/node.$i.hca" timeout "$(bound)" ssh -o BatchMode=yes "$h" "$hca_listing" &
    step "$work/node.$i.gpus" timeout "$(bound)" ssh -o BatchMode=yes "$h" nvidia-smi -L &
    allreduce_on node "$work/node.$i.allreduce" "$DOCTOR_NODE_ARGS" "$h" &
  done
  wait || true
  for i in "${!hosts[@]}"; do
    for check in hca gpus allreduce; do
      section "$work/node.$i.$check" node "host=${hosts[i]}" "check=$check"
    done
  done
}

slow_pairs=()  # "a b" index pairs, in the order found
note_if_slow() {
  local pair=$1 out=$2 busbw
  [ -n "${DOCTOR_PAIR_SLOW_BELOW_GBPS:-}" ] || return 0
  if timed_out "$out"; then return 0; fi  # cut short by the budget: not a measurement
  busbw=$(largest_busbw "$out")
  if [ -z "$busbw" ] || below "$busbw" "$DOCTOR_PAIR_SLOW_BELOW_GBPS"; then slow_pairs+=("$pair"); fi
}

pair_rounds() {
  local r=0 round pair a b
  local -a rounds pairs
  IFS=';' read -r -a rounds <<<"${DOCTOR_PAIR_ROUNDS:-}"
  for round in "${rounds[@]}"; do
    r=$((r + 1))
    have_time "pairs-round-$r" || continue
    read -r -a pairs <<<"$round"
    local k=0
    for pair in "${pairs[@]}"; do
      batch $((k++))
      a=${pair%-*} b=${pair#*-}
      allreduce_on pair "$work/pair.$r.$pair" "$DOCTOR_PAIR_ARGS" "${hosts[a]}" "${hosts[b]}" &
    done
    wait || true
    for pair in "${pairs[@]}"; do
      a=${pair%-*} b=${pair#*-}
      section "$work/pair.$r.$pair" pair "round=$r" "hosts=${hosts[a]},${hosts[b]}"
      note_if_slow "$a $b" "$work/pair.$r.$pair"
    done
  done
}

# ib_write_bw between two nodes over each of the first node's InfiniBand HCAs (the same device
# name on the other node): server on the second node, client on the first; one HCA at a time, each
# bounded (on the worker too, so that a server whose client never came does not linger). As Azure's
# health checks measure the gates it is judged by (Azure/azurehpc-health-checks@0e0a1ac):
# - cuda, customTests/azure_ib_write_bw_gdr.nhc: `-s 8388608 -x 0 -F --report_gbits --perform_warm_up
#   --use_cuda=$dev_idx`, dev_idx the HCA's index among the node's InfiniBand HCAs in name order (ibstat -l);
# - host, customTests/azure_ib_write_bw_non_gdr.nhc: `-s $MSG_SIZE -D 10 -x 0 -F --report_gbits
#   --perform_warm_up -q 2`, MSG_SIZE 1048576 unless the conf says otherwise;
# both under `numactl` on the HCA's NUMA node (/sys/class/infiniband/$dev/device/numa_node: `-N $n -m
# $n` in the GDR check, `--membind=$n -C $core` in the other); here `numactl -N $n -m $n`, or, where
# the image has no numactl, `taskset -c` on that node's CPUs (/sys/devices/system/node/node$n/cpulist);
# unbound when the node is unknown (-1) or the pod's cpuset refuses the binding. The worker prints the
# binding it used.
# shellcheck disable=SC2016  # expanded on the worker
numa_bind='n=$(cat "/sys/class/infiniband/$dev/device/numa_node" 2>/dev/null || echo -1); bind=;
  if [ "${n:--1}" -ge 0 ] 2>/dev/null; then
    if command -v numactl >/dev/null 2>&1 && numactl -N "$n" -m "$n" true 2>/dev/null; then bind="numactl -N $n -m $n";
    elif cpus=$(cat "/sys/devices/system/node/node$n/cpulist" 2>/dev/null) && taskset -c "$cpus" true 2>/dev/null; then
      bind="taskset -c $cpus"; fi
  fi
  echo "# launcher: ib_write_bw over $dev on $(hostname): NUMA node $n, binding: ${bind:-none}"'
hca_bandwidth() {
  local a=$1 b=$2 dev port=18515 server cap status k=0 gpu
  local memory="${PERFTEST_MEMORY:-host}" args
  if [ "$memory" = cuda ]; then
    args="${PERFTEST_ARGS:--s 8388608 -x 0 -F --report_gbits --perform_warm_up}"
  else
    args="${PERFTEST_ARGS:--s 1048576 -D 10 -x 0 -F --report_gbits --perform_warm_up -q 2}"
  fi
  local devs=""
  # none when the node checks were skipped or cut short (the budget): then there is nothing to measure
  if [ -r "$work/node.$a.hca" ] && ! timed_out "$work/node.$a.hca"; then
    devs=$(awk '/^Infiniband device/ { d = $3; gsub(/\047/, "", d) } /link_layer:/ && $2 == "InfiniBand" { print d }' \
      "$work/node.$a.hca" | sort -u)
  fi
  if [ -z "$devs" ]; then
    marker "doctor-skip step=hca-bw hosts=${hosts[a]},${hosts[b]} reason=no-infiniband-hca-listed"
    return 0
  fi
  for dev in $devs; do
    have_time "hca-bw-$dev" || return 0
    cap=$(bound "${PERFTEST_SECONDS:-60}")
    gpu=""
    if [ "$memory" = cuda ]; then gpu="--use_cuda=$k"; fi
    local run="dev=$dev; $numa_bind; CUDA_DEVICE_ORDER=PCI_BUS_ID exec timeout $cap \$bind ib_write_bw -d $dev -p $port $args $gpu"
    timeout "$cap" ssh -o BatchMode=yes "${hosts[b]}" "$run" >"$work/bw.server" 2>&1 &
    server=$!
    sleep "${PERFTEST_START_SECONDS:-2}"
    step "$work/bw.client" timeout "$cap" ssh -o BatchMode=yes "${hosts[a]}" "$run ${hosts[b]}"
    status=$(cat "$work/bw.client.status")
    if [ "$status" -ne 0 ]; then
      echo "# launcher: ib_write_bw client exited with status $status (124: timed out)" >>"$work/bw.client"
    fi
    # 124 at the HCA's own limit (PERFTEST_SECONDS) is the HCA's result, a failure; only at what was
    # left of the budget is it a skip
    if [ "$status" = 124 ] && [ "$cap" -ge "${PERFTEST_SECONDS:-60}" ]; then echo 1 >"$work/bw.client.status"; fi
    section "$work/bw.client" hca-bw "hosts=${hosts[a]},${hosts[b]}" "hca=$dev" "memory=$memory"
    wait "$server" || true
    port=$((port + 1)) k=$((k + 1))
  done
}

if [ "$doctor" = never ]; then
  run=no reason=mode-never
elif [ "$NODES" -lt 2 ]; then
  run=no reason=single-node
elif [ "$doctor" = always ]; then
  run=yes reason=mode-always
else
  busbw=$(largest_busbw "$work/allreduce.out")
  transport=$(transport_problem "$work/allreduce.out")
  if [ "$rc" -ne 0 ] || [ -z "$busbw" ]; then
    run=yes reason=allreduce-failed
  elif [ -n "$transport" ]; then
    run=yes reason=$transport
  elif [ -z "${DOCTOR_PASS_BUSBW_GBPS:-}" ]; then
    run=yes reason=no-pass-line
  elif below "$busbw" "$DOCTOR_PASS_BUSBW_GBPS"; then
    run=yes reason=allreduce-below-pass-line
  else
    run=no reason=allreduce-passed
  fi
fi
budget=${DOCTOR_SECONDS:-900}
marker "doctor mode=$doctor run=$run reason=$reason busbw_gbps=$(largest_busbw "$work/allreduce.out")" \
  "pass_gbps=${DOCTOR_PASS_BUSBW_GBPS:-} budget_s=$budget"
if [ "$run" = yes ]; then
  log "fabric doctor: $reason; budget ${budget}s"
  began=$SECONDS
  deadline=$((SECONDS + budget))
  node_checks
  pair_rounds
  if [ "$NODES" -eq 2 ]; then note_if_slow "0 1" "$work/allreduce.out"; fi  # the all-nodes run is the pair
  for pair in "${slow_pairs[@]:0:${DOCTOR_HCA_PAIRS:-2}}"; do
    # shellcheck disable=SC2086  # "a b"
    hca_bandwidth $pair
  done
  marker "doctor-end elapsed_s=$((SECONDS - began)) budget_s=$budget"
fi
exit "$rc"
