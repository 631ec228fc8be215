"""aks-infiniband: an AKS cluster whose GPU nodes talk InfiniBand RDMA from inside pods, proven by
an NCCL all-reduce. Reads the configuration, builds the components, exports the outputs."""

import pulumi
import pulumi_azure_native as azure_native

import stack_config
from components.certifier import Certifier, CertifierArgs
from components.cluster import Cluster, ClusterArgs
from components.fabric_check import FabricCheck, FabricCheckArgs
from components.feature_registration import FeatureRegistration, FeatureRegistrationArgs
from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.ib_node_pool import IbNodePool, IbNodePoolArgs
from components.image_prepull import ImagePrepull, ImagePrepullArgs
from components.nccl_job import NcclJob, NcclJobArgs
from components.network_operator import NetworkOperator, NetworkOperatorArgs
from components.node_feature_discovery import NodeFeatureDiscovery, NodeFeatureDiscoveryArgs
from components.p2p_job import P2pJob, P2pJobArgs
from components.volcano import Volcano, VolcanoArgs
from core.kinds import ALL_REDUCE, POINT_TO_POINT, kind_for

cfg = stack_config.load()  # stops here, with every bad key named, before any resource exists
sku = cfg.sku

# 1. The AKSInfinibandSupport feature on the subscription Pulumi deploys to: registered and waited
# for, or, on sizes that must not have it (GB200), checked to be absent.
feature = FeatureRegistration(
    "ib-feature",
    FeatureRegistrationArgs(
        subscription_id=azure_native.authorization.get_client_config_output().subscription_id,
        timeout_minutes=cfg.feature_wait_timeout_minutes,
        ib_feature=sku.ib_feature,
    ),
)

# 2. The cluster and the one Kubernetes provider every later piece uses.
cluster = Cluster(
    "cluster",
    ClusterArgs(
        resource_group_name=cfg.resource_group_name,
        cluster_name=cfg.cluster_name,
        location=cfg.location,
        kubernetes_version=cfg.kubernetes_version,
        system_pool_vm_size=cfg.system_pool.vm_size,
        system_pool_node_count=cfg.system_pool.node_count,
        tags=cfg.tags,
        protect=cfg.protect,
    ),
)

# 3. The InfiniBand pool, only after the feature is Registered (not merely requested).
ib_pool = IbNodePool(
    "ib",
    IbNodePoolArgs(
        resource_group_name=cluster.resource_group.name,
        cluster_name=cluster.managed_cluster.name,
        pool_name=cfg.ib_pool.name,
        sku=sku,
        node_count=cfg.ib_pool.node_count,
        os_disk_size_gb=cfg.ib_pool.os_disk_size_gb,
        kubernetes_version=cfg.kubernetes_version,
        tags=cfg.tags,
        protect=cfg.protect,
        wait_for=[feature.step],
        # new nodes are held until the certifier passes them (the all-reduce's doctor tells nodes apart)
        hold_until_certified=cfg.fabric_test.enabled and kind_for(sku) is ALL_REDUCE and cfg.certifier.mode == "taint",
    ),
)

# 4-7. The Kubernetes layer: NFD, Network Operator + NicClusterPolicy, GPU Operator (GPU sizes
# only), Volcano. Each waits only for the cluster's provider (and its own CRDs), never for the IB
# pool, so all of it installs while the pool is still being created.
k8s_opts = pulumi.ResourceOptions(provider=cluster.provider)
v = cfg.versions
nfd = NodeFeatureDiscovery("nfd", NodeFeatureDiscoveryArgs(version=v.node_feature_discovery), opts=k8s_opts)
network_operator = NetworkOperator(
    "network-operator",
    NetworkOperatorArgs(
        version=v.network_operator,
        doca_driver_version=v.doca_driver,
        rdma_shared_device_plugin_version=v.rdma_shared_device_plugin,
        sriov_device_plugin_version=v.sriov_device_plugin,
        rdma_mode=cfg.rdma_mode,
    ),
    opts=k8s_opts,
)
gpu_operator = (
    GpuOperator("gpu-operator", GpuOperatorArgs(version=v.gpu_operator), opts=k8s_opts) if sku.has_gpus else None
)
volcano = Volcano("volcano", VolcanoArgs(version=v.volcano), opts=k8s_opts)

# 8-9. The fabric test: the job, which alone waits for everything, and the step that collects its
# result into the outputs below. GPU sizes run the NCCL all-reduce (judged in GB/s busbw); CPU-only
# HB/HX sizes run MPI point to point between two nodes (osu_bw, osu_latency; judged in Gb/s).
ft, kind = cfg.fabric_test, kind_for(sku)
if ft.enabled:
    # The test image, pulled on each IB node as it joins, while the drivers install: waits for
    # nothing but the cluster, so the job's pods find it there (components/image_prepull.py).
    ImagePrepull("fabric-test-prepull", ImagePrepullArgs(image=ft.image), opts=k8s_opts)
fabric_job = None
if ft.enabled and kind is ALL_REDUCE:
    fabric_job = NcclJob(
        "fabric-test",
        NcclJobArgs(
            sku=sku,
            node_count=cfg.ib_pool.node_count,
            rdma_mode=cfg.rdma_mode,
            image=ft.image,
            all_reduce_args=ft.all_reduce_args,
            timeout_minutes=ft.timeout_minutes,
            doctor=ft.doctor,
            doctor_minutes=ft.doctor_minutes,
            threshold_gbps=ft.threshold_gbps,
            sharp=ft.sharp,
            topology_file=ft.topology_file,
            wait_for=[ib_pool.agent_pool, network_operator.policy, gpu_operator.release, volcano.manifest],
            driver_versions={**network_operator.driver_versions, **gpu_operator.driver_versions},
        ),
        opts=k8s_opts,
    )
elif ft.enabled and kind is POINT_TO_POINT:
    fabric_job = P2pJob(
        "fabric-test-p2p",
        P2pJobArgs(
            sku=sku,
            rdma_mode=cfg.rdma_mode,
            image=ft.image,
            timeout_minutes=ft.timeout_minutes,
            wait_for=[ib_pool.agent_pool, network_operator.policy, volcano.manifest],
            driver_versions=network_operator.driver_versions,
        ),
        opts=k8s_opts,
    )
elif ft.enabled:
    raise ValueError(f"fabricTest: no job runs the {kind.name!r} fabric test (core/kinds.py)")
# 10. The certifier: the same verify code in the cluster. It judges the test for `pulumi up` (a Job the
# Kubernetes provider awaits), holds new nodes until they pass, re-certifies idle ones on a schedule.
fabric_check = None
if fabric_job:
    ce = cfg.certifier
    certifier = Certifier(
        "certifier",
        CertifierArgs(
            fabric_namespace=fabric_job.namespace_name, image=ce.image, mode=ce.mode,
            # recurring runs re-test with the all-reduce's doctor; a point-to-point test spans two nodes only
            schedule=ce.schedule if kind is ALL_REDUCE else "off",
            max_quarantine_share=ce.max_quarantine_percent / 100, history_size=ce.history_size,
            pushgateway_url=ce.pushgateway_url, wait_for=[fabric_job.namespace],  # its Role lives there
            retest=fabric_job.retest if kind is ALL_REDUCE else None,
        ),
        opts=k8s_opts,
    )
    fabric_check = FabricCheck(
        "fabric-check",
        FabricCheckArgs(
            job=fabric_job,
            certifier=certifier,
            threshold=ft.threshold(kind),  # in the kind's unit; the config allows only that one
            fail_on_low_bandwidth=ft.fail_on_low_bandwidth,
        ),
        opts=k8s_opts,
    )

pulumi.export("resourceGroupName", cluster.resource_group.name)
pulumi.export("clusterName", cluster.managed_cluster.name)
pulumi.export("clusterResourceId", cluster.resource_id)
pulumi.export("oidcIssuerUrl", cluster.oidc_issuer_url)
pulumi.export("currentKubernetesVersion", cluster.current_kubernetes_version)
pulumi.export("nodePoolName", ib_pool.agent_pool.name)
pulumi.export("nodePoolResourceId", ib_pool.resource_id)
pulumi.export("vmSize", sku.vm_size)
pulumi.export("nodeCount", cfg.ib_pool.node_count)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("featureState", feature.state)
if fabric_check:
    for output_name, value in fabric_check.stack_outputs().items():
        pulumi.export(output_name, value)
else:
    pulumi.export("fabricVerdict", "not run: fabricTest.enabled is false")
