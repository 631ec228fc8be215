"""Point-to-point RDMA results (CPU-only HB / HX sizes): reading a log with either parser
(`verify.osu`, `verify.perftest`; their common result type and units are `verify.series`),
auto-detection of the tool, and the verdict against the SKU's link rate.

The expectation (line rate, fail threshold, source) is `catalog.Sku.p2p`; nothing SKU-specific is
written here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import catalog, kinds
from verify import figures, osu, perftest
from verify.result import FabricResult, P2pFigures
from verify.series import BANDWIDTH, LATENCY, ParseError, Point, Series  # noqa: F401 - also used as p2p.X
from verify.verdict import Verdict, headline

# The verdict's judgement rules (the thresholds themselves live in catalog.Sku.p2p).
# Both tools reach line rate only with large messages: in every published two-node run we hold
# (tests/data) bandwidth is within a few percent of its plateau from 1 MiB on. A sweep that stops
# below that says nothing about the link rate. [INFERRED from those runs, not from a spec]
MIN_JUDGED_SIZE_BYTES = 1 << 20
# One HCA cannot carry more than its line rate. A figure well above it means the two ranks did not
# talk over one InfiniBand link (same node, shared memory, or several rails striped). 5 % covers the
# rounding of the published line rate; measured HDR/NDR results sit below it (e.g. 196.6 of 200).
ABOVE_LINE_RATE_TOLERANCE = 1.05

NODES = 2  # a point-to-point result: one rank on each of two nodes

# The verdict's statuses and their order (FAIL > UNKNOWN > WARN > PASS) are the NCCL verdict's.
PASS, WARN, FAIL, UNKNOWN = Verdict.PASS, Verdict.WARN, Verdict.FAIL, Verdict.UNKNOWN


def parse(text: str) -> list[Series]:
    """Every OSU and perftest result table in `text` (one launcher log may hold osu_bw then
    osu_latency). Raises ParseError when there is none."""
    return found(osu.parse_all(text) + perftest.parse_all(text))


def found(series: list[Series]) -> list[Series]:
    """`series`, or the ParseError that says no table was found."""
    if not series:
        raise ParseError(
            "no osu_bw / osu_latency table ('# OSU MPI ... Test' then '# Size ...' rows) and no perftest "
            "table (' #bytes  #iterations  BW ...' or '... t_avg[usec] ...' rows) in the log"
        )
    return series


def detect(text: str) -> str | None:
    """Which point-to-point tool family wrote `text`: "osu", "perftest", or None."""
    if osu.looks_like(text):
        return "osu"
    if perftest.looks_like(text):
        return "perftest"
    return None


def parse_file(path: str | Path) -> list[Series]:
    return parse(Path(path).read_text(errors="replace"))


@dataclass(frozen=True)
class P2pVerdict:
    """The verdict of a two-node point-to-point run, shaped like the NCCL verdict: a status and the
    reasons for it, plus the figures it was judged on (the typed result through `result`)."""

    status: Verdict  # PASS | WARN | FAIL | UNKNOWN
    reasons: tuple[str, ...]
    vm_size: str | None  # None: no SKU given (judged only against a threshold given, else UNKNOWN)
    tool: str | None = None
    max_size_bytes: int | None = None
    bw_at_max_size_gbits: float | None = None
    max_bw_gbits: float | None = None
    max_bw_size_bytes: int | None = None
    latency_us: float | None = None
    latency_size_bytes: int | None = None
    latency_tool: str | None = None
    line_rate_gbits: float | None = None
    threshold_gbits: float | None = None
    source: str | None = None
    series: tuple[Series, ...] = field(default=(), repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == PASS

    def result(self) -> FabricResult:
        """The typed result (verify/result.py; its JSON keys are public API, the stack exports some):
        `verdict`, `reasons`, `max_size_bytes` and `sku` mean what they mean in the NCCL result; the
        figures carry their unit in the name (Gb/s = 10^9 bits/s, unlike the NCCL path's GB/s busbw)."""
        figures = P2pFigures(
            tool=self.tool,
            unit="Gb/s",
            max_size_bytes=self.max_size_bytes,
            bw_at_max_size_gbits=_round(self.bw_at_max_size_gbits),
            max_bw_gbits=_round(self.max_bw_gbits),
            max_bw_size_bytes=self.max_bw_size_bytes,
            latency_us=_round(self.latency_us),
            latency_size_bytes=self.latency_size_bytes,
            latency_tool=self.latency_tool,
            line_rate_gbits=self.line_rate_gbits,
            threshold_gbits=self.threshold_gbits,
            source=self.source,
            plot=None,
        )
        return FabricResult(kind=kinds.P2P, verdict=self.status.value, reasons=self.reasons, sku=self.vm_size,
                            nodes=NODES, p2p=figures)

    def summary(self) -> str:
        """The headline (the same shape as the NCCL report's), the latency, then every reason."""
        bw = self.bw_at_max_size_gbits
        figure = f"{self.tool} {figures.figure(bw)} Gb/s" if bw is not None else None
        threshold = f"{self.threshold_gbits:g} Gb/s" if self.threshold_gbits is not None else None
        lines = [headline(self.status, self.vm_size, figure, self.max_size_bytes, threshold)]
        if self.line_rate_gbits is not None:
            lines.append(f"  line rate {self.line_rate_gbits:g} Gb/s")
        if self.latency_us is not None:
            lines.append(f"  latency: {self.latency_tool} {self.latency_us:.2f} us at {self.latency_size_bytes} B "
                         "(reported, not judged)")
        return "\n".join(lines + [f"  - {r}" for r in self.reasons])


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def judge(series: Sequence[Series] | Iterable[Series], vm_size: str | None, *,
          threshold_gbits: float | None = None, job_failed: str | None = None) -> P2pVerdict:
    """Judge a two-node point-to-point run on `vm_size` against its catalog link expectation (no size:
    against `threshold_gbits` alone, or UNKNOWN, as the NCCL verdict does without a SKU).

    Rules (the worst finding wins, FAIL > UNKNOWN > WARN > PASS, as in the NCCL verdict):
    - the figure judged is the bandwidth at the LARGEST message size (the last row), not the peak:
      a link that sags at large messages is not healthy;
    - FAIL: the job failed, no bandwidth rows, OSU data validation failed, or the judged figure is
      below the threshold (catalog `Sku.p2p.threshold_gbits`, or `threshold_gbits` when given);
    - UNKNOWN: no bandwidth table, no expectation and no override, or a sweep that stopped below
      `MIN_JUDGED_SIZE_BYTES`;
    - WARN: a figure above one link's line rate (the ranks did not talk over one HCA), or device
      (GPU) buffers on a size whose test measures host memory.
    """
    series = tuple(series)
    sku = catalog.lookup(vm_size) if vm_size else None
    expect = sku.p2p if sku else None
    bws = [s for s in series if s.kind == BANDWIDTH and s.points]
    lats = [s for s in series if s.kind == LATENCY and s.points]
    findings: list[tuple[Verdict, str]] = []
    fields: dict[str, Any] = {"vm_size": sku.vm_size if sku else None, "series": series}

    if job_failed:
        findings.append((FAIL, f"the job failed: {job_failed}"))

    lat = lats[-1] if lats else None
    if lat is not None:
        point = lat.at_or_above(1) or lat.largest
        fields.update(latency_us=point.value, latency_size_bytes=point.size_bytes, latency_tool=lat.tool)

    threshold = float(threshold_gbits) if threshold_gbits is not None else (
        expect.threshold_gbits if expect else None)
    fields.update(threshold_gbits=threshold)
    if expect is not None:
        fields.update(line_rate_gbits=expect.baseline_gbits, source=expect.source)

    if not bws:
        what = "the log holds a latency table only" if lats else "the log holds no result table"
        findings.append((FAIL if job_failed else UNKNOWN,
                         f"no bandwidth rows to judge ({what}); osu_bw or ib_write_bw must run across the two nodes"))
        return _verdict(findings, fields)

    bw = bws[-1]
    last, best = bw.largest, bw.best
    fields.update(tool=bw.tool, max_size_bytes=last.size_bytes, bw_at_max_size_gbits=last.value,
                  max_bw_gbits=best.value, max_bw_size_bytes=best.size_bytes)

    if bw.validation_failed_sizes:
        findings.append((FAIL, f"{bw.tool} data validation failed at {len(bw.validation_failed_sizes)} size(s), "
                               f"first {_size(bw.validation_failed_sizes[0])}: the bytes received were not the "
                               f"bytes sent"))
    if threshold is None and sku is None:
        findings.append((UNKNOWN, "no SKU given (--sku) and no --threshold-gbits: nothing to judge against"))
    elif threshold is None:
        findings.append((UNKNOWN, f"the catalog has no point-to-point expectation for {sku.vm_size}; "
                                  f"pass a threshold in Gb/s to judge against your own"))
    elif last.size_bytes < MIN_JUDGED_SIZE_BYTES:
        findings.append((UNKNOWN, f"the sweep stopped at {_size(last.size_bytes)}: bandwidth has not reached its "
                                  f"plateau; run up to {_size(MIN_JUDGED_SIZE_BYTES)} or more (osu_bw -m, "
                                  f"ib_write_bw -a)"))
    elif (last.value < threshold and threshold_gbits is None and expect is not None
          and expect.other_tool_warn_from_gbits is not None and bw.tool != expect.gate_tool
          and last.value >= expect.other_tool_warn_from_gbits):
        # The catalog's gate was measured with another tool (raw verbs): within its band, not proof.
        findings.append((WARN, f"{last.value:.1f} Gb/s at {_size(last.size_bytes)} is below the gate "
                               f"{threshold:g} Gb/s, which Azure measures with {expect.gate_tool}; {bw.tool} adds "
                               f"MPI/UCX overhead, so down to {expect.other_tool_warn_from_gbits:g} Gb/s it is a "
                               f"WARN, not a FAIL (set a threshold to judge {bw.tool} by your own figure)"))
    elif last.value < threshold:
        line = f" ({expect.baseline_gbits:g} Gb/s {sku.ib_generation} line rate)" if expect and sku else ""
        findings.append((FAIL, f"{last.value:.1f} Gb/s at {_size(last.size_bytes)} is below the threshold "
                               f"{threshold:g} Gb/s{line}"))
        if best.value >= threshold:
            findings.append((FAIL, f"the sweep peaked at {best.value:.1f} Gb/s at {_size(best.size_bytes)} and "
                                   f"then fell: the link sags at large messages (congestion, a flapping port, "
                                   f"a path that is not RDMA)"))
    else:
        line = f", line rate {expect.baseline_gbits:g} Gb/s {sku.ib_generation}" if expect and sku else ""
        findings.append((PASS, f"{last.value:.1f} Gb/s at {_size(last.size_bytes)} "
                               f"(threshold {threshold:g} Gb/s{line})"))
    if expect is not None and best.value > expect.baseline_gbits * ABOVE_LINE_RATE_TOLERANCE:
        findings.append((WARN, f"{best.value:.1f} Gb/s exceeds one {expect.baseline_gbits:g} Gb/s link: the ranks "
                               f"did not talk over one InfiniBand HCA (same node, shared memory, or several rails)"))
    if bw.accelerator:
        findings.append((WARN, f"{bw.tool} ran with {bw.accelerator} device buffers; on a CPU-only size the test "
                               f"measures host memory"))
    return _verdict(findings, fields)


def _verdict(findings: list[tuple[Verdict, str]], fields: dict[str, Any]) -> P2pVerdict:
    status = max((v for v, _ in findings), key=lambda v: v.severity, default=UNKNOWN)
    reasons = tuple(r for v, r in sorted(findings, key=lambda f: -f[0].severity)) or ("nothing to judge",)
    return P2pVerdict(status=status, reasons=reasons, **fields)


def table(verdict: P2pVerdict) -> str:
    """A readable report: each table's rows in the normalised unit, then the verdict and why."""
    lines: list[str] = []
    for s in verdict.series:
        head = f"{s.tool}" + (f" {s.version}" if s.version else "") + (f" ({s.accelerator})" if s.accelerator else "")
        lines += [head, f"{'size':>10}  {s.kind + ' (' + s.unit + ')':>18}"]
        lines += [f"{_size(p.size_bytes).replace(' ', ''):>10}  {p.value:>18.2f}" for p in s.points]
        lines.append("")
    return "\n".join(lines) + verdict.summary() + "\n"


def plot(verdict: P2pVerdict, path: str | Path) -> Path:
    """Bandwidth against message size, with the line rate and the fail threshold. matplotlib's
    object API on the Agg canvas (no pyplot state); no "Software" stamp, so a re-run gives the same bytes."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # a dev requirement: the verdict works without it
        raise RuntimeError(f"--plot needs matplotlib ({exc}); pip install -r requirements-dev.txt") from None

    path = Path(path)
    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for s in verdict.series:
        if s.kind != BANDWIDTH:
            continue
        pts = sorted(s.points, key=lambda p: p.size_bytes)
        ax.plot([max(p.size_bytes, 1) for p in pts], [p.value for p in pts], marker="o", ms=3, label=s.tool)
    if verdict.line_rate_gbits is not None:
        ax.axhline(verdict.line_rate_gbits, color="tab:green", ls="--",
                   label=f"line rate {verdict.line_rate_gbits:g} Gb/s")
    if verdict.threshold_gbits is not None:
        ax.axhline(verdict.threshold_gbits, color="tab:red", ls=":",
                   label=f"threshold {verdict.threshold_gbits:g} Gb/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (Gb/s)")
    ax.set_title(f"{verdict.vm_size or 'no SKU given'}: {verdict.status.value}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path
