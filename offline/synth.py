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
written as `[secret]`. How a resource is written (values, redaction, manifests, Helm releases) is
offline/objects.py; the time estimate (plan.md's and timeline.json's) is offline/schedule.py.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import catalog, rdma_drivers
from offline import config_groups, schedule, script_refs
from offline.engine import SECRET, Rendering, Resource
from offline.objects import (
    HELM_TYPES,
    k8s_api_kind,
    manifest,
    manifest_filename,
    normalize,
    redacted_inputs,
    release_name,
    secret_needles,
    slug,
    to_yaml,
)
from offline.schedule import build_timeline, display_ids, is_node, minutes_text, timeline_json, top_component
from offline.timeline import Timeline

# What `write` replaces (graph.svg and timeline.svg: the pictures' former files, removed when found).
MANAGED = ("plan.md", "timeline.json", "graph.mmd", "timeline.mmd", "graph.svg", "timeline.svg", "manifests", "helm",
           "charts")
STACK_TYPE = "pulumi:pulumi:Stack"


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
    """`python -m verify` arguments of the step that judges the fabric test: the day-0 certifier Job's
    container (components/fabric/fabric_check.py)."""
    for r in rendering.resources:
        if r.type != "kubernetes:batch/v1:Job":
            continue
        pod = ((r.inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            command = container.get("command") or []
            if command[2:5] == ["-m", "verify", "certify"]:
                return command[4:]
    return None


def fabric_test_plans_by_pool(rendering: Rendering) -> dict[str, FabricTestPlan]:
    """A stack of several IB pools: each pool's fabric test, by pool name (its certify Job's `--pool`); empty
    for a stack of one pool."""
    from verify.__main__ import build_parser

    out = {}
    for r in rendering.of_type("kubernetes:batch/v1:Job"):
        pod = ((r.inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            command = container.get("command") or []
            if command[2:5] == ["-m", "verify", "certify"] and "--pool" in command:
                argv = command[4:]
                out[build_parser().parse_args(argv).pool] = _plan_of(argv)
    return dict(sorted(out.items()))


def fabric_test_plan(rendering: Rendering) -> FabricTestPlan | None:
    """None when the stack runs no fabric test (`fabricTest.enabled: false`)."""
    argv = _collect_argv(rendering)
    return None if argv is None else _plan_of(argv)


def _plan_of(argv: list[str]) -> FabricTestPlan:
    """The plan of one certify step's command line."""
    from core import expectations, kinds
    from verify import cli_args, verdict
    from verify.__main__ import build_parser

    args = build_parser().parse_args(argv)
    sku = catalog.lookup(args.sku)
    level = cli_args.gate_level(args)
    on_fail = {None: "reported in the outputs; `pulumi up` still succeeds (`fabricTest.failOnLowBandwidth: false`)",
               "fail": "`pulumi up` fails on FAIL (`fabricTest.failOnLowBandwidth: true`, `failOn: fail`)",
               "warn": "`pulumi up` fails on anything but PASS: WARN, UNKNOWN or FAIL (`failOn: warn`)"}[level]
    kind = kinds.kind(args.kind)
    if kind.log_format == kinds.BANDWIDTH_TABLES:
        link = sku.p2p
        rows = [("test", f"{kind.test}: one rank on each of {kind.nodes} × {sku.vm_size} (MPI over UCX, RC verbs)"),
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
        rows.append(("gate", on_fail))
        return FabricTestPlan("osu_bw point-to-point", rows, link.source if link else None, "verify/p2p.py")
    gpus = args.nodes * sku.gpus_per_vm
    transport = "SHARP (CollNet)" if args.sharp else "NCCL's own InfiniBand transport"
    rows = [("test", f"NCCL `all_reduce_perf` across {args.nodes} × {sku.vm_size} ({gpus} GPUs), {transport}"),
            ("figure judged", "out-of-place bus bandwidth at the largest message size, GB/s (bytes)")]
    expect = sku.allreduce_expectation(args.nodes)
    if expect:
        rows.append(("baseline", f"{expect.baseline_gbps:g} GB/s" + (" (derived, not measured)" if expect.derived
                                                                      else " (published)")))
    # Each line once, with where it comes from (verify/verdict.py's rules): published, derived or yours.
    if args.threshold_gbps is not None:
        catalog_line = f"; the catalog's is {expect.threshold_gbps:g}" if expect else ""
        rows.append(("FAIL below", f"**{args.threshold_gbps:g} GB/s**, yours (`fabricTest.thresholdGbps`"
                                   f"{catalog_line}); no WARN band"))
    elif expect and expect.derived:
        floor = expect.baseline_gbps * expectations.FLOOR_FRACTION_OF_BASELINE
        rows.append(("WARN below", f"**{expect.threshold_gbps:g} GB/s**, the catalog's threshold, derived: below it "
                                   "the verdict is WARN until `fabricTest.thresholdGbps` is set from a measurement"))
        rows.append(("FAIL below", f"**{floor:.1f} GB/s**, {expectations.FLOOR_FRACTION_OF_BASELINE:.0%} of the "
                                   "derived baseline: no working fabric is that slow"))
    elif expect:
        rows.append(("FAIL below", f"**{expect.threshold_gbps:g} GB/s**, published"))
        warn_below = verdict.warn_below_gbps(expect)
        rows.append(("WARN below", f"{warn_below:.1f} GB/s ({verdict.WARN_FRACTION_OF_BASELINE:.0%} of the published "
                                   "baseline)"))
    else:
        rows.append(("FAIL below", f"no catalog figure for {args.nodes} × {sku.vm_size}: UNKNOWN unless "
                                   "`fabricTest.thresholdGbps` is set"))
    rows.append(("gate", on_fail))
    return FabricTestPlan("NCCL all-reduce", rows, expect.source if expect else None, "verify/verdict.py")


# --- plan.md --------------------------------------------------------------------------------------
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


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
        parts.append(f"values `helm/{slug(release_name(resource))}.values.yaml`")
        return "; ".join(parts)
    # Every input, none left out (a reviewer reads the network profile here); a long value is folded
    # onto several lines of the cell, never cut.
    return "<br>".join(f"{k}=`{_folded(v)}`" for k, v in _flatten(inputs)) or "—"


def _folded(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "⏎")
    chunks = []
    while len(text) > width:  # break after the last space within the width, else at the width
        cut = text.rfind(" ", 0, width) + 1 or width
        chunks.append(text[:cut])
        text = text[cut:]
    return "`<br>&nbsp;&nbsp;`".join([*chunks, text])


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


def _object_count(entry: str) -> int:
    """1 for a manifest file, N for a ConfigGroup's folder entry "manifests/<group>/ (N objects)"."""
    m = re.search(r"\((\d+) objects\)$", entry)
    return int(m.group(1)) if m else 1


def _pool_sections(by_pool: Mapping[str, FabricTestPlan], tl: Timeline) -> list[str]:
    """A stack of several pools: each pool's test and what it is judged against, and each pool's first result
    in the timeline (its job's `/runs` step: `fabric-test-<pool>-job/runs`, `fabric-test-p2p-<pool>-job/runs`)."""
    lines: list[str] = []
    for pool, test in by_pool.items():
        lines += [f"## Pool `{pool}`: its fabric test, and what it is judged against ({test.name})", "",
                  f"Read from its certify step's command line; the verdict rules are in `{test.rules}`.", "",
                  "| | |", "|---|---|"]
        lines += [f"| {what} | {_cell(value)} |" for what, value in test.rows]
        lines += ["", f"Source of the catalog's figures: {test.source}", ""] if test.source else [""]
    lines += ["## Each pool's first result (estimate)", "",
              "Each pool is its own fabric, tested on its own nodes; the runs overlap (`timeline.json`).", "",
              "| pool | step | first result at, minutes |", "|---|---|---|"]
    for pool in by_pool:
        runs = [sid for sid in tl.steps if sid.endswith(f"-{pool}-job/runs")]
        for sid in runs:
            at = {k: tl.finish[k][sid] for k in ("typical", "low", "high")}
            lines.append(f"| `{pool}` | `{sid}` | {minutes_text(at['typical'])} ({minutes_text(at['low'])}–"
                         f"{minutes_text(at['high'])}) |")
    return [*lines, ""]


def plan_md(rendering: Rendering, tl: Timeline, files: Mapping[str, str],
            test: FabricTestPlan | None = None, by_pool: Mapping[str, FabricTestPlan] | None = None) -> str:
    ids = display_ids(rendering)
    lines = [
        f"# Offline render of stack `{rendering.stack}`",
        "",
        "Produced by `python -m offline synth` (`make synth`): the real program run under Pulumi's mock engine. "
        "Nothing was deployed and nothing was measured. Secret values are shown as `[secret]`. "
        "Azure-computed values (ids, FQDNs, the kubeconfig) are not known offline.",
        "",
    ]
    if rendering.outputs.get("untestedVersions"):  # allowUntestedVersions: say it before anything else
        lines += ["**untested**: outside the compatibility matrix (pins.MATRIX): " + ", ".join(
            f"`{k}` `{v}`" for k, v in sorted(rendering.outputs["untestedVersions"].items())), ""]
    nodes = [r for r in rendering.resources if is_node(r)]
    comps = [r for r in rendering.resources if not is_node(r)]
    lines += [f"{len(nodes)} resources in {len(comps)} components; "
              f"{sum(_object_count(f) for f in files.values())} Kubernetes objects under `manifests/`, "
              f"{len([r for r in rendering.resources if r.type in HELM_TYPES])} Helm releases under `helm/`.", ""]

    if by_pool:
        lines += _pool_sections(by_pool, tl)
    elif test:
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
        return f"{minutes_text(fn('typical'))} ({minutes_text(fn('low'))}–{minutes_text(fn('high'))})"

    lines += [
        f"| this stack: along the critical path (independent steps in parallel) | **{span(tl.critical_total)}** |",
        f"| strictly sequential, one step after another (the step-by-step guides' way) | {span(tl.sequential_total)} |",
        f"| `pulumi up` returns (every resource created) | {span(tl.apply_complete)} |",
    ]
    for doctor in (step for step in tl.steps.values() if step.id.endswith("/doctor")):
        d = doctor.duration
        lines.append(f"| after the first result: {_cell(doctor.label)}, bounded by fabricTest.doctorMinutes; "
                     f"`pulumi up` waits for it | {minutes_text(d.typical_min)} "
                     f"({minutes_text(d.low_min)}–{minutes_text(d.high_min)}) |")
    inbox = _inbox_timeline(rendering, tl)
    if inbox is not None:
        lines.append("| the same stack with `ibPool.rdmaDriver: inbox` (no DOCA driver build on the pool's nodes; "
                     f"docs/rdma-drivers.md) | **{span(inbox.critical_total)}** |")
    if schedule.node_bring_up(tl, "typical"):
        lines.append("| a new node (scale-up, re-image): from joining to ready for the test (its drivers, the "
                     f"image) | {span(lambda s: schedule.node_bring_up(tl, s))} |")
    if inbox is not None:
        lines.append("| the same with `ibPool.rdmaDriver: inbox` | "
                     f"{span(lambda s: schedule.node_bring_up(inbox, s))} |")
    lines += _critical_path_table("Critical path:", tl)
    if inbox is not None:
        lines += _critical_path_table("Critical path with `ibPool.rdmaDriver: inbox`:", inbox)
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
        lines.append(f"| `{key}` | `{_cell(_folded(value))}` |")
    lines.append("")
    return "\n".join(lines)


def _critical_path_table(title: str, tl: Timeline) -> list[str]:
    lines = ["", title, "", "| step | what | start | minutes | basis |", "|---|---|---|---|---|"]
    for sid in tl.critical_path:
        s = tl.steps[sid]
        d = s.duration
        lines.append(f"| `{_cell(sid)}` | {_cell(s.label)} | {tl.start['typical'][sid]:.1f} | "
                     f"{d.typical_min:g} ({d.low_min:g}–{d.high_min:g}) | {d.basis} |")
    return lines


def _inbox_timeline(rendering: Rendering, tl: Timeline) -> Timeline | None:
    """The timeline with the pool on the node image's own drivers, where this stack builds DOCA and the pool's
    size may run without it (core/rdma_drivers.py); None otherwise."""
    sizes = [str(r.inputs.get("vmSize")) for r in rendering.of_type("azure-native:containerservice:AgentPool")]
    skus = [catalog.lookup(s) for s in sizes if s in catalog.SKUS]
    if not skus or any(rdma_drivers.problem(sku, rdma_drivers.INBOX) for sku in skus):
        return None
    return schedule.on_the_node_images_drivers(tl)


# --- the whole render -----------------------------------------------------------------------------
def synthesize(rendering: Rendering, images: bool = True) -> dict[str, bytes]:
    """Every output file, relative path -> bytes. Raises if a secret value would be written."""
    out: dict[str, str | bytes] = {}
    manifest_files: dict[str, str] = {}
    for r in sorted(rendering.resources, key=lambda r: r.urn):
        if k8s_api_kind(r) is None:
            continue
        obj = script_refs.referenced(manifest(r))  # a script's text as a reference (offline/script_refs.py)
        name = manifest_filename(obj, r)
        if f"manifests/{name}" in out:
            name = name[: -len(".yaml")] + f".{slug(r.name)}.yaml"
        meta = obj["metadata"]
        header = ""
        if not meta.get("name"):
            header = f"# metadata.name is not set: Pulumi auto-names it {r.name}-<random suffix>\n"
        if r.type.endswith("Patch"):
            header += "# a server-side-apply patch of an object that exists already\n"
        out[f"manifests/{name}"] = header + to_yaml(obj)
        manifest_files[r.urn] = f"manifests/{name}"
    for r in sorted(rendering.resources, key=lambda r: r.urn):
        group = config_groups.written(r)  # a ConfigGroup's objects, under manifests/<group>/
        for head, text in group:
            out[f"manifests/{slug(r.name)}/{manifest_filename(head, r)}"] = text
        if group:
            manifest_files[r.urn] = f"manifests/{slug(r.name)}/ ({len(group)} objects)"
    for r in sorted((r for r in rendering.resources if r.type in HELM_TYPES), key=lambda r: r.urn):
        inputs = redacted_inputs(r)
        repo = (inputs.get("repositoryOpts") or {}).get("repo", "")
        header = (f"# Helm release {release_name(r)}: chart {inputs.get('chart', '')} {inputs.get('version', '')}"
                  f"{' from ' + repo if repo else ''}, namespace {inputs.get('namespace', 'default')}\n")
        values = inputs.get("values", {})
        body = to_yaml(values) if values not in ({}, None) else "{}\n"
        out[f"helm/{slug(release_name(r))}.values.yaml"] = header + body
    tl = build_timeline(rendering)
    test = fabric_test_plan(rendering)
    out["timeline.json"] = json.dumps(timeline_json(rendering, tl, test.name if test else None), indent=2,
                                      sort_keys=False) + "\n"
    out["plan.md"] = plan_md(rendering, tl, manifest_files, test, fabric_test_plans_by_pool(rendering))
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
