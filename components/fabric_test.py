"""The fabric test, in one place: its two kinds and what the collect step needs of a job.

- `Kind`: the all-reduce (GPU sizes, `NcclJob`) or the point-to-point test (CPU-only HB / HX sizes,
  `P2pJob`), with everything that differs between them written once: the unit its bandwidth is
  judged in (GB/s of bus bandwidth vs Gb/s of link bandwidth), the stack's threshold key for that
  unit, the collector's flag, the stack outputs it reports.
- `FabricTestJob`: the small protocol both jobs implement, so `FabricCheck` takes the job itself.

Pure Python at run time (no Pulumi import): the configuration checks thresholds with `Kind` before
any resource exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from verify import kinds

if TYPE_CHECKING:
    import pulumi

    from core.catalog import Sku


@dataclass(frozen=True)
class Kind:
    name: str  # verify.kinds: the collector's --kind and the result JSON's "kind"
    test: str  # what runs, for messages
    unit: str  # what its bandwidth (and so its threshold) is measured in
    threshold_key: str  # the stack's fabricTest.<key> for the threshold: the unit is in the name
    threshold_flag: str  # the collector's flag for it (python -m verify collect)
    # stack output name -> FabricCheck attribute, in the order they are exported
    stack_outputs: tuple[tuple[str, str], ...]


ALL_REDUCE = Kind(
    name=kinds.NCCL,
    test="the NCCL all-reduce across every GPU node",
    unit="GB/s (bytes) of bus bandwidth",
    threshold_key="thresholdGbps",
    threshold_flag="--threshold-gbps",
    stack_outputs=(("fabricTransport", "transport"),
                   ("allReduceMaxBusBwGbps", "max_busbw_gbps"),
                   ("allReduceBusBwAtMaxSizeGbps", "busbw_at_max_size_gbps"),
                   ("fabricRanks", "ranks"), ("ncclVersion", "nccl_version"),
                   ("fabricSuspects", "suspects"),  # the fabric doctor's named nodes / HCAs ([] when none)
                   ("allReduceSharp", "sharp")),
)
POINT_TO_POINT = Kind(
    name=kinds.P2P,
    test="the MPI point-to-point test between two nodes (osu_bw, osu_latency)",
    unit="Gb/s (bits) of link bandwidth",
    threshold_key="p2pThresholdGbits",
    threshold_flag="--threshold-gbits",
    stack_outputs=(("p2pBandwidthAtMaxSizeGbits", "bw_at_max_size_gbits"),
                   ("p2pMaxBandwidthGbits", "max_bw_gbits"), ("p2pLatencyUs", "latency_us")),
)
KINDS = (ALL_REDUCE, POINT_TO_POINT)


def kind_for(sku: Sku) -> Kind:
    """GPU sizes prove the fabric with the all-reduce; CPU-only sizes (HB / HX) point to point."""
    return ALL_REDUCE if sku.has_gpus else POINT_TO_POINT


def number_arg(value: float | None) -> str:
    """A number as the job's env or the collector's command line carries it: exact (Python's shortest
    form that reads back as the same float, so the launcher and the collector compare against the very
    line the verdict uses), whole numbers without ".0"; "" for None (the launcher reads it as unknown)."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def threshold_problems(kind: Kind, thresholds: Mapping[str, float | None]) -> dict[str, str]:
    """{threshold key: why not} for each threshold set that is not `kind`'s: the other unit's value
    would be silently ignored (or, converted, mean something else)."""
    return {
        key: f"on this size the fabric test is {kind.test}, judged in {kind.unit}: set fabricTest."
             f"{kind.threshold_key} instead"
        for key, value in thresholds.items()
        if value is not None and key != kind.threshold_key
    }


class FabricTestJob(Protocol):
    """What the collect step needs of a fabric test job (NcclJob, P2pJob)."""

    kind: Kind
    sku: Sku
    namespace_name: str
    job_name: str
    node_count: int  # the nodes the test spans
    # the pods' deadline: fabricTest.timeoutMinutes, plus the doctor's budget (doctorMinutes) when it may run
    deadline_minutes: int
    sharp: bool  # the all-reduce ran with SHARP/CollNet (fabricTest.sharp); always False for point to point
    spec_sha256: str  # changes exactly when the job is replaced: the collect step's trigger
    job: pulumi.Resource  # what the collect step waits for
