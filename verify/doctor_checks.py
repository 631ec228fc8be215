"""The fabric doctor's records: what its checks measured (each node's HCAs, GPUs and single-node
all-reduce; each pair's all-reduce; each HCA's ib_write_bw between two nodes), what a healthy node and
pair deliver on the size (`Expectations`, the catalog's figures with their sources), and what it
concludes (`Suspect`, `Diagnosis`). verify/doctor.py plans the checks and judges them; verify/sections.py
reads them from the launcher's log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import catalog, rdma_drivers
from verify.hca import HcaPort
from verify.verdict import Verdict, pass_line_gbps


# --- what the checks measured -------------------------------------------------------------------
@dataclass(frozen=True)
class NodeCheck:
    host: str
    ports: tuple[HcaPort, ...] | None = None  # None: not listed (check skipped or cut off)
    gpus: int | None = None
    allreduce_busbw_gbps: float | None = None  # the single-node all-reduce at its largest size
    allreduce_failure: str | None = None  # why that run gave no usable figure


@dataclass(frozen=True)
class PairRun:
    round: int  # 0: the all-nodes run of a 2-node job
    hosts: tuple[str, str]
    busbw_gbps: float | None  # at the largest size
    failure: str | None = None  # why there is no usable figure (errors, no rows, wrong data)
    # What NCCL's INFO lines in the run say (verify.transport; None: it printed none): the one-line
    # summary, and the pair's hosts whose ranks used TCP sockets, or an RDMA connection without GDRDMA.
    transport: str | None = None
    socket_hosts: tuple[str, ...] = ()
    no_gdr_hosts: tuple[str, ...] = ()
    no_dmabuf_hosts: tuple[str, ...] = ()  # hosts whose lines do not show GPUDirect over DMA-BUF (verify.dmabuf)


@dataclass(frozen=True)
class HcaBandwidth:
    hosts: tuple[str, str]  # (client, server)
    device: str  # the same device name on both ends
    bw_gbits: float | None  # ib_write_bw BW average at the largest size
    failure: str | None = None
    memory: str | None = None  # "cuda" (--use_cuda: GPU memory) | "host"; None: not recorded


@dataclass(frozen=True)
class Expectations:
    """What a healthy node and pair deliver: the catalog's figures, each with its source."""

    vm_size: str | None = None  # None: no SKU given; only the pairs are compared, with each other
    gpus_per_node: int | None = None
    hcas_per_node: int | None = None
    link_gbits: float | None = None
    ib_generation: str | None = None
    node_allreduce_gbps: float | None = None  # single node, all GPUs (Azure's check_nccl_allreduce)
    node_allreduce_source: str | None = None
    pair_threshold_gbps: float | None = None  # 2-node all-reduce FAIL line
    pair_threshold_source: str | None = None
    pair_threshold_derived: bool = False  # below a derived line is WARN, not FAIL (verify.verdict)
    # where a 2-node verdict starts to PASS (verify.verdict.pass_line_gbps: the FAIL line, or the WARN
    # line above a published one); None: the FAIL line. A pair below it is slow.
    pair_pass_gbps: float | None = None
    hca_gbits: float | None = None  # one HCA's ib_write_bw FAIL line
    hca_source: str | None = None
    hca_gate_memory: str | None = None  # the memory that gate was measured from (catalog LinkExpectation)
    expects_gdr: bool = False  # inter-node connections must use GPUDirect RDMA (catalog: ND sizes)
    # ... through DMA-BUF, shown by NCCL on every HCA: a GPU pool without peer memory (core/rdma_drivers.py)
    gdr_via_dmabuf: bool = False

    @classmethod
    def for_sku(cls, sku: catalog.Sku, pair_threshold_gbps: float | None = None,
                rdma_driver: rdma_drivers.RdmaDriver = rdma_drivers.DOCA) -> Expectations:
        """`pair_threshold_gbps`: the user's threshold override (it replaces the catalog's, as in
        verify.verdict); `rdma_driver`: the pool's driver stack."""
        pair = sku.allreduce_expectation(2)
        node = sku.allreduce_1_node
        return cls(
            vm_size=sku.vm_size, gpus_per_node=sku.gpus_per_vm, hcas_per_node=sku.ib_hcas_per_vm,
            link_gbits=float(sku.ib_link_gbits), ib_generation=sku.ib_generation,
            node_allreduce_gbps=node.threshold_gbps if node else None,
            node_allreduce_source=node.source if node else None,
            pair_threshold_gbps=pair_threshold_gbps if pair_threshold_gbps is not None else (
                pair.threshold_gbps if pair else None),
            pair_threshold_source="threshold override" if pair_threshold_gbps is not None else (
                pair.source if pair else None),
            pair_threshold_derived=pair_threshold_gbps is None and bool(pair and pair.derived),
            pair_pass_gbps=pass_line_gbps(pair, pair_threshold_gbps),
            hca_gbits=sku.p2p.threshold_gbits if sku.p2p else None,
            hca_source=sku.p2p.source if sku.p2p else None,
            hca_gate_memory=sku.p2p.gate_memory if sku.p2p else None,
            expects_gdr=sku.expects_gpudirect_rdma,
            gdr_via_dmabuf=rdma_drivers.gdr_via_dmabuf(sku, rdma_driver),
        )


    @property
    def pair_slow_below_gbps(self) -> float | None:
        """A 2-node all-reduce below this is a slow pair (the launcher's DOCTOR_PAIR_SLOW_BELOW_GBPS)."""
        return self.pair_pass_gbps if self.pair_pass_gbps is not None else self.pair_threshold_gbps


@dataclass(frozen=True)
class Suspect:
    host: str
    hca: str | None
    reason: str
    evidence: dict[str, Any]
    verdict: Verdict = Verdict.FAIL

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "hca": self.hca, "reason": self.reason, "evidence": self.evidence,
                "verdict": self.verdict.value}


@dataclass(frozen=True)
class Diagnosis:
    suspects: tuple[Suspect, ...]
    notes: tuple[str, ...] = ()  # what the checks found that names no one (e.g. every pair slow)
    slow_pairs: tuple[PairRun, ...] = field(default_factory=tuple)
    # per tier and per path between torsets (`tier_figures`); empty when no torsets were given
    tiers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """The worst suspect's verdict (PASS when there is none)."""
        return max((s.verdict for s in self.suspects), key=lambda v: v.severity, default=Verdict.PASS)
