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

With several IB pools each pool's certification is its own (components/fabric/certifier.py PoolCertification):
each gets a rule group of its own, whose rules read its CronJob and its admission loop's series (which carry
`pool`) and label each alert with `pool`, so one pool's silence or breaker is never hidden by another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from clusterside import certify_serve

API_VERSION = "monitoring.coreos.com/v1"
RUNBOOK = "docs/certifier-runbook.md"
LOOP_STALE_SECONDS = 2 * certify_serve.MIN_STALE_SECONDS  # beyond the readiness probe's own limit
GROUP = "aks-infiniband-certifier"


@dataclass(frozen=True)
class PoolAlerts:
    """What one pool's certification runs, for its rules: the stack's one pool (`pool` None: the names and
    selectors it always had), or one of several, whose rules select its own series (`pool="<name>"`: the
    loop's --pool, clusterside/certify_serve.py) and its own CronJob, and carry `pool` as a label."""

    pool: str | None
    cronjob: str | None  # its recurring CronJob's name; None: schedule off or no re-test, no missing-run rule
    admission: bool  # its admission loop runs (certifier.mode is not off, its test re-tests): alert on it
    run_seconds: int = 0  # one re-test run's bound (certify_recurring.run_minutes)
    held_bound_seconds: int = 0  # a held node should have passed by then (one back-off and one re-test run)


@dataclass(frozen=True)
class AlertsArgs:
    namespace: str  # the certifier's
    # the schedule's longest gap between runs (stack_config.cron.longest_gap_seconds)
    period_seconds: int = 0
    pools: Sequence[PoolAlerts] = ()


def _rule(name: str, expr: str, for_: str, severity: str, summary: str, section: str,
          pool: str | None) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_,
            "labels": {"severity": severity, **({"pool": pool} if pool else {})},
            "annotations": {"summary": summary + (f" (pool {pool})" if pool else ""),
                            "runbook": f"{RUNBOOK}#{section}"}}


def rules(args: AlertsArgs, p: PoolAlerts) -> list[dict[str, Any]]:
    """Pool `p`'s rules: its CronJob's (kube-state-metrics) and its admission loop's."""
    ns = f'namespace="{args.namespace}"'
    out = []
    if p.cronjob:
        cj = f'{ns},cronjob="{p.cronjob}"'
        limit = 2 * args.period_seconds + p.run_seconds
        out += [
            _rule("AksInfinibandCertificationMissing",
                  f"(time() - max(kube_cronjob_status_last_successful_time{{{cj}}}) > {limit}) or "
                  f"(time() - max(kube_cronjob_created{{{cj}}}) > {limit} "
                  f"unless on() max(kube_cronjob_status_last_successful_time{{{cj}}}))",
                  "15m", "warning",
                  f"No fabric certification run has succeeded for two periods of its schedule ({limit} s)",
                  "the-certifier-is-not-running", p.pool),
            _rule("AksInfinibandCertifierRunFailed",
                  f'max by (job_name) (kube_job_status_failed{{{ns},job_name=~"{p.cronjob}-[0-9]+"}}) > 0',
                  "0m", "warning", "A recurring fabric certification run failed (its log says why; BREAKER: a "
                  "tripped circuit breaker)", "the-certifier-is-not-running", p.pool),
        ]
    if p.admission:
        own = f'{ns},pool="{p.pool}"' if p.pool else ns  # the loop's series carry its --pool
        loop = f"aks_infiniband_admission_last_pass_timestamp_seconds{{{own}}}"
        out += [
            _rule("AksInfinibandAdmissionLoopDown",
                  f"absent({loop}) or (time() - max({loop}) > {LOOP_STALE_SECONDS:.0f})", "5m", "critical",
                  "The certifier's admission loop is down or cannot read the IB nodes: new boots are not held",
                  "the-admission-loop-is-down", p.pool),
            _rule("AksInfinibandCertifierBreakerTripped", f"max(aks_infiniband_fabric_breaker_open{{{own}}}) > 0",
                  "0m", "critical", "The last certification run tripped the circuit breaker: it changed nothing",
                  "the-circuit-breaker-tripped", p.pool),
            _rule("AksInfinibandNodeHeldTooLong",
                  f"max by (node) (aks_infiniband_fabric_node_held_seconds{{{own}}}) > {p.held_bound_seconds}",
                  "0m", "warning", f"An IB node has been held for more than {p.held_bound_seconds} s without "
                  "passing a fabric test", "a-node-is-never-admitted", p.pool),
            _rule("AksInfinibandNodeQuarantined",
                  f'max by (node) (aks_infiniband_fabric_node_state{{{own},state="quarantined"}}) == 1',
                  "5m", "warning", "An IB node is quarantined: it failed a fabric test", "a-node-is-quarantined",
                  p.pool),
        ]
    return out


def groups(args: AlertsArgs) -> list[dict[str, Any]]:
    """One rule group per pool that has rules (`aks-infiniband-certifier-<pool>`), or the one pool's
    `aks-infiniband-certifier`: Prometheus evaluates each group on its own, and a pool's alerts carry its name."""
    out = [{"name": GROUP + (f"-{p.pool}" if p.pool else ""), "rules": rules(args, p)} for p in args.pools]
    return [g for g in out if g["rules"]] if len(args.pools) > 1 else out


def declare(name: str, args: AlertsArgs, labels: Mapping[str, str], selector: Mapping[str, str],
            opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """`{name}-alerts` PrometheusRule and, with the admission loop, `{name}-scrape` PodMonitor of the pods
    `selector` picks (their port `metrics`)."""
    meta = k8s.meta.v1.ObjectMetaArgs
    out: list[pulumi.Resource] = [k8s.apiextensions.CustomResource(
        f"{name}-alerts", api_version=API_VERSION, kind="PrometheusRule",
        metadata=meta(name="aks-infiniband-certifier", namespace=args.namespace, labels=dict(labels)),
        spec={"groups": groups(args)}, opts=opts)]
    if any(p.admission for p in args.pools):
        out.append(k8s.apiextensions.CustomResource(
            f"{name}-scrape", api_version=API_VERSION, kind="PodMonitor",
            metadata=meta(name="aks-infiniband-certifier-admission", namespace=args.namespace, labels=dict(labels)),
            spec={"selector": {"matchLabels": dict(selector)},
                  "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}]},
            opts=opts))
    return out
