"""The PNG: bus bandwidth against message size, with the baseline and threshold the verdict used.

matplotlib's object API with the Agg canvas (no pyplot, no display, no global state). The file is
byte-for-byte reproducible: no "Software" metadata, fixed size and DPI.
"""

from __future__ import annotations

from pathlib import Path

from verify.nccl_result import NcclResult
from verify.report import human_size
from verify.verdict import Judgement

_COLOURS = {"PASS": "#1a7f37", "WARN": "#9a6700", "FAIL": "#cf222e", "UNKNOWN": "#57606a"}


def write_png(result: NcclResult, judgement: Judgement, path: str | Path) -> Path:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError as exc:  # matplotlib is a dev requirement; the report works without it
        raise RuntimeError(f"--plot needs matplotlib ({exc}); pip install -r requirements-dev.txt") from None

    rows = sorted(result.rows, key=lambda r: r.size_bytes)
    fig = Figure(figsize=(9, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    sizes = [r.size_bytes for r in rows]
    oop = [(r.size_bytes, r.out_of_place.busbw_gbps) for r in rows if r.out_of_place]
    ip = [(r.size_bytes, r.in_place.busbw_gbps) for r in rows if r.in_place]
    if oop:
        ax.plot([s for s, _ in oop], [v for _, v in oop], marker="o", markersize=3.5, linewidth=1.6,
                label="out-of-place busbw")
    if ip:
        ax.plot([s for s, _ in ip], [v for _, v in ip], marker="s", markersize=3, linewidth=1.2, linestyle="--",
                label="in-place busbw")
    if judgement.baseline_gbps is not None:
        ax.axhline(judgement.baseline_gbps, color="#1a7f37", linewidth=1, linestyle=":",
                   label=f"baseline {judgement.baseline_gbps:g} GB/s")
    if judgement.threshold_gbps is not None:
        ax.axhline(judgement.threshold_gbps, color="#cf222e", linewidth=1, linestyle="-.",
                   label=f"threshold {judgement.threshold_gbps:g} GB/s")

    ax.set_xscale("log", base=2)
    if sizes:
        # a label per size the run measured, thinned to at most 16, always keeping the largest
        step = -(-len(sizes) // 16)
        ticks = sizes[::-1][::step][::-1]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.set_xticklabels([human_size(s) for s in ticks], rotation=45, ha="right")
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    tops = [v for _, v in oop + ip] + [x for x in (judgement.baseline_gbps, judgement.threshold_gbps) if x]
    ax.set_ylim(bottom=0, top=max(tops) * 1.12 if tops and max(tops) > 0 else 1)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, framealpha=0.9)

    who = judgement.sku or "SKU not given"
    nodes = f"{judgement.nodes} node{'s' if judgement.nodes != 1 else ''}" if judgement.nodes else "nodes unknown"
    ranks = f", {result.ranks} ranks" if result.ranks else ""
    at_max = result.busbw_at_max_size_gbps
    figure = f" - {at_max:.2f} GB/s at {human_size(result.max_size_bytes or 0)}" if at_max is not None else ""
    ax.set_title(f"{judgement.verdict.value}: all-reduce busbw, {who}, {nodes}{ranks}{figure}", fontsize=11)
    fig.text(0.99, 0.01, judgement.verdict.value, ha="right", va="bottom", fontsize=14, fontweight="bold",
             color=_COLOURS[judgement.verdict.value])
    fig.tight_layout()

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", metadata={"Software": None})
    return out
