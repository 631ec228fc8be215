"""The platform the fabric test runs on: rows 4-7 and 11 of the design (NFD, the Network Operator and its
NicClusterPolicy, the GPU Operator on GPU sizes, the NVIDIA DRA driver and DRANET where claims carry the
GPUs or HCAs, Volcano, the topology labeler). Each waits only for the cluster's provider (and its own
CRDs), never for the IB pool, so all of it installs while the pool is still being created.

On a cluster that already exists, the components of `existingCluster.preinstalled` are another owner's: none
of their objects is declared here (NFD keeps only the stack's own NodeFeatureRule), and what the stack relies
on of them is checked at `up` (stack/preinstalled.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi

from components.platform.dra_driver import DraDriver, DraDriverArgs
from components.platform.dranet import Dranet, DranetArgs
from components.platform.gpu_operator import GpuOperator, GpuOperatorArgs
from components.platform.network_operator import NetworkOperator, NetworkOperatorArgs
from components.platform.node_feature_discovery import NodeFeatureDiscovery, NodeFeatureDiscoveryArgs
from components.platform.topology_labeler import TopologyLabeler, TopologyLabelerArgs
from components.platform.volcano import Volcano, VolcanoArgs
from core import fabric
from stack import charts
from stack_config import StackConfig, existing


@dataclass(frozen=True)
class Operators:
    """What the fabric test jobs wait for and report of the platform."""

    network_operator: NetworkOperator | None  # None: another owner's (existingCluster.preinstalled)
    gpu_operator: GpuOperator | None  # GPU sizes only, and not another owner's
    volcano: Volcano | None  # None: another owner's
    # the DRA driver's release, DRANET's release and DeviceClass, those of them the stack declares
    dra: Sequence[pulumi.Resource]
    dra_versions: Mapping[str, str]  # their driver versions, as the jobs record them

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a fabric-test job waits for, whatever its kind: the NicClusterPolicy, the GPU Operator (GPU
        sizes), Volcano's manifest (and with several pools its queues: the webhook refuses a Job whose queue does not
        exist) and the DRA drivers (where claims carry the GPUs or HCAs), those the stack declares."""
        policy = [self.network_operator.policy] if self.network_operator else []
        gpu = [self.gpu_operator.release] if self.gpu_operator else []
        volcano = [self.volcano.manifest, *self.volcano.queues.values()] if self.volcano else []
        return [*policy, *gpu, *volcano, *self.dra]

    @property
    def driver_versions(self) -> dict[str, str]:
        """The driver versions a fabric-test job records: the Network Operator's, the GPU Operator's (GPU
        sizes), the DRA drivers', those the stack pins (another owner's versions are not its to record)."""
        network = self.network_operator.driver_versions if self.network_operator else {}
        gpu = self.gpu_operator.driver_versions if self.gpu_operator else {}
        return {**network, **gpu, **self.dra_versions}


def declare(cfg: StackConfig, volcano_manifest: str | None, opts: pulumi.ResourceOptions) -> Operators:
    """`volcano_manifest`: Volcano's release manifest as checked against its pin (stack/kubernetes.py), None where
    Volcano is another owner's; `opts`: the Kubernetes provider's."""
    # Every pool's size: they share the architecture and how GPUs reach pods (stack_config/pools.py).
    skus, v = cfg.skus, cfg.versions
    there = existing.owned_elsewhere(cfg)  # the components another owner runs: none of their objects
    local = charts.archives(cfg)  # chart name -> its checked local archive (charts.directory), else {}
    NodeFeatureDiscovery("nfd", NodeFeatureDiscoveryArgs(
        version=v.node_feature_discovery, chart_archive=local.get(charts.node_feature_discovery.CHART.name),
        install=existing.NFD not in there), opts=opts)
    network_operator = None if existing.NETWORK_OPERATOR in there else NetworkOperator(
        "network-operator",
        NetworkOperatorArgs(
            version=v.network_operator,
            doca_driver_version=v.doca_driver,
            rdma_shared_device_plugin_version=v.rdma_shared_device_plugin,
            sriov_device_plugin_version=v.sriov_device_plugin,
            rdma_mode=cfg.rdma_mode,
            rdma_driver=cfg.rdma_driver,
            chart_archive=local.get(charts.network_operator.CHART.name),
        ),
        opts=opts,
    )
    # GPUs (and in rdmaMode dra the HCAs) as DRA claims: GB200/GB300 and rdmaMode dra (core/dra.py)
    uses_dra = charts.uses_dra(cfg)
    gpu_operator = (
        GpuOperator("gpu-operator", GpuOperatorArgs(version=v.gpu_operator, dra_gpus=uses_dra,
                                                        rdma_driver=cfg.rdma_driver,
                                                        chart_archive=local.get(charts.gpu_operator.CHART.name)),
                     opts=opts)
        if any(sku.has_gpus for sku in skus) and existing.GPU_OPERATOR not in there else None
    )
    # The NVIDIA DRA driver (GPUs as claims; ComputeDomains on multi-node-NVLink sizes) and, in rdmaMode
    # dra, DRANET (HCAs as claims): like the operators, they wait only for the cluster.
    domains = any(s.has_mnnvl for s in skus)
    dra_driver = DraDriver("dra-driver", DraDriverArgs(version=v.dra_driver, compute_domains=domains,
                                                         chart_archive=local.get(charts.dra_driver.CHART.name)),
                           opts=opts) if uses_dra else None
    dranet = Dranet("dranet", DranetArgs(
        version=v.dranet, chart_archive=local.get(charts.dranet.CHART.name)), opts=opts) if cfg.rdma_mode.dra else None
    volcano = Volcano("volcano", VolcanoArgs(version=v.volcano, manifest=volcano_manifest, dra=uses_dra,
                                             pools=tuple(p.name for p in cfg.ib_pools)),
                      opts=opts) if volcano_manifest is not None else None
    # 11. Each IB node labelled with its torset, partition key, physical host and placement group as it
    # joins (Azure's label names), for the certifier's membership check and Volcano's HyperNodes.
    # With the DRA driver, also the label its kubelet plugin selects, through the API (the driver manager
    # rewrites it, which AKS refuses for a pool label; Azure's deploy script labels the nodes by hand too).
    # On a cluster that already exists (existingCluster) the pool carries none of this stack's labels: the
    # labeler runs on the nodes of AKS's agentpool label and gives them the pool label everything else selects.
    elsewhere = cfg.existing_cluster is not None
    TopologyLabeler("topology", TopologyLabelerArgs(
        cpu_arch=skus[0].cpu_arch,
        extra_labels={**({fabric.DRA_KUBELET_PLUGIN_LABEL: "true"} if uses_dra else {}),
                      **(fabric.pool_node_selector() if elsewhere else {})},
        node_selector=fabric.agent_pool_selector(cfg.ib_pool.name) if elsewhere else fabric.pool_node_selector()),
        opts=opts)
    return Operators(
        network_operator=network_operator,
        gpu_operator=gpu_operator,
        volcano=volcano,
        dra=[*([dra_driver.release] if dra_driver else []), *([dranet.release, dranet.device_class] if dranet else [])],
        dra_versions={**(dra_driver.driver_versions if dra_driver else {}),
                      **(dranet.driver_versions if dranet else {})},
    )
