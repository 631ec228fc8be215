"""The egress allow-list (core/egress.py): every host a firewall must allow for a private cluster with a
UDR, each with its source, and what could not be confirmed said so."""

from urllib.parse import urlparse

import pytest

from components.fabric import p2p_job
from components.platform import dra_driver, dranet, gpu_operator, network_operator, node_feature_discovery, volcano
from core import egress

CHARTS = (dra_driver.CHART, dranet.CHART, gpu_operator.CHART, network_operator.CHART, node_feature_discovery.CHART)


def test_docker_hub_needs_its_registry_token_and_blob_hosts_not_docker_io():
    """A pull of docker.io/... goes to registry-1.docker.io, takes a token from auth.docker.io and is
    redirected to a CDN for the layers (Docker's allow-list); `docker.io` itself serves none of them."""
    hosts = egress.allowed("docker.io")
    assert {"registry-1.docker.io", "auth.docker.io", "production.cloudfront.docker.com"} <= hosts
    assert "docker.io" not in hosts


def test_ghcr_layers_come_from_another_host():
    assert {"ghcr.io", "pkg-containers.githubusercontent.com"} <= egress.allowed("ghcr.io")


def test_mcr_and_registry_k8s_io_name_their_blob_hosts():
    assert {"mcr.microsoft.com", "*.data.mcr.microsoft.com"} <= egress.allowed("mcr.microsoft.com")
    assert any(h.endswith(".pkg.dev") for h in egress.allowed("registry.k8s.io"))


def test_an_unknown_registry_is_refused_by_name():
    with pytest.raises(KeyError, match="quay.io"):
        egress.allowed("quay.io")


@pytest.mark.parametrize("chart", CHARTS, ids=lambda c: c.name)
def test_the_runner_may_reach_every_chart_repository(chart):
    """The Kubernetes half runs `helm` from the runner in the VNet: each chart's repository host is allowed."""
    host = urlparse(chart.repo).hostname
    assert host in egress.runner_hosts(), f"{chart.name}: {host} is not in egress.RUNNER"


def test_the_runner_may_fetch_volcanos_manifest_and_the_nodes_the_osu_tarball():
    assert urlparse(volcano.MANIFEST_URL).hostname in egress.runner_hosts()
    assert urlparse(p2p_job.OSU_URL).hostname in {h.name for h in egress.OTHER_NODE_HOSTS}


def test_every_host_has_a_source_and_a_doubt_is_written_out():
    every = [h for r in egress.REGISTRIES.values() for h in r.hosts] + list(egress.RUNNER) + list(
        egress.OTHER_NODE_HOSTS)
    assert every and all(h.source.strip() for h in every)
    table = egress.markdown_table()
    for host in every:
        assert f"`{host.name}`" in table
        if host.unconfirmed:
            assert host.unconfirmed in table
    assert any(h.unconfirmed for h in every), "nothing unconfirmed is implausible: registry.k8s.io's backends move"
