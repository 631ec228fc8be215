"""Stack files a user can write that are not a configuration at all: bad YAML, a tab, a key given
twice, `config:` as a list. `python -m offline synth` says so in one line naming the file, the line and
the column, exits 2, writes nothing and prints no traceback. The same for a Kubernetes version that a
pinned chart refuses inside Helm: one line naming the key.

The cases (tests/stack_file_cases.py) are (file text, where the message points, text it must hold)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import dev_config

from offline import __main__ as offline_cli
from offline import charts, engine
from stack_config import stackfile
from tests.stack_file_cases import CASES, GOOD


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
    a date, booleans and bytes, and the render ended in `TypeError ... not JSON serializable`. The CLI's
    yaml.v3 keeps `yes` and `off` strings and hands a date over as Go's time.Time writes it (the values
    here are what the CLI's own loaders printed: e2e/tests/test_stack_file.py checks them there)."""
    tags = ("  aks-infiniband:tags:\n    created: 2026-01-01\n    reviewed: 2026-01-01T10:00:00Z\n"
            "    approved: yes\n    note: !!binary aGVsbG8=\n  aks-infiniband:certifier:\n    schedule: off\n")
    config = stackfile.parse(GOOD + tags, "Pulumi.x.yaml")
    assert config["aks-infiniband:tags"] == {"created": "2026-01-01 00:00:00 +0000 UTC",
                                             "reviewed": "2026-01-01 10:00:00 +0000 UTC",
                                             "approved": "yes", "note": "hello"}
    assert config["aks-infiniband:certifier"] == {"schedule": "off"}
    assert stackfile.parse("config:\n  a:b: true\n  a:c: False\n", "x") == {"a:b": True, "a:c": False}
    rendering = engine.render("dev", config={**engine.stack_file_config("dev"), **config})
    cluster = rendering.one("azure-native:containerservice:ManagedCluster").inputs
    assert cluster["tags"]["created"] == "2026-01-01 00:00:00 +0000 UTC" and cluster["tags"]["approved"] == "yes"


def test_numbers_reach_the_program_as_the_cli_writes_them():
    """yaml.v3 reads 0x10, 017 and 1_000 as integers, 1e3 as a float; Go writes a float with no fraction
    without one. So `featureWaitTimeoutMinutes: 30.0` is "30" to the program, as on the CLI."""
    config = stackfile.parse("config:\n  a:hex: 0x10\n  a:octal: 017\n  a:float: 30.0\n  a:exp: 1e3\n"
                             "  a:obj: {n: 1.0, m: 2.5, k: 1_000, 1.5: x, ~: y}\n  a:null: ~\n", "x")
    assert engine.as_cli_config(config) == {"a:hex": "16", "a:octal": "15", "a:float": "30", "a:exp": "1000",
                                            "a:obj": '{"1.5":"x","<nil>":"y","k":1000,"m":2.5,"n":1}',
                                            "a:null": ""}


@pytest.mark.parametrize(("text", "what"), [
    ("config:\n  a:b:c: x\n", ":2:3: the key 'a:b:c' is not <namespace>:<name>"),
    ("config:\n  aks-infiniband:tags: {x: .inf}\n", ":2:28: `.inf` is not a number JSON can hold"),
    ("config:\n  aks-infiniband:protect: !!bool yes\n", ":2:27: cannot decode !!str `yes` as a !!bool"),
])
def test_what_the_cli_refuses_the_reader_refuses_naming_the_place(text, what):
    with pytest.raises(stackfile.StackFileError) as refused:
        stackfile.parse(text, "Pulumi.x.yaml")
    assert str(refused.value).startswith("Pulumi.x.yaml" + what.split(" ", 1)[0]), refused.value
    assert what.split(" ", 1)[1] in str(refused.value)


def test_a_bare_name_is_the_projects_key_and_the_old_spelling_is_the_key():
    """As the CLI reads them (workspace/loaders.go namespaces a bare name with the project's)."""
    assert stackfile.parse("config:\n  rdmaMode: sriov\n  aks-infiniband:config:protect: true\n", "x") == {
        "aks-infiniband:rdmaMode": "sriov", "aks-infiniband:protect": True}


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
