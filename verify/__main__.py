"""python -m verify report LOG ... | python -m verify collect ...

Exit codes: 0 = a result was read and judged (whatever the verdict, unless --fail-on-low-bandwidth);
1 = verdict FAIL with --fail-on-low-bandwidth; 2 = no result: unreadable/garbage input, timeout,
Kubernetes API error, bad arguments. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from verify import collect as collect_mod
from verify.nccl import ParseError, parse, parse_file
from verify.report import summary, table
from verify.verdict import Verdict, judge

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


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


def _judging_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--sku", required=required, help="VM size, e.g. Standard_ND96asr_v4 (the catalog's baseline)")
    p.add_argument("--nodes", type=_positive_int, required=required,
                   help="nodes the run was meant to span" + ("" if required else " (default: the hosts the log names)"))
    p.add_argument("--threshold-gbps", type=_positive_float, help="override the catalog's FAIL threshold (GB/s busbw)")
    p.add_argument("--plot", metavar="OUT.png", help="also write a PNG of busbw against message size")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verify", description="Read and judge an nccl-tests result.")
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("report", help="parse an nccl-tests log (text or -J JSON) and judge it")
    rep.add_argument("log", help="the log file ('-' for stdin)")
    _judging_args(rep, required=False)

    col = sub.add_parser("collect", help="wait for the Volcano job, read the launcher log, judge it")
    col.add_argument("--namespace", required=True)
    col.add_argument("--job", required=True, help="the Volcano Job's name")
    col.add_argument("--task", default=collect_mod.LAUNCHER_TASK, help="the launcher task (default %(default)s)")
    col.add_argument("--kubeconfig",
                     help="kubeconfig file (default: $KUBECONFIG_CONTENT, then $KUBECONFIG, ~/.kube/config)")
    col.add_argument("--timeout-minutes", type=_positive_float, default=60.0,
                     help="give up after (default %(default)s)")
    col.add_argument("--poll-seconds", type=_positive_float, default=15.0,
                     help="status poll interval (default %(default)s)")
    col.add_argument("--fail-on-low-bandwidth", action="store_true", help="exit 1 when the verdict is FAIL")
    _judging_args(col, required=True)
    return parser


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _plot(result, judgement, path: str | None) -> str | None:
    if not path:
        return None
    from verify.plot import write_png

    return str(write_png(result, judgement, path))


def _report(args: argparse.Namespace) -> int:
    try:
        result = parse(sys.stdin.read()) if args.log == "-" else parse_file(args.log)
    except ParseError as exc:
        return _error(f"{args.log}: {exc}")
    judgement = judge(result, sku=args.sku, nodes=args.nodes, threshold_gbps=args.threshold_gbps)
    plot = _plot(result, judgement, args.plot)
    if args.json:
        out = summary(result, judgement)
        out["plot"] = plot
        print(json.dumps(out, indent=2))
    else:
        print(table(result, judgement), end="")
        if plot:
            print(f"plot: {plot}")
    return EXIT_OK


def _collect(args: argparse.Namespace) -> int:
    try:
        got = collect_mod.collect(
            args.namespace,
            args.job,
            kubeconfig=args.kubeconfig,
            timeout_seconds=args.timeout_minutes * 60,
            poll_seconds=args.poll_seconds,
            task=args.task,
        )
    except collect_mod.CollectError as exc:
        return _error(str(exc))
    job_failed = None
    if got.phase in collect_mod.FAILED_PHASES:
        job_failed = f"Volcano job phase {got.phase}" + (f" ({got.job_message})" if got.job_message else "")
    log_tail = collect_mod.tail(got.log)
    try:
        result = parse(got.log)
    except ParseError as exc:
        out = {
            "verdict": Verdict.FAIL.value,
            "reasons": ([job_failed] if job_failed else []) + [f"the launcher log holds no nccl-tests result: {exc}"],
            "sku": args.sku,
            "nodes": args.nodes,
        }
        judgement = result = None
    else:
        judgement = judge(result, sku=args.sku, nodes=args.nodes, threshold_gbps=args.threshold_gbps,
                          job_failed=job_failed)
        out = summary(result, judgement)
        out["plot"] = _plot(result, judgement, args.plot)
    out.update({"namespace": args.namespace, "job": args.job, "job_phase": got.phase, "pod": got.pod,
                "log_tail": log_tail})
    if args.json:
        print(json.dumps(out, indent=2))
    elif result is not None and judgement is not None:
        print(table(result, judgement), end="")
    else:
        print(f"VERDICT: {out['verdict']}\n" + "\n".join(f"  - {r}" for r in out["reasons"]))
    if args.fail_on_low_bandwidth and out["verdict"] == Verdict.FAIL.value:
        print(f"FAIL: {args.namespace}/{args.job} on {args.sku} x {args.nodes} nodes", file=sys.stderr)
        for reason in out["reasons"]:
            print(f"  - {reason}", file=sys.stderr)
        print(f"--- last {len(log_tail)} lines of {got.pod} ---", file=sys.stderr)
        for line in log_tail:
            print(line, file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "report":
            return _report(args)
        return _collect(args)
    except RuntimeError as exc:  # e.g. --plot without matplotlib
        return _error(str(exc))
    except OSError as exc:  # e.g. the plot path is not writable
        return _error(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))


if __name__ == "__main__":
    sys.exit(main())
