"""What a pin looks like (pins.py): one predicate per kind, and every layer calls the same one."""

from __future__ import annotations

import pytest

import pins
import stack_config
from components.gpu_operator import GpuOperatorArgs
from components.node_feature_discovery import NodeFeatureDiscoveryArgs
from components.volcano import VolcanoArgs
from offline import engine
from tests.conftest import dev_config

CASES = {
    pins.VOLCANO_TAG: (["v1.15.1", "v1.9.0", "v10.0.12", "v1.16.0@sha256:" + "a" * 64],
                       ["1.15.1", "v1.15", "v1.15.1-rc.1", "V1.15.1", "v1.15.1 ", "master", "latest", "", "v١.15.1"]),
    pins.CHART_VERSION: (["26.4.1", "v26.7.0", "0.19.0", "1.2.3-rc.1", "1.2.3+build.5"],
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
    for value in [v for vs in CASES[pin] for v in vs] + ["1.15.1", "v1.15.1", "26.7.0", "v26.7.0"]:
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
