"""Stack files a user can write that are not a configuration at all: bad YAML, a tab, a key given
twice, `config:` as a list. `python -m offline synth` says so in one line naming the file, the line and
the column, exits 2, writes nothing and prints no traceback. The same for a Kubernetes version that a
pinned chart refuses inside Helm: one line naming the key.

The cases are (file text, where the message points, text it must hold)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import dev_config

from offline import __main__ as offline_cli
from offline import charts, engine
from stack_config import stackfile

GOOD = "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool:\n    vmSize: Standard_ND96isr_H100_v5\n" \
       "    nodeCount: 2\n"
CASES = {
    "syntax-unclosed-flow-mapping": (
        "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool: {vmSize: Standard_ND96isr_H100_v5\n",
        ":4:1:", "begun at line 3, column 26"),
    "tab-indentation": (
        "config:\n  azure-native:location: eastus\n  aks-infiniband:ibPool:\n\tvmSize: Standard_ND96isr_H100_v5\n",
        ":4:1:", "a tab in the indentation"),
    "config-as-a-list": ("config:\n  - azure-native:location: eastus\n", ":1:1:", "config: got a list"),
    "file-is-a-list": ("- config\n", ":1:1:", "the file holds a list"),
    "duplicate-top-level-key": (GOOD + "  azure-native:location: westus\n", ":6:3:",
                                "'azure-native:location' is given twice (first on line 2)"),
    "duplicate-nested-key": (GOOD + "    nodeCount: 4\n", ":6:5:", "'nodeCount' is given twice (first on line 5)"),
    "number-as-a-key": (GOOD + "  5: x\n", ":6:3:", "the key 5 is a number; a config key is a namespace and a name"),
    "null-as-a-key": (GOOD + "  ~: x\n", ":6:3:", "the key None is a null"),
    "not-utf8": (None, ":", "not UTF-8 text"),
    "two-documents": (GOOD + "---\nconfig: {}\n", ":6:1:", "expected a single document"),
    "binary-not-text": (GOOD + "  aks-infiniband:clusterName: !!binary //79\n", ":6:31:", "!!binary value that is not"),
    "bad-indentation": ("config:\n  azure-native:location: eastus\n   aks-infiniband:rdmaMode: shared\n", ":3:",
                        "a line indented deeper than the one before it"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_stack_file_that_is_not_a_configuration_is_one_line_with_file_line_and_column(
        name, tmp_path: Path, monkeypatch, capsys):
    text, where, what = CASES[name]
    stack_file = tmp_path / "Pulumi.bad.yaml"
    if text is None:  # Latin-1, as an editor on another system may save it
        stack_file.write_bytes(GOOD.encode() + "  aks-infiniband:clusterName: café\n".encode("latin-1"))
    else:
        stack_file.write_text(text)
    monkeypatch.setattr(engine, "ROOT", tmp_path)
    out = tmp_path / "build"

    code = offline_cli.main(["synth", "--stack", "bad", "--out", str(out), "--no-charts"])

    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: Pulumi.bad.yaml" + where), lines[0]
    assert what in lines[0] and "Traceback" not in err
    assert not out.exists(), "nothing may be written for a stack file that was refused"


def test_scalars_are_typed_as_the_clis_yaml_library_types_them():
    """An unquoted date in a tag, `yes`, `off`, a timestamp, a !!binary string: PyYAML's YAML 1.1 made them
    a date, booleans and bytes, and the render ended in `TypeError ... not JSON serializable`. yaml.v3 (the
    CLI's) keeps them strings; so does the reader, and the stack renders."""
    tags = ("  aks-infiniband:tags:\n    created: 2026-01-01\n    reviewed: 2026-01-01T10:00:00Z\n"
            "    approved: yes\n    note: !!binary aGVsbG8=\n  aks-infiniband:certifier:\n    schedule: off\n")
    config = stackfile.parse(GOOD + tags, "Pulumi.x.yaml")
    assert config["aks-infiniband:tags"] == {"created": "2026-01-01", "reviewed": "2026-01-01T10:00:00Z",
                                             "approved": "yes", "note": "hello"}
    assert config["aks-infiniband:certifier"] == {"schedule": "off"}
    assert stackfile.parse("config:\n  a:b: true\n  a:c: False\n", "x") == {"a:b": True, "a:c": False}
    rendering = engine.render("dev", config={**engine.stack_file_config("dev"), **config})
    cluster = rendering.one("azure-native:containerservice:ManagedCluster").inputs
    assert cluster["tags"]["created"] == "2026-01-01" and cluster["tags"]["approved"] == "yes"


def test_the_reader_returns_the_config_of_a_good_file():
    """Control: the strict reader reads what PyYAML reads when nothing is wrong."""
    assert stackfile.parse(GOOD, "Pulumi.x.yaml") == {
        "azure-native:location": "eastus",
        "aks-infiniband:ibPool": {"vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2}}
    assert stackfile.parse("", "Pulumi.x.yaml") == {} and stackfile.parse("config:\n", "Pulumi.x.yaml") == {}


def test_every_stack_file_in_the_repository_passes_the_strict_reader():
    for path in sorted(engine.ROOT.glob("Pulumi.*.yaml")):
        assert isinstance(stackfile.read(path), dict), path.name


def test_a_kubernetes_version_a_chart_refuses_is_one_line_naming_the_key(helm, reference, monkeypatch, tmp_path,
                                                                         capsys):
    """1.20 passes the version's shape check (and, allowed as untested, the matrix); the pinned network-operator chart
    (>= 1.32) refuses it. (Which versions the stack supports is the compatibility matrix's to say.)"""
    if not charts.charts_dir().is_dir():
        pytest.skip(f"chart archives not found at {charts.charts_dir()}")
    config = dev_config(kubernetesVersion="1.20", allowUntestedVersions=True)  # past the matrix, to Helm
    monkeypatch.setattr(engine, "stack_file_config", lambda stack, root=None: config)
    out = tmp_path / "build"

    code = offline_cli.main(["synth", "--stack", "dev", "--out", str(out), "--no-images"])

    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: aks-infiniband:kubernetesVersion: got '1.20'; a pinned chart requires "
                               "Kubernetes >= 1.32"), lines[0]
    assert "Traceback" not in err and not out.exists()
