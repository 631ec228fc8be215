"""The RDMA mode record (core/modes.py): the configuration looks the mode up by name once, where an
unknown name is refused; every layer above takes the record and refuses a name; what differs between
modes comes from the record, not a branch."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import stack_config
from components.fabric.nccl_job import NcclJobArgs
from components.fabric.p2p_job import P2pJobArgs
from components.platform.network_operator import NetworkOperatorArgs, nic_cluster_policy_spec
from core import catalog, modes
from stack_config.engine import ConfigError

A100, HB = catalog.lookup("Standard_ND96asr_v4"), catalog.lookup("Standard_HB176rs_v4")
V = stack_config.DEFAULT_VERSIONS
IMAGE = stack_config.DEFAULT_NCCL_TESTS_IMAGE


def operator_args(mode: modes.RdmaMode) -> NetworkOperatorArgs:
    return NetworkOperatorArgs(version=V["networkOperator"], doca_driver_version=V["docaDriver"],
                               rdma_shared_device_plugin_version=V["rdmaSharedDevicePlugin"],
                               sriov_device_plugin_version=V["sriovDevicePlugin"], rdma_mode=mode)


@pytest.mark.parametrize("unknown", ["dra-typo", "Shared", "", None])
def test_an_unknown_mode_is_refused_by_the_one_lookup(unknown):
    with pytest.raises(ValueError, match=f"rdma_mode: got {unknown!r}; expected one of shared, sriov, dra"):
        modes.rdma_mode(unknown, key="rdma_mode")


ARGS = [
    operator_args,
    lambda m: NcclJobArgs(sku=A100, node_count=2, rdma_mode=m, image=IMAGE, all_reduce_args="-b 8 -e 8G -f 2 -g 1",
                          timeout_minutes=60),
    lambda m: P2pJobArgs(sku=HB, rdma_mode=m, image=IMAGE, timeout_minutes=60),
]
ARGS_IDS = ["NetworkOperatorArgs", "NcclJobArgs", "P2pJobArgs"]


@pytest.mark.parametrize("build", ARGS, ids=ARGS_IDS)
@pytest.mark.parametrize("name", ["shared", "dra-typo", "Shared", "", None])
def test_the_component_args_take_the_record_and_refuse_a_name(build, name):
    """The configuration resolved the mode once: a name where the record belongs, known or not, is refused."""
    with pytest.raises(ValueError, match=f"rdma_mode: got {name!r}; expected a core.modes.RdmaMode record "
                                         f"\\(rdma_mode\\(name\\), one of shared, sriov, dra\\)"):
        build(name)


@pytest.mark.parametrize("build", ARGS, ids=ARGS_IDS)
def test_the_component_args_take_every_mode_that_fits(build):
    for mode in (modes.SHARED, modes.SRIOV):
        assert build(mode).rdma_mode is mode


def test_the_configuration_allows_exactly_the_records_and_describes_each():
    key = stack_config.SCHEMA_BY_NAME["rdmaMode"]
    for mode in modes.MODES.values():
        assert f"`{mode.name}` ({mode.description})" in key.description
    with pytest.raises(ConfigError, match="rdmaMode: got 'ipoib'"):
        stack_config.parse({"aks-infiniband:rdmaMode": "ipoib",
                            "aks-infiniband:ibPool": {"vmSize": A100.vm_size, "nodeCount": 2}}, stack="dev")


@pytest.mark.parametrize("mode", [m for m in modes.MODES.values() if m.device_plugin], ids=lambda m: m.name)
def test_the_policy_holds_the_plugin_of_the_mode_and_it_advertises_what_the_pods_request(mode):
    spec = nic_cluster_policy_spec(operator_args(mode))
    plugin = mode.device_plugin
    sections = {k for k in spec if k.endswith("DevicePlugin")}
    if plugin is None:  # a mode whose HCAs some other component hands out
        assert sections == set() and mode.resource is None
        return
    assert sections == {plugin.section}
    assert spec[plugin.section]["image"] == plugin.image
    # the plugin's version is the mode's own pin, under the same key in the configuration
    assert spec[plugin.section]["version"] == V[plugin.section]
    config = json.loads(spec[plugin.section]["config"])
    (entry,) = next(iter(config.values()))
    assert f"{entry['resourcePrefix']}/{entry['resourceName']}" == mode.resource
    for sku in catalog.SKUS.values():
        assert mode.limits(sku) == {mode.resource: str(mode.count(sku))}
        assert mode.count(sku) >= 1


def test_the_dra_mode_has_no_device_plugin_and_no_resource_the_claims_carry_the_hcas():
    """rdmaMode dra: DRANET hands out the HCAs as claims, so the NicClusterPolicy deploys no plugin
    (its DOCA driver stays: docs/dra.md) and pods request no rdma/ resource."""
    spec = nic_cluster_policy_spec(operator_args(modes.DRA))
    assert not {k for k in spec if k.endswith("DevicePlugin")} and "ofedDriver" in spec
    assert modes.DRA.dra and all(modes.DRA.limits(sku) == {} for sku in catalog.SKUS.values())
    assert [m.name for m in modes.MODES.values() if m.dra] == ["dra"]


def test_count_rules():
    for sku in catalog.SKUS.values():
        assert modes.SHARED.request(sku) == modes.RdmaRequest("rdma/shared_ib", 1)
        assert modes.SRIOV.request(sku) == modes.RdmaRequest("rdma/ib", sku.ib_hcas_per_vm)


def test_a_mode_without_an_extended_resource_adds_no_limit():
    """A mode that hands the HCAs out another way (a DRA claim) requests no `rdma/` resource."""
    claim_mode = replace(modes.SHARED, name="claims", resource=None, device_plugin=None)
    assert claim_mode.request(A100) is None and claim_mode.limits(A100) == {}
    assert modes.extended_resources() == ("rdma/shared_ib", "rdma/ib")


def test_an_unknown_mode_is_refused_by_the_dra_rules_not_read_as_shared():
    """core/dra.py read an unknown mode as `shared` (issue 37): the rules take the record and refuse a name."""
    from core import catalog, dra

    sku = catalog.SKUS["Standard_ND96isr_H100_v5"]
    for rule in (dra.needs, dra.ubuntu_2404_need):
        with pytest.raises(ValueError, match="rdma_mode: got 'drа'; expected a core.modes.RdmaMode record"):
            rule(sku, "drа")  # a Cyrillic а: looks like dra, is no mode
        assert rule(sku, modes.DRA) and rule(sku, modes.SHARED) is None
