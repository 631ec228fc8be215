"""The fabric-test result as a type: what `python -m verify report|collect --json` prints, what the
stack's collect step reads (components/fabric/fabric_check.py) and what the in-cluster certifier reads.

One `FabricResult` for both kinds (core/kinds.py) and for errors. Its JSON is flat (the keys users
have scripted against since before the type), so the type groups the keys the way they appear:

- always: `schemaVersion`, `kind`, `verdict`, `reasons`, `sku`, `nodes`;
- `allreduce` (`AllReduceFigures`, kind nccl) or `p2p` (`P2pFigures`, kind p2p): the figures, present
  when the log held a result table (their keys are absent otherwise);
- `doctor` (`Doctor`, with the top-level `suspects`): the fabric doctor's findings (kind nccl);
- `collected` (`Collected`): where `collect` found the run and why it failed or stopped;
- an error (`FabricResult.failure`): `{"schemaVersion": 1, "verdict": null, "error": "..."}` only.

Build one with the dataclasses and print `to_json()`; read one with `FabricResult.from_json(doc)`,
which refuses (`ResultError`, naming the key) anything the published schema would refuse. The schema
(`SCHEMA_PATH`) is generated from these classes by verify/result_schema.py; tests hold the file to it and
validate every --json output against the file. Units are in the names: `_gbps` is GB/s (bytes, NCCL
bus bandwidth), `_gbits` Gb/s (bits, link rate), `_us` microseconds, `_bytes` bytes. docs/fabric-result.md
says what changes the version.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from core import kinds

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).parent / "schema" / f"fabric-result.v{SCHEMA_VERSION}.json"
SCHEMA_ID = f"https://aks-infiniband.io/schema/fabric-result.v{SCHEMA_VERSION}.json"
VERDICTS = ("PASS", "WARN", "FAIL", "UNKNOWN")  # verify.verdict.Verdict's values, worst last but one


class ResultError(ValueError):
    """A document that is not a fabric result of this schema version: the message names the key."""


class _Part:
    """A part of the result: `from_json` reads one from its JSON object (ResultError naming the key)."""

    @classmethod
    def from_json(cls, doc: Any) -> Any:
        return _load(cls, doc, cls.__name__)

    def to_json(self) -> dict[str, Any]:
        return _dump(self)


def _f(doc: str, *, enum: tuple[str, ...] | None = None, default: Any = dataclasses.MISSING) -> Any:
    """A field with its description (and allowed values) for the schema."""
    meta = {"doc": doc, **({"enum": enum} if enum else {})}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Transport(_Part):
    """What NCCL's INFO lines say it used between the nodes (verify/transport.py)."""

    summary: str = _f("one line, e.g. \"NET/IB GDRDMA, 8 HCAs per node\" (the stack's fabricTransport)")
    network: str | None = _f("the network NCCL selected: IB, Socket, or null when not logged")
    gdr: bool | None = _f("GPUDirect RDMA on every RDMA inter-node connection; null: no RDMA connection")
    hcas_by_host: dict[str, tuple[str, ...]] = _f("the InfiniBand HCAs NCCL used, per host")
    inter_node_channels: dict[str, int] = _f("connection ends between nodes, per path (e.g. NET/IB/GDRDMA)")
    nodes: int | None = _f("nodes NCCL reported")
    local_ranks: int | None = _f("ranks per node NCCL reported")
    plugins: tuple[str, ...] = _f("NCCL net/tuner plugins loaded")
    nccl_warnings: tuple[str, ...] = _f("the first NCCL WARN lines")
    nccl_warnings_total: int = _f("how many NCCL WARN lines the log held")


@dataclass(frozen=True)
class SizeRow(_Part):
    """One message size of the all-reduce sweep."""

    size_bytes: int = _f("message size")
    busbw_gbps: float | None = _f("out-of-place bus bandwidth, GB/s")
    in_place_busbw_gbps: float | None = _f("in-place bus bandwidth, GB/s")


@dataclass(frozen=True)
class AllReduceFigures(_Part):
    """What nccl-tests' all_reduce_perf measured and what it was judged against (kind nccl)."""

    max_size_bytes: int | None = _f("the largest message size: the one judged")
    busbw_at_max_size_gbps: float | None = _f("out-of-place bus bandwidth at the largest size, GB/s: the judged figure")
    in_place_busbw_at_max_size_gbps: float | None = _f("in-place bus bandwidth at the largest size, GB/s")
    max_busbw_gbps: float | None = _f("the highest out-of-place bus bandwidth of any size, GB/s")
    avg_busbw_gbps: float | None = _f("nccl-tests' footer average over all sizes, GB/s (not judged)")
    ranks: int | None = _f("MPI ranks (one per GPU)")
    ranks_source: str | None = _f("which log lines the rank count came from")
    hosts: tuple[str, ...] | None = _f("host names the log shows")
    gpus_per_node: int | None = _f("ranks per host, when every host runs the same number")
    gpus: tuple[str, ...] | None = _f("GPU models the log names")
    wrong: int | None = _f("data errors (#wrong); null: not checked")
    out_of_bounds: int | None = _f("the footer's out-of-bounds count; null: no footer")
    complete: bool = _f("the log holds the footer: the sweep finished")
    errors: tuple[str, ...] = _f("error lines from the log")
    transport: Transport | None = _f("what NCCL used between the nodes; null: no INFO lines")
    nccl_version: str | None = _f("NCCL's version as the log prints it")
    nccl_tests_version: str | None = _f("nccl-tests' version")
    test: str | None = _f("the nccl-tests binary, e.g. all_reduce_perf")
    baseline_gbps: float | None = _f("the catalog's expected bus bandwidth for the SKU and node count, GB/s")
    threshold_gbps: float | None = _f("the FAIL threshold judged against, GB/s")
    warn_below_gbps: float | None = _f("below this (and above the threshold) the verdict is WARN, GB/s")
    fail_below_gbps: float | None = _f("below this the verdict is FAIL, GB/s")
    expectation_source: str | None = _f("where the expectation comes from")
    source_format: str = _f("how the log was written: text, or nccl-tests' -J json", enum=("text", "json"))
    rows: tuple[SizeRow, ...] = _f("every message size of the sweep")
    plot: str | None = _f("the PNG written by --plot; null: none")


@dataclass(frozen=True)
class P2pFigures(_Part):
    """A two-node point-to-point run (OSU osu_bw / osu_latency or perftest) and its expectation (kind p2p)."""

    tool: str | None = _f("the bandwidth tool judged, e.g. osu_bw or ib_write_bw; null: no bandwidth table")
    unit: str = _f("the bandwidth unit of this kind", enum=("Gb/s",))
    max_size_bytes: int | None = _f("the largest message size: the one judged")
    bw_at_max_size_gbits: float | None = _f("bandwidth at the largest size, Gb/s: the judged figure")
    max_bw_gbits: float | None = _f("the highest bandwidth of any size, Gb/s")
    max_bw_size_bytes: int | None = _f("the size of that highest bandwidth")
    latency_us: float | None = _f("latency at the smallest size of 1 byte or more, microseconds (not judged)")
    latency_size_bytes: int | None = _f("the size of that latency")
    latency_tool: str | None = _f("the latency tool, e.g. osu_latency")
    line_rate_gbits: float | None = _f("the SKU's InfiniBand line rate, Gb/s")
    threshold_gbits: float | None = _f("the FAIL threshold judged against, Gb/s")
    source: str | None = _f("where the expectation comes from")
    plot: str | None = _f("the PNG written by --plot; null: none")


@dataclass(frozen=True)
class Suspect(_Part):
    """A node (or one HCA of it) the fabric doctor names (the stack's fabricSuspects)."""

    host: str = _f("the node's host name")
    hca: str | None = _f("the HCA, e.g. mlx5_ib3; null: the node as a whole")
    reason: str = _f("why, in one line")
    evidence: dict[str, Any] = _f("the figures behind the reason")
    verdict: str = _f("how bad", enum=VERDICTS)


@dataclass(frozen=True)
class DoctorPair(_Part):
    """One pairwise all-reduce the doctor ran."""

    round: int = _f("the round (0: the all-nodes run of a 2-node job)")
    hosts: tuple[str, ...] = _f("the two hosts")
    busbw_gbps: float | None = _f("bus bandwidth at the largest size, GB/s")
    failure: str | None = _f("why there is no usable figure")
    transport: str | None = _f("NCCL's transport summary for the pair")


@dataclass(frozen=True)
class HcaBandwidth(_Part):
    """One HCA-to-HCA ib_write_bw run the doctor ran."""

    hosts: tuple[str, ...] = _f("client and server hosts")
    hca: str = _f("the device, the same name on both ends")
    bw_gbits: float | None = _f("average bandwidth at the largest size, Gb/s")
    failure: str | None = _f("why there is no usable figure")
    memory: str | None = _f("which memory ib_write_bw moved (host or cuda)")


@dataclass(frozen=True)
class Doctor(_Part):
    """The fabric doctor's run as the launcher log records it (docs/fabric-doctor.md)."""

    mode: str | None = _f("fabricTest.doctor: auto, always or never; null: the log has no doctor marker")
    ran: bool = _f("the doctor ran")
    reason: str | None = _f("why it ran or did not, in words")
    decision: dict[str, str] | None = _f("the figures the launcher decided on")
    finished: bool = _f("a doctor-end marker was printed (false: cut short, findings partial)")
    elapsed_s: float | None = _f("seconds the doctor took")
    budget_s: float | None = _f("its time budget, seconds")
    nodes_checked: tuple[str, ...] = _f("hosts whose per-node checks are in the log")
    pairs: tuple[DoctorPair, ...] = _f("every pairwise run")
    slow_pairs: tuple[DoctorPair, ...] = _f("the pairs below their expectation")
    hca_bw: tuple[HcaBandwidth, ...] = _f("every HCA ib_write_bw run")
    skipped: tuple[dict[str, str], ...] = _f("steps skipped, with the launcher's reason")
    notes: tuple[str, ...] = _f("findings that name no node")
    tiers: dict[str, dict[str, Any]] = _f(
        "per topology tier (within-torset, across-torsets) and per path between torsets (\"A|B\"): pairs, slow, "
        "median_busbw_gbps, min_busbw_gbps; {} when the nodes' torsets were not given")


@dataclass(frozen=True)
class Finding(_Part):
    """One cause of a failed or stuck run, from the cluster's state (clusterside/diagnose.py and snapshot.py)."""

    what: str = _f("the kind of finding")
    where: str = _f("the object it is about")
    message: str = _f("what is wrong and what to do")


@dataclass(frozen=True)
class Collected(_Part):
    """Where `collect` found the run (the Volcano job), and why it failed or stopped."""

    namespace: str = _f("the job's namespace")
    job: str = _f("the Volcano Job's name")
    job_phase: str | None = _f("the job's last phase, e.g. Completed, Failed")
    pod: str | None = _f("the launcher pod whose log was read")
    log_tail: tuple[str, ...] = _f("the log's last lines")
    diagnosis: tuple[Finding, ...] = _f("why the job failed or did not start, one finding per cause")
    gave_up: str | None = _f("why the collector stopped waiting; null: the run completed")
    waited_minutes: float | None = _f("how long it waited before giving up; null: the run completed")
    sharp: bool | None = _f("nccl: the run used SHARP (CollNet); null for p2p")


class KindFigures(NamedTuple):
    field: str  # the FabricResult field and JSON key (published: never renamed)
    figures: type[AllReduceFigures] | type[P2pFigures]


# Each log format's figures (core/kinds.py LOG_FORMATS), and so each kind's (`figures_of`); the schema has one
# result per kind (verify/result_schema.py).
BY_FORMAT = {kinds.NCCL_TESTS: KindFigures("allreduce", AllReduceFigures),
             kinds.BANDWIDTH_TABLES: KindFigures("p2p", P2pFigures)}


def figures_of(kind: str | None) -> KindFigures | None:
    """The figures of the kind called `kind` (its log format's); None for a name core/kinds.py does not
    know, which is refused by name, never read as another kind."""
    record = kinds.BY_NAME.get(kind) if isinstance(kind, str) else None
    return BY_FORMAT[record.log_format] if record else None


@dataclass(frozen=True)
class FabricResult:
    """One fabric-test result, or an error (`verdict` null, `error` set). See the module docstring."""

    kind: str | None = _f("which test: nccl (all-reduce, GPU sizes) or p2p (point to point, CPU-only sizes)",
                          enum=kinds.KINDS)
    verdict: str | None = _f("the verdict; null only in an error document", enum=VERDICTS)
    reasons: tuple[str, ...] = _f("why, worst first", default=())
    sku: str | None = _f("the VM size judged, as the catalog names it; null: none given", default=None)
    nodes: int | None = _f("nodes judged (p2p: always 2)", default=None)
    allreduce: AllReduceFigures | None = None
    p2p: P2pFigures | None = None
    suspects: tuple[Suspect, ...] = _f("the fabric doctor's named nodes / HCAs (with `doctor`)", default=())
    doctor: Doctor | None = _f("the fabric doctor's run (kind nccl)", default=None)
    collected: Collected | None = None
    error: str | None = _f("why there is no result (an error document only)", default=None)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def failure(cls, message: str) -> FabricResult:
        """The error document: no result (unreadable input, bad arguments, a timeout ...)."""
        return cls(kind=None, verdict=None, error=message)

    def with_plot(self, plot: str | None) -> FabricResult:
        """The result with the figures' `plot` (the PNG --plot wrote) set."""
        figures = self.figures
        if figures is None:
            return self
        return dataclasses.replace(self, **{figures_of(self.kind).field: dataclasses.replace(figures, plot=plot)})

    @property
    def figures(self) -> AllReduceFigures | P2pFigures | None:
        of = figures_of(self.kind)
        return getattr(self, of.field) if of else None

    def to_json(self) -> dict[str, Any]:
        """The JSON document (a dict ready for json.dumps): the groups' keys flat, as the schema says."""
        if self.verdict is None:
            return {"schemaVersion": self.schema_version, "verdict": None, "error": self.error}
        doc: dict[str, Any] = {"schemaVersion": self.schema_version, "kind": self.kind, "verdict": self.verdict,
                               "reasons": list(self.reasons), "sku": self.sku, "nodes": self.nodes}
        if self.figures is not None:
            doc.update(_dump(self.figures))
        if self.doctor is not None:
            doc["suspects"] = _dump(self.suspects)
            doc["doctor"] = _dump(self.doctor)
        if self.collected is not None:
            doc.update(_dump(self.collected))
        return doc

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, doc: Any) -> FabricResult:
        """A document (json.loads of --json output) as the type; ResultError names the first key that
        the schema would refuse (another schemaVersion, a missing or unknown key, a wrong type)."""
        if not isinstance(doc, dict):
            raise ResultError(f"a fabric result is a JSON object, got {type(doc).__name__}")
        version = doc.get("schemaVersion")
        if version != SCHEMA_VERSION:
            raise ResultError(f"schemaVersion: {version!r}, this reader knows {SCHEMA_VERSION} ({SCHEMA_PATH.name})")
        if doc.get("verdict", "") is None:
            _keys(doc, {"schemaVersion", "verdict", "error"}, "an error document")
            return cls.failure(_load(str, doc["error"], "error"))
        kind = doc.get("kind")
        of = figures_of(kind)
        if of is None:
            raise ResultError(f"kind: {kind!r}, allowed: {', '.join(kinds.BY_NAME)}")
        figures_field, figures_cls = of
        groups = {"figures": (figures_cls, "max_size_bytes"), "collected": (Collected, "job")}
        allowed = set(COMMON_KEYS) | {f.name for c, _ in groups.values() for f in dataclasses.fields(c)}
        if kinds.kind(kind).has_doctor:
            allowed |= {"suspects", "doctor"}
        _keys(doc, allowed, f"a {kind} result", required=COMMON_KEYS)
        got = {name: _group(c, marker, doc) for name, (c, marker) in groups.items()}
        has_doctor = "doctor" in doc or "suspects" in doc
        if has_doctor:
            _keys(doc, allowed, "a result with the doctor's findings", required=("suspects", "doctor"))
        return cls(
            kind=kind,
            verdict=_enum(doc["verdict"], VERDICTS, "verdict"),
            reasons=_load(tuple[str, ...], doc["reasons"], "reasons"),
            sku=_load(str | None, doc["sku"], "sku"),
            nodes=_load(int | None, doc["nodes"], "nodes"),
            **{field: got["figures"] if field == figures_field else None for field, _ in BY_FORMAT.values()},
            suspects=_load(tuple[Suspect, ...], doc["suspects"], "suspects") if has_doctor else (),
            doctor=_load(Doctor, doc["doctor"], "doctor") if has_doctor else None,
            collected=got["collected"],
        )

    @classmethod
    def loads(cls, text: str) -> FabricResult:
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as err:
            raise ResultError(f"not JSON ({err.msg})") from None


# The keys of every result (not an error): the ones FabricResult holds itself, outside its groups.
COMMON_KEYS = ("schemaVersion", "kind", "verdict", "reasons", "sku", "nodes")


# --- reading and writing by the type hints ---------------------------------------------------------
def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _keys(doc: dict, allowed: set[str], what: str, required: tuple[str, ...] = ()) -> None:
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise ResultError(f"{unknown[0]}: not a key of {what} (schema v{SCHEMA_VERSION})")
    missing = [k for k in required if k not in doc]
    if missing:
        raise ResultError(f"{missing[0]}: missing from {what}")


def _group(cls: type, marker: str, doc: dict) -> Any:
    """A group's dataclass when its marker key is in `doc` (then all of its keys must be), else None."""
    if marker not in doc:
        return None
    return _load(cls, {f.name: doc[f.name] for f in dataclasses.fields(cls) if f.name in doc}, cls.__name__)


def _enum(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise ResultError(f"{where}: {value!r}, allowed: {', '.join(allowed)}")
    return value


def _load(hint: Any, value: Any, where: str) -> Any:
    """`value` as `hint` (the annotations above), or ResultError naming `where`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):  # X | None
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _load(inner, value, where)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ResultError(f"{where}: an object, got {value!r}")
        fields = {f.name: f for f in dataclasses.fields(hint)}
        _keys(value, set(fields), where, required=tuple(fields))
        hints = field_types(hint)
        return hint(**{name: _field(hints[name], f, value[name], f"{where}.{name}") for name, f in fields.items()})
    if origin is tuple:
        if not isinstance(value, list):
            raise ResultError(f"{where}: a list, got {value!r}")
        return tuple(_load(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ResultError(f"{where}: an object, got {value!r}")
        return {k: _load(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if hint is Any:
        return value
    ok = {str: isinstance(value, str), bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool)}[hint]
    if not ok:
        raise ResultError(f"{where}: {value!r} is not {JSON_TYPES[hint]}")
    return value


def _field(hint: Any, f: dataclasses.Field, value: Any, where: str) -> Any:
    enum = f.metadata.get("enum")
    if enum and value is not None:
        _enum(value, enum, where)
    return _load(hint, value, where)


JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}  # also the schema's names
