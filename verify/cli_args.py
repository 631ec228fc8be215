"""The command line's shared rules, apart from what each subcommand does: the gate (`--fail-on`,
`--fail-on-low-bandwidth`) and the files the user names, checked before any work.

- `--fail-on fail|warn` exits 1 when the verdict trips the gate (verify/gate.py: `fail` = FAIL only,
  `warn` = anything but PASS). `--fail-on-low-bandwidth` is `--fail-on fail`, kept for the command
  lines that use it (the stack's collect step among them); `--fail-on` wins when both are given.
- Files: a kubeconfig or the plot's directory that does not exist is an error naming it
  (exit 2), before a collector waits up to an hour. No directory is created that the user did not
  ask for: `--plot out/busbw.png` needs `out/` to exist.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from verify import gate


def add_gate_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--fail-on", choices=tuple(gate.LEVELS), default=None,
                   help="exit 1 when the verdict trips this gate: fail (FAIL only) or warn (anything but PASS: "
                        f"WARN, UNKNOWN, FAIL); {what}")
    p.add_argument("--fail-on-low-bandwidth", action="store_true",
                   help="the same as --fail-on fail (kept for existing command lines)")


def gate_level(args: argparse.Namespace) -> str | None:
    """The gate's level asked for on the command line, or None (exit 0 whatever the verdict)."""
    if args.fail_on:
        return args.fail_on
    return gate.DEFAULT_LEVEL if args.fail_on_low_bandwidth else None


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
