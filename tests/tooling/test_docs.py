"""The README is a short guide and docs/ holds the rest: the README stays under 15 KB with a table of
contents and points at docs/README.md, an index whose three tracks (user, operator, developer) link
every page of docs/ once; every link in them leads somewhere (file and heading, as GitHub makes
anchors). Commands the docs name exist: every `make X` is a target, every `python -m X` a module."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

from tests.paths import ROOT

README = ROOT / "README.md"
INDEX = ROOT / "docs" / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"^(#{1,6}) (.+)$", line)
        if m:
            base = _anchor(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_readme_is_a_short_guide_with_contents():
    text = README.read_text()
    assert len(text.encode()) < 15_000, f"README.md is {len(text.encode())} bytes; move detail to docs/"
    contents = next(line for line in text.splitlines() if line.startswith("**Contents:**"))
    sections = {_anchor(h) for h in re.findall(r"^## (.+)$", FENCE.sub("", text), re.M)}
    linked = set(re.findall(r"\(#([^)]+)\)", contents + text[text.index(contents):].split("\n\n")[0]))
    assert sections <= linked, f"sections missing from the contents: {sections - linked}"


def test_the_readme_points_at_the_docs_index():
    linked = {m.split("#")[0] for m in LINK.findall(README.read_text())}
    assert "docs/README.md" in linked


def test_every_page_of_docs_sits_in_exactly_one_track_of_the_index():
    """docs/README.md has three tracks (user, operator, developer); each page of docs/ is linked from
    exactly one of them, so a reader knows where to start and a new page has one home. Dead links in
    the index are caught by test_every_link_leads_somewhere, which reads docs/README.md too."""
    text = FENCE.sub("", INDEX.read_text())
    tracks = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(tracks) == 3, f"docs/README.md has {len(tracks)} tracks; want user, operator, developer"
    homes: dict[str, list[str]] = {}
    for track in tracks:
        title = track.splitlines()[0]
        for target in {m.split("#")[0] for m in LINK.findall(track)}:
            if not re.match(r"^[a-z]+:", target) and target.endswith(".md"):
                homes.setdefault(target, []).append(title)
    pages = {p.name for p in DOCS if p != INDEX}
    missing = sorted(pages - homes.keys())
    twice = {page: where for page, where in homes.items() if page in pages and len(where) > 1}
    assert not missing, f"pages in no track of docs/README.md: {missing}"
    assert not twice, f"pages in more than one track: {twice}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_leads_somewhere(page: Path):
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, "\n".join(broken)


def test_the_commands_the_docs_name_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    text = "\n".join(p.read_text() for p in PAGES)
    named = set(re.findall(r"`make ([a-z][a-z-]+)", text)) | set(re.findall(r"^make ([a-z][a-z-]+)", text, re.M))
    assert named and named <= targets, f"not Makefile targets: {named - targets}"
    modules = set(re.findall(r"python3? -m ([a-z_][a-z_.]*)", text))
    assert {"offline", "verify", "offline.reference"} <= modules
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    assert not missing, f"named in the docs but not modules: {missing}"


# A Python file of this checkout named in prose: a package, the scripts, the tests or e2e's tests. An
# upstream file is named after its repository and commit ("Azure/azhpc-images@8e9d055 components/..."):
# the lookbehind leaves those out.
OWN_PY = re.compile(r"(?<![\w/.@-])(?<!@[0-9a-f]{7} )((?:core|verify|clusterside|labeler|stack_config|components|stack|"
                    r"offline|policy|scripts|tests|e2e|tools)/[\w/]*\w\.py)\b")


def test_the_python_files_the_docs_name_exist():
    """Tests and modules move (tests/ became folders by tier and package); a page that names the old
    path sends a reader nowhere, and no link checks it."""
    missing = sorted({f"{p.relative_to(ROOT)}: {m}" for p in PAGES for m in OWN_PY.findall(p.read_text())
                      if not (ROOT / m).exists()})
    assert not missing, "named in the docs but not in the checkout:\n" + "\n".join(missing)
    assert OWN_PY.findall("`tests/tooling/test_docs.py` and Azure/x@8e9d055 components/y.py") == [
        "tests/tooling/test_docs.py"]


def test_the_anchor_rule_matches_githubs_on_the_headings_used_here():
    assert _anchor("CPU-only HPC sizes (HB / HX)") == "cpu-only-hpc-sizes-hb--hx"
    assert _anchor("`python -m verify`: reading a result") == "python--m-verify-reading-a-result"
    assert _anchor("Read access (RBAC) that `collect` needs") == "read-access-rbac-that-collect-needs"


def test_no_page_names_a_path_of_one_workstation():
    """A reader's checkout is not the writer's: the reference material is `../shared/reference` or
    $AKS_IB_REFERENCE (offline/reference.py), never an absolute path of one machine."""
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = {p.name: m for p in pages if (m := re.findall(r"(?<![\w.])/(?:work|home|Users|root|mnt)/[\w./-]+",
                                                            p.read_text()))}
    assert not found, found
