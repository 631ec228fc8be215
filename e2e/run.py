"""`python -m e2e.run [--budget SECONDS] [pytest args]`: the real-control-plane tier (`make e2e`).

Builds the pinned programs (or finds them in the cache), makes the control plane's network namespace,
and runs the tests of e2e/tests inside it; each test module starts the fresh control plane it needs
(e2e/tests/conftest.py). The namespace is removed afterwards, whatever the outcome. Where the tools
cannot be had (no Go, no root, or a build budget spent), it says which tier is skipped and why, and
exits 0 only then: a tier that could run and failed exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from e2e import cluster, preflight


def skipped(why: str) -> int:
    print(f"e2e: SKIPPED the real-control-plane tier: {why}", flush=True)
    return 0


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
        return subprocess.run([*cluster.prefix(), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-o", "testpaths=e2e/tests", "e2e/tests", *pytest_args], env=env,
                              cwd=cluster.ROOT).returncode
    finally:
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
