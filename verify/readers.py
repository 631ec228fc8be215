"""How a fabric-test result is read from a log and judged: one small protocol, `Reader`, implemented once
per log format (core/kinds.py LOG_FORMATS: nccl-tests' table, OSU / perftest bandwidth tables) and made
once per kind, from its record (`for_kind`). `python -m verify` looks the kind's reader up by name
(`reader`) and passes the object, so `report` and `collect` are one path for every kind.

What the kind's record says (its name, threshold flag and unit, the nodes it spans, whether NCCL's
settings such as SHARP, the fabric doctor or the rack run apply) is read from it; what differs by format
is here: the parser and the verdict, the other unit's flag refused (never converted), and the fabric
doctor's findings folded in.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from core import catalog, kinds, rdma_drivers
from verify import doctor_report, logread, p2p
from verify.nccl import ParseError
from verify.report import summary, table
from verify.result import FabricResult
from verify.verdict import Verdict, headline, judge, plural


@dataclass(frozen=True)
class Settings:
    """What a result is judged with: the command line's --sku, --nodes, threshold and --plot."""

    sku: str | None
    nodes: int | None
    threshold: float | None  # in the kind's unit (Reader.threshold)
    plot: str | None = None
    job_failed: str | None = None  # the Volcano job failed (collect): a FAIL whatever the log says
    rack: bool = False  # the rack's NVLink run of a GB size (collect --rack): judged by the catalog's rack figure
    rdma_driver: str = rdma_drivers.DEFAULT  # the pool's RDMA driver stack (--rdma-driver; core/rdma_drivers.py)
    # host (as the log's markers name it) -> its torset, when the nodes' ib/torset labels are known (the
    # certifier reads them): the doctor judges each pair against its tier (verify/doctor.py)
    torsets: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Judged:
    result: FabricResult
    text: str  # the readable report


class Reader(Protocol):
    record: kinds.Kind  # the kind's record
    kind: str  # its name: --kind and the result's `kind`
    threshold_flag: str  # the flag of this kind's threshold, its unit in the name (the record's)
    measures_sharp: bool  # --sharp applies: NCCL's settings do (the record's runs_nccl)

    def threshold(self, args: argparse.Namespace) -> float | None:
        """The threshold override in this kind's unit (its flag has the unit in its name)."""

    def problem(self, args: argparse.Namespace) -> str | None:
        """The flags that do not apply to this kind, as an error message (None: all good)."""

    def nodes(self, args: argparse.Namespace) -> int | None:
        """The nodes a result of this kind spans, as the command line says."""

    def judge(self, log: str | logread.LogFold, settings: Settings) -> Judged:
        """The log's result, judged; one of PARSE_ERRORS when the log holds none. The log is its text
        or the one pass over it (verify.logread)."""

    def unread(self, log: str | logread.LogFold, settings: Settings, exc: ValueError) -> Judged:
        """A FAIL for a run whose log holds no result (`exc` says why), with what else the log tells."""

    def where(self, sku: str | None, nodes: int | None) -> str:
        """What was judged, after the source, for the FAIL line: " on <sku> x 4 nodes"."""


def verdict_text(result: FabricResult) -> str:
    """A result with no figure (the run did not complete, the log held no table): the headline and why."""
    return headline(Verdict(result.verdict), result.sku, None, None, None) + "\n" + "".join(
        f"  - {r}\n" for r in result.reasons)


def _no_result(kind: str, what: str, settings: Settings, nodes: int | None, exc: ValueError) -> FabricResult:
    reasons = [settings.job_failed] if settings.job_failed else []
    return FabricResult(kind=kind, verdict=Verdict.FAIL.value,
                        reasons=(*reasons, f"the launcher log holds no {what} result: {exc}"),
                        sku=settings.sku, nodes=nodes)


class _OfKind:
    """What a reader takes from its kind's record."""

    def __init__(self, record: kinds.Kind) -> None:
        self.record = record
        self.kind, self.threshold_flag, self.measures_sharp = record.name, record.threshold_flag, record.runs_nccl

    def threshold(self, args: argparse.Namespace) -> float | None:
        """The value of the record's threshold flag (--threshold-gbps: args.threshold_gbps)."""
        return getattr(args, self.threshold_flag.removeprefix("--").replace("-", "_"))

    def nodes(self, args: argparse.Namespace) -> int | None:
        """The record's fixed count, or (a kind that spans the pool) what --nodes says."""
        return self.record.nodes if self.record.nodes is not None else args.nodes

    def _nodes_problem(self, args: argparse.Namespace) -> str | None:
        fixed = self.record.nodes
        if fixed is None and args.command == "collect" and args.nodes is None:
            return f"--nodes is required with --kind {self.kind} (the nodes its run was meant to span)"
        if fixed is not None and args.nodes is not None and args.nodes != fixed:
            return f"--nodes {args.nodes}: a {self.kind} result spans {fixed} nodes (omit --nodes)"
        return None

    def _as_kind(self, judged: Judged) -> Judged:
        """The result under this reader's kind (and its fixed node count): the parsers name the kind of
        their format that core/kinds.py lists first."""
        fixed = {} if self.record.nodes is None else {"nodes": self.record.nodes}
        return Judged(dataclasses.replace(judged.result, kind=self.kind, **fixed), judged.text)


class NcclTests(_OfKind):
    """nccl-tests all_reduce_perf across the GPU nodes, with the fabric doctor's findings folded in where
    the kind has the doctor."""

    def problem(self, args: argparse.Namespace) -> str | None:
        if args.threshold_gbits is not None:
            return ("--threshold-gbits is the point-to-point threshold in Gb/s; an nccl-tests result is judged in "
                    "GB/s of bus bandwidth: use --threshold-gbps")
        return self._nodes_problem(args)

    def judge(self, log: str | logread.LogFold, settings: Settings) -> Judged:
        read = logread.fold(log, p2p=False)
        result = read.nccl()
        rack = {"expectation": catalog.lookup(settings.sku).allreduce_rack} if settings.rack and settings.sku else {}
        judgement = judge(result, sku=settings.sku, nodes=settings.nodes, threshold_gbps=settings.threshold,
                          job_failed=settings.job_failed, rdma_driver=rdma_drivers.rdma_driver(settings.rdma_driver),
                          **rack)
        out = summary(result, judgement)
        if settings.plot:
            from verify.plot import write_png

            out = out.with_plot(str(write_png(result, judgement, settings.plot)))
        return self._as_kind(self._with_doctor(read, settings, out, table(result, judgement)))

    def unread(self, log: str | logread.LogFold, settings: Settings, exc: ValueError) -> Judged:
        out = _no_result(self.kind, "nccl-tests", settings, self.record.nodes or settings.nodes, exc)
        # the doctor may still name the node that broke the all-nodes run
        return self._with_doctor(log, settings, out, verdict_text(out))

    def where(self, sku: str | None, nodes: int | None) -> str:
        return f" on {sku}" + (f" x {plural(nodes, 'node')}" if nodes else "") if sku else ""

    def _with_doctor(self, log: str | logread.LogFold, settings: Settings, out: FabricResult, text: str) -> Judged:
        """The fabric doctor's findings (verify/doctor_report.py) folded into the all-reduce's result:
        `suspects` and `doctor` in the JSON, its block in the text, the verdict raised to the worst finding."""
        if not self.record.has_doctor:
            return Judged(out, text)
        assessment = doctor_report.assess(log, sku=settings.sku, threshold_gbps=settings.threshold,
                                          rdma_driver=rdma_drivers.rdma_driver(settings.rdma_driver),
                                          torsets=settings.torsets)
        merged = doctor_report.merge(out, assessment)
        text += doctor_report.text(assessment)
        if merged.verdict != out.verdict:
            text += f"OVERALL VERDICT: {merged.verdict} (the worst finding: the fabric doctor's)\n"
        return Judged(merged, text)


class BandwidthTables(_OfKind):
    """OSU osu_bw / osu_latency or perftest between two nodes (verify/p2p.py)."""

    def problem(self, args: argparse.Namespace) -> str | None:
        if args.threshold_gbps is not None:
            return ("--threshold-gbps is the NCCL bus-bandwidth threshold in GB/s; a point-to-point (OSU / "
                    f"perftest) result is judged in Gb/s: use --threshold-gbits (e.g. {args.threshold_gbps * 8:g} "
                    f"for {args.threshold_gbps:g} GB/s)")
        return self._nodes_problem(args)

    def judge(self, log: str | logread.LogFold, settings: Settings) -> Judged:
        read = logread.fold(log, nccl=False)
        verdict = p2p.judge(read.p2p(), settings.sku, threshold_gbits=settings.threshold,
                            job_failed=settings.job_failed)
        if notes := read.p2p_not_kept():  # a log unlike any run's: what the bounded reader left out
            verdict = dataclasses.replace(verdict, reasons=(*verdict.reasons, *notes))
        out = verdict.result()
        if settings.plot:
            out = out.with_plot(str(p2p.plot(verdict, settings.plot)))
        return self._as_kind(Judged(out, p2p.table(verdict)))

    def unread(self, log: str | logread.LogFold, settings: Settings, exc: ValueError) -> Judged:
        out = _no_result(self.kind, "point-to-point", settings, self.record.nodes, exc)
        return Judged(out, verdict_text(out))

    def where(self, sku: str | None, nodes: int | None) -> str:
        return (f" on {sku}" if sku else "") + ", point to point"


# What a reader's judge raises when the log holds no result of its kind (each parser has its own).
PARSE_ERRORS = (ParseError, p2p.ParseError)
BY_FORMAT: dict[str, type[NcclTests] | type[BandwidthTables]] = {
    kinds.NCCL_TESTS: NcclTests, kinds.BANDWIDTH_TABLES: BandwidthTables}


def for_kind(record: kinds.Kind) -> Reader:
    """The reader of a kind's log: its format's, judging under its record."""
    return BY_FORMAT[record.log_format](record)


READERS: dict[str, Reader] = {k.name: for_kind(k) for k in kinds.BY_NAME.values()}


def reader(kind: str) -> Reader:
    """The reader of `kind` (a core.kinds name); an unknown kind is refused by name."""
    try:
        return READERS[kind]
    except KeyError:
        raise KeyError(f"unknown fabric-test kind {kind!r}; known: {', '.join(READERS)}") from None
