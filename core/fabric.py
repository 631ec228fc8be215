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

# The certifier's taints: the hold (HOLD_TAINT_KEY=uncertified, until a node passes) and the quarantine
# (FABRIC_TAINT_KEY=quarantined, after it fails). Pods that must run on a node before it is certified
# (operators, labelers, the fabric test) tolerate both keys.
FABRIC_TAINT_KEY = "aks-infiniband.io/fabric"
# The hold is put on each new boot through the Kubernetes API by the certifier's admission loop, not by
# the AgentPool: AKS refuses changes to pool-set taints through the Kubernetes API (docs/fabric-certifier.md
# gives the evidence). Its key carries the cluster autoscaler's startup-taint prefix
# (kubernetes/autoscaler utils/taints/taints.go StartupTaintPrefix): the autoscaler counts a held node as
# starting, not as capacity that pods cannot use, so it adds no node for the pods waiting on a certification.
HOLD_TAINT_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/aks-infiniband-fabric"

# The fabric's shape, labelled on each IB node (labeler/topology.py). Azure's own names, so Azure's NCCL
# chart (`ib/torset` affinity) and labelers work unchanged here (Azure/ai-infrastructure-on-azure@a01b073
# utilities/aks/node_labeler, torset_labeler).
TORSET_LABEL = "ib/torset"
PKEY_LABEL = "ib/pkey"
PHYSICAL_HOST_LABEL = "hyperv/PhysicalHostName"
HCA_GUIDS_ANNOTATION = "ib/hca-guids"
# Azure publishes no node label for these IMDS facts (dranet publishes them as device attributes,
# azure.dra.net/placementGroupId): ours. Nodes of two placement groups share no InfiniBand fabric.
PLACEMENT_GROUP_LABEL = "aks-infiniband.io/placement-group"
INTERCONNECT_SUBGROUP_LABEL = "aks-infiniband.io/interconnect-subgroup"
# The topology tiers, lowest first: hosts under one set of leaf switches, then one fabric.
TOPOLOGY_TIERS = (TORSET_LABEL, PLACEMENT_GROUP_LABEL)


def topology_names() -> dict[str, str]:
    """Each fact labeler/topology.py writes -> its label (or annotation) name."""
    return {"pkey": PKEY_LABEL, "physical_host": PHYSICAL_HOST_LABEL, "placement_group": PLACEMENT_GROUP_LABEL,
            "interconnect_subgroup": INTERCONNECT_SUBGROUP_LABEL, "hca_guids": HCA_GUIDS_ANNOTATION,
            "torset": TORSET_LABEL}

# The cluster's CPU pool (inside the ManagedCluster); an IB pool of that name would overwrite it.
SYSTEM_POOL_NAME = "system"

# Labels the pool carries (AKS applies them to every node of the pool).
IB_POOL_ROLE_LABEL = "aks-infiniband.io/pool-role"
IB_POOL_ROLE = "infiniband"
# The agent pool a node belongs to: one of AKS's reserved system labels, set on every node
# (learn.microsoft.com/azure/aks/use-labels, "Reserved system labels"). In a stack of several IB pools each
# is its own fabric (VMs of different scale sets get different partition keys): jobs and peers stay inside one.
AGENT_POOL_LABEL = "kubernetes.azure.com/agentpool"
# With several pools each pool's nodes carry it (the AgentPool's nodeLabels), valued with the pool's name: the
# label Volcano's nodegroup plugin reads a node's group from (volcano-sh/volcano v1.15.1
# pkg/scheduler/plugins/nodegroup/nodegroup.go NodeGroupNameKey), which each pool's queue is tied to
# (components/platform/volcano_pools.py).
VOLCANO_NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
DEFAULT_QUEUE = "default"  # Volcano's own queue: the one pool's jobs run there, as they always did


def node_group_labels(agent_pool: str | None) -> dict[str, str]:
    """What every node of `agent_pool` carries, one of several pools, for its queue's node-group affinity; none
    for the stack's one pool."""
    return {VOLCANO_NODEGROUP_LABEL: agent_pool} if agent_pool else {}


def pool_queue(agent_pool: str | None) -> str:
    """The Volcano queue of a pool's jobs: with several pools `ib-<pool>`, whose node-group affinity keeps every
    pod of a job on that pool's nodes; the stack's one pool, Volcano's `default`."""
    return f"ib-{agent_pool}" if agent_pool else DEFAULT_QUEUE

# Set by Node Feature Discovery on nodes with a Mellanox (PCI vendor 15b3) device; the
# NicClusterPolicy's node affinity keys on it.
MELLANOX_NIC_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
NVIDIA_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
# Set by the Network Operator; its RDMA device plugin runs only where it is "false": once the DOCA driver pod is
# ready with a NicClusterPolicy ofedDriver, else (rdmaDriver inbox) on every node with MELLANOX_NIC_LABEL
# (Mellanox/network-operator v26.7.0-rc.2 manifests/state-rdma-shared-device-plugin, controllers/
# nicclusterpolicy_controller.go handleMOFEDWaitLabelsNoConfig).
MOFED_WAIT_LABEL = "network.nvidia.com/operator.mofed.wait"
MELLANOX_PCI_VENDOR = "15b3"
NVIDIA_PCI_VENDOR = "10de"

GPU_RESOURCE = "nvidia.com/gpu"
# Where the NVIDIA DRA driver's kubelet plugin runs, and what the GPU Operator's driver manager evicts on
# a driver upgrade (Azure/ai-infrastructure-on-azure@a01b073 infrastructure_references/aks/scripts/
# deploy-aks.sh: install_dra_driver labels the GPU nodes, install_gpu_operator sets
# NODE_LABEL_FOR_GPU_POD_EVICTION to it). The IB pool carries it wherever the driver is installed.
DRA_KUBELET_PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
# The NVLink clique (NVL72 rack) of a node, set by the GPU Operator's feature discovery; pods that share
# it share multi-node NVLink (Azure's GB300 NCCL chart: values-gb300.yaml affinity on it).
GPU_CLIQUE_LABEL = "nvidia.com/gpu.clique"

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


def fabric_toleration() -> dict[str, str]:
    """Tolerates the certifier's quarantine: for pods that run on a node while it is quarantined."""
    return {"key": FABRIC_TAINT_KEY, "operator": "Exists", "effect": FABRIC_TAINT_EFFECT}


def hold_toleration() -> dict[str, str]:
    """Tolerates the certifier's hold: for pods that run on a node before it is certified."""
    return {"key": HOLD_TAINT_KEY, "operator": "Exists", "effect": FABRIC_TAINT_EFFECT}


def pool_node_selector(agent_pool: str | None = None) -> dict[str, str]:
    """Every IB node; with `agent_pool`, the nodes of that pool only (a stack of several pools: each its own
    fabric, so a multi-node job stays inside one)."""
    return {IB_POOL_ROLE_LABEL: IB_POOL_ROLE, **({AGENT_POOL_LABEL: agent_pool} if agent_pool else {})}


def agent_pool_selector(agent_pool: str) -> dict[str, str]:
    """The nodes of one agent pool by AKS's own label alone: on a cluster that already exists (existingCluster)
    they carry none of this stack's labels until the topology labeler gives them the pool label."""
    return {AGENT_POOL_LABEL: agent_pool}


# The Azure tag by which a cluster says it is production (config `production`): the policy pack's
# access guardrails are mandatory on a cluster that carries it, advisory elsewhere.
PRODUCTION_TAG = "aks-infiniband-production"

# --- the certifier's marks (clusterside/certify.py, docs/fabric-certifier.md) ---------------------------
# `uncertified` (HOLD_TAINT_KEY) is put on every new boot of an IB node by the admission loop
# (clusterside/certify_admit.py) and lifted when the node passes; `quarantined` (FABRIC_TAINT_KEY) is set by the
# certifier on a FAIL suspect. Both NoSchedule: running pods are never evicted by the certifier.
UNCERTIFIED = "uncertified"
QUARANTINED = "quarantined"
FABRIC_TAINT_EFFECT = "NoSchedule"
HOLD_TAINT = f"{HOLD_TAINT_KEY}={UNCERTIFIED}:{FABRIC_TAINT_EFFECT}"  # kubectl taint syntax
# The taint an older release put on the AgentPool (nodeTaints): read as a hold, never written.
LEGACY_POOL_HOLD = (FABRIC_TAINT_KEY, UNCERTIFIED)
# The node condition the certifier owns (nodes/status), and the label that shows its state where
# the `label only` mode leaves taints alone.
FABRIC_CONDITION = "FabricCertified"
FABRIC_STATE_LABEL = "aks-infiniband.io/fabric-state"
# Fabric membership: every IB node must share these (the topology labels above, written by the
# labeler DaemonSet and read by the certifier's membership check from here only).
MEMBERSHIP_LABELS = (PLACEMENT_GROUP_LABEL, PKEY_LABEL)


def fabric_tolerations() -> list[dict[str, str]]:
    """What every pod that must run on an IB node before it is certified tolerates: the pool taint, the
    quarantine and the hold (operator Exists)."""
    return [toleration(), fabric_toleration(), hold_toleration()]
