"""What a healthy fabric delivers on each size, and where each figure comes from: the expectations the
catalog's entries carry (the all-reduce's, the link's, Azure's single-node gate), their provenance, the
sources they cite, the rules that derive the figures no one publishes, and the floor below which a run is
FAIL whatever its threshold.

Pure Python. Every figure carries a `Provenance`: measured or derived, and short citations (repo@commit
path or URL, with a date) that the user's report prints; the reasoning behind each is in
docs/sku-sources.md (#catalog-figures). What a size is, the table and its lookup: core/catalog.py.
"""

from __future__ import annotations

from dataclasses import dataclass
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

# The figures' sources, named once and referred to below.
# 2 nodes x 8 A100 on AKS: busbw 187.22 GB/s at 8 GiB; "less than 180 ... indicates that there is a problem"
CITE_AZURE_EXPECTED = Citation(f"{AKS_RDMA} tests/expected-output.md section 1.1", AKS_RDMA_DATE)
# Azure's published GB300 expectations: all_reduce busbw at 16 G, inter-rack IB-only ~200 GB/s (warn < 180,
# GHR < 150) and intra-rack MNNVL ~937 GB/s (warn < 800, GHR < 600); "18 nodes per MNNVL rack". A guidance
# table, not a log ("Baselines assume a full rack at 16 G message size").
CITE_GB300_BASELINE = Citation(f"{AI_INFRA} skills/slurm/sku_performance_baseline/SKILL.md, "
                               "Standard_ND128isr_GB300_v6", AI_INFRA_DATE)


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



A100 = Expectation(baseline_gbps=187.0, threshold_gbps=180.0,
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
# NCCL's maintainers' figure for what one NIC carries at best in an all-reduce (busbw), per 200 Gb/s of
# line rate: 24 GB/s, i.e. 48 GB/s for a 400 Gb/s NDR HCA ("We usually consider 24GB/s is the peak
# performance per 200G NIC", sjeaugey).
NCCL_PEAK_GBPS_PER_200G = 24.0
CITE_NCCL_PEAK = Citation("NVIDIA/nccl-tests#119", "2022-11-17")


def nccl_peak_gbps(hcas: int, link_gbits: float) -> float:
    """The all-reduce busbw NCCL's maintainers call the peak of `hcas` NICs of `link_gbits` each
    (CITE_NCCL_PEAK): 8 x HDR 200 -> 192 GB/s, 8 x NDR 400 -> 384 GB/s."""
    return hcas * NCCL_PEAK_GBPS_PER_200G * link_gbits / 200


def node_gate(conf: str, gbps: float, size: str) -> NodeAllReduceGate:
    cite = _aznhc(f"conf/{conf}.conf: check_nccl_allreduce {gbps} 1 {size}")
    return NodeAllReduceGate(threshold_gbps=gbps, size=size,
                             provenance=Provenance(Basis.MEASURED, (cite,), "Azure's single-node gate"))


# The one published pair, as fractions of its NICs' NCCL peak (8 x HDR 200: 192 GB/s): baseline 187 is
# 97.4 %, the fail line 180 is 93.75 %.
_A100_PEAK_GBPS = nccl_peak_gbps(8, 200)
# NVIDIA's 2-node AKS run on ND H100 v5, settings unknown: weighed and not used as a baseline
# (docs/sku-sources.md#catalog-figures); the floor (FLOOR_FRACTION_OF_BASELINE) keeps it from reading FAIL.
AICR_H100_AKS_BUSBW_GBPS = 157.11
CITE_AICR_H100_AKS = Citation("NVIDIA/aicr#1699", "2026-07-09")


def _derived_from_nccl_peak(hcas: int, link_gbits: int) -> Expectation:
    """The 2-node all-reduce expectation of an ND size that Azure publishes no multi-node figure for,
    placed where the one published pair sits relative to its NICs' NCCL peak. DERIVED, not measured,
    so a run below it is WARN (and no WARN band applies above it: verify.verdict)."""
    peak = nccl_peak_gbps(hcas, link_gbits)
    return Expectation(
        baseline_gbps=round(peak * A100.baseline_gbps / _A100_PEAK_GBPS, 1),
        threshold_gbps=round(peak * A100.threshold_gbps / _A100_PEAK_GBPS, 1),
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
H100_DERIVED = _derived_from_nccl_peak(8, 400)
H200_DERIVED = _scaled_by_gdr_gate(H100_DERIVED, "ND H100 v5", _H100_GDR_GATE_GBITS, CITE_GDR_H100,
                                    _H200_GDR_GATE_GBITS, CITE_GDR_H200)

# GB300: Azure's published figures; the fail line is its warn line ("re-test"; GHR 150 / 600 is for a report).
GB300_IB_ONLY = Expectation(baseline_gbps=200.0, threshold_gbps=180.0, provenance=Provenance(
    Basis.MEASURED, (CITE_GB300_BASELINE,), "Azure's published inter-rack, IB-only figure at 16 G: ~200, warn < 180"))
GB300_MNNVL = Expectation(baseline_gbps=937.0, threshold_gbps=800.0, provenance=Provenance(
    Basis.MEASURED, (CITE_GB300_BASELINE,), "Azure's published intra-rack, MNNVL figure at 16 G: ~937, warn < 800"))

# Point to point over one HCA. GPU sizes: the line rate and the size's own GPUDirect RDMA gate (what
# a GPU-memory ib_write_bw must reach). CPU-only sizes: the host-memory gate. Azure measures every
# gate with ib_write_bw (raw verbs); osu_bw adds MPI/UCX on top, so on the NDR sizes, whose gate sits
# at 97.5 % of the line rate, osu_bw gets a WARN band below the gate down to 95 % of the line rate
# (the fraction HBv3's own gate allows, 190 of 200): derived, not measured (no published osu_bw
# figure for HBv4/HX).
def _gate(cite: Citation, note: str) -> Provenance:
    return Provenance(Basis.MEASURED, (cite,), note)


A100_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=180.0, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_A100, "HDR line rate; Azure's GPUDirect RDMA gate"))
H100_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H100_GDR_GATE_GBITS, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_H100, "NDR line rate; Azure's GPUDirect RDMA gate"))
H200_LINK = LinkExpectation(baseline_gbits=400.0, threshold_gbits=_H200_GDR_GATE_GBITS, gate_memory="cuda",
                             provenance=_gate(CITE_GDR_H200, "NDR line rate; Azure's GPUDirect RDMA gate"))
HBV3_LINK = LinkExpectation(baseline_gbits=200.0, threshold_gbits=190.0,
                             provenance=_gate(CITE_NON_GDR_HBV3, "HDR line rate; Azure's host-memory gate"))
NDR_HOST_LINK = LinkExpectation(
    baseline_gbits=400.0, threshold_gbits=390.0, other_tool_warn_from_gbits=380.0,
    provenance=_gate(CITE_NON_GDR_NDR, f"NDR line rate; Azure's host-memory gate; osu_bw WARN from 380 is derived, "
                                       f"{DERIVATION}"),
)

# Below this fraction of the baseline a run is FAIL even where the threshold is derived (verify.verdict; the
# configuration refuses a threshold below it): no fabric that works gets there. The floor sits below the
# slowest InfiniBand run on record for these sizes on AKS, NVIDIA's own recipe: 157 GB/s on 2 x ND H100 v5
# (its settings unknown), gated there at >= 150 GB/s (CITE_AICR_H100_AKS), i.e. 42 % / 40 %
# of the derived 374 GB/s baseline. A run that slow is suspicious (WARN), not proven broken. Below 35 %
# every known cause is a defect: NCCL on TCP sockets (3.4 GB/s in tests/data, ~1 %), one or two of eight
# rails (12.5-25 %), GPUDirect RDMA lost together with half the rails. 35 % of the derived baselines:
# ND H100 v5 130.9 GB/s, ND H200 v5 124.0 GB/s (tests/unit/verify/test_verify_verdict.py checks them
# against the catalog).
FLOOR_FRACTION_OF_BASELINE = 0.35
