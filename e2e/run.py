"""`python -m e2e.run [--budget SECONDS] [pytest args]`: the real-control-plane tier (`make e2e`).

Builds the pinned programs (or finds them in the cache), makes the control plane's network namespace,
and runs the tests of e2e/tests inside it (or the test files and node ids given, with pytest's own
options); each test module starts the fresh control plane it needs (e2e/tests/conftest.py). The namespace
is removed afterwards, whatever the outcome. Where the tools cannot be had (no Go, no root, or a build
budget spent), it says which tier is skipped and why, and exits 0 only then: a tier that could run and
failed exits non-zero. Under CI ($CI set) it never skips: a tier that cannot run fails the run (exit 1),
with the reason.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from e2e import cluster, preflight

TESTS = "e2e/tests"
# pytest's options whose value is the next argument (so not a path to run): `-k volcano`, `-m slow`, ...
VALUED = frozenset({"-k", "-m", "-p", "-o", "-c", "-W", "--deselect", "--ignore", "--ignore-glob", "--rootdir",
                    "--maxfail", "--tb", "--junitxml", "--basetemp", "--durations", "--confcutdir", "--log-level"})


def skipped(why: str) -> int:
    if os.environ.get("CI"):  # set by GitHub Actions (as the Makefile reads it): CI never skips a tier (issue 49)
        print(f"e2e: FAILED: the real-control-plane tier cannot run under CI: {why}", flush=True)
        return 1
    print(f"e2e: SKIPPED the real-control-plane tier: {why}", flush=True)
    return 0


def pytest_argv(args: list[str]) -> list[str]:
    """pytest's arguments: `args`, and e2e/tests when none of them names what to run (a file, a folder or a
    node id `file::test`), so that a file given narrows the run instead of adding to the whole tier."""
    paths = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in VALUED)
             and (cluster.ROOT / a.split("::")[0]).exists()]
    return ["-q", "-p", "no:cacheprovider", "-o", f"testpaths={TESTS}", *([] if paths else [TESTS]), *args]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.run")
    p.add_argument("--budget", type=int, default=0, help="seconds the tool build may take (0: no limit)")
    args, pytest_args = p.parse_known_args(argv)
    if os.geteuid() != 0:
        return skipped("it needs root for its network namespace (ip netns)")
    if not shutil.which("go"):
        return skipped("Go is not installed: the control plane is built from Go modules")
    problem = preflight.problem()
    if problem:  # a namespace of another checkout (or run): not used, not removed
        print(f"e2e: cannot run: {problem}", flush=True)
        return 1
    try:
        bin_dir = cluster.tools(args.budget)
    except subprocess.CalledProcessError as exc:
        print(f"e2e: the tool build failed (exit {exc.returncode}); its output is above", flush=True)
        return 1
    lacking = cluster.missing_tools(bin_dir)
    if lacking:
        return skipped(f"{', '.join(lacking)} not built within the build budget of {args.budget}s "
                       "(E2E_BUILD_BUDGET); a later run continues from the cache")
    cluster.netns_up()
    env = {**os.environ, "E2E_BIN": str(bin_dir), "PYTHONDONTWRITEBYTECODE": ""}
    try:
        return subprocess.run([*cluster.prefix(), sys.executable, "-m", "pytest", *pytest_argv(pytest_args)],
                              env=env, cwd=cluster.ROOT).returncode
    finally:
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
