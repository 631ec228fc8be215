"""The InfiniBand pools: `ibPool` (one pool) and `ibPools` (a map keyed by pool name), each entry checked on
its own with its name in every message, and the rules of several pools in one cluster."""

import pytest
from conftest import dev_config

import stack_config
from core import kinds
from offline import engine

H100, H200, A100, HB, GB300 = ("Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5", "Standard_ND96asr_v4",
                                "Standard_HB120rs_v3", "Standard_ND128isr_GB300_v6")


def parse(**overrides):
    return stack_config.parse(engine.as_cli_config(dev_config(**overrides)), "dev")


def pools(**entries):
    """The dev stack with ibPools set to `entries` (and ibPool removed)."""
    return parse(ibPool=None, ibPools=entries)


def problems(**overrides) -> list[str]:
    with pytest.raises(stack_config.ConfigError) as err:
        parse(**overrides)
    return err.value.problems


def test_a_map_of_one_is_the_one_pool_form():
    one = parse()
    mapped = pools(ibpool={"vmSize": H100, "nodeCount": 2})
    assert mapped.ib_pools == one.ib_pools and len(one.ib_pools) == 1
    assert one.ib_pool.alone and one.ib_pool.named("ib") == "ib"  # the one-pool names, and so its URNs


def test_several_pools_each_with_its_own_size_kind_and_names():
    cfg = pools(h200={"vmSize": H200, "nodeCount": 4}, h100={"vmSize": H100, "nodeCount": 2},
                hb={"vmSize": HB, "nodeCount": 2})
    assert [p.name for p in cfg.ib_pools] == ["h100", "h200", "hb"]
    assert [p.fabric_test.kind.name for p in cfg.ib_pools] == [kinds.NCCL, kinds.NCCL, kinds.P2P]
    assert [p.node_count for p in cfg.ib_pools] == [2, 4, 2]
    assert [p.named("ib") for p in cfg.ib_pools] == ["ib-h100", "ib-h200", "ib-hb"]
    assert not any(p.alone for p in cfg.ib_pools)
    # the doctor runs where the kind has one; the rest of fabricTest is the stack's
    assert [p.fabric_test.doctor for p in cfg.ib_pools] == ["auto", "auto", "never"]
    assert {p.fabric_test.timeout_minutes for p in cfg.ib_pools} == {60}
    with pytest.raises(ValueError, match="read each through ib_pools"):
        _ = cfg.ib_pool  # a per-pool read must name its pool


def test_a_pools_own_fabric_keys_override_the_stacks_for_that_pool_only():
    cfg = parse(ibPool=None, fabricTest={"thresholdGbps": 300}, ibPools={
        "h100": {"vmSize": H100, "nodeCount": 2},
        "a100": {"vmSize": A100, "nodeCount": 2, "fabricTest": {"thresholdGbps": 150, "allReduceArgs": "-b 8 -e 4G"}},
        "hb": {"vmSize": HB, "nodeCount": 2, "fabricTest": {"p2pThresholdGbits": 150}}})
    by = {p.name: p.fabric_test for p in cfg.ib_pools}
    assert (by["a100"].threshold, by["h100"].threshold, by["hb"].threshold) == (150, 300, 150)
    assert by["a100"].all_reduce_args == "-b 8 -e 4G" and by["h100"].all_reduce_args == "-b 8 -e 16G -f 2 -g 1"
    assert by["hb"].threshold_gbps is None  # the stack's GB/s threshold is not the HB pool's unit


def test_a_problem_of_an_entry_names_the_entry():
    found = problems(ibPool=None, ibPools={"good": {"vmSize": H100, "nodeCount": 2},
                                           "bad": {"vmSize": "Standard_D4s_v5", "nodeCount": 0, "extra": 1}})
    assert len(found) == 3 and all(p.startswith("aks-infiniband:ibPools.bad.") for p in found), found
    assert {p.split(":")[1] for p in found} == {"ibPools.bad.vmSize", "ibPools.bad.nodeCount", "ibPools.bad.extra"}


def test_a_stack_wide_threshold_judged_for_a_pool_says_which():
    (line,) = problems(ibPool=None, fabricTest={"thresholdGbps": 700},
                       ibPools={"h100": {"vmSize": H100, "nodeCount": 2}, "a100": {"vmSize": A100, "nodeCount": 2}})
    assert line.startswith("aks-infiniband:fabricTest.thresholdGbps: got 700 (pool 'a100', Standard_ND96asr_v4)")


@pytest.mark.parametrize("name", ["GpuA", "1gpu", "gpu-a", "abcdefghijklm", "system", ""])
def test_pool_names_as_aks_checks_them(name):
    (line,) = problems(ibPool=None, ibPools={name: {"vmSize": H100, "nodeCount": 2}})
    assert line.startswith(f"aks-infiniband:ibPools.{name}: got the name {name!r}; expected 1-12 lowercase")


def test_pools_of_one_cluster_share_the_feature_the_architecture_and_how_gpus_reach_pods():
    found = problems(ibPool=None, fabricTest={"image": "example.com/nccl-tests:1"},
                     ibPools={"h100": {"vmSize": H100, "nodeCount": 2}, "gb300": {"vmSize": GB300, "nodeCount": 2}})
    assert len(found) == 3 and all(p.startswith("aks-infiniband:ibPools: got ") for p in found), found
    assert all("h100 (Standard_ND96isr_H100_v5" in p and "gb300 (Standard_ND128isr_GB300_v6" in p for p in found)
    assert "AKSInfinibandSupport" in found[0] and "CPU architecture" in found[1] and "ClusterPolicy" in found[2]


def test_a_cpu_pool_beside_gpu_pools_is_one_cluster():
    cfg = pools(h100={"vmSize": H100, "nodeCount": 2}, hb={"vmSize": HB, "nodeCount": 2})
    assert [p.sku.has_gpus for p in cfg.ib_pools] == [True, False]


def test_both_forms_together_and_neither_are_refused():
    assert problems(ibPools={"gpua": {"vmSize": H100, "nodeCount": 2}}) == [
        "aks-infiniband:ibPools: set together with ibPool; ibPool is the one-pool form of ibPools: keep one "
        "(move ibPool's fields under ibPools.<its name>)"]
    (line,) = problems(ibPool=None)
    assert line.startswith("aks-infiniband:ibPool: is required but not set; set ibPool (vmSize, nodeCount) or ibPools")


def test_stack_wide_keys_of_one_kind_apply_where_a_pool_takes_them():
    cfg = parse(ibPool=None, fabricTest={"doctor": "always", "sharp": True},
                ibPools={"h100": {"vmSize": H100, "nodeCount": 2}, "hb": {"vmSize": HB, "nodeCount": 2}})
    by = {p.name: p.fabric_test for p in cfg.ib_pools}
    assert (by["h100"].doctor, by["h100"].sharp, by["hb"].doctor, by["hb"].sharp) == ("always", True, "never", False)
    (line,) = problems(ibPool=None, fabricTest={"doctor": "always"},
                       ibPools={"hb": {"vmSize": HB, "nodeCount": 2}, "hb2": {"vmSize": HB, "nodeCount": 2}})
    assert line.startswith("aks-infiniband:fabricTest.doctor: got 'always'; no pool's fabric test has a doctor")


def test_scale_to_zero_is_accepted_with_the_hold_and_the_peer_wait_is_read():
    cfg = parse(ibPool={"minNodeCount": 0}, certifier={"mode": "taint", "peerWaitMinutes": 30})
    assert cfg.ib_pool.min_node_count == 0 and cfg.certifier.peer_wait_minutes == 30
    assert parse().certifier.peer_wait_minutes == 15  # the autoscaler's --max-node-startup-time default


def test_pools_share_one_rdma_driver():
    (line,) = problems(ibPool=None, ibPools={"h100": {"vmSize": H100, "nodeCount": 2, "rdmaDriver": "doca"},
                                             "h200": {"vmSize": H200, "nodeCount": 2, "rdmaDriver": "inbox"}})
    assert line.startswith("aks-infiniband:ibPools: got h100 (Standard_ND96isr_H100_v5: rdmaDriver doca), "
                           "h200 (Standard_ND96isr_H200_v5: rdmaDriver inbox); the NicClusterPolicy")
    cfg = pools(h100={"vmSize": H100, "nodeCount": 2, "rdmaDriver": "inbox"},
                h200={"vmSize": H200, "nodeCount": 2, "rdmaDriver": "inbox"})
    assert cfg.rdma_driver.name == "inbox" and {p.rdma_driver.name for p in cfg.ib_pools} == {"inbox"}



VNETS = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net/providers/Microsoft.Network/"
SPOKE, HUB = f"{VNETS}virtualNetworks/spoke/subnets", f"{VNETS}virtualNetworks/hub/subnets"
SYSTEM, IB, H100_SUBNET, H200_SUBNET, ELSEWHERE = (f"{SPOKE}/system", f"{SPOKE}/ib", f"{SPOKE}/h100", f"{SPOKE}/h200",
                                                  f"{HUB}/x")


def test_a_pool_names_its_own_subnet_and_the_others_take_the_stacks():
    cfg = parse(ibPool=None, network={"systemSubnetId": SYSTEM, "ibSubnetId": IB}, ibPools={
        "h100": {"vmSize": H100, "nodeCount": 2, "subnetId": H100_SUBNET}, "hb": {"vmSize": HB, "nodeCount": 2}})
    assert {p.name: p.subnet_id for p in cfg.ib_pools} == {"h100": H100_SUBNET, "hb": IB}
    # each pool its own, and no stack-wide one: every pool has a subnet
    cfg = parse(ibPool=None, network={"systemSubnetId": SYSTEM}, ibPools={
        "h100": {"vmSize": H100, "nodeCount": 2, "subnetId": H100_SUBNET},
        "h200": {"vmSize": H200, "nodeCount": 2, "subnetId": H200_SUBNET}})
    assert [p.subnet_id for p in cfg.ib_pools] == [H100_SUBNET, H200_SUBNET]
    assert parse(network={"systemSubnetId": SYSTEM, "ibSubnetId": IB}).ib_pool.subnet_id == IB  # ibPool's
    assert parse().ib_pool.subnet_id is None  # AKS's VNet


@pytest.mark.parametrize(("network", "entries", "line"), [
    # a pool's subnet without the system pool's: AKS places all pools in your network or none
    ({}, {"h100": H100_SUBNET, "h200": None},
     f"ibPools.h100.subnetId: got {H100_SUBNET!r}; set network.systemSubnetId too: AKS places all pools in your "
     f"network or none"),
    # the system pool's subnet, and a pool with no subnet of its own and none stack-wide: named
    ({"systemSubnetId": SYSTEM}, {"h100": H100_SUBNET, "h200": None},
     f"network.systemSubnetId: got {SYSTEM!r}; set network.ibSubnetId too, or subnetId on ibPools.h200: AKS places "
     f"all pools in your network or none"),
    # another VNet: AKS puts a cluster's pools in one
    ({"systemSubnetId": SYSTEM, "ibSubnetId": IB}, {"h100": ELSEWHERE, "h200": None},
     f"ibPools.h100.subnetId: got {ELSEWHERE!r}; a subnet of the system pool's virtual network (AKS requires one "
     f"VNet)"),
    # every pool its own: the stack's ibSubnetId places nothing
    ({"systemSubnetId": SYSTEM, "ibSubnetId": IB}, {"h100": H100_SUBNET, "h200": H200_SUBNET},
     f"network.ibSubnetId: got {IB!r}; every ibPools entry sets its own subnetId, so no pool is placed in it: "
     f"remove it"),
])
def test_pool_subnets_are_refused_with_the_key_that_needs_fixing(network, entries, line):
    found = problems(ibPool=None, network=network, ibPools={
        name: {"vmSize": H100 if name == "h100" else H200, "nodeCount": 2, **({"subnetId": s} if s else {})}
        for name, s in entries.items()})
    assert found == [f"aks-infiniband:{line}"]


def test_each_pools_agent_pool_joins_its_own_subnet():
    from conftest import rendered

    r = rendered("multipool", {**engine.stack_file_config("multipool"),
                               "aks-infiniband:network": {"systemSubnetId": SYSTEM, "ibSubnetId": IB},
                               "aks-infiniband:ibPools": {
                                   "h100": {"vmSize": H100, "nodeCount": 2, "subnetId": H100_SUBNET},
                                   "h200": {"vmSize": H200, "nodeCount": 2}}})
    pools_ = {p.inputs["agentPoolName"]: p.inputs.get("vnetSubnetID")
              for p in r.of_type("azure-native:containerservice:AgentPool")}
    assert pools_ == {"h100": H100_SUBNET, "h200": IB}
