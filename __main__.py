"""aks-infiniband: an AKS cluster whose GPU nodes talk InfiniBand RDMA from inside pods, proven by
an NCCL all-reduce. Reads the configuration, declares the stack's halves, exports the outputs.

One stack by default (`stackPart: all`). A private cluster can be split into two stacks of this
project (docs/enterprise-deployment.md): `azure` (rows 1-3 of the design: stack/azure.py) and
`kubernetes` (rows 4-11: stack/kubernetes.py), the second reading the first's outputs
(stack/handoff.OUTPUTS) through a StackReference, run from a runner inside the network.
"""

import pulumi

import stack_config
from stack import azure as azure_half
from stack import existing_cluster, handoff, preinstalled
from stack import kubernetes as kubernetes_half
from stack.fabric_outputs import stack_outputs_by_pool

cfg = stack_config.load()  # stops here, with every bad key named, before any resource exists
if cfg.untested:
    pulumi.log.warn("untested combination (allowUntestedVersions): "
                    + ", ".join(f"{k} {v}" for k, v in cfg.untested) + "; the compatibility matrix is in core/pins.py")

# Volcano's release manifest, checked against its pinned sha256 before any resource exists.
volcano_manifest = kubernetes_half.checked_volcano_manifest(cfg) if cfg.stack_part != "azure" else None
# On an existing cluster, at `up`: its IB pool checked against ibPool, and what the stack relies on of the
# components another owner runs there (existingCluster.preinstalled), before any resource.
if cfg.existing_cluster:
    existing_cluster.check_pool(cfg)
    preinstalled.check(cfg)

# 1-3. Feature registration, cluster (and its Kubernetes provider), InfiniBand pool.
azure = azure_half.declare(cfg) if cfg.stack_part != "kubernetes" else None
# 4-11. Operators, Volcano, the fabric test, its verdict and the certifier, on that cluster or the Azure stack's.
cluster = azure.handle if azure else (
    existing_cluster.handle(cfg) if cfg.existing_cluster else handoff.from_stack_reference(cfg))
kubernetes = kubernetes_half.declare(cfg, cluster, volcano_manifest) if cfg.stack_part != "azure" else None

if azure:
    c = azure.cluster
    pulumi.export("resourceGroupName", c.resource_group.name)
    pulumi.export("clusterName", c.managed_cluster.name)
    pulumi.export("clusterResourceId", c.resource_id)
    pulumi.export("oidcIssuerUrl", c.oidc_issuer_url)
    pulumi.export("currentKubernetesVersion", c.current_kubernetes_version)
    if len(cfg.ib_pools) == 1:  # the one pool's outputs, as they always were
        pulumi.export("nodePoolName", azure.ib_pool.agent_pool.name)
        pulumi.export("nodePoolResourceId", azure.ib_pool.resource_id)
        pulumi.export("vmSize", cfg.sku.vm_size)
        pulumi.export("nodeCount", cfg.ib_pool.node_count)
    else:  # several: one map, keyed by pool name
        pulumi.export("ibPools", {p.name: {"nodePoolName": azure.ib_pools[p.name].agent_pool.name,
                                           "nodePoolResourceId": azure.ib_pools[p.name].resource_id,
                                           "vmSize": p.sku.vm_size, "nodeCount": p.node_count}
                                  for p in cfg.ib_pools})
    pulumi.export("kubeconfig", c.kubeconfig)  # secret
    pulumi.export("kubernetesAuth", c.auth)
    pulumi.export("featureState", azure.feature.state)
    pulumi.export("estimatedCostPerHour", azure.cost_per_hour(cfg))
if kubernetes and kubernetes.fabric_check:
    for output_name, value in kubernetes.fabric_check.stack_outputs().items():
        pulumi.export(output_name, value)
elif kubernetes and kubernetes.fabric_checks:  # several pools: each output a map keyed by pool name
    for output_name, value in stack_outputs_by_pool(kubernetes.fabric_checks).items():
        pulumi.export(output_name, value)
elif kubernetes:
    pulumi.export("fabricVerdict", "not run: fabricTest.enabled is false")
if cfg.untested:
    pulumi.export("untestedVersions", {k: v for k, v in cfg.untested})
if kubernetes and kubernetes.rack_check:  # rackFabricVerdict, rackAllReduceBusBwAtMaxSizeGbps, ...: apart
    for output_name, value in kubernetes.rack_check.stack_outputs().items():
        pulumi.export(f"rack{output_name[0].upper()}{output_name[1:]}", value)
