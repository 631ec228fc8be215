"""The fabric's shape: the labeler's facts from sysfs, the Hyper-V KVP pool, IMDS and SHARP (verify/topology.py),
the node PATCH it sends (against a fake API server that applies it), the DaemonSet that runs it on every IB
node, and Volcano's HyperNode discovery and topology-aware scheduling built from the same labels."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import topology_labeler, volcano_topology
from core import fabric
from tests.schema_checks import as_api, core_errors, crd_errors
from verify import topology

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
LABELER = "topology-daemonset"
POOL = "azure-native:containerservice:AgentPool"
JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
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


def test_each_node_alone_finds_the_name_the_whole_pool_would_give_it():
    whole = topology.torsets(POOL_GUIDS, TOPOLOGY)
    for node, guids in POOL_GUIDS.items():
        assert topology.torsets({node: guids}, TOPOLOGY).get(node) == whole.get(node)
    shuffled = "\n".join(reversed(TOPOLOGY.splitlines()))  # SHARP's order does not rename a torset
    assert topology.torsets(POOL_GUIDS, shuffled) == whole


class FakeNodes:
    """An API server that holds Node objects and applies JSON merge patches to them, as the real one does."""

    def __init__(self, nodes: dict[str, dict[str, Any]]):
        self.nodes, self.patches = nodes, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_PATCH(self):
                name = self.path.removeprefix("/api/v1/nodes/")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.patches.append((name, self.headers["Content-Type"], self.headers["Authorization"], body))
                if name not in outer.nodes:
                    self.send_response(404)
                    self.end_headers()
                    return
                meta = outer.nodes[name]["metadata"]
                for field, values in body.get("metadata", {}).items():
                    meta.setdefault(field, {}).update(values)
                data = json.dumps(outer.nodes[name]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def fake_nodes():
    api = FakeNodes({"aks-ib-0": {"kind": "Node", "apiVersion": "v1",
                                  "metadata": {"name": "aks-ib-0", "labels": {"kubernetes.io/hostname": "aks-ib-0"}}}})
    yield api
    api.server.shutdown()


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
    api = topology.InCluster(base=fake_nodes.url, token="t0ken", context=None)
    assert topology.label_this_node(api, sysfs, tmp_path / "kvp", {"placementGroupId": "pg-1"}, shared) == 0
    (name, content_type, auth, _), = fake_nodes.patches
    assert (name, content_type, auth) == ("aks-ib-0", "application/merge-patch+json", "Bearer t0ken")
    meta = fake_nodes.nodes["aks-ib-0"]["metadata"]
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
    api = topology.InCluster(base=fake_nodes.url, token="t", context=None)
    topology.label_this_node(api, tmp_path / "sys", tmp_path / "no-kvp", None, out)
    assert "ib/torset" not in fake_nodes.nodes["aks-ib-0"]["metadata"]["labels"]
    assert fake_nodes.nodes["aks-ib-0"]["metadata"]["labels"]["ib/pkey"] == "0x800b"
    assert "ib/torset not set: SHARP's topology discovery gave no switch" in capsys.readouterr().out


# --- the DaemonSet in the render ---------------------------------------------------------------------------

def labeler_pod(dev) -> dict[str, Any]:
    return as_api(dev.one(DAEMONSET, LABELER).inputs)["spec"]["template"]["spec"]


def test_the_labeler_runs_on_every_ib_node_before_it_is_certified(dev):
    spec = labeler_pod(dev)
    assert spec["nodeSelector"] == fabric.pool_node_selector()
    for taint in dev.one(POOL).inputs["nodeTaints"]:
        key, effect = taint.split("=")[0], taint.rsplit(":", 1)[1]
        assert any(t["key"] == key and t["effect"] == effect for t in spec["tolerations"]), taint
    assert {"key": fabric.FABRIC_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_only_the_sharp_step_is_privileged_and_it_holds_no_api_token(dev):
    spec = labeler_pod(dev)
    sharp, label = spec["initContainers"]
    assert sharp["securityContext"] == {"privileged": True} and "env" not in sharp
    assert spec["automountServiceAccountToken"] is False
    assert not any("serviceaccount" in m["mountPath"] for m in sharp["volumeMounts"])
    assert any(m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" for m in label["volumeMounts"])
    for unprivileged in (label, spec["containers"][0]):
        ctx = unprivileged["securityContext"]
        assert ctx["runAsNonRoot"] and not ctx["privileged"] and ctx["capabilities"] == {"drop": ["ALL"]}


def test_the_labeler_runs_the_shipped_script_with_the_label_names_from_one_place(dev):
    spec = labeler_pod(dev)
    sharp, init = spec["initContainers"]
    assert (sharp["command"], init["command"]) == (["python3", "/opt/aks-infiniband/topology.py", "sharp"],
                                                   ["python3", "/opt/aks-infiniband/topology.py", "node"])
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert {k.removeprefix("TOPOLOGY_").lower(): v for k, v in env.items() if k.startswith("TOPOLOGY_")} == NAMES
    script = dev.one("kubernetes:core/v1:ConfigMap", "topology-script").inputs["data"]["topology.py"]
    assert script == Path(topology.__file__).read_text()
    template = as_api(dev.one(DAEMONSET, LABELER).inputs)["spec"]["template"]["metadata"]
    assert template["annotations"][topology_labeler.SCRIPT_HASH_ANNOTATION] == topology_labeler.script_sha256()


def test_the_labeler_may_read_and_label_nodes_and_nothing_else(dev):
    (rule,) = dev.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "topology-role").inputs["rules"]
    assert rule == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}


def test_every_labeler_object_passes_the_kubernetes_schema(dev):
    for r in dev.resources:
        if r.name.startswith("topology-") and r.type.startswith("kubernetes:"):
            assert core_errors(r.inputs) == [], r.name


# --- Volcano --------------------------------------------------------------------------------------------------

def manifest(reference: Path) -> list[dict[str, Any]]:
    text = (reference / "examples" / "volcano-development.v1.15.1.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def test_hypernodes_are_discovered_from_the_torset_then_the_placement_group(reference):
    objects = volcano_topology.configure(manifest(reference))
    (cm,) = [o for o in objects
             if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "volcano-controller-configmap"]
    (source,) = yaml.safe_load(cm["data"]["volcano-controller.conf"])["networkTopologyDiscovery"]
    assert source["source"] == "label" and source["enabled"] is True
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


def test_the_fabric_test_job_declares_its_network_topology(dev, reference):
    job = as_api(dev.one(JOB).inputs)
    assert job["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    assert crd_errors({**job, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"},
                      reference / "crds" / "batch.volcano.sh_jobs.v1.15.1.yaml") == []
