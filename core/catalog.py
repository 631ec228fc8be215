"""The SKU catalog: every hardware fact the stack depends on, for each InfiniBand-capable VM size.

Pure Python (no Pulumi import) so that the program, `verify/` and the policy pack all read the
same table. Everything SKU-dependent - GPUs requested by the job, RDMA resources, the NCCL
topology file, the bandwidth thresholds, whether the AKS feature flag is registered - comes from
here and nowhere else.

Every figure names its source. Where no public measurement exists, the entry says so and the
verdict for that size is UNKNOWN rather than a guess.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import Enum

# Sources, named once and referred to by the entries below.
SRC_NDASRV4 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndasra100v4-series"
SRC_NDAMSRV4 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndma100v4-series"
SRC_NDH100V5 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh100v5-series"
SRC_NDH200V5 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh200v5-series"
SRC_NDGB200V6 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-gb200-v6-series"
SRC_NDGB300V6 = "learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-gb300-v6-series"
SRC_HBV3 = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hbv3-series"
SRC_HBV4 = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hbv4-series"
SRC_HX = "learn.microsoft.com/azure/virtual-machines/sizes/high-performance-compute/hx-series"
SRC_AZURE_EXPECTED = (
    "Azure/aks-rdma-infiniband@700dabb tests/expected-output.md section 1.1 "
    "(2 nodes x 8 A100: busbw 187.22 GB/s at 8 GiB; 'less than 180 indicates a problem')"
)
SRC_AKS_GB200_FLAG = (
    "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/README.md section 6: "
    "'Before deploying GB200/GB300 node pools, you must unregister the AKSInfinibandSupport feature flag'; "
    "GB200/GB300 pools need Ubuntu 24.04"
)
# Azure's published expectations for GB300 (a guidance table, not a log: "Baselines assume a full rack
# at 16 G message size"); warn is where Azure says to re-test, GHR where it says to file a health report.
SRC_GB300_BASELINE = ("Azure/ai-infrastructure-on-azure@a01b073 skills/slurm/sku_performance_baseline/SKILL.md, "
                      "Standard_ND128isr_GB300_v6: all_reduce busbw at 16 G")
SRC_GB300_IB_ONLY = f"{SRC_GB300_BASELINE} (inter-rack, IB-only): ~200 GB/s, warn < 180, GHR < 150"
SRC_GB300_MNNVL = f"{SRC_GB300_BASELINE} (intra-rack, MNNVL): ~937 GB/s, warn < 800, GHR < 600"
SRC_NVL72_RACK = (f"{SRC_GB300_BASELINE}: '18 nodes per MNNVL rack (ClusterUUID)'; {SRC_NDGB200V6}: 'groups of 18 "
                  "ND GB200 v6 VMs' per NVL72 rack (docs/sku-sources.md Q1)")
SRC_DRANET_GB300 = ("kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/gb300/README.md: '4 x Mellanox "
                    "ConnectX | 800 Gb/s InfiniBand each', '4 x NVIDIA GB300 | 288 GB HBM3E', 2 NUMA nodes")
SRC_AKS_IB_FLAG = (
    "Azure/aks-rdma-infiniband@700dabb website/docs/getting-started/02-prerequisites.md "
    "('register the AKS Infiniband Support feature' so pool VMs land on one InfiniBand network)"
)


@dataclass(frozen=True)
class Expectation:
    """What a healthy fabric delivers, and below what a run is a failure. Units in the name."""

    baseline_gbps: float  # GB/s (bytes), as nccl-tests prints busbw
    threshold_gbps: float  # below this: FAIL
    source: str

    def __post_init__(self) -> None:
        if not 0 < self.threshold_gbps <= self.baseline_gbps:
            raise ValueError(f"threshold {self.threshold_gbps} must be in (0, baseline {self.baseline_gbps}]")

    @property
    def derived(self) -> bool:
        """True when the figures are derived rather than published measurements: a run below such a
        threshold is suspicious, not proven bad (the verdict says WARN, not FAIL)."""
        return self.source.startswith("DERIVED")


@dataclass(frozen=True)
class LinkExpectation:
    """Point-to-point bandwidth between two VMs over one HCA, in Gb/s (bits), as perftest prints
    it with --report_gbits (osu_bw prints MB/s: 1 Gb/s = 125 MB/s)."""

    baseline_gbits: float  # the link's line rate
    threshold_gbits: float  # below this: FAIL (when measured with `gate_tool`)
    source: str
    gate_tool: str = "ib_write_bw"  # what the threshold was measured with (Azure's health checks)
    # the memory the gate's ib_write_bw moved: "cuda" (GPU memory, --use_cuda: GPUDirect RDMA,
    # check_ib_bw_gdr) or "host" (check_ib_bw_non_gdr)
    gate_memory: str = "host"
    # Another tool (osu_bw: MPI over UCX) between this and the threshold reads WARN, not FAIL: the
    # gate was set for raw verbs. None: no band, the threshold is the line for every tool.
    other_tool_warn_from_gbits: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.threshold_gbits <= self.baseline_gbits:
            raise ValueError(f"threshold {self.threshold_gbits} must be in (0, baseline {self.baseline_gbits}]")
        if self.gate_memory not in ("cuda", "host"):
            raise ValueError(f"gate_memory {self.gate_memory!r} must be 'cuda' or 'host'")
        if self.other_tool_warn_from_gbits is not None and not 0 < self.other_tool_warn_from_gbits <= (
                self.threshold_gbits):
            raise ValueError(f"WARN band from {self.other_tool_warn_from_gbits} must be in (0, threshold "
                             f"{self.threshold_gbits}]")


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
class NodeAllReduceGate:
    """A single-node all-reduce over all of a VM's GPUs (NVLink, no fabric): Azure's health-check
    gate, busbw in GB/s at one message size (azurehpc-health-checks `check_nccl_allreduce EXP 1 SIZE`,
    which judges the footer's average of a `-b SIZE -e SIZE` run, i.e. the busbw at that size)."""

    threshold_gbps: float  # GB/s (bytes) busbw; below it Azure's health check fails the node
    size: str  # the message size Azure runs, as all_reduce_perf's -b/-e take it, e.g. "16G"
    source: str


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
    # AKS's osSKU for the pool: `Ubuntu` (22.04 up to 1.34, 24.04 from 1.35: learn.microsoft.com/azure/
    # aks/upgrade-os-version), or `Ubuntu2404` where Azure requires 24.04 (GB200/GB300: SRC_AKS_GB200_FLAG).
    os_sku: str = field(default="Ubuntu", kw_only=True)
    # Multi-node NVLink (MNNVL): the nodes of one NVL72 rack share an NVLink domain (this many). Such
    # a size needs the NVIDIA DRA driver and a ComputeDomain for NCCL to use it, and its fabric verdict
    # judges InfiniBand from a run with MNNVL off. None: NVLink stays inside the VM.
    mnnvl_rack_nodes: int | None = field(default=None, kw_only=True)
    # The all-reduce of nodes of one rack over MNNVL: reported beside the IB verdict, never in it.
    allreduce_rack: Expectation | None = field(default=None, kw_only=True)

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


_A100 = Expectation(baseline_gbps=187.0, threshold_gbps=180.0, source=SRC_AZURE_EXPECTED)

# Azure's own health checks (aznhc), one gate per size, read at one commit. `check_ib_bw_gdr` is a
# single-node ib_write_bw loopback per HCA from GPU memory (GPUDirect RDMA), in Gb/s per HCA;
# `check_ib_bw_non_gdr` the same from host memory (the CPU-only sizes); `check_nccl_allreduce` a
# single-node (NVLink only) all-reduce busbw in GB/s; `check_hw_cpuinfo` sockets, cores, threads.
AZNHC = "Azure/azurehpc-health-checks@0e0a1ac"
SRC_GDR_A100 = f"{AZNHC} conf/nd96asr_v4.conf and conf/nd96amsr_a100_v4.conf: check_ib_bw_gdr 180.0"
SRC_GDR_H100 = (f"{AZNHC} conf/nd96isr_h100_v5.conf: check_ib_bw_gdr 380 "
                "(its single-node check_nccl_allreduce: 460.0 GB/s at 16G)")
SRC_GDR_H200 = (f"{AZNHC} conf/nd96isr_h200_v5.conf: check_ib_bw_gdr 360 "
                "(its single-node check_nccl_allreduce: 431.0 GB/s at 16G; H100's are 380 and 460)")
SRC_NON_GDR_HBV3 = f"{AZNHC} conf/hb120rs_v3.conf: check_ib_bw_non_gdr 190"
SRC_NON_GDR_NDR = f"{AZNHC} conf/hb176rs_v4.conf and conf/hx176rs.conf: check_ib_bw_non_gdr 390"
SRC_CORES_ND = (f"{AZNHC} conf/nd96asr_v4.conf, nd96amsr_a100_v4.conf, nd96isr_h100_v5.conf, "
                "nd96isr_h200_v5.conf: check_hw_cpuinfo 2 96 96 (2 sockets, 96 cores, 96 threads)")
SRC_CORES_HBV3 = f"{AZNHC} conf/hb120rs_v3.conf: check_hw_cpuinfo 2 120 120"
SRC_CORES_HBV4 = f"{AZNHC} conf/hb176rs_v4.conf and conf/hx176rs.conf: check_hw_cpuinfo 2 176 176"
SRC_CORES_GB200 = ("microsoft/aspire@5bd693a src/Aspire.Hosting.Azure.Kubernetes/AksNodeVmSizes.cs: "
                   "'Standard_ND128isr_NDR_GB200_v6 -- 128 vCPUs' (aznhc has no GB200 conf)")
# No core count for GB300 in the sources read: Azure's size names carry the vCPU count (ND128...),
# which for GB200's ND128 SRC_CORES_GB200 confirms. Derived from the name, not measured.
SRC_CORES_GB300 = ("DERIVED from the size name Standard_ND128isr_GB300_v6 (128 vCPUs, as GB200's ND128; "
                   f"{SRC_CORES_GB200})")
SRC_AICR_H100_AKS = (
    "NVIDIA/aicr#1699 (2026-07-09): 157.11 GB/s busbw on 2 x Standard_ND96isr_H100_v5 on AKS, gate >= 150; "
    "#1840: 157.5 GB/s on the same pair (its NCCL settings NOT FOUND in the sources read, docs/sku-sources.md "
    "Q7; issue 13 reads it as untuned, NCCL_NET_PLUGIN=none, shared HCA pool)"
)
SRC_AZNHC_NCCL = "Azure/azurehpc-health-checks@0e0a1ac conf/{conf}.conf check_nccl_allreduce {gbps} 1 {size}"
# NCCL's maintainers' figure for what one NIC carries at best in an all-reduce (busbw), per 200 Gb/s of
# line rate: 24 GB/s, i.e. 48 GB/s for a 400 Gb/s NDR HCA.
NCCL_PEAK_GBPS_PER_200G = 24.0
SRC_NCCL_PEAK = ("NVIDIA/nccl-tests#119 (sjeaugey, 2022-11-17): 'We usually consider 24GB/s is the peak "
                 "performance per 200G NIC (12 GB/s for 100G NICs)'")


def nccl_peak_gbps(hcas: int, link_gbits: float) -> float:
    """The all-reduce busbw NCCL's maintainers call the peak of `hcas` NICs of `link_gbits` each
    (SRC_NCCL_PEAK): 8 x HDR 200 -> 192 GB/s, 8 x NDR 400 -> 384 GB/s."""
    return hcas * NCCL_PEAK_GBPS_PER_200G * link_gbits / 200


def _node_gate(conf: str, gbps: float, size: str) -> NodeAllReduceGate:
    source = SRC_AZNHC_NCCL.format(conf=conf, gbps=gbps, size=size)
    return NodeAllReduceGate(threshold_gbps=gbps, size=size, source=source)


# The one published pair, as fractions of its NICs' NCCL peak (8 x HDR 200: 192 GB/s): baseline 187 is
# 97.4 %, the fail line 180 is 93.75 %.
_A100_PEAK_GBPS = nccl_peak_gbps(8, 200)
AICR_H100_AKS_BUSBW_GBPS = 157.11  # SRC_AICR_H100_AKS


def _weighed(threshold_gbps: float) -> str:
    return (f"Weighed against {SRC_AICR_H100_AKS}: {AICR_H100_AKS_BUSBW_GBPS / threshold_gbps:.0%} of this "
            "threshold, not used as a baseline (its settings are unknown; its gate of 150 is a liveness check); "
            "it is why these stay derived (WARN, never FAIL, until a measurement on AKS with Azure's settings "
            "exists). Azure's only H100 multi-node figure is 8 nodes with SHARP "
            "(Azure/ai-infrastructure-on-azure@a01b073 skills/slurm/sku_performance_baseline: ~450 GB/s, warn < 400)")


def _derived_from_nccl_peak(hcas: int, link_gbits: int) -> Expectation:
    """The 2-node all-reduce expectation of an ND size that Azure publishes no multi-node figure for,
    placed where the one published pair sits relative to its NICs' NCCL peak. DERIVED, not measured,
    so a run below it is WARN (and no WARN band applies above it: verify.verdict)."""
    peak = nccl_peak_gbps(hcas, link_gbits)
    baseline_fraction = _A100.baseline_gbps / _A100_PEAK_GBPS
    threshold_fraction = _A100.threshold_gbps / _A100_PEAK_GBPS
    threshold = round(peak * threshold_fraction, 1)
    return Expectation(
        baseline_gbps=round(peak * baseline_fraction, 1),
        threshold_gbps=threshold,
        source=(
            f"DERIVED, not measured: {hcas} x {link_gbits} Gb/s HCAs peak at {peak:g} GB/s busbw in NCCL "
            f"({hcas} x {NCCL_PEAK_GBPS_PER_200G * link_gbits / 200:g}; {SRC_NCCL_PEAK}); baseline and "
            f"threshold sit where ND A100 v4's published pair sits against its own peak of "
            f"{_A100_PEAK_GBPS:g} (8 x 24): baseline 187 = {baseline_fraction:.1%}, fail line 180 = "
            f"{threshold_fraction:.2%} ({SRC_AZURE_EXPECTED}). {_weighed(threshold)}"
        ),
    )


def _scaled_by_gdr_gate(of: Expectation, of_name: str, of_gate_gbits: float, gate_gbits: float,
                        gate_source: str) -> Expectation:
    """`of` scaled by the ratio of two sizes' GPUDirect RDMA gates (Azure's per-HCA health check): a
    size whose HCAs Azure gates lower gets a lower line, from its own figure rather than a copy."""
    scale = gate_gbits / of_gate_gbits
    return Expectation(
        baseline_gbps=round(of.baseline_gbps * scale, 1),
        threshold_gbps=round(of.threshold_gbps * scale, 1),
        source=(
            f"DERIVED, not measured: {of_name}'s derived {of.baseline_gbps:g} / {of.threshold_gbps:g} GB/s x "
            f"{gate_gbits:g}/{of_gate_gbits:g}, the ratio of Azure's GPUDirect RDMA gates per HCA ({gate_source}; "
            f"{of_name}'s {of_gate_gbits:g}); {of_name}'s figures: {of.source}"
        ),
    )


_H100_GDR_GATE_GBITS, _H200_GDR_GATE_GBITS = 380.0, 360.0
_H100_DERIVED = _derived_from_nccl_peak(8, 400)
_H200_DERIVED = _scaled_by_gdr_gate(_H100_DERIVED, "ND H100 v5", _H100_GDR_GATE_GBITS, _H200_GDR_GATE_GBITS,
                                    SRC_GDR_H200)

# GB300: Azure's own published figures (SRC_GB300_BASELINE), not derived. The fail line is Azure's
# warn line, below which its guide says to re-test (its GHR line, 150 / 600, is for a health report).
_GB300_IB_ONLY = Expectation(baseline_gbps=200.0, threshold_gbps=180.0, source=SRC_GB300_IB_ONLY)
_GB300_MNNVL = Expectation(baseline_gbps=937.0, threshold_gbps=800.0, source=SRC_GB300_MNNVL)

# Point to point over one HCA. GPU sizes: the line rate and the size's own GPUDirect RDMA gate (what
# a GPU-memory ib_write_bw must reach). CPU-only sizes: the host-memory gate. Azure measures every
# gate with ib_write_bw (raw verbs); osu_bw adds MPI/UCX on top, so on the NDR sizes, whose gate sits
# at 97.5 % of the line rate, osu_bw gets a WARN band below the gate down to 95 % of the line rate
# (the fraction HBv3's own gate allows, 190 of 200): derived, not measured (no published osu_bw
# figure for HBv4/HX).
_A100_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=180.0, gate_memory="cuda",
                             source=f"HDR line rate; {SRC_GDR_A100}")
_H100_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H100_GDR_GATE_GBITS, gate_memory="cuda",
                             source=f"NDR line rate; {SRC_GDR_H100}")
_H200_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H200_GDR_GATE_GBITS, gate_memory="cuda",
                             source=f"NDR line rate; {SRC_GDR_H200}")
_HBV3_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=190.0, source=f"HDR line rate; {SRC_NON_GDR_HBV3}")
_NDR_HOST_LINK = LinkExpectation(
    baseline_gbits=400.0, threshold_gbits=390.0, other_tool_warn_from_gbits=380.0,
    source=(f"NDR line rate; {SRC_NON_GDR_NDR}; osu_bw WARN band 380-390 DERIVED: 95 % of the line rate, "
            f"the fraction of {SRC_NON_GDR_HBV3}"),
)

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
            allreduce_2_nodes=_A100,
            allreduce_more_nodes=_A100,
            p2p=_A100_LINK,
            sources=(SRC_NDASRV4, SRC_AZURE_EXPECTED, SRC_AKS_IB_FLAG),
            gpu_memory_gb=40,
            allreduce_1_node=_node_gate("nd96asr_v4", 228.0, "8G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
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
            allreduce_2_nodes=_A100,
            allreduce_more_nodes=_A100,
            p2p=_A100_LINK,
            sources=(SRC_NDAMSRV4, SRC_AZURE_EXPECTED, SRC_AKS_IB_FLAG),
            gpu_memory_gb=80,
            allreduce_1_node=_node_gate("nd96amsr_a100_v4", 228.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
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
            allreduce_2_nodes=_H100_DERIVED,
            allreduce_more_nodes=_H100_DERIVED,
            p2p=_H100_LINK,
            sources=(SRC_NDH100V5, SRC_GDR_H100, SRC_AKS_IB_FLAG),
            gpu_memory_gb=80,
            allreduce_1_node=_node_gate("nd96isr_h100_v5", 460.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
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
            allreduce_2_nodes=_H200_DERIVED,
            allreduce_more_nodes=_H200_DERIVED,
            p2p=_H200_LINK,
            sources=(SRC_NDH200V5, SRC_GDR_H200, SRC_AKS_IB_FLAG),
            gpu_memory_gb=141,
            allreduce_1_node=_node_gate("nd96isr_h200_v5", 431.0, "16G"),
            cpu_cores_per_vm=96,
            cpu_cores_source=SRC_CORES_ND,
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
            p2p=_HBV3_LINK,
            sources=(SRC_HBV3, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=120,
            cpu_cores_source=SRC_CORES_HBV3,
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
            p2p=_NDR_HOST_LINK,
            sources=(SRC_HBV4, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=176,
            cpu_cores_source=SRC_CORES_HBV4,
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
            p2p=_NDR_HOST_LINK,
            sources=(SRC_HX, SRC_AKS_IB_FLAG),
            cpu_cores_per_vm=176,
            cpu_cores_source=SRC_CORES_HBV4,
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
            os_sku="Ubuntu2404",  # SRC_AKS_GB200_FLAG
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
            allreduce_2_nodes=_GB300_IB_ONLY,
            allreduce_more_nodes=_GB300_IB_ONLY,
            p2p=None,  # aznhc has no GB300 conf: no GDR gate to judge one HCA by
            sources=(SRC_NDGB300V6, SRC_DRANET_GB300, SRC_GB300_BASELINE, SRC_AKS_GB200_FLAG, SRC_NVL72_RACK),
            gpu_memory_gb=288,  # SRC_DRANET_GB300
            cpu_cores_per_vm=128,
            cpu_cores_source=SRC_CORES_GB300,
            os_sku="Ubuntu2404",
            mnnvl_rack_nodes=18,
            allreduce_rack=_GB300_MNNVL,
        ),
    )
}


def supported_sizes() -> list[str]:
    return sorted(SKUS)


def _key(vm_size: object) -> str:
    """A size as Azure compares it: case-insensitive, and `Standard_` optional (`ND96asr_v4`)."""
    name = str(vm_size).strip().lower()
    return name[len("standard_"):] if name.startswith("standard_") else name


def closest(vm_size: object, n: int = 3) -> list[str]:
    """The catalog's sizes nearest to `vm_size` (for "did you mean"), best first."""
    keys = {_key(name): name for name in SKUS}
    return [keys[k] for k in difflib.get_close_matches(_key(vm_size), list(keys), n=n, cutoff=0.6)]


def lookup(vm_size: str) -> Sku:
    """The catalog entry for `vm_size`: case-insensitive, as Azure treats sizes, with or without the
    `Standard_` prefix (`ND96asr_v4`, `standard_nd96asr_v4`). The one place a size is recognised.

    Raises KeyError naming the closest sizes and the supported ones for anything else.
    """
    for name, sku in SKUS.items():
        if _key(name) == _key(vm_size):
            return sku
    near = closest(vm_size)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise KeyError(
        f"{vm_size!r} is not an InfiniBand-capable size in the catalog; {hint}supported: {', '.join(supported_sizes())}"
    )
