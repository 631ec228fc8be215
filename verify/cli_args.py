"""The command line's shared rules, apart from what each subcommand does (`report` in verify/__main__.py,
`collect` and `certify` in clusterside/): the gate (`--fail-on`, `--fail-on-low-bandwidth`), the flags
that do not apply to a kind, the files the user names, checked before any work, and the one-line error.

- `--fail-on fail|warn` exits 1 when the verdict trips the gate (verify/gate.py: `fail` = FAIL only,
  `warn` = anything but PASS). `--fail-on-low-bandwidth` is `--fail-on fail`, kept for the command
  lines that use it (the stack's collect step among them); `--fail-on` wins when both are given.
- Numbers: counts and durations are positive; each kind's reader says what its flags may be.
- Files: a kubeconfig or the plot's directory that does not exist is an error naming it
  (exit 2), before a collector waits up to an hour. No directory is created that the user did not
  ask for: `--plot out/busbw.png` needs `out/` to exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core import catalog, choices, kinds, rdma_drivers
from verify import gate, readers
from verify.result import FabricResult

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def add_gate_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--fail-on", choices=tuple(choices.GATE_LEVELS), default=None,
                   help="exit 1 when the verdict trips this gate: fail (FAIL only) or warn (anything but PASS: "
                        f"WARN, UNKNOWN, FAIL); {what}")
    p.add_argument("--fail-on-low-bandwidth", action="store_true",
                   help="the same as --fail-on fail (kept for existing command lines)")


def gate_level(args: argparse.Namespace) -> str | None:
    """The gate's level asked for on the command line, or None (exit 0 whatever the verdict)."""
    if args.fail_on:
        return args.fail_on
    return choices.DEFAULT_GATE_LEVEL if args.fail_on_low_bandwidth else None


def tripped(args: argparse.Namespace, verdict: str | None) -> bool:
    return gate.trips(verdict, gate_level(args))


def missing_file(args: argparse.Namespace) -> str | None:
    """The first file the command line names that is not there, as an error message (None: all there).
    `report`'s log is read at once and its error names it (`cannot read LOG: ...`)."""
    kubeconfig = getattr(args, "kubeconfig", None)
    if kubeconfig and not Path(kubeconfig).is_file():
        return f"--kubeconfig {kubeconfig}: " + ("not a file" if Path(kubeconfig).exists() else "no such file")
    if args.plot:
        parent = Path(args.plot).parent
        if not parent.is_dir():
            return f"--plot {args.plot}: the directory {parent} does not exist (create it first)"
    return None


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def problem(args: argparse.Namespace, reader: readers.Reader) -> str | None:
    """The flags that do not apply to the reader's kind, as an error message (None: all good)."""
    if getattr(args, "sharp", False) and not reader.measures_sharp:
        return "--sharp applies to the NCCL all-reduce (--kind nccl) only"
    if getattr(args, "rack", False) and (not reader.record.rack_run or not catalog.lookup(args.sku).has_mnnvl):
        return f"--rack applies to the NCCL all-reduce of a multi-node-NVLink size (GB200, GB300), not {args.sku}"
    if args.sku and (runs := kinds.kind_for(catalog.lookup(args.sku))).name != reader.kind:
        gpus = "has GPUs" if catalog.lookup(args.sku).has_gpus else "has no GPUs"
        return (f"--sku {args.sku} {gpus} and runs the {runs.name} test, but this is a {reader.kind} log: judge it "
                f"with a size that runs {reader.kind}, or give the {runs.name} log (--kind {runs.name})")
    return reader.problem(args)


def error(message: str, as_json: bool = False) -> int:
    print(f"error: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps(FabricResult.failure(message).to_json()))  # one line, as it always was
    return EXIT_ERROR


def settings(args: argparse.Namespace, reader: readers.Reader, job_failed: str | None = None) -> readers.Settings:
    return readers.Settings(sku=args.sku, nodes=args.nodes, threshold=reader.threshold(args), plot=args.plot,
                            job_failed=job_failed, rack=getattr(args, "rack", False),
                            rdma_driver=getattr(args, "rdma_driver", None) or rdma_drivers.DEFAULT)
