"""The real-control-plane tier's fixtures. Run by `make e2e` (e2e/run.py), inside the control plane's
network namespace with the built tools in $E2E_BIN; run any other way, every test here skips and says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e import cluster


class Planes:
    """One control plane at a time: `fresh(stack)` stops the one running and starts an empty one with the
    nodes of `stack`'s pools and Volcano's processes."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.current = None

    def fresh(self, stack: str, config=None, rendering=None, with_volcano: bool = True, stages=()):
        """`rendering`: the stack's render with `config`, when the caller has it (Volcano's manifest);
        `with_volcano` False: a cluster without Volcano; `stages`: kwok stand-ins of the caller's (cluster.start)."""
        self.current = cluster.start(stack, self.bin, config=config, rendering=rendering, with_volcano=with_volcano,
                                     stages=stages)
        return self.current

    def stop(self) -> None:
        cluster.stop_processes(cluster.STATE)


@pytest.fixture(scope="session")
def planes():
    if not os.environ.get("E2E_BIN") or not cluster.in_netns():
        pytest.skip("the real-control-plane tier runs under `make e2e` (inside its network namespace, with "
                    "the tools built): see docs/real-control-plane.md")
    p = Planes(Path(os.environ["E2E_BIN"]))
    yield p
    p.stop()
