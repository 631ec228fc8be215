"""The launcher log's sections: the marker lines scripts/nccl-launcher.sh prints, and what each
section holds, parsed with the existing parsers.

A marker is one line, `# aks-infiniband <section> key=value ...` (values have no spaces; host lists
are comma-separated); a section is the text from its marker to the next one. The sections and what
follows each are listed in docs/fabric-doctor.md ("The log: section markers").

A log without markers (an older launcher, a saved nccl-tests output) is one all-reduce.
The `#` keeps a marker a comment to nccl-tests' own parsers. The launcher prints the markers itself,
untagged; a section's text may carry mpirun's --tag-output prefixes, which the parsers remove
(`verify.loglines`, also applied to a marker line in case one arrives tagged).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from verify import bounded, dmabuf, perftest
from verify.bounded import Kept
from verify.doctor_checks import HcaBandwidth, NodeCheck, PairRun
from verify.hca import parse_gpus, parse_ports
from verify.loglines import untag
from verify.nccl import ParseError, Stream
from verify.nccl_result import NcclResult
from verify.p2p import BANDWIDTH

PREFIX = "# aks-infiniband "
_MARKER = re.compile(r"^# aks-infiniband (?P<name>[a-z][a-z0-9-]*)(?P<attrs>(?: +[a-z_]+=\S*)*) *$")
_ATTR = re.compile(r"([a-z_]+)=(\S*)")

ALLREDUCE, DOCTOR, NODE, PAIR, HCA_BW, DOCTOR_SKIP, DOCTOR_END = (
    "allreduce", "doctor", "node", "pair", "hca-bw", "doctor-skip", "doctor-end")


@dataclass(frozen=True)
class Section:
    name: str | None  # None: the text before the first marker
    attrs: dict[str, str]
    text: str
    line: int  # the marker's line number (1-based; 0 for the text before the first marker)

    def hosts(self) -> tuple[str, ...]:
        return hosts_of(self.attrs)


def marker(name: str, **attrs: object) -> str:
    """One marker line, as the launcher prints it (tests and docs use this to agree with it)."""
    parts = [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in attrs.items()]
    return " ".join([PREFIX + name, *parts]).rstrip()


def parse_marker(line: str) -> tuple[str, dict[str, str]] | None:
    """A marker line's section name and attributes; None for any other line."""
    m = _MARKER.match(untag(line)) if PREFIX in line else None  # the prefix test first: most lines are not
    return (m["name"], dict(_ATTR.findall(m["attrs"]))) if m else None


def split(text: str) -> list[Section]:
    sections: list[Section] = []
    name, attrs, start, body = None, {}, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        if found := parse_marker(line):
            if name is not None or any(b.strip() for b in body):
                sections.append(Section(name, attrs, "\n".join(body), start))
            (name, attrs), start, body = found, number, []
        else:
            body.append(line)
    if name is not None or any(b.strip() for b in body):
        sections.append(Section(name, attrs, "\n".join(body), start))
    return sections


def has_markers(text: str) -> bool:
    return any(_MARKER.match(untag(line)) for line in text.splitlines())


def allreduce_text(text: str) -> str:
    """The all-nodes run: its section (and what came before it: the launcher's own lines), or the
    whole log when it has no markers."""
    parts = split(text)
    if not any(s.name for s in parts):
        return text
    keep = [s.text for s in parts if s.name in (None, ALLREDUCE)]
    return "\n".join(keep)


# --- the doctor's sections ----------------------------------------------------------------------
@dataclass(frozen=True)
class DoctorRun:
    """What the launcher's doctor did and measured, as the log says."""

    mode: str | None = None  # auto | always | never (None: the log has no doctor marker)
    ran: bool = False
    reason: str | None = None  # the launcher's reason code (see REASONS)
    decision: dict[str, str] = field(default_factory=dict)  # the doctor marker's other figures
    finished: bool = False  # a doctor-end marker was printed
    elapsed_s: int | None = None
    budget_s: int | None = None
    nodes: tuple[NodeCheck, ...] = ()
    pairs: tuple[PairRun, ...] = ()
    hca_bws: tuple[HcaBandwidth, ...] = ()
    skipped: tuple[dict[str, str], ...] = ()
    not_kept: tuple[str, ...] = ()  # what the reader counted but did not keep (verify.bounded), in words


# The launcher's reason codes for running the doctor or not, in words. A mode is the run's (DOCTOR_RUN_REASON),
# not named as a stack key: `report` reads logs that no stack made.
REASONS = {
    "mode-never": "the run's doctor mode was never",
    "mode-always": "the run's doctor mode was always",
    "allreduce-passed": "the all-nodes run reached the pass line, so under auto the doctor did not run",
    "allreduce-below-pass-line": "the all-nodes run is below the pass line",
    "allreduce-failed": "the all-nodes run failed or printed no result at its largest size",
    "allreduce-sockets": "NCCL used TCP sockets, not RDMA, in the all-nodes run",
    "allreduce-no-gdrdma": "an inter-node connection of the all-nodes run ran without GPUDirect RDMA",
    "allreduce-fewer-hcas": "a host opened fewer InfiniBand HCAs than its size has in the all-nodes run",
    "no-pass-line": "no pass line is known for this size and node count, so the verdict cannot be PASS",
    "single-node": "one node: no fabric to diagnose",
}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def nccl_figure(text: str) -> tuple[float | None, str | None]:
    """(busbw at the largest size, why there is none)."""
    return _lines(NcclFigure(), text).figure()[1:]


class NcclFigure:
    """A section's nccl-tests run, one line at a time: its result and figure (`figure`), and as a pair
    (`pair`) with what NCCL's lines say of the transport, even where it printed no table."""

    def __init__(self) -> None:
        self.stream = Stream()

    def feed(self, line: str) -> None:
        self.stream.feed(line)

    def figure(self) -> tuple[NcclResult | None, float | None, str | None]:
        try:
            result = self.stream.result()
        except ParseError as exc:
            return None, None, f"no nccl-tests result ({exc})" if self.stream.content else "no output"
        return result, *_figure(result)

    def pair(self, round_: int, hosts: tuple[str, str]) -> PairRun:
        """The section as a 2-node all-reduce (`pair_run`)."""
        result, busbw, failure = self.figure()
        # a run that printed no table may still say it fell back to sockets
        t = result.transport if result is not None and result.transport else self.stream.transport()
        if not t.seen:
            return PairRun(round_, hosts, busbw, failure)
        named = {h.split(".")[0]: h for h in hosts}
        return PairRun(round_, hosts, busbw, failure, transport=t.summary(2),
                       socket_hosts=tuple(named.get(h, h) for h in t.socket_hosts),
                       no_gdr_hosts=tuple(named.get(h, h) for h in t.hosts_without_gdr()),
                       no_dmabuf_hosts=tuple(named.get(h, h) for h in dmabuf.hosts_without(t)))


def _lines(sink, text: str):
    for line in text.splitlines():
        sink.feed(line)
    return sink


def _figure(result: NcclResult) -> tuple[float | None, str | None]:
    if result.errors:
        return None, result.errors[0]
    if not result.rows:
        return None, "no result rows"
    if result.wrong:
        return None, f"{result.wrong} wrong elements (#wrong > 0)"
    if result.out_of_bounds:
        return None, f"{result.out_of_bounds} out-of-bounds values"
    if result.ranks is not None and result.ranks < 2:
        return None, None  # one rank exchanges nothing: busbw is 0 by definition, not a measurement
    return result.busbw_at_max_size_gbps, None


def pair_run(round_: int, hosts: tuple[str, str], text: str) -> PairRun:
    """A 2-node all-reduce section: its figure, and what NCCL's INFO lines in it say about the
    transport (hosts named as the marker names them; NCCL names a host by its first label)."""
    return _lines(NcclFigure(), text).pair(round_, hosts)


class _Text:
    """A section read as a whole (an ibstatus listing, nvidia-smi -L): its text, up to bounded.SECTION_CHARS."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.chars = 0

    def feed(self, line: str) -> None:
        self.chars += len(line) + 1
        if self.chars <= bounded.SECTION_CHARS:
            self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines)


class _WriteBw:
    """An hca-bw section: ib_write_bw's table, and the last line it printed (for a run that printed none)."""

    def __init__(self) -> None:
        self.parser = perftest.Parser()
        self.last: str | None = None

    def feed(self, line: str) -> None:
        self.parser.feed(line)
        self.last = line.strip() or self.last

    def figure(self) -> tuple[float | None, str | None]:
        series = [s for s in self.parser.series() if s.kind == BANDWIDTH]
        if not series:
            return None, "no ib_write_bw result" + (f": {self.last}" if self.last else "")
        return series[-1].largest.value, None


class DoctorReader:
    """What the doctor's sections say (`run`), read one section at a time (`begin` with its marker's name
    and attributes, `feed` its lines, `end`), so that no section's text need be kept whole; `read_doctor`
    reads split sections with it. A ParseError in a section is raised by `run`, as read_doctor raises it."""

    def __init__(self) -> None:
        self.decision: dict[str, str] | None = None  # the first doctor marker's attributes
        self.end_attrs: dict[str, str] | None = None  # the first doctor-end marker's
        self.per_node: dict[str, dict] = {}
        self.pairs: Kept[PairRun] = Kept(bounded.ROWS, "pair sections")
        self.bws: Kept[HcaBandwidth] = Kept(bounded.ROWS, "hca-bw sections")
        self.skipped: Kept[dict[str, str]] = Kept(bounded.ROWS, "doctor-skip markers")
        self.error: ParseError | None = None
        self.cut = 0  # sections over bounded.SECTION_CHARS, read in part
        self._open: tuple | None = None  # (name, attrs, sink) of the section being read

    def begin(self, name: str | None, attrs: dict[str, str]) -> None:
        self.end()
        sink: object | None = None
        if name == DOCTOR and self.decision is None:
            self.decision = attrs
        elif name == DOCTOR_END and self.end_attrs is None:
            self.end_attrs = attrs
        elif name == DOCTOR_SKIP:
            self.skipped.append(attrs)
        elif name == NODE and attrs.get("host"):
            self.per_node.setdefault(attrs["host"], {})
            check = attrs.get("check")
            sink = NcclFigure() if check == "allreduce" else _Text() if check in ("hca", "gpus") else None
        elif name == PAIR and len(hosts_of(attrs)) == 2:
            sink = NcclFigure()
        elif name == HCA_BW and len(hosts_of(attrs)) == 2 and attrs.get("hca"):
            sink = _WriteBw()
        self._open = (name, attrs, sink) if sink is not None else None

    def feed(self, line: str) -> None:
        if self._open is not None:
            self._open[2].feed(line)

    def end(self) -> None:
        if self._open is None:
            return
        (name, attrs, sink), self._open = self._open, None
        if self.error is not None:
            return
        try:
            self._read(name, attrs, sink)
        except ParseError as exc:
            self.error = exc

    def _read(self, name: str, attrs: dict[str, str], sink) -> None:
        if isinstance(sink, _Text):
            self.cut += sink.chars > bounded.SECTION_CHARS
        if name == NODE:
            entry = self.per_node[attrs["host"]]
            if isinstance(sink, NcclFigure):
                entry["allreduce_busbw_gbps"], entry["allreduce_failure"] = sink.figure()[1:]
            elif attrs.get("check") == "hca":
                entry["ports"] = parse_ports(sink.text())
            else:
                entry["gpus"] = len(parse_gpus(sink.text()))
        elif name == PAIR:
            a, b = hosts_of(attrs)
            self.pairs.append(sink.pair(_int(attrs.get("round")) or 0, (a, b)))
        else:
            bw, failure = sink.figure()
            a, b = hosts_of(attrs)
            self.bws.append(HcaBandwidth((a, b), attrs["hca"], bw, failure, attrs.get("memory")))

    def run(self) -> DoctorRun:
        self.end()
        if self.error is not None:
            raise self.error
        decision, end = self.decision, self.end_attrs
        if decision is None:
            return DoctorRun()
        cut = f"{self.cut} doctor section(s) over {bounded.chars(bounded.SECTION_CHARS)}: the start of each read"
        known = {"mode", "run", "reason"}
        return DoctorRun(
            mode=decision.get("mode"),
            ran=decision.get("run") == "yes",
            reason=decision.get("reason"),
            decision={k: v for k, v in decision.items() if k not in known},
            finished=end is not None,
            elapsed_s=_int(end.get("elapsed_s")) if end else None,
            budget_s=_int((end or decision).get("budget_s")),
            nodes=tuple(NodeCheck(host, **checks) for host, checks in self.per_node.items()),
            pairs=tuple(self.pairs.items),
            hca_bws=tuple(self.bws.items),
            skipped=tuple(self.skipped.items),
            not_kept=tuple(n for n in (*(k.note() for k in (self.pairs, self.bws, self.skipped)),
                                       cut if self.cut else None) if n),
        )


def hosts_of(attrs: dict[str, str]) -> tuple[str, ...]:
    """A marker's `hosts`, a comma-separated list."""
    return tuple(h for h in attrs.get("hosts", "").split(",") if h)


def read_doctor(sections: Sequence[Section]) -> DoctorRun:
    reader = DoctorReader()
    for s in sections:
        reader.begin(s.name, s.attrs)
        _lines(reader, s.text)
        reader.end()
    return reader.run()
