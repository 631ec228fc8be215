"""The InfiniBand fabric's shape, as Azure's own labelers write it onto the nodes (docs/topology.md: which
labels, where each comes from, why the torset is named after its leaf switch).

Standard library only, no import from this project: this file alone is shipped (a ConfigMap) into the
labeler pods, which run it twice: `sharp`, privileged and without API credentials, asks SHARP for the
node's topology; `node`, unprivileged, reads every fact and labels the node. The label names come in as
environment variables (components/platform/topology_labeler.py, from core/fabric.py). Sources:
Azure/ai-infrastructure-on-azure@a01b073 utilities/aks/node_labeler and torset_labeler.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

SHARP_TIMEOUT_SECONDS = 120
FALLBACK_TORSET_PREFIX = "torset-none-"  # a node SHARP could not place (fallback_torset, below)
LABEL_ATTEMPTS = 5
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
        nodes, name = _NODES.search(line), _SWITCH.search(line)
        if not nodes or not name:  # a switch is named only by its SwitchName: its GUID list depends on who asked
            continue
        members = []
        for guid in nodes["guids"].split(","):
            try:
                members.append(int(guid, 16))
            except ValueError:
                continue
        switches.append((name["name"], members))
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


def _unlock_memory() -> None:
    """sharp_cmd reaches the SHARP manager over UCX, which pins memory: Azure's torset labeler runs it after
    `ulimit -l unlimited` (torset_labeler/helm/templates/job.yaml). Up to the hard limit where that is all."""
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))


def sharp_topology(sharp_cmd: str, device: str, guids: list[str]) -> str | None:
    """SHARP's topology for these port GUIDs (the switches that list them), or None where SHARP cannot
    answer. Azure's torset_tool.py runs the same command, for every node's GUIDs at once."""
    if not guids or not Path(sharp_cmd).is_file():
        return None
    with tempfile.TemporaryDirectory() as work:
        guids_file, topology_file = Path(work, "guids.txt"), Path(work, "topology.txt")
        guids_file.write_text("".join(f"{g}\n" for g in guids))
        try:
            done = subprocess.run([sharp_cmd, "topology", "--ib-dev", device, "--guids_file", str(guids_file),
                                   "--topology_file", str(topology_file)],
                                  env={**os.environ, "SHARP_SMX_UCX_INTERFACE": device}, timeout=SHARP_TIMEOUT_SECONDS,
                                  check=False, preexec_fn=_unlock_memory)
        except (subprocess.TimeoutExpired, OSError) as e:  # a hung SHARP manager must not stop the labels
            print(f"sharp_cmd gave no answer ({e})", flush=True)
            return None
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


def fallback_torset(node: str) -> str:
    """The torset of a node SHARP could not place: its own, named apart from the switch-named ones."""
    return f"{FALLBACK_TORSET_PREFIX}{hashlib.sha1(node.encode()).hexdigest()[:8]}"


def label_with_retries(api: InCluster, node: str, labels: dict[str, str], annotations: dict[str, str],
                       attempts: int = LABEL_ATTEMPTS, sleep=time.sleep) -> None:
    """The PATCH, again after 2, 4, 8 … s when the API server does not take it (the last error is raised:
    the kubelet restarts the pod, with its own back-off)."""
    for attempt in range(1, attempts + 1):
        try:
            api.label_node(node, labels, annotations)
            return
        except (OSError, ValueError) as e:  # urllib's HTTPError and URLError are OSErrors
            if attempt == attempts:
                raise
            print(f"labelling {node} failed ({e}); again in {2 ** attempt} s", flush=True)
            sleep(2 ** attempt)


def label_this_node(api: InCluster, sysfs: Path, kvp_path: Path, imds: dict | None, topology_file: Path) -> int:
    names = _names()
    pool = kvp_path.read_bytes() if kvp_path.is_file() else None
    labels, annotations, notes = node_facts(sysfs, pool, imds, names)
    node = os.environ["NODE_NAME"]
    # This node's own torset: every host of a torset reaches the same leaf switches, so the first of
    # them (by name) that lists one of its GUIDs names the torset the same way on each of its hosts.
    topology = topology_file.read_text() if topology_file.is_file() else ""
    torset = torsets({node: port_guids(sysfs)}, topology).get(node)
    if not torset:
        # Volcano's label discovery stops at a node's first missing tier label, which would drop it from its
        # placement group's HyperNode too: a torset of its own keeps it there (and shares a leaf with no one)
        torset = fallback_torset(node)
        notes.append(f"{names['torset']}={torset}: SHARP's topology discovery gave no switch for this node (its own "
                     "torset, so it stays in its placement group's HyperNode)")
    labels[names["torset"]] = torset
    labels.update(json.loads(os.environ.get("TOPOLOGY_EXTRA_LABELS") or "{}"))  # the stack's, e.g. the DRA plugin's
    label_with_retries(api, node, labels, annotations)
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
