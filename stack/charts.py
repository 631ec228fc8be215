"""The Helm releases of the Kubernetes half and, with `charts.directory`, the local archive each installs.

Air-gapped and private clusters (and the engine tier, docs/real-control-plane.md) install every chart from a
folder of packaged archives, as `helm pull` names them: `<chart>-<version>.tgz`. Which charts, and the check
of each archive (present, of the pinned version), are the configuration's (stack_config/existing.py): a
missing or other-version archive is refused with the other bad keys, before any resource."""

from __future__ import annotations

from pathlib import Path

from components.platform import dra_driver, dranet, gpu_operator, network_operator, node_feature_discovery
from core import dra
from stack_config import StackConfig, existing
from stack_config.engine import snake

# Each release's chart, by its versions.* key: the components' own, which must be the names the
# configuration checks the archives of (tests/stack/test_existing_cluster.py).
CHARTS = {"nodeFeatureDiscovery": node_feature_discovery.CHART, "networkOperator": network_operator.CHART,
          "gpuOperator": gpu_operator.CHART, "draDriver": dra_driver.CHART, "dranet": dranet.CHART}


def uses_dra(cfg: StackConfig) -> bool:
    """GPUs (and in rdmaMode dra the HCAs) as DRA claims: GB200/GB300 and rdmaMode dra (core/dra.py)."""
    return any(dra.needs(sku, cfg.rdma_mode) is not None for sku in cfg.skus)


def archives(cfg: StackConfig) -> dict[str, str]:
    """With charts.directory: chart name -> its archive's path (relative paths are the project folder's), as
    checked by the configuration, but for the components another owner runs (existingCluster.preinstalled);
    without, {} (each release installs from its repository)."""
    if cfg.charts_directory is None:
        return {}
    camel = {k: getattr(cfg.versions, snake(k)) for k in CHARTS}
    there = existing.owned_elsewhere(cfg)
    needed = {}  # every pool's charts (pools share how GPUs reach pods, so the same releases)
    for sku in cfg.skus:
        needed.update(existing.needed_charts(sku, cfg.rdma_mode, camel, there))
    return {name: str(Path(cfg.charts_directory) / f"{name}-{version}.tgz") for name, version in needed.items()}

