"""The offline render (`python -m offline synth`, `make synth`): complete, redacted, deterministic,
and kept as golden files under tests/golden/dev (update with `make golden`)."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import rendered

from core import catalog, expectations
from offline import __main__ as cli
from offline import config_groups, docblocks, durations, engine, objects, schedule, synth
from offline.engine import Rendering, Resource
from offline.mocks import FAKE_KUBECONFIG
from tests.paths import ROOT, TESTS
from tests.schema_checks import load_yaml

GOLDEN = TESTS / "golden" / "dev"
MOCK_TOKEN = "offline-render-not-a-credential"
assert MOCK_TOKEN in FAKE_KUBECONFIG


@pytest.fixture(scope="module")
def files(dev: Rendering) -> dict[str, bytes]:
    return synth.synthesize(dev)


def _res(type_: str, name: str, inputs: dict | None = None, deps: tuple[Resource, ...] = (),
         secret: tuple[str, ...] = (), custom: bool = True) -> Resource:
    return Resource(type=type_, name=name, urn=f"urn:pulumi:t::p::{type_}::{name}", parent="", custom=custom,
                    inputs=inputs or {}, secret_inputs=list(secret), dependencies=[d.urn for d in deps], provider="",
                    protect=False, retain_on_delete=False, custom_timeouts={}, ignore_changes=[],
                    additional_secret_outputs=[], remote=False)


# Two renders give the same files byte for byte: tests/stack/test_idempotency.py (its second render in this
# process is synthesized there too).


def test_the_kubeconfig_never_appears(files: dict[str, bytes], dev: Rendering) -> None:
    assert "kubeconfig" in dev.secret_outputs
    leaking = [p for p, data in files.items() if MOCK_TOKEN.encode() in data]
    assert not leaking, f"the mock kubeconfig's token is in {leaking}"
    assert "| `kubeconfig` | `[secret]` |" in files["plan.md"].decode()


def test_a_secret_copied_into_a_plain_input_stops_the_render() -> None:
    token = "s3cr3t-token-that-must-not-be-written"
    provider = _res("pulumi:providers:kubernetes", "k8s", {"kubeconfig": token}, secret=("kubeconfig",))
    leak = _res("kubernetes:core/v1:ConfigMap", "leak",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "leak"}, "data": {"k": token}})
    with pytest.raises(RuntimeError, match="configmap.leak.yaml"):
        synth.synthesize(Rendering("t", [provider, leak], {}), images=False)
    # the same value as a secret input is redacted, not refused
    leak.secret_inputs = ["data"]
    out = synth.synthesize(Rendering("t", [provider, leak], {}), images=False)
    assert yaml.safe_load(out["manifests/configmap.leak.yaml"])["data"] == engine.SECRET


def test_every_kubernetes_object_has_an_appliable_manifest(files: dict[str, bytes], dev: Rendering) -> None:
    kube_objects = [r for r in dev.resources if objects.k8s_api_kind(r) is not None]
    grouped = [o for r in dev.resources for o in config_groups.objects(r)]  # Volcano's checked manifest
    manifests = {p: load_yaml(d) for p, d in files.items() if p.startswith("manifests/")}
    assert len(manifests) == len(kube_objects) + len(grouped) > len(grouped) > 0
    for path, obj in manifests.items():
        assert list(obj)[:3] == ["apiVersion", "kind", "metadata"], path
        assert obj["metadata"].get("name"), f"{path}: no metadata.name"
    kinds = {(o["apiVersion"], o["kind"]) for o in manifests.values()}
    assert ("v1", "Namespace") in kinds
    for r in kube_objects:  # the manifest carries the declared spec, numbers as integers
        if r.type.endswith(":NicClusterPolicy"):
            obj = manifests["manifests/nicclusterpolicy.nic-cluster-policy.yaml"]
            assert obj["spec"] == objects.normalize(r.inputs["spec"])


def test_a_config_groups_text_is_written_as_its_whole_stream_reads() -> None:
    """offline/config_groups.py writes a group's text document by document (Volcano's two variants share
    most of theirs): the same objects, in the same order, as the whole stream read at once, a List's items,
    an empty document and a block scalar holding an indented `---` included."""
    text = ("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# only a comment\n---\n"
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n"
            "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n---   \n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata:\n  conf: |\n    ---\n    x: 1\n")
    group = _res(config_groups.CONFIG_GROUP, "group", {"yaml": text})
    stream = [objects.normalize(o) for o in config_groups.objects(group)]
    assert [o["metadata"]["name"] for o in stream] == ["a", "b", "c", "d"]
    assert stream[-1]["data"]["conf"] == "---\nx: 1\n"
    written = config_groups.written(group)
    assert [load_yaml(y) for _, y in written] == stream
    assert [head for head, _ in written] == [{k: o[k] for k in ("apiVersion", "kind", "metadata")} for o in stream]


def test_helm_values_files_hold_each_release_values(files: dict[str, bytes], dev: Rendering) -> None:
    releases = [r for r in dev.resources if r.type in objects.HELM_TYPES]
    assert releases
    for r in releases:
        text = files[f"helm/{objects.release_name(r)}.values.yaml"].decode()
        assert text.startswith(f"# Helm release {objects.release_name(r)}: chart {r.inputs['chart']}")
        assert yaml.safe_load(text) == objects.normalize(r.inputs.get("values") or {})


def test_plan_lists_every_resource_with_its_dependencies(files: dict[str, bytes], dev: Rendering) -> None:
    plan = files["plan.md"].decode()
    for r in dev.resources:
        if r.custom or r.remote:
            assert f"| `{r.name}` | `{r.type}` |" in plan or f"| `{r.name}:" in plan, r.name
    pool = dev.one("azure-native:containerservice:AgentPool")
    row = next(line for line in plan.splitlines() if line.startswith(f"| `{pool.name}` | `{pool.type}` |"))
    assert "`cluster-aks`" in row, "the pool's row must show that it waits for the cluster"


def test_critical_path_is_a_dependency_chain_no_longer_than_sequential(files: dict[str, bytes]) -> None:
    data = json.loads(files["timeline.json"])
    steps = {s["id"]: s for s in data["steps"]}
    path = data["critical_path"]
    for before, after in zip(path, path[1:], strict=False):
        assert before in steps[after]["depends_on"], f"{after} does not wait for {before}"
    assert steps[path[0]]["depends_on"] == []
    along = sum(steps[s]["minutes"]["typical"] for s in path)
    assert data["critical_path_minutes"]["typical"] == pytest.approx(along, abs=0.02)
    for scenario in schedule.SCENARIOS:
        assert data["critical_path_minutes"][scenario] <= data["sequential_total_minutes"][scenario]
    # the point of the design: the operators install while the GPU pool is still being created
    assert data["critical_path_minutes"]["typical"] < data["sequential_total_minutes"]["typical"]


def test_the_job_waits_for_the_drivers_on_the_nodes() -> None:
    pool = _res("azure-native:containerservice:AgentPool", "pool", {"vmSize": "Standard_ND96isr_H100_v5"})
    policy = _res("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", "policy",
                  {"metadata": {"name": "nic-cluster-policy"}, "spec": {"ofedDriver": {"image": "doca-driver"}}})
    gpu = _res("kubernetes:helm.sh/v3:Release", "gpu", {"chart": "gpu-operator", "values": {}})
    job = _res("kubernetes:batch.volcano.sh/v1alpha1:Job", "nccl", {"metadata": {"name": "nccl"}})
    check = _res("command:local:Command", "verify", {"create": "true"}, deps=(job,))
    tl = schedule.build_timeline(Rendering("t", [pool, policy, gpu, job, check], {}))
    assert tl.target == "nccl/runs"
    assert {"policy/doca-driver-ready", "gpu/gpu-driver-ready", "pool", "nccl"} <= tl.steps["nccl/runs"].deps
    assert "nccl/runs" in tl.steps["verify"].deps
    # no pre-pull: the job's pods pull the image after the drivers, on the critical path
    assert {"policy/doca-driver-ready", "gpu/gpu-driver-ready", "nccl"} <= tl.steps["nccl/image-pulled"].deps
    assert tl.critical_path == ["pool", "policy/doca-driver-ready", "nccl/image-pulled", "nccl/runs"]
    assert tl.critical_total("typical") == pytest.approx(
        sum(tl.steps[s].duration.typical_min for s in tl.critical_path))


@pytest.mark.parametrize(("rdma", "waits"), [({"enabled": True, "useHostMofed": False}, True),
                                             ({"enabled": True, "useHostMofed": True}, False),
                                             ({"enabled": False}, False), (None, False)])
def test_the_gpu_driver_waits_for_the_doca_driver_only_with_gpudirect_through_it(rdma, waits) -> None:
    """With driver.rdma.enabled (and no host MOFED) the GPU driver pod's k8s-driver-manager init container waits
    for DOCA's /run/mellanox/drivers/.driver-ready before the driver installs (NVIDIA/k8s-driver-manager v0.12.0,
    the pinned chart's driver.manager.version: cmd/driver-manager/main.go waitForMofedDriver); without it, nothing
    waits."""
    pool = _res("azure-native:containerservice:AgentPool", "pool", {"vmSize": "Standard_ND96isr_H100_v5"})
    policy = _res("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", "policy",
                  {"metadata": {"name": "nic-cluster-policy"}, "spec": {"ofedDriver": {"image": "doca-driver"}}})
    values = {"driver": {"rdma": rdma}} if rdma is not None else {}
    gpu = _res("kubernetes:helm.sh/v3:Release", "gpu", {"chart": "gpu-operator", "values": values})
    job = _res("kubernetes:batch.volcano.sh/v1alpha1:Job", "nccl", {"metadata": {"name": "nccl"}})
    tl = schedule.build_timeline(Rendering("t", [pool, policy, gpu, job], {}))
    assert ("policy/doca-driver-ready" in tl.steps["gpu/gpu-driver-ready"].deps) is waits
    doca, driver = durations.DOCA_DRIVER_READY.typical_min, durations.GPU_DRIVER_READY.typical_min
    ready = tl.finish["typical"]["gpu/gpu-driver-ready"] - tl.finish["typical"]["pool"]
    assert ready == pytest.approx(doca + driver if waits else driver)


def _without_prepull(rendering: Rendering) -> Rendering:
    def prepull(r: Resource) -> bool:
        top = schedule.top_component(rendering, r)
        return (top or r).type == "aks-infiniband:kubernetes:ImagePrepull"

    return Rendering(rendering.stack, [r for r in rendering.resources if not prepull(r)], rendering.outputs)


def test_the_prepull_takes_the_image_pull_off_the_critical_path(dev: Rendering) -> None:
    """The estimate of the time to the first all-reduce drops by the modelled pull time, in every scenario."""
    with_prepull, without = schedule.build_timeline(dev), schedule.build_timeline(_without_prepull(dev))
    prepulls = [r for r in dev.of_type("kubernetes:apps/v1:DaemonSet") if r.name == "fabric-test-prepull-daemonset"]
    assert prepulls and prepulls[0] not in _without_prepull(dev).resources
    pull = next(s for s in with_prepull.steps if s.endswith("/image-pulled"))
    assert with_prepull.steps[pull].deps == {"fabric-test-prepull-daemonset", "ib-pool"}  # starts as nodes join
    assert pull not in with_prepull.critical_path
    assert "fabric-test-job/image-pulled" in without.critical_path
    assert pull in with_prepull.steps["fabric-test-job/runs"].deps  # the job still needs the image
    for scenario in schedule.SCENARIOS:
        gain = without.critical_total(scenario) - with_prepull.critical_total(scenario)
        assert gain == pytest.approx(getattr(durations.IMAGE_PULL, f"{scenario}_min")), scenario


def test_every_duration_names_its_basis_and_source() -> None:
    figures = [d for _, _, d in durations.RULES] + [
        durations.DOCA_DRIVER_READY, durations.GPU_DRIVER_READY, durations.FABRIC_TEST_RUN, durations.IMAGE_PULL]
    for d in figures:
        assert d.basis in (durations.SOURCED, durations.ESTIMATE)
        assert len(d.source) > 20, d
        if d.basis == durations.ESTIMATE:
            assert "estimate" in d.source, f"an estimate must say so: {d.source}"
    with pytest.raises(ValueError, match="low <= typical <= high"):
        durations.Duration(5, 6, 7, durations.ESTIMATE, "bad ordering")


def test_cli_renders_into_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What the CLI does with the stack's render: the files written, the stale ones removed, the others kept
    (the render itself is the session's copy of the dev stack, conftest.rendered: the same engine.render, run
    once; a stack with no stack file still goes to the real one)."""
    real, asked = engine.render, []

    def render(stack: str) -> Rendering:
        asked.append(stack)
        return rendered(stack) if stack == "dev" else real(stack)

    monkeypatch.setattr(engine, "render", render)
    stale = tmp_path / "manifests" / "stale.yaml"
    stale.parent.mkdir()
    stale.write_text("left over from an older render")
    stale_chart = tmp_path / "charts" / "old-release.yaml"
    stale_chart.parent.mkdir()
    stale_chart.write_text("a release the stack no longer has")
    keep = tmp_path / "notes.txt"
    keep.write_text("not the render's")
    assert cli.main(["synth", "--stack", "dev", "--out", str(tmp_path), "--no-charts"]) == 0
    out = capsys.readouterr().out
    assert "nothing deployed" in out and "charts/ not rendered (--no-charts)" in out
    assert not stale.exists() and not stale_chart.exists() and keep.exists()
    for name in ("plan.md", "timeline.json", "graph.mmd", "timeline.mmd"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "graph.mmd").read_text().startswith("flowchart TD\n")
    assert cli.main(["synth", "--stack", "no-such-stack", "--out", str(tmp_path)]) == 2
    assert "Pulumi.no-such-stack.yaml" in capsys.readouterr().err
    assert asked == ["dev", "no-such-stack"]


def test_cli_prints_a_bad_configuration_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`make synth` on a stack with a bad key: the RunError's lines only, exit 2, nothing written."""
    bad = {**engine.stack_file_config("dev"), "aks-infiniband:ibPool": {"vmSize": "Standard_ND96isr_H100_v5",
                                                                        "nodeCout": 2}}
    monkeypatch.setattr(engine, "stack_file_config", lambda stack: bad)
    assert cli.main(["synth", "--stack", "dev", "--out", str(tmp_path / "out"), "--no-charts"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0] == "error: invalid configuration for stack 'dev' (nothing was created):"
    assert all(line.startswith("  aks-infiniband:ibPool.") for line in lines[1:]) and len(lines) >= 2, lines
    assert "Traceback" not in captured.err + captured.out and not (tmp_path / "out").exists()


def _check_blocks(blocks: dict[str, str]) -> None:
    shown: set[str] = set()
    for path in docblocks.documents(ROOT):
        text = path.read_text()
        shown |= set(docblocks.names(text)) & set(blocks)
        assert docblocks.embedded(text, blocks) == text, f"{path.name}: a generated block is stale: run `make golden`"
    assert shown == set(blocks), "each generated block is shown somewhere in the docs"


def test_the_pictures_in_the_docs_are_the_current_render(files: dict[str, bytes]) -> None:
    """Each Mermaid picture in README.md and docs/ is the dev stack's render (`make golden` rewrites them)."""
    _check_blocks(docblocks.pictures(files))


def test_the_samples_in_the_readme_are_what_the_code_gives(reference: Path) -> None:
    """The sample `pulumi stack output` and verdict: Azure's published log through the real program and CLI."""
    samples = {k: v for k, v in docblocks.generated({"graph.mmd": b"", "timeline.mmd": b""}, reference).items()
               if k.endswith(".txt")}
    assert "    fabricVerdict                PASS\n" in samples["stack-output.txt"]
    assert samples["verdict.txt"].count("VERDICT: PASS — Standard_ND96asr_v4, 187.2 GB/s busbw at 8 GiB") == 1
    _check_blocks(samples)


ARCHITECTURE = ROOT / "docs" / "architecture.md"  # where the time estimate is written


def _prose(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_the_docs_time_estimates_are_the_current_render(files: dict[str, bytes]) -> None:
    timeline = json.loads(files["timeline.json"])
    text = _prose(ARCHITECTURE)
    for key in ("critical_path_minutes", "sequential_total_minutes"):
        t = timeline[key]
        phrase = f"{round(t['typical'])} minutes ({round(t['low'])}–{round(t['high'])})"
        assert phrase in text, f"{ARCHITECTURE.name} should say {phrase!r} for {key} (offline/durations.py changed?)"


def test_the_docs_state_the_pre_pulls_gain(dev: Rendering) -> None:
    without = schedule.build_timeline(_without_prepull(dev))
    text = _prose(ARCHITECTURE)
    phrase = (f"Without the pre-pull it would be {round(without.critical_total('typical'))} minutes "
              f"({round(without.critical_total('low'))}–{round(without.critical_total('high'))})")
    assert phrase in text
    pull = durations.IMAGE_PULL
    assert f"estimated {pull.typical_min:g} minutes, {pull.low_min:g}–{pull.high_min:g}" in text


def test_golden_render_of_the_dev_stack(dev: Rendering) -> None:
    """The dev stack's render, kept under tests/golden/dev. Regenerate with `make golden`."""
    assert GOLDEN.is_dir(), "no golden render: run `make golden`"
    files = synth.synthesize(dev, images=False)
    actual = {p: d.decode() for p, d in config_groups.as_index(files, config_groups.group_dirs(files)).items()}
    expected = {str(p.relative_to(GOLDEN)): p.read_text() for p in sorted(GOLDEN.rglob("*")) if p.is_file()}
    problems: list[str] = []
    for path in sorted(set(actual) | set(expected)):
        if path not in expected:
            problems.append(f"new file {path}")
        elif path not in actual:
            problems.append(f"file no longer rendered: {path}")
        elif actual[path] != expected[path]:
            diff = difflib.unified_diff(expected[path].splitlines(), actual[path].splitlines(),
                                        f"golden/{path}", f"render/{path}", lineterm="", n=2)
            problems.append("\n".join(list(diff)[:80]))
    if problems:
        pytest.fail("the dev stack's render differs from tests/golden/dev; run `make golden` if the change is "
                    "intended:\n" + "\n".join(problems)[:12000], pytrace=False)


def test_the_plan_shows_what_the_all_reduce_is_judged_against(files: dict[str, bytes], render_kubernetes) -> None:
    """The baseline and threshold the collect step will judge by, from the catalog, and an override when set
    (plan.md's fabric-test table is read from the certifier Job, a Kubernetes object: with an override,
    the Kubernetes half's render, which tests/stack/test_stack_parts.py holds to what the whole stack declares)."""
    expect = catalog.lookup(engine.stack_file_config("dev")["aks-infiniband:ibPool"]["vmSize"]).allreduce_expectation(2)
    plan = files["plan.md"].decode()
    assert f"| baseline | {expect.baseline_gbps:g} GB/s (derived, not measured) |" in plan
    # each line once: the derived threshold is where WARN starts, the floor is where FAIL starts
    floor = expect.baseline_gbps * expectations.FLOOR_FRACTION_OF_BASELINE
    assert f"| WARN below | **{expect.threshold_gbps:g} GB/s**, the catalog's threshold, derived: below it " in plan
    assert f"| FAIL below | **{floor:.1f} GB/s**, 35% of the derived baseline" in plan
    assert plan.count("| FAIL below |") == 1 and plan.count("| WARN below |") == 1
    assert "## Time to the first NCCL all-reduce result (estimate)" in plan
    assert "estimated time to the first NCCL all-reduce result" in synth.summary(files)
    overridden = synth.synthesize(render_kubernetes(fabricTest={"thresholdGbps": 300, "failOnLowBandwidth": True}),
                                  images=False)["plan.md"].decode()
    assert f"| FAIL below | **300 GB/s**, yours (`fabricTest.thresholdGbps`; the catalog's is " \
           f"{expect.threshold_gbps:g}); no WARN band |" in overridden
    assert "| gate | `pulumi up` fails on FAIL (`fabricTest.failOnLowBandwidth: true`, `failOn: fail`) |" in overridden
    assert "| WARN below |" not in overridden
    warn = synth.synthesize(render_kubernetes(fabricTest={"failOnLowBandwidth": True, "failOn": "warn"}),
                            images=False)["plan.md"].decode()
    assert "| gate | `pulumi up` fails on anything but PASS: WARN, UNKNOWN or FAIL (`failOn: warn`) |" in warn


def test_the_plan_of_a_stack_without_the_fabric_test_says_so(render) -> None:
    files = synth.synthesize(render(fabricTest={"enabled": False}), images=False)
    plan = files["plan.md"].decode()
    assert "judged against" not in plan and "## Time to every resource created (no fabric test" in plan
    assert "estimated time to every resource created" in synth.summary(files)


def test_the_mocked_feature_state_reads_as_a_placeholder(dev: Rendering) -> None:
    assert dev.outputs["featureState"].startswith("pending (offline render:")
    assert dev.outputs["featureState"] not in ("Registered", "NotRegistered")


def test_plan_md_lists_every_input_of_every_resource_none_hidden(dev, files: dict[str, bytes]) -> None:
    """A reviewer reads the cluster's network profile and the pool's every setting in plan.md: each
    flattened input is there with its whole value (a long one folded over lines, never cut)."""
    plan = files["plan.md"].decode()
    assert re.search(r"… \d+ more", plan) is None
    cluster = dev.one("azure-native:containerservice:ManagedCluster")
    row = next(line for line in plan.splitlines() if line.startswith("| `cluster-aks` | `azure-native"))
    for key, value in synth._flatten(synth.redacted_inputs(cluster)):
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        assert f"{key}=`" in row, key
        assert text.replace("|", "\\|") in row.replace("`<br>&nbsp;&nbsp;`", ""), key
    assert "networkProfile.networkPluginMode=`overlay`" in row and "tags.owner=`platform-team`" in row


def test_the_fabric_test_table_refuses_a_kind_it_has_no_table_for(dev, monkeypatch):
    """A kind core/kinds.py gains gets no all-reduce table by default: plan.md names it instead."""
    import copy

    from core import kinds

    assert synth.fabric_test_plan(dev).name == "NCCL all-reduce"
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, "dra"))
    job = copy.deepcopy(dev.one("kubernetes:batch/v1:Job", "fabric-check-certify"))
    (container,) = job.inputs["spec"]["template"]["spec"]["containers"]
    at = container["command"].index("certify") + 1
    container["command"][at:at] = ["--kind", "dra"]
    with pytest.raises(ValueError, match="kind: got 'dra'"):
        synth.fabric_test_plan(Rendering(dev.stack, [job], dev.outputs))
