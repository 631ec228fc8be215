"""The CPU-only stack (Pulumi.hb.yaml, 2 x Standard_HB176rs_v4): the full render has no GPU object at
all, and its fabric test is the MPI point-to-point Volcano job, which passes the Job CRD's schema."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from clusterside import collect as collect_mod
from components.fabric.fabric_check import PENDING, parse_result
from components.fabric.p2p_job import OSU_DIR, WORKERS, P2pJobArgs
from core import catalog, fabric, kinds, modes
from offline import engine
from tests.paths import ROOT

JOB_TYPE = "kubernetes:batch.volcano.sh/v1alpha1:Job"
HB = "Standard_HB176rs_v4"
# The job, the certifier's Job and the fabric outputs are the Kubernetes half's (tests/stack/test_stack_parts.py):
# a variant of the hb stack renders that half (of dev on HB176rs_v4: the hb stack but for its tags), of the
# same dicts as test_osu_build.py and test_driver_lifecycle.py (one render per session for all).
GATE = {"p2pThresholdGbits": 350, "failOnLowBandwidth": True, "timeoutMinutes": 45}  # test_osu_build: timeoutMinutes


def _job(r: engine.Rendering) -> dict:
    (job,) = r.of_type(JOB_TYPE)
    return job


def _tasks(r: engine.Rendering) -> dict[str, dict]:
    return {t["name"]: t for t in _job(r).inputs["spec"]["tasks"]}


def test_hb_stack_is_the_cpu_only_size(hb):
    sku = catalog.lookup(engine.stack_file_config("hb")["aks-infiniband:ibPool"]["vmSize"])
    assert sku.vm_size == HB and not sku.has_gpus
    assert hb.outputs["vmSize"] == HB


def test_no_gpu_object_anywhere_in_the_render(hb):
    types = {r.type for r in hb.resources}
    assert not any("GpuOperator" in t or "NcclJob" in t or "NcclTopology" in t for t in types), types
    for r in hb.resources:
        if r.name == "certifier-code":  # the verify package itself, which knows both kinds
            continue
        text = json.dumps(r.inputs, default=str).lower()
        assert fabric.GPU_RESOURCE not in text, f"{r.type} {r.name} mentions {fabric.GPU_RESOURCE}"
        assert "gpu-operator" not in text and "nccl_topo" not in text, f"{r.type} {r.name}"
    pool = hb.one("azure-native:containerservice:AgentPool")
    assert not pool.inputs.get("gpuProfile")
    charts = {r.inputs.get("chart") for r in hb.of_type("kubernetes:helm.sh/v3:Release")}
    assert not any("gpu" in str(c) for c in charts), charts


def test_the_fabric_test_is_the_p2p_job_and_passes_the_volcano_crd(hb, reference):
    from tests.schema_checks import custom_resource_errors, load_crds

    job = _job(hb)
    obj = {"apiVersion": job.inputs["apiVersion"], "kind": job.inputs["kind"],
           "metadata": job.inputs["metadata"], "spec": job.inputs["spec"]}
    assert custom_resource_errors(obj, load_crds(reference)) == []
    broken = json.loads(json.dumps(obj))
    broken["spec"]["tasks"][1]["replica"] = 2  # a misspelt field is caught
    assert custom_resource_errors(broken, load_crds(reference))


def test_job_runs_osu_between_two_workers_one_per_node(hb):
    spec = _job(hb).inputs["spec"]
    tasks = _tasks(hb)
    assert spec["schedulerName"] == "volcano" and set(spec["plugins"]) == {"ssh", "svc"}
    assert tasks["mpiworker"]["replicas"] == WORKERS == 2 and spec["minAvailable"] == WORKERS + 1
    worker = tasks["mpiworker"]["template"]
    anti = worker["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"].items() <= worker["metadata"]["labels"].items()
    master = tasks["mpimaster"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in master["env"]}
    assert env["OSU_DIR"] == OSU_DIR and "rc" in env["UCX_TLS"].split(",") and "tcp" not in env["UCX_TLS"]


# the device-plugin modes; `dra` pairs GPUs with HCAs and is refused on CPU-only sizes (test_config)
@pytest.mark.parametrize("mode", [m.name for m in modes.MODES.values() if not m.dra])
def test_workers_request_rdma_and_ipc_lock_on_the_tainted_pool(render_kubernetes, hb, mode):
    r = hb if mode == "shared" else render_kubernetes(ibPool={"vmSize": HB}, rdmaMode=mode)
    sku = catalog.lookup(HB)
    want = modes.rdma_mode(mode).request(sku)
    for name, task in _tasks(r).items():
        pod = task["template"]["spec"]
        assert pod["tolerations"] == fabric.fabric_tolerations(), name
        assert pod["nodeSelector"] == fabric.pool_node_selector(), name
        for c in pod["containers"]:
            sc = c.get("securityContext", {})
            assert sc.get("privileged") is False, name
            limits = c["resources"].get("limits", {})
            assert fabric.GPU_RESOURCE not in {**limits, **c["resources"].get("requests", {})}
            if name == "mpiworker":
                assert limits[want.resource] == str(want.count)
                assert sc["capabilities"]["add"] == ["IPC_LOCK"]


def test_job_waits_for_pool_policy_and_volcano_only(hb):
    job = _job(hb)
    assert hb.depends_on(job, hb.one("azure-native:containerservice:AgentPool"))
    assert hb.depends_on(job, hb.one("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"))
    assert any(hb.depends_on(job, v) for v in hb.of_type("kubernetes:yaml/v2:ConfigGroup"))


def test_gpu_sizes_are_refused_by_the_p2p_job():
    with pytest.raises(ValueError, match="GPUs"):
        P2pJobArgs(sku=catalog.lookup("Standard_ND96asr_v4"), rdma_mode=modes.SHARED,
                   image="example.invalid/img:1.0", timeout_minutes=30)


def test_disabled_fabric_test_renders_no_job(render_kubernetes):
    assert render_kubernetes(ibPool={"vmSize": HB}, fabricTest={"enabled": False}).of_type(JOB_TYPE) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_launcher_script_is_valid_bash():
    from components.fabric.p2p_job import LAUNCHER_SCRIPT

    subprocess.run(["bash", "-n", str(LAUNCHER_SCRIPT)], check=True)


# --- row 9 on CPU-only sizes: the certifier judges the p2p job ---------------------------------
CERTIFY_JOB = "kubernetes:batch/v1:Job"
CERTIFY = "fabric-check-certify"
CHECK_TYPE = "aks-infiniband:verify:FabricCheck"


def _certify_argv(r: engine.Rendering) -> list[str]:
    (container,) = r.one(CERTIFY_JOB, CERTIFY).inputs["spec"]["template"]["spec"]["containers"]
    return container["command"]


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_hb_stack_certifies_the_p2p_job_with_the_p2p_kind(hb):
    check, certify, job = hb.one(CHECK_TYPE, "fabric-check"), hb.one(CERTIFY_JOB, CERTIFY), _job(hb)
    assert certify.parent == check.urn
    assert hb.depends_on(certify, job)
    args = _certify_argv(hb)
    assert args[:5] == ["python3", "-S", "-m", "verify", "certify"]
    assert _option(args, "--kind") == kinds.P2P
    assert _option(args, "--namespace") == job.inputs["metadata"]["namespace"]
    assert _option(args, "--job") == job.inputs["metadata"]["name"]
    assert _option(args, "--sku") == HB
    # a point-to-point result is judged in Gb/s and spans two nodes: no GB/s threshold, no --nodes
    assert "--nodes" not in args and "--threshold-gbps" not in args and "--threshold-gbits" not in args
    assert "--plot" not in args
    # the certifier looks for the launcher under the task name the p2p job gives it
    assert collect_mod.LAUNCHER_TASK in _tasks(hb)


def test_hb_pool_is_not_held_and_has_no_recurring_run(hb):
    """The two-node test cannot admit the pool's other nodes: no hold (no admission loop), no CronJob, as
    its record says (Kind.retests); the stack reads that from the job's retest, which P2pJob never has."""
    assert not kinds.kind_for(catalog.lookup(HB)).retests
    (pool,) = hb.of_type("azure-native:containerservice:AgentPool")[-1:]
    assert pool.inputs["nodeTaints"] == [fabric.IB_TAINT]
    assert hb.of_type("kubernetes:batch/v1:CronJob") == [] and hb.of_type("kubernetes:apps/v1:Deployment") == []


def test_hb_outputs_are_pending_offline_never_a_number(hb):
    assert hb.outputs["fabricVerdict"] == PENDING
    assert hb.outputs["fabricVerdictReasons"] == ["the certifier has written no result yet"]
    for key in ("p2pBandwidthAtMaxSizeGbits", "p2pMaxBandwidthGbits", "p2pLatencyUs"):
        assert key in hb.outputs and hb.outputs[key] is None, key
    # the all-reduce's outputs belong to GPU sizes only
    assert not [k for k in hb.outputs if k.startswith("allReduce") or k in ("ncclVersion", "fabricRanks")]


def test_hb_threshold_and_fail_switch_reach_the_certifier(render_kubernetes):
    args = _certify_argv(render_kubernetes(ibPool={"vmSize": HB}, fabricTest=GATE))
    assert _option(args, "--threshold-gbits") == "350" and "--fail-on-low-bandwidth" in args
    assert "--threshold-gbps" not in args


def test_hb_no_certifier_when_the_test_is_disabled(render_kubernetes):
    r = render_kubernetes(ibPool={"vmSize": HB}, fabricTest={"enabled": False})
    assert r.of_type(CHECK_TYPE) == [] and r.outputs["fabricVerdict"].startswith("not run")
    assert "p2pBandwidthAtMaxSizeGbits" not in r.outputs


def test_the_other_kinds_threshold_is_named_as_the_wrong_one():
    thresholds = {"thresholdGbps": 50.0, "p2pThresholdGbits": None}
    problems = kinds.threshold_problems(kinds.kind_for(catalog.lookup(HB)), thresholds)
    assert list(problems) == ["thresholdGbps"] and "Gb/s (bits)" in problems["thresholdGbps"]
    assert kinds.threshold_problems(kinds.ALL_REDUCE, thresholds) == {}


def test_the_rendered_hb_certifier_against_a_fake_kubernetes_api(render_kubernetes, tmp_path):
    """End to end, offline: the command the HB stack's certifier Job runs (`python3 -S`: the standard
    library only, from the shipped files alone), given a kubeconfig instead of its ServiceAccount,
    against the fake API serving a real two-VM HBv3 log; the ConfigMap it writes read by the stack's own
    parse_result. The figure is the one the fixture's last row gives."""
    from clusterside import certify
    from components.fabric import certifier as certifier_mod
    from tests.fake_kube_store import FakeApi
    from tests.unit.verify.test_osu_perftest import HBV3_BW, HBV3_LAT, raw_rows

    hbv3 = "Standard_HB120rs_v3"
    stack = render_kubernetes(ibPool={"vmSize": hbv3})
    args, job = _certify_argv(stack), _job(stack)
    ns, name = job.inputs["metadata"]["namespace"], job.inputs["metadata"]["name"]
    code = tmp_path / "code"  # what the ConfigMap mounts: the modules the pod imports, only
    for path, text in certify.code_files(ROOT).items():
        (code / path).parent.mkdir(parents=True, exist_ok=True)
        (code / path).write_text(text)
    pods = [{"metadata": {"name": f"{name}-{task}-{i}", "namespace": ns, "creationTimestamp": "2026-03-01T12:00:00Z",
                          "labels": {"volcano.sh/job-name": name, "volcano.sh/task-spec": task}},
             "spec": {"nodeName": f"aks-hb-0000000{i}", "containers": [{"name": task}]},
             "status": {"phase": "Succeeded"}}
            for i, task in ((0, collect_mod.LAUNCHER_TASK), (0, "mpiworker"), (1, "mpiworker"))]
    nodes = [{"metadata": {"name": f"aks-hb-0000000{i}", "labels": fabric.pool_node_selector()},
              "spec": {"taints": [dict(zip(("key", "value", "effect"), (fabric.IB_TAINT_KEY, "true", "NoSchedule"),
                                           strict=True))]},
              "status": {"conditions": []}} for i in (0, 1)]
    result_cm = {"metadata": {"name": certifier_mod.RESULT_CONFIGMAP, "namespace": certifier_mod.NAMESPACE}, "data": {}}
    history_cm = {"metadata": {"name": certifier_mod.HISTORY_CONFIGMAP, "namespace": certifier_mod.NAMESPACE},
                  "data": {}}
    volcano_job = {"metadata": {"name": name, "namespace": ns}, "status": {"state": {"phase": "Completed"}}}
    log = HBV3_BW.read_text() + "\n" + HBV3_LAT.read_text()
    with FakeApi(nodes=nodes, pods=pods, jobs=[volcano_job], configmaps=[result_cm, history_cm],
                 logs={f"/api/v1/namespaces/{ns}/pods/{name}-{collect_mod.LAUNCHER_TASK}-0": log}) as api:
        kubeconfig = tmp_path / "kubeconfig.json"
        kubeconfig.write_text(api.kubeconfig())
        argv = [sys.executable if a == "python3" else a for a in args] + ["--kubeconfig", str(kubeconfig)]
        done = subprocess.run(argv, cwd=code, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        result = parse_result(api.configmap(certifier_mod.NAMESPACE, certifier_mod.RESULT_CONFIGMAP)["data"])
    rows = raw_rows(HBV3_BW)
    assert result.verdict == "PASS"
    assert result.bw_at_max_size_gbits == round(float(rows[max(rows)][0]) * 8 / 1000, 2)
    assert result.latency_us == round(float(raw_rows(HBV3_LAT)[1][0]), 2)
    assert result.busbw_at_max_size_gbps is None  # not an all-reduce


def test_the_p2p_job_keeps_its_urns_across_its_rename(hb):
    """MpiBandwidthJob is now P2pJob: the component answers to its former type, and the engine gives
    its children (named from the component's name, which is unchanged) the same aliases."""
    (component,) = hb.of_type("aks-infiniband:kubernetes:P2pJob")
    assert component.name == "fabric-test-p2p"
    assert component.aliases == [{"type": "aks-infiniband:kubernetes:MpiBandwidthJob"}]
    assert all(r.name.startswith("fabric-test-p2p-") for r in hb.resources if r.parent == component.urn)


def test_the_point_to_point_test_has_one_name():
    """p2p: the kind, the component, the job, the launcher, the config key, the outputs."""
    names = [p.name for p in (ROOT / "components").rglob("*.py")] + [p.name for p in (ROOT / "scripts").glob("*")]
    assert "p2p_job.py" in names and "p2p-launcher.sh" in names
    assert not [n for n in names if "bandwidth" in n or "mpi-p2p" in n]
    assert P2pJobArgs.job_name == "p2p" and kinds.POINT_TO_POINT.name == kinds.P2P == "p2p"


def test_the_plan_names_the_point_to_point_test_and_its_gate(hb):
    from offline import synth

    files = synth.synthesize(hb, images=False)
    link = catalog.lookup("Standard_HB176rs_v4").p2p
    plan = files["plan.md"].decode()
    assert "all-reduce" not in synth.summary(files) and "the first osu_bw point-to-point result" in synth.summary(files)
    assert f"| FAIL below | **{link.threshold_gbits:g} Gb/s** (Azure's `{link.gate_tool}` gate) |" in plan
    assert f"| line rate | {link.baseline_gbits:g} Gb/s (NDR) |" in plan
