"""CONSTRUCTED launcher logs for tests: an nccl-tests run across N hosts with NCCL's INFO lines, as
`scripts/nccl-launcher.sh` prints it (mpirun --tag-output). Nothing here was measured.

Each line is in a format NCCL or nccl-tests prints, checked against real logs: tests/data's
recordings (NCCL 2.28.9) and the public excerpts in tests/data/public-nccl-info/ (Azure/aks-rdma-
infiniband#30 and #36: "NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB eth0:...", "Channel 08/0 :
0[0] -> 8[0] [send] via NET/IB/8/GDRDMA"; NVIDIA/nccl#1537: "NET/IB : GPU Direct RDMA Disabled for
HCA 0 'mlx5_0'"). The shape is simplified: one inter-node ring edge per channel between
neighbouring hosts (real rings and trees have more), HCA `channel % hcas`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

NCCL_VERSION = "2.28.9+cuda13.0"
GIB = 1 << 30


def table_rows(busbw_gbps: float, ranks: int) -> list[str]:
    """nccl-tests rows from 1 GiB to 8 GiB whose busbw rises to `busbw_gbps` (constructed figures;
    algbw = busbw x n / 2(n-1), as src/all_reduce.cu computes it)."""
    rows = []
    for i, size in enumerate((GIB, 2 * GIB, 4 * GIB, 8 * GIB)):
        bus = busbw_gbps * (0.94 + 0.02 * i)
        alg = bus * ranks / (2 * (ranks - 1))
        t_us = size / (alg * 1e3)
        half = f"{t_us:8.1f} {alg:7.2f} {bus:7.2f} {0:6}"
        rows.append(f"{size:>12} {size // 4:>13} {'float':>9} {'sum':>7} {-1:>7} {half} {half}")
    return rows


def launcher_log(
    hosts: list[str],
    gpus: int,
    *,
    busbw_gbps: float = 180.0,
    network: str = "IB",
    hcas: int | Mapping[str, int] = 8,
    gdr: bool | Collection[str] = True,
    gdr_hca_disabled: bool | Collection[str] = False,
    dmabuf_hosts: Collection[str] = (),
    channels: int = 16,
    dropped_lines_per_rank: int = 0,
    hca_prefix: str = "mlx5_ib",
    warnings: Mapping[str, str] | None = None,
) -> str:
    """A whole launcher log. `hcas`: per VM, or per host ({host: n}, others get 8). `network`
    "Socket" gives NCCL's fallback (no HCA, NET/Socket channels). `dropped_lines_per_rank`: INFO
    lines the launcher's filter drops (intra-node P2P channels), to give the raw log its real bulk. `gdr` and
    `gdr_hca_disabled`: for every host, or the hosts named; `dmabuf_hosts`: the hosts whose ranks print NCCL's
    "DMA-BUF is available on GPU device N" (NVIDIA/nccl v2.30.4-1 src/init.cc:413)."""

    def of(hosts_or_all: bool | Collection[str], host: str) -> bool:
        return hosts_or_all if isinstance(hosts_or_all, bool) else host in hosts_or_all

    nodes, ranks = len(hosts), len(hosts) * gpus
    out: list[str] = []

    def say(rank: int, text: str) -> None:
        out.append(f"[1,{rank}]<stdout>:{text}")

    def info(rank: int, text: str) -> None:
        host, local = hosts[rank // gpus], rank % gpus
        say(rank, f"{host}:{1000 + rank}:{1000 + rank} [{local}] NCCL INFO {text}")

    def hca_count(host: str) -> int:
        return hcas.get(host, 8) if isinstance(hcas, Mapping) else hcas

    out += [
        f"[nccl-launcher 12:00:00] nodes={nodes} gpus_per_node={gpus} np={ranks}",
        "[nccl-launcher 12:00:00] running: mpirun --tag-output ... all_reduce_perf -b 1G -e 8G -f 2 -g 1",
    ]
    say(0, "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809")
    say(0, "# Collective test starting: all_reduce_perf")
    say(0, "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
           "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0")
    say(0, "#")
    say(0, "# Using devices")
    for r in range(ranks):
        say(0, f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {hosts[r // gpus]:>10} device {r % gpus:2d} "
               f"[0000:{r % gpus:02x}:00] NVIDIA H100 80GB HBM3")
    for r in range(ranks):
        host = hosts[r // gpus]
        n = hca_count(host)
        addr = f"10.244.{hosts.index(host) % 250}.{4 + hosts.index(host) // 250}<0>"
        info(r, f"NCCL version {NCCL_VERSION}")
        if network == "Socket":
            info(r, "NET/IB : No device found.")
            info(r, f"NET/IB : Using [RO]; OOB eth0:{addr}")
            info(r, f"NET/Socket : Using [0]eth0:{addr}")
        else:
            devices = "".join(f" [{i}]{hca_prefix}{i}:1/IB" for i in range(n))
            info(r, f"NET/IB : Using{devices} [RO]; OOB eth0:{addr}")
        info(r, f"Using network {network}")
        if host in dmabuf_hosts:
            info(r, f"DMA-BUF is available on GPU device {r % gpus}")
        if network != "Socket":
            state = "Disabled" if of(gdr_hca_disabled, host) else "Enabled"
            for i in range(n):
                info(r, f"NET/IB : GPU Direct RDMA {state} for HCA {i} '{hca_prefix}{i}'")
        info(r, f"comm 0x55aa{r:08x} rank {r} nRanks {ranks} nNodes {nodes} localRanks {gpus} localRank "
                f"{r % gpus} MNNVL 0")
        for k in range(dropped_lines_per_rank):
            peer = r // gpus * gpus + (r % gpus + 1) % gpus
            info(r, f"Channel {k % 32:02d}/0 : {r}[{r % gpus}] -> {peer}[{peer % gpus}] via P2P/CUMEM/read")
    for c in range(channels):
        local = c % gpus
        for i in range(nodes):
            src, dst = i * gpus + local, (i + 1) % nodes * gpus + local
            for rank, direction in ((src, "send"), (dst, "receive")):
                flags = "/GDRDMA" if of(gdr, hosts[rank // gpus]) and network != "Socket" else ""
                dev = c % max(1, hca_count(hosts[rank // gpus])) if network != "Socket" else 0
                info(rank, f"Channel {c:02d}/0 : {src}[{local}] -> {dst}[{local}] [{direction}] "
                           f"via NET/{network}/{dev}{flags}")
    for host, text in (warnings or {}).items():
        r = hosts.index(host) * gpus
        say(r, f"{host}:{1000 + r}:{1000 + r} [0] transport/net_ib.cc:1234 NCCL WARN {text}")
    say(0, "#")
    say(0, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
           "   busbw #wrong")
    out += [f"[1,0]<stdout>:{row}" for row in table_rows(busbw_gbps, ranks)]
    say(0, "# Out of bounds values : 0 OK")
    say(0, f"# Avg bus bandwidth    : {busbw_gbps * 0.97:.4f}")
    say(0, "#")
    say(0, "# Collective test concluded: all_reduce_perf")
    out.append("[nccl-launcher 12:05:00] mpirun exited with status 0")
    return "\n".join(out) + "\n"


def worker_hosts(n: int, job: str = "nccl-allreduce") -> list[str]:
    """The workers' host names as NCCL logs them: the pod names (gethostname cut at the first '.')."""
    return [f"{job}-mpiworker-{i}" for i in range(n)]


# GPUDirect over DMA-BUF (rdmaDriver inbox), NCCL 2.30.4 as pinned: each case's log, CONSTRUCTED from the lines
# NVIDIA/nccl v2.30.4-1 prints (tests/data/nccl-info_constructed_dmabuf.md says which line comes from where).
DMABUF_NCCL_VERSION = "2.30.4+cuda13.0"
H100_HOSTS = ["nccl-allreduce-mpiworker-0", "nccl-allreduce-mpiworker-1"]


def dmabuf_case_logs() -> dict[str, str]:
    """The constructed logs of tests/data for each DMA-BUF case, by file name (2 x ND H100 v5, 8 GPUs and
    8 HCAs each, a healthy figure: only the transport lines differ)."""
    hosts = H100_HOSTS
    cases = {
        # the open kernel modules on a kernel >= 5.12: every GPU offers DMA-BUF, every HCA takes it
        "inbox-dmabuf-every-hca": dict(dmabuf_hosts=hosts),
        # the proprietary kernel modules (or CUDA < 11.7): no "DMA-BUF is available", so with no nvidia-peermem
        # NCCL disables GPUDirect on every HCA and the channels run without GDRDMA
        "inbox-no-gpu-dmabuf": dict(dmabuf_hosts=(), gdr=False, gdr_hca_disabled=True),
        # one node's kernel (< 5.12) or the image's rdma-core (< v34) refuses ibv_reg_dmabuf_mr: its GPU offers
        # DMA-BUF, its HCAs take none
        "inbox-hca-no-dmabuf-one-host": dict(dmabuf_hosts=hosts, gdr=[hosts[0]], gdr_hca_disabled=[hosts[1]]),
        # DOCA with nvidia-peermem: GPUDirect on every HCA, and no DMA-BUF line (NCCL_DMABUF_ENABLE unset would
        # print it where the GPU offers DMA-BUF; here the proprietary modules offer none)
        "doca-peermem": dict(dmabuf_hosts=()),
    }
    return {f"nccl-info_constructed_{DMABUF_NCCL_VERSION.split('+')[0]}_{name}_2x8-h100.log":
            launcher_log(hosts, 8, busbw_gbps=370.0, **kw).replace(NCCL_VERSION, DMABUF_NCCL_VERSION)
            for name, kw in cases.items()}
