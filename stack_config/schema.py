"""Every key of the stack's configuration - type, default, description, check - in one table,
and the pinned versions, each in exactly one place."""

from __future__ import annotations

from core import choices, defaults, enterprise, fabric, modes, pins, rdma_drivers
from stack_config import checks, existing
from stack_config.engine import Key, int_range, one_of, optional, regex

PROJECT = "aks-infiniband"
LOCATION_KEY = "azure-native:location"

# --- pinned versions: each in exactly one place, the pin table (pins.COMPONENTS) ------------------
# The default Kubernetes minor is the compatibility matrix's newest (pins.MATRIX): the newest AKS GA
# minor that every pinned component states support for. AKS offers 1.36 GA, but Volcano v1.15 is
# validated only up to 1.35. Check `az aks get-versions -l <region>`.
DEFAULT_KUBERNETES_VERSION = pins.DEFAULT_KUBERNETES
DEFAULT_VERSIONS: dict[str, str] = {k: pins.component(k).version for k in pins.VERSION_KEYS}
VERSION_DESCRIPTIONS = {
    "nodeFeatureDiscovery": "node-feature-discovery Helm chart version.",
    "networkOperator": "NVIDIA Network Operator Helm chart version.",
    "docaDriver": "DOCA-OFED driver container tag (nvcr.io/nvidia/mellanox/doca-driver) in the NicClusterPolicy.",
    "rdmaSharedDevicePlugin": "k8s-rdma-shared-dev-plugin image tag (rdmaMode shared).",
    "sriovDevicePlugin": "sriov-network-device-plugin image tag (rdmaMode sriov).",
    "gpuOperator": "NVIDIA GPU Operator Helm chart version (with its leading v).",
    "volcano": "Volcano release tag whose installer/volcano-development.yaml is applied (checked by sha256).",
    "draDriver": "NVIDIA DRA driver (dra-driver-nvidia-gpu) Helm chart version (GB200/GB300, rdmaMode dra).",
    "dranet": "DRANET Helm chart version (rdmaMode dra).",
}
# What kind of pin each version is (core/pins.py): the same predicate the component taking it checks.
VERSION_PINS: dict[str, pins.Pin] = {k: pins.component(k).pin for k in pins.VERSION_KEYS}
# nccl-tests (/opt/nccl_tests/build/all_reduce_perf) + HPC-X OpenMPI + sshd: pins.COMPONENTS "ncclTestsImage".
DEFAULT_NCCL_TESTS_IMAGE = pins.component("ncclTestsImage").version

# The in-cluster certifier's image (the pin table's pythonImage) and schedule: core/defaults.py's, which
# components/fabric/certifier.py's Args take too.
DEFAULT_CERTIFIER_IMAGE = defaults.CERTIFIER_IMAGE
DEFAULT_CERTIFIER_SCHEDULE = defaults.CERTIFIER_SCHEDULE

# AKS's limit of nodes in one node pool (learn.microsoft.com/azure/aks/quotas-skus-regions, "Maximum nodes per
# node pool (Virtual Machine Scale Sets node pools)": 1000); what a fabric test costs at that size: docs/fabric-test.md.
MAX_NODES = 1000
# AKS's OS disk: its node images need 30 GB (learn.microsoft.com/azure/aks/create-node-pools, ephemeral OS), and
# the API takes at most 2048 (ManagedClusterAgentPoolProfile.osDiskSizeGB, maxValue 2048, API 2025-09-01).
OS_DISK_GB = (30, 2048)


# What a pool holds in both forms (ibPool, each entry of ibPools).
IB_SIZE = Key("vmSize", "string", "InfiniBand-capable VM size (see the SKU catalog).", required=True,
              check=checks.ib_size)
IB_NODE_COUNT = Key("nodeCount", "integer", "Nodes in the pool; 2 or more to test the fabric.", required=True,
                    check=int_range(1, MAX_NODES, " (1 only with fabricTest.enabled: false: the fabric test needs 2 "
                                                  "or more nodes)"))
IB_OS_DISK = Key("osDiskSizeGb", "integer", "OS disk size in GB (driver containers and the test image land here; "
                 "AKS takes 30 to 2048).", default=256, check=int_range(*OS_DISK_GB))
IB_MIN_NODE_COUNT = Key(
    "minNodeCount", "integer", "Turns on the AKS cluster autoscaler between this and nodeCount; nodes that "
    "come back are held until certified (docs/enterprise-deployment.md). 0 lets an idle pool cost "
    "nothing: nodes that come back together are certified against each other, and one back alone is held "
    "until a peer is (certifier.peerWaitMinutes).",
    default_doc="unset: a fixed size", check=optional(int_range(0, MAX_NODES)))
IB_RDMA_DRIVER = Key("rdmaDriver", "string", rdma_drivers.config_description(), default=rdma_drivers.DEFAULT,
                     check=one_of(*rdma_drivers.names()))


SCHEMA: tuple[Key, ...] = (
    Key("resourceGroupName", "string", "Resource group that holds the cluster (created by the stack).",
        default_doc="aks-infiniband-<stack>",
        check=regex(r"[-\w.()]{0,89}[-\w()]", "1-90 letters, digits, - _ . ( ), not ending in .")),
    Key("clusterName", "string", "AKS cluster name; also the DNS prefix.",
        default_doc="aks-ib-<stack>",
        # It doubles as the DNS prefix, which is stricter than the name: 1-54 characters, no underscore.
        check=regex(r"[A-Za-z0-9](?:[-A-Za-z0-9]{0,52}[A-Za-z0-9])?",
                    "1-54 letters, digits and -, starting and ending with a letter or digit "
                    "(it is also the cluster's DNS prefix)")),
    Key("kubernetesVersion", "string",
        "Pinned Kubernetes version of the cluster (AKS picks the newest patch of a MAJOR.MINOR).",
        default=DEFAULT_KUBERNETES_VERSION, check=checks.kubernetes_version),
    Key(pins.UNTESTED_KEY, "boolean",
        "Accept a kubernetesVersion or versions.* outside the compatibility matrix (docs/upgrading-pins.md); "
        "the plan and the `untestedVersions` output then name each untested value.", default=False),
    Key("systemPool", "object", "The small CPU pool that runs system pods and the operators' controllers. "
        "Set it at creation: AKS does not change a cluster's inline pool in place.",
        fields=(
            Key("vmSize", "string", "VM size of the system pool: a CPU size; a GPU or InfiniBand size only "
                "with allowGpuOrIbSize.", default="Standard_D4s_v5", check=checks.system_pool_size),
            Key("nodeCount", "integer", "Nodes in the system pool (AKS: up to 1,000 in a pool).", default=2,
                check=int_range(1, MAX_NODES)),
            Key("allowGpuOrIbSize", "boolean", "Allow a GPU or InfiniBand size in the system pool (it then runs "
                "system pods on the most expensive VMs).", default=False),
        )),
    Key("ibPool", "object", "The InfiniBand node pool: size from the SKU catalog, node count, disk. The one-pool form "
        "of ibPools (a map of one); set one of the two.", default_doc="required unless ibPools is set",
        fields=(IB_SIZE, IB_NODE_COUNT,
                Key("name", "string", "Agent pool name (Linux: 1-12 lowercase letters and digits).", default="ibpool",
                    check=checks.pool_name(fabric.SYSTEM_POOL_NAME)),
                IB_OS_DISK, IB_MIN_NODE_COUNT, IB_RDMA_DRIVER)),
    Key("ibPools", "object", "Several InfiniBand pools, each its own fabric (tested, certified and scheduled within "
        "itself): a map of agent pool name (Linux: 1-12 lowercase letters and digits, starting with a letter) to "
        "what ibPool holds, without name; fabricTest in an entry overrides the size-bound fabricTest keys for that "
        "pool. Not together with ibPool.", default_doc="unset: the one pool of ibPool",
        entries=(IB_SIZE, IB_NODE_COUNT, IB_OS_DISK, IB_MIN_NODE_COUNT, IB_RDMA_DRIVER,
                 Key("subnetId", "string", "An existing subnet of the system pool's VNet for this pool alone (AKS "
                     "puts every pool in one VNet, each in the subnet it names).", default_doc="network.ibSubnetId",
                     check=optional(enterprise.subnet_id)),
                 Key("movedFromIbPool", "boolean", "This entry was the stack's ibPool (keyed by ibPool.name, "
                     "default ibpool): its AgentPool answers to its one-pool resource names (Pulumi aliases), so "
                     "adding pools updates it in place instead of replacing it (docs/configuration.md#one-pool-"
                     "keeps-its-names). One entry at most.", default=False),
                 Key("fabricTest", "object", "This pool's own values of the fabricTest keys that depend on its size.",
                     fields=(
                         Key("thresholdGbps", "integer", "GPU sizes: this pool's all-reduce fail threshold (GB/s).",
                             default_doc="fabricTest.thresholdGbps", check=optional(int_range(1, 3200))),
                         Key("p2pThresholdGbits", "integer", "CPU-only sizes: this pool's point-to-point fail "
                             "threshold (Gb/s).", default_doc="fabricTest.p2pThresholdGbits",
                             check=optional(int_range(1, 1600))),
                         Key("allReduceArgs", "string", "GPU sizes: this pool's all_reduce_perf arguments.",
                             default_doc="fabricTest.allReduceArgs", check=optional(checks.all_reduce_args)),
                     ))),
        entry_name=checks.pool_name(fabric.SYSTEM_POOL_NAME)),
    Key("rdmaMode", "string", modes.config_description(), default=modes.DEFAULT, check=one_of(*modes.names())),
    Key("versions", "object", "Pinned chart and image versions; override one key at a time.",
        fields=tuple(Key(k, "string", VERSION_DESCRIPTIONS[k], default=v, check=VERSION_PINS[k].problem)
                     for k, v in DEFAULT_VERSIONS.items())),
    Key("fabricTest", "object", "The fabric test job that proves RDMA across nodes, and how its result is judged.",
        fields=(
            Key("enabled", "boolean", "Run the test job and report its result as stack outputs.", default=True),
            Key("image", "string", "Image with nccl-tests, OpenMPI and sshd, as name:tag or name:tag@sha256:<digest>.",
                default=DEFAULT_NCCL_TESTS_IMAGE,
                check=pins.IMAGE_REF.problem),
            Key("allReduceArgs", "string", "Arguments of all_reduce_perf (its buffers must fit the GPU's memory).",
                default_doc="-b 8 -e 16G -f 2 -g 1; -e 8G on 40 GB GPUs", check=checks.all_reduce_args),
            Key("timeoutMinutes", "integer", "Deadline of the job and of the wait for its result.", default=60,
                check=int_range(5, 720)),
            Key("failOnLowBandwidth", "boolean", "Fail `pulumi up` on a bad verdict (which one: failOn).",
                default=False),
            Key("failOn", "string", "With failOnLowBandwidth: the verdict that fails `pulumi up`: `fail` (FAIL "
                "only) or `warn` (anything but PASS: WARN, UNKNOWN, FAIL).", default=choices.DEFAULT_GATE_LEVEL,
                check=one_of(*choices.GATE_LEVELS)),
            Key("thresholdGbps", "integer", "GPU sizes: override the catalog's all-reduce fail threshold (GB/s busbw).",
                default_doc="from the SKU catalog", check=optional(int_range(1, 3200))),
            Key("doctor", "string",
                "GPU sizes: the fabric doctor (per-node checks, pairwise all-reduces, per-HCA ib_write_bw) that "
                "names the node or HCA behind a slow fabric: `auto` runs it only when the all-nodes run is not "
                "PASS, `always`, or `never`.", default="auto", check=one_of(*choices.DOCTOR_MODES)),
            Key("doctorMinutes", "integer", "The most time the doctor may add to the job (its steps are skipped "
                "once it is spent); added to the job's deadline unless doctor is never.",
                default=defaults.DOCTOR_MINUTES, check=int_range(1, 120)),
            Key("p2pThresholdGbits", "integer",
                "CPU-only sizes (HB/HX): override the catalog's point-to-point fail threshold (Gb/s, bits, at the "
                "largest message).", default_doc="from the SKU catalog", check=optional(int_range(1, 1600))),
            Key("sharp", "boolean",
                "GPU sizes: all-reduce through SHARP (CollNet, HPC-X's plugin in the image, Azure's SHARP "
                "variables) instead of NCCL's own InfiniBand transport (`NCCL_NET_PLUGIN=none`), which the "
                "catalog's thresholds judge; the result says which was measured (docs/nccl-tuning.md).",
                default=False),
            Key("topologyFile", "boolean",
                "GPU sizes with a published NCCL topology file (ND v4, ND v5): mount it as `NCCL_TOPO_FILE`, as "
                "Azure's AKS NCCL test does; false lets NCCL detect the topology, as Azure's health checks do "
                "since azurehpc-health-checks#143 (docs/nccl-tuning.md).", default=True),
        )),
    Key("certifier", "object", "The in-cluster fabric certifier (docs/fabric-certifier.md): judges the fabric test "
        "for `pulumi up`, holds new IB nodes until they pass, re-certifies idle ones, quarantines a failing one.",
        fields=(
            Key("mode", "string", "`taint`: the admission loop holds every new boot under the `uncertified` taint "
                "(put on through the Kubernetes API, not by the AgentPool) until it passes, and a failing node is "
                "quarantined by taint; `label`: only the FabricCertified condition, a label and Events "
                "(no taint anywhere); `off`: judge and report only.", default=choices.DEFAULT_CERTIFIER_MODE,
                check=one_of(*choices.CERTIFIER_MODES)),
            Key("schedule", "string", "When to re-certify idle IB nodes (a cron schedule, UTC), or `off`.",
                default=DEFAULT_CERTIFIER_SCHEDULE, check=checks.cron_or_off),
            Key("maxQuarantinePercent", "integer", "The circuit breaker: never more than this share of the pool "
                "quarantined (and never the last two certified nodes).", default=25, check=int_range(0, 100)),
            Key("historySize", "integer", "Certification records kept per node (a ConfigMap ring).", default=10,
                check=int_range(1, 50)),
            Key("peerWaitMinutes", "integer", "With mode taint: how long a held node with no peer in its pool to be "
                "tested with (scale to zero: a node back alone) waits before it is reported by a Warning Event; it "
                "stays held, never admitted untested.", default=choices.DEFAULT_PEER_WAIT_MINUTES,
                check=int_range(1, 720)),
            Key("image", "string", "Image with Python 3.11+ that runs the certifier (the code is mounted).",
                default=DEFAULT_CERTIFIER_IMAGE, check=pins.IMAGE_REF.problem),
            Key("pushgatewayUrl", "string", "Prometheus Pushgateway to push each run's metrics to.",
                default_doc="none: Events and node conditions only",
                check=optional(checks.http_url)),
        )),
    # --- alerts: the certifier's rules for a Prometheus Operator already in the cluster ---
    Key("alerts", "object", "Alert rules for the certifier (docs/fabric-certifier.md#metrics-and-alerting): a "
        "PrometheusRule and a PodMonitor for the admission loop's metrics; needs the Prometheus Operator's CRDs "
        "and kube-state-metrics in the cluster (the stack installs neither).",
        fields=(
            Key("enabled", "boolean", "Declare the PrometheusRule and the PodMonitor (monitoring.coreos.com/v1).",
                default=False),
        )),
    Key("featureWaitTimeoutMinutes", "integer", "How long to wait for AKSInfinibandSupport to reach Registered.",
        default=30, check=int_range(1, 120)),
    Key("tags", "object", "Azure tags on every resource that takes them.", default_doc="{project, stack}",
        check=checks.tags),
    Key("protect", "boolean", "Protect the resource group, cluster and node pool from deletion (production stacks).",
        default=False),
    # --- the platform-team options (core/enterprise.py; docs/enterprise-deployment.md) ---
    Key("apiServer", "object", "Who can reach the API server: public (optionally limited to authorized ranges) "
        "or private.",
        fields=(
            Key("private", "boolean", "A private API server, reachable only from its network (run `pulumi up` "
                "from there, or split the stack: stackPart).", default=False),
            Key("privateDnsZone", "string", "With private: `system`, `none`, or the id of your own private DNS zone.",
                default_doc="system", check=optional(enterprise.private_dns_zone)),
            Key("vnetIntegration", "boolean", "Project the API server into a delegated subnet of the cluster's VNet "
                "(API Server VNet Integration).", default=False),
            Key("subnetId", "string", "With vnetIntegration and your own subnets: the API server's subnet.",
                default_doc="-", check=optional(enterprise.subnet_id)),
            Key("authorizedIpRanges", "array", "A public API server answers only these IPv4 CIDRs (your egress "
                "addresses); empty: everyone.", default=[], check=enterprise.authorized_ranges),
        )),
    Key("entraId", "object", "Microsoft Entra ID sign-in with Azure RBAC; the Kubernetes provider then "
        "authenticates with kubelogin.",
        fields=(
            Key("enabled", "boolean", "Entra ID integration with Azure RBAC for Kubernetes authorization.",
                default=False),
            Key("localAccounts", "boolean", "Keep the static local accounts (false: disableLocalAccounts).",
                default_doc="false with enabled, true without"),
            Key("adminGroupObjectIds", "array", "Entra ID groups that are cluster admins.", default=[],
                check=enterprise.guids),
            Key("kubeloginMode", "string", "How the Kubernetes provider signs in: `azurecli` (a laptop after "
                "`az login`), `workloadidentity` (a federated CI job), `spn` (a service principal), `msi` "
                "(a runner VM's managed identity).", default="azurecli", check=one_of(*enterprise.KUBELOGIN_MODES)),
            Key("grantDeployerClusterAdmin", "boolean", "Give the identity running `pulumi up` the Azure Kubernetes "
                "Service RBAC Cluster Admin role on the cluster (it installs the operators).", default=True),
            Key("deployerPrincipalType", "string", "What that identity is: `User` (a person after `az login`) or "
                "`ServicePrincipal` (CI, a managed identity); Azure refuses a role assignment of the wrong type. "
                "Derived from kubeloginMode where it tells (msi, spn, workloadidentity: ServicePrincipal); set it "
                "only for `azurecli` signed in as a service principal.",
                default_doc="from kubeloginMode: User for azurecli",
                check=optional(one_of(*enterprise.PRINCIPAL_TYPES))),
        )),
    Key("identity", "object", "User-assigned identities for the control plane and the kubelet (unset: AKS's "
        "system-assigned ones).",
        fields=(
            Key("controlPlaneIdentityId", "string", "Resource id of the control plane's user-assigned identity.",
                default_doc="-", check=optional(enterprise.identity_id)),
            Key("kubeletIdentityId", "string", "Resource id of the kubelet's user-assigned identity (needs "
                "controlPlaneIdentityId, which needs Managed Identity Operator on it).",
                default_doc="-", check=optional(enterprise.identity_id)),
        )),
    Key("network", "object", "The cluster's network: your subnets, the CNI, service and pod ranges, egress.",
        fields=(
            Key("systemSubnetId", "string", "An existing subnet for the system pool (unset: AKS creates a VNet).",
                default_doc="-", check=optional(enterprise.subnet_id)),
            Key("ibSubnetId", "string", "An existing subnet of the same VNet for the InfiniBand pool (with ibPools: "
                "for each pool that names no subnetId of its own).",
                default_doc="-", check=optional(enterprise.subnet_id)),
            Key("plugin", "string", "Network plugin: `azure` (Azure CNI Overlay: pod IPs from podCidr) or `none` "
                "(bring your own CNI).",
                default="azure", check=one_of(*enterprise.NETWORK_PLUGINS)),
            Key("dataplane", "string", "`azure` or `cilium` (Azure CNI Powered by Cilium, with Cilium network "
                "policy).", default_doc="azure (AKS's default)", check=optional(one_of(*enterprise.DATAPLANES))),
            Key("podCidr", "string", "Overlay pod range.", default_doc="10.244.0.0/16 (AKS's default)",
                check=optional(enterprise.cidr)),
            Key("serviceCidr", "string", "Service range, /12 or narrower (not overlapping the pod range or your VNet).",
                default_doc="10.0.0.0/16 (AKS's default)", check=optional(enterprise.service_cidr)),
            Key("dnsServiceIp", "string", "Cluster DNS service address, inside serviceCidr.",
                default_doc="10.0.0.10 (AKS's default)", check=optional(enterprise.ipv4_address)),
            Key("outboundType", "string", "Egress: `loadBalancer`, `userDefinedRouting` (your firewall through the "
                "subnet's route table), `managedNATGateway`, `userAssignedNATGateway`.",
                default_doc="loadBalancer (AKS's default)", check=optional(one_of(*enterprise.OUTBOUND_TYPES))),
        )),
    Key("stackPart", "string", "`all` (one stack), or one half of the split for private clusters: `azure` (the "
        "cluster and pools) or `kubernetes` (operators, Volcano, the fabric test; run inside the network).",
        default="all", check=one_of(*enterprise.STACK_PARTS)),
    Key("azureStack", "string", "With stackPart kubernetes: the Azure part's stack, read through a StackReference.",
        default_doc="-", check=optional(enterprise.stack_reference)),
    Key("production", "boolean", "A production stack: the policy pack's access guardrails become mandatory "
        "(advisory otherwise).", default=False),
    # --- a cluster that already exists, charts from local archives (stack_config/existing.py) ---
    *existing.KEYS,
)
SCHEMA_BY_NAME = {k.name: k for k in SCHEMA}
