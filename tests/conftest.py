"""Shared test setup. The mocks are set in one place, `offline.engine.render`, which every test
uses to run the real program; this file gives it to tests as fixtures."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from offline import charts, engine
from offline import reference as reference_material

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = reference_material.reference_dir()


def dev_config(**overrides: Any) -> dict[str, Any]:
    """The dev stack's config with top-level keys replaced and object keys merged, e.g.
    dev_config(rdmaMode="sriov", ibPool={"vmSize": "Standard_ND96asr_v4"})."""
    cfg = copy.deepcopy(engine.stack_file_config("dev"))
    for key, value in overrides.items():
        full = key if ":" in key else f"{engine.PROJECT}:{key}"
        if isinstance(value, dict) and isinstance(cfg.get(full), dict):
            cfg[full] = {**cfg[full], **value}
        elif value is None:
            cfg.pop(full, None)
        else:
            cfg[full] = value
    return cfg


@pytest.fixture(scope="session")
def dev() -> engine.Rendering:
    """The dev stack, rendered once per session (tests must not mutate it)."""
    return engine.render("dev")


@pytest.fixture
def render() -> Callable[..., engine.Rendering]:
    """render(**overrides): the dev stack with config overrides (see dev_config)."""
    return lambda **overrides: engine.render("dev", config=dev_config(**overrides))


@pytest.fixture(scope="session")
def reference() -> Path:
    """The upstream schemas and outputs (offline/reference.py says where they are looked for); skips,
    saying why and how to get them, when this checkout has none or an incomplete copy."""
    why = reference_material.unavailable_reason(REFERENCE)
    if why:
        pytest.skip(why)
    return REFERENCE


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned Helm (`make helm`); skips, saying why, where it is missing (CI must have it)."""
    try:
        return charts.find_helm()
    except charts.Unavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e} - CI must render the charts")
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def dev_charts(dev: engine.Rendering, helm: Path) -> dict[str, charts.RenderedRelease]:
    """The dev stack's Helm releases rendered once per session by the pinned Helm (`helm template` of
    the chart archives; see offline/charts.py), by release name. Skips where the archives are absent."""
    archives = charts.charts_dir()
    if not archives.is_dir():
        pytest.skip(f"chart archives not found at {archives} (the reference material's charts/: `make reference`, "
                    "or AKS_IB_CHARTS)")
    return {r.release.name: r for r in charts.render_all(dev, helm=helm, archives=archives)}
