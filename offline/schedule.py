"""The render's time estimate: its steps built from a rendering (`build_timeline`: each resource, the
on-node work after some of them, the dependencies, durations from offline/durations.py), when each
starts and ends in each scenario, the critical path, and `timeline.json`. The types are
offline/timeline.py; offline/mermaid.py draws them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offline import durations
from offline.engine import Rendering, Resource
from offline.objects import HELM_TYPES, helm_chart
from offline.timeline import Step, Timeline

SCENARIOS = ("typical", "low", "high")
DOCA_READY = "doca-driver-ready"  # the on-node step of the DOCA driver build (a NicClusterPolicy with ofedDriver)


# --- the timeline: steps, dependencies, durations (the types: offline/timeline.py) ---------------
def display_ids(rendering: Rendering) -> dict[str, str]:
    counts: dict[str, int] = {}
    for r in rendering.resources:
        counts[r.name] = counts.get(r.name, 0) + 1
    return {r.urn: (r.name if counts[r.name] == 1 else f"{r.name}:{r.type.rsplit(':', 1)[-1]}")
            for r in rendering.resources}


def top_component(rendering: Rendering, resource: Resource) -> Resource | None:
    """The component directly under the stack that holds `resource` (None when it has no parent component)."""
    by_urn = {r.urn: r for r in rendering.resources}
    current, top = resource, None
    while current.parent in by_urn:
        current = by_urn[current.parent]
        top = current
    return top


def is_node(r: Resource) -> bool:
    return r.custom or r.remote


def build_timeline(rendering: Rendering) -> Timeline:
    ids = display_ids(rendering)
    by_urn = {r.urn: r for r in rendering.resources}
    children: dict[str, list[Resource]] = {}
    for r in rendering.resources:
        children.setdefault(r.parent, []).append(r)

    def nodes_under(urn: str) -> set[str]:
        r = by_urn.get(urn)
        if r is None:
            return set()
        if is_node(r):
            return {ids[urn]}
        out: set[str] = set()
        for child in children.get(urn, []):
            out |= nodes_under(child.urn)
        return out

    steps: dict[str, Step] = {}
    for r in rendering.resources:
        if not is_node(r):
            continue
        label, duration = durations.duration_of(r)
        comp = top_component(rendering, r)
        deps: set[str] = set()
        for dep in r.dependencies:
            deps |= nodes_under(dep)
        provider_urn = r.provider.rsplit("::", 1)[0] if r.provider else ""
        deps |= nodes_under(provider_urn)
        deps.discard(ids[r.urn])
        steps[ids[r.urn]] = Step(ids[r.urn], label, r.type, comp.name if comp else "(stack)", duration, deps)

    def find(pred) -> list[Resource]:
        return sorted((r for r in rendering.resources if is_node(r) and pred(r)), key=lambda r: ids[r.urn])

    pools = [ids[r.urn] for r in find(lambda r: r.type == "azure-native:containerservice:AgentPool")]
    ready: list[str] = []
    for policy in find(lambda r: r.type.endswith(":NicClusterPolicy")):
        if (policy.inputs.get("spec") or {}).get("ofedDriver"):
            sid = f"{ids[policy.urn]}/{DOCA_READY}"
            steps[sid] = Step(sid, "DOCA/OFED driver container built and loaded on the IB nodes", "on-node",
                              steps[ids[policy.urn]].component, durations.DOCA_DRIVER_READY,
                              {ids[policy.urn], *pools}, on_node=True)
            ready.append(sid)
    doca_ready = list(ready)
    for release in find(lambda r: r.type in HELM_TYPES and helm_chart(r) == "gpu-operator"):
        values = release.inputs.get("values") or {}
        driver = (values.get("driver") or {}) if isinstance(values, Mapping) else {}
        if driver.get("enabled", True) is not False:
            sid = f"{ids[release.urn]}/gpu-driver-ready"
            steps[sid] = Step(sid, "GPU driver container (GPUDirect RDMA) ready on the GPU nodes", "on-node",
                              steps[ids[release.urn]].component, durations.GPU_DRIVER_READY,
                              {ids[release.urn], *pools, *(doca_ready if _waits_for_doca(driver) else ())},
                              on_node=True)
            ready.append(sid)
    runs: list[str] = []
    daemonsets = find(lambda r: r.type == "kubernetes:apps/v1:DaemonSet")
    for job in find(lambda r: r.type.startswith("kubernetes:batch.volcano.sh/") and r.type.endswith(":Job")):
        jid = ids[job.urn]
        images = {i for task in (job.inputs.get("spec") or {}).get("tasks") or []
                  for i in _pod_images((task.get("template") or {}).get("spec"))}
        # the test image: pulled by a DaemonSet that holds it on the nodes as they join, in parallel with the
        # drivers; else by the job's own pods, once the drivers are ready and they are scheduled
        prepulls = [ids[d.urn] for d in daemonsets
                    if images and images <= _pod_images(((d.inputs.get("spec") or {}).get("template") or {})
                                                        .get("spec"))]
        pull = f"{prepulls[0]}/image-pulled" if prepulls else f"{jid}/image-pulled"
        if prepulls:
            steps[pull] = Step(pull, "fabric test image pulled on the IB nodes by the pre-pull DaemonSet", "on-node",
                               steps[prepulls[0]].component, durations.IMAGE_PULL, {*prepulls, *pools}, on_node=True)
        else:
            steps[pull] = Step(pull, "fabric test image pulled by the job's pods, once they are scheduled", "on-node",
                               steps[jid].component, durations.IMAGE_PULL, {jid, *ready, *pools}, on_node=True)
        sid = f"{jid}/runs"
        steps[sid] = Step(sid, "fabric test job scheduled and run to its first result", "on-node",
                          steps[jid].component, durations.FABRIC_TEST_RUN, {jid, *ready, *pools, pull}, on_node=True)
        runs.append(sid)
        last = sid
        env = _launcher_env(job)
        doctor = durations.fabric_doctor(env.get("DOCTOR"), int(env.get("DOCTOR_SECONDS") or 0) / 60)
        if doctor is not None:
            last = f"{jid}/doctor"
            steps[last] = Step(last, f"fabric doctor after the all-nodes run (fabricTest.doctor: {env['DOCTOR']})",
                               "on-node", steps[jid].component, doctor, {sid}, on_node=True)
        for step in steps.values():  # whoever waits for the job (the verification) waits for its run
            if jid in step.deps and step.id not in (sid, pull, last):
                step.deps.add(last)

    return _scheduled(steps, runs)


def _waits_for_doca(driver: Mapping[str, Any]) -> bool:
    """Whether the GPU driver installs only after the DOCA driver: with `driver.rdma.enabled` (and the DOCA
    driver from its container, not the host) the driver pod's k8s-driver-manager init container waits for DOCA's
    /run/mellanox/drivers/.driver-ready on a node with a Mellanox HCA, before the driver container starts, on a
    fresh node too (NVIDIA/k8s-driver-manager v0.12.0, the GPU Operator v26.7.0 chart's driver.manager.version:
    cmd/driver-manager/main.go waitForMofedDriver)."""
    rdma = driver.get("rdma") or {}
    return isinstance(rdma, Mapping) and rdma.get("enabled") is True and rdma.get("useHostMofed") is not True


def _scheduled(steps: dict[str, Step], runs: list[str]) -> Timeline:
    """Each step's start and finish in each scenario, and the critical path to the first of `runs` to end."""
    order = _topological(steps)
    start: dict[str, dict[str, float]] = {}
    finish: dict[str, dict[str, float]] = {}
    for scenario in SCENARIOS:
        start[scenario], finish[scenario] = {}, {}
        for sid in order:
            begin = max((finish[scenario][d] for d in steps[sid].deps), default=0.0)
            start[scenario][sid] = begin
            finish[scenario][sid] = begin + getattr(steps[sid].duration, f"{scenario}_min")
    target = min(runs, key=lambda s: (finish["typical"][s], s)) if runs else None
    path: list[str] = []
    current = target or max(order, key=lambda s: (finish["typical"][s], s), default=None)
    while current is not None:
        path.append(current)
        deps = sorted(steps[current].deps)
        current = max(deps, key=lambda d: (finish["typical"][d], d)) if deps else None
    return Timeline(steps, target, start, finish, list(reversed(path)))


def on_the_node_images_drivers(tl: Timeline) -> Timeline | None:
    """`tl` with the pool on the node image's own RDMA drivers (`ibPool.rdmaDriver: inbox`): the same steps
    without the DOCA driver build (None where there is none). It is what the inbox render's own timeline is
    (tests/stack/test_synth.py renders both): its GPU Operator values change no step's duration here."""
    if not any(s.endswith(f"/{DOCA_READY}") for s in tl.steps):
        return None
    steps = {sid: Step(s.id, s.label, s.type, s.component, s.duration, {d for d in s.deps
                                                                        if not d.endswith(f"/{DOCA_READY}")},
                       s.on_node)
             for sid, s in tl.steps.items() if not sid.endswith(f"/{DOCA_READY}")}
    return _scheduled(steps, [tl.target] if tl.target else [])


def node_bring_up(tl: Timeline, scenario: str) -> float:
    """Minutes from a new node's join (the pool's step ends) until it is ready for the test: the latest of the
    on-node steps that follow the pool (drivers, the image pull), run for each node that scales up or is
    re-imaged. 0 when the render has none."""
    pools = {sid for sid, s in tl.steps.items() if s.type == "azure-native:containerservice:AgentPool"}
    after = [sid for sid, s in tl.steps.items()
             if s.on_node and s.deps & pools and not sid.endswith(("/runs", "/doctor"))]
    if not pools or not after:
        return 0.0
    joined = max(tl.finish[scenario][p] for p in pools)
    return round(max(tl.finish[scenario][sid] for sid in after) - joined, 6)  # minutes, float noise cut


def _launcher_env(job: Resource) -> dict[str, str]:
    """The env of a Volcano job's mpimaster container (the launcher's inputs)."""
    for task in (job.inputs.get("spec") or {}).get("tasks") or []:
        if task.get("name") == "mpimaster":
            containers = ((task.get("template") or {}).get("spec") or {}).get("containers") or []
            return {e["name"]: str(e.get("value", "")) for c in containers for e in c.get("env") or []}
    return {}


def _pod_images(pod_spec: Any) -> set[str]:
    """The images of a pod spec's containers and init containers."""
    spec = pod_spec if isinstance(pod_spec, Mapping) else {}
    return {str(c.get("image")) for key in ("initContainers", "containers") for c in spec.get(key) or []
            if isinstance(c, Mapping) and c.get("image")}


def _topological(steps: Mapping[str, Step]) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(sid: str, trail: tuple[str, ...]) -> None:
        if state.get(sid) == 2:
            return
        if state.get(sid) == 1:
            raise ValueError("dependency cycle: " + " -> ".join((*trail, sid)))
        state[sid] = 1
        for dep in sorted(steps[sid].deps):
            if dep in steps:
                visit(dep, (*trail, sid))
        state[sid] = 2
        order.append(sid)

    for sid in sorted(steps):
        visit(sid, ())
    for s in steps.values():
        s.deps &= set(steps)
    return order


def minutes_text(x: float) -> str:
    return f"{x:.0f} min" if x >= 10 else f"{x:.1f} min"


def timeline_json(rendering: Rendering, tl: Timeline, test: str | None = None) -> dict[str, Any]:
    def r1(x: float) -> float:
        return round(x, 2)

    return {
        "stack": rendering.stack,
        "note": "Estimates from offline/durations.py, not measurements: nothing was deployed.",
        "target": tl.target or "apply complete (this stack declares no fabric test job)",
        "fabric_test": test,
        "critical_path_minutes": {s: r1(tl.critical_total(s)) for s in SCENARIOS},
        "sequential_total_minutes": {s: r1(tl.sequential_total(s)) for s in SCENARIOS},
        "apply_complete_minutes": {s: r1(tl.apply_complete(s)) for s in SCENARIOS},
        "critical_path": tl.critical_path,
        "steps": [
            {
                "id": s.id,
                "type": s.type,
                "component": s.component,
                "rule": s.label,
                "on_node": s.on_node,
                "depends_on": sorted(s.deps),
                "minutes": {"typical": s.duration.typical_min, "low": s.duration.low_min, "high": s.duration.high_min},
                "start_typical": r1(tl.start["typical"][s.id]),
                "finish_typical": r1(tl.finish["typical"][s.id]),
                "basis": s.duration.basis,
                "source": s.duration.source,
            }
            for s in ordered_steps(tl)
        ],
    }


def ordered_steps(tl: Timeline) -> list[Step]:
    return sorted(tl.steps.values(), key=lambda s: (tl.start["typical"][s.id], tl.finish["typical"][s.id], s.id))
