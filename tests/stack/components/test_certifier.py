"""Row 10: the certifier's objects in the render (components/fabric/certifier.py): least-privilege RBAC exactly as
issue 21 lists it, the code shipped by content hash, the lowest PriorityClass, the recurring CronJob, the
AgentPool's hold and the tolerations of it; each object against the Kubernetes schema of the stack's
version (kubernetes-validate)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import stack_config
from clusterside import certify, certify_cli
from components.fabric import certifier as certifier_mod
from core import fabric
from stack_config.schema import DEFAULT_CERTIFIER_SCHEDULE
from tests import schema_checks as sc

ROOT = certifier_mod.ROOT
CRONJOB, JOB, CM = "kubernetes:batch/v1:CronJob", "kubernetes:batch/v1:Job", "kubernetes:core/v1:ConfigMap"
RBAC = "kubernetes:rbac.authorization.k8s.io/v1"


def certifier_objects(stack) -> list:
    return [r for r in stack.resources if r.type.startswith("kubernetes:") and r.custom
            and (r.name.startswith("certifier-") or r.name == "fabric-check-certify")]


def test_every_certifier_object_passes_the_kubernetes_schema_of_the_stack(dev):
    objects = certifier_objects(dev)
    kinds = {r.inputs["kind"] for r in objects}
    assert kinds >= {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "ConfigMap", "PriorityClass", "CronJob", "Job"}
    for r in objects:
        assert sc.kubernetes_errors(r.inputs) == [], f"{r.type} {r.name}"


def test_the_schema_check_is_not_vacuous(dev):
    cron = dict(dev.one(CRONJOB, "certifier-recurring").inputs)
    assert sc.kubernetes_errors({**cron, "spec": {**cron["spec"], "concurrencyPolicy": ["Forbid"]}})
    assert sc.kubernetes_errors({**cron, "spec": {**cron["spec"], "scheduel": "x"}})


def rules(stack, type_: str, name: str) -> list[tuple]:
    return sorted((tuple(r.get("apiGroups") or ()), tuple(r["resources"]), tuple(sorted(r["verbs"])),
                   tuple(r.get("resourceNames") or ())) for r in stack.one(f"{RBAC}:{type_}", name).inputs["rules"])


def test_rbac_is_what_the_certifier_uses_and_nothing_more(dev):
    """Issue 21: nodes get/list/watch/patch and nodes/status, pods and pods/log read, its own jobs, Events
    create in `default`, its history objects. No secrets, no wildcard, no cluster-admin."""
    assert rules(dev, "ClusterRole", "certifier-nodes") == [
        (("",), ("nodes",), ("get", "list", "patch", "watch"), ()),
        (("",), ("nodes/status",), ("patch",), ()),
        (("",), ("pods",), ("get", "list"), ())]
    assert rules(dev, "Role", "certifier-fabric") == [
        (("",), ("pods/log",), ("get",), ()),
        (("batch.volcano.sh",), ("jobs",), ("create", "delete", "get", "list"), ())]
    assert rules(dev, "Role", "certifier-own") == [
        (("",), ("configmaps",), ("get", "patch"), (certifier_mod.RESULT_CONFIGMAP, certifier_mod.HISTORY_CONFIGMAP,
                                                   certifier_mod.TEMPLATE_CONFIGMAP))]
    # Events about Nodes: only `default` accepts them (the API server answers 422 elsewhere)
    assert rules(dev, "Role", "certifier-events") == [(("events.k8s.io",), ("events",), ("create",), ())]
    assert dev.one(f"{RBAC}:Role", "certifier-events").inputs["metadata"]["namespace"] == "default"
    text = json.dumps([r.inputs for r in certifier_objects(dev) if r.type.startswith(RBAC)])
    assert "secrets" not in text and '"*"' not in text and "cluster-admin" not in text
    binding = dev.one(f"{RBAC}:ClusterRoleBinding", "certifier-nodes-binding").inputs
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": certifier_mod.SERVICE_ACCOUNT,
                                    "namespace": certifier_mod.NAMESPACE}]
    assert binding["roleRef"]["name"] == dev.one(f"{RBAC}:ClusterRole", "certifier-nodes").inputs["metadata"]["name"]


def test_on_dra_stacks_the_admission_loop_reads_gpu_slices_and_rbac_grows_by_exactly_that_read(dev):
    """Issue 52 item 1: with DRA GPUs no nvidia.com/gpu is ever allocatable, so the loop reads the GPUs'
    ResourceSlices (`--dra-gpus`); the ClusterRole gains `list` on resourceslices, nothing else, and only there."""
    from conftest import dev_config, rendered

    dra_stack = rendered("dev", dev_config(rdmaMode="dra"))
    argv = lambda stack: stack.one("kubernetes:apps/v1:Deployment", "certifier-admission").inputs[  # noqa: E731
        "spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--dra-gpus" in argv(dra_stack) and "--dra-gpus" not in argv(dev)
    assert set(rules(dra_stack, "ClusterRole", "certifier-nodes")) - set(rules(dev, "ClusterRole", "certifier-nodes")) \
        == {(("resource.k8s.io",), ("resourceslices",), ("list",), ())}
    assert set(rules(dev, "ClusterRole", "certifier-nodes")) <= set(rules(dra_stack, "ClusterRole", "certifier-nodes"))


def test_the_admission_loop_serves_its_liveness_and_metrics_and_its_probes_read_them(dev):
    """Issue 52 items 7 and 8: a loop that is down or cannot read the nodes holds nothing; its probes make
    that visible (0/1 ready, restarts) and its port is what Prometheus scrapes."""
    from clusterside import certify_serve

    (container,) = dev.one("kubernetes:apps/v1:Deployment", "certifier-admission").inputs["spec"]["template"][
        "spec"]["containers"]
    argv = container["command"]
    port = int(argv[argv.index("--metrics-port") + 1])
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert port == certify_serve.DEFAULT_PORT
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_the_admission_loop_starts_after_the_day0_verdict(dev):
    """Issue 52 item 4: started before it, the loop held every node while day 0 waited and started a
    re-test over them beside the day-0 run. After it, day 0 has certified each boot it ran on."""
    admission = dev.one("kubernetes:apps/v1:Deployment", "certifier-admission")
    assert dev.depends_on(admission, dev.one(JOB, "fabric-check-certify"))


def pods(stack) -> list[dict]:
    job = stack.one(JOB, "fabric-check-certify").inputs["spec"]["template"]["spec"]
    cron = stack.one(CRONJOB, "certifier-recurring").inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return [job, cron]


def test_the_code_is_the_checkouts_own_by_content_hash_and_runs_on_the_standard_library(dev):
    files = certify.code_files(ROOT)
    code = dev.one(CM, "certifier-code").inputs
    assert code["data"] == {certifier_mod.config_key(p): t for p, t in files.items()}
    assert set(files) >= {"verify/__main__.py", "clusterside/certify.py", "clusterside/kube_api.py", "core/fabric.py"}
    sha = certify.code_sha256(files)
    assert code["metadata"]["annotations"]["aks-infiniband.io/code-sha256"] == sha
    for pod in pods(dev):
        (container,) = pod["containers"]
        assert container["command"][:4] == ["python3", "-S", "-m", "verify"]  # -S: no site-packages at all
        assert {"name": certify_cli.CODE_SHA256_ENV, "value": sha} in container["env"]
        assert "@sha256:" in container["image"]  # pinned by digest: nothing resolved at pod start
        (volume,) = [v for v in pod["volumes"] if v["name"] == "code"]
        assert {i["path"] for i in volume["configMap"]["items"]} == set(files)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["serviceAccountName"] == certifier_mod.SERVICE_ACCOUNT


def _shipped(tmp_path, files) -> Path:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def test_the_shipped_code_is_what_the_pod_imports_and_imports_alone(tmp_path):
    """Only CODE_ENTRY's imports are shipped, and each shipped module imports with nothing else there, on the
    standard library alone (python -S, as the pod runs)."""
    files = certify.code_files(ROOT)
    never = ("core/pins.py", "verify/launcher_env.py")  # the pin table; the launcher's patterns (the stack's)
    assert not set(never) & set(files), "the pod never imports these"
    assert not [p for p in files if p.startswith("labeler/")], "the node labeler ships alone, in its own ConfigMap"
    modules = [p.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for p in files]
    code = _shipped(tmp_path, files)
    done = subprocess.run([sys.executable, "-S", "-c", f"import importlib; [importlib.import_module(m) for m in "
                           f"{modules!r}]"], cwd=code, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_an_edit_to_a_module_the_pod_does_not_import_leaves_the_code_hash(tmp_path):
    """The pin table changes with every version bump: it must not re-roll the certifier's pods."""
    tree = _shipped(tmp_path, {p.relative_to(ROOT).as_posix(): p.read_text()
                               for package in certify.CODE_PACKAGES for p in (ROOT / package).rglob("*.py")
                               if "__pycache__" not in p.parts})
    before = certify.code_sha256(certify.code_files(tree))
    (tree / "core" / "pins.py").write_text((tree / "core" / "pins.py").read_text() + "\n# a bump\n")
    assert certify.code_sha256(certify.code_files(tree)) == before
    (tree / "clusterside" / "certify.py").write_text((tree / "clusterside" / "certify.py").read_text() + "\n# a fix\n")
    assert certify.code_sha256(certify.code_files(tree)) != before


def test_a_pod_refuses_code_that_is_not_what_the_preview_showed(monkeypatch, capsys):
    monkeypatch.setenv(certify_cli.CODE_SHA256_ENV, "0" * 64)
    from verify import __main__ as cli

    assert cli.main(["certify", "--namespace", "x"]) == 2
    assert "the mounted code's sha256 is" in capsys.readouterr().err


def test_the_recurring_run_is_below_every_workload_and_preempts_no_one(dev):
    pc = dev.one("kubernetes:scheduling.k8s.io/v1:PriorityClass", "certifier-priority").inputs
    assert pc["value"] < 0 and pc["preemptionPolicy"] == "Never" and pc["globalDefault"] is False
    cron = dev.one(CRONJOB, "certifier-recurring").inputs["spec"]
    assert cron["schedule"] == DEFAULT_CERTIFIER_SCHEDULE
    assert cron["concurrencyPolicy"] == "Forbid"
    (container,) = cron["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert "--recurring" in container["command"]
    assert cron["jobTemplate"]["spec"]["template"]["spec"]["priorityClassName"] == pc["metadata"]["name"]
    assert "--result-configmap" not in container["command"], "only day 0 writes what the outputs report"


def test_the_image_and_schedule_have_one_default_and_the_image_is_a_renovate_tracked_pin():
    """The configuration's defaults and the component Args' are core/defaults.py's; the image is the pin
    table's pythonImage, which a `# renovate-image:` comment puts in Renovate's hands."""
    from core import defaults, pins
    from tests.unit.core.test_pins import renovate_matches

    args = certifier_mod.CertifierArgs(fabric_namespace="nccl-test")
    schema = {f.name: f.default for f in next(k for k in stack_config.SCHEMA if k.name == "certifier").fields}
    assert (args.image, schema["image"]) == (defaults.CERTIFIER_IMAGE, defaults.CERTIFIER_IMAGE)
    assert (args.schedule, schema["schedule"]) == (defaults.CERTIFIER_SCHEDULE, defaults.CERTIFIER_SCHEDULE)
    assert defaults.CERTIFIER_IMAGE == pins.component("pythonImage").version
    tracked = {f"{m['depName']}:{m['currentValue']}@{m['currentDigest']}" for m in renovate_matches()
               if m.get("currentDigest")}
    assert defaults.CERTIFIER_IMAGE in tracked


def test_the_schedule_can_be_off_and_a_bad_one_is_refused_by_name(render_kubernetes):
    from tests.stack.components.test_kubernetes_layer import (
        OVERRIDES,  # with a network operator version that touches no certifier object
    )

    assert OVERRIDES["certifier"] == {"schedule": "off"}
    assert render_kubernetes(**OVERRIDES).of_type(CRONJOB) == []
    with pytest.raises(stack_config.ConfigError) as err:
        stack_config.parse({**_raw(), "aks-infiniband:certifier": {"schedule": "every day"}}, "dev")
    (line,) = err.value.problems
    assert "certifier.schedule" in line and "'every day'" in line and "off" in line


def _raw() -> dict:
    from conftest import dev_config

    return dev_config()


def test_the_pool_sets_no_hold_and_everything_that_must_run_there_tolerates_the_certifiers_taints(dev, render_azure):
    """AKS refuses changes to pool-set taints through the Kubernetes API: the hold is the admission loop's,
    in every mode, and the Azure half does not depend on the certifier's mode at all."""
    pool = [r for r in dev.of_type("azure-native:containerservice:AgentPool") if r.name == "ib-pool"][0]
    assert pool.inputs["nodeTaints"] == [fabric.IB_TAINT]
    for mode in ("label", "off"):
        other = [r for r in render_azure(certifier={"mode": mode}).of_type("azure-native:containerservice:AgentPool")
                 if r.name == "ib-pool"][0]
        assert other.inputs == pool.inputs
    job = dev.one("kubernetes:batch.volcano.sh/v1alpha1:Job", "fabric-test-job").inputs
    for task in job["spec"]["tasks"]:
        tolerations = task["template"]["spec"]["tolerations"]
        for key in (fabric.HOLD_TAINT_KEY, fabric.FABRIC_TAINT_KEY):
            assert any(t["key"] == key and t["operator"] == "Exists" for t in tolerations), key


def test_the_recurring_runs_deadline_covers_the_wait_it_computes(dev):
    """The CronJob's Job must outlive the run's own wait for its re-test (the job's deadline plus the
    scheduling margin) and the judgement after it, or Kubernetes kills it mid-run."""
    from clusterside import certify_recurring

    cron = dev.one(CRONJOB, "certifier-recurring").inputs["spec"]["jobTemplate"]["spec"]
    template = json.loads(dev.one("kubernetes:core/v1:ConfigMap", "certifier-template").inputs["data"]["job.json"])
    wait = (template["deadline_minutes"] + certify_recurring.WAIT_MARGIN_MINUTES) * 60
    assert cron["activeDeadlineSeconds"] > wait
    assert cron["activeDeadlineSeconds"] == certify_recurring.run_minutes(template) * 60


def test_the_certifiers_account_is_bounded_by_admission_policies_on_its_jobs_and_node_writes(dev):
    """RBAC's `create` on Volcano Jobs in a privileged namespace and `patch` on nodes are narrowed by two
    ValidatingAdmissionPolicies matched on the account (tried against the real API server in make e2e)."""
    from components.fabric import certifier_bounds

    policies = {r.inputs["metadata"]["name"]: r.inputs["spec"]
                for r in dev.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
                if r.name.startswith("certifier-")}
    assert set(policies) == {certifier_bounds.JOBS_POLICY, certifier_bounds.NODES_POLICY}
    for spec in policies.values():
        (cond,) = spec["matchConditions"]
        assert cond["expression"] == ("request.userInfo.username == "
                                      f"'system:serviceaccount:{certifier_mod.NAMESPACE}:{certifier_mod.SERVICE_ACCOUNT}'")
        assert spec["failurePolicy"] == "Fail"
    template = json.loads(dev.one("kubernetes:core/v1:ConfigMap", "certifier-template").inputs["data"]["job.json"])
    jobs = " ".join(v["expression"] for v in policies[certifier_bounds.JOBS_POLICY]["validations"])
    assert all(image in jobs for image in certifier_bounds.images(template)) and "privileged" in jobs
    # issue 52 item 6: its deletes (its own re-tests only) and its nodes/status writes are bounded too
    (jobs_rule,) = policies[certifier_bounds.JOBS_POLICY]["matchConstraints"]["resourceRules"]
    assert "DELETE" in jobs_rule["operations"] and "oldObject.metadata.labels" in jobs
    (nodes_rule,) = policies[certifier_bounds.NODES_POLICY]["matchConstraints"]["resourceRules"]
    assert nodes_rule["resources"] == ["nodes", "nodes/status"]
    bindings = [b for b in dev.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
                if b.name.startswith("certifier-")]
    assert sorted(b.inputs["spec"]["validationActions"][0] for b in bindings) == ["Deny", "Deny"]
