"""The offline render (`make synth`): everything the stack would apply, with no cloud and no credentials.

`synthesize(rendering)` turns an `offline.engine.Rendering` (the real program run under Pulumi's mock
engine) into files, all in memory first, then checks that no secret value leaked into any of them:

    plan.md                     every resource grouped by component: type, key inputs, dependencies,
                                options; the outputs; the time-to-first-all-reduce estimate
    timeline.json               the same estimate as data: critical path and strictly sequential total
    manifests/<kind>.<ns>.<name>.yaml   every Kubernetes object as it would be applied
    helm/<release>.values.yaml  the values handed to each Helm release
    graph.mmd, timeline.mmd     the dependency graph and a gantt chart as Mermaid (offline/mermaid.py;
                                optional: images=False); `make golden` copies the dev stack's into docs

Output is deterministic: keys sorted, resources in a stable order, images without dates or
versions. Secret inputs (`Resource.secret_inputs`) and outputs (`Rendering.secret_outputs`) are
written as `[secret]`.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core import catalog
from offline import durations
from offline.engine import SECRET, Rendering, Resource
from offline.timeline import Step, Timeline

SCENARIOS = ("typical", "low", "high")
# What `write` replaces (graph.svg and timeline.svg: the pictures' former files, removed when found).
MANAGED = ("plan.md", "timeline.json", "graph.mmd", "timeline.mmd", "graph.svg", "timeline.svg", "manifests", "helm",
           "charts")
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
STACK_TYPE = "pulumi:pulumi:Stack"


# --- values ---------------------------------------------------------------------------------------
def normalize(value: Any) -> Any:
    """Sorted keys, integral floats as ints (the engine hands every number over as a double)."""
    if isinstance(value, Mapping):
        return {str(k): normalize(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def redacted_inputs(resource: Resource) -> dict[str, Any]:
    return normalize({k: (SECRET if k in resource.secret_inputs else v) for k, v in resource.inputs.items()})


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def secret_needles(rendering: Rendering) -> set[str]:
    """Strings that must not appear in any output: each secret value, and each long token in it
    (so that a fragment of a kubeconfig, e.g. its token, is caught too)."""
    values: list[Any] = [r.inputs.get(k) for r in rendering.resources for k in r.secret_inputs]
    values += [rendering.outputs.get(k) for k in rendering.secret_outputs]
    needles: set[str] = set()
    for s in _strings(values):
        if len(s) >= 8 and s != SECRET:
            needles.add(s)
        needles.update(t for t in re.split(r"[\s{}\[\],\"']+", s) if len(t) >= 24)
    return needles


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def to_yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)


# --- Kubernetes objects and Helm releases ---------------------------------------------------------
def k8s_api_kind(resource: Resource) -> tuple[str, str] | None:
    """(apiVersion, kind) when the resource is one Kubernetes object the provider applies as is;
    None for providers, Helm releases, manifests expanded by the provider (yaml/v2, kustomize)."""
    if not resource.type.startswith("kubernetes:") or not resource.custom:
        return None
    group_version, kind = resource.type[len("kubernetes:"):].rsplit(":", 1)
    if group_version.startswith(("helm.sh/", "yaml", "kustomize")) or kind.endswith("List"):
        return None
    inputs = resource.inputs
    api = inputs.get("apiVersion") or (group_version[len("core/"):] if group_version.startswith("core/")
                                       else group_version)
    return str(api), str(inputs.get("kind") or kind)


def manifest(resource: Resource) -> dict[str, Any]:
    api, kind = k8s_api_kind(resource)  # type: ignore[misc]
    inputs = redacted_inputs(resource)
    inputs.pop("apiVersion", None)
    inputs.pop("kind", None)
    metadata = inputs.pop("metadata", {}) or {}
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **inputs}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-") or "unnamed"


def manifest_filename(obj: Mapping[str, Any], resource: Resource) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or resource.name
    parts = [obj["kind"], meta.get("namespace"), name]
    return ".".join(_slug(str(p)) for p in parts if p) + ".yaml"


def release_name(resource: Resource) -> str:
    return str(resource.inputs.get("name") or resource.name)


def helm_chart(resource: Resource) -> str:
    chart = str(resource.inputs.get("chart", ""))
    return chart.rstrip("/").rsplit("/", 1)[-1]


# --- the timeline: steps, dependencies, durations (the types: offline/timeline.py) ---------------
def _display_ids(rendering: Rendering) -> dict[str, str]:
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


def _is_node(r: Resource) -> bool:
    return r.custom or r.remote


def build_timeline(rendering: Rendering) -> Timeline:
    ids = _display_ids(rendering)
    by_urn = {r.urn: r for r in rendering.resources}
    children: dict[str, list[Resource]] = {}
    for r in rendering.resources:
        children.setdefault(r.parent, []).append(r)

    def nodes_under(urn: str) -> set[str]:
        r = by_urn.get(urn)
        if r is None:
            return set()
        if _is_node(r):
            return {ids[urn]}
        out: set[str] = set()
        for child in children.get(urn, []):
            out |= nodes_under(child.urn)
        return out

    steps: dict[str, Step] = {}
    for r in rendering.resources:
        if not _is_node(r):
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
        return sorted((r for r in rendering.resources if _is_node(r) and pred(r)), key=lambda r: ids[r.urn])

    pools = [ids[r.urn] for r in find(lambda r: r.type == "azure-native:containerservice:AgentPool")]
    ready: list[str] = []
    for policy in find(lambda r: r.type.endswith(":NicClusterPolicy")):
        if (policy.inputs.get("spec") or {}).get("ofedDriver"):
            sid = f"{ids[policy.urn]}/doca-driver-ready"
            steps[sid] = Step(sid, "DOCA/OFED driver container built and loaded on the IB nodes", "on-node",
                              steps[ids[policy.urn]].component, durations.DOCA_DRIVER_READY,
                              {ids[policy.urn], *pools}, on_node=True)
            ready.append(sid)
    for release in find(lambda r: r.type in HELM_TYPES and helm_chart(r) == "gpu-operator"):
        values = release.inputs.get("values") or {}
        if isinstance(values, Mapping) and (values.get("driver") or {}).get("enabled", True) is not False:
            sid = f"{ids[release.urn]}/gpu-driver-ready"
            steps[sid] = Step(sid, "GPU driver container (GPUDirect RDMA) ready on the GPU nodes", "on-node",
                              steps[ids[release.urn]].component, durations.GPU_DRIVER_READY,
                              {ids[release.urn], *pools}, on_node=True)
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


def _minutes(x: float) -> str:
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
            for s in _ordered_steps(tl)
        ],
    }


def _ordered_steps(tl: Timeline) -> list[Step]:
    return sorted(tl.steps.values(), key=lambda s: (tl.start["typical"][s.id], tl.finish["typical"][s.id], s.id))


# --- what the fabric test is judged against -------------------------------------------------------
@dataclass(frozen=True)
class FabricTestPlan:
    """The fabric test as the stack's collect step will run and judge it, read from that step's own
    command line (parsed by `python -m verify`'s parser, so the plan cannot drift from what runs)."""

    name: str  # what a person calls the test: "NCCL all-reduce", "osu_bw point-to-point"
    rows: list[tuple[str, str]]  # plan.md's table: what, value
    source: str | None  # where the catalog's figures come from
    rules: str  # the module that holds the verdict rules


def _collect_argv(rendering: Rendering) -> list[str] | None:
    for r in rendering.resources:
        create = r.inputs.get("create") if r.type == "command:local:Command" else None
        if isinstance(create, str) and " -m verify collect " in create:
            argv = shlex.split(create)
            return argv[argv.index("verify") + 1:]
    return None


def fabric_test_plan(rendering: Rendering) -> FabricTestPlan | None:
    """None when the stack runs no fabric test (`fabricTest.enabled: false`)."""
    from core import kinds
    from verify import verdict
    from verify.__main__ import build_parser

    argv = _collect_argv(rendering)
    if argv is None:
        return None
    args = build_parser().parse_args(argv)
    sku = catalog.lookup(args.sku)
    on_fail = ("`pulumi up` fails (`fabricTest.failOnLowBandwidth`)" if args.fail_on_low_bandwidth else
               "reported in the outputs; `pulumi up` still succeeds (`fabricTest.failOnLowBandwidth: false`)")
    if args.kind == kinds.P2P:
        link = sku.p2p
        rows = [("test", f"`osu_bw` then `osu_latency`, one rank on each of 2 × {sku.vm_size} (MPI over UCX, "
                         "RC verbs)"),
                ("figure judged", "`osu_bw` bandwidth at the largest message, Gb/s (bits, the unit of the link rate)")]
        if link:
            rows.append(("line rate", f"{link.baseline_gbits:g} Gb/s ({sku.ib_generation})"))
        if args.threshold_gbits is not None:
            catalog_line = f"; the catalog's is {link.threshold_gbits:g}" if link else ""
            rows.append(("FAIL below",
                         f"**{args.threshold_gbits:g} Gb/s** (`fabricTest.p2pThresholdGbits`{catalog_line})"))
        elif link:
            rows.append(("FAIL below", f"**{link.threshold_gbits:g} Gb/s** (Azure's `{link.gate_tool}` gate)"))
            if link.other_tool_warn_from_gbits is not None:
                rows.append(("WARN band", f"{link.other_tool_warn_from_gbits:g}–{link.threshold_gbits:g} Gb/s: the "
                                          f"gate was measured with {link.gate_tool}, the test runs osu_bw"))
        else:
            rows.append(("FAIL below", "no catalog figure for this size: UNKNOWN unless "
                                       "`fabricTest.p2pThresholdGbits` is set"))
        rows.append(("on FAIL", on_fail))
        return FabricTestPlan("osu_bw point-to-point", rows, link.source if link else None, "verify/p2p.py")
    gpus = args.nodes * sku.gpus_per_vm
    transport = "SHARP (CollNet)" if args.sharp else "NCCL's own InfiniBand transport"
    rows = [("test", f"NCCL `all_reduce_perf` across {args.nodes} × {sku.vm_size} ({gpus} GPUs), {transport}"),
            ("figure judged", "out-of-place bus bandwidth at the largest message size, GB/s (bytes)")]
    expect = sku.allreduce_expectation(args.nodes)
    if expect:
        rows.append(("baseline", f"{expect.baseline_gbps:g} GB/s" + (" (derived, not measured)" if expect.derived
                                                                      else "")))
    if args.threshold_gbps is not None:
        catalog_line = f"; the catalog's is {expect.threshold_gbps:g}" if expect else ""
        rows.append(("FAIL below", f"**{args.threshold_gbps:g} GB/s** (`fabricTest.thresholdGbps`{catalog_line})"))
    elif expect and expect.derived:
        rows.append(("FAIL below", f"**{expect.threshold_gbps:g} GB/s**, derived: below it the verdict is WARN, "
                                   "not FAIL, until `fabricTest.thresholdGbps` is set from a measurement"))
    elif expect:
        rows.append(("FAIL below", f"**{expect.threshold_gbps:g} GB/s**"))
    else:
        rows.append(("FAIL below", f"no catalog figure for {args.nodes} × {sku.vm_size}: UNKNOWN unless "
                                   "`fabricTest.thresholdGbps` is set"))
    warn_below = verdict.warn_below_gbps(expect, args.threshold_gbps)
    if warn_below is not None:
        rows.append(("WARN below", f"{warn_below:.1f} GB/s ({verdict.WARN_FRACTION_OF_BASELINE:.0%} of the baseline)"))
    elif expect:
        why = ("`fabricTest.thresholdGbps` replaces the catalog's threshold" if args.threshold_gbps is not None
               else "the baseline is derived, not a measurement")
        rows.append(("WARN below", f"no band above the FAIL line: {why}"))
    rows.append(("on FAIL", on_fail))
    return FabricTestPlan("NCCL all-reduce", rows, expect.source if expect else None, "verify/verdict.py")


# --- plan.md --------------------------------------------------------------------------------------
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _short(value: Any, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping) and value and value != SECRET:
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(value, list) and value and all(isinstance(x, Mapping) for x in value):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def key_inputs(resource: Resource, files: Mapping[str, str]) -> str:
    inputs = redacted_inputs(resource)
    if resource.urn in files:
        return f"`{files[resource.urn]}`"
    if resource.type in HELM_TYPES:
        repo = (inputs.get("repositoryOpts") or {}).get("repo", "")
        parts = [f"chart `{inputs.get('chart', '')}` {inputs.get('version', '')}",
                 f"namespace `{inputs.get('namespace', '')}`"]
        if repo:
            parts.append(f"repo {repo}")
        parts.append(f"values `helm/{_slug(release_name(resource))}.values.yaml`")
        return "; ".join(parts)
    items = [(k, v) for k, v in _flatten({k: v for k, v in inputs.items() if k != "tags"})]
    shown = [f"{k}=`{_short(v)}`" for k, v in items[:12]]
    if len(items) > 12:
        shown.append(f"… {len(items) - 12} more")
    return "<br>".join(shown) or "—"


def options_text(resource: Resource) -> str:
    opts = []
    if resource.protect:
        opts.append("protect")
    if resource.retain_on_delete:
        opts.append("retainOnDelete")
    opts += [f"{k} timeout {v}" for k, v in sorted(resource.custom_timeouts.items())]
    if resource.ignore_changes:
        opts.append("ignoreChanges " + ", ".join(sorted(resource.ignore_changes)))
    if resource.additional_secret_outputs:
        opts.append("secret outputs " + ", ".join(sorted(resource.additional_secret_outputs)))
    if resource.remote:
        opts.append("expanded by the provider at deploy time")
    if resource.secret_inputs:
        opts.append("secret inputs " + ", ".join(resource.secret_inputs))
    return ", ".join(opts) or "—"


def plan_md(rendering: Rendering, tl: Timeline, files: Mapping[str, str],
            test: FabricTestPlan | None = None) -> str:
    ids = _display_ids(rendering)
    lines = [
        f"# Offline render of stack `{rendering.stack}`",
        "",
        "Produced by `python -m offline synth` (`make synth`): the real program run under Pulumi's mock engine. "
        "Nothing was deployed and nothing was measured. Secret values are shown as `[secret]`. "
        "Azure-computed values (ids, FQDNs, the kubeconfig) are not known offline.",
        "",
    ]
    nodes = [r for r in rendering.resources if _is_node(r)]
    comps = [r for r in rendering.resources if not _is_node(r)]
    lines += [f"{len(nodes)} resources in {len(comps)} components; "
              f"{sum(1 for u in files)} Kubernetes objects under `manifests/`, "
              f"{len([r for r in rendering.resources if r.type in HELM_TYPES])} Helm releases under `helm/`.", ""]

    if test:
        lines += [f"## The fabric test, and what it is judged against ({test.name})", "",
                  f"Read from the collect step's command line; the verdict rules are in `{test.rules}`.", "",
                  "| | |", "|---|---|"]
        lines += [f"| {what} | {_cell(value)} |" for what, value in test.rows]
        lines += ["", f"Source of the catalog's figures: {test.source}", ""] if test.source else [""]
    heading = f"the first {test.name} result" if test else "every resource created (no fabric test in this stack)"
    lines += [f"## Time to {heading} (estimate)", ""]
    target = tl.target or "apply complete (no fabric test job in this stack)"
    lines += [
        f"Target: `{target}`. Durations per resource type come from `offline/durations.py`, each with its source; "
        "most are estimates. Typical figures, with the low–high range in brackets.",
        "",
        "| order | minutes |",
        "|---|---|",
    ]

    def span(fn) -> str:
        return f"{_minutes(fn('typical'))} ({_minutes(fn('low'))}–{_minutes(fn('high'))})"

    lines += [
        f"| this stack: along the critical path (independent steps in parallel) | **{span(tl.critical_total)}** |",
        f"| strictly sequential, one step after another (the step-by-step guides' way) | {span(tl.sequential_total)} |",
        f"| `pulumi up` returns (every resource created) | {span(tl.apply_complete)} |",
    ]
    for doctor in (step for step in tl.steps.values() if step.id.endswith("/doctor")):
        d = doctor.duration
        lines.append(f"| after the first result: {_cell(doctor.label)}, bounded by fabricTest.doctorMinutes; "
                     f"`pulumi up` waits for it | {_minutes(d.typical_min)} "
                     f"({_minutes(d.low_min)}–{_minutes(d.high_min)}) |")
    lines += [
        "",
        "Critical path:",
        "",
        "| step | what | start | minutes | basis |",
        "|---|---|---|---|---|",
    ]
    for sid in tl.critical_path:
        s = tl.steps[sid]
        d = s.duration
        lines.append(f"| `{_cell(sid)}` | {_cell(s.label)} | {tl.start['typical'][sid]:.1f} | "
                     f"{d.typical_min:g} ({d.low_min:g}–{d.high_min:g}) | {d.basis} |")
    lines += ["", "Every step, its window and its source: `timeline.json`; pictures (Mermaid): `graph.mmd`, "
              "`timeline.mmd`.", ""]

    lines += ["## Resources by component", ""]
    groups: dict[str, list[Resource]] = {}
    comp_of: dict[str, Resource | None] = {}
    for r in nodes:
        comp = top_component(rendering, r)
        key = comp.name if comp else "(stack)"
        groups.setdefault(key, []).append(r)
        comp_of[key] = comp

    def first_start(key: str) -> tuple[float, str]:
        return (min(tl.start["typical"][ids[r.urn]] for r in groups[key]), key)

    for key in sorted(groups, key=first_start):
        comp = comp_of[key]
        title = f"### `{key}` — {comp.type}" if comp else "### resources directly under the stack"
        lines += [title, "", "| resource | type | key inputs | depends on | options |", "|---|---|---|---|---|"]
        members = sorted(groups[key], key=lambda r: (tl.start["typical"][ids[r.urn]], ids[r.urn]))
        for r in members:
            deps = ", ".join(f"`{d}`" for d in sorted(tl.steps[ids[r.urn]].deps)) or "—"
            lines.append(f"| `{_cell(ids[r.urn])}` | `{r.type}` | {_cell(key_inputs(r, files))} | {deps} | "
                         f"{_cell(options_text(r))} |")
        lines.append("")

    lines += ["## Outputs", "", "| key | value |", "|---|---|"]
    for key in sorted(rendering.outputs):
        value = SECRET if key in rendering.secret_outputs else normalize(rendering.outputs[key])
        lines.append(f"| `{key}` | `{_cell(_short(value, 100))}` |")
    lines.append("")
    return "\n".join(lines)


# --- the whole render -----------------------------------------------------------------------------
def synthesize(rendering: Rendering, images: bool = True) -> dict[str, bytes]:
    """Every output file, relative path -> bytes. Raises if a secret value would be written."""
    out: dict[str, str | bytes] = {}
    manifest_files: dict[str, str] = {}
    for r in sorted(rendering.resources, key=lambda r: r.urn):
        if k8s_api_kind(r) is None:
            continue
        obj = manifest(r)
        name = manifest_filename(obj, r)
        if f"manifests/{name}" in out:
            name = name[: -len(".yaml")] + f".{_slug(r.name)}.yaml"
        meta = obj["metadata"]
        header = ""
        if not meta.get("name"):
            header = f"# metadata.name is not set: Pulumi auto-names it {r.name}-<random suffix>\n"
        if r.type.endswith("Patch"):
            header += "# a server-side-apply patch of an object that exists already\n"
        out[f"manifests/{name}"] = header + to_yaml(obj)
        manifest_files[r.urn] = f"manifests/{name}"
    for r in sorted((r for r in rendering.resources if r.type in HELM_TYPES), key=lambda r: r.urn):
        inputs = redacted_inputs(r)
        repo = (inputs.get("repositoryOpts") or {}).get("repo", "")
        header = (f"# Helm release {release_name(r)}: chart {inputs.get('chart', '')} {inputs.get('version', '')}"
                  f"{' from ' + repo if repo else ''}, namespace {inputs.get('namespace', 'default')}\n")
        values = inputs.get("values", {})
        body = to_yaml(values) if values not in ({}, None) else "{}\n"
        out[f"helm/{_slug(release_name(r))}.values.yaml"] = header + body
    tl = build_timeline(rendering)
    test = fabric_test_plan(rendering)
    out["timeline.json"] = json.dumps(timeline_json(rendering, tl, test.name if test else None), indent=2,
                                      sort_keys=False) + "\n"
    out["plan.md"] = plan_md(rendering, tl, manifest_files, test)
    if images:
        from offline import mermaid

        out["graph.mmd"] = mermaid.dependency_graph(tl)
        out["timeline.mmd"] = mermaid.timeline(tl, test.name if test else None)

    encoded = {path: (v.encode() if isinstance(v, str) else v) for path, v in sorted(out.items())}
    needles = secret_needles(rendering)
    for path, data in encoded.items():
        text = data.decode("utf-8", errors="replace")
        if any(n in text for n in needles):
            raise RuntimeError(f"refusing to write {path}: it would contain a secret value")
    return encoded


def write(files: Mapping[str, bytes], out_dir: Path) -> None:
    """Replace the render's own files under out_dir (and nothing else there)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in MANAGED:
        target = out_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    for path, data in files.items():
        dest = out_dir / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def summary(files: Mapping[str, bytes]) -> str:
    data = json.loads(files["timeline.json"])
    cp, seq = data["critical_path_minutes"], data["sequential_total_minutes"]
    until = f"the first {data['fabric_test']} result" if data.get("fabric_test") else "every resource created"
    return (f"{len(files)} files; estimated time to {until} {cp['typical']:.0f} min "
            f"({cp['low']:.0f}-{cp['high']:.0f}) vs {seq['typical']:.0f} min strictly sequential")
