"""The InfiniBand fabric's shape, as Azure's own labelers write it onto the nodes.

Standard library only, no import from this project: the file itself is shipped (a ConfigMap) into the
labeler pods (a DaemonSet pod per IB node), which run it twice: `python3 topology.py sharp`, privileged
and without API credentials, asks SHARP for the node's topology; `python3 topology.py node`, unprivileged,
reads every fact and labels the node. The label
names come in as environment variables computed by the stack (components/topology_labeler.py), so
they are written once, in core/fabric.py.

Where each fact comes from (the same sources as Azure/ai-infrastructure-on-azure@a01b073
utilities/aks/node_labeler and utilities/aks/torset_labeler):
- `ib/pkey`: the full-membership partition keys in /sys/class/infiniband/*/ports/*/pkeys/*
  (Azure: `grep 0x8`); the default partition 0xffff is every node's, so it says nothing;
- `ib/hca-guids` (annotation): each InfiniBand port's GUID, the interface half of its GID 0 in sysfs
  (what `ibstat` prints as "Port GUID"), in Azure's spelling (`0x` and the GUID without its first `00`);
- `hyperv/PhysicalHostName`: the Hyper-V KVP pool 3 (/var/lib/hyperv/.kvp_pool_3);
- placement group and interconnect subgroup: IMDS compute metadata (kubernetes-sigs/dranet@ca195e2
  pkg/cloudprovider/azure/azure.go reads the same fields); VMs in different placement groups do not share
  an InfiniBand fabric (dranet site/content/docs/user/azure-aks.md);
- `ib/torset`: SHARP's topology discovery (`sharp_cmd topology`), hosts grouped by the first leaf switch
  that lists one of their port GUIDs, as Azure's torset_tool.py groups them. Named after that switch
  (`torset-<8 hex>`), not by discovery order, so each node finds its own torset's name by itself and a
  node that joins later gets the same name as its torset's other hosts, with no pool-wide job.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

KVP_RECORD_KEY, KVP_RECORD_VALUE = 512, 2048  # Hyper-V KVP pool records: NUL-padded key, NUL-padded value
DEFAULT_PKEY = 0xFFFF
FULL_MEMBER = 0x8000
IMDS_COMPUTE = "http://169.254.169.254/metadata/instance/compute?api-version=2025-11-11&format=json"
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_SWITCH = re.compile(r"SwitchName=(?P<name>\S+)")
_NODES = re.compile(r"Nodes=(?P<guids>\S+)")


def label_value(text: str) -> str | None:
    """`text` if Kubernetes accepts it as a label value, else None."""
    return text if _LABEL_VALUE.fullmatch(text) else None


def pkeys(sysfs_infiniband: Path) -> list[str]:
    """The full-membership partition keys of every port, default partition left out, as `0x800b`."""
    found: set[int] = set()
    for entry in sysfs_infiniband.glob("*/ports/*/pkeys/*"):
        try:
            value = int(entry.read_text().strip(), 16)
        except (OSError, ValueError):
            continue
        if value & FULL_MEMBER and value != DEFAULT_PKEY:
            found.add(value)
    return [f"0x{v:04x}" for v in sorted(found)]


def port_guids(sysfs_infiniband: Path) -> list[str]:
    """The GUID of every InfiniBand (not Ethernet) port, in Azure's node_labeler spelling."""
    out: list[str] = []
    for port in sorted(sysfs_infiniband.glob("*/ports/*")):
        try:
            if port.joinpath("link_layer").read_text().strip() != "InfiniBand":
                continue
            gid = port.joinpath("gids", "0").read_text().strip()
        except OSError:
            continue
        interface = "".join(gid.split(":")[4:])
        if len(interface) == 16 and int(interface, 16):
            # Azure: `ibstat | grep "Port GUID" | sed 's/^ *0x00/0x/'`
            out.append("0x" + (interface[2:] if interface.startswith("00") else interface))
    return out


def kvp(pool: bytes) -> dict[str, str]:
    """The key/value records of a Hyper-V KVP pool file."""
    size = KVP_RECORD_KEY + KVP_RECORD_VALUE
    out: dict[str, str] = {}
    for start in range(0, len(pool) - size + 1, size):
        key = pool[start:start + KVP_RECORD_KEY].split(b"\0", 1)[0].decode(errors="replace")
        value = pool[start + KVP_RECORD_KEY:start + size].split(b"\0", 1)[0].decode(errors="replace")
        if key:
            out[key] = value
    return out


def node_facts(sysfs_infiniband: Path, kvp_pool: bytes | None, imds: dict | None,
               names: dict[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(labels, annotations, notes) for one node. `names` maps a fact to its label or annotation name
    (keys: pkey, physical_host, placement_group, interconnect_subgroup, hca_guids). A fact that is
    missing or not a valid label value is left out, with a note saying why."""
    labels: dict[str, str] = {}
    notes: list[str] = []
    keys = pkeys(sysfs_infiniband)
    if len(keys) == 1:
        labels[names["pkey"]] = keys[0]
    else:
        listed = ", ".join(keys) or "none"
        notes.append(f"{names['pkey']} not set: {len(keys)} full-membership partition keys ({listed})")
    host = kvp(kvp_pool).get("PhysicalHostName", "") if kvp_pool else ""
    if label_value(host) and host:
        labels[names["physical_host"]] = host
    else:
        notes.append(f"{names['physical_host']} not set: no valid PhysicalHostName in the KVP pool")
    for fact, field in (("placement_group", "placementGroupId"), ("interconnect_subgroup", "interconnectSubgroupId")):
        value = str((imds or {}).get(field) or "")
        if value and label_value(value):
            labels[names[fact]] = value
        elif fact == "placement_group":
            notes.append(f"{names[fact]} not set: IMDS gave no placementGroupId")
    guids = port_guids(sysfs_infiniband)
    annotations = {names["hca_guids"]: ",".join(guids)} if guids else {}
    if not guids:
        notes.append(f"{names['hca_guids']} not set: no InfiniBand port GUID in sysfs")
    return labels, annotations, notes


def torsets(guids_by_node: dict[str, list[str]], topology: str) -> dict[str, str]:
    """node -> torset name from a `sharp_cmd topology` file. GUIDs are compared as numbers, so Azure's
    spelling and SHARP's need not agree on leading zeros."""
    owner: dict[int, str] = {}
    for node, guids in guids_by_node.items():
        for guid in guids:
            try:
                owner[int(guid, 16)] = node
            except ValueError:
                continue
    switches: list[tuple[str, list[int]]] = []
    for line in topology.splitlines():
        nodes = _NODES.search(line)
        if not nodes:
            continue
        name = _SWITCH.search(line)
        members = []
        for guid in nodes["guids"].split(","):
            try:
                members.append(int(guid, 16))
            except ValueError:
                continue
        switches.append((name["name"] if name else nodes["guids"], members))
    out: dict[str, str] = {}
    for switch, members in sorted(switches):  # sorted: the same grouping whatever order SHARP lists them in
        tag = "torset-" + hashlib.sha1(switch.encode()).hexdigest()[:8]
        for guid in members:
            node = owner.get(guid)
            if node and node not in out:
                out[node] = tag
    return out


class InCluster:
    """The API server, as the pod's ServiceAccount (token and CA mounted by the kubelet)."""

    SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")

    def __init__(self, base: str | None = None, token: str | None = None, context: ssl.SSLContext | None = None):
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = base or f"https://{host}:{port}"
        self.token = token if token is not None else (self.SA / "token").read_text().strip()
        if context is None and base is None:  # in the pod: the cluster's CA; a test passes its own base URL
            context = ssl.create_default_context(cafile=str(self.SA / "ca.crt"))
        self.context = context

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=30, context=self.context) as resp:
            return json.loads(resp.read() or b"{}")

    def label_node(self, node: str, labels: dict[str, str], annotations: dict[str, str]) -> dict:
        meta: dict[str, dict[str, str]] = {}
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        return self.request("PATCH", f"/api/v1/nodes/{urllib.parse.quote(node)}", {"metadata": meta})



def _names() -> dict[str, str]:
    keys = ("pkey", "physical_host", "placement_group", "interconnect_subgroup", "hca_guids", "torset")
    return {k: os.environ[f"TOPOLOGY_{k.upper()}"] for k in keys}


def _imds() -> dict | None:
    req = urllib.request.Request(IMDS_COMPUTE, headers={"Metadata": "true"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError) as e:
        print(f"IMDS not read ({e}): no placement-group label", flush=True)
        return None


def sharp_topology(sharp_cmd: str, device: str, guids: list[str]) -> str | None:
    """SHARP's topology for these port GUIDs (the switches that list them), or None where SHARP cannot
    answer. Azure's torset_tool.py runs the same command, for every node's GUIDs at once."""
    if not guids or not Path(sharp_cmd).is_file():
        return None
    with tempfile.TemporaryDirectory() as work:
        guids_file, topology_file = Path(work, "guids.txt"), Path(work, "topology.txt")
        guids_file.write_text("".join(f"{g}\n" for g in guids))
        done = subprocess.run([sharp_cmd, "topology", "--ib-dev", device, "--guids_file", str(guids_file),
                               "--topology_file", str(topology_file)],
                              env={**os.environ, "SHARP_SMX_UCX_INTERFACE": device}, timeout=120, check=False)
        return topology_file.read_text() if done.returncode == 0 and topology_file.is_file() else None


def write_sharp_topology(sysfs: Path, sharp_cmd: str, device: str, out: Path) -> int:
    """The privileged step: SHARP's topology for this node's port GUIDs into `out` (nothing written where
    SHARP cannot answer). It holds no API credentials; the unprivileged step reads the file."""
    topology = sharp_topology(sharp_cmd, device, port_guids(sysfs))
    if topology is None:
        print("SHARP's topology discovery gave no answer: no torset label", flush=True)
        return 0
    out.write_text(topology)
    return 0


def label_this_node(api: InCluster, sysfs: Path, kvp_path: Path, imds: dict | None, topology_file: Path) -> int:
    names = _names()
    pool = kvp_path.read_bytes() if kvp_path.is_file() else None
    labels, annotations, notes = node_facts(sysfs, pool, imds, names)
    node = os.environ["NODE_NAME"]
    # This node's own torset: every host of a torset reaches the same leaf switches, so the first of
    # them (by name) that lists one of its GUIDs names the torset the same way on each of its hosts.
    topology = topology_file.read_text() if topology_file.is_file() else ""
    torset = torsets({node: port_guids(sysfs)}, topology).get(node)
    if torset:
        labels[names["torset"]] = torset
    else:
        notes.append(f"{names['torset']} not set: SHARP's topology discovery gave no switch for this node")
    api.label_node(node, labels, annotations)
    for key, value in {**labels, **annotations}.items():
        print(f"{node}: {key}={value}", flush=True)
    for note in notes:
        print(f"{node}: {note}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    sysfs, topology_file = Path("/sys/class/infiniband"), Path(os.environ.get("TOPOLOGY_FILE", "/work/topology.txt"))
    if argv[:1] == ["sharp"]:
        return write_sharp_topology(sysfs, os.environ.get("SHARP_CMD", "/opt/mellanox/sharp/bin/sharp_cmd"),
                                    os.environ.get("SHARP_DEVICE", "mlx5_0:1"), topology_file)
    if argv[:1] == ["node"]:
        return label_this_node(InCluster(), sysfs, Path("/var/lib/hyperv/.kvp_pool_3"), _imds(), topology_file)
    print("usage: topology.py sharp|node", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
