"""How fast `python -m verify report` reads a big launcher log, and in how much memory (docs/verify-cli.md).

It writes a generated log of about --size-mb MB into a temporary folder (or reads --log), runs
`python -m verify report LOG --json` on it once per --runs, and prints each run's wall time, CPU time,
throughput (MB of log per wall second) and peak resident memory (the child's ru_maxrss from wait4).

The generated log has the shape of a large run's: the launcher's lines and markers, the nccl-tests header
with one "Rank" line per GPU, then NCCL INFO lines from every rank (most of a real log's bytes: channel
connections over NET/IB/GDRDMA and P2P, proxy connections) with the table's rows among them, and the
footer. It is a stand-in built from the lines in tests/data, not a recorded log.

    python tools/bench_log_reader.py --size-mb 1024
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS = 8
SIZES = [8 << i for i in range(32)]  # 8 B to 16 GiB, all_reduce_perf -b 8 -e 16G -f 2
PEAK_BUSBW_GBPS = 380.0


def _tag(rank: int, line: str) -> str:
    return f"[1,{rank}]<stdout>:{line}"


def _info(host: int, rank: int, message: str) -> str:
    pid = 3000 + rank
    return _tag(rank, f"node-{host}:{pid}:{pid + 200} [{rank % GPUS}] NCCL INFO {message}")


def _row(size: int, ranks: int) -> tuple[str, str]:
    """A table row's first five columns and the rest (nccl-tests prints them around the measurement)."""
    algbw = PEAK_BUSBW_GBPS * size / (size + (64 << 20)) / (2 * (ranks - 1) / ranks)
    busbw = algbw * 2 * (ranks - 1) / ranks
    time_us = size / (algbw * 1e3) if algbw else 0.0
    head = f"{size:>12}  {size // 4:>12}     float     sum      -1"
    rest = (f"  {time_us:>8.1f}  {algbw:>6.2f}  {busbw:>6.2f}       0  {time_us:>8.1f}  {algbw:>6.2f}  "
            f"{busbw:>6.2f}       0")
    return head, rest


def _preamble(hosts: int) -> Iterator[str]:
    ranks = hosts * GPUS
    names = ",".join(f"node-{h}" for h in range(hosts))
    yield from (f"[nccl-launcher 10:26:33] worker node-{h}: sshd answers" for h in range(hosts))
    yield f"[nccl-launcher 10:26:33] nodes={hosts} gpus_per_node={GPUS} np={ranks}"
    yield f"# aks-infiniband allreduce hosts={names}"
    yield _tag(0, "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809")
    yield _tag(0, "# Collective test starting: all_reduce_perf")
    yield _tag(0, "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 "
                  "agg iters: 1 validation: 1 graph: 0 unalign: 0")
    yield _tag(0, "#")
    yield _tag(0, "# Using devices")
    for r in range(ranks):
        yield _tag(0, f"#  Rank {r:>2} Group  0 Pid {3000 + r:>6} on {'node-' + str(r // GPUS):>10} device "
                      f"{r % GPUS:>2} [0000:{r % GPUS:02x}:00] NVIDIA H200")
    hcas = " ".join(f"[{d}]mlx5_ib{d}:1/IB" for d in range(GPUS))
    for r in range(ranks):
        h = r // GPUS
        yield _info(h, r, "NCCL version 2.28.9+cuda13.0")
        yield _info(h, r, "Using network IB")
        yield _info(h, r, f"NET/IB : Using {hcas} [RO]; OOB eth0:10.0.{h // 250}.{h % 250 + 4}<0>")
        yield from (_info(h, r, f"NET/IB : GPU Direct RDMA Enabled for HCA {d} 'mlx5_ib{d}'") for d in range(GPUS))
        yield _info(h, r, f"comm 0x7f{r:08x} rank {r} nRanks {ranks} nNodes {hosts} localRanks {GPUS} "
                          f"localRank {r % GPUS} MNNVL 0")


def _connections(hosts: int, round_: int) -> Iterator[str]:
    """One round of connection lines from every rank: what NCCL_DEBUG=INFO prints most of."""
    ranks = hosts * GPUS
    for r in range(ranks):
        h, d = divmod(r, GPUS)
        peer = (r + GPUS) % ranks
        channel = round_ % 32
        yield _info(h, r, f"Channel {channel:02d}/0 : {r}[{d}] -> {peer}[{d}] [send] via NET/IB/{d}/GDRDMA")
        yield _info(h, r, f"Channel {channel:02d}/0 : {peer}[{d}] -> {r}[{d}] [receive] via NET/IB/{d}/GDRDMA")
        yield _info(h, r, f"Channel {channel:02d}/0 : {r}[{d}] -> {h * GPUS + (d + 1) % GPUS}[{(d + 1) % GPUS}] "
                          f"via P2P/CUMEM/read")
        yield _info(h, r, f"New proxy send connection {round_ % 64} from local rank {d}, transport 2")
        yield _info(h, r, "Connected all rings, use ring PXN 0 GDR 1")
    if round_ % 200 == 199:  # now and then a WARN, which the report counts and quotes
        pid = 3000 + ranks - 1
        yield _tag(ranks - 1, f"node-{hosts - 1}:{pid}:{pid + 200} [7] transport/net_ib.cc:1234 NCCL WARN "
                              "NET/IB : Got async event : port error")


def lines(target_bytes: int, hosts: int = 64) -> Iterator[str]:
    """A log of about `target_bytes` (newlines counted), row by row in among the INFO lines."""
    ranks = hosts * GPUS
    written = 0
    next_row = 0
    row_every = max(target_bytes // (len(SIZES) + 1), 1)
    for line in _preamble(hosts):
        written += len(line) + 1
        yield line
    yield _tag(0, "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time"
                  "   algbw   busbw  #wrong")
    round_ = 0
    while next_row < len(SIZES):
        for line in _connections(hosts, round_):
            written += len(line) + 1
            yield line
        round_ += 1
        if written >= row_every * (next_row + 1) or round_ % 997 == 0 and written >= target_bytes:
            head, rest = _row(SIZES[next_row], ranks)
            if next_row % 4 == 3:  # NCCL logged between the row's columns (2.22+ connects lazily)
                yield _tag(0, head + _info(0, 0, "Connected all trees").split(">:", 1)[1])
                yield _tag(0, rest)
            else:
                yield _tag(0, head + rest)
            next_row += 1
    avg = sum(float(_row(s, ranks)[1].split()[2]) for s in SIZES) / len(SIZES)
    yield _tag(0, "# Out of bounds values : 0 OK")
    yield _tag(0, f"# Avg bus bandwidth    : {avg:.4f} ")
    yield _tag(0, "#")
    yield _tag(0, "# Collective test concluded: all_reduce_perf")
    yield "# aks-infiniband doctor mode=auto run=no reason=allreduce-passed busbw_gbps=380 budget_s=900"


def write(path: Path, target_bytes: int, hosts: int = 64) -> int:
    """Write the generated log to `path`; its size in bytes."""
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for line in lines(target_bytes, hosts):
            f.write(line + "\n")
    return path.stat().st_size


def measure(log: Path, argv: list[str]) -> tuple[float, float, int, int, bytes]:
    """One run of `python -m verify report LOG` (wall s, CPU s, peak RSS bytes, exit status, stdout)."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "verify", "report", str(log), *argv], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, child.returncode, out  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=1024, help="size of the generated log (default %(default)s)")
    p.add_argument("--hosts", type=int, default=64, help="nodes of 8 GPUs in the generated log")
    p.add_argument("--log", type=Path, help="measure this log instead of a generated one")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--keep", type=Path, help="write the generated log here (and keep it)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-log-") as tmp:
        log = args.log
        if log is None:
            log = args.keep or Path(tmp) / "big.log"
            started = time.perf_counter()
            write(log, args.size_mb << 20, args.hosts)
            print(f"generated {log} ({log.stat().st_size / 1e6:.0f} MB, {args.hosts} hosts) in "
                  f"{time.perf_counter() - started:.0f} s")
        size = log.stat().st_size
        for _ in range(args.runs):
            wall, cpu, rss, code, out = measure(log, ["--json", "--sku", "ND96isr_H200_v5"])
            verdict = out.decode(errors="replace")[:160].replace("\n", " ")
            print(f"verify report: exit {code}, wall {wall:.1f} s, CPU {cpu:.1f} s, {size / 1e6 / wall:.1f} MB/s, "
                  f"peak RSS {rss / 2**20:.0f} MiB; {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
