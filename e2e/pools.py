"""A stack's node pools as AKS would create their nodes: read from the stack's offline render (the
ManagedCluster's agent pool profiles and each AgentPool resource), never written by hand here.

What AKS puts on a node (a node of an AKS 1.35 pool, as `kubectl get node -o yaml` shows it): the name
`aks-<pool>-<8 digits>-vmss<6 base-36 digits>`, the labels `agentpool` and `kubernetes.azure.com/agentpool`
(the pool), `kubernetes.azure.com/mode`, `kubernetes.azure.com/role=agent`, `kubernetes.azure.com/cluster`
(the node resource group), `kubernetes.azure.com/os-sku`, `kubernetes.azure.com/accelerator=nvidia` on GPU
sizes, the well-known `node.kubernetes.io/instance-type`, `kubernetes.io/arch`, `kubernetes.io/os`,
`kubernetes.io/hostname` and `topology.kubernetes.io/region`/`zone`; the pool's `nodeLabels` and
`nodeTaints`; and a providerID naming the VMSS instance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import catalog, fabric, modes
from offline import engine

AGENT_POOL_LABEL = fabric.AGENT_POOL_LABEL
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}  # the nodes kwok plays the kubelet of (e2e/cluster.py)
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
MAX_PODS = 250  # AKS's default for Azure CNI Overlay
AGENT_POOL_TYPE = "azure-native:containerservice:AgentPool"
CLUSTER_TYPE = "azure-native:containerservice:ManagedCluster"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """`key=value:Effect` (or `key:Effect`), as the AgentPool's `nodeTaints` writes it."""
        key_value, _, effect = text.rpartition(":")
        key, _, value = key_value.partition("=")
        return cls(key, value, effect)

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, **({"value": self.value} if self.value else {}), "effect": self.effect}


@dataclass(frozen=True)
class Pool:
    name: str
    mode: str  # System | User
    vm_size: str
    count: int
    os_sku: str
    labels: Mapping[str, str] = field(default_factory=dict)  # the pool's nodeLabels
    taints: tuple[Taint, ...] = ()  # the pool's nodeTaints


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    resource_group: str
    location: str
    kubernetes_version: str
    rdma_mode: str
    pools: tuple[Pool, ...]

    @property
    def node_resource_group(self) -> str:
        return f"MC_{self.resource_group}_{self.name}_{self.location}"


def _pool(inputs: Mapping[str, Any], name: str) -> Pool:
    return Pool(name=name, mode=str(inputs.get("mode") or "User"), vm_size=str(inputs["vmSize"]),
                count=int(inputs.get("count") or inputs.get("minCount") or 1),
                os_sku=str(inputs.get("osSKU") or "Ubuntu"),
                labels=dict(inputs.get("nodeLabels") or {}),
                taints=tuple(Taint.parse(t) for t in inputs.get("nodeTaints") or []))


def facts(stack: str, config: Mapping[str, Any] | None = None) -> ClusterFacts:
    """The cluster and pools of `stack`'s render; a Kubernetes-only half reads its Azure half's stack
    (`azureStack`), where the pools are declared."""
    rendering = engine.render(stack, config=config)
    clusters = rendering.of_type(CLUSTER_TYPE)
    given = engine.stack_file_config(stack) if config is None else config
    config = {**engine.project_defaults(), **{k if ":" in k else f"aks-infiniband:{k}": v for k, v in given.items()}}
    if not clusters:
        azure = config.get("aks-infiniband:azureStack") or ""
        if not azure:
            raise LookupError(f"stack {stack} declares no AKS cluster and names no azureStack to read pools from")
        return facts(str(azure).rsplit("/", 1)[-1])
    cluster = clusters[0].inputs
    pools = [_pool(p, str(p["name"])) for p in cluster.get("agentPoolProfiles") or []]
    pools += [_pool(r.inputs, str(r.inputs["agentPoolName"])) for r in rendering.of_type(AGENT_POOL_TYPE)]
    return ClusterFacts(name=str(cluster.get("resourceName")), resource_group=str(cluster.get("resourceGroupName")),
                        location=str(cluster.get("location")), kubernetes_version=str(cluster.get("kubernetesVersion")),
                        rdma_mode=str(config.get("aks-infiniband:rdmaMode") or "shared"), pools=tuple(pools))


def _base36(n: int, width: int = 6) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out.rjust(width, "0")


def pool_id(cluster: ClusterFacts, pool: Pool) -> str:
    """AKS's 8-digit number in the pool's VMSS name (stable for a cluster and pool)."""
    return str(int(hashlib.sha256(f"{cluster.name}/{pool.name}".encode()).hexdigest(), 16) % 10**8).rjust(8, "0")


def node_name(cluster: ClusterFacts, pool: Pool, index: int) -> str:
    return f"aks-{pool.name}-{pool_id(cluster, pool)}-vmss{_base36(index)}"


def sku(pool: Pool) -> catalog.Sku | None:
    """The catalog's record of the pool's size; None for a size it does not hold (the system pool's)."""
    try:
        return catalog.lookup(pool.vm_size)
    except (KeyError, LookupError, ValueError):
        return None


def capacity(pool: Pool, rdma_mode: str) -> dict[str, str]:
    """What the node reports once its device plugins run: CPUs, memory, pods, GPUs and the RDMA resource
    of the stack's mode (none for `dra`, whose devices are ResourceSlices)."""
    out = {"cpu": "4", "memory": "16Gi", "pods": str(MAX_PODS), "ephemeral-storage": "128Gi"}
    record = sku(pool)
    if record is None:
        return out
    out["cpu"] = str(record.cpu_cores_per_vm)
    out["memory"] = "1800Gi"
    if record.gpus_per_vm:
        out["nvidia.com/gpu"] = str(record.gpus_per_vm)
    request = modes.rdma_mode(rdma_mode).request(record)
    if request is not None:
        out[request.resource] = str(max(request.count, 1))
    return out


def arch(pool: Pool) -> str:
    record = sku(pool)
    return record.cpu_arch if record else "amd64"


def is_gpu(pool: Pool) -> bool:
    record = sku(pool)
    return bool(record and record.gpus_per_vm)


def node(cluster: ClusterFacts, pool: Pool, index: int) -> dict[str, Any]:
    """One Node object of `pool`, as AKS registers it (its status as the kubelet and device plugins report it)."""
    name = node_name(cluster, pool, index)
    cpu_arch = arch(pool)
    labels = {
        "agentpool": pool.name, AGENT_POOL_LABEL: pool.name, "kubernetes.azure.com/mode": pool.mode.lower(),
        "kubernetes.azure.com/role": "agent", "kubernetes.azure.com/cluster": cluster.node_resource_group,
        "kubernetes.azure.com/os-sku": pool.os_sku, "node.kubernetes.io/instance-type": pool.vm_size,
        "beta.kubernetes.io/instance-type": pool.vm_size, "kubernetes.io/arch": cpu_arch,
        "beta.kubernetes.io/arch": cpu_arch, "kubernetes.io/os": "linux", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name, "topology.kubernetes.io/region": cluster.location,
        "topology.kubernetes.io/zone": "0",
        **({"kubernetes.azure.com/accelerator": "nvidia"} if is_gpu(pool) else {}),
        **pool.labels,
    }
    vmss = f"aks-{pool.name}-{pool_id(cluster, pool)}-vmss"
    provider_id = (f"azure:///subscriptions/{SUBSCRIPTION}/resourceGroups/{cluster.node_resource_group.lower()}"
                   f"/providers/Microsoft.Compute/virtualMachineScaleSets/{vmss}/virtualMachines/{index}")
    cap = capacity(pool, cluster.rdma_mode)
    boot = hashlib.sha256(f"{name}/boot-0".encode()).hexdigest()
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        "spec": {"providerID": provider_id, "taints": [t.as_dict() for t in pool.taints]},
        "status": {"capacity": cap, "allocatable": cap, "nodeInfo": {
            "architecture": cpu_arch, "operatingSystem": "linux", "osImage": "Ubuntu 24.04 LTS",
            "bootID": f"{boot[:8]}-{boot[8:12]}-{boot[12:16]}-{boot[16:20]}-{boot[20:32]}",
            "machineID": boot[:32], "systemUUID": boot[32:64], "kernelVersion": "", "kubeletVersion": "",
            "kubeProxyVersion": "", "containerRuntimeVersion": ""}},
    }


def nodes(cluster: ClusterFacts, pools: Sequence[Pool] | None = None) -> list[dict[str, Any]]:
    return [node(cluster, p, i) for p in (cluster.pools if pools is None else pools) for i in range(p.count)]
