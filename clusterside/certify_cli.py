"""`python -m verify certify`: judge a fabric test job that has finished (or wait for it, `--wait-minutes`),
then certify, hold or quarantine the IB nodes it ran on (clusterside/certify.py decides, clusterside/certify_kube.py
writes). Runs in the cluster (the stack's day-0 Job and CronJob: the pod's ServiceAccount) or anywhere
with `--kubeconfig`. Exit codes as the other commands: 0 judged (and applied); 1 the verdict tripped
--fail-on (fail: FAIL; warn: anything but PASS; --fail-on-low-bandwidth is --fail-on fail), or a
`--recurring` run tripped the circuit breaker; 2 no result (API error, no job, no credentials, bad arguments).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from clusterside import certify, certify_admit, certify_kube
from clusterside.kube import iso
from clusterside.kube_api import ApiError, connect
from core import catalog, choices, kinds, rdma_drivers
from verify import cli_args, logread, readers
from verify.result import Collected, FabricResult

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
# The result ConfigMap's keys: the typed result of the run, and the certifier's decisions.
RESULT_KEY, CERTIFICATION_KEY = "result.json", "certification.json"
CODE_SHA256_ENV = "AKS_INFINIBAND_CODE_SHA256"  # set by the stack's pods (components/fabric/certifier.py)
LAUNCHER_TASK = "mpimaster"
LOG_TAIL_LINES = 30


def add_parser(sub, judging_args, epilog: str) -> None:
    p = sub.add_parser("certify", help="judge a finished fabric test job and certify / quarantine its nodes",
                       epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", help="kubeconfig file (token or client certificate); default: the pod's "
                                        "ServiceAccount (in-cluster)")
    p.add_argument("--kind", choices=kinds.KINDS, default=kinds.COLLECT_DEFAULT)
    p.add_argument("--namespace", required=True, help="the fabric test job's namespace (also where the "
                                                      "certifier's ConfigMaps are written; Node Events go to default)")
    p.add_argument("--job", help="the Volcano Job to judge; without it only membership and NPD are checked")
    p.add_argument("--pool", help="a stack of several IB pools: certify the nodes of this agent pool only "
                   "(kubernetes.azure.com/agentpool), each pool its own fabric")
    p.add_argument("--task", default=LAUNCHER_TASK, help="the launcher task (default %(default)s)")
    p.add_argument("--wait-minutes", type=float, default=0.0,
                   help="wait this long for the job to finish (default 0: it must have finished)")
    p.add_argument("--poll-seconds", type=float, default=15.0)
    p.add_argument("--mode", choices=choices.CERTIFIER_MODES, default=choices.DEFAULT_CERTIFIER_MODE,
                   help="taint: taints, condition, label, Events; label: all but taints; off: judge and print only")
    p.add_argument("--dry-run", action="store_true", help="print the decisions and the writes; change nothing")
    p.add_argument("--max-quarantine-share", type=float, default=certify.DEFAULT_MAX_QUARANTINE_SHARE,
                   help="the circuit breaker: never more than this share of the pool quarantined (default %(default)s)")
    p.add_argument("--result-configmap", help="write the result (verify's JSON + the decisions) into this ConfigMap")
    p.add_argument("--history-configmap", help="keep the last --history-size records per node in this ConfigMap")
    p.add_argument("--history-size", type=int, default=certify_kube.HISTORY_KEEP)
    p.add_argument("--pushgateway", metavar="URL", help="push the run's metrics to this Prometheus Pushgateway")
    p.add_argument("--certifier-namespace",
                   help="where the ConfigMaps are (default: --namespace; Node Events go to default)")
    p.add_argument("--run-id", help="what this run judges (the stack passes the test job's spec hash): a re-run "
                                    "whose job is gone reports the result recorded for it")
    p.add_argument("--template-configmap", default="fabric-certifier-template",
                   help="with --recurring: the ConfigMap holding the re-test job's template (default %(default)s)")
    p.add_argument("--recurring", action="store_true",
                   help="re-certify idle IB nodes: create a test job on them (lowest priority), wait, judge")
    p.add_argument("--admit", action="store_true",
                   help="hold every new boot of an IB node and re-test held nodes once they can run a test, pass "
                        "after pass (the stack's admission Deployment; clusterside/certify_admit.py)")
    p.add_argument("--once", action="store_true", help="with --admit: one pass (hold and lift), no re-test")
    p.add_argument("--interval-seconds", type=float, default=certify_admit.DEFAULT_INTERVAL_SECONDS,
                   help="with --admit: seconds between passes (default %(default)s)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="with --admit: serve /healthz, /readyz and Prometheus /metrics on this port "
                        "(clusterside/certify_serve.py; the stack's Deployment: 9464)")
    p.add_argument("--dra-gpus", action="store_true",
                   help="with --admit: the GPUs are DRA devices (no nvidia.com/gpu): a node can run a test once its "
                        "gpu.nvidia.com ResourceSlices are published")
    p.add_argument("--peer-wait-minutes", type=float, default=certify_admit.DEFAULT_PEER_WAIT_MINUTES,
                   help="with --admit: report a held node that has had no peer to be tested with for this long "
                   "(it stays held; default %(default)s)")
    p.add_argument("--retest-after-minutes", type=float, default=certify_admit.DEFAULT_RETEST_AFTER_MINUTES,
                   help="with --admit: re-test a node that stays held at most this often (default %(default)s)")
    cli_args.add_gate_args(p, "the nodes are certified or quarantined first, whatever the gate")
    p.add_argument("--sharp", action="store_true", help="the job ran with SHARP (recorded in the result)")
    p.add_argument("--rack", action="store_true",
                   help="the job was the rack's NVLink run of a GB200/GB300 size: judged by the catalog's rack "
                        "(MNNVL) figure, with --mode off (it judges NVLink, not the fabric: no node is changed)")
    judging_args(p)


def _judge(args: argparse.Namespace, log: logread.LogFold, phase: str, pod: str,
           torsets: dict[str, str] | None = None) -> FabricResult:
    """The same judgement as `collect` (verify/readers.py), with where the run was found; `torsets`: each
    worker host's torset, so that the doctor judges each pair against its tier (certify_kube.worker_torsets)."""
    reader = readers.reader(args.kind)
    threshold = getattr(args, reader.threshold_flag.removeprefix("--").replace("-", "_"))
    job_failed = f"Volcano job phase {phase}" if phase in certify_kube.FAILED else None
    settings = readers.Settings(sku=args.sku, nodes=reader.nodes(args), threshold=threshold, job_failed=job_failed,
                                rack=args.rack, rdma_driver=args.rdma_driver or rdma_drivers.DEFAULT,
                                torsets=torsets or None)
    try:
        judged = reader.judge(log, settings)
    except readers.PARSE_ERRORS as exc:
        judged = reader.unread(log, settings, exc)
    collected = Collected(namespace=args.namespace, job=args.job, job_phase=phase, pod=pod,
                          log_tail=tuple(log.last_lines()), diagnosis=(), gave_up=None,
                          waited_minutes=None, sharp=args.sharp if reader.measures_sharp else None)
    return dataclasses.replace(judged.result, collected=collected)


def _problem(args: argparse.Namespace) -> str | None:
    """The arguments' problem, in one line (None: all good), before anything is read."""
    try:
        certify.Policy(mode=args.mode, dry_run=args.dry_run, max_quarantine_share=args.max_quarantine_share)
    except ValueError as exc:
        return f"--{exc}"
    kind = kinds.kind(args.kind)
    if kind.nodes is None and args.job and args.nodes is None and not args.recurring:
        return f"--nodes is required with --job and --kind {kind.name} (the nodes its run was meant to span)"
    if args.job and args.recurring:
        return "--job and --recurring exclude each other (--recurring creates its own job)"
    if args.admit and (args.job or args.recurring or args.rack):
        return "--admit runs alone: it holds new nodes and starts its own re-tests (no --job, --recurring, --rack)"
    if args.admit and args.mode == "off":
        return "--admit with --mode off: mode off touches no node, there is nothing to hold"
    if args.interval_seconds <= 0 or args.retest_after_minutes < 0:
        return (f"--interval-seconds must be > 0 and --retest-after-minutes >= 0 (got {args.interval_seconds:g}, "
                f"{args.retest_after_minutes:g})")
    if args.rack and (args.mode != "off" or args.recurring or not args.job):
        return (f"--rack judges the --job of the rack's NVLink run, not the fabric: it needs --mode off "
                f"(got {args.mode}) and no --recurring")
    if args.rack and (not kind.rack_run or not args.sku or not catalog.lookup(args.sku).has_mnnvl):
        return f"--rack applies to the NCCL all-reduce of a multi-node-NVLink size (GB200, GB300), not {args.sku}"
    expected = os.environ.get(CODE_SHA256_ENV)
    if expected:  # in the stack's pods: run only the code the preview showed
        found = certify.code_sha256(certify.code_files(Path(__file__).resolve().parent.parent))
        if found != expected:
            return (f"the mounted code's sha256 is {found}, the pod was created for {expected}: "
                    "the code ConfigMap changed under this pod; the next run uses the new one")
    return None


def run(args: argparse.Namespace) -> int:
    problem = _problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    policy = certify.Policy(mode=args.mode, dry_run=args.dry_run, max_quarantine_share=args.max_quarantine_share)
    now = time.time()
    at = iso(now)
    home = args.certifier_namespace or args.namespace  # the ConfigMaps (Node Events: certify_kube)
    if args.admit:
        try:
            api = connect(args.kubeconfig)
        except (ApiError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        health = None
        if args.metrics_port is not None and not (args.once or args.dry_run):
            from clusterside import certify_serve

            health = certify_serve.Health(args.interval_seconds, time.time, args.pool)
            certify_serve.serve(health, args.metrics_port)
        return certify_admit.loop(api, args, policy, run, health=health)
    try:
        api = connect(args.kubeconfig)
        nodes = certify_kube.ib_nodes(api, args.pool)
        node_facts = [certify.facts(n) for n in nodes]
        member = certify.membership(node_facts)
        if member.reason:  # before any NCCL result is read: the run cannot be judged across the split
            certify_kube._say(member.reason)
        # Mode off touches no node and keeps no history; its result ConfigMap is still written (unless
        # --dry-run): it is the report, what the stack's fabricVerdict and rack outputs read.
        writer = certify_kube.Writer(api, home, dry_run=args.dry_run or args.mode == "off")
        reporter = certify_kube.Writer(api, home, dry_run=args.dry_run)
        if args.recurring:
            from clusterside import certify_recurring

            args.job, args.nodes = certify_recurring.launch(api, args, nodes, member, writer)
            if args.job is None:  # nothing idle to certify (said on stderr), or a dry run
                print(json.dumps({"writes": writer.writes}, indent=2) if args.json else "\n".join(writer.writes))
                return EXIT_OK
        run_id = args.run_id or f"{args.namespace}/{args.job or 'membership'}@{at}"
        result, hosts, unplaced = None, {}, None
        if args.job:
            try:
                result, hosts, unplaced = _judge_job(api, args, member)
                # read again after the wait: every write tests the resourceVersion it read
                nodes = certify_kube.ib_nodes(api, args.pool)
                node_facts = [certify.facts(n) for n in nodes]
            except ApiError as exc:
                kept = _kept(api, args, home) if exc.status == 404 else None
                if kept is None:
                    raise
                certify_kube._say(f"{exc}; the result of run {args.run_id} is already recorded: reporting it")
                return _report(args, kept, [], args.run_id)
        plan = certify.plan(node_facts, result.to_json() if result else None, hosts, policy, run_id=run_id, at=at)
        keeps_history = args.history_configmap and not args.rack  # a node's history is of the fabric only
        history = certify_kube.history_records(api, home, args.history_configmap) if keeps_history else {}
        warnings = certify.relative_warnings(history, plan.decisions) + ([
            f"the node of worker pod(s) {', '.join(unplaced['pods'])} is unknown ({unplaced['why']}): no node is "
            "certified or quarantined for them"] if unplaced else [])
        out = _document(result, plan, member, warnings, args, at)
        out["certification"].update(run_id=run_id, failed_writes=writer.failed, unplaced=unplaced)
        if args.result_configmap:  # the verdict first: no node write can hide it
            _write_result(reporter, args.result_configmap, out)
        certify_kube.apply(writer, plan, nodes, policy, at=at)
        if keeps_history:
            writer.configmap(args.history_configmap, certify_kube.history_update(
                history, plan, at=at, run=run_id, keep=args.history_size), best_effort=True)
        if args.pushgateway and not writer.dry_run and not args.rack:
            try:
                certify_kube.push_metrics(args.pushgateway, certify_kube.metrics_text(plan, node_facts, now),
                                          pool=args.pool)
            except OSError as exc:
                certify_kube._say(f"failed to push metrics to {args.pushgateway}: {exc} (best effort)")
                writer.failed.append({"write": f"push metrics to {args.pushgateway}", "error": str(exc),
                                      "best_effort": True})
        if writer.failed and args.result_configmap:
            _write_result(reporter, args.result_configmap, out)
    except (ApiError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    code = _report(args, out, writer.writes + reporter.writes, run_id)
    if args.recurring and plan.breaker and not writer.dry_run:
        # The CronJob's Job is what monitoring sees (its failed Jobs, the CronJob's lastSuccessfulTime): a
        # tripped breaker changed nothing and needs a person, so it fails the Job (docs/certifier-runbook.md).
        print(f"BREAKER: {plan.breaker}", file=sys.stderr)
        code = max(code, EXIT_FAIL)
    hard = [f for f in writer.failed if not f["best_effort"]]
    if hard:
        print(f"error: {len(hard)} node write(s) failed (the result is written; those nodes are unchanged): "
              + "; ".join(f"{f['write']}: {f['error']}" for f in hard), file=sys.stderr)
        return EXIT_ERROR
    return code


def _write_result(reporter: certify_kube.Writer, name: str, out: dict) -> None:
    reporter.configmap(name, {
        RESULT_KEY: json.dumps(out["result"], sort_keys=True) if out["result"] else "null",
        CERTIFICATION_KEY: json.dumps(out["certification"], sort_keys=True)})


def _judge_job(api, args: argparse.Namespace, member: certify.Membership
               ) -> tuple[FabricResult, dict[str, str], dict | None]:
    """Wait for (or read) the finished job, judge its launcher log; the worker pods' host -> node map, from
    where the wait saw them and what is left after the job ended; and the workers whose node is unknown
    (None: none), with why."""
    placed: dict[str, dict] = {}
    if args.wait_minutes > 0:
        job = certify_kube.wait_for_job(api, args.namespace, args.job, timeout_seconds=args.wait_minutes * 60,
                                        poll_seconds=args.poll_seconds, placed=placed)
    else:
        job = api.get(certify_kube.job_path(args.namespace, args.job))
    phase = certify_kube.phase(job)
    if phase not in certify_kube.DONE | certify_kube.FAILED:
        raise ApiError(f"Volcano job {args.namespace}/{args.job} has not finished (phase {phase}); "
                       "pass --wait-minutes to wait for it")
    left = certify_kube.job_pods(api, args.namespace, args.job)  # the launcher's pod stays: it has finished
    certify_kube.record_placement(placed, left)
    pods = list(placed.values())
    unplaced = _unplaced(args, job, placed)
    torsets = {} if unplaced else certify_kube.worker_torsets(pods, args.task, certify_kube.ib_nodes(api))
    pod, log = certify_kube.launcher_log(api, args.namespace, left, args.task, args.kind, LOG_TAIL_LINES)
    result = _judge(args, log, phase, pod, torsets)
    if member.reason:  # the split explains the run: its finding comes first
        result = dataclasses.replace(result, verdict="FAIL", reasons=(member.reason, *result.reasons))
    return result, certify_kube.worker_hosts(pods, args.task), unplaced


def _unplaced(args: argparse.Namespace, job: dict, placed: dict[str, dict]) -> dict | None:
    """The job's worker pods whose node no read saw, and why ({pods, why}; None: every one is known).
    Never a silent gap: their hosts map to no node, so the run certifies and quarantines none for them."""
    pods = [p for p in certify_kube.task_pod_names(job, args.task) if p not in placed]
    if not pods:
        return None
    seen = ("the certifier did not watch the job run (--wait-minutes 0)" if args.wait_minutes <= 0 else
            f"no read while the certifier waited (every {args.poll_seconds:g}s) found them on a node")
    why = (f"{seen}, and they are gone: Volcano deletes a job's unfinished pods when it ends the job (the workers "
           "run sshd until then)")
    certify_kube._say(f"the node of {len(pods)} worker pod(s) is unknown ({', '.join(pods)}): {why}")
    return {"pods": pods, "why": why}


def _kept(api, args: argparse.Namespace, home: str) -> dict | None:
    """The recorded document of this --run-id (a re-run after the test job's TTL), else None."""
    if not (args.run_id and args.result_configmap):
        return None
    try:
        data = api.get(f"/api/v1/namespaces/{home}/configmaps/{args.result_configmap}").get("data") or {}
        kept = {"result": json.loads(data.get(RESULT_KEY) or "null"),
                "certification": json.loads(data.get(CERTIFICATION_KEY) or "{}")}
    except (ApiError, ValueError):
        return None
    return kept if kept["certification"].get("run_id") == args.run_id else None


def _report(args: argparse.Namespace, out: dict, writes: list[str], run_id: str) -> int:
    out["writes"] = writes
    print(json.dumps(out, indent=2) if args.json else _text(out))
    verdict = out["certification"].get("verdict")
    if cli_args.tripped(args, verdict):
        print(f"{verdict}: {run_id}", file=sys.stderr)
        for reason in out["certification"].get("reasons") or ():
            print(f"  - {reason}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _document(result: FabricResult | None, plan: certify.Plan, member: certify.Membership, warnings: list[str],
              args: argparse.Namespace, at: str) -> dict:
    """What certify prints and keeps: `result`, the run's typed result (verify/result.py; null when no job
    was judged), and `certification`: the verdict with the membership and history findings, the
    suspects named by node and VM (the pod host name kept as evidence), and the decisions."""
    verdict = result.verdict if result else ("FAIL" if member.reason else "PASS")
    reasons = list(result.reasons) if result else ([member.reason] if member.reason else [])
    reasons += [f"WARN {w}" for w in warnings]
    if warnings and verdict == "PASS":
        verdict = "WARN"
    vms = {d.node: d.vm for d in plan.decisions}
    outside = [{"node": n, "vm": vms.get(n), "host": None, "hca": None, "reason": member.reason,
                "evidence": member.evidence, "verdict": "FAIL"} for n in member.outside]
    return {"result": result.to_json() if result else None,
            "certification": {"at": at, "mode": args.mode, "dry_run": args.dry_run, "verdict": verdict,
                              "reasons": reasons, "suspects": outside + list(plan.suspects), **plan.as_dict()}}


def _text(out: dict) -> str:
    cert = out["certification"]
    lines = [f"VERDICT: {cert['verdict']}"] + [f"  - {r}" for r in cert["reasons"]]
    if cert["breaker"]:
        lines.append(f"BREAKER: {cert['breaker']}")
    for d in cert["decisions"]:
        lines.append(f"{d['action']:>10} {d['node']} ({d['vm'] or 'vm unknown'}): {d['reason']}")
    lines += [f"note: {n}" for n in cert["notes"]] + [f"  {w}" for w in out["writes"]]
    return "\n".join(lines)
