"""Every resource's identity in each example stack: its URN (stack, project, the parents' type chain, its
type token and name) and its parent's URN. Pulumi matches the state to the program by URN, so a line
that moves here is a replace (or an orphan) on every deployed stack: refactors keep this file unchanged
(tests/stack/test_urns.py), and a change that means to move one says why in its commit.

`python -m offline urns --out tests/golden/urns` writes one file per stack (`make golden` runs it)."""

from __future__ import annotations

from pathlib import Path

from offline import engine


def identity_lines(rendering: engine.Rendering) -> list[str]:
    """One line per resource, sorted: `<urn>` or `<urn> <- <parent urn>`."""
    return sorted(f"{r.urn} <- {r.parent}" if r.parent else r.urn for r in rendering.resources)


def identity_text(rendering: engine.Rendering) -> str:
    return "\n".join(identity_lines(rendering)) + "\n"


def golden_path(out_dir: Path, stack: str) -> Path:
    return out_dir / f"{stack}.txt"
