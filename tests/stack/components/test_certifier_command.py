"""The dev stack's own day-0 certifier command line (the fabric-check-certify Job's container,
components/fabric/fabric_check.py), run in this process against the fake API server: the gate the stack passes it
(fabricTest.failOn, failOnLowBandwidth) decides its exit, and a failed fabric test job is a FAIL result in the
ConfigMap the stack reads. The CLI's gate itself: tests/unit/verify/test_verify_gate.py; the certifier's
scenarios: tests/unit/clusterside/test_certify.py."""

from __future__ import annotations

import json

from conftest import dev_kubernetes_half, rendered

from tests.fake_kube_store import FakeApi
from tests.nccl_logs import launcher_log, worker_hosts
from tests.unit.clusterside.test_certify import POOL, UNCERT, name, node, pod
from verify import __main__ as cli

CERTIFY = ("kubernetes:batch/v1:Job", "fabric-check-certify")


def _certify_command(**fabric_test) -> list[str]:
    """The day-0 certifier Job's command line, as the dev stack renders it with these fabricTest keys (with
    keys, the Kubernetes half, where the Job is declared: tests/stack/test_stack_parts.py holds it to the whole)."""
    stack = dev_kubernetes_half(fabricTest=fabric_test) if fabric_test else rendered()
    (container,) = stack.one(*CERTIFY).inputs["spec"]["template"]["spec"]["containers"]
    return container["command"]


def test_the_stack_passes_its_gate_to_the_certifier():
    assert "--fail-on" not in _certify_command() and "--fail-on-low-bandwidth" not in _certify_command()
    assert "--fail-on-low-bandwidth" in _certify_command(failOnLowBandwidth=True)  # unchanged: no new Job
    warn = _certify_command(failOnLowBandwidth=True, failOn="warn")
    assert warn[warn.index("--fail-on") + 1] == "warn" and "--fail-on-low-bandwidth" not in warn


def test_fail_on_warn_makes_a_warn_fail_the_stacks_certifier(tmp_path, capsys):
    """The dev stack's own certifier command against a fake cluster whose job logs a WARN run: exit 1 (the
    Job, and `pulumi up`, fail) with failOn: warn; exit 0 with the default level. The nodes are judged
    and acted on first either way."""
    from clusterside import collect as collect_mod
    from components.fabric import certifier as certifier_mod
    from core import fabric
    from tests.fake_kube_store import FakeApi

    for fabric_test, expected in (({"failOnLowBandwidth": True}, 0),
                                  ({"failOnLowBandwidth": True, "failOn": "warn"}, 1)):
        args = _certify_command(**fabric_test)
        ns, name = args[args.index("--namespace") + 1], args[args.index("--job") + 1]
        text = launcher_log(worker_hosts(2, name), 8, busbw_gbps=200)
        pods = [{"metadata": {"name": f"{name}-{task}-{i}", "namespace": ns,
                              "creationTimestamp": "2026-03-01T12:00:00Z",
                              "labels": {"volcano.sh/job-name": name, "volcano.sh/task-spec": task}},
                 "spec": {"nodeName": f"aks-ib-0000000{i}", "containers": [{"name": task}]},
                 "status": {"phase": "Succeeded" if task == collect_mod.LAUNCHER_TASK else "Running"}}
                for i, task in ((0, collect_mod.LAUNCHER_TASK), (0, "mpiworker"), (1, "mpiworker"))]
        nodes = [{"metadata": {"name": f"aks-ib-0000000{i}", "labels": fabric.pool_node_selector()},
                  "spec": {"taints": [{"key": fabric.IB_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]},
                  "status": {"conditions": []}} for i in (0, 1)]
        configmaps = [{"metadata": {"name": n, "namespace": certifier_mod.NAMESPACE}, "data": {}}
                      for n in (certifier_mod.RESULT_CONFIGMAP, certifier_mod.HISTORY_CONFIGMAP)]
        volcano_job = {"metadata": {"name": name, "namespace": ns}, "status": {"state": {"phase": "Running"}}}
        # the job runs (its workers placed), then ends and Volcano deletes the workers (tests/fake_kube_store.py)
        with FakeApi(nodes=nodes, pods=pods, jobs=[volcano_job], configmaps=configmaps,
                     phases={name: ["Running", "Completed"]},
                     logs={f"/api/v1/namespaces/{ns}/pods/{name}-{collect_mod.LAUNCHER_TASK}-0": text}) as api:
            kubeconfig = tmp_path / "kubeconfig.json"
            kubeconfig.write_text(api.kubeconfig())
            code = cli.main([*args[args.index("certify"):], "--kubeconfig", str(kubeconfig), "--poll-seconds", "0.01"])
        captured = capsys.readouterr()
        assert json.loads(captured.out)["certification"]["verdict"] == "WARN", captured.err
        assert code == expected, captured.err


def test_the_stacks_day0_certifier_reports_a_failed_job_as_a_fail_and_fails_up_when_asked(tmp_path, capsys):
    """The dev stack's own day-0 command line (the Job's container), given a kubeconfig: a Volcano job that
    failed is a FAIL result in the result ConfigMap the stack reads (fabricVerdict / fabricVerdictReasons),
    exit 0; with failOnLowBandwidth exit 1, which fails the Job and `pulumi up`."""
    from conftest import dev_kubernetes_half, rendered

    from components.fabric.fabric_check import parse_result

    for overrides, exit_code in (({}, 0), ({"fabricTest": {"failOnLowBandwidth": True}}, 1)):
        # with an override, the Kubernetes half, where the Job is declared (tests/stack/test_stack_parts.py)
        stack = dev_kubernetes_half(**overrides) if overrides else rendered()
        (container,) = stack.one("kubernetes:batch/v1:Job", "fabric-check-certify").inputs["spec"]["template"][
            "spec"]["containers"]
        argv = container["command"][4:]
        ns, job = argv[argv.index("--namespace") + 1], argv[argv.index("--job") + 1]
        home = argv[argv.index("--certifier-namespace") + 1]
        result_cm = argv[argv.index("--result-configmap") + 1]
        pods = [pod(f"{job}-mpimaster-0", "mpimaster", "aks-system-0", job),
                *(pod(f"{job}-mpiworker-{i}", "mpiworker", name(i), job) for i in (0, 1))]
        cms = [{"metadata": {"name": cm, "namespace": home}, "data": {}}
               for cm in (result_cm, argv[argv.index("--history-configmap") + 1])]
        failed = {"metadata": {"name": job, "namespace": ns}, "status": {"state": {"phase": "Failed"}}}
        log = {f"/api/v1/namespaces/{ns}/pods/{job}-mpimaster-0": "[nccl-launcher] mpirun exited 1\n"}
        with FakeApi(nodes=[node(0), node(1)], pods=pods, jobs=[failed], configmaps=cms, logs=log) as api:
            kubeconfig = tmp_path / "k.json"
            kubeconfig.write_text(api.kubeconfig())
            code = cli.main([*argv, "--kubeconfig", str(kubeconfig), "--poll-seconds", "0.01"])
            data = api.configmap(home, result_cm)["data"]
            assert all(api.taints(name(i)) == [POOL, UNCERT] for i in (0, 1)), "a failed run certifies no one"
        capsys.readouterr()
        assert code == exit_code
        result = parse_result(data)
        assert result.verdict == "FAIL" and "Volcano job phase Failed" in result.reasons
