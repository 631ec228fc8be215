"""What a pin looks like (core/pins.py): one predicate per kind, and every layer calls the same one."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import dev_config

import stack_config
from components.platform.gpu_operator import GpuOperatorArgs
from components.platform.node_feature_discovery import NodeFeatureDiscoveryArgs
from components.platform.volcano import VolcanoArgs
from core import pins
from offline import engine
from offline.engine import ROOT

CASES = {
    pins.VOLCANO_TAG: (["v1.14.0", "v1.9.0", "v10.0.12", "v1.16.0@sha256:" + "a" * 64],
                       ["1.14.0", "v1.14", "v1.14.0-rc.1", "V1.14.0", "v1.14.0 ", "master", "latest", "", "v١.14.0"]),
    pins.CHART_VERSION: (["26.4.1", "v26.1.2", "0.18.2", "1.2.3-rc.1", "1.2.3+build.5"],
                         ["26.4", "1", "26.4.1.1", "latest", "master", "", "~26.4.1", ">=1.0.0", "26.4.1 ",
                          "vv1.2.3", "٢6.4.1"]),
    pins.IMAGE_TAG: (["network-operator-v26.4.1", "v1.5.3", "1.0", "_x"],
                     ["latest", "LATEST", "", "v1.5 beta", "-x", "a" * 129, "tag/x", "ü1"]),
    pins.DOCA_TAG: (["doca3.4.1-26.04-1.1.0.0-1", "24.07-0.6.1.0-0"],
                    ["doca3.4.1-26.04-1.1.0.0-1-ubuntu24.04-amd64", "doca3.4.1", "latest", "", "26.04",
                     "v24.07-0.6.1.0-0"]),
    pins.IMAGE_REF: (["ghcr.io/coreweave/nccl-tests:12.9.1-devel", "registry.example:5000/x/y:1.0",
                      "nccl-tests:1.0", "ghcr.io/x/y@sha256:" + "0" * 64, "ghcr.io/x/y:1.0@sha256:" + "a" * 64],
                     ["ghcr.io/x/y", "ghcr.io/x/y:latest", "registry.example:5000/x", "", " ghcr.io/x/y:1.0",
                      "ghcr.io/X/y:1.0", "ghcr.io/x/ü:1.0", "ghcr.io/x/y@sha256:abc", "ghcr.io/x/y:1.0 "]),
}


@pytest.mark.parametrize("pin", list(CASES), ids=lambda p: p.kind)
def test_each_kind_of_pin_accepts_releases_and_refuses_near_misses(pin):
    good, bad = CASES[pin]
    assert [v for v in good if not pin.ok(v)] == []
    assert [v for v in bad if pin.ok(v)] == []
    assert not pin.ok(None) and not pin.ok(1) and pin.problem("latest") == pin.allowed


def test_the_config_schema_checks_each_version_with_the_pin_of_its_kind():
    versions = stack_config.SCHEMA_BY_NAME["versions"]
    assert {f.name: f.check for f in versions.fields} == {k: p.problem for k, p in stack_config.VERSION_PINS.items()}
    assert stack_config.VERSION_PINS["volcano"] is pins.VOLCANO_TAG


@pytest.mark.parametrize("key, args", [
    ("volcano", VolcanoArgs), ("gpuOperator", GpuOperatorArgs), ("nodeFeatureDiscovery", NodeFeatureDiscoveryArgs),
])
def test_config_and_component_accept_exactly_the_same_versions(key, args):
    """The bug this file exists for: `versions.volcano: 1.15.1` passed the config and then raised in
    VolcanoArgs after resources were declared. Config and component now agree on every value
    (outside the compatibility matrix, with the override; a Volcano tag with its manifest sha256)."""
    pin = stack_config.VERSION_PINS[key]
    for value in [v for vs in CASES[pin] for v in vs] + ["1.14.0", "v1.14.0", "26.1.0", "v26.1.0"]:
        if key == "volcano" and pin.ok(value) and "@" not in value:
            value += "@sha256:" + "0" * 64  # the config also needs the manifest's sha256 of a tag it does not pin
        raw = engine.as_cli_config(dev_config(versions={key: value}, allowUntestedVersions=True))
        try:
            stack_config.parse(raw, "dev")
            config_ok = True
        except stack_config.ConfigError:
            config_ok = False
        try:
            args(value, manifest="") if args is VolcanoArgs else args(value)
            args_ok = True
        except ValueError:
            args_ok = False
        assert config_ok == args_ok, f"versions.{key} = {value!r}: config {config_ok}, {args.__name__} {args_ok}"


# --- the pin table, the compatibility matrix and the Renovate configuration ----------------------
RENOVATE = json.loads((ROOT / "renovate.json").read_text())


def _python_regex(renovate_regex: str) -> re.Pattern[str]:
    """Renovate's (RE2/JavaScript) named groups `(?<name>...)` as Python's `(?P<name>...)`."""
    return re.compile(re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", renovate_regex))


def renovate_matches() -> list[dict[str, str]]:
    """What Renovate's regex managers extract from core/pins.py, as Renovate applies them (every match of
    every matchString over the whole file)."""
    text = (ROOT / "core" / "pins.py").read_text()
    found = []
    for manager in RENOVATE["customManagers"]:
        assert any(re.search(p.strip("/"), "core/pins.py") for p in manager["managerFilePatterns"])
        for pattern in manager["matchStrings"]:
            found += [{k: v for k, v in m.groupdict().items() if v} for m in _python_regex(pattern).finditer(text)]
    return found


def test_renovates_patterns_match_every_pin_in_the_table_exactly_once():
    extracted = []
    for m in renovate_matches():
        value = m["currentValue"]
        if m["datasource"] == "docker" and "/" in m["depName"] and "@" not in m["currentValue"]:
            full = f"{m['depName']}:{value}" + (f"@{m['currentDigest']}" if m.get("currentDigest") else "")
            extracted.append(full if any(c.version == full for c in pins.COMPONENTS) else value)
        else:
            extracted.append(value)
        assert m["datasource"] in {"helm", "docker", "github-releases"}, m
    assert sorted(extracted) == sorted(c.version for c in pins.COMPONENTS)


def test_the_renovate_check_fails_when_an_entry_has_no_comment():
    """Not vacuous: a pin without its `# renovate` comment is not matched."""
    comment = "    # renovate: datasource=helm depName=gpu-operator"
    text = (ROOT / "core" / "pins.py").read_text().replace(comment, "    #", 1)
    patterns = [_python_regex(p) for m in RENOVATE["customManagers"] for p in m["matchStrings"]]
    values = [m["currentValue"] for rx in patterns for m in rx.finditer(text)]
    assert pins.component("gpuOperator").version not in values


def test_renovate_pins_digests_and_takes_final_releases_only():
    assert RENOVATE["pinDigests"] is True
    (final,) = [r for r in RENOVATE["packageRules"] if "allowedVersions" in r]
    rx = re.compile(final["allowedVersions"].strip("!/").rstrip("/"))
    assert rx.search("26.10.0-rc.2") and rx.search("v26.10.0-beta.5") and rx.search("v1.16.0-alpha.1")
    assert not any(rx.search(c.version) for c in pins.COMPONENTS)


def test_renovates_version_rules_read_the_current_pins():
    """The versioning and extractVersion rules parse today's values (else Renovate would skip them)."""
    by_dep = {}
    for rule in RENOVATE["packageRules"]:
        for dep in rule.get("matchDepNames", []):
            by_dep.setdefault(dep, {}).update({k: v for k, v in rule.items() if k in ("versioning", "extractVersion")})
    current = {m["depName"]: m["currentValue"] for m in renovate_matches()}
    for dep, rule in by_dep.items():
        if rule.get("versioning", "").startswith("regex:"):
            assert _python_regex(rule["versioning"][len("regex:"):]).fullmatch(current[dep]), dep
        if "extractVersion" in rule:
            published = f"{current[dep]}-ubuntu24.04-amd64"  # how the DOCA driver is published per OS and arch
            assert _python_regex(rule["extractVersion"]).fullmatch(published)["version"] == current[dep]


def test_no_pin_is_a_pre_release_or_a_staging_image():
    for c in pins.COMPONENTS:
        assert not re.search(r"(?:-|\.)(?:rc|beta|alpha)\b", c.version), c.key
        assert "nvstaging" not in c.version, c.key
        assert c.pin.ok(c.version), c.key


def test_every_matrix_row_names_each_pinned_version_with_its_source():
    """Every row names every versioned pin, and each pin says where upstream states its Kubernetes
    support (pins.SUPPORT, re-read on a bump: docs/upgrading-pins.md)."""
    assert set(pins.SUPPORT) == set(pins.VERSION_KEYS)
    for row in pins.MATRIX:
        assert set(row.pins) == set(row.tested) == set(pins.VERSION_KEYS), row.kubernetes
        for key, (version, source) in row.tested.items():
            assert version == pins.component(key).version, f"{row.kubernetes} {key}"
            assert source, f"{row.kubernetes} {key}: where does upstream state it?"
    assert pins.DEFAULT_KUBERNETES == stack_config.DEFAULT_KUBERNETES_VERSION == pins.SUPPORTED_KUBERNETES[-1]


def test_a_bump_is_one_edit_of_the_pin_table_and_the_matrix_follows(monkeypatch):
    """The rows name pins, not versions: a new version in the table is what every row tests, and the
    old one is then refused as untested, with no edit of the matrix."""
    import dataclasses

    old = pins.component("networkOperator")
    bumped = dataclasses.replace(old, version="99.1.0", packaged=None)
    monkeypatch.setitem(pins.BY_KEY, "networkOperator", bumped)
    for row in pins.MATRIX:
        assert row.tested["networkOperator"][0] == "99.1.0"
    minor = pins.DEFAULT_KUBERNETES
    assert pins.untested(minor, {"networkOperator": "99.1.0"}) == []
    assert pins.untested(minor, {"networkOperator": old.version}) == [
        ("versions.networkOperator", old.version, f"99.1.0, the version tested with Kubernetes {minor}")]


def test_kubernetes_versions_outside_the_matrix_are_refused_with_the_supported_set():
    for value in ("1.99", "1.20", "1.36"):
        with pytest.raises(stack_config.ConfigError) as err:
            stack_config.parse(engine.as_cli_config(dev_config(kubernetesVersion=value)), "dev")
        (line,) = err.value.problems
        assert f"kubernetesVersion: got {value!r}" in line and ", ".join(pins.SUPPORTED_KUBERNETES) in line
        assert pins.UNTESTED_KEY in line
    for minor in pins.SUPPORTED_KUBERNETES:  # and every row of the matrix is accepted, with a patch too
        cfg = stack_config.parse(engine.as_cli_config(dev_config(kubernetesVersion=f"{minor}.3")), "dev")
        assert cfg.untested == ()


@pytest.mark.parametrize("key", pins.VERSION_KEYS)
def test_each_version_outside_the_matrix_is_refused_and_the_override_says_untested(key, render):
    good = pins.component(key).pin
    other = next(v for v in [*CASES[good][0], "v9.9.9", "9.9.9", "network-operator-v9.9.9",
                             "doca9.9.9-99.01-0.1.0.0-0"] if good.ok(v) and v != pins.component(key).version)
    if key == "volcano":
        other += "@sha256:" + "0" * 64
    with pytest.raises(stack_config.ConfigError) as err:
        stack_config.parse(engine.as_cli_config(dev_config(versions={key: other})), "dev")
    (line,) = err.value.problems
    assert f"versions.{key}: got {other!r}" in line and pins.component(key).version in line
    cfg = stack_config.parse(engine.as_cli_config(dev_config(versions={key: other}, allowUntestedVersions=True)),
                             "dev")
    assert cfg.untested == ((f"versions.{key}", other),)


def test_the_docs_show_the_matrix_of_the_code():
    assert pins.matrix_markdown() in (ROOT / "docs" / "upgrading-pins.md").read_text()


def _string_literals(path) -> list[tuple[int, str]]:
    """Every string constant of a test module but its docstrings (what a test compares against)."""
    docstrings: set[int] = set()
    strings: list[ast.Constant] = []
    for n in ast.walk(ast.parse(path.read_text())):  # one walk: the tests' trees are 750 kB of source
        if isinstance(n, ast.Constant):
            if isinstance(n.value, str):
                strings.append(n)
        elif (isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
              and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)):
            docstrings.add(id(n.body[0].value))
    return [(n.lineno, n.value) for n in strings if id(n) not in docstrings]


# Literals that are about something else than the pin they happen to equal, each with why.
NOT_PINS = {
    # the lock's chart entry (offline/reference.lock.json names the file), not the pin
    ("test_reference.py", "charts/gpu-operator-v26.7.0.tgz: missing"),
    ("test_pins.py", "charts/gpu-operator-v26.7.0.tgz: missing"),  # this table itself
}


def test_no_test_names_a_pinned_version_literally():
    """Tests read pins from the pin table: after a bump, a literal would keep checking the old release."""
    versions = set()
    for c in pins.COMPONENTS:
        for v in (c.version, c.reference_version):
            tag = v.split("@")[0].rsplit(":", 1)[-1] if c.pin is pins.IMAGE_REF else v
            versions |= {tag, tag.removeprefix("v")}
    found = []
    paths = sorted((ROOT / "tests").rglob("*.py"))  # the tests' folders too (tests/unit/core/ holds this file)
    assert Path(__file__).resolve() in paths and len(paths) > 70, f"the walk missed the tests: {len(paths)} files"
    for path in paths:
        for line, text in _string_literals(path):
            for v in versions:
                if (v in text and re.search(rf"(?<![0-9A-Za-z.]){re.escape(v)}(?![0-9])", text)
                        and (path.name, text) not in NOT_PINS):
                    found.append(f"{path.name}:{line}: {text[:80]!r} names {v}")
    assert found == []
