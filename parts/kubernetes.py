"""The Kubernetes part: rows 4-9 of the design (NFD, Network Operator, GPU Operator, Volcano, the fabric
test and the step that collects its verdict), on the cluster that `handoff.ClusterHandle` names."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import certifier as certifier_mod
from components.certifier import Certifier, CertifierArgs
from components.dra_driver import DraDriver, DraDriverArgs
from components.dranet import Dranet, DranetArgs
from components.fabric_check import FabricCheck, FabricCheckArgs
from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.image_prepull import ImagePrepull, ImagePrepullArgs
from components.nccl_job import NcclJob, NcclJobArgs
from components.network_operator import NetworkOperator, NetworkOperatorArgs
from components.node_feature_discovery import NodeFeatureDiscovery, NodeFeatureDiscoveryArgs
from components.p2p_job import P2pJob, P2pJobArgs
from components.topology_labeler import TopologyLabeler, TopologyLabelerArgs
from components.volcano import Volcano, VolcanoArgs
from core import dra, fabric, modes
from core.kinds import ALL_REDUCE, POINT_TO_POINT, kind_for
from parts.handoff import ClusterHandle
from stack_config import StackConfig


@dataclass(frozen=True)
class KubernetesPart:
    fabric_check: FabricCheck | None
    # GB200/GB300 in one NVL72 rack: the rack's NVLink run, reported beside the verdict (`rack...` outputs)
    rack_check: FabricCheck | None = None


def declare(cfg: StackConfig, cluster: ClusterHandle, volcano_manifest: str) -> KubernetesPart:
    """`volcano_manifest`: Volcano's release manifest as checked against its pin (components/volcano.py)."""
    sku = cfg.sku
    # 4-7. The Kubernetes layer: NFD, Network Operator + NicClusterPolicy, GPU Operator (GPU sizes
    # only), Volcano. Each waits only for the cluster's provider (and its own CRDs), never for the IB
    # pool, so all of it installs while the pool is still being created.
    k8s_opts = pulumi.ResourceOptions(provider=cluster.provider)
    v = cfg.versions
    NodeFeatureDiscovery("nfd", NodeFeatureDiscoveryArgs(version=v.node_feature_discovery), opts=k8s_opts)
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
    # GPUs (and in rdmaMode dra the HCAs) as DRA claims: GB200/GB300 and rdmaMode dra (core/dra.py)
    uses_dra = dra.needs(sku, cfg.rdma_mode) is not None
    gpu_operator = (
        GpuOperator("gpu-operator", GpuOperatorArgs(version=v.gpu_operator, dra_gpus=uses_dra), opts=k8s_opts)
        if sku.has_gpus else None
    )
    # The NVIDIA DRA driver (GPUs as claims; ComputeDomains on multi-node-NVLink sizes) and, in rdmaMode
    # dra, DRANET (HCAs as claims): like the operators, they wait only for the cluster.
    dra_driver = DraDriver("dra-driver", DraDriverArgs(version=v.dra_driver, compute_domains=sku.has_mnnvl),
                           opts=k8s_opts) if uses_dra else None
    dranet = (Dranet("dranet", DranetArgs(version=v.dranet), opts=k8s_opts)
              if modes.rdma_mode(cfg.rdma_mode).dra else None)
    dra_parts = [*([dra_driver.release] if dra_driver else []),
                 *([dranet.release, dranet.device_class] if dranet else [])]
    dra_versions = {**(dra_driver.driver_versions if dra_driver else {}), **(dranet.driver_versions if dranet else {})}
    volcano = Volcano("volcano", VolcanoArgs(version=v.volcano, manifest=volcano_manifest, dra=uses_dra),
                      opts=k8s_opts)
    # 11. Each IB node labelled with its torset, partition key, physical host and placement group as it
    # joins (Azure's label names), for the certifier's membership check and Volcano's HyperNodes.
    # With the DRA driver, also the label its kubelet plugin selects, through the API (the driver manager
    # rewrites it, which AKS refuses for a pool label; Azure's deploy script labels the nodes by hand too).
    TopologyLabeler("topology", TopologyLabelerArgs(
        cpu_arch=sku.cpu_arch, extra_labels={fabric.DRA_KUBELET_PLUGIN_LABEL: "true"} if uses_dra else {}),
        opts=k8s_opts)

    # 8-9. The fabric test: the job, which alone waits for everything, and the step that collects its
    # result into the outputs. GPU sizes run the NCCL all-reduce (judged in GB/s busbw); CPU-only
    # HB/HX sizes run MPI point to point between two nodes (osu_bw, osu_latency; judged in Gb/s).
    ft, kind = cfg.fabric_test, kind_for(sku)
    if ft.enabled:
        # The test image, pulled on each IB node as it joins, while the drivers install: waits for
        # nothing but the cluster, so the job's pods find it there (components/image_prepull.py).
        ImagePrepull("fabric-test-prepull", ImagePrepullArgs(image=ft.image), opts=k8s_opts)
    fabric_job = None
    if ft.enabled and kind is ALL_REDUCE:
        nccl_wait_for = [*cluster.pool, network_operator.policy, gpu_operator.release, volcano.manifest, *dra_parts]
        nccl_versions = {**network_operator.driver_versions, **gpu_operator.driver_versions, **dra_versions}
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
                wait_for=nccl_wait_for,
                driver_versions=nccl_versions,
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
                wait_for=[*cluster.pool, network_operator.policy, volcano.manifest],
                driver_versions=network_operator.driver_versions,
            ),
            opts=k8s_opts,
        )
    elif ft.enabled:
        raise ValueError(f"fabricTest: no job runs the {kind.name!r} fabric test (core/kinds.py)")
    # 10. The certifier: the same verify code in the cluster. It judges the test for `pulumi up` (a Job the
    # Kubernetes provider awaits), holds new nodes until they pass, re-certifies idle ones on a schedule.
    fabric_check = None
    # GB200/GB300 in one NVL72 rack: the rack's NVLink run (MNNVL on), after the IB-only verdict run
    # (both take every GPU), judged by the catalog's rack figure, reported beside the verdict, never in it.
    rack = bool(fabric_job and kind is ALL_REDUCE and sku.has_mnnvl and cfg.ib_pool.node_count <= sku.mnnvl_rack_nodes)
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
                retest=fabric_job.retest if kind is ALL_REDUCE else None, rack=rack,
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
                fail_on=ft.fail_on,
            ),
            opts=k8s_opts,
        )
    rack_check = None
    if rack:
        rack_job = NcclJob(
            "fabric-test-rack",
            NcclJobArgs(
                sku=sku, node_count=cfg.ib_pool.node_count, rdma_mode=cfg.rdma_mode, image=ft.image,
                all_reduce_args=ft.all_reduce_args, timeout_minutes=ft.timeout_minutes, sharp=False,
                topology_file=ft.topology_file, rack_run=True, namespace_name="fabric-test-rack",
                # after the verdict's certify Job: both runs take every GPU of the pool
                job_name="nccl-allreduce-rack", wait_for=[*nccl_wait_for, fabric_check.certify],
                driver_versions=nccl_versions,
            ),
            opts=k8s_opts,
        )
        access = certifier_mod.role("certifier-rack", rack_job.namespace_name, certifier_mod.rack_rules(),
                                    pulumi.ResourceOptions(parent=certifier, depends_on=[rack_job.namespace]))
        # judged only (--mode off): no threshold of fabricTest's, no gate; the outputs say the figure
        rack_check = FabricCheck("fabric-check-rack", FabricCheckArgs(job=rack_job, certifier=certifier,
                                                                      wait_for=[access]), opts=k8s_opts)
    return KubernetesPart(fabric_check=fabric_check, rack_check=rack_check)
