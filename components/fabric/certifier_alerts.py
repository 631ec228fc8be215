"""The certifier's alert rules (`alerts.enabled`): a PrometheusRule for what a person on call must act on,
and a PodMonitor that scrapes the admission loop's metrics (clusterside/certify_serve.py). Both are
monitoring.coreos.com/v1 objects of the Prometheus Operator, which the stack does not install; the rules
also read kube-state-metrics (kube-prometheus' default set). Validated against the operator's CRDs at
v0.93.0 (tests/data/crds) and applied to the real API server in make e2e.

The rules, each with the runbook section that says what to do (docs/certifier-runbook.md):
- no certification run for two periods: the CronJob's `lastSuccessfulTime`, from kube-state-metrics'
  `kube_cronjob_status_last_successful_time` (docs/metrics/workload/cronjob-metrics.md), older than twice
  the schedule's longest gap plus one run (or, never successful, the CronJob that old);
- a recurring run failed: `kube_job_status_failed` of the CronJob's Jobs (a tripped breaker fails it:
  clusterside/certify_cli.py), and the breaker itself, from the history the loop reads;
- the admission loop down: its metrics absent, or its last pass that read the nodes too old (the hold fails
  open);
- a node held past its bound: one back-off and one re-test run after its hold, it should have passed;
- nodes quarantined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import certify_serve

API_VERSION = "monitoring.coreos.com/v1"
RUNBOOK = "docs/certifier-runbook.md"
LOOP_STALE_SECONDS = 2 * certify_serve.MIN_STALE_SECONDS  # beyond the readiness probe's own limit


@dataclass(frozen=True)
class AlertsArgs:
    namespace: str  # the certifier's
    cronjob: str | None  # the recurring CronJob's name; None: schedule off, no missing-run rule
    admission: bool  # the admission loop runs (certifier.mode is not off): scrape it, alert on it
    # the schedule's longest gap between runs (stack_config.cron.longest_gap_seconds) and one run's bound
    period_seconds: int = 0
    run_seconds: int = 0
    held_bound_seconds: int = 0  # a held node should have passed by then (one back-off and one re-test run)


def _rule(name: str, expr: str, for_: str, severity: str, summary: str, section: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity},
            "annotations": {"summary": summary, "runbook": f"{RUNBOOK}#{section}"}}


def rules(args: AlertsArgs) -> list[dict[str, Any]]:
    ns = f'namespace="{args.namespace}"'
    out = []
    if args.cronjob:
        cj = f'{ns},cronjob="{args.cronjob}"'
        limit = 2 * args.period_seconds + args.run_seconds
        out += [
            _rule("AksInfinibandCertificationMissing",
                  f"(time() - max(kube_cronjob_status_last_successful_time{{{cj}}}) > {limit}) or "
                  f"(time() - max(kube_cronjob_created{{{cj}}}) > {limit} "
                  f"unless on() max(kube_cronjob_status_last_successful_time{{{cj}}}))",
                  "15m", "warning",
                  f"No fabric certification run has succeeded for two periods of its schedule ({limit} s)",
                  "the-certifier-is-not-running"),
            _rule("AksInfinibandCertifierRunFailed",
                  f'max by (job_name) (kube_job_status_failed{{{ns},job_name=~"{args.cronjob}-[0-9]+"}}) > 0',
                  "0m", "warning", "A recurring fabric certification run failed (its log says why; BREAKER: a "
                  "tripped circuit breaker)", "the-certifier-is-not-running"),
        ]
    if args.admission:
        loop = f"aks_infiniband_admission_last_pass_timestamp_seconds{{{ns}}}"
        out += [
            _rule("AksInfinibandAdmissionLoopDown",
                  f"absent({loop}) or (time() - max({loop}) > {LOOP_STALE_SECONDS:.0f})", "5m", "critical",
                  "The certifier's admission loop is down or cannot read the IB nodes: new boots are not held",
                  "the-admission-loop-is-down"),
            _rule("AksInfinibandCertifierBreakerTripped", f"max(aks_infiniband_fabric_breaker_open{{{ns}}}) > 0",
                  "0m", "critical", "The last certification run tripped the circuit breaker: it changed nothing",
                  "the-circuit-breaker-tripped"),
            _rule("AksInfinibandNodeHeldTooLong",
                  f"max by (node) (aks_infiniband_fabric_node_held_seconds{{{ns}}}) > {args.held_bound_seconds}",
                  "0m", "warning", f"An IB node has been held for more than {args.held_bound_seconds} s without "
                  "passing a fabric test", "a-node-is-never-admitted"),
            _rule("AksInfinibandNodeQuarantined",
                  f'max by (node) (aks_infiniband_fabric_node_state{{{ns},state="quarantined"}}) == 1',
                  "5m", "warning", "An IB node is quarantined: it failed a fabric test", "a-node-is-quarantined"),
        ]
    return out


def declare(name: str, args: AlertsArgs, labels: Mapping[str, str], selector: Mapping[str, str],
            opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """`{name}-alerts` PrometheusRule and, with the admission loop, `{name}-scrape` PodMonitor of the pods
    `selector` picks (their port `metrics`)."""
    meta = k8s.meta.v1.ObjectMetaArgs
    out: list[pulumi.Resource] = [k8s.apiextensions.CustomResource(
        f"{name}-alerts", api_version=API_VERSION, kind="PrometheusRule",
        metadata=meta(name="aks-infiniband-certifier", namespace=args.namespace, labels=dict(labels)),
        spec={"groups": [{"name": "aks-infiniband-certifier", "rules": rules(args)}]}, opts=opts)]
    if args.admission:
        out.append(k8s.apiextensions.CustomResource(
            f"{name}-scrape", api_version=API_VERSION, kind="PodMonitor",
            metadata=meta(name="aks-infiniband-certifier-admission", namespace=args.namespace, labels=dict(labels)),
            spec={"selector": {"matchLabels": dict(selector)},
                  "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}]},
            opts=opts))
    return out
