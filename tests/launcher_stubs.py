# ruff: noqa: E501  (the stubs print tool output lines verbatim, wider than the code style)
"""A fake cluster for running scripts/nccl-launcher.sh here: stub `ssh`, `mpirun`, `nvidia-smi`,
`ib_write_bw` and `timeout` on PATH, and a fake /sys/class/infiniband per worker (a link to an earlier
worker's where they are the same).

- `ssh HOST true` answers after SSH_FAILS attempts per host (the launcher's sshd wait); any other
  command runs locally under bash with STUB_HOST=HOST, /sys/class/infiniband pointing into
  STUB_DIR/hosts/HOST (so the launcher's own sysfs listing code runs for real).
- `mpirun` records its argv (mpirun.args: the all-nodes run's, the last one; mpirun.calls: every
  call, a line each, its arguments separated by the ASCII unit separator 0x1f: `calls(root)` reads them), prints MPIRUN_OUTPUT's file when set, then, as the ranks would, NCCL's
  INFO lines when NCCL_DEBUG is INFO (the job's, unless an `-x NCCL_DEBUG=...` overrides it): each
  host's network (IB with 8 HCAs; Socket for hosts in STUB_SOCKET_HOSTS), four inter-node channels
  per ring edge (without GDRDMA for hosts in STUB_NO_GDR_HOSTS) and intra-node P2P noise, in the
  formats of tests/nccl_logs.py; then an all_reduce_perf table for the hosts it was given: the busbw
  of a healthy run of that many nodes, halved when a host in STUB_SLOW_HOSTS takes part in a run
  across nodes (its fabric is slow; its single-node run is not). With --tag-output every rank's line
  carries mpirun's "[1,RANK]<stdout>:".
- `mpirun` whose arguments hold one of STUB_HANG_ON's '|'-separated patterns prints its NCCL lines,
  writes its pid to STUB_DIR/hanging and sleeps STUB_HANG_SECONDS (default 20) instead of running: a step
  still running when the launcher is stopped.
- `nvidia-smi -L` lists STUB_DIR/hosts/HOST/gpus GPUs (default GPUS_PER_NODE).
- `timeout` (installed when asked: `install(root, fake_timeout=True)`) exits 124 at once for a command
  that holds one of STUB_TIMEOUT_ON's '|'-separated patterns (the budget ran out); otherwise it is the
  real one.
- `ib_write_bw` records its argv (ib_write_bw.calls: host, tab, arguments); as a server it prints
  nothing; as a client it prints a perftest table at 392 Gb/s, or
  196 when either end lists the device in STUB_DIR/hosts/HOST/slow_hca.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

BASH = shutil.which("bash") or "/bin/bash"

# bash for the arguments and the files, one awk for the output: no interpreter of its own to start
# (a Python stub's start-up was ~10 ms of CPU a call, a dozen calls a doctor run; this one's ~2 ms).
_MPIRUN = r'''stub=$STUB_DIR
# the whole line in one write: the doctor's mpiruns run at the same time (a write per argument interleaved them)
printf -v call '%s\x1f' "$@"; printf '%s\n' "${call%?}" >>"$stub/mpirun.calls"
np= hostfile= hostlist= tag=0 debug=${NCCL_DEBUG:-} bench= lo= hi= prev= seen=" "
for a; do
  # a flag's value is the argument after its first occurrence; -b and -e: their first after the benchmark
  if [[ $seen != *" $prev "* ]]; then
    case $prev in
      --hostfile) hostfile=$a seen+="$prev " ;;
      --host) hostlist=$a seen+="$prev " ;;
      -np) np=$a seen+="$prev " ;;
    esac
  fi
  if [ -n "$bench" ] && [[ $seen != *" bench$prev "* ]]; then
    case $prev in
      -b) lo=$a seen+="bench$prev " ;;
      -e) hi=$a seen+="bench$prev " ;;
    esac
  fi
  if [ "$prev" = -x ] && [[ $a == NCCL_DEBUG=* ]]; then debug=${a#NCCL_DEBUG=}; fi
  if [ "$a" = --tag-output ]; then tag=1; fi
  if [ -z "$bench" ] && [[ $a == *all_reduce_perf ]]; then bench=$a a=; fi
  prev=$a
done
if [[ $seen == *" --hostfile "* ]]; then printf '%s\n' "$@" >"$stub/mpirun.args"; fi  # the all-nodes run (the doctor's name --host)
hosts=()
if [ -n "$hostfile" ]; then
  IFS= read -r -d '' text <"$hostfile" || true  # the whole file, copied byte for byte
  printf %s "$text" >"$stub/hostfile"
  while read -r h _ || [ -n "$h" ]; do if [ -n "$h" ]; then hosts+=("$h"); fi; done <<<"$text"
else
  IFS=, read -r -a hosts <<<"$hostlist"
  hosts=("${hosts[@]%%:*}")
fi
code=${MPIRUN_EXIT:-0}
if [ "$code" -ne 0 ]; then
  echo "--------------------------------------------------------------------------"
  echo "mpirun detected that one or more processes exited with non-zero status"
  exit "$code"
fi
if [ -n "${MPIRUN_OUTPUT:-}" ]; then IFS= read -r -d '' text <"$MPIRUN_OUTPUT" || true; printf %s "$text"; fi
hang=0
IFS='|' read -r -a patterns <<<"${STUB_HANG_ON:-}"
for p in "${patterns[@]}"; do if [ -n "$p" ] && [[ "$*" == *"$p"* ]]; then hang=1; fi; done
printf -v list '%s,' "${hosts[@]}"
awk -v hosts="${list%,}" -v n="$np" -v tag="$tag" -v lo="$lo" -v hi="$hi" -v debug="$debug" -v hang="$hang" '
function size(t,  u) { u = substr(t, length(t)); return (u in units) ? substr(t, 1, length(t) - 1) * units[u] : t + 0 }
function say(rank, text) { if (tag) printf "[1,%d]<stdout>:%s\n", rank, text; else printf "%s\n", text }
function members(name, into,  k, v, i) { k = split(ENVIRON[name], v, ","); for (i = 1; i <= k; i++) if (v[i] != "") into[v[i]] = 1 }
function short(h) { return index(h, ".") ? substr(h, 1, index(h, ".") - 1) : h }
function info(rank, text) { say(rank, sprintf("%s:%d:%d [%d] NCCL INFO %s", short(H[int(rank / per)]), 1000 + rank, 1000 + rank, rank % per, text)) }
function env(name, default_) { return (name in ENVIRON) ? ENVIRON[name] + 0 : default_ }
BEGIN {
  units["K"] = 1024; units["M"] = 1048576; units["G"] = 1073741824
  nh = split(hosts, Hs, ","); for (i = 1; i <= nh; i++) H[i - 1] = Hs[i]
  lo = size(lo); hi = size(hi); n += 0; per = int(n / nh)
  busbw = nh == 1 ? env("STUB_NODE_BUSBW", 470) : nh == 2 ? env("STUB_PAIR_BUSBW", 371) : env("STUB_ALL_BUSBW", 372)
  members("STUB_SLOW_HOSTS", slow); members("STUB_SOCKET_HOSTS", sockets); members("STUB_NO_GDR_HOSTS", no_gdr)
  for (i = 0; i < nh; i++) if ((H[i] in slow) && nh > 1) { busbw *= 0.5; break }  # a fabric problem: a node s own NVLink run is unaffected
  if (debug == "INFO") {
    for (r = 0; r < n; r++) {
      h = H[int(r / per)]
      if (r == 0) info(r, "NCCL version 2.28.9+cuda13.0")
      if (h in sockets) {
        info(r, "NET/IB : No device found.")
        info(r, "NET/Socket : Using [0]eth0:10.244.0.4<0>")
        info(r, "Using network Socket")
      } else {
        t = "NET/IB : Using"; for (i = 0; i < 8; i++) t = t sprintf(" [%d]mlx5_ib%d:1/IB", i, i)
        info(r, t " [RO]; OOB eth0:10.244.0.4<0>")
        info(r, "Using network IB")
        for (i = 0; i < 8; i++) info(r, sprintf("NET/IB : GPU Direct RDMA Enabled for HCA %d \047mlx5_ib%d\047", i, i))
      }
      info(r, sprintf("comm 0x55aa%08x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", r, r, n, nh, per, r % per))
      peer = int(r / per) * per + (r % per + 1) % per
      info(r, sprintf("Channel 00/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", r, r % per, peer, peer % per))
    }
    for (c = 0; c < (nh > 1 ? 4 : 0); c++)
      for (i = 0; i < nh; i++) {
        src = i * per + c % per; dst = (i + 1) % nh * per + c % per
        for (k = 0; k < 2; k++) {
          rank = k ? dst : src; h = H[int(rank / per)]
          path = (h in sockets) ? "NET/Socket/0" : ("NET/IB/" (c % 2) ((h in no_gdr) ? "" : "/GDRDMA"))
          info(rank, sprintf("Channel %02d/0 : %d[%d] -> %d[%d] [%s] via %s", c, src, src % per, dst, dst % per, k ? "receive" : "send", path))
        }
      }
  }
  if (hang) exit
  say(0, "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809")
  say(0, "# Collective test starting: all_reduce_perf")
  say(0, sprintf("# nThread 1 nGpus 1 minBytes %.0f maxBytes %.0f step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", lo, hi))
  say(0, "#")
  say(0, "# Using devices")
  for (r = 0; r < n; r++)
    say(0, sprintf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [0000:00:%02x] NVIDIA H100 80GB HBM3", r, 1000 + r, H[int(r / per)], r % per, r % per))
  say(0, "#")
  say(0, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
  # the sizes max(lo, hi // 4), max(lo, hi // 2) and hi, each once (in increasing order, as -b <= -e)
  q[1] = int(hi / 4); q[2] = int(hi / 2); q[3] = hi; k = 0
  for (i = 1; i <= 3; i++) {
    s = i < 3 && lo > q[i] ? lo : q[i]
    if (k == 0 || z[k - 1] != s) z[k++] = s
  }
  for (i = 0; i < k; i++) {
    s = z[i]; b = busbw * (s < hi ? 0.97 : 1.0)
    algbw = n > 1 ? b * n / (2 * (n - 1)) : b
    t = s / algbw / 1e3
    say(0, sprintf("%12.0f  %12.0f     float     sum      -1  %8.1f  %6.2f  %6.2f      0  %8.1f  %6.2f  %6.2f      0", s, int(s / 4), t, algbw, b, t, algbw, b))
  }
  say(0, "# Out of bounds values : 0 OK")
  say(0, sprintf("# Avg bus bandwidth    : %.3f", busbw))
  say(0, "#")
  say(0, "# Collective test concluded: all_reduce_perf")
}'
if [ "$hang" = 1 ]; then  # a run that never ends: what it printed so far, then nothing
  echo "$$" >>"$stub/hanging"  # its pid, for the test to end it
  sleep "${STUB_HANG_SECONDS:-20}"
  exit 1
fi
'''

# The other stubs in bash, each without a process of its own beyond its bash (read, not cat; the command
# run in the ssh stub's own shell, as sshd's `bash -c` would run it).
_SSH = r'''while [ "${1:-}" != "${1#-}" ]; do if [ "$1" = -o ]; then shift 2; else shift; fi; done
stub_host=$1; shift; stub_cmd="$*"; set --
if [ "$stub_cmd" = true ]; then
  n=0; if [ -e "$STUB_DIR/ssh.$stub_host" ]; then read -r n <"$STUB_DIR/ssh.$stub_host"; fi
  echo $((n + 1)) >"$STUB_DIR/ssh.$stub_host"
  [ "$n" -ge "${SSH_FAILS:-0}" ]; exit
fi
printf '%s\t%s\n' "$stub_host" "$stub_cmd" >>"$STUB_DIR/ssh.calls"
export STUB_HOST=$stub_host
stub_cmd=${stub_cmd//\/sys\/class\/infiniband/$STUB_DIR/hosts/$stub_host/sys/class/infiniband}
unset stub_host
eval "$stub_cmd"
'''

_NVIDIA_SMI = r'''n=${GPUS_PER_NODE:-8}
if [ -e "$STUB_DIR/hosts/$STUB_HOST/gpus" ]; then read -r n <"$STUB_DIR/hosts/$STUB_HOST/gpus" || true; fi
for ((i = 0; i < n; i++)); do printf 'GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$i"; done
'''

_IB_WRITE_BW = r'''printf '%s\t%s\n' "$STUB_HOST" "$*" >>"$STUB_DIR/ib_write_bw.calls"
dev=""; args=("$@"); server=""
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = -d ] && dev=${args[i + 1]}; done
case "${args[-1]}" in *mpiworker*) server=${args[-1]} ;; *) exit 0 ;; esac  # a server: its client prints
bw=392.47
for h in "$server" "$STUB_HOST"; do
  if [ -e "$STUB_DIR/hosts/$h/slow_hca" ]; then
    read -r -d '' -a listed <"$STUB_DIR/hosts/$h/slow_hca" || true
    for d in "${listed[@]}"; do if [ "$d" = "$dev" ]; then bw=196.02; fi; done
  fi
done
rule=---------------------------------------------------------------------------------------
echo "$rule"
echo "                    RDMA_Write BW Test"
printf ' Dual-port       : OFF\t\tDevice         : %s\n' "$dev"
echo "$rule"
echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
echo " 8388608    5000             $bw             $bw             0.005850"
echo "$rule"
'''

# `timeout SECONDS COMMAND...` that, for a command line holding one of STUB_TIMEOUT_ON's '|'-separated
# patterns, prints a line and exits 124 at once, as coreutils' timeout does when the limit runs out
# (no waiting); any other command runs under the real timeout (the next one on PATH).
_TIMEOUT = r'''IFS='|' read -r -a patterns <<<"${STUB_TIMEOUT_ON:-}"
for p in "${patterns[@]}"; do
  if [ -n "$p" ] && [[ " ${*:2} " == *"$p"* ]]; then echo "partial output, then killed"; exit 124; fi
done
IFS=: read -r -a dirs <<<"${PATH#*:}"
for d in "${dirs[@]}"; do if [ -f "$d/timeout" ] && [ -x "$d/timeout" ]; then exec "$d/timeout" "$@"; fi; done
echo "timeout: not found on PATH" >&2; exit 127
'''


def calls(root: Path) -> list[list[str]]:
    """Every mpirun call's arguments, in order."""
    return [line.split("\x1f") for line in (root / "mpirun.calls").read_text().splitlines()]


def install(root: Path, *, fake_timeout: bool = False) -> Path:
    """Write the stubs under root/bin; return root (the STUB_DIR). The `timeout` stub only with
    `fake_timeout` (for STUB_TIMEOUT_ON): otherwise the launcher's few hundred timeouts run the real
    one directly, as the stub would, without a bash in front of each."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scripts = {"mpirun": _MPIRUN, "ssh": _SSH, "nvidia-smi": _NVIDIA_SMI, "ib_write_bw": _IB_WRITE_BW}
    if fake_timeout:
        scripts["timeout"] = _TIMEOUT
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!{BASH}\n{body}")  # bash itself, not /usr/bin/env's search of PATH for it
        path.chmod(0o755)
    return root


# The sysfs trees built so far in this process, by what the tree holds: a worker whose tree is the same as
# one built before, for this root or another test's, gets a symbolic link to it (real /sys/class/infiniband
# entries are links too), not a copy: a tree is 8 devices x 4 files and their directories, ~25 ms of CPU on
# this disk. Nothing writes to a tree; one whose directory is gone (not within a session) is built again.
_TREES: dict[tuple, Path] = {}


def add_node(root: Path, host: str, *, hcas: int = 8, rate: str = "400 Gb/sec (4X NDR)",
             degraded: dict[str, str] | None = None, down: tuple[str, ...] = (), gpus: int | None = None,
             slow_hca: tuple[str, ...] = (), ethernet_an0: bool = False, numa_node: int | None = None) -> None:
    """A worker's /sys/class/infiniband: `hcas` IB ports at `rate`, `degraded` ones at their own
    rate, `down` ones DOWN/Polling; an Ethernet mlx5_an0 as on ND H200 v5 when asked; each device's
    device/numa_node when `numa_node` is given."""
    base = root / "hosts" / host
    ports = {f"mlx5_ib{i}": ("4: ACTIVE", "5: LinkUp", (degraded or {}).get(f"mlx5_ib{i}", rate), "InfiniBand")
             for i in range(hcas)}
    for dev in down:
        ports[dev] = ("1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand")
    if ethernet_an0:
        ports["mlx5_an0"] = ("4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet")
    base.mkdir(parents=True, exist_ok=True)
    key = (tuple(ports.items()), numa_node)
    if key in _TREES and _TREES[key].is_dir():
        (base / "sys").symlink_to(_TREES[key], target_is_directory=True)
    else:
        for dev, (state, phys, rate_text, layer) in ports.items():
            d = base / "sys" / "class" / "infiniband" / dev / "ports" / "1"
            d.mkdir(parents=True, exist_ok=True)
            for name, value in (("state", state), ("phys_state", phys), ("rate", rate_text), ("link_layer", layer)):
                (d / name).write_text(value + "\n")
            if numa_node is not None:
                (d.parent.parent / "device").mkdir(exist_ok=True)
                (d.parent.parent / "device" / "numa_node").write_text(f"{numa_node}\n")
        _TREES[key] = (base / "sys").absolute()
    if gpus is not None:
        (base / "gpus").write_text(str(gpus))
    if slow_hca:
        (base / "slow_hca").write_text(" ".join(slow_hca))


def doctor_mode(mode: str, nodes: int) -> dict[str, str]:
    """The doctor's mode as the job sets it for `nodes` workers: the mode and the decision taken before the
    pod starts (components/fabric/nccl_job.py doctor_decision), which the launcher follows."""
    from components.fabric.nccl_job import doctor_decision

    run, reason = doctor_decision(mode, nodes)
    return {"DOCTOR": mode, "DOCTOR_RUN": run, "DOCTOR_RUN_REASON": reason}


def env_for(root: Path, launcher_env: dict[str, str], hostfile: Path, **extra: str) -> dict[str, str]:
    """The launcher's environment on the fake cluster; its work directory (mktemp -d) under
    root/tmp, where a test can see its steps' files and nothing is left in /tmp."""
    (root / "tmp").mkdir(exist_ok=True)
    return {
        **launcher_env,  # exactly what the job sets on the launcher container
        "PATH": f"{root / 'bin'}:{os.environ['PATH']}",
        "HOSTFILE": str(hostfile),
        "STUB_DIR": str(root),
        "TMPDIR": str(root / "tmp"),
        "SSH_POLL_SECONDS": "0",
        "PERFTEST_START_SECONDS": "0",
        **extra,
    }
