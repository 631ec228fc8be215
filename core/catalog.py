"""The SKU catalog: every hardware fact the stack depends on, for each InfiniBand-capable VM size.

Pure Python (no Pulumi import) so that the program, `verify/` and the policy pack all read the
same table. Everything SKU-dependent - GPUs requested by the job, RDMA resources, the NCCL
topology file, the bandwidth thresholds, whether the AKS feature flag is registered - comes from
here and nowhere else.

Every figure carries a `Provenance`: measured or derived, and short citations (repo@commit path or
URL, with a date) that the user's report prints; the reasoning behind each is in docs/sku-sources.md
(#catalog-figures). Where no public figure exists, the entry has none and the verdict for that size
is UNKNOWN rather than a guess.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import Enum


class Basis(Enum):
    """What a figure rests on."""

    MEASURED = "measured"  # a published run or gate, cited
    # computed from cited figures (docs/sku-sources.md#catalog-figures says how): below a derived
    # threshold a run is suspicious, not proven bad (the verdict says WARN, not FAIL)
    DERIVED = "derived"


@dataclass(frozen=True)
class Citation:
    ref: str  # "owner/repo@commit path" (with the line or section) or a URL
    date: str  # YYYY-MM-DD: the commit's date, or when the page or thread was written

    def __str__(self) -> str:
        return f"{self.ref} ({self.date})"


@dataclass(frozen=True)
class Provenance:
    """Where a catalog figure comes from, short enough for a report line."""

    basis: Basis
    cites: tuple[Citation, ...]
    note: str = ""  # a few words: what the figure is, or the rule it is derived by

    def __post_init__(self) -> None:
        if not self.cites:
            raise ValueError("a catalog figure needs at least one citation")

    def __str__(self) -> str:
        note = f" ({self.note})" if self.note else ""
        return f"{self.basis.value}{note}: " + "; ".join(str(c) for c in self.cites)


# Snapshots read, and their commit dates (docs/sku-sources.md lists them).
AZNHC = "Azure/azurehpc-health-checks@0e0a1ac"
AZNHC_DATE = "2026-05-01"
AKS_RDMA, AKS_RDMA_DATE = "Azure/aks-rdma-infiniband@700dabb", "2026-07-16"
AI_INFRA, AI_INFRA_DATE = "Azure/ai-infrastructure-on-azure@a01b073", "2026-04-22"
DERIVATION = "docs/sku-sources.md#catalog-figures"

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
# 2 nodes x 8 A100 on AKS: busbw 187.22 GB/s at 8 GiB; "less than 180 ... indicates that there is a problem"
CITE_AZURE_EXPECTED = Citation(f"{AKS_RDMA} tests/expected-output.md section 1.1", AKS_RDMA_DATE)
SRC_AKS_GB200_FLAG = (
    "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/README.md section 6: "
    "'Before deploying GB200/GB300 node pools, you must unregister the AKSInfinibandSupport feature flag'; "
    "GB200/GB300 pools need Ubuntu 24.04"
)
# Azure's published GB300 expectations: all_reduce busbw at 16 G, inter-rack IB-only ~200 GB/s (warn < 180,
# GHR < 150) and intra-rack MNNVL ~937 GB/s (warn < 800, GHR < 600); "18 nodes per MNNVL rack". A guidance
# table, not a log ("Baselines assume a full rack at 16 G message size").
CITE_GB300_BASELINE = Citation(f"{AI_INFRA} skills/slurm/sku_performance_baseline/SKILL.md, "
                               "Standard_ND128isr_GB300_v6", AI_INFRA_DATE)
SRC_NVL72_RACK = (f"{CITE_GB300_BASELINE}: '18 nodes per MNNVL rack'; {SRC_NDGB200V6}: 'groups of 18 ND GB200 v6 "
                  "VMs' per NVL72 rack")
SRC_DRANET_GB300 = ("kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/gb300/README.md (2026-07-17): "
                    "'4 x Mellanox ConnectX | 800 Gb/s InfiniBand each', '4 x NVIDIA GB300 | 288 GB HBM3E'")
SRC_AKS_IB_FLAG = (
    "Azure/aks-rdma-infiniband@700dabb website/docs/getting-started/02-prerequisites.md "
    "('register the AKS Infiniband Support feature' so pool VMs land on one InfiniBand network)"
)


@dataclass(frozen=True)
class Expectation:
    """What a healthy fabric delivers, and below what a run is a failure. Units in the name."""

    baseline_gbps: float  # GB/s (bytes), as nccl-tests prints busbw
    threshold_gbps: float  # below this: FAIL (WARN when derived)
    provenance: Provenance

    def __post_init__(self) -> None:
        if not 0 < self.threshold_gbps <= self.baseline_gbps:
            raise ValueError(f"threshold {self.threshold_gbps} must be in (0, baseline {self.baseline_gbps}]")

    @property
    def derived(self) -> bool:
        """True when the figures are derived rather than published measurements: a run below such a
        threshold is suspicious, not proven bad (the verdict says WARN, not FAIL)."""
        return self.provenance.basis is Basis.DERIVED

    @property
    def source(self) -> str:
        """The figures' provenance as the report prints it."""
        return str(self.provenance)


@dataclass(frozen=True)
class LinkExpectation:
    """Point-to-point bandwidth between two VMs over one HCA, in Gb/s (bits), as perftest prints
    it with --report_gbits (osu_bw prints MB/s: 1 Gb/s = 125 MB/s)."""

    baseline_gbits: float  # the link's line rate
    threshold_gbits: float  # below this: FAIL (when measured with `gate_tool`)
    provenance: Provenance
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

    @property
    def source(self) -> str:
        """The figures' provenance as the report prints it."""
        return str(self.provenance)


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
    provenance: Provenance

    @property
    def source(self) -> str:
        return str(self.provenance)


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


_A100 = Expectation(baseline_gbps=187.0, threshold_gbps=180.0,
                    provenance=Provenance(Basis.MEASURED, (CITE_AZURE_EXPECTED,), "2 x 8 A100 on AKS"))

# Azure's own health checks (aznhc), one gate per size. `check_ib_bw_gdr` is a single-node
# ib_write_bw loopback per HCA from GPU memory (GPUDirect RDMA), in Gb/s per HCA;
# `check_ib_bw_non_gdr` the same from host memory (the CPU-only sizes); `check_nccl_allreduce` a
# single-node (NVLink only) all-reduce busbw in GB/s; `check_hw_cpuinfo` sockets, cores, threads.
def _aznhc(what: str) -> Citation:
    return Citation(f"{AZNHC} {what}", AZNHC_DATE)


CITE_GDR_A100 = _aznhc("conf/nd96asr_v4.conf, nd96amsr_a100_v4.conf: check_ib_bw_gdr 180.0")
CITE_GDR_H100 = _aznhc("conf/nd96isr_h100_v5.conf: check_ib_bw_gdr 380")
CITE_GDR_H200 = _aznhc("conf/nd96isr_h200_v5.conf: check_ib_bw_gdr 360")
CITE_NON_GDR_HBV3 = _aznhc("conf/hb120rs_v3.conf: check_ib_bw_non_gdr 190")
CITE_NON_GDR_NDR = _aznhc("conf/hb176rs_v4.conf, hx176rs.conf: check_ib_bw_non_gdr 390")
SRC_CORES_ND = (f"{AZNHC} conf/nd96asr_v4.conf, nd96amsr_a100_v4.conf, nd96isr_h100_v5.conf, "
                "nd96isr_h200_v5.conf: check_hw_cpuinfo 2 96 96 (2 sockets, 96 cores, 96 threads)")
SRC_CORES_HBV3 = f"{AZNHC} conf/hb120rs_v3.conf: check_hw_cpuinfo 2 120 120"
SRC_CORES_HBV4 = f"{AZNHC} conf/hb176rs_v4.conf and conf/hx176rs.conf: check_hw_cpuinfo 2 176 176"
SRC_CORES_GB200 = ("microsoft/aspire@5bd693a src/Aspire.Hosting.Azure.Kubernetes/AksNodeVmSizes.cs: "
                   "'Standard_ND128isr_NDR_GB200_v6 -- 128 vCPUs' (aznhc has no GB200 conf)")
# No GB300 core count found: the size name carries it (ND128), as GB200's, which SRC_CORES_GB200 confirms.
SRC_CORES_GB300 = ("DERIVED from the size name Standard_ND128isr_GB300_v6 (128 vCPUs, as GB200's ND128; "
                   f"{SRC_CORES_GB200})")
# NCCL's maintainers' figure for what one NIC carries at best in an all-reduce (busbw), per 200 Gb/s of
# line rate: 24 GB/s, i.e. 48 GB/s for a 400 Gb/s NDR HCA ("We usually consider 24GB/s is the peak
# performance per 200G NIC", sjeaugey).
NCCL_PEAK_GBPS_PER_200G = 24.0
CITE_NCCL_PEAK = Citation("NVIDIA/nccl-tests#119", "2022-11-17")


def nccl_peak_gbps(hcas: int, link_gbits: float) -> float:
    """The all-reduce busbw NCCL's maintainers call the peak of `hcas` NICs of `link_gbits` each
    (CITE_NCCL_PEAK): 8 x HDR 200 -> 192 GB/s, 8 x NDR 400 -> 384 GB/s."""
    return hcas * NCCL_PEAK_GBPS_PER_200G * link_gbits / 200


def _node_gate(conf: str, gbps: float, size: str) -> NodeAllReduceGate:
    cite = _aznhc(f"conf/{conf}.conf: check_nccl_allreduce {gbps} 1 {size}")
    return NodeAllReduceGate(threshold_gbps=gbps, size=size,
                             provenance=Provenance(Basis.MEASURED, (cite,), "Azure's single-node gate"))


# The one published pair, as fractions of its NICs' NCCL peak (8 x HDR 200: 192 GB/s): baseline 187 is
# 97.4 %, the fail line 180 is 93.75 %.
_A100_PEAK_GBPS = nccl_peak_gbps(8, 200)
# NVIDIA's 2-node AKS run on ND H100 v5, settings unknown: weighed and not used as a baseline
# (docs/sku-sources.md#catalog-figures); verify.verdict's floor keeps it from reading FAIL.
AICR_H100_AKS_BUSBW_GBPS = 157.11
CITE_AICR_H100_AKS = Citation("NVIDIA/aicr#1699", "2026-07-09")


def _derived_from_nccl_peak(hcas: int, link_gbits: int) -> Expectation:
    """The 2-node all-reduce expectation of an ND size that Azure publishes no multi-node figure for,
    placed where the one published pair sits relative to its NICs' NCCL peak. DERIVED, not measured,
    so a run below it is WARN (and no WARN band applies above it: verify.verdict)."""
    peak = nccl_peak_gbps(hcas, link_gbits)
    return Expectation(
        baseline_gbps=round(peak * _A100.baseline_gbps / _A100_PEAK_GBPS, 1),
        threshold_gbps=round(peak * _A100.threshold_gbps / _A100_PEAK_GBPS, 1),
        provenance=Provenance(
            Basis.DERIVED, (CITE_NCCL_PEAK, CITE_AZURE_EXPECTED),
            f"{hcas} x {link_gbits} Gb/s HCAs at ND A100 v4's share of NCCL's per-NIC peak; {DERIVATION}"),
    )


def _scaled_by_gdr_gate(of: Expectation, of_name: str, of_gate_gbits: float, of_gate_source: Citation,
                        gate_gbits: float, gate_source: Citation) -> Expectation:
    """`of` scaled by the ratio of two sizes' GPUDirect RDMA gates (Azure's per-HCA health check): a
    size whose HCAs Azure gates lower gets a lower line, from its own figure rather than a copy."""
    scale = gate_gbits / of_gate_gbits
    return Expectation(
        baseline_gbps=round(of.baseline_gbps * scale, 1),
        threshold_gbps=round(of.threshold_gbps * scale, 1),
        provenance=Provenance(
            Basis.DERIVED, (gate_source, of_gate_source),
            f"{of_name}'s derived line x {gate_gbits:g}/{of_gate_gbits:g}, their GPUDirect RDMA gates; {DERIVATION}"),
    )


_H100_GDR_GATE_GBITS, _H200_GDR_GATE_GBITS = 380.0, 360.0
_H100_DERIVED = _derived_from_nccl_peak(8, 400)
_H200_DERIVED = _scaled_by_gdr_gate(_H100_DERIVED, "ND H100 v5", _H100_GDR_GATE_GBITS, CITE_GDR_H100,
                                    _H200_GDR_GATE_GBITS, CITE_GDR_H200)

# GB300: Azure's published figures; the fail line is its warn line ("re-test"; GHR 150 / 600 is for a report).
_GB300_IB_ONLY = Expectation(baseline_gbps=200.0, threshold_gbps=180.0, provenance=Provenance(
    Basis.MEASURED, (CITE_GB300_BASELINE,), "Azure's published inter-rack, IB-only figure at 16 G: ~200, warn < 180"))
_GB300_MNNVL = Expectation(baseline_gbps=937.0, threshold_gbps=800.0, provenance=Provenance(
    Basis.MEASURED, (CITE_GB300_BASELINE,), "Azure's published intra-rack, MNNVL figure at 16 G: ~937, warn < 800"))

# Point to point over one HCA. GPU sizes: the line rate and the size's own GPUDirect RDMA gate (what
# a GPU-memory ib_write_bw must reach). CPU-only sizes: the host-memory gate. Azure measures every
# gate with ib_write_bw (raw verbs); osu_bw adds MPI/UCX on top, so on the NDR sizes, whose gate sits
# at 97.5 % of the line rate, osu_bw gets a WARN band below the gate down to 95 % of the line rate
# (the fraction HBv3's own gate allows, 190 of 200): derived, not measured (no published osu_bw
# figure for HBv4/HX).
def _gate(cite: Citation, note: str) -> Provenance:
    return Provenance(Basis.MEASURED, (cite,), note)


_A100_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=180.0, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_A100, "HDR line rate; Azure's GPUDirect RDMA gate"))
_H100_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H100_GDR_GATE_GBITS, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_H100, "NDR line rate; Azure's GPUDirect RDMA gate"))
_H200_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H200_GDR_GATE_GBITS, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_H200, "NDR line rate; Azure's GPUDirect RDMA gate"))
_HBV3_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=190.0,
                             provenance=_gate(CITE_NON_GDR_HBV3, "HDR line rate; Azure's host-memory gate"))
_NDR_HOST_LINK = LinkExpectation(
    baseline_gbits=400.0, threshold_gbits=390.0, other_tool_warn_from_gbits=380.0,
    provenance=_gate(CITE_NON_GDR_NDR, f"NDR line rate; Azure's host-memory gate; osu_bw WARN from 380 is derived, "
                                       f"{DERIVATION}"),
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
            sources=(SRC_NDASRV4, str(CITE_AZURE_EXPECTED), SRC_AKS_IB_FLAG),
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
            sources=(SRC_NDAMSRV4, str(CITE_AZURE_EXPECTED), SRC_AKS_IB_FLAG),
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
            sources=(SRC_NDH100V5, str(CITE_GDR_H100), SRC_AKS_IB_FLAG),
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
            sources=(SRC_NDH200V5, str(CITE_GDR_H200), SRC_AKS_IB_FLAG),
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
            allreduce_2_nodes=_GB300_IB_ONLY,
            allreduce_more_nodes=_GB300_IB_ONLY,
            p2p=None,  # aznhc has no GB300 conf: no GDR gate to judge one HCA by
            sources=(SRC_NDGB300V6, SRC_DRANET_GB300, str(CITE_GB300_BASELINE), SRC_AKS_GB200_FLAG, SRC_NVL72_RACK),
            gpu_memory_gb=288,  # SRC_DRANET_GB300
            cpu_cores_per_vm=128,
            cpu_cores_source=SRC_CORES_GB300,
            needs_ubuntu_2404=True,
            mnnvl_rack_nodes=18,
            allreduce_rack=_GB300_MNNVL,
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
