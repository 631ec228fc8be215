"""python -m verify report LOG ... | python -m verify collect ... | python -m verify certify ...

The command line of the judge (`report`, this package) and of the cluster side (`collect`, `certify`,
`wait-access`: clusterside/), kept at `python -m verify` because users, the docs and the certifier's pods
run it by that name; the one module of verify/ that imports clusterside/ (tests/tooling/test_imports.py).
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
(docs/fabric-result.md, the schema verify/schema/fabric-result.v1.json). What `collect` prints when its
run did not complete: clusterside/collect_cli.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from clusterside import certify_cli, collect_cli, wait_access
from core import catalog, kinds, rdma_drivers
from verify import cli_args, logread, p2p, readers
from verify.cli_args import EXIT_ERROR, EXIT_FAIL, EXIT_OK
from verify.nccl import ParseError
from verify.result import FabricResult

EXIT_PIPE = 128 + 13  # stdout's reader went away: what a shell reports for a command killed by SIGPIPE
EXIT_CODES = f"""exit codes:
  {EXIT_OK}    a result was read and judged, whatever the verdict (unless --fail-on)
  {EXIT_FAIL}    the verdict tripped --fail-on: fail = FAIL; warn = WARN, UNKNOWN or FAIL
       (--fail-on-low-bandwidth = --fail-on fail)
  {EXIT_ERROR}    no result: unreadable input, no table, bad arguments, an unknown --sku, a missing
       --kubeconfig file or --plot directory, a timeout,
       a Kubernetes API error, no credentials (collect)
  {EXIT_PIPE}  stdout's reader went away before the report was written (e.g. | head); no error printed"""


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
    p.add_argument("--nodes", type=cli_args.positive_int,
                   help="nccl: nodes the run was meant to span" + (" (required)" if collect else
                                                                   " (default: the hosts the log names, else ranks "
                                                                   "/ GPUs per VM of --sku)")
                   + f"; p2p: always {p2p.NODES}, may be omitted")
    p.add_argument("--threshold-gbps", type=cli_args.positive_float,
                   help="nccl only: override the catalog's FAIL threshold, in GB/s (gigaBYTES/s) of bus bandwidth; "
                        "below 35%% of the baseline a run is FAIL whatever the threshold")
    p.add_argument("--threshold-gbits", type=cli_args.positive_float,
                   help="p2p only: override the catalog's FAIL threshold, in Gb/s (gigaBITS/s) of link bandwidth "
                        "at the largest message")
    p.add_argument("--rdma-driver", choices=rdma_drivers.names(), default=None,
                   help=f"GPU sizes: the pool's RDMA driver stack (ibPool.rdmaDriver, default {rdma_drivers.DEFAULT}); "
                        "with inbox a PASS needs NCCL's lines to show GPUDirect over DMA-BUF on every HCA of every "
                        "host (no DMA-BUF: the node kernel, the GPU driver's kernel modules or the image's rdma-core "
                        "is too old)")
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

    collect_cli.add_parser(sub, lambda p: _judging_args(p, collect=True), EXIT_CODES)
    certify_cli.add_parser(sub, lambda p: _judging_args(p, collect=False, plot=False), EXIT_CODES)
    wait_access.add_parser(sub)
    return parser


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


def _report(args: argparse.Namespace) -> int:
    if missing := cli_args.missing_file(args):
        return cli_args.error(missing, args.json)
    try:
        log = _read_log(args.log, args.kind)
    except ParseError as exc:
        return cli_args.error(str(exc), args.json)
    kind = args.kind if args.kind != "auto" else log.kind()
    reader = readers.reader(kind)
    problem = cli_args.problem(args, reader)
    if problem:
        return cli_args.error(f"{args.log}: {problem}" if args.kind == "auto" else problem, args.json)
    try:
        judged = reader.judge(log, cli_args.settings(args, reader))
    except readers.PARSE_ERRORS as exc:
        return cli_args.error(f"{args.log}: {exc}", args.json)
    out = judged.result
    if args.json:
        print(out.dumps())
    else:
        print(judged.text, end="")
        if out.figures is not None and out.figures.plot:
            print(f"plot: {out.figures.plot}")
    return _fail_exit(args, out, args.log + reader.where(args.sku, args.nodes))


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
        return collect_cli.run(args)
    except RuntimeError as exc:  # e.g. --plot without matplotlib
        return cli_args.error(str(exc), as_json)
    except BrokenPipeError:  # stdout's reader went away: run() ends quietly
        raise
    except OSError as exc:  # e.g. the plot path is not writable
        return cli_args.error(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), as_json)


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
