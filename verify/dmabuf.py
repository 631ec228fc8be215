"""GPUDirect over DMA-BUF, proven from NCCL's own lines: the verdict's rule for a GPU pool on the node image's
own RDMA drivers (`rdmaDriver: inbox`, core/rdma_drivers.py), where no nvidia-peermem exists and DMA-BUF is
the only way GPU memory reaches the HCAs. A PASS needs, from every host of the run (NVIDIA/nccl v2.30.4-1):

1. "DMA-BUF is available on GPU device %d" (src/init.cc:413, NCCL_INIT): the CUDA driver exports GPU memory
   as DMA-BUF (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: the open kernel modules, a CUDA driver >= 11.7) and the
   network can register it (ncclNet->regMrDmaBuf); NCCL_DMABUF_ENABLE=0 also silences it;
2. "NET/IB : GPU Direct RDMA Enabled for HCA %d '%s'" (src/graph/topo.cc:1457, NCCL_NET) for every HCA the host
   opened: gdrSupport = peermem || (the GPU's DMA-BUF && the HCA's). The HCA's comes from a dummy
   ibv_reg_dmabuf_mr (src/transport/net_ib/gdr.cc ibDmaBufSupportInitOnce): EOPNOTSUPP when the kernel is
   older than 5.12 or the image's rdma-core has no ibv_reg_dmabuf_mr (src/misc/ibvwrap.cc sets it then);
3. every inter-node channel "via NET/IB/<n>/GDRDMA" (src/transport/net.cc), which verify.verdict already
   requires of every ND size.

With no peer-memory module on the pool (the GPU Operator's driver.rdma.enabled false), line 2 can only come
from DMA-BUF: NCCL prints no line that names the path itself. Without lines 1-3 the verdict is FAIL, naming
the hosts and the likely cause; a log without NCCL's INFO lines cannot show it, and is FAIL too.
"""

from __future__ import annotations

from verify.transport import Transport, natural_key

# Which layer lacks DMA-BUF, by the line that is missing (the docstring's sources).
NO_GPU_DMABUF = ("the GPU driver offers no DMA-BUF: the proprietary kernel modules instead of the open ones "
                 "(driver.kernelModuleType: open), a CUDA driver older than 11.7, or NCCL_DMABUF_ENABLE=0")
NO_HCA_DMABUF = ("the HCA takes no DMA-BUF registration: a node kernel older than 5.12, or rdma-core in the test "
                 "image older than v34 (no ibv_reg_dmabuf_mr)")


def _hosts(hosts: list[str], shown: int = 4) -> str:
    return ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown} more" if len(hosts) > shown else "")


def problems(t: Transport) -> list[str]:
    """Why the lines do not show GPUDirect over DMA-BUF on every HCA of every host (empty: they do).
    Each names the hosts (and HCAs) and the cause the missing line points at."""
    if not t.seen:
        return ["the log has no NCCL INFO lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET), so nothing shows "
                "GPUDirect over DMA-BUF"]
    ib_hosts = sorted(t.hcas_by_host, key=natural_key) or list(t.hosts)
    out: list[str] = []
    if no_gpu := [h for h in ib_hosts if h not in t.dmabuf_gpus_by_host]:
        out.append(f"no 'DMA-BUF is available on GPU device' line from {_hosts(no_gpu)}: {NO_GPU_DMABUF}")
    # where the GPU offers none, NCCL disables GPUDirect on every HCA too: that host's cause is the GPU line's
    without: dict[str, list[str]] = {}
    for host in (h for h in ib_hosts if h not in no_gpu):
        enabled = set(t.gdr_enabled_hcas_by_host.get(host, ()))
        missing = [n for n in t.hcas_by_host.get(host, ()) if n not in enabled]
        if missing or not enabled:
            without[host] = missing
    if without:
        shown = "; ".join(f"{h}: {', '.join(m) or 'none logged'}" for h, m in list(without.items())[:4])
        more = f" and {len(without) - 4} more hosts" if len(without) > 4 else ""
        out.append(f"no 'GPU Direct RDMA Enabled for HCA' line for {shown}{more}: {NO_HCA_DMABUF}")
    return out


def hosts_without(t: Transport) -> tuple[str, ...]:
    """The hosts whose lines do not show GPUDirect over DMA-BUF on every HCA they opened (a doctor pair's
    suspects: verify/doctor.py)."""
    out = []
    for host in t.hcas_by_host:
        enabled = set(t.gdr_enabled_hcas_by_host.get(host, ()))
        if host not in t.dmabuf_gpus_by_host or not enabled or set(t.hcas_by_host[host]) - enabled:
            out.append(host)
    return tuple(out)


def summary(t: Transport) -> str | None:
    """"GPUDirect over DMA-BUF on 16 HCAs of 2 hosts" when the lines show it everywhere, else None."""
    if problems(t):
        return None
    hcas = sum(len(v) for v in t.hcas_by_host.values())
    return f"GPUDirect over DMA-BUF on {hcas} HCAs of {len(t.hcas_by_host)} hosts"
