"""The RDMA driver stack of an InfiniBand pool (`ibPool.rdmaDriver`): one `RdmaDriver` per choice, looked
up by name, and the one rule of which size may run which (`problem`), read from the size's catalog entry
(`Sku.inbox_rdma`). docs/rdma-drivers.md says when to choose which, the evidence and the open risks.

- `doca`: the Network Operator's DOCA driver container, compiled on every new node, replaces the kernel's
  mlx5 modules; the GPU driver waits for it and loads nvidia-peermem against it (`driver.rdma.enabled`).
- `inbox`: the node image's own mlx5_core/mlx5_ib/ib_uverbs; GPU memory reaches the HCA through DMA-BUF
  (the GPU driver's open kernel modules, kernel >= 5.12), with no peer-memory module. The verdict then
  requires NCCL's own lines showing it on every HCA (verify/dmabuf.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog import Sku

# How GPU memory reaches the HCA (GPUDirect RDMA): NCCL's two registration paths (NVIDIA/nccl v2.30.4-1
# src/transport/net_ib/init.cc ncclIbGetPhysProperties: NCCL_PTR_CUDA "via nv_peermem", NCCL_PTR_DMABUF "via DMA-BUF").
PEERMEM = "peermem"
DMABUF = "dmabuf"


@dataclass(frozen=True)
class RdmaDriver:
    name: str
    description: str  # for the configuration reference
    installs_doca: bool  # the NicClusterPolicy's ofedDriver: the DOCA driver container on the pool's nodes
    gdr: str  # PEERMEM | DMABUF: how GPU memory reaches the HCA on GPU sizes


DOCA = RdmaDriver("doca", "the Network Operator's DOCA driver container (built on every new node), GPUDirect through "
                          "nvidia-peermem", installs_doca=True, gdr=PEERMEM)
INBOX = RdmaDriver("inbox", "the node image's own mlx5/ib_uverbs modules, no DOCA build; on GPU sizes GPUDirect over "
                            "DMA-BUF (the GPU driver's open kernel modules, no nvidia-peermem), which the verdict "
                            "requires NCCL to show on every HCA", installs_doca=False, gdr=DMABUF)
DRIVERS: dict[str, RdmaDriver] = {d.name: d for d in (DOCA, INBOX)}
# DOCA until a measured run on Azure says otherwise (docs/rdma-drivers.md).
DEFAULT = DOCA.name


def names() -> list[str]:
    return list(DRIVERS)


def rdma_driver(name: str) -> RdmaDriver:
    """The record of `name`; a KeyError naming the drivers there are otherwise."""
    try:
        return DRIVERS[name]
    except KeyError:
        raise KeyError(f"unknown rdmaDriver {name!r}; known: {', '.join(DRIVERS)}") from None


def config_description() -> str:
    return ("The pool's RDMA driver stack: " + "; ".join(f"`{d.name}`: {d.description}" for d in DRIVERS.values())
            + ". `inbox` only on sizes whose catalog entry has the evidence (docs/rdma-drivers.md).")


def problem(sku: Sku, driver: RdmaDriver) -> str | None:
    """Why `sku` may not run on `driver` (None: it may). DOCA runs everywhere; the node image's own drivers
    only where the catalog entry holds the evidence, and the refusal says what would change it."""
    if driver.installs_doca or sku.inbox_rdma.allowed:
        return None
    return f"{sku.vm_size} cannot run on the node image's own RDMA drivers: {sku.inbox_rdma.why}; use doca"


def gdr_via_dmabuf(sku: Sku, driver: RdmaDriver) -> bool:
    """Whether NCCL's lines must show GPUDirect through DMA-BUF on every HCA for a PASS: a GPU size that
    expects GPUDirect RDMA, on a driver stack without peer memory."""
    return sku.expects_gpudirect_rdma and driver.gdr == DMABUF
