# ruff: noqa: E501  (the stubs print tool output lines verbatim, wider than the code style)
"""A fake cluster for running scripts/nccl-launcher.sh here: stub `ssh`, `mpirun`, `nvidia-smi`,
`ib_write_bw` and `timeout` on PATH, and a fake /sys/class/infiniband per worker.

- `ssh HOST true` answers after SSH_FAILS attempts per host (the launcher's sshd wait); any other
  command runs locally under bash with STUB_HOST=HOST, /sys/class/infiniband pointing into
  STUB_DIR/hosts/HOST (so the launcher's own sysfs listing code runs for real).
- `mpirun` records its argv (mpirun.args: the all-nodes run's, the last one; mpirun.calls: every
  call, a line each, its arguments separated by NUL: `calls(root)` reads them), prints MPIRUN_OUTPUT's file when set, then, as the ranks would, NCCL's
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
import sys
from pathlib import Path

# Only os and sys (no json, pathlib, shutil: their imports were most of each call's 25 ms of CPU, and the
# doctor's tests call it about a hundred times).
_MPIRUN = r'''
import os, sys
stub = os.environ["STUB_DIR"]
argv = sys.argv[1:]
with open(os.path.join(stub, "mpirun.calls"), "a") as f:
    f.write("\0".join(argv) + "\n")
if "--hostfile" in argv:  # the all-nodes run (the doctor's runs name --host)
    with open(os.path.join(stub, "mpirun.args"), "w") as f:
        f.write("\n".join(argv) + "\n")
def flag(name):
    return argv[argv.index(name) + 1] if name in argv else None
if flag("--hostfile"):
    with open(flag("--hostfile")) as f:
        hostfile = f.read()
    with open(os.path.join(stub, "hostfile"), "w") as f:
        f.write(hostfile)
    hosts = [line.split()[0] for line in hostfile.splitlines() if line.strip()]
else:
    hosts = [h.split(":")[0] for h in flag("--host").split(",")]
code = int(os.environ.get("MPIRUN_EXIT", "0"))
if code:
    print("--------------------------------------------------------------------------")
    print(f"mpirun detected that one or more processes exited with non-zero status")
    sys.exit(code)
tag = "--tag-output" in argv
def say(rank, text):
    print(f"[1,{rank}]<stdout>:{text}" if tag else text)
if os.environ.get("MPIRUN_OUTPUT"):
    print(open(os.environ["MPIRUN_OUTPUT"]).read(), end="")
bench = next(i for i, a in enumerate(argv) if a.endswith("all_reduce_perf"))
args = argv[bench + 1:]
def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
lo, hi = size(args[args.index("-b") + 1]), size(args[args.index("-e") + 1])
healthy = {1: float(os.environ.get("STUB_NODE_BUSBW", "470")), 2: float(os.environ.get("STUB_PAIR_BUSBW", "371"))}
busbw = healthy.get(len(hosts), float(os.environ.get("STUB_ALL_BUSBW", "372")))
slow = {h for h in os.environ.get("STUB_SLOW_HOSTS", "").split(",") if h}
if slow & set(hosts) and len(hosts) > 1:  # a fabric problem: a node's own NVLink run is unaffected
    busbw *= 0.5
n = int(flag("-np"))
per = n // len(hosts)  # ranks per node, however they were mapped (-npernode or --map-by ppr:N:node)
debug = os.environ.get("NCCL_DEBUG", "")
for i, a in enumerate(argv[:-1]):
    if a == "-x" and argv[i + 1].startswith("NCCL_DEBUG="):
        debug = argv[i + 1].split("=", 1)[1]
sockets = {h for h in os.environ.get("STUB_SOCKET_HOSTS", "").split(",") if h}
no_gdr = {h for h in os.environ.get("STUB_NO_GDR_HOSTS", "").split(",") if h}
def info(rank, text):
    say(rank, f"{hosts[rank // per].split('.')[0]}:{1000 + rank}:{1000 + rank} [{rank % per}] NCCL INFO {text}")
if debug == "INFO":
    for r in range(n):
        h = hosts[r // per]
        if r == 0:
            info(r, "NCCL version 2.28.9+cuda13.0")
        if h in sockets:
            info(r, "NET/IB : No device found.")
            info(r, "NET/Socket : Using [0]eth0:10.244.0.4<0>")
            info(r, "Using network Socket")
        else:
            info(r, "NET/IB : Using" + "".join(f" [{i}]mlx5_ib{i}:1/IB" for i in range(8)) + " [RO]; OOB eth0:10.244.0.4<0>")
            info(r, "Using network IB")
            for i in range(8):
                info(r, f"NET/IB : GPU Direct RDMA Enabled for HCA {i} 'mlx5_ib{i}'")
        info(r, f"comm 0x55aa{r:08x} rank {r} nRanks {n} nNodes {len(hosts)} localRanks {per} localRank {r % per} MNNVL 0")
        peer = r // per * per + (r % per + 1) % per
        info(r, f"Channel 00/0 : {r}[{r % per}] -> {peer}[{peer % per}] via P2P/CUMEM/read")
    for c in range(4 if len(hosts) > 1 else 0):
        for i in range(len(hosts)):
            src, dst = i * per + c % per, (i + 1) % len(hosts) * per + c % per
            for rank, direction in ((src, "send"), (dst, "receive")):
                h = hosts[rank // per]
                path = "NET/Socket/0" if h in sockets else f"NET/IB/{c % 2}" + ("" if h in no_gdr else "/GDRDMA")
                info(rank, f"Channel {c:02d}/0 : {src}[{src % per}] -> {dst}[{dst % per}] [{direction}] via {path}")
hang = [p for p in os.environ.get("STUB_HANG_ON", "").split("|") if p]
if any(p in " ".join(argv) for p in hang):  # a run that never ends: what it printed so far, then nothing
    sys.stdout.flush()
    with open(os.path.join(stub, "hanging"), "a") as f:  # its pid, for the test to end it
        f.write(f"{os.getpid()}\n")
    import time
    time.sleep(float(os.environ.get("STUB_HANG_SECONDS", "20")))
    sys.exit(1)
say(0, "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809")
say(0, "# Collective test starting: all_reduce_perf")
say(0, f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0")
say(0, "#")
say(0, "# Using devices")
for r in range(n):
    say(0, f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {hosts[r // per]:>10s} device {r % per:2d} [0000:00:{r % per:02x}] NVIDIA H100 80GB HBM3")
say(0, "#")
say(0, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
sizes = sorted({max(lo, hi // 4), max(lo, hi // 2), hi})
for s in sizes:
    b = busbw * (0.97 if s < hi else 1.0)
    algbw = b * n / (2 * (n - 1)) if n > 1 else b
    t = s / algbw / 1e3
    say(0, f"{s:12d}  {s // 4:12d}     float     sum      -1  {t:8.1f}  {algbw:6.2f}  {b:6.2f}      0  {t:8.1f}  {algbw:6.2f}  {b:6.2f}      0")
say(0, "# Out of bounds values : 0 OK")
say(0, f"# Avg bus bandwidth    : {busbw:.3f}")
say(0, "#")
say(0, "# Collective test concluded: all_reduce_perf")
'''

_SSH = r'''#!/usr/bin/env bash
while [ "${1:-}" != "${1#-}" ]; do if [ "$1" = -o ]; then shift 2; else shift; fi; done
host=$1; shift; cmd="$*"
if [ "$cmd" = true ]; then
  n=$(cat "$STUB_DIR/ssh.$host" 2>/dev/null || echo 0); echo $((n + 1)) >"$STUB_DIR/ssh.$host"
  [ "$n" -ge "${SSH_FAILS:-0}" ]; exit
fi
printf '%s\t%s\n' "$host" "$cmd" >>"$STUB_DIR/ssh.calls"
STUB_HOST=$host exec bash -c "${cmd//\/sys\/class\/infiniband/$STUB_DIR/hosts/$host/sys/class/infiniband}"
'''

_NVIDIA_SMI = r'''#!/usr/bin/env bash
n=$(cat "$STUB_DIR/hosts/$STUB_HOST/gpus" 2>/dev/null || echo "${GPUS_PER_NODE:-8}")
for ((i = 0; i < n; i++)); do printf 'GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$i"; done
'''

_IB_WRITE_BW = r'''#!/usr/bin/env bash
printf '%s\t%s\n' "$STUB_HOST" "$*" >>"$STUB_DIR/ib_write_bw.calls"
dev=""; args=("$@"); server=""
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = -d ] && dev=${args[i + 1]}; done
case "${args[-1]}" in *mpiworker*) server=${args[-1]} ;; *) exit 0 ;; esac  # a server: its client prints
bw=392.47
for h in "$server" "$STUB_HOST"; do
  if grep -qw "$dev" "$STUB_DIR/hosts/$h/slow_hca" 2>/dev/null; then bw=196.02; fi
done
rule=$(printf -- '-%.0s' {1..87})
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
_TIMEOUT = r'''#!/usr/bin/env bash
IFS='|' read -r -a patterns <<<"${STUB_TIMEOUT_ON:-}"
for p in "${patterns[@]}"; do
  if [ -n "$p" ] && [[ " ${*:2} " == *"$p"* ]]; then echo "partial output, then killed"; exit 124; fi
done
exec "$(PATH=${PATH#*:} command -v timeout)" "$@"
'''


def calls(root: Path) -> list[list[str]]:
    """Every mpirun call's arguments, in order."""
    return [line.split("\0") for line in (root / "mpirun.calls").read_text().splitlines()]


def install(root: Path, *, fake_timeout: bool = False) -> Path:
    """Write the stubs under root/bin; return root (the STUB_DIR). The `timeout` stub only with
    `fake_timeout` (for STUB_TIMEOUT_ON): otherwise the launcher's few hundred timeouts run the real
    one directly, as the stub would, without a bash in front of each."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scripts = {"mpirun": f"#!{sys.executable} -S\n{_MPIRUN}",  # -S: no site import, a faster start
               "ssh": _SSH, "nvidia-smi": _NVIDIA_SMI, "ib_write_bw": _IB_WRITE_BW}
    if fake_timeout:
        scripts["timeout"] = _TIMEOUT
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(body)
        path.chmod(0o755)
    return root


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
    for dev, (state, phys, rate_text, layer) in ports.items():
        d = base / "sys" / "class" / "infiniband" / dev / "ports" / "1"
        d.mkdir(parents=True, exist_ok=True)
        for name, value in (("state", state), ("phys_state", phys), ("rate", rate_text), ("link_layer", layer)):
            (d / name).write_text(value + "\n")
        if numa_node is not None:
            (d.parent.parent / "device").mkdir(exist_ok=True)
            (d.parent.parent / "device" / "numa_node").write_text(f"{numa_node}\n")
    if gpus is not None:
        (base / "gpus").write_text(str(gpus))
    if slow_hca:
        (base / "slow_hca").write_text(" ".join(slow_hca))


def env_for(root: Path, launcher_env: dict[str, str], hostfile: Path, **extra: str) -> dict[str, str]:
    return {
        **launcher_env,  # exactly what the job sets on the launcher container
        "PATH": f"{root / 'bin'}:{os.environ['PATH']}",
        "HOSTFILE": str(hostfile),
        "STUB_DIR": str(root),
        "SSH_POLL_SECONDS": "0",
        "PERFTEST_START_SECONDS": "0",
        **extra,
    }
