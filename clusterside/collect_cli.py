"""`python -m verify collect` (its parser and what it does; verify/__main__.py dispatches to it): wait for
the Volcano job (clusterside/collect.py), read the launcher's log and judge it as `report` does
(verify/readers.py), and say why the run failed or stopped.

A `collect` whose run did not complete (it gave up because success was impossible, or timed out)
still prints its result, verdict FAIL with the diagnosis as reasons, and exits 2; with
--incomplete-as-fail it exits as for any FAIL (0, or 1 with --fail-on). The stack's
collect step passes that flag, so the diagnosis reaches the stack outputs (fabricVerdictReasons).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys

from clusterside import collect as collect_mod
from core import kinds
from verify import cli_args, readers
from verify.cli_args import EXIT_FAIL, EXIT_OK
from verify.result import Collected, FabricResult, Finding
from verify.verdict import Verdict

# What `collect` imports from requirements.txt (the deploy requirements: kubeconfigs are YAML); `report`
# needs none of them. Its Kubernetes client is the standard library's (clusterside/kube_api.py).
COLLECT_MODULES = {"yaml": "PyYAML"}


def add_parser(sub, judging_args, epilog: str) -> None:
    col = sub.add_parser("collect", help="wait for the Volcano job, read the launcher log, judge it",
                         epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    col.add_argument("--kind", choices=kinds.KINDS, default=kinds.COLLECT_DEFAULT,
                     help="which test the job runs: nccl (all-reduce, GPU sizes) or p2p (osu_bw / osu_latency, "
                          "CPU-only sizes); default %(default)s")
    col.add_argument("--namespace", required=True)
    col.add_argument("--job", required=True, help="the Volcano Job's name")
    col.add_argument("--task", default=collect_mod.LAUNCHER_TASK, help="the launcher task (default %(default)s)")
    creds = col.add_argument_group(
        "credentials", "the first of: --kubeconfig; the --aks-* flags (az aks get-credentials, kept in memory); "
                       "$KUBECONFIG_CONTENT (the YAML itself); $KUBECONFIG / ~/.kube/config")
    creds.add_argument("--kubeconfig", help="kubeconfig file (wins over everything else)")
    creds.add_argument("--aks-resource-group", metavar="RG",
                       help="with --aks-cluster: fetch the cluster's user credentials with the Azure CLI "
                            "(needs az on PATH, logged in)")
    creds.add_argument("--aks-cluster", metavar="NAME", help="the AKS cluster's name (with --aks-resource-group)")
    creds.add_argument("--subscription", metavar="ID",
                       help="the cluster's subscription (with the --aks-* flags; default: az's current one)")
    col.add_argument("--timeout-minutes", type=cli_args.positive_float, default=60.0,
                     help="give up after (default %(default)s)")
    col.add_argument("--poll-seconds", type=cli_args.positive_float, default=15.0,
                     help="status poll interval (default %(default)s)")
    cli_args.add_gate_args(col, "the stack passes fabricTest.failOn")
    col.add_argument("--sharp", action="store_true",
                     help="the job ran with SHARP (CollNet through HPC-X's plugin, fabricTest.sharp): recorded in "
                          "the result as \"sharp\": true; without it NCCL's own IB transport was measured")
    col.add_argument("--rack", action="store_true",
                     help="the job was the rack's NVLink run of a GB200/GB300 size (MNNVL on): judged by the "
                          "catalog's rack (MNNVL) figure, not the InfiniBand one")
    col.add_argument("--incomplete-as-fail", action="store_true",
                     help="a run that did not complete (gave up, timed out) is a FAIL verdict with the diagnosis "
                          "as its reasons: exit 0 (1 with --fail-on) instead of 2")
    judging_args(col)


def _aks_cluster(args: argparse.Namespace) -> tuple[collect_mod.AksCluster | None, str | None]:
    """The --aks-* flags as a cluster (None: not given), or the problem with them."""
    rg, name, sub = args.aks_resource_group, args.aks_cluster, args.subscription
    if not rg and not name:
        return None, ("--subscription only applies with --aks-resource-group and --aks-cluster" if sub else None)
    if not (rg and name):
        return None, "--aks-resource-group and --aks-cluster go together (the cluster's resource group and name)"
    return collect_mod.AksCluster(resource_group=rg, name=name, subscription=sub or None), None


def _missing_collect_requirement() -> str | None:
    """One line saying what to install when a module `collect` needs is missing (None: all there)."""
    missing = [package for module, package in COLLECT_MODULES.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"python -m verify collect needs the deploy requirements ({', '.join(missing)} not installed): "
            "run it as .venv/bin/python -m verify collect after `make venv`, or pip install -r requirements.txt")


def run(args: argparse.Namespace) -> int:
    missing = _missing_collect_requirement()
    if missing:
        return cli_args.error(missing)
    reader = readers.reader(args.kind)
    problem = cli_args.problem(args, reader) or cli_args.missing_file(args)
    aks, aks_problem = _aks_cluster(args)
    if problem or aks_problem:  # before waiting up to an hour for the job
        return cli_args.error(problem or aks_problem)
    try:
        got = collect_mod.collect(
            args.namespace,
            args.job,
            kubeconfig=args.kubeconfig,
            aks=None if args.kubeconfig else aks,  # an explicit file wins: az is not called
            timeout_seconds=args.timeout_minutes * 60,
            poll_seconds=args.poll_seconds,
            task=args.task,
        )
    except collect_mod.Incomplete as exc:
        return _incomplete(args, reader, exc)
    except collect_mod.CollectError as exc:
        return cli_args.error(str(exc))
    job_failed = None
    if got.phase in collect_mod.FAILED_PHASES:
        job_failed = f"Volcano job phase {got.phase}" + (f" ({got.job_message})" if got.job_message else "")
    log_tail = collect_mod.tail(got.log)
    settings = cli_args.settings(args, reader, job_failed)
    try:
        judged = reader.judge(got.log, settings)
    except readers.PARSE_ERRORS as exc:
        judged = reader.unread(got.log, settings, exc)
    out, text = judged.result, judged.text
    collected = _collected(args, reader, got.phase, got.pod, log_tail, got.diagnosis, gave_up=None)
    # why the job failed, one line per cause, with the verdict's own reasons
    out = dataclasses.replace(out, reasons=(*out.reasons, *map(str, got.diagnosis)), collected=collected)
    text += "".join(f"  - {finding}\n" for finding in got.diagnosis)
    return _print_collected(args, reader, out, text, log_tail, got.pod)


def _collected(args: argparse.Namespace, reader: readers.Reader, phase: str, pod: str | None,
               log_tail: list[str], diagnosis, gave_up: str | None, waited_minutes: float | None = None) -> Collected:
    """What `collect` adds to a result: where it came from, and why the run failed or stopped."""
    return Collected(
        namespace=args.namespace, job=args.job, job_phase=phase, pod=pod, log_tail=tuple(log_tail),
        diagnosis=tuple(Finding(what=f.what, where=f.where, message=f.message) for f in diagnosis),
        gave_up=gave_up, waited_minutes=waited_minutes,
        # which transport was measured: SHARP/CollNet, or NCCL's own IB transport
        sharp=args.sharp if reader.measures_sharp else None)


def _print_collected(args: argparse.Namespace, reader: readers.Reader, out: FabricResult, text: str,
                     log_tail: list[str], pod: str | None) -> int:
    if args.json:
        print(out.dumps())
    else:
        print(text, end="")
    if cli_args.tripped(args, out.verdict):
        print(f"{out.verdict}: {args.namespace}/{args.job}{reader.where(args.sku, args.nodes)}", file=sys.stderr)
        for reason in out.reasons:
            print(f"  - {reason}", file=sys.stderr)
        if pod:
            print(f"--- last {len(log_tail)} lines of {pod} ---", file=sys.stderr)
            for line in log_tail:
                print(line, file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _incomplete(args: argparse.Namespace, reader: readers.Reader, exc: collect_mod.Incomplete) -> int:
    """A run that did not complete: a FAIL result whose reasons are why (the give-up line) and the
    diagnosis, one line per cause. Exit 2, or as any FAIL with --incomplete-as-fail."""
    out = FabricResult(
        kind=reader.kind,
        verdict=Verdict.FAIL.value,
        reasons=(f"the fabric test did not complete: {exc}", *map(str, exc.diagnosis)),
        sku=args.sku,
        nodes=reader.nodes(args),
        collected=_collected(args, reader, exc.phase, None, [], exc.diagnosis, gave_up=str(exc),
                             waited_minutes=round(exc.waited_seconds / 60, 1)),
    )
    text = readers.verdict_text(out)
    if args.json:  # stdout is for programs (the stack's step shows stderr): the diagnosis once more, at the end
        print(f"[verify collect] {exc}", file=sys.stderr)
        for finding in exc.diagnosis:
            print(f"[verify collect]   - {finding}", file=sys.stderr)
    if not args.incomplete_as_fail:
        print(out.dumps() if args.json else text, end="\n" if args.json else "")
        return cli_args.error(str(exc))
    return _print_collected(args, reader, out, text, [], None)
