"""The contract between the pieces of the stack: how the IB pool is marked and what pods ask for.

Pure Python (no Pulumi import). The node pool sets these labels and this taint; every DaemonSet
that must run on the pool (NFD worker, Network Operator driver and device plugin, GPU Operator)
and the fabric test job tolerate the taint. What the job requests for the HCAs is its RDMA mode's
(core/modes.py). Each fact is written here once.
"""

from __future__ import annotations

# The IB pool's taint. NoSchedule keeps every ordinary pod off the expensive GPU/IB nodes; each
# component that must run there tolerates exactly this key.
IB_TAINT_KEY = "aks-infiniband.io/ib-pool"
IB_TAINT_VALUE = "true"
IB_TAINT_EFFECT = "NoSchedule"
IB_TAINT = f"{IB_TAINT_KEY}={IB_TAINT_VALUE}:{IB_TAINT_EFFECT}"  # AKS nodeTaints syntax

# The cluster's CPU pool (inside the ManagedCluster); an IB pool of that name would overwrite it.
SYSTEM_POOL_NAME = "system"

# Labels the pool carries (AKS applies them to every node of the pool).
IB_POOL_ROLE_LABEL = "aks-infiniband.io/pool-role"
IB_POOL_ROLE = "infiniband"

# Set by Node Feature Discovery on nodes with a Mellanox (PCI vendor 15b3) device; the
# NicClusterPolicy's node affinity keys on it.
MELLANOX_NIC_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
NVIDIA_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
MELLANOX_PCI_VENDOR = "15b3"
NVIDIA_PCI_VENDOR = "10de"

GPU_RESOURCE = "nvidia.com/gpu"

# Where the operators run (their Helm releases' namespaces). The collector reads their pods there when
# the fabric test waits; the GPU Operator's ClusterPolicy also names its own in status.namespace.
NETWORK_OPERATOR_NAMESPACE = "network-operator"
GPU_OPERATOR_NAMESPACE = "gpu-operator"

# The domain of the RDMA extended resources the device plugins advertise (`rdma/shared_ib`,
# `rdma/ib`); each mode's own resource is in core/modes.py.
RDMA_RESOURCE_PREFIX = "rdma"


def toleration() -> dict[str, str]:
    """The toleration of the IB pool taint, in Kubernetes' (camelCase) form."""
    return {"key": IB_TAINT_KEY, "operator": "Equal", "value": IB_TAINT_VALUE, "effect": IB_TAINT_EFFECT}


def pool_node_selector() -> dict[str, str]:
    return {IB_POOL_ROLE_LABEL: IB_POOL_ROLE}


# --- the certifier's marks (verify/certify.py, docs/fabric-certifier.md) ---------------------------
# One taint key, two values: `uncertified` is set on the AgentPool (nodeTaints), so every node AKS
# creates or re-images starts held; `quarantined` is set by the certifier on a FAIL suspect. Both
# NoSchedule: running pods are never evicted by the certifier.
FABRIC_TAINT_KEY = "aks-infiniband.io/fabric"
UNCERTIFIED = "uncertified"
QUARANTINED = "quarantined"
FABRIC_TAINT_EFFECT = "NoSchedule"
UNCERTIFIED_TAINT = f"{FABRIC_TAINT_KEY}={UNCERTIFIED}:{FABRIC_TAINT_EFFECT}"  # AKS nodeTaints syntax
# The node condition the certifier owns (nodes/status), and the label that shows its state where
# the `label only` mode leaves taints alone.
FABRIC_CONDITION = "FabricCertified"
FABRIC_STATE_LABEL = "aks-infiniband.io/fabric-state"
# Fabric membership (issue 23): the labels Azure's own labelers write (Azure/ai-infrastructure-on-azure
# utilities/aks/node_labeler: `ib/pkey`; torset_labeler: `ib/torset`). Azure publishes no node label for
# the placement group (dranet has it only as the device attribute `azure.dra.net/placementGroupId`), so
# that one is ours. Read from here only: the labeler DaemonSet and the membership check cannot drift.
PKEY_LABEL = "ib/pkey"
PLACEMENT_GROUP_LABEL = "aks-infiniband.io/placement-group"
TORSET_LABEL = "ib/torset"
MEMBERSHIP_LABELS = (PLACEMENT_GROUP_LABEL, PKEY_LABEL)


def fabric_tolerations() -> list[dict[str, str]]:
    """What every pod that must run on an IB node before it is certified tolerates: the pool taint and
    both values of the fabric taint (operator Exists: uncertified and quarantined alike)."""
    return [toleration(), {"key": FABRIC_TAINT_KEY, "operator": "Exists", "effect": FABRIC_TAINT_EFFECT}]
