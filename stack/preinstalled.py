"""The components another owner runs on a cluster that already exists (`existingCluster.preinstalled`,
docs/existing-cluster.md): what the stack relies on of each, read at `up` before any resource is declared.

The stack declares none of such a component's objects (stack/operators.py), so nothing of it fights that
owner's. What the stack's own objects need of it is checked instead, like the pool (stack/existing_cluster.py):
the CRD of each custom resource the stack declares (or of the Job the fabric test runs), served at that
resource's version, and each setting of the other owner's objects the stack relies on: the NicClusterPolicy's
driver container and RDMA resource, the ClusterPolicy's GPUDirect settings, and, for the fabric test, Volcano's
`default` queue and its scheduler's DRA switches. A preview does not read the cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from clusterside import kube_api
from components.fabric import mpi_job
from components.platform import gpu_operator, network_operator, node_feature_discovery, volcano, volcano_dra
from components.platform.volcano_pools import QUEUE_API_VERSION
from core import dra, fabric
from stack import existing_cluster
from stack_config import PROJECT, StackConfig, existing

KEY = f"{PROJECT}:{existing.EXISTING_CLUSTER}.preinstalled"
# A GET of an API path: the object, or None where the server has none (404).
Read = Callable[[str], Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# Where Volcano's release (its manifest and its Helm chart, released as `volcano`) keeps its scheduler.
VOLCANO_SCHEDULER_CONFIGMAP = f"/api/v1/namespaces/{volcano.NAMESPACE}/configmaps/{volcano_dra.SCHEDULER_CONFIGMAP}"
VOLCANO_SCHEDULER = f"/apis/apps/v1/namespaces/{volcano.NAMESPACE}/deployments/{volcano_dra.SCHEDULER}"


def crd_problem(read: Read, plural: str, api_version: str, field: str | None = None) -> str | None:
    """Why the cluster cannot hold a `<plural>` object of `api_version` (with `spec.<field>`, which a CRD
    without it would silently drop), or None."""
    group, _, version = api_version.rpartition("/")
    name = f"{plural}.{group}"
    crd = read(f"{CRDS}/{name}")
    if crd is None:
        return f"no CRD {name}"
    versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")}
    if version not in versions:
        return f"CRD {name} serves {', '.join(sorted(map(str, versions))) or 'no version'}, not {version}"
    spec = (((versions[version].get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}).get(
        "spec") or {}
    if field and field not in (spec.get("properties") or {}) and not spec.get("x-kubernetes-preserve-unknown-fields"):
        return f"CRD {name} at {version} has no spec.{field}"
    return None


def nfd_problems(cfg: StackConfig, read: Read) -> list[str]:
    """The stack's own NodeFeatureRule stays: its CRD must be served. NFD's worker reports every PCI device, so
    the rule matches whatever the other owner's worker labels."""
    return _some(crd_problem(read, "nodefeaturerules", node_feature_discovery.NODE_FEATURE_RULE_API_VERSION))


def network_problems(cfg: StackConfig, read: Read) -> list[str]:
    """The one NicClusterPolicy the operator acts on, with what the pool and the mode rely on."""
    problem = crd_problem(read, "nicclusterpolicies", network_operator.NIC_CLUSTER_POLICY_API_VERSION)
    if problem:
        return [problem]
    name = network_operator.NIC_CLUSTER_POLICY_NAME
    policy = read(f"/apis/{network_operator.NIC_CLUSTER_POLICY_API_VERSION}/nicclusterpolicies/{name}")
    if policy is None:
        return [f"no NicClusterPolicy {name} (the only one the Network Operator acts on)"]
    return [f"NicClusterPolicy {name}: {p}"
            for p in network_operator.policy_problems(policy.get("spec") or {}, cfg.rdma_mode, cfg.rdma_driver)]


def gpu_problems(cfg: StackConfig, read: Read) -> list[str]:
    """The ClusterPolicy the operator acts on (its chart makes it), with the GPUDirect and DRA settings."""
    problem = crd_problem(read, "clusterpolicies", gpu_operator.CLUSTER_POLICY_API_VERSION)
    if problem:
        return [problem]
    listed = read(f"/apis/{gpu_operator.CLUSTER_POLICY_API_VERSION}/clusterpolicies") or {}
    # With several, the operator acts on one and marks the others `ignored` (ClusterPolicyStatus.State).
    policies = [p for p in listed.get("items") or [] if (p.get("status") or {}).get("state") != "ignored"]
    if not policies:
        return ["no ClusterPolicy (the GPU Operator's chart makes one with clusterPolicy.deployCR)"]
    dra_gpus = any(dra.needs(sku, cfg.rdma_mode) is not None for sku in cfg.skus)
    return [f"ClusterPolicy {p['metadata']['name']}: {problem}" for p in policies
            for problem in gpu_operator.cluster_policy_problems(p.get("spec") or {}, cfg.rdma_driver, dra_gpus)]


def volcano_problems(cfg: StackConfig, read: Read) -> list[str]:
    """The fabric test's Volcano Job must be accepted whole; with the test on, its queue must exist and, where
    it claims devices, the scheduler must allocate them."""
    problems = _some(crd_problem(read, "jobs", mpi_job.JOB_API_VERSION, "networkTopology"))
    if not cfg.fabric_test_enabled or problems:
        return problems
    queue = crd_problem(read, "queues", QUEUE_API_VERSION)
    if queue is None and read(f"/apis/{QUEUE_API_VERSION}/queues/{fabric.DEFAULT_QUEUE}") is None:
        queue = f"no Queue {fabric.DEFAULT_QUEUE} (the fabric test's Job runs in it; Volcano's controllers make it)"
    problems += _some(queue)
    if any(dra.needs(sku, cfg.rdma_mode) is not None for sku in cfg.skus):
        problems += [f"{volcano.NAMESPACE}: {p} (the fabric test claims devices, which Volcano's scheduler allocates "
                     "only with DRA on)" for p in volcano_dra.missing(read(VOLCANO_SCHEDULER_CONFIGMAP),
                                                                      read(VOLCANO_SCHEDULER))]
    return problems


CHECKS: dict[str, Callable[[StackConfig, Read], list[str]]] = {
    existing.NFD: nfd_problems, existing.NETWORK_OPERATOR: network_problems, existing.GPU_OPERATOR: gpu_problems,
    existing.VOLCANO: volcano_problems}


def problems(cfg: StackConfig, read: Read) -> list[str]:
    """One line per thing missing, each naming the key, the component and what it lacks."""
    there = existing.owned_elsewhere(cfg)
    return [f"{KEY}: got {component}; {p}" for component in existing.PREINSTALLABLE if component in there
            for p in CHECKS[component](cfg, read)]


def _some(problem: str | None) -> list[str]:
    return [problem] if problem else []


def check(cfg: StackConfig) -> None:
    """At `up` (a preview does not read the cluster), with components preinstalled: stop with one line per thing
    they lack, or with what kept the cluster from being read, before any resource is declared."""
    if not existing.owned_elsewhere(cfg) or pulumi.runtime.is_dry_run():
        return
    api = kube_api.Api(existing_cluster.credentials(cfg))

    def read(path: str) -> Mapping[str, Any] | None:
        try:
            return api.get(path)
        except kube_api.ApiError as exc:
            if exc.status == 404:
                return None
            raise

    try:
        found = problems(cfg, read)
    except kube_api.ApiError as exc:
        raise pulumi.RunError(f"existingCluster.preinstalled: cannot read what the stack relies on: {exc} "
                              "(nothing was changed)") from None
    if found:
        lines = "\n  ".join(found)
        raise pulumi.RunError("the components existingCluster.preinstalled names lack what the stack relies on "
                              f"(nothing was changed; set them up, or remove them from the list for the stack to "
                              f"install them):\n  {lines}")
