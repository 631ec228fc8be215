"""Pictures of the render's timeline: the dependency graph and a gantt chart, as SVG via matplotlib.

No system graphviz: a layered layout (column = longest chain of dependencies before a step), boxes
coloured by component, the critical path in red, on-node steps dashed. Deterministic bytes: text is
kept as SVG text (no font outlines), ids are salted with a fixed string, no date or creator metadata.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
from matplotlib import rcParams  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from offline.timeline import Timeline  # noqa: E402

rcParams["svg.hashsalt"] = "aks-infiniband-offline-render"
rcParams["svg.fonttype"] = "none"
rcParams["font.family"] = "DejaVu Sans"  # bundled with matplotlib: same metrics everywhere
_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac", "#ff9da7",
            "#e15759")
_CRITICAL = "#c0392b"


def _svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata=_METADATA)
    return buf.getvalue()


def _colours(tl: Timeline) -> dict[str, str]:
    comps = sorted({s.component for s in tl.steps.values()})
    return {c: _PALETTE[i % len(_PALETTE)] for i, c in enumerate(comps)}


def _layers(tl: Timeline) -> dict[str, int]:
    depth: dict[str, int] = {}

    def of(sid: str) -> int:
        if sid not in depth:
            depth[sid] = 1 + max((of(d) for d in sorted(tl.steps[sid].deps)), default=-1)
        return depth[sid]

    for sid in sorted(tl.steps):
        of(sid)
    return depth


def dependency_svg(tl: Timeline) -> bytes:
    depth = _layers(tl)
    columns: dict[int, list[str]] = {}
    for sid in sorted(tl.steps, key=lambda s: (tl.steps[s].component, s)):
        columns.setdefault(depth[sid], []).append(sid)
    ncols = max(columns, default=0) + 1
    nrows = max((len(v) for v in columns.values()), default=1)
    box_w, box_h, gap_x, gap_y = 3.2, 0.9, 1.2, 0.45
    width, height = ncols * (box_w + gap_x) + 0.5, nrows * (box_h + gap_y) + 1.6
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    pos: dict[str, tuple[float, float]] = {}
    for col, sids in sorted(columns.items()):
        for row, sid in enumerate(sids):
            pos[sid] = (0.3 + col * (box_w + gap_x), height - 1.2 - row * (box_h + gap_y) - box_h)
    critical = set(zip(tl.critical_path, tl.critical_path[1:], strict=False))
    colours = _colours(tl)
    for sid in sorted(tl.steps):
        for dep in sorted(tl.steps[sid].deps):
            on_path = (dep, sid) in critical
            (x0, y0), (x1, y1) = pos[dep], pos[sid]
            ax.annotate("", xy=(x1, y1 + box_h / 2), xytext=(x0 + box_w, y0 + box_h / 2),
                        arrowprops={"arrowstyle": "-|>", "color": _CRITICAL if on_path else "#888888",
                                    "lw": 2.2 if on_path else 0.8, "shrinkA": 0, "shrinkB": 2})
    on_path_nodes = set(tl.critical_path)
    for sid, (x, y) in sorted(pos.items()):
        step = tl.steps[sid]
        ax.add_patch(FancyBboxPatch((x, y), box_w, box_h, boxstyle="round,pad=0.02,rounding_size=0.1",
                                    facecolor=colours[step.component], alpha=0.9,
                                    edgecolor=_CRITICAL if sid in on_path_nodes else "#333333",
                                    linewidth=2.4 if sid in on_path_nodes else 0.8,
                                    linestyle="--" if step.on_node else "-"))
        kind = "on-node step" if step.on_node else step.type.rsplit(":", 1)[-1]
        ax.text(x + box_w / 2, y + box_h * 0.66, sid if len(sid) <= 34 else sid[:33] + "…", ha="center",
                va="center", fontsize=8, color="white", weight="bold")
        ax.text(x + box_w / 2, y + box_h * 0.28, f"{kind} · {step.duration.typical_min:g} min", ha="center",
                va="center", fontsize=7, color="white")
    ax.text(0.3, height - 0.5, "Dependency graph (arrows: must finish before). Red: critical path to "
            f"{tl.target or 'apply complete'}. Dashed: work on the nodes after Pulumi moved on. Minutes are "
            "estimates (offline/durations.py).", fontsize=9, va="center")
    return _svg(fig)


def gantt_svg(tl: Timeline) -> bytes:
    steps = sorted(tl.steps.values(), key=lambda s: (tl.start["typical"][s.id], tl.finish["typical"][s.id], s.id))
    on_path = set(tl.critical_path)
    end = max(tl.finish["typical"].values(), default=1.0) or 1.0
    fig = Figure(figsize=(11, 0.32 * len(steps) + 1.4))
    ax = fig.add_axes((0.3, 0.9 / (0.32 * len(steps) + 1.4), 0.66, 1 - 1.3 / (0.32 * len(steps) + 1.4)))
    colours = _colours(tl)
    for i, s in enumerate(steps):
        begin, finish = tl.start["typical"][s.id], tl.finish["typical"][s.id]
        ax.barh(i, max(finish - begin, end / 400), left=begin, height=0.6, color=colours[s.component],
                edgecolor=_CRITICAL if s.id in on_path else "none", linewidth=1.8,
                hatch="//" if s.on_node else None)
    ax.set_yticks(range(len(steps)), [s.id for s in steps], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("minutes from `pulumi up` (typical estimates)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    if tl.target:
        ax.axvline(tl.finish["typical"][tl.target], color=_CRITICAL, lw=1, ls=":")
    what = "first fabric test result" if tl.target else "everything ready"
    ax.set_title(f"Timeline: {what} at {tl.critical_total('typical'):.0f} min on the critical path vs "
                 f"{tl.sequential_total('typical'):.0f} min one step after another", fontsize=9)
    return _svg(fig)
