"""python -m verify report LOG ... | python -m verify collect ... | python -m verify certify ...

The command line of the judge (`report`, this package) and of the cluster side (`collect`, `certify`,
`wait-access`: clusterside/), kept at `python -m verify` because users, the docs and the certifier's pods
run it by that name; the one module of verify/ that imports clusterside/ (tests/test_imports.py).
`certify` (clusterside/certify_cli.py, docs/fabric-certifier.md) judges a finished job as `collect` does
and certifies or quarantines the IB nodes it ran on; it is what the stack runs in the cluster.

Two kinds of result (core/kinds.py; each read and judged by its verify.readers.Reader, one path
for both): `nccl` (nccl-tests all_reduce_perf on GPU sizes, judged in GB/s of bus bandwidth) and
`p2p` (OSU osu_bw / osu_latency or perftest between two CPU-only HB / HX nodes, judged in Gb/s of
link bandwidth). `report` detects the kind from the log; `collect` is told it (`--kind`, default
nccl), because it knows which job it waits for. Each kind has its own threshold flag with its unit
in the name, `--threshold-gbps` (GB/s) and `--threshold-gbits` (Gb/s); passing the other kind's flag
is an error, never a silent conversion.

Both kinds report alike: a table, then the headline `VERDICT: X — <sku>, <figure> at <size>, threshold
<t>` and the reasons; without --sku (and without a threshold) the verdict is UNKNOWN, exit 0. `--sku`
takes a size as the catalog knows it, in any case, with or without `Standard_` (catalog.lookup); an
unknown one is a usage error that names the closest.

Exit codes (EXIT_CODES, also in --help): 0 = a result was read and judged (whatever the verdict,
unless --fail-on); 1 = the verdict tripped --fail-on (fail: FAIL; warn: anything but PASS;
--fail-on-low-bandwidth is --fail-on fail), `report` and `collect` alike, so a saved log can gate CI;
2 = no result: unreadable/garbage input, timeout, Kubernetes API
error, no credentials (az missing, not logged in or failing), bad arguments; 141 = the reader of stdout
went away (e.g. `| head`), as for a command killed by SIGPIPE, silently. Errors are one line on
stderr, never a traceback; `report --json` also prints them as one JSON object, {"schemaVersion": 1,
"verdict": null, "error": "..."}. Every --json document is a verify.result.FabricResult
(docs/fabric-result.md, the schema verify/schema/fabric-result.v1.json).

A `collect` whose run did not complete (it gave up because success was impossible, or timed out)
still prints its result, verdict FAIL with the diagnosis as reasons, and exits 2; with
--incomplete-as-fail it exits as for any FAIL (0, or 1 with --fail-on). The stack's
collect step passes that flag, so the diagnosis reaches the stack outputs (fabricVerdictReasons).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys

from clusterside import certify_cli, wait_access
from clusterside import collect as collect_mod
from core import catalog, kinds
from verify import cli_args, logread, p2p, readers
from verify.nccl import ParseError
from verify.result import Collected, FabricResult, Finding
from verify.verdict import Verdict

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
EXIT_PIPE = 128 + 13  # stdout's reader went away: what a shell reports for a command killed by SIGPIPE
EXIT_CODES = f"""exit codes:
  {EXIT_OK}    a result was read and judged, whatever the verdict (unless --fail-on)
  {EXIT_FAIL}    the verdict tripped --fail-on: fail = FAIL; warn = WARN, UNKNOWN or FAIL
       (--fail-on-low-bandwidth = --fail-on fail)
  {EXIT_ERROR}    no result: unreadable input, no table, bad arguments, an unknown --sku, a missing
       --kubeconfig file or --plot directory, a timeout,
       a Kubernetes API error, no credentials (collect)
  {EXIT_PIPE}  stdout's reader went away before the report was written (e.g. | head); no error printed"""
# What `collect` imports from requirements.txt (the deploy requirements); `report` needs none of them.
COLLECT_MODULES = {"kubernetes": "kubernetes", "yaml": "PyYAML"}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _sku(text: str) -> str:
    """--sku as the catalog names it; an unknown size is a usage error naming the closest ones."""
    try:
        return catalog.lookup(text).vm_size
    except KeyError as exc:
        raise argparse.ArgumentTypeError(str(exc.args[0])) from None


def _judging_args(p: argparse.ArgumentParser, *, collect: bool, plot: bool = True) -> None:
    p.add_argument("--sku", required=collect, type=_sku,
                   help="VM size, e.g. Standard_ND96asr_v4, ND96asr_v4 or Standard_HB176rs_v4 (any case): the "
                        "catalog's expectation" + ("" if collect else "; without it the verdict is UNKNOWN"))
    p.add_argument("--nodes", type=_positive_int,
                   help="nccl: nodes the run was meant to span" + (" (required)" if collect else
                                                                   " (default: the hosts the log names, else ranks "
                                                                   "/ GPUs per VM of --sku)")
                   + f"; p2p: always {p2p.NODES}, may be omitted")
    p.add_argument("--threshold-gbps", type=_positive_float,
                   help="nccl only: override the catalog's FAIL threshold, in GB/s (gigaBYTES/s) of bus bandwidth; "
                        "below 35%% of the baseline a run is FAIL whatever the threshold")
    p.add_argument("--threshold-gbits", type=_positive_float,
                   help="p2p only: override the catalog's FAIL threshold, in Gb/s (gigaBITS/s) of link bandwidth "
                        "at the largest message")
    if plot:  # report and collect draw it; certify writes its result to the cluster, not a picture
        p.add_argument("--plot", metavar="OUT.png",
                       help="also write a PNG of bandwidth against message size (needs matplotlib; the file's "
                            "directory must exist)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr, pointing at --help instead of printing the usage
    (exit 2), and under --json also one JSON object on stdout."""

    json_errors = False  # set by main() from its argv

    def error(self, message: str):  # type: ignore[override]
        line = f"{self.prog}: error: {message}"
        if _Parser.json_errors:
            print(json.dumps(FabricResult.failure(line).to_json()))
        self.exit(2, f"{line} (--help lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m verify", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read and judge a fabric test: nccl-tests (GPU sizes) or OSU / perftest (CPU-only sizes).")
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("report", help="parse a saved log (nccl-tests text or -J JSON, OSU, perftest) and judge it",
                         epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("log", help="the log file ('-' for stdin)")
    rep.add_argument("--kind", choices=("auto", *kinds.KINDS), default="auto",
                     help="what the log holds (default %(default)s: p2p when it has an OSU or perftest table, "
                          "else nccl)")
    cli_args.add_gate_args(rep, "e.g. to gate CI on a saved log")
    _judging_args(rep, collect=False)

    col = sub.add_parser("collect", help="wait for the Volcano job, read the launcher log, judge it",
                         epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    col.add_argument("--timeout-minutes", type=_positive_float, default=60.0,
                     help="give up after (default %(default)s)")
    col.add_argument("--poll-seconds", type=_positive_float, default=15.0,
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
    _judging_args(col, collect=True)
    certify_cli.add_parser(sub, lambda p: _judging_args(p, collect=False, plot=False), EXIT_CODES)
    wait_access.add_parser(sub)
    return parser


def _problem(args: argparse.Namespace, reader: readers.Reader) -> str | None:
    """The flags that do not apply to the reader's kind, as an error message (None: all good)."""
    if getattr(args, "sharp", False) and not reader.measures_sharp:
        return "--sharp applies to the NCCL all-reduce (--kind nccl) only"
    if getattr(args, "rack", False) and (reader.kind != kinds.NCCL or not catalog.lookup(args.sku).has_mnnvl):
        return f"--rack applies to the NCCL all-reduce of a multi-node-NVLink size (GB200, GB300), not {args.sku}"
    return reader.problem(args)


def _error(message: str, as_json: bool = False) -> int:
    print(f"error: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps(FabricResult.failure(message).to_json()))  # one line, as it always was
    return EXIT_ERROR


def _fail_exit(args: argparse.Namespace, out: FabricResult, what: str) -> int:
    """EXIT_FAIL, with the reasons on stderr, when the verdict trips the gate (--fail-on)."""
    if not cli_args.tripped(args, out.verdict):
        return EXIT_OK
    print(f"{out.verdict}: {what}", file=sys.stderr)
    for reason in out.reasons:
        print(f"  - {reason}", file=sys.stderr)
    return EXIT_FAIL


def _read_log(path: str, kind: str) -> logread.LogFold:
    """The log read once, line by line, in memory that does not grow with it (verify.logread)."""
    try:
        if path == "-":
            return logread.read(getattr(sys.stdin, "buffer", sys.stdin), kind)
        with open(path, "rb") as f:
            return logread.read(f, kind)
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from None


def _settings(args: argparse.Namespace, reader: readers.Reader, job_failed: str | None = None) -> readers.Settings:
    return readers.Settings(sku=args.sku, nodes=args.nodes, threshold=reader.threshold(args), plot=args.plot,
                            job_failed=job_failed, rack=getattr(args, "rack", False))


def _report(args: argparse.Namespace) -> int:
    if missing := cli_args.missing_file(args):
        return _error(missing, args.json)
    try:
        log = _read_log(args.log, args.kind)
    except ParseError as exc:
        return _error(str(exc), args.json)
    kind = args.kind if args.kind != "auto" else log.kind()
    reader = readers.reader(kind)
    problem = _problem(args, reader)
    if problem:
        return _error(f"{args.log}: {problem}" if args.kind == "auto" else problem, args.json)
    try:
        judged = reader.judge(log, _settings(args, reader))
    except readers.PARSE_ERRORS as exc:
        return _error(f"{args.log}: {exc}", args.json)
    out = judged.result
    if args.json:
        print(out.dumps())
    else:
        print(judged.text, end="")
        if out.figures is not None and out.figures.plot:
            print(f"plot: {out.figures.plot}")
    return _fail_exit(args, out, args.log + reader.where(args.sku, args.nodes))


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


def _collect(args: argparse.Namespace) -> int:
    missing = _missing_collect_requirement()
    if missing:
        return _error(missing)
    reader = readers.reader(args.kind)
    problem = _problem(args, reader) or cli_args.missing_file(args)
    aks, aks_problem = _aks_cluster(args)
    if problem or aks_problem:  # before waiting up to an hour for the job
        return _error(problem or aks_problem)
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
        return _error(str(exc))
    job_failed = None
    if got.phase in collect_mod.FAILED_PHASES:
        job_failed = f"Volcano job phase {got.phase}" + (f" ({got.job_message})" if got.job_message else "")
    log_tail = collect_mod.tail(got.log)
    settings = _settings(args, reader, job_failed)
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
        return _error(str(exc))
    return _print_collected(args, reader, out, text, [], None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _Parser.json_errors = "--json" in argv
    args = build_parser().parse_args(argv)
    as_json = getattr(args, "json", False) and args.command == "report"
    try:
        if args.command == "report":
            return _report(args)
        if args.command == "certify":
            return certify_cli.run(args)
        if args.command == "wait-access":
            return wait_access.run(args)
        return _collect(args)
    except RuntimeError as exc:  # e.g. --plot without matplotlib
        return _error(str(exc), as_json)
    except BrokenPipeError:  # stdout's reader went away: run() ends quietly
        raise
    except OSError as exc:  # e.g. the plot path is not writable
        return _error(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), as_json)


def run() -> int:
    """main() for the command line: a reader that goes away (`| head`) ends it quietly, with EXIT_PIPE."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that exit's flush is silent too
        return EXIT_PIPE
    return code


if __name__ == "__main__":
    sys.exit(run())
