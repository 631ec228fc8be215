"""Every generated copy of a fact is in step with its source, and one generator writes them all:
`python -m offline docs` (offline/docblocks.py), which `make golden` runs. The pictures and samples are
checked against a render in tests/stack/test_synth.py; the tables and files here, from the code alone."""

from __future__ import annotations

import re
import shutil

import pytest

from offline import docblocks
from tests.paths import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()


@pytest.mark.parametrize("name", docblocks.tables())
def test_each_generated_table_is_shown_once_and_in_step(name):
    content = docblocks.tables()[name]
    shown = [p for p in docblocks.documents(ROOT) if name in docblocks.names(p.read_text())]
    assert len(shown) == 1, f"{name} is shown in {shown}"
    text = shown[0].read_text()
    assert docblocks.embedded(text, {name: content}) == text, f"{shown[0].name}: {name} is stale: run `make golden`"


def test_each_generated_file_is_in_step():
    assert docblocks.stale_files(ROOT) == [], "run `make golden`"


def test_a_stale_copy_is_seen_and_the_generator_rewrites_it(tmp_path):
    """Not vacuous: a table or file edited by hand differs from what the generator writes, and the
    generator's sync puts every copy back."""
    for path in [*docblocks.documents(ROOT), *(ROOT / n for n in docblocks.files())]:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    matrix = tmp_path / "docs" / "upgrading-pins.md"
    matrix.write_text(matrix.read_text().replace("| 1.35 |", "| 1.99 |", 1))
    (tmp_path / "Pulumi.yaml").write_text((tmp_path / "Pulumi.yaml").read_text() + "# by hand\n")
    assert docblocks.stale_files(tmp_path) == ["Pulumi.yaml"]
    assert docblocks.embedded(matrix.read_text(), docblocks.tables()) != matrix.read_text()
    changed = docblocks.sync_files(tmp_path) + docblocks.sync(docblocks.tables(), tmp_path)
    assert changed == [tmp_path / "Pulumi.yaml", matrix]
    assert matrix.read_text() == (ROOT / "docs" / "upgrading-pins.md").read_text()
    assert docblocks.stale_files(tmp_path) == []


def test_one_generator_run_by_make_golden():
    """`make golden` runs `python -m offline docs` and rewrites the published result schema (its test,
    tests/unit/verify/test_fabric_result.py, fails when the file is stale); no other target or module
    writes a generated copy."""
    golden = re.search(r"^golden:.*\n((?:\t.*\n)+)", MAKEFILE, re.M)
    assert golden and "python -m offline docs" in golden.group(1)
    assert "python -m verify.result_schema > verify/schema/fabric-result.v1.json" in golden.group(1)
    assert "sync-config" not in MAKEFILE
    writers = [p.relative_to(ROOT).as_posix() for package in ("components", "core", "stack_config", "verify")
               for p in sorted((ROOT / package).rglob("*.py"))
               if re.search(r"\.write_text\(", p.read_text()) and re.search(r"TABLE_START|Pulumi\.yaml", p.read_text())]
    assert writers == []


# --- copies written by hand: the prose that names a pin or a default names the current one --------------
DOCS = docblocks.documents(ROOT)


def test_a_doc_that_names_a_pin_by_its_key_names_the_current_pin():
    """`value` (`key`): e.g. docs/kubernetes-layer.md's table, `26.7.0` (`networkOperator`). A bump that
    leaves such a copy behind fails here (the pins' generated copies are checked above)."""
    from core import pins

    found = []
    for path in DOCS:
        for m in re.finditer(r"`([^`\s]+)` \(`([A-Za-z]+)`", path.read_text()):
            if m[2] in pins.BY_KEY:
                found.append((path.name, m[2], m[1], pins.component(m[2]).version))
    assert {key for _, key, _, _ in found} >= {"networkOperator", "docaDriver", "gpuOperator", "volcano"}
    assert [f for f in found if f[2] != f[3]] == []


def _schema_default(dotted: str):
    import stack_config

    key, *field = dotted.split(".")
    k = stack_config.SCHEMA_BY_NAME.get(key)
    for name in field:
        k = next((f for f in k.fields if f.name == name), None) if k else None
    return k


def test_a_doc_that_states_a_keys_default_states_the_schemas():
    """"`certifier.schedule`, default `17 */6 * * *`", "`fabricTest.doctorMinutes` (default 15": the default
    the prose repeats is the one stack_config.SCHEMA (and so core/defaults.py) sets."""
    import json

    seen = []
    for path in DOCS:
        for m in re.finditer(r"`([a-zA-Z]+(?:\.[a-zA-Z]+)+)`,? \(?default `?([^`),;]+)`?", path.read_text()):
            key = _schema_default(m[1])
            if key is None or key.default is None:
                continue
            seen.append(m[1])
            shown = m[2].strip()
            wanted = key.default if isinstance(key.default, str) else json.dumps(key.default)
            assert shown == wanted, f"{path.name}: {m[1]} says default {shown!r}; the schema's is {wanted!r}"
    assert {"certifier.schedule", "fabricTest.doctorMinutes"} <= set(seen)
