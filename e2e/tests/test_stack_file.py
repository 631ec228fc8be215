"""The offline render reads a stack file as the Pulumi CLI does: held to the CLI's own loaders.

`pulumi-config` (e2e/tools/pulumi) is the Pulumi SDK's workspace code, built from its Go module: it loads
Pulumi.yaml and a stack file, checks the project's declared types and applies its defaults, as
`pulumi preview` and `up` do before the program starts, and prints what the program would be handed.
For each stack file of the corpus (the repository's stacks, the refused files of
tests/stack/validation/test_bad_stack_files.py,
every bad configuration of tests/bad_configs written as a stack file, and scalars and keys that YAML
libraries read differently), the render's reader (stack_config.stackfile, then the program's own check,
stack_config.parse) and the CLI agree: both refuse it, or both accept it and hand the program the same
values. (The CLI cannot run the program here: docs/real-control-plane.md, issue 36.)
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import stack_config
from e2e.cluster import PULUMI_CONFIG, ROOT
from offline import engine
from stack_config import stackfile
from tests import stack_file_cases

# Scalars whose type differs between YAML libraries or YAML versions (1.1's booleans, octals, dates,
# underscores, sexagesimals), numbers Go writes its own way, and explicit tags.
SCALARS = [
    "yes", "No", "on", "OFF", "y", "true", "False", "~", "null", "", "'quoted'", '"2026-01-01"',
    "2026-01-01", "2026-1-1", "2026-01-01T10:00:00Z", "2026-01-01t10:00:00.123456789Z", "2026-01-01T10:00:00",
    "2026-01-01 10:00:00", "2026-01-01 10:00:00.5", "2026-01-01T10:00:00+02:00", "2026-01-01T10:00:00-05:30",
    "2026-02-30", "2026-13-01", "2024-02-29", "20260-01-01", "2026-01-01T25:00:00Z",
    "0", "00", "017", "08", "0o17", "-0o17", "0x1F", "+0x10", "-0x10", "0x", "0b101", "-0b101", "0b", "1_000",
    "1__0", "_1", "+12", "-0", "190:20:30", "1:30", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "99999999999999999999", "1.0", "12.50", "1e3", "1E3", "1e+3", "1e-7", "0.00001",
    "1e6", "1234567.0", "1e21", "1.5e300", "1e400", ".5", "-.5", ".5e3", "1.", "-0.0", ".inf", "-.Inf", ".NaN",
    "!!str 12", "!!int '12'", "!!float 2", "!!bool yes", "!!bool true", "!!int 1.5", "!!null ''", "!!null x",
    "!!timestamp 2026-01-01", "!!binary aGVsbG8=", "!!binary bad!", "!custom text", "[1.0, 2.5, 1e21, off]",
    "{a: 1.0, b: 2026-01-01}",
]
KEYS = ["12", "1.5", "1e6", "true", "~", "2026-01-01", "0x10", "yes"]


def cli(tmp_path: Path, text: str | bytes, stack: str = "probe") -> dict[str, Any]:
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    stack_file.write_bytes(text if isinstance(text, bytes) else text.encode())
    done = subprocess.run([os.environ["E2E_BIN"] + "/" + PULUMI_CONFIG, str(ROOT / "Pulumi.yaml"), str(stack_file),
                           stack], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def ours(text: str | bytes, stack: str = "probe") -> dict[str, Any]:
    """{"error": ...} where the render refuses the file or the program refuses its configuration, else
    {"config": what the render hands the program, "object": the keys it hands as JSON}."""
    try:
        read = stackfile.parse(text.decode() if isinstance(text, bytes) else text, f"Pulumi.{stack}.yaml")
    except (stackfile.StackFileError, UnicodeDecodeError) as e:
        return {"error": str(e)}
    full = {**engine.project_defaults(), **read}
    handed = engine.as_cli_config(full)
    try:
        stack_config.parse(handed, stack)
    except stack_config.ConfigError as e:
        return {"error": "; ".join(e.problems), "config": handed}
    return {"config": handed, "object": {k for k, v in full.items() if isinstance(v, (dict, list))}}


def canonical(value: str, is_object: bool) -> str:
    """JSON text compared by what a program decodes from it (1 and 1.0 differ, key order does not)."""
    return json.dumps(json.loads(value), sort_keys=True) if is_object else value


def agree(tmp_path: Path, text: str | bytes, stack: str = "probe") -> None:
    theirs, mine = cli(tmp_path, text, stack), ours(text, stack)
    if "error" in theirs:
        assert "error" in mine, f"the CLI refuses this file ({theirs['error']}); the render accepts it:\n{text}"
        return
    assert "config" in mine, f"the CLI accepts this file; the render refuses it ({mine['error']}):\n{text}"
    handed = mine["config"]
    assert set(handed) == set(theirs["config"]), text
    for key, value in theirs["config"].items():
        if handed[key] == engine.SECRET:
            continue
        is_object = key in mine.get("object", ()) or handed[key].startswith(("{", "["))
        assert canonical(handed[key], is_object) == canonical(value, is_object), (key, text)


@pytest.fixture(scope="module")
def built():
    if not os.environ.get("E2E_BIN") or not (Path(os.environ["E2E_BIN"]) / PULUMI_CONFIG).is_file():
        pytest.skip(f"{PULUMI_CONFIG} is built by `make e2e-tools` and run by `make e2e`")


def dev_text() -> str:
    return (ROOT / "Pulumi.dev.yaml").read_text()


@pytest.mark.parametrize("path", sorted(ROOT.glob("Pulumi.*.yaml")), ids=lambda p: p.name)
def test_every_stack_of_the_repository_is_read_as_the_cli_reads_it(built, tmp_path, path):
    theirs = cli(tmp_path, path.read_text(), path.name.split(".")[1])
    assert "config" in theirs, theirs
    agree(tmp_path, path.read_text())


@pytest.mark.parametrize("scalar", SCALARS)
def test_a_scalar_reaches_the_program_as_the_cli_hands_it(built, tmp_path, scalar):
    agree(tmp_path, dev_text() + f"  aks-infiniband:clusterName: {scalar}\n")  # a top-level value
    agree(tmp_path, dev_text() + f"  aks-infiniband:fabricTest:\n    allReduceArgs: {scalar}\n")
    agree(tmp_path, dev_text().replace("    owner: platform-team", f"    owner: {scalar}"))  # in an object


@pytest.mark.parametrize("key", KEYS)
def test_a_key_inside_an_object_is_the_text_the_cli_writes(built, tmp_path, key):
    agree(tmp_path, dev_text().replace("    owner: platform-team", f"    {key}: platform-team"))


def test_a_key_without_a_namespace_is_the_projects_key_for_both(built, tmp_path):
    """The CLI namespaces a bare name with the project's (workspace/loaders.go), so it overrides the same
    key written in full; `ns:config:name` is its old spelling of `ns:name`."""
    text = dev_text().replace("aks-infiniband:rdmaMode:", "rdmaMode:").replace("shared", "sriov")
    assert cli(tmp_path, text)["config"]["aks-infiniband:rdmaMode"] == "sriov"
    agree(tmp_path, text)
    agree(tmp_path, text.replace("rdmaMode:", "aks-infiniband:config:rdmaMode:"))
    agree(tmp_path, text + "  5: x\n")  # a number among the keys: the CLI refuses the bare name too


def test_a_key_written_twice_in_two_spellings_is_refused_where_the_cli_picks_one_by_chance(built, tmp_path):
    """The CLI namespaces bare names into a Go map, whose order is random, so which of the two it keeps
    differs from run to run; the render refuses the file instead."""
    text = dev_text() + "  rdmaMode: sriov\n"
    kept = {cli(tmp_path, text)["config"]["aks-infiniband:rdmaMode"] for _ in range(20)}
    assert kept <= {"shared", "sriov"}
    assert "error" in ours(text) and "keep one" in ours(text)["error"]


# Files the render refuses and the CLI does not, on purpose: each would hide a mistake from the user.
STRICTER = {
    "binary-not-text": "the CLI hands over U+FFFD for each byte that is not UTF-8",
    "two-documents": "the CLI reads the first document and drops the rest without a word",
    "null-as-a-key": "the CLI drops a null key and its value without a word",
}


@pytest.mark.parametrize("name", sorted(stack_file_cases.CASES))
def test_a_file_the_render_refuses_the_cli_refuses(built, tmp_path, name):
    text = stack_file_cases.CASES[name][0]
    if name in STRICTER:
        assert "config" in cli(tmp_path, text) and "error" in ours(text), STRICTER[name]
        return
    agree(tmp_path, text if text is not None else
          stack_file_cases.GOOD.encode() + "  aks-infiniband:clusterName: café\n".encode("latin-1"))


def test_every_bad_configuration_written_as_a_stack_file_is_read_as_the_cli_reads_it(built, tmp_path):
    """Where the CLI refuses one (a declared type), the render refuses it too; where it accepts one, both
    hand the program the same values (and the program refuses it: tests/stack/validation/test_bad_input.py)."""
    for path in sorted((ROOT / "tests" / "bad_configs").glob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        stack = case.get("stack", "dev")
        config = engine.stack_file_config(stack if (ROOT / f"Pulumi.{stack}.yaml").exists() else "dev")
        for key, value in (case.get("overrides") or {}).items():
            full = key if ":" in key else f"aks-infiniband:{key}"
            if isinstance(value, dict) and isinstance(config.get(full), dict):
                config[full] = {**config[full], **value}
            elif value is None:
                config.pop(full, None)
            else:
                config[full] = value
        agree(tmp_path, yaml.safe_dump({"config": config}), stack)
