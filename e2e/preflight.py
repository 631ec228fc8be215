"""What stops a control plane from starting in this checkout, said in one line before any build
(`make cluster-up`, `make e2e`): not root, no Go, or a network namespace of that name that this checkout's
state did not record (another checkout's running control plane, or a stale one), or one already running."""

from __future__ import annotations

import os
import shutil

from e2e.cluster import NETNS, NETNS_RECORD, STATE, netns_exists, pid_alive, read_pid, recorded_netns


def problem() -> str | None:
    """What stops a control plane from starting here, in one line (before any build), or None."""
    lacking = []
    if os.geteuid() != 0:
        lacking.append("root (ip netns needs it)")
    if not shutil.which("go"):
        lacking.append("Go on PATH (the tools are built from Go modules)")
    if netns_exists() and not recorded_netns():
        lacking.append(f"the network namespace {NETNS} is not this checkout's (no {NETNS_RECORD}): another's, or "
                       f"stale; set E2E_NETNS to another name, or `ip netns del {NETNS}` if nothing runs in it")
    elif any(read_pid(p) and pid_alive(read_pid(p)) for p in (STATE / "pids").glob("*.pid")):
        lacking.append(f"this checkout's control plane is already running in {NETNS}: make cluster-down first")
    return "; ".join(lacking) or None
