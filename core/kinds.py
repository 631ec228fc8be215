"""The fabric-test kinds, one record each, looked up by name: the all-reduce (GPU sizes, `NcclJob`)
and the point-to-point test (CPU-only HB / HX sizes, `P2pJob`).

Each record holds what differs between them: the nodes one run spans, the unit its bandwidth is
judged in (GB/s of bus bandwidth vs Gb/s of link bandwidth), the stack's threshold key for that unit,
the collector's flag, the stack outputs it reports, whether the fabric doctor and the NCCL settings
(SHARP, the topology file) apply, whether the certifier re-runs it, whether a GB rack also runs it
over its NVLink, its launcher script and the format of the log it prints. The configuration resolves
the size's kind once, at parse (`stack_config.FabricTest.kind`); the layers above branch on these
fields, never on which kind it is. The names are `python -m verify`'s `--kind` and the result JSON's `kind`.

verify reads a log by its format (`LOG_FORMATS`: a reader, a parser and the result's figures each),
not by its kind: a new kind whose launcher prints a format verify reads is this record, its job and
its launcher, with no verify code (docs/developing.md, "A fabric-test kind").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.catalog import Sku

NCCL = "nccl"  # nccl-tests all_reduce_perf across the GPU nodes (verify/nccl.py, verify/verdict.py)
P2P = "p2p"  # OSU osu_bw / osu_latency or perftest between two CPU-only HB / HX nodes (verify/p2p.py)

# The logs verify reads (verify/readers.py), each judged in its own unit:
NCCL_TESTS = "nccl-tests"  # nccl-tests' all_reduce_perf table (text or -J json), judged in GB/s of bus bandwidth
BANDWIDTH_TABLES = "bandwidth-tables"  # OSU osu_bw / osu_latency or perftest tables, judged in Gb/s
LOG_FORMATS = (NCCL_TESTS, BANDWIDTH_TABLES)


@dataclass(frozen=True)
class Kind:
    name: str  # NCCL or P2P
    test: str  # what runs, for messages
    gpus: bool  # the kind of test a size with GPUs (True) or without (False) runs: one rank per GPU, or per node
    # The nodes one run spans: None, every node of the pool (the collector is told how many, --nodes);
    # a number, always that many (the collector knows it).
    nodes: int | None
    unit: str  # what its bandwidth (and so its threshold) is measured in
    threshold_key: str  # the stack's fabricTest.<key> for the threshold: the unit is in the name
    threshold_flag: str  # the collector's flag for it (python -m verify collect)
    has_doctor: bool  # the fabric doctor (fabricTest.doctor) can run with it
    runs_nccl: bool  # NCCL's settings (fabricTest.sharp, fabricTest.topologyFile) apply
    # The certifier re-runs it: its recurring runs and its admission of new nodes (certifier.schedule,
    # certifier.mode taint's hold). A test that spans a fixed pair proves no other node, so it has neither.
    retests: bool
    # On a multi-node-NVLink size (GB200, GB300) a stack of this kind also runs the NCCL all-reduce once
    # across the rack with MNNVL on (stack/rack.py), judged by the catalog's rack figure.
    rack_run: bool
    launcher: str  # its launcher, in scripts/: the job's mpimaster pod runs it
    log_format: str  # what its launcher prints (LOG_FORMATS): how verify reads and judges it
    # stack output name -> FabricCheck attribute, in the order they are exported
    stack_outputs: tuple[tuple[str, str], ...]


ALL_REDUCE = Kind(
    name=NCCL,
    test="the NCCL all-reduce across every GPU node",
    gpus=True,
    nodes=None,
    unit="GB/s (bytes) of bus bandwidth",
    threshold_key="thresholdGbps",
    threshold_flag="--threshold-gbps",
    has_doctor=True,
    runs_nccl=True,
    retests=True,
    rack_run=True,
    launcher="nccl-launcher.sh",
    log_format=NCCL_TESTS,
    stack_outputs=(("fabricTransport", "transport"),
                   ("allReduceMaxBusBwGbps", "max_busbw_gbps"),
                   ("allReduceBusBwAtMaxSizeGbps", "busbw_at_max_size_gbps"),
                   ("fabricRanks", "ranks"), ("ncclVersion", "nccl_version"),
                   ("fabricSuspects", "suspects"),  # the fabric doctor's named nodes / HCAs ([] when none)
                   ("allReduceSharp", "sharp")),
)
POINT_TO_POINT = Kind(
    name=P2P,
    test="the MPI point-to-point test between two nodes (osu_bw, osu_latency)",
    gpus=False,
    nodes=2,  # one rank on each of two nodes
    unit="Gb/s (bits) of link bandwidth",
    threshold_key="p2pThresholdGbits",
    threshold_flag="--threshold-gbits",
    has_doctor=False,
    runs_nccl=False,
    retests=False,
    rack_run=False,
    launcher="p2p-launcher.sh",
    log_format=BANDWIDTH_TABLES,
    stack_outputs=(("p2pBandwidthAtMaxSizeGbits", "bw_at_max_size_gbits"),
                   ("p2pMaxBandwidthGbits", "max_bw_gbits"), ("p2pLatencyUs", "latency_us")),
)
BY_NAME: dict[str, Kind] = {k.name: k for k in (ALL_REDUCE, POINT_TO_POINT)}
KINDS = tuple(BY_NAME)  # the names, as verify's --kind offers them
COLLECT_DEFAULT = NCCL  # `verify collect --kind` unsaid: the stack names every other kind


def kind(name: str, key: str = "kind") -> Kind:
    """The kind called `name`; a ValueError naming `key`, the value and the kinds there are otherwise."""
    try:
        return BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"{key}: got {name!r}; expected one of {', '.join(BY_NAME)}") from None


def first_of(log_format: str) -> Kind:
    """The first kind whose log is of `log_format`: what `report --kind auto` names a log it reads as one."""
    return next(k for k in BY_NAME.values() if k.log_format == log_format)


def kind_for(sku: Sku) -> Kind:
    """The test that proves a size's fabric: GPU sizes the all-reduce, CPU-only sizes (HB / HX) point to point."""
    (found,) = (k for k in BY_NAME.values() if k.gpus == sku.has_gpus)
    return found


def threshold_problems(kind: Kind, thresholds: Mapping[str, float | None]) -> dict[str, str]:
    """{threshold key: why not} for each threshold set that is not `kind`'s: the other unit's value
    would be silently ignored (or, converted, mean something else)."""
    return {
        key: f"on this size the fabric test is {kind.test}, judged in {kind.unit}: set fabricTest."
             f"{kind.threshold_key} instead"
        for key, value in thresholds.items()
        if value is not None and key != kind.threshold_key
    }
