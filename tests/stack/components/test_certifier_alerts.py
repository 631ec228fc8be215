"""The certifier's alerts (`alerts.enabled`, components/fabric/certifier_alerts.py; issue 52 item 8): a
PrometheusRule and a PodMonitor that pass the Prometheus Operator's own CRDs (v0.93.0, tests/data/crds),
rules for each case a person on call must act on, reading only metrics that exist (the admission loop's,
clusterside/certify_serve.py, and kube-state-metrics'), and nothing of it without the key."""

from __future__ import annotations

import json
import re

from conftest import dev_kubernetes_half

from clusterside import certify, certify_admit, certify_recurring, certify_serve
from clusterside.kube import iso
from components.fabric import certifier as certifier_mod
from core import fabric
from tests import schema_checks as sc
from tests.paths import ROOT
from tests.unit.clusterside.test_certify import name, node

CRDS = ROOT / "tests" / "data" / "crds"
RULE, MONITOR = "kubernetes:monitoring.coreos.com/v1:PrometheusRule", "kubernetes:monitoring.coreos.com/v1:PodMonitor"
# kube-state-metrics' names the rules read (docs/metrics/workload/{cronjob,job}-metrics.md)
KSM = {"kube_cronjob_status_last_successful_time", "kube_cronjob_created", "kube_job_status_failed"}


def alerting():
    return dev_kubernetes_half(alerts={"enabled": True})


def test_no_alert_objects_without_the_key(render_kubernetes):
    stack = render_kubernetes()
    assert not stack.of_type(RULE) and not stack.of_type(MONITOR)


def test_the_rule_and_the_pod_monitor_pass_the_prometheus_operators_crds():
    stack = alerting()
    rule, monitor = stack.one(RULE, "certifier-alerts").inputs, stack.one(MONITOR, "certifier-scrape").inputs
    assert sc.crd_errors(rule, CRDS / "monitoring.coreos.com_prometheusrules.v0.93.0.yaml") == []
    assert sc.crd_errors(monitor, CRDS / "monitoring.coreos.com_podmonitors.v0.93.0.yaml") == []
    broken = json.loads(json.dumps(rule))
    broken["spec"]["groups"][0]["rules"][0]["for"] = "two hours"  # the CRD's duration pattern refuses it
    assert sc.crd_errors(broken, CRDS / "monitoring.coreos.com_prometheusrules.v0.93.0.yaml")


def test_each_case_of_the_issue_has_a_rule_with_its_runbook_section():
    stack = alerting()
    (group,) = stack.one(RULE, "certifier-alerts").inputs["spec"]["groups"]
    by_name = {r["alert"]: r for r in group["rules"]}
    assert set(by_name) == {"AksInfinibandCertificationMissing", "AksInfinibandCertifierRunFailed",
                            "AksInfinibandAdmissionLoopDown", "AksInfinibandCertifierBreakerTripped",
                            "AksInfinibandNodeHeldTooLong", "AksInfinibandNodeQuarantined"}
    sections = set(re.findall(r"^## (.+)$", (ROOT / "docs" / "certifier-runbook.md").read_text(), flags=re.M))
    anchors = {re.sub(r"[^a-z0-9 -]", "", s.lower()).replace(" ", "-") for s in sections}
    for r in by_name.values():
        assert r["annotations"]["runbook"].split("#")[1] in anchors, r["annotations"]["runbook"]
    # two of the default schedule's periods (every 6 hours) and one run, in seconds
    template = json.loads(stack.one("kubernetes:core/v1:ConfigMap", "certifier-template").inputs["data"]["job.json"])
    run = certify_recurring.run_minutes(template) * 60
    assert f"> {2 * 6 * 3600 + run}" in by_name["AksInfinibandCertificationMissing"]["expr"]
    assert f"> {int(certify_admit.DEFAULT_RETEST_AFTER_MINUTES * 60) + run}" in by_name[
        "AksInfinibandNodeHeldTooLong"]["expr"]
    assert f'cronjob="{certifier_mod.CRONJOB}"' in by_name["AksInfinibandCertificationMissing"]["expr"]


def test_the_rules_read_only_metrics_that_exist_and_the_monitor_scrapes_the_loops_port():
    stack = alerting()
    exprs = " ".join(r["expr"] for r in stack.one(RULE, "certifier-alerts").inputs["spec"]["groups"][0]["rules"])
    now = 1.8e9
    held = node(0, boot="b", held_boot="b-0")
    held["metadata"]["annotations"][certify.HELD_ANNOTATION] = json.dumps({"boot_id": "b-0", "at": iso(now)})
    served = certify_serve.metrics([held, node(1, fabric.QUARANTINED)], now, now,
                                   {name(1): [{"at": iso(now), "run": "r", "breaker": None}]})
    exported = set(re.findall(r"^(aks_infiniband_\w+)", served, flags=re.M))
    assert set(re.findall(r"aks_infiniband_\w+", exprs)) <= exported
    assert set(re.findall(r"\bkube_\w+", exprs)) <= KSM
    monitor = stack.one(MONITOR, "certifier-scrape").inputs["spec"]
    pod = stack.one("kubernetes:apps/v1:Deployment", "certifier-admission").inputs["spec"]["template"]
    assert monitor["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in pod["spec"]["containers"][0]["ports"]}


def test_with_mode_off_there_is_no_loop_to_scrape_and_with_schedule_off_no_missing_run_rule():
    stack = dev_kubernetes_half(alerts={"enabled": True}, certifier={"mode": "off", "schedule": "off"})
    assert not stack.of_type(MONITOR)
    assert not stack.of_type(RULE) or stack.one(RULE, "certifier-alerts").inputs["spec"]["groups"][0]["rules"] == []


def test_with_several_pools_each_pool_has_its_own_rule_group_reading_its_own_series():
    """Pulumi.multipool.yaml: H100 and H200 re-test (a CronJob and an admission loop each), HBv4 does not. Each
    GPU pool's group reads its own CronJob and the series its loop labels with `pool`, and labels every alert
    with the pool; one pool's silent loop or tripped breaker is not hidden by the other's."""
    from conftest import rendered

    from offline import engine

    stack = rendered("multipool", {**engine.stack_file_config("multipool"), "aks-infiniband:alerts": {"enabled": True}})
    rule = stack.one(RULE, "certifier-alerts").inputs
    assert sc.crd_errors(rule, CRDS / "monitoring.coreos.com_prometheusrules.v0.93.0.yaml") == []
    groups = {g["name"]: g["rules"] for g in rule["spec"]["groups"]}
    assert set(groups) == {"aks-infiniband-certifier-h100", "aks-infiniband-certifier-h200"}, "hb has no re-test"
    for pool in ("h100", "h200"):
        by_name = {r["alert"]: r for r in groups[f"aks-infiniband-certifier-{pool}"]}
        assert len(by_name) == 6 and all(r["labels"]["pool"] == pool for r in by_name.values())
        cronjob = f"{certifier_mod.CRONJOB}-{pool}"
        assert f'cronjob="{cronjob}"' in by_name["AksInfinibandCertificationMissing"]["expr"]
        assert f'job_name=~"{cronjob}-[0-9]+"' in by_name["AksInfinibandCertifierRunFailed"]["expr"]
        for alert in ("AksInfinibandAdmissionLoopDown", "AksInfinibandCertifierBreakerTripped",
                      "AksInfinibandNodeHeldTooLong", "AksInfinibandNodeQuarantined"):
            selectors = re.findall(r"aks_infiniband_\w+\{([^}]*)\}", by_name[alert]["expr"])
            assert selectors and all(f'pool="{pool}"' in s for s in selectors), by_name[alert]["expr"]
    # each pool's bound is its own re-test's: four H200 nodes' run is not two H100 nodes'
    for pool in ("h100", "h200"):
        template = json.loads(stack.one("kubernetes:core/v1:ConfigMap", f"certifier-template-{pool}").inputs["data"][
            "job.json"])
        held = {r["alert"]: r for r in groups[f"aks-infiniband-certifier-{pool}"]}["AksInfinibandNodeHeldTooLong"]
        run = certify_recurring.run_minutes(template) * 60
        assert held["expr"].endswith(f"> {int(certify_admit.DEFAULT_RETEST_AFTER_MINUTES * 60) + run}")
    # one PodMonitor scrapes every pool's loop; each loop labels its series with its pool (clusterside/certify_serve.py)
    monitor = stack.one(MONITOR, "certifier-scrape").inputs
    assert sc.crd_errors(monitor, CRDS / "monitoring.coreos.com_podmonitors.v0.93.0.yaml") == []
    loops = [d for d in stack.of_type("kubernetes:apps/v1:Deployment") if d.name.startswith("certifier-admission-")]
    assert len(loops) == 2
    for loop in loops:
        pod = loop.inputs["spec"]["template"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        argv = pod["spec"]["containers"][0]["command"]
        assert argv[argv.index("--pool") + 1] == pod["metadata"]["labels"][certifier_mod.POOL_LABEL]
