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

from verify import perftest, transport
from verify.doctor import HcaBandwidth, NodeCheck, PairRun
from verify.hca import parse_gpus, parse_ports
from verify.loglines import untag
from verify.nccl import NcclResult, ParseError, parse
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
        return tuple(h for h in self.attrs.get("hosts", "").split(",") if h)


def marker(name: str, **attrs: object) -> str:
    """One marker line, as the launcher prints it (tests and docs use this to agree with it)."""
    parts = [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in attrs.items()]
    return " ".join([PREFIX + name, *parts]).rstrip()


def split(text: str) -> list[Section]:
    sections: list[Section] = []
    name, attrs, start, body = None, {}, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        m = _MARKER.match(untag(line))
        if m:
            if name is not None or any(b.strip() for b in body):
                sections.append(Section(name, attrs, "\n".join(body), start))
            name, attrs, start, body = m["name"], dict(_ATTR.findall(m["attrs"])), number, []
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


# The launcher's reason codes for running the doctor or not, in words.
REASONS = {
    "mode-never": "fabricTest.doctor is never",
    "mode-always": "fabricTest.doctor is always",
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
    return _nccl_figure(text)[1:]


def _nccl_figure(text: str) -> tuple[NcclResult | None, float | None, str | None]:
    try:
        result: NcclResult = parse(text)
    except ParseError as exc:
        return None, None, f"no nccl-tests result ({exc})" if text.strip() else "no output"
    return result, *_figure(result)


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
    result, busbw, failure = _nccl_figure(text)
    # a run that printed no table may still say it fell back to sockets
    t = result.transport if result is not None and result.transport else transport.parse(text)
    if not t.seen:
        return PairRun(round_, hosts, busbw, failure)
    named = {h.split(".")[0]: h for h in hosts}
    return PairRun(round_, hosts, busbw, failure, transport=t.summary(2),
                   socket_hosts=tuple(named.get(h, h) for h in t.socket_hosts),
                   no_gdr_hosts=tuple(named.get(h, h) for h in t.hosts_without_gdr()))


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _write_bw(text: str) -> tuple[float | None, str | None]:
    series = [s for s in perftest.parse_all(text) if s.kind == BANDWIDTH]
    if not series:
        last = _last_line(text)
        return None, "no ib_write_bw result" + (f": {last}" if last else "")
    return series[-1].largest.value, None


def read_doctor(sections: Sequence[Section]) -> DoctorRun:
    decision = next((s for s in sections if s.name == DOCTOR), None)
    end = next((s for s in sections if s.name == DOCTOR_END), None)
    per_node: dict[str, dict] = {}
    pairs: list[PairRun] = []
    bws: list[HcaBandwidth] = []
    for s in sections:
        if s.name == NODE and s.attrs.get("host"):
            entry = per_node.setdefault(s.attrs["host"], {})
            check = s.attrs.get("check")
            if check == "hca":
                entry["ports"] = parse_ports(s.text)
            elif check == "gpus":
                entry["gpus"] = len(parse_gpus(s.text))
            elif check == "allreduce":
                entry["allreduce_busbw_gbps"], entry["allreduce_failure"] = nccl_figure(s.text)
        elif s.name == PAIR and len(s.hosts()) == 2:
            a, b = s.hosts()
            pairs.append(pair_run(_int(s.attrs.get("round")) or 0, (a, b), s.text))
        elif s.name == HCA_BW and len(s.hosts()) == 2 and s.attrs.get("hca"):
            bw, failure = _write_bw(s.text)
            a, b = s.hosts()
            bws.append(HcaBandwidth((a, b), s.attrs["hca"], bw, failure, s.attrs.get("memory")))
    if decision is None:
        return DoctorRun()
    known = {"mode", "run", "reason"}
    return DoctorRun(
        mode=decision.attrs.get("mode"),
        ran=decision.attrs.get("run") == "yes",
        reason=decision.attrs.get("reason"),
        decision={k: v for k, v in decision.attrs.items() if k not in known},
        finished=end is not None,
        elapsed_s=_int(end.attrs.get("elapsed_s")) if end else None,
        budget_s=_int((end or decision).attrs.get("budget_s")),
        nodes=tuple(NodeCheck(host, **checks) for host, checks in per_node.items()),
        pairs=tuple(pairs),
        hca_bws=tuple(bws),
        skipped=tuple(s.attrs for s in sections if s.name == DOCTOR_SKIP),
    )
