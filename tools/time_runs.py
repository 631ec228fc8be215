"""Time a command over several runs: the figure docs/ci-and-previews.md gives for `make test` (`make time-test`).

One run's time says little on a shared machine whose speed moves by a third within the hour, so this runs
the command N times and prints each run's start, wall and CPU time (the command and all it waited for,
from wait4), then the median and quartiles. With --against DIR it runs the same command in DIR in turn
(A B A B ...) and also prints the median of the pairs' ratios: the way to compare two trees here.

A run that fails is not timed: its output is kept in a file the summary names, and the exit status is 1.
Ctrl-C stops it with the summary of the runs that ended (exit status 130).

    python tools/time_runs.py --runs 10 --budget 30 -- make test
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    side: str  # "A" (here) or "B" (--against)
    wall_s: float
    cpu_s: float
    status: int
    output: Path | None  # the output of a failed run, kept


def run_once(command: list[str], cwd: Path, side: str, keep: Path) -> Run:
    """One run; its output goes to a file, kept only if the run fails."""
    fd, name = tempfile.mkstemp(prefix=f"run-{side}-", suffix=".log", dir=keep)
    start = time.perf_counter()
    with os.fdopen(fd, "w") as log:
        child = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603 (the user's command)
        try:
            _, wait_status, usage = os.wait4(child.pid, 0)
        except KeyboardInterrupt:  # Ctrl-C reached the command too: let it end, then stop without its half a run
            child.wait()
            os.unlink(name)
            raise
    wall = time.perf_counter() - start
    child.returncode = status = os.waitstatus_to_exitcode(wait_status)  # reaped here: Popen must not wait again
    if status == 0:
        os.unlink(name)
    return Run(side, wall, usage.ru_utime + usage.ru_stime, status, None if status == 0 else Path(name))


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median, third quartile (inclusive method: every value is a sample of the population)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summary(runs: list[Run], side: str, budget: float | None) -> str:
    timed = [r for r in runs if r.side == side and r.status == 0]
    failed = [r for r in runs if r.side == side and r.status != 0]
    head = f"{side}: {len(timed)} timed runs"
    if failed:
        head += f", {len(failed)} failed (output kept: {', '.join(str(r.output) for r in failed)})"
    if not timed:
        return head
    walls = sorted(r.wall_s for r in timed)
    q1, median, q3 = quartiles(walls)
    line = (f"{head}: wall median {median:.1f} s (quartiles {q1:.1f}, {q3:.1f}; {walls[0]:.1f}-{walls[-1]:.1f}), "
            f"CPU median {statistics.median(r.cpu_s for r in timed):.1f} s")
    if budget is not None:
        line += f"; {sum(w < budget for w in walls)} of {len(walls)} under {budget:g} s"
    return line


def pair_ratios(runs: list[Run]) -> list[float]:
    """B's wall time over A's, for each A run followed by its B run, both passed."""
    return [b.wall_s / a.wall_s for a, b in zip(runs[::2], runs[1::2], strict=False)
            if a.status == 0 and b.status == 0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs (pairs with --against); default 10")
    parser.add_argument("--budget", type=float, help="also count the runs under this many seconds")
    parser.add_argument("--against", type=Path, help="a second tree: run the command there in turn (A B A B ...)")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()),
                        help="where a failed run's output is kept (default: the temporary directory)")
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs is {args.runs}; expected 1 or more")
    if args.against is not None and not args.against.is_dir():
        parser.error(f"--against is {args.against}; expected a directory (another checkout)")
    if not args.keep.is_dir():
        parser.error(f"--keep is {args.keep}; expected an existing directory")
    sides = [("A", Path.cwd())] + ([("B", args.against)] if args.against else [])
    runs: list[Run] = []
    interrupted = False
    try:
        for i in range(args.runs):
            for side, cwd in sides:
                started = time.strftime("%H:%M:%S")
                run = run_once(args.command, cwd, side, args.keep)
                runs.append(run)
                outcome = "passed" if run.status == 0 else f"FAILED (exit {run.status}, output in {run.output})"
                print(f"{started} {side} run {i + 1}/{args.runs}: {run.wall_s:.2f} s wall, "
                      f"{run.cpu_s:.2f} s CPU, {outcome}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(f"interrupted: the summary of the {len(runs)} runs that ended")
    for side, _ in sides:
        print(summary(runs, side, args.budget))
    if args.against:
        ratios = pair_ratios(runs)
        if ratios:
            print(f"B/A wall, median of {len(ratios)} pairs: {statistics.median(ratios):.2f}")
    if interrupted:
        return 130
    return 1 if any(r.status != 0 for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
