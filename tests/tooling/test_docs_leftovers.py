"""No internal leftovers in what a user reads: the docs, the stack files, and the product's code (its
strings are what reports, plan.md and errors print; its comments are read too). An issue number of
this project's own tracker ("issue 13"), a research question's label ("Q7"), a note about how the
notes were made ("research notes, compiled ~40 min") or which search index a fact came from mean
nothing to a reader. Upstream references keep their form (owner/repo#123), which these never match."""

from __future__ import annotations

import re
from pathlib import Path

from tests.paths import ROOT

LEFTOVERS = re.compile(
    r"\b[Ii]ssues? \d+\b"  # this project's issues (upstream ones are cited as owner/repo#N)
    r"|\bQ\d+\b"  # research question labels
    r"|research notes|compiled ~"
    r"|\b(?:issues|code|pages|docs) corpus\b"  # the search index a fact was found through
)
PRODUCT_DIRS = ("components", "stack", "stack_config", "verify", "clusterside", "labeler", "offline", "policy",
                "scripts")


def _read_by_a_user() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("Pulumi*.yaml")),
             *sorted(ROOT.glob("*.py"))]
    for folder in PRODUCT_DIRS:
        files += [p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in (".py", ".sh", ".md", ".yaml")
                  and "venv" not in p.parts and "__pycache__" not in p.parts]
    return files


def test_no_issue_numbers_or_internal_notes_in_what_a_user_reads():
    found = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}"
             for p in _read_by_a_user() for n, line in enumerate(p.read_text().splitlines(), start=1)
             for m in LEFTOVERS.finditer(line)]
    assert not found, "\n".join(found)


def test_the_pattern_catches_the_leftovers_and_spares_upstream_references():
    caught = ["issue 13 reads it as untuned", "docs/sku-sources.md Q7", "(research notes, compiled ~40 min)",
              "(issues corpus)", "Issue 10: record"]
    spared = ["pulumi/pulumi-azure-native#1722", "issue #142", "NVIDIA/aicr#1699", "the round 0 pairs", "Q&A"]
    assert all(LEFTOVERS.search(text) for text in caught)
    assert not any(LEFTOVERS.search(text) for text in spared)
