"""The render's pictures (offline/mermaid.py): what a reader must be able to see in them, checked on the
Mermaid text (no browser here; `make pictures` draws them with Chromium to look at).

The dependency graph: the provider's fan-out collapsed into one arrow to the Kubernetes layer, no arrow
that a longer chain implies, the critical path red from its first box to the test's run, a legend.
The timeline: a bar per box, the critical ones red, the low–high range of the whole run, a legend.
"""

from __future__ import annotations

import json
import re

import pytest

from offline import mermaid, schedule, synth
from offline.engine import Rendering
from offline.timeline import Timeline

EDGE = re.compile(r"^  (\w+) --> (\w+)$", re.M)
BAR = re.compile(r"^    (?P<label>.+?) :(?P<tags>(?:\w+, )*)(?P<start>[\d:]{8}), (?P<end>[\d:]{8})$", re.M)


@pytest.fixture(scope="module")
def timeline(dev: Rendering) -> Timeline:
    return schedule.build_timeline(dev)


@pytest.fixture(scope="module")
def graph(timeline: Timeline) -> str:
    return mermaid.dependency_graph(timeline)


def _edges(text: str) -> list[tuple[str, str]]:
    return EDGE.findall(text)


def _minutes(clock: str) -> float:
    h, m, s = map(int, clock.split(":"))
    return h * 60 + m + s / 60


def test_the_provider_fan_out_is_one_arrow_into_the_kubernetes_layer(graph: str, timeline: Timeline):
    boxes = mermaid.boxes(timeline)
    layer = mermaid.kubernetes_layer(boxes)
    assert {"nfd", "network-operator", "gpu-operator", "volcano"} <= set(layer)
    into_layer = [a for a, b in _edges(graph) if b == mermaid.K8S_BOX]
    assert into_layer == [boxes["cluster"].id], "one arrow from the cluster, none from the provider to each object"
    for key in layer:  # drawn inside the layer's box, not as boxes of their own
        assert f"  {boxes[key].id}[" not in graph and f"{key} · " in graph
    provider_steps = [s for s in timeline.steps.values() if s.type.startswith(mermaid.PROVIDER_PREFIX)]
    assert provider_steps and all(s.id not in graph for s in provider_steps)


def test_no_arrow_is_implied_by_a_longer_chain(graph: str):
    edges = _edges(graph)
    after: dict[str, set[str]] = {}
    for a, b in edges:
        after.setdefault(a, set()).add(b)

    def reachable(a: str, b: str, skip: tuple[str, str]) -> bool:
        todo, seen = [a], set()
        while todo:
            x = todo.pop()
            for y in after.get(x, ()):
                if (x, y) != skip and y not in seen:
                    if y == b:
                        return True
                    seen.add(y)
                    todo.append(y)
        return False

    assert len(edges) == len(set(edges)) >= 8
    assert not [e for e in edges if reachable(*e, skip=e)]


def test_an_arrow_is_a_wait_for_the_whole_box(timeline: Timeline):
    """The legend says an arrow means "must finish before": a box drawn after another has a step that
    starts once the other has finished (the certifier, which needs only the fabric test's namespace,
    was drawn waiting for the whole fabric test while the timeline had it done at 9 minutes)."""
    boxes = mermaid.boxes(timeline)
    for b in boxes.values():
        for d in b.deps:
            latest_start = max(timeline.start["typical"][s] for s in b.steps)
            assert latest_start >= boxes[d].finish["typical"], f"{d} --> {b.key}, but {b.key} never waits for it"


def test_the_critical_path_is_red_from_its_start_to_the_test_run(graph: str, timeline: Timeline):
    edges = _edges(graph)
    (styled,) = re.findall(r"^  linkStyle ([\d,]+) stroke:#c0392b", graph, re.M)
    red = [edges[int(i)] for i in styled.split(",")]
    chain = [red[0][0]] + [b for _, b in red]
    assert all(a == b for (_, a), (b, _) in zip(red, red[1:], strict=False)), f"red arrows are not one chain: {red}"
    boxes = mermaid.boxes(timeline)
    def box_of(step: str) -> str:
        return next(b.id for b in boxes.values() if step in b.steps)

    assert chain[0] == box_of(timeline.critical_path[0]) == boxes["cluster"].id
    assert chain[-1] == box_of(timeline.target) == boxes["fabric-test-job/runs"].id, "the red chain ends at the run"
    (critical_class,) = re.findall(r"^  class (\S+) crit$", graph, re.M)
    assert set(critical_class.split(",")) == {*chain, "l_crit"}


def test_the_graph_has_a_legend(graph: str):
    legend = graph[graph.index('subgraph legend["Legend: an arrow means must finish before"]'):]
    assert 'l_crit["critical path"]' in legend and "l_node" in legend and "typical minutes, estimated" in legend
    assert re.search(r"^  class \S*l_node onnode$", graph, re.M)


def test_the_timeline_draws_each_box_the_critical_path_and_the_ranges(dev: Rendering, timeline: Timeline):
    files = synth.synthesize(dev)
    text = files["timeline.mmd"].decode()
    data = json.loads(files["timeline.json"])
    boxes = mermaid.boxes(timeline)
    body, ranges = text.split("  section low–high\n")
    ranges, legend = ranges.split("  section legend\n")
    bars = {m["label"].split(" · ")[0]: m for m in BAR.finditer(body)}
    assert set(bars) == set(boxes)
    for key, bar in bars.items():
        assert ("crit" in bar["tags"]) == (key in set(mermaid._critical_boxes(timeline, boxes))), key
        assert _minutes(bar["end"]) == pytest.approx(boxes[key].finish["typical"], abs=1 / 60)
    whole = next(BAR.finditer(ranges))
    low, high = data["critical_path_minutes"]["low"], data["critical_path_minutes"]["high"]
    assert whole["label"] == f"first NCCL all-reduce result {low:.0f}–{high:.0f} min" and whole["tags"] == "done, "
    assert (_minutes(whole["start"]), _minutes(whole["end"])) == (pytest.approx(low, abs=0.02),
                                                                  pytest.approx(high, abs=0.02))
    assert [m["tags"] for m in BAR.finditer(legend)] == ["crit, ", "", "done, "]
    typical = data["critical_path_minutes"]["typical"]
    assert text.splitlines()[1] == (f"  title Time to the first NCCL all-reduce result: {typical:.0f} min typical "
                                    f"({low:.0f}–{high:.0f}), estimated")


def test_a_stack_without_the_fabric_test_still_has_both_pictures(render):
    files = synth.synthesize(render(fabricTest={"enabled": False}))
    assert "Time to the every resource created" not in files["timeline.mmd"].decode()
    assert files["timeline.mmd"].decode().splitlines()[1].startswith("  title Time to every resource created")
    assert _edges(files["graph.mmd"].decode())
