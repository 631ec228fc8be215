"""The fabric's shape: the labeler's facts from sysfs, the Hyper-V KVP pool, IMDS and SHARP (labeler/topology.py),
the node PATCH it sends (against a fake API server that applies it), and Volcano's HyperNode discovery and
topology-aware scheduling built from the same labels. The DaemonSet that runs it on every IB node, as the stack
renders it: tests/stack/components/test_topology_labeler.py."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform import volcano_topology
from core import fabric
from labeler import topology
from tests.fake_kube_store import TOKEN, FakeApi
from tests.schema_checks import load_yaml_all, pinned_name

NAMES = fabric.topology_names()


def hca(root: Path, dev: str, guid: str, pkeys: list[str], link_layer: str = "InfiniBand") -> None:
    port = root / dev / "ports" / "1"
    (port / "pkeys").mkdir(parents=True)
    (port / "gids").mkdir()
    (port / "link_layer").write_text(f"{link_layer}\n")
    g = guid.removeprefix("0x").rjust(16, "0")
    (port / "gids" / "0").write_text(f"fe80:0000:0000:0000:{g[0:4]}:{g[4:8]}:{g[8:12]}:{g[12:16]}\n")
    for i, value in enumerate([*pkeys, "0x0000"]):
        (port / "pkeys" / str(i)).write_text(f"{value}\n")


def kvp_pool(**records: str) -> bytes:
    return b"".join(k.encode().ljust(512, b"\0") + v.encode().ljust(2048, b"\0") for k, v in records.items())


def test_pkey_is_the_tenant_partition_and_not_the_default(tmp_path):
    hca(tmp_path, "mlx5_0", "0x00155dfffd33ff1a", ["0xffff", "0x800b", "0x7fff"])
    hca(tmp_path, "mlx5_1", "0x00155dfffd33ff1b", ["0xffff", "0x800B"])
    # the default partition (0xffff) and limited members (high bit clear) say nothing about the tenant
    assert topology.pkeys(tmp_path) == ["0x800b"]


def test_port_guids_in_azure_spelling_and_only_infiniband_ports(tmp_path):
    hca(tmp_path, "mlx5_0", "0x00155dfffd33ff1a", ["0x800b"])
    hca(tmp_path, "mlx5_an0", "0x00155dfffd000001", [], link_layer="Ethernet")  # the accelerated-networking NIC
    # ibstat prints 0x00155dfffd33ff1a; Azure's node_labeler writes it as `sed 's/^ *0x00/0x/'` leaves it
    assert topology.port_guids(tmp_path) == ["0x155dfffd33ff1a"]


def test_kvp_pool_records():
    pool = kvp_pool(HostName="aks-ib-123", PhysicalHostName="MWH0123456789", VirtualMachineName="x")
    assert topology.kvp(pool)["PhysicalHostName"] == "MWH0123456789"
    assert topology.kvp(pool[:-10]) == {"HostName": "aks-ib-123", "PhysicalHostName": "MWH0123456789"}


def test_node_facts_use_azures_names_and_leave_out_what_is_unknown(tmp_path):
    hca(tmp_path, "mlx5_0", "0x00155dfffd33ff1a", ["0x800b"])
    labels, annotations, notes = topology.node_facts(
        tmp_path, kvp_pool(PhysicalHostName="MWH0123456789"),
        {"placementGroupId": "c6c749e8-a38b-470e-8c94-2a7d00001bf0", "interconnectSubgroupId": ""}, NAMES)
    assert labels == {"ib/pkey": "0x800b", "hyperv/PhysicalHostName": "MWH0123456789",
                      fabric.PLACEMENT_GROUP_LABEL: "c6c749e8-a38b-470e-8c94-2a7d00001bf0"}
    assert annotations == {"ib/hca-guids": "0x155dfffd33ff1a"}
    assert notes == []
    labels, _, notes = topology.node_facts(tmp_path, kvp_pool(PhysicalHostName="has space"), None, NAMES)
    assert set(labels) == {"ib/pkey"}
    assert any("PhysicalHostName" in n for n in notes) and any("placementGroupId" in n for n in notes)


def test_two_partition_keys_label_none_and_say_so(tmp_path):
    hca(tmp_path, "mlx5_0", "0x1", ["0x800b"])
    hca(tmp_path, "mlx5_1", "0x2", ["0x800c"])
    labels, _, notes = topology.node_facts(tmp_path, None, None, NAMES)
    assert "ib/pkey" not in labels and any("2 full-membership partition keys (0x800b, 0x800c)" in n for n in notes)


# A SHARP topology file as Azure's torset_tool.py reads it: one line per switch, the second field `Nodes=`.
TOPOLOGY = """\
SwitchName=leaf-b1 Nodes=0x0000000000000b11,0x0000000000000b21
SwitchName=leaf-a2 Nodes=0xa12,0xa22,0xa32
SwitchName=leaf-a1 Nodes=0xa11,0xa21,0xa31
SwitchName=leaf-b2 Nodes=0xb12,0xb22
"""
POOL_GUIDS = {"node-a1": ["0xa11", "0xa12"], "node-a2": ["0xa21", "0xa22"], "node-a3": ["0xa31", "0xa32"],
              "node-b1": ["0xb11", "0xb12"], "node-b2": ["0xb21", "0xb22"], "node-x": ["0xfff"]}


def test_torsets_group_hosts_under_the_same_leaves():
    mapping = topology.torsets(POOL_GUIDS, TOPOLOGY)
    assert mapping["node-a1"] == mapping["node-a2"] == mapping["node-a3"] != mapping["node-b1"] == mapping["node-b2"]
    assert "node-x" not in mapping  # not in SHARP's answer: no label rather than a guess
    assert all(v.startswith("torset-") and topology.label_value(v) for v in mapping.values())


def sharp_answer(text: str, guids: list[str]) -> str:
    """What SHARP is assumed to answer for a guids file: each switch that lists one of them, with only those."""
    asked = {int(g, 16) for g in guids}
    out = []
    for line in text.splitlines():
        head, _, listed = line.partition("Nodes=")
        kept = [g for g in listed.split(",") if int(g, 16) in asked]
        if kept:
            out.append(head + "Nodes=" + ",".join(kept))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("text", [TOPOLOGY, TOPOLOGY.replace("SwitchName=", "Switch=")], ids=["named", "unnamed"])
def test_each_node_alone_finds_the_name_the_whole_pool_would_give_it(text):
    whole = topology.torsets(POOL_GUIDS, sharp_answer(text, [g for gs in POOL_GUIDS.values() for g in gs]))
    for node, guids in POOL_GUIDS.items():
        assert topology.torsets({node: guids}, sharp_answer(text, guids)).get(node) == whole.get(node), node
    shuffled = "\n".join(reversed(text.splitlines()))  # SHARP's order does not rename a torset
    assert topology.torsets(POOL_GUIDS, shuffled) == whole


@pytest.fixture
def fake_nodes():
    """The storing fake API server (tests/fake_kube_store.py): it answers only the certifier's token, applies
    a merge patch only when it is sent as one (else 415), and records every write."""
    node = {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "aks-ib-0", "labels": {"kubernetes.io/hostname": "aks-ib-0"}}}
    with FakeApi(nodes=[node]) as api:
        host, port = api.server.server_address[:2]
        api.url = f"http://{host}:{port}"
        yield api


def test_the_two_steps_label_the_node_with_every_fact(tmp_path, monkeypatch, fake_nodes, capsys):
    sysfs = tmp_path / "sys"
    hca(sysfs, "mlx5_0", "0xa11", ["0x800b"])
    hca(sysfs, "mlx5_1", "0xa12", ["0x800b"])
    (tmp_path / "kvp").write_bytes(kvp_pool(PhysicalHostName="MWH01"))
    sharp = tmp_path / "sharp_cmd"  # stands in for SHARP: writes the topology file it is asked for, once asked
    sharp.write_text('#!/bin/sh\n'
                     'while [ $# -gt 0 ]; do\n  [ "$1" = --topology_file ] && cp "$TOPO" "$2"\n  shift\ndone\n')
    sharp.chmod(0o755)
    (tmp_path / "topo").write_text(TOPOLOGY)
    monkeypatch.setenv("TOPO", str(tmp_path / "topo"))
    monkeypatch.setenv("NODE_NAME", "aks-ib-0")
    for fact, name in NAMES.items():
        monkeypatch.setenv(f"TOPOLOGY_{fact.upper()}", name)
    shared = tmp_path / "work" / "topology.txt"
    shared.parent.mkdir()
    # the privileged step: no API client at all
    assert topology.write_sharp_topology(sysfs, str(sharp), "mlx5_0:1", shared) == 0
    assert shared.read_text() == TOPOLOGY
    api = topology.InCluster(base=fake_nodes.url, token=TOKEN, context=None)
    assert topology.label_this_node(api, sysfs, tmp_path / "kvp", {"placementGroupId": "pg-1"}, shared) == 0
    # one write: a merge patch of its own node (the fake refuses another token or content type)
    assert [(method, path) for method, path, _ in fake_nodes.writes] == [("PATCH", "/api/v1/nodes/aks-ib-0")]
    meta = fake_nodes.node("aks-ib-0")["metadata"]
    assert meta["labels"] == {"kubernetes.io/hostname": "aks-ib-0", "ib/pkey": "0x800b",
                              "hyperv/PhysicalHostName": "MWH01", fabric.PLACEMENT_GROUP_LABEL: "pg-1",
                              "ib/torset": topology.torsets(POOL_GUIDS, TOPOLOGY)["node-a1"]}
    assert meta["annotations"] == {"ib/hca-guids": "0x00000000000a11,0x00000000000a12"}  # Azure's spelling
    assert "aks-ib-0: ib/torset=torset-" in capsys.readouterr().out


def test_without_sharp_the_node_gets_every_other_label_and_a_reason(tmp_path, monkeypatch, fake_nodes, capsys):
    hca(tmp_path / "sys", "mlx5_0", "0xa11", ["0x800b"])
    monkeypatch.setenv("NODE_NAME", "aks-ib-0")
    for fact, name in NAMES.items():
        monkeypatch.setenv(f"TOPOLOGY_{fact.upper()}", name)
    out = tmp_path / "topology.txt"
    assert topology.write_sharp_topology(tmp_path / "sys", str(tmp_path / "no-sharp"), "mlx5_0:1", out) == 0
    assert not out.exists()
    api = topology.InCluster(base=fake_nodes.url, token=TOKEN, context=None)
    topology.label_this_node(api, tmp_path / "sys", tmp_path / "no-kvp", None, out)
    # a torset of its own: Volcano's label discovery would otherwise drop it from its placement group too
    labels = fake_nodes.node("aks-ib-0")["metadata"]["labels"]
    assert labels["ib/torset"] == topology.fallback_torset("aks-ib-0") != topology.fallback_torset("aks-ib-1")
    assert labels["ib/torset"].startswith(topology.FALLBACK_TORSET_PREFIX) and labels["ib/pkey"] == "0x800b"
    assert "SHARP's topology discovery gave no switch for this node (its own torset" in capsys.readouterr().out


def test_the_stacks_extra_labels_are_written_with_the_topology(tmp_path, monkeypatch, fake_nodes):
    """The DRA kubelet plugin's label comes through the labeler, not the pool (AKS refuses the driver
    manager's rewrite of a pool label)."""
    hca(tmp_path / "sys", "mlx5_0", "0xa11", ["0x800b"])
    monkeypatch.setenv("NODE_NAME", "aks-ib-0")
    monkeypatch.setenv("TOPOLOGY_EXTRA_LABELS", json.dumps({fabric.DRA_KUBELET_PLUGIN_LABEL: "true"}))
    for fact, name in NAMES.items():
        monkeypatch.setenv(f"TOPOLOGY_{fact.upper()}", name)
    api = topology.InCluster(base=fake_nodes.url, token=TOKEN, context=None)
    topology.label_this_node(api, tmp_path / "sys", tmp_path / "no-kvp", None, tmp_path / "none.txt")
    assert fake_nodes.node("aks-ib-0")["metadata"]["labels"][fabric.DRA_KUBELET_PLUGIN_LABEL] == "true"


def test_a_hung_sharp_is_caught_and_a_refused_label_is_retried(tmp_path, monkeypatch):
    """A SHARP manager that never answers used to raise TimeoutExpired before anything was labelled, and the
    kubelet restarted the pod forever; a PATCH the API server refuses once is tried again."""
    hca(tmp_path / "sys", "mlx5_0", "0xa11", ["0x800b"])
    sharp = tmp_path / "sharp_cmd"
    sharp.write_text("#!/bin/sh\nsleep 30\n")
    sharp.chmod(0o755)
    monkeypatch.setattr(topology, "SHARP_TIMEOUT_SECONDS", 0.2)
    monkeypatch.setattr(topology, "_unlock_memory", lambda: None)
    out = tmp_path / "topology.txt"
    assert topology.write_sharp_topology(tmp_path / "sys", str(sharp), "mlx5_0:1", out) == 0 and not out.exists()

    class Flaky:
        calls = 0

        def label_node(self, node, labels, annotations):
            Flaky.calls += 1
            if Flaky.calls < 3:
                raise OSError("connection refused")

    slept = []
    topology.label_with_retries(Flaky(), "aks-ib-0", {"a": "b"}, {}, sleep=slept.append)
    assert Flaky.calls == 3 and slept == [2, 4]
    with pytest.raises(OSError):
        Flaky.calls = -10
        topology.label_with_retries(Flaky(), "aks-ib-0", {"a": "b"}, {}, attempts=2, sleep=slept.append)


# --- Volcano --------------------------------------------------------------------------------------------------

@functools.cache
def _manifest_text(reference: Path) -> str:
    return (reference / "examples" / pinned_name("volcano-development", "volcano")).read_text()


def manifest(reference: Path) -> list[dict[str, Any]]:
    """A fresh copy of the pinned manifest's objects (libyaml: the file is about 1 MB)."""
    return [d for d in load_yaml_all(_manifest_text(reference)) if d]


def test_hypernodes_are_discovered_from_the_torset_then_the_placement_group(reference):
    objects = volcano_topology.configure(manifest(reference))
    (cm,) = [o for o in objects
             if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "volcano-controller-configmap"]
    (source,) = yaml.safe_load(cm["data"]["volcano-controller.conf"])["networkTopologyDiscovery"]
    assert source["source"] == "label" and source["enabled"] is True
    # the label discoverer re-runs on node and HyperNode events and reads no interval (label.go; only
    # ufm.go has a ticker): one set here would promise a periodic pass that never happens
    assert "interval" not in source
    (name, tiers), = source["config"]["networkTopologyTypes"].items()
    assert len(name) <= 20  # Volcano skips a longer type name
    # highest first, the hostname last: Volcano's order (label.go parseCfg)
    assert [t["nodeLabel"] for t in tiers] == [fabric.PLACEMENT_GROUP_LABEL, fabric.TORSET_LABEL,
                                               "kubernetes.io/hostname"]


def test_the_scheduler_gets_the_topology_plugin_and_keeps_every_upstream_plugin(reference):
    before = {o["metadata"]["name"]: o for o in manifest(reference) if o["kind"] == "ConfigMap"}
    after = {o["metadata"]["name"]: o
             for o in volcano_topology.configure(manifest(reference)) if o["kind"] == "ConfigMap"}
    old = yaml.safe_load(before["volcano-scheduler-configmap"]["data"]["volcano-scheduler.conf"])
    new = yaml.safe_load(after["volcano-scheduler-configmap"]["data"]["volcano-scheduler.conf"])
    assert new["actions"] == old["actions"]
    names = [[p["name"] for p in tier["plugins"]] for tier in new["tiers"]]
    assert names == [[p["name"] for p in t["plugins"]] for t in old["tiers"]][:-1] + [
        [p["name"] for p in old["tiers"][-1]["plugins"]] + ["network-topology-aware"]]
    untouched = [n for n in before if n not in ("volcano-scheduler-configmap", "volcano-controller-configmap")]
    assert all(before[n] == after[n] for n in untouched)


def test_the_shipped_script_runs_alone(tmp_path):
    """The pod has the ConfigMap's one file and the image's python3: no project import, nothing beyond
    the standard library."""
    import ast
    import subprocess
    import sys

    source = Path(topology.__file__).read_text()
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names, name
    alone = tmp_path / "topology.py"
    alone.write_text(source)
    done = subprocess.run([sys.executable, "-I", str(alone)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "usage: topology.py sharp|node" in done.stderr


def test_sharp_runs_with_memory_unlocked_as_azures_labeler_runs_it(tmp_path):
    """Azure runs sharp_cmd after `ulimit -l unlimited` (UCX pins memory); here up to the hard limit
    where raising it is not allowed (this test's process may not)."""
    import resource

    hca(tmp_path / "sys", "mlx5_0", "0xa11", ["0x800b"])
    sharp = tmp_path / "sharp_cmd"  # answers with the locked-memory limit it was started with
    sharp.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  [ "$1" = --topology_file ] && ulimit -l > "$2"\n'
                     '  shift\ndone\n')
    sharp.chmod(0o755)
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    low = 64 * 1024 if hard == resource.RLIM_INFINITY else min(hard, 64 * 1024)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (low, hard))  # what a container may start with
    try:
        out = tmp_path / "topology.txt"
        topology.write_sharp_topology(tmp_path / "sys", str(sharp), "mlx5_0:1", out)
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
    got = out.read_text().strip()
    assert got == "unlimited" or int(got) * 1024 == hard, got


def test_a_labelling_image_without_the_sizes_architecture_is_refused():
    from components.platform.topology_labeler import TopologyLabelerArgs

    with pytest.raises(ValueError, match="cpu_arch: got 'riscv64'"):
        TopologyLabelerArgs(cpu_arch="riscv64")
