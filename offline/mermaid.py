"""The render's two pictures as Mermaid text, which GitHub draws wherever Markdown is shown (the README,
docs/, the offline-diff comment on a pull request): no drawing code, no image files to keep in step.

Both pictures show the same boxes: one per component of the stack (its resources together: a Helm
release and its custom resource, a namespace and its ConfigMaps), and one per piece of work the nodes
do after Pulumi moved on (the DOCA and GPU drivers, the image pull, the test's run), because those
are what the time goes to. plan.md and timeline.json keep every resource.

- `dependency_graph(tl)`: `flowchart TD`, layered top-down by Mermaid's layout. The components that
  only need the cluster's Kubernetes API sit in one box, fed by one arrow from the cluster (in place of
  the provider's arrow to every object), and so does the node setup that waits only for the pool and
  that layer (drivers, image pull); arrows implied by longer chains are left out. The critical path is
  red, work on the nodes dashed, and a legend says so.
- `timeline(tl, test)`: a `gantt` chart of the same boxes at their typical windows, the critical path
  red, work on the nodes in a section of its own; a low–high section draws the range of the whole run
  and of each box on the critical path (from its earliest start to its latest end); a legend section
  in the chart's own colours.

Deterministic text: boxes in a stable order, minutes rounded. `make golden` (`python -m offline
docs`, offline/docblocks.py) writes the dev stack's into README.md and docs/.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from offline.timeline import Timeline

PROVIDER_PREFIX = "pulumi:providers:"
K8S_BOX = "k8s"
SETUP_BOX = "setup"
CRITICAL_COLOUR = "#c0392b"
SCENARIOS = ("typical", "low", "high")


@dataclass
class Box:
    key: str  # the component's name, or the on-node step's id
    steps: list[str]
    on_node: bool
    kubernetes: bool  # only Kubernetes objects
    deps: set[str] = field(default_factory=set)  # other boxes' keys, transitively reduced
    ancestors: set[str] = field(default_factory=set)  # every box it waits for, directly or not
    own_minutes: float = 0.0  # typical: its longest chain of its own steps
    start: dict[str, float] = field(default_factory=dict)  # scenario -> minute its first step starts
    finish: dict[str, float] = field(default_factory=dict)  # scenario -> minute its last step ends

    @property
    def id(self) -> str:
        return "b_" + "".join(c if c.isalnum() else "_" for c in self.key)


def _minutes(x: float) -> str:
    return f"{x:.0f}" if x >= 10 or x == round(x) else f"{x:.1f}"


def boxes(tl: Timeline) -> dict[str, Box]:
    """The pictures' boxes, with their dependencies and windows per scenario."""
    box_of = {sid: sid if s.on_node else s.component for sid, s in tl.steps.items()}
    out: dict[str, Box] = {}
    for sid, s in sorted(tl.steps.items()):
        b = out.setdefault(box_of[sid], Box(box_of[sid], [], s.on_node, kubernetes=not s.on_node))
        b.steps.append(sid)
        b.kubernetes = b.kubernetes and s.type.startswith("kubernetes:")
    for b in out.values():
        for scenario in SCENARIOS:
            b.start[scenario] = min(tl.start[scenario][s] for s in b.steps)
            b.finish[scenario] = max(tl.finish[scenario][s] for s in b.steps)

    def waits_for(dep: str) -> set[str]:
        """The boxes that a wait for step `dep` is a wait for. An arrow says "must finish before", so a
        step that does not end its box (a namespace that another component's Role goes into) stands for
        what it waits for itself, not for its whole box."""
        box = out[box_of[dep]]
        if tl.finish["typical"][dep] >= box.finish["typical"]:
            return {box.key}
        return set().union(*(waits_for(d) for d in tl.steps[dep].deps))

    for b in out.values():
        b.deps = set().union(*(waits_for(d) for s in b.steps for d in tl.steps[s].deps
                               if box_of[d] != b.key)) - {b.key}
        chain: dict[str, float] = {}
        for sid in sorted(b.steps, key=lambda x: tl.start["typical"][x]):
            inside = [chain[d] for d in tl.steps[sid].deps if d in chain]
            chain[sid] = max(inside, default=0.0) + tl.steps[sid].duration.typical_min
        b.own_minutes = max(chain.values())

    def ancestors(key: str) -> set[str]:
        b = out[key]
        if not b.ancestors and b.deps:
            for d in b.deps:
                b.ancestors |= {d} | ancestors(d)
        return b.ancestors

    for key in out:
        ancestors(key)
    for b in out.values():  # arrows implied by a longer chain are left out
        b.deps -= set().union(*(out[d].ancestors for d in b.deps))
    return out


def _kinds(tl: Timeline, b: Box) -> str:
    counts = Counter(tl.steps[s].type.rsplit(":", 1)[-1] for s in b.steps
                     if not tl.steps[s].type.startswith(PROVIDER_PREFIX))
    return ", ".join(k if n == 1 else f"{k} ×{n}" for k, n in sorted(counts.items()))


def _span(b: Box, scenario: str = "typical") -> float:
    return b.finish[scenario] - b.start[scenario]


def _critical_boxes(tl: Timeline, all_boxes: dict[str, Box]) -> list[str]:
    path: list[str] = []
    for sid in tl.critical_path:
        key = next(k for k, b in all_boxes.items() if sid in b.steps)
        if not path or path[-1] != key:
            path.append(key)
    return path


def kubernetes_layer(all_boxes: dict[str, Box]) -> list[str]:
    """The boxes of Kubernetes objects that wait for nothing but the cluster (through its provider), so
    they install while the pool is created: drawn as one box, fed by one arrow."""
    azure = {k for k, b in all_boxes.items() if not b.kubernetes and not b.on_node}
    kubernetes = [b for b in all_boxes.values() if b.kubernetes]
    if not kubernetes:  # the Azure half of a split stack (stack/): no Kubernetes layer to draw
        return []
    feeds = set.intersection(*(b.ancestors & azure for b in kubernetes))
    return sorted(k for k, b in all_boxes.items() if b.kubernetes and b.ancestors <= feeds | {
        o for o, ob in all_boxes.items() if ob.kubernetes})


def dependency_graph(tl: Timeline) -> str:
    all_boxes = boxes(tl)
    path = _critical_boxes(tl, all_boxes)
    layer = set(kubernetes_layer(all_boxes))
    key_of = {k: (K8S_BOX if k in layer else k) for k in all_boxes}
    order = sorted(all_boxes.values(), key=lambda b: (b.start["typical"], b.finish["typical"], b.key))

    def label(b: Box) -> str:
        if b.on_node:
            return f"{b.key.replace('/', '/<br/>')}<br/><small>on the nodes · {_minutes(b.own_minutes)} min</small>"
        return f"{b.key}<br/><small>{_kinds(tl, b)} · {_minutes(b.own_minutes)} min</small>"

    # Node setup: the work on the nodes that waits only for the pool and the Kubernetes layer (the drivers,
    # the image pull) runs side by side: one box too, so that two arrows reach it instead of one per step.
    setup = {b.key for b in order if b.on_node and {key_of[d] for d in b.ancestors} <= {K8S_BOX, *(
        k for k in all_boxes if k not in layer and not all_boxes[k].on_node and not all_boxes[k].kubernetes)}}
    key_of.update({k: SETUP_BOX for k in setup})

    lines = ["flowchart TD"]
    for b in order:
        if b.key not in layer and b.key not in setup:
            lines.append(f'  {b.id}["{label(b)}"]')
    if layer:
        inside = "<br/>".join(f"{b.key} · {_minutes(b.own_minutes)} min" for b in order if b.key in layer)
        lines.append(f'  {K8S_BOX}["Kubernetes layer: needs only the cluster<br/><small>{inside}</small>"]')
    if setup:
        # each by what it waits for (the step's own name; timeline.json and plan.md give the full id)
        inside = "<br/>".join(f"{k.rsplit('/', 1)[-1]} · {_minutes(all_boxes[k].own_minutes)} min"
                              + (" (critical)" if k in path else "")
                              for k in sorted(setup, key=lambda k: (-all_boxes[k].own_minutes, k)))
        lines.append(f'  {SETUP_BOX}["node setup, side by side, on the nodes<br/><small>{inside}</small>"]')
    edges: list[tuple[str, str]] = []
    for b in order:
        for d in sorted(b.deps, key=lambda k: (all_boxes[k].start["typical"], k)):
            edge = (key_of[d], key_of[b.key])
            if edge[0] != edge[1] and edge not in edges:
                edges.append(edge)
    edges = [e for e in edges if not _reaches(edges, *e)]  # an arrow a longer chain implies says nothing more
    critical_edges = {(key_of[a], key_of[b]) for a, b in zip(path, path[1:], strict=False)}
    ids = {K8S_BOX: K8S_BOX, SETUP_BOX: SETUP_BOX, **{k: b.id for k, b in all_boxes.items()}}
    lines += [f"  {ids[a]} --> {ids[b]}" for a, b in edges]
    red = [str(i) for i, edge in enumerate(edges) if edge in critical_edges]

    lines += [
        '  subgraph legend["Legend: an arrow means must finish before"]',
        "    direction LR",
        '    l_crit["critical path"]',
        '    l_node["on the nodes, after<br/>Pulumi moved on"]',
        '    l_res["component<br/><small>its resources · typical minutes, estimated</small>"]',
        "    l_crit ~~~ l_node ~~~ l_res",
        "  end",
        f"  {ids[key_of[order[-1].key]]} ~~~ legend",
        f"  classDef crit stroke:{CRITICAL_COLOUR},stroke-width:3px",
        "  classDef onnode stroke-dasharray:6 4",
    ]
    on_node = sorted({ids[key_of[b.key]] for b in order if b.on_node})
    critical = sorted({ids[key_of[k]] for k in path})
    for cls, members in (("crit", critical + ["l_crit"]), ("onnode", on_node + ["l_node"])):
        lines.append(f"  class {','.join(members)} {cls}")
    if red:
        lines.append(f"  linkStyle {','.join(red)} stroke:{CRITICAL_COLOUR},stroke-width:3px")
    return "\n".join(lines) + "\n"


def _reaches(edges: list[tuple[str, str]], a: str, b: str) -> bool:
    """Whether `b` follows `a` through a chain of two or more of `edges`."""
    todo, seen = [y for x, y in edges if x == a and y != b], set()
    while todo:
        x = todo.pop()
        if x == b:
            return True
        if x not in seen:
            seen.add(x)
            todo += [y for w, y in edges if w == x]
    return False


def _clock(minutes: float) -> str:
    """Minutes as Mermaid's HH:mm:ss: parsed and shown in the reader's one time zone, so none shifts them."""
    seconds = round(minutes * 60)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def timeline(tl: Timeline, test: str | None = None) -> str:
    all_boxes = boxes(tl)
    path = set(_critical_boxes(tl, all_boxes))
    what = f"first {test} result" if test else "every resource created"
    typical, low, high = (_minutes(tl.critical_total(x)) for x in SCENARIOS)
    lines = [
        "gantt",
        f"  title Time to {'the ' if test else ''}{what}: {typical} min typical ({low}–{high}), estimated",
        "  dateFormat HH:mm:ss",
        "  axisFormat %H:%M",
        "  tickInterval 10minute",
        "  todayMarker off",
    ]
    order = sorted(all_boxes.values(), key=lambda b: (b.start["typical"], b.finish["typical"], b.key))
    layer = set(kubernetes_layer(all_boxes))
    target = next((k for k, b in all_boxes.items() if tl.target in b.steps), None)
    after = {k for k, b in all_boxes.items() if target in b.ancestors}
    sections = (("Azure", lambda b: not b.kubernetes and not b.on_node and b.key not in after),
                ("Kubernetes layer", lambda b: b.key in layer),
                ("Kubernetes, after the pool", lambda b: b.kubernetes and b.key not in layer),
                ("on the nodes", lambda b: b.on_node),
                ("after the result", lambda b: b.key in after and not b.on_node and not b.kubernetes))
    for title, member in sections:
        members = list(filter(member, order))
        if members:
            lines.append(f"  section {title}")
        for b in members:  # its own work, ending when its last step ends
            tag = "crit, " if b.key in path else ""  # not `active`: Mermaid's dark theme hides its text
            begin = b.finish["typical"] - b.own_minutes
            lines.append(f"    {b.key} · {_minutes(b.own_minutes)} min :{tag}{_clock(begin)}, "
                         f"{_clock(b.finish['typical'])}")
    lines.append("  section low–high")
    lines.append(f"    {what} {low}–{high} min :done, {_clock(tl.critical_total('low'))}, "
                 f"{_clock(tl.critical_total('high'))}")
    for b in order:
        if b.key in path and _span(b, "high") >= 1:
            lines.append(f"    {b.key} {_minutes(_span(b, 'low'))}–{_minutes(_span(b, 'high'))} min :done, "
                         f"{_clock(b.start['low'])}, {_clock(b.finish['high'])}")
    lines += [
        "  section legend",
        "    critical path :crit, 00:00:00, 00:05:00",
        "    other steps :00:00:00, 00:05:00",
        "    low–high range, earliest start to latest end :done, 00:00:00, 00:05:00",
    ]
    return "\n".join(lines) + "\n"

