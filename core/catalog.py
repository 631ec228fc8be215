"""The SKU catalog: every hardware fact the stack depends on, for each InfiniBand-capable VM size.

Pure Python (no Pulumi import) so that the program, `verify/` and the policy pack all read the
same table. Everything SKU-dependent - GPUs requested by the job, RDMA resources, the NCCL
topology file, the bandwidth thresholds, whether the AKS feature flag is registered - comes from
here and nowhere else.

This module holds what a size is, the table, and how a size is looked up; the figures each entry carries
(what a healthy fabric delivers, each with its provenance and citations) are core/expectations.py's. Where no
public figure exists, the entry has none and the verdict for that size is UNKNOWN rather than a guess.
"""


from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import Enum

from core import expectations
from core.expectations import (
    AZNHC,
    CITE_AZURE_EXPECTED,
    CITE_GB300_BASELINE,
    CITE_GDR_H100,
    CITE_GDR_H200,
    Expectation,
    LinkExpectation,
    NodeAllReduceGate,
)

# Sources of what a size is, named once and referred to by the entries below.
SRC_NDASRV4 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndasra100v4-series"
SRC_NDAMSRV4 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndma100v4-series"
SRC_NDH100V5 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh100v5-series"
SRC_NDH200V5 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh200v5-series"
SRC_NDGB200V6 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-gb200-v6-series"
SRC_NDGB300V6 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-gb300-v6-series"
SRC_HBV3 = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hbv3-series"
SRC_HBV4 = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hbv4-series"
SRC_HX = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hx-series"
SRC_AKS_GB200_FLAG = (
    "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/README.md section 6: "
    "'Before deploying GB200/GB300 node pools, you must unregister the AKSInfinibandSupport feature flag'; "
    "GB200/GB300 pools need Ubuntu 24.04"
)
SRC_NVL72_RACK = (f"{CITE_GB300_BASELINE}: '18 nodes per MNNVL rack'; {SRC_NDGB200V6}: 'groups of 18 ND GB200 v6 "
                  "VMs' per NVL72 rack")
SRC_DRANET_GB300 = ("kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/gb300/README.md (2026-07-17): "
                    "'4 x Mellanox ConnectX | 800 Gb/s InfiniBand each', '4 x NVIDIA GB300 | 288 GB HBM3E'")
SRC_AKS_IB_FLAG = (
    "Azure/aks-rdma-infiniband@700dabb website/docs/getting-started/02-prerequisites.md "
    "('register the AKS Infiniband Support feature' so pool VMs land on one InfiniBand network)"
)


@dataclass(frozen=True)
class IbGeneration:
    """An InfiniBand generation and its per-HCA link rate (4x port), as the size pages state it."""

    name: str
    link_gbits: int  # Gb/s (bits)
    source: str


IB_GENERATIONS: dict[str, IbGeneration] = {
    g.name: g
    for g in (
        IbGeneration("HDR", 200, f"{SRC_NDASRV4} ('200 ... HDR InfiniBand connection' per GPU)"),
        IbGeneration("NDR", 400, f"{SRC_NDH100V5} ('400 Gb/s NVIDIA Quantum-2 CX7 InfiniBand' per GPU)"),
        IbGeneration("XDR", 800, f"{SRC_NDGB300V6}; {SRC_DRANET_GB300}"),
    )
}


class IbFeature(Enum):
    """What a size needs of the AKSInfinibandSupport feature on the deploying subscription."""

    # Registered (and waited for until Registered) before the pool exists, so that its VMs land on
    # one InfiniBand network (SRC_AKS_IB_FLAG).
    REGISTERED = "registered"
    # Must not be registered: the stack only checks, and stops if it is (SRC_AKS_GB200_FLAG).
    MUST_BE_ABSENT = "must-be-absent"


@dataclass(frozen=True)
class InboxRdma:
    """Whether a size may run its pool on the node image's own RDMA drivers (`rdmaDriver: inbox`: no DOCA
    driver container; GPUDirect over DMA-BUF on GPU sizes), and the evidence: what was shown where it is
    allowed, or why it is refused and what would change that (docs/rdma-drivers.md)."""

    allowed: bool
    why: str


# llm-d's AKS guide (llm-d PR #2397, Aug 2026): Standard_ND96isr_H100_v5 on AKSUbuntu-2404gen2containerd-202608.14.0,
# kernel 6.8.0-1064-azure, mlx5_core/mlx5_ib/ib_uverbs from linux-modules-6.8.0-1064-azure, the open driver 580.159.04,
# "GPUDirect mechanism | DMA-BUF", NCCL "DMA-BUF is available" and GDRDMA on all eight rails, ib_write_bw 375.97 Gb/s.
SRC_INBOX_H100 = ("llm-d PR #2397 (Aug 2026) AKS guide: Standard_ND96isr_H100_v5, AKSUbuntu-2404 202608.14.0, kernel "
                  "6.8.0-1064-azure inbox mlx5_ib, open driver 580.159.04, 'GPUDirect mechanism | DMA-BUF', NCCL "
                  "'DMA-BUF is available' and GDRDMA on all 8 rails")
SRC_DMABUF_GPU_OPERATOR = ("NVIDIA GPU Operator docs, GPUDirect RDMA: DMA-BUF recommended over nvidia-peermem, with "
                           "the open kernel modules and a kernel >= 5.12")
INBOX_NO_EVIDENCE = ("no source shows this size on AKS with the node image's RDMA modules and GPUDirect over "
                     "DMA-BUF; a qualification like llm-d's on ND H100 v5 (NCCL's 'DMA-BUF is available' and "
                     "NET/IB/.../GDRDMA on every HCA), added to its catalog entry, would change that")
# No H200 record: what was shown on H100 v5 carries over (derived), and the verdict proves it on every node.
INBOX_H200 = (f"DERIVED from ND H100 v5 ({SRC_INBOX_H100}): the same VM generation, CX7 NDR HCAs and Hopper GPUs on "
              f"the same node image; {SRC_DMABUF_GPU_OPERATOR}")
# HB/HX have no GPUs, so no GPUDirect to prove: RDMA needs mlx5_ib and ib_uverbs, which the Ubuntu Azure kernels
# ship (linux-modules-<kernel>-azure: SRC_INBOX_H100's module record), and rdma-core in the test image.
INBOX_HPC = ("RDMA without GPUs: mlx5_core/mlx5_ib/ib_uverbs come with the Ubuntu Azure kernel of AKS's node image "
             f"(as recorded in {SRC_INBOX_H100.split(':')[0]}), rdma-core with the test image; the point-to-point test "
             "proves each node")
INBOX_GRACE_BLACKWELL = (
    "Azure's Grace Blackwell path is DOCA with nvidia-peermem (its GB300 NicClusterPolicy installs DOCA, and DRANET's "
    "GB300 results ran on nvidia-peermem: docs/grace-blackwell.md); a GB200/GB300 run on AKS with the inbox modules "
    "and DMA-BUF only would change that")


@dataclass(frozen=True)
class Sku:
    vm_size: str
    family: str
    gpus_per_vm: int  # 0 for CPU-only HPC sizes
    gpu_model: str | None
    ib_hcas_per_vm: int
    ib_link_gbits: int  # per-HCA InfiniBand link rate, Gb/s (bits): IB_GENERATIONS[ib_generation]'s
    ib_generation: str  # a key of IB_GENERATIONS: "HDR" | "NDR" | "XDR"
    generation: str  # Azure's VM generation: "ndv4" | "ndv5" | "ndv6" | "hbv3" | "hbv4" | "hx" (NCCL settings key)
    nccl_topology: str | None  # id of the NCCL topology file, None when no file applies
    ib_feature: IbFeature  # what the size needs of AKSInfinibandSupport
    cpu_arch: str  # "amd64" | "arm64": which images can run
    allreduce_2_nodes: Expectation | None  # NCCL all_reduce_perf busbw at the largest size
    allreduce_more_nodes: Expectation | None
    p2p: LinkExpectation | None  # two-VM RDMA bandwidth over one HCA (judges the CPU-only fabric test)
    sources: tuple[str, ...]
    gpu_memory_gb: int = 0  # memory per GPU (the size pages in `sources`): bounds all_reduce_perf's -e
    allreduce_1_node: NodeAllReduceGate | None = None  # the fabric doctor's NVLink check; None: unpublished
    # CPU cores per VM (no SMT on these sizes: cores = threads), with where the figure comes from:
    # mpirun's core binding gives each rank cores_per_vm / gpus_per_vm of them.
    cpu_cores_per_vm: int = field(kw_only=True)
    cpu_cores_source: str = field(kw_only=True)
    # Azure requires Ubuntu 24.04 (GB200/GB300: SRC_AKS_GB200_FLAG); how the pool gets it: core/dra.py.
    needs_ubuntu_2404: bool = field(default=False, kw_only=True)
    # Multi-node NVLink: nodes per NVL72 rack (needs the DRA driver's ComputeDomain; the verdict judges an
    # IB-only run). None: NVLink stays inside the VM.
    mnnvl_rack_nodes: int | None = field(default=None, kw_only=True)
    # The all-reduce of nodes of one rack over MNNVL: reported beside the IB verdict, never in it.
    allreduce_rack: Expectation | None = field(default=None, kw_only=True)
    # Whether `rdmaDriver: inbox` may run this size, with the evidence (core/rdma_drivers.py reads it).
    inbox_rdma: InboxRdma = field(kw_only=True)

    def __post_init__(self) -> None:
        gen = IB_GENERATIONS.get(self.ib_generation)
        if gen is None or gen.link_gbits != self.ib_link_gbits:
            raise ValueError(f"{self.vm_size}: ib_generation {self.ib_generation!r} at {self.ib_link_gbits} Gb/s; "
                             f"generations: {', '.join(f'{g.name} {g.link_gbits}' for g in IB_GENERATIONS.values())}")
        if self.allreduce_rack and not self.mnnvl_rack_nodes:
            raise ValueError(f"{self.vm_size}: a rack (MNNVL) expectation needs mnnvl_rack_nodes")

    @property
    def has_mnnvl(self) -> bool:
        return self.mnnvl_rack_nodes is not None

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_vm > 0

    @property
    def expects_gpudirect_rdma(self) -> bool:
        """NCCL should move GPU memory straight to the HCA on this size: every GPU size in the catalog
        is an ND size, built for GPUDirect RDMA (the GPU Operator's driver.rdma, NCCL_NET_GDR_LEVEL)."""
        return self.has_gpus

    @property
    def ib_line_rate_gbps(self) -> float:
        """Per-HCA line rate in GB/s (bytes, the unit of NCCL's busbw): 200 Gb/s -> 25 GB/s."""
        return self.ib_link_gbits / 8

    def allreduce_expectation(self, nodes: int) -> Expectation | None:
        """The all-reduce expectation for a run across `nodes` VMs (None below 2: no fabric crossed)."""
        if nodes < 2:
            return None
        return self.allreduce_2_nodes if nodes == 2 else self.allreduce_more_nodes


SRC_CORES_ND = (f"{AZNHC} conf/nd96asr_v4.conf, nd96amsr_a100_v4.conf, nd96isr_h100_v5.conf, "
                "nd96isr_h200_v5.conf: check_hw_cpuinfo 2 96 96 (2 sockets, 96 cores, 96 threads)")
SRC_CORES_HBV3 = f"{AZNHC} conf/hb120rs_v3.conf: check_hw_cpuinfo 2 120 120"
SRC_CORES_HBV4 = f"{AZNHC} conf/hb176rs_v4.conf and conf/hx176rs.conf: check_hw_cpuinfo 2 176 176"
SRC_CORES_GB200 = ("microsoft/aspire@5bd693a src/Aspire.Hosting.Azure.Kubernetes/AksNodeVmSizes.cs: "
                   "'Standard_ND128isr_NDR_GB200_v6 -- 128 vCPUs' (aznhc has no GB200 conf)")
# No GB300 core count found: the size name carries it (ND128), as GB200's, which SRC_CORES_GB200 confirms.
SRC_CORES_GB300 = ("DERIVED from the size name Standard_ND128isr_GB300_v6 (128 vCPUs, as GB200's ND128; "
                   f"{SRC_CORES_GB200})")


SKUS: dict[str, Sku] = {
    s.vm_size: s
    for s in (
        Sku(
            vm_size="Standard_ND96asr_v4",
            family="ND A100 v4",
            gpus_per_vm=8,
            gpu_model="A100 40GB",
            ib_hcas_per_vm=8,
            ib_link_gbits=200,
            ib_generation="HDR",
            generation="ndv4",
            nccl_topology="ndv4",
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=expectations.A100,
            allreduce_more_nodes=expectations.A100,
            p2p=expectations.A100_LINK,
            sources=(SRC_NDASRV4, str(CITE_AZURE_EXPECTED), SRC_AKS_IB_FLAG),
            gpu_memory_gb=40,
            allreduce_1_node=expectations.node_gate("nd96asr_v4", 228.0, "8G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
            inbox_rdma=InboxRdma(False, INBOX_NO_EVIDENCE),
        ),
        Sku(
            vm_size="Standard_ND96amsr_A100_v4",
            family="NDm A100 v4",
            gpus_per_vm=8,
            gpu_model="A100 80GB",
            ib_hcas_per_vm=8,
            ib_link_gbits=200,
            ib_generation="HDR",
            generation="ndv4",
            nccl_topology="ndv4",
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=expectations.A100,
            allreduce_more_nodes=expectations.A100,
            p2p=expectations.A100_LINK,
            sources=(SRC_NDAMSRV4, str(CITE_AZURE_EXPECTED), SRC_AKS_IB_FLAG),
            gpu_memory_gb=80,
            allreduce_1_node=expectations.node_gate("nd96amsr_a100_v4", 228.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
            inbox_rdma=InboxRdma(False, INBOX_NO_EVIDENCE),
        ),
        Sku(
            vm_size="Standard_ND96isr_H100_v5",
            family="ND H100 v5",
            gpus_per_vm=8,
            gpu_model="H100 80GB",
            ib_hcas_per_vm=8,
            ib_link_gbits=400,
            ib_generation="NDR",
            generation="ndv5",
            nccl_topology="ndv5",
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=expectations.H100_DERIVED,
            allreduce_more_nodes=expectations.H100_DERIVED,
            p2p=expectations.H100_LINK,
            sources=(SRC_NDH100V5, str(CITE_GDR_H100), SRC_AKS_IB_FLAG),
            gpu_memory_gb=80,
            allreduce_1_node=expectations.node_gate("nd96isr_h100_v5", 460.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
            inbox_rdma=InboxRdma(True, f"{SRC_INBOX_H100}; {SRC_DMABUF_GPU_OPERATOR}"),
        ),
        Sku(
            vm_size="Standard_ND96isr_H200_v5",
            family="ND H200 v5",
            gpus_per_vm=8,
            gpu_model="H200 141GB",
            ib_hcas_per_vm=8,
            ib_link_gbits=400,
            ib_generation="NDR",
            generation="ndv5",
            nccl_topology="ndv5",
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=expectations.H200_DERIVED,
            allreduce_more_nodes=expectations.H200_DERIVED,
            p2p=expectations.H200_LINK,
            sources=(SRC_NDH200V5, str(CITE_GDR_H200), SRC_AKS_IB_FLAG),
            gpu_memory_gb=141,
            allreduce_1_node=expectations.node_gate("nd96isr_h200_v5", 431.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
            inbox_rdma=InboxRdma(True, INBOX_H200),
        ),
        Sku(
            vm_size="Standard_HB120rs_v3",
            family="HBv3",
            gpus_per_vm=0,
            gpu_model=None,
            ib_hcas_per_vm=1,
            ib_link_gbits=200,
            ib_generation="HDR",
            generation="hbv3",
            nccl_topology=None,
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=None,
            allreduce_more_nodes=None,
            p2p=expectations.HBV3_LINK,
            sources=(SRC_HBV3, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=120,
            cpu_cores_source=SRC_CORES_HBV3,
            inbox_rdma=InboxRdma(True, INBOX_HPC),
        ),
        Sku(
            vm_size="Standard_HB176rs_v4",
            family="HBv4",
            gpus_per_vm=0,
            gpu_model=None,
            ib_hcas_per_vm=1,
            ib_link_gbits=400,
            ib_generation="NDR",
            generation="hbv4",
            nccl_topology=None,
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=None,
            allreduce_more_nodes=None,
            p2p=expectations.NDR_HOST_LINK,
            sources=(SRC_HBV4, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=176,
            cpu_cores_source=SRC_CORES_HBV4,
            inbox_rdma=InboxRdma(True, INBOX_HPC),
        ),
        Sku(
            vm_size="Standard_HX176rs",
            family="HX",
            gpus_per_vm=0,
            gpu_model=None,
            ib_hcas_per_vm=1,
            ib_link_gbits=400,
            ib_generation="NDR",
            generation="hx",
            nccl_topology=None,
            ib_feature=IbFeature.REGISTERED,
            cpu_arch="amd64",
            allreduce_2_nodes=None,
            allreduce_more_nodes=None,
            p2p=expectations.NDR_HOST_LINK,
            sources=(SRC_HX, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=176,
            cpu_cores_source=SRC_CORES_HBV4,
            inbox_rdma=InboxRdma(True, INBOX_HPC),
        ),
        Sku(
            vm_size="Standard_ND128isr_NDR_GB200_v6",
            family="ND GB200 v6",
            gpus_per_vm=4,
            gpu_model="GB200 (Blackwell, 192GB)",
            ib_hcas_per_vm=4,
            ib_link_gbits=400,
            ib_generation="NDR",
            generation="ndv6",
            nccl_topology=None,  # Azure publishes no topology file for it (reference/topology)
            ib_feature=IbFeature.MUST_BE_ABSENT,  # Azure: unregister it for GB200/GB300
            cpu_arch="arm64",
            # No published GB200 figure, and GB300's do not transfer (half the link rate): UNKNOWN
            allreduce_2_nodes=None,
            allreduce_more_nodes=None,
            p2p=None,  # aznhc has no GB200 conf: no GDR gate to judge one HCA by
            sources=(SRC_NDGB200V6, SRC_AKS_GB200_FLAG, SRC_NVL72_RACK),
            gpu_memory_gb=192,
            cpu_cores_per_vm=128,
            cpu_cores_source=SRC_CORES_GB200,
            inbox_rdma=InboxRdma(False, INBOX_GRACE_BLACKWELL),
            needs_ubuntu_2404=True,  # SRC_AKS_GB200_FLAG
            mnnvl_rack_nodes=18,  # SRC_NVL72_RACK
        ),
        Sku(
            vm_size="Standard_ND128isr_GB300_v6",
            family="ND GB300 v6",
            gpus_per_vm=4,
            gpu_model="GB300 (Blackwell Ultra, 288GB)",
            ib_hcas_per_vm=4,
            ib_link_gbits=800,
            ib_generation="XDR",
            generation="ndv6",
            nccl_topology=None,  # no published topology file
            ib_feature=IbFeature.MUST_BE_ABSENT,  # SRC_AKS_GB200_FLAG names GB300 too
            cpu_arch="arm64",
            # judged from the IB-only run (MNNVL and NVLS off) by Azure's inter-rack figure
            allreduce_2_nodes=expectations.GB300_IB_ONLY,
            allreduce_more_nodes=expectations.GB300_IB_ONLY,
            p2p=None,  # aznhc has no GB300 conf: no GDR gate to judge one HCA by
            sources=(SRC_NDGB300V6, SRC_DRANET_GB300, str(CITE_GB300_BASELINE), SRC_AKS_GB200_FLAG, SRC_NVL72_RACK),
            gpu_memory_gb=288,  # SRC_DRANET_GB300
            cpu_cores_per_vm=128,
            cpu_cores_source=SRC_CORES_GB300,
            inbox_rdma=InboxRdma(False, INBOX_GRACE_BLACKWELL),
            needs_ubuntu_2404=True,
            mnnvl_rack_nodes=18,
            allreduce_rack=expectations.GB300_MNNVL,
        ),
    )
}


def supported_sizes() -> list[str]:
    return sorted(SKUS)


def size_key(vm_size: object) -> str:
    """A size as Azure compares it: case-insensitive, and `Standard_` optional (`ND96asr_v4`)."""
    name = str(vm_size).strip().lower()
    return name[len("standard_"):] if name.startswith("standard_") else name


def closest(vm_size: object, n: int = 3) -> list[str]:
    """The catalog's sizes nearest to `vm_size` (for "did you mean"), best first."""
    keys = {size_key(name): name for name in SKUS}
    return [keys[k] for k in difflib.get_close_matches(size_key(vm_size), list(keys), n=n, cutoff=0.6)]


def lookup(vm_size: str) -> Sku:
    """The catalog entry for `vm_size`: case-insensitive, as Azure treats sizes, with or without the
    `Standard_` prefix (`ND96asr_v4`, `standard_nd96asr_v4`). The one place a size is recognised.

    Raises KeyError naming the closest sizes and the supported ones for anything else.
    """
    for name, sku in SKUS.items():
        if size_key(name) == size_key(vm_size):
            return sku
    near = closest(vm_size)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise KeyError(
        f"{vm_size!r} is not an InfiniBand-capable size in the catalog; {hint}supported: {', '.join(supported_sizes())}"
    )
