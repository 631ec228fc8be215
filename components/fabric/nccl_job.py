"""Row 8: the NCCL all-reduce across the InfiniBand pool, as a gang-scheduled Volcano MPI job.

One `mpimaster` pod runs `scripts/nccl-launcher.sh` (mpirun over `all_reduce_perf`); one
`mpiworker` pod per node runs sshd and holds all of its node's GPUs and RDMA devices. The job's
shape (gang scheduling, ssh/svc plugins, placement, security, replacement) is `components.fabric.mpi_job`;
this file holds what is NCCL's: the environment, the topology file, the GPU requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.fabric import fabric_claims, mpi_job, nccl_settings
from components.fabric.fabric_test import number_arg as _gbps  # the doctor's GB/s lines, written as the verdict's
from components.fabric.nccl_settings import TOPOLOGY_DIR, TOPOLOGY_KEY, binding, nccl_env
from components.fabric.nccl_topology import render_xml
from core import choices, defaults, dra, fabric, modes, nccl_sizing, pins, rdma_drivers
from core.catalog import Sku
from core.kinds import ALL_REDUCE, Kind
from core.modes import RdmaMode
from core.rdma_drivers import RdmaDriver
from verify import doctor, doctor_checks, launcher_env
from verify.verdict import pass_line_gbps

core = k8s.core.v1

LAUNCHER_SCRIPT = mpi_job.SCRIPTS / ALL_REDUCE.launcher
ALL_REDUCE_BIN = "/opt/nccl_tests/build/all_reduce_perf"  # path in the nccl-tests image
# Per rank (one per GPU): a CPU core and host memory for its buffers and the NCCL proxy thread.
CPU_PER_RANK, MEMORY_GI_PER_RANK = 1, 8
# How mpirun's output reaches the log: condensed (NCCL's INFO lines verify reads, once per host) or full.
LAUNCHER_NCCL_LOG = "condensed"
# The doctor's per-HCA ib_write_bw: at most this many slow pairs (each takes one HCA at a time).
DOCTOR_HCA_PAIRS = 2
# At most this many nodes' checks, or pairs, at a time: each is an mpirun in the launcher's pod.
DOCTOR_PARALLEL = 16
# One HCA's ib_write_bw: at most this long, its client started this long after its server.
PERFTEST_SECONDS, PERFTEST_START_SECONDS = 60, 2
# ib_write_bw's arguments as Azure's health checks measure the gates the doctor judges by
# (Azure/azurehpc-health-checks@0e0a1ac), by the memory it moves (the launcher adds --use_cuda=<the HCA's
# index> for cuda): customTests/azure_ib_write_bw_gdr.nhc, and azure_ib_write_bw_non_gdr.nhc with its
# MSG_SIZE default of 1048576.
PERFTEST_ARGS = {"cuda": "-s 8388608 -x 0 -F --report_gbits --perform_warm_up",
                 "host": "-s 1048576 -D 10 -x 0 -F --report_gbits --perform_warm_up -q 2"}


@dataclass(frozen=True)
class NcclJobArgs:
    sku: Sku
    node_count: int
    rdma_mode: RdmaMode  # how the workers get the HCAs (core.modes.MODES)
    image: str
    all_reduce_args: str
    timeout_minutes: int  # the pods' activeDeadlineSeconds
    # HPC-X's SHARP plugin with CollNet (True), or NCCL's own IB transport (False, what the catalog's
    # lines judge); and whether to mount Azure's NCCL topology file where one exists (see
    # components/fabric/nccl_settings.py for both).
    sharp: bool = False
    topology_file: bool = True
    # What the job must wait for: the IB pool, the NicClusterPolicy, the GPU Operator, Volcano.
    # Passed to the Job itself (a component's depends_on is not inherited by its children).
    wait_for: Sequence[pulumi.Resource] = ()
    # Operator charts and drivers the test runs against (NetworkOperator/GpuOperator.driver_versions):
    # on every pod, so a change of any re-runs the test (mpi_job.DRIVER_VERSIONS_ANNOTATION).
    driver_versions: Mapping[str, str] = field(default_factory=dict)
    namespace_name: str = mpi_job.NAMESPACE
    job_name: str = "nccl-allreduce"  # the pods' name label; the Job's name adds its spec's hash (mpi_job.hashed_name)
    # In a stack of several IB pools, the pool the job runs in (each its own fabric); None: every IB node.
    agent_pool: str | None = None
    # The fabric doctor (verify/doctor.py, run by the launcher): core.choices.DOCTOR_MODES; its budget is
    # added to the pods' deadline unless it is never. threshold_gbps: the user's all-reduce threshold
    # (fabricTest.thresholdGbps), which moves the doctor's pass line as it moves the verdict's.
    doctor: str = "never"
    doctor_minutes: int = defaults.DOCTOR_MINUTES  # fabricTest.doctorMinutes' default
    threshold_gbps: float | None = None
    # The rack's NVLink run of a multi-node-NVLink size (GB200/GB300): MNNVL and NVLS on, every worker
    # in one NVL72 clique, the ComputeDomain's channel claimed; judged by the catalog's rack figure,
    # beside the IB-only verdict run and never in it (components/fabric/nccl_settings.py RACK_RUN).
    rack_run: bool = False
    # The pool's RDMA driver stack (core/rdma_drivers.py): NCCL's DMA-BUF setting, and how the certifier judges.
    rdma_driver: RdmaDriver = rdma_drivers.DOCA

    @property
    def deadline_minutes(self) -> int:
        """The pods' deadline: the test's timeout plus the doctor's budget when it may run."""
        return self.timeout_minutes + (self.doctor_minutes if self.doctor != "never" else 0)

    def __post_init__(self) -> None:
        if self.sku.has_gpus != ALL_REDUCE.gpus:
            raise ValueError(
                f"sku: {self.sku.vm_size} has no GPUs; the NCCL all-reduce needs GPU sizes "
                f"(CPU-only sizes get a separate fabric test)"
            )
        nccl_settings.family(self.sku)  # raises for a generation with no NCCL settings family
        if self.node_count < 1:
            raise ValueError(f"node_count: got {self.node_count}; expected 1 or more")
        pins.IMAGE_REF.require("image", self.image)
        too_big = nccl_sizing.fit_problem(self.all_reduce_args, self.sku)
        if too_big:
            raise ValueError(f"all_reduce_args: got {self.all_reduce_args!r}; {too_big}")
        modes.require(self.rdma_mode)  # the record, not a name
        mpi_job.check_host_names(self.job_name, self.node_count)
        if self.doctor not in choices.DOCTOR_MODES:
            raise ValueError(f"doctor: got {self.doctor!r}; expected one of {', '.join(choices.DOCTOR_MODES)}")
        if self.rack_run and not self.sku.has_mnnvl:
            raise ValueError(f"rack_run: {self.sku.vm_size} has no multi-node NVLink (GB200/GB300 have)")
        if self.rdma_mode.dra:
            fabric_claims.devices_claim(self.sku, nics=True)  # raises where no layout pairs GPUs and HCAs
        if self.doctor != "never" and self.doctor_minutes < 1:
            raise ValueError(f"doctor_minutes: got {self.doctor_minutes}; the doctor ({self.doctor}) needs 1 or more")


def doctor_decision(mode: str, node_count: int) -> tuple[str, str]:
    """Whether the doctor runs, decided here where the job's facts decide it: ("yes" | "no", reason); or
    ("by-result", "") under auto on two or more nodes, where the launcher decides from the all-nodes run
    (the rules it reads: DOCTOR_RUN_IF, DOCTOR_PASS_BUSBW_GBPS). The reasons are the doctor marker's."""
    if mode == "never":
        return "no", "mode-never"
    if node_count < 2:
        return "no", "single-node"
    if mode == "always":
        return "yes", "mode-always"
    return "by-result", ""


def doctor_env(args: NcclJobArgs) -> dict[str, str]:
    """The launcher's doctor inputs (scripts/nccl-launcher.sh lists them), all computed here from the
    catalog and verify/, so that the launcher compares numbers and follows a plan, and decides nothing
    that is known before the pod starts. The same keys in every mode: a re-test (clusterside/certify_recurring.py)
    sets the doctor's values on the day-0 job's spec, where each must already be."""
    sku = args.sku
    largest = nccl_sizing.max_size_arg(args.all_reduce_args)
    node_size = sku.allreduce_1_node.size if sku.allreduce_1_node else largest
    # a pair is slow where a 2-node verdict would not PASS: the same rule as the pass line
    pair_slow = doctor_checks.Expectations.for_sku(sku, args.threshold_gbps).pair_slow_below_gbps
    pass_line = pass_line_gbps(sku.allreduce_expectation(args.node_count), args.threshold_gbps)
    # per-HCA ib_write_bw from the memory the size's gate was measured from (GPU memory on ND sizes)
    memory = sku.p2p.gate_memory if sku.p2p else ("cuda" if sku.expects_gpudirect_rdma else "host")
    run, reason = doctor_decision(args.doctor, args.node_count)
    return {
        "DOCTOR": args.doctor,
        "DOCTOR_RUN": run,
        "DOCTOR_RUN_REASON": reason,
        "DOCTOR_SECONDS": str(args.doctor_minutes * 60),
        "DOCTOR_PASS_BUSBW_GBPS": _gbps(pass_line),
        # the transport rules of verify.verdict that the launcher checks on the all-nodes run (auto)
        "DOCTOR_RUN_IF": launcher_env.transport_rules(sku.expects_gpudirect_rdma, sku.ib_hcas_per_vm),
        "DOCTOR_PAIR_ROUNDS": doctor.rounds_env(doctor.plan_pairs(args.node_count)),
        # on two nodes the all-nodes run is the one pair (no rounds): its result is the pair's
        "DOCTOR_ALLREDUCE_PAIR": "0-1" if args.node_count == 2 else "",
        # one size, the largest, as Azure's health checks run it: the plateau, without the sweep
        "DOCTOR_PAIR_ARGS": f"-b {largest} -e {largest} -f 2 -g 1",
        "DOCTOR_NODE_ARGS": f"-b {node_size} -e {node_size} -f 2 -g 1",
        # the single-node run as Azure's health check runs the one its gate was set with
        # (Azure/azurehpc-health-checks@0e0a1ac customTests/azure_nccl_allreduce.nhc: `--map-by
        # ppr:$gpu_count:node -bind-to numa`, `-x NCCL_TOPO_FILE=`): an empty NCCL_TOPO_FILE is how Azure
        # fixed spurious H100/H200 failures of exactly this check (issue #142, PR #143, commit 67ca751), so
        # the job's topology file is not forwarded to it; the job's other settings are
        "DOCTOR_NODE_MAP_BIND": f"--map-by ppr:{sku.gpus_per_vm}:node --bind-to numa",
        "DOCTOR_NODE_ENV": "NCCL_TOPO_FILE=",
        "DOCTOR_PAIR_SLOW_BELOW_GBPS": _gbps(pair_slow),
        "DOCTOR_HCA_PAIRS": str(DOCTOR_HCA_PAIRS),
        "DOCTOR_PARALLEL": str(DOCTOR_PARALLEL),
        "PERFTEST_MEMORY": memory,
        "PERFTEST_ARGS": PERFTEST_ARGS[memory],
        "PERFTEST_SECONDS": str(PERFTEST_SECONDS),
        "PERFTEST_START_SECONDS": str(PERFTEST_START_SECONDS),
        **launcher_env.hca_listing_env(),  # how the launcher reads a node's HCA listing: verify/hca.py's rule
    }


def retest_template(args: NcclJobArgs, spec: dict[str, Any]) -> dict[str, Any]:
    """What the recurring certifier needs to run this job again on n idle nodes (clusterside/certify_recurring.py):
    the spec, and per n from 2 to the pool's size the launcher inputs that depend on n, with the doctor
    always on (its pairs are what certify a node), all computed here as for the day-0 job."""
    by_nodes = {str(n): {"NODES": str(n), **doctor_env(dataclasses.replace(args, node_count=n, doctor="always"))}
                for n in range(2, args.node_count + 1)}
    # the pool's RDMA driver where it is not verify's default, so the re-tests are judged as the day-0 run
    driver = {} if args.rdma_driver.name == rdma_drivers.DEFAULT else {"rdma_driver": args.rdma_driver.name}
    return {"spec": spec, "env_by_nodes": by_nodes, "sku": args.sku.vm_size, "threshold_gbps": args.threshold_gbps,
            "deadline_minutes": dataclasses.replace(args, doctor="always").deadline_minutes, **driver}


def uses_topology_file(args: NcclJobArgs) -> bool:
    return args.topology_file and bool(args.sku.nccl_topology)


def gpus_by_claim(args: NcclJobArgs) -> bool:
    """Whether the GPUs come as a DRA claim (the NVIDIA DRA driver runs, the device plugin does not)."""
    return dra.needs(args.sku, args.rdma_mode) is not None


def same_node_labels(args: NcclJobArgs) -> list[str]:
    """What every worker's node must share: in a DRA mode one placement group (the topology labeler's
    label: a claim's constraint holds only its own HCAs, not another pod's), and on the rack run one
    NVLink clique."""
    return [*([fabric.PLACEMENT_GROUP_LABEL] if args.rdma_mode.dra else []),
            *([fabric.GPU_CLIQUE_LABEL] if args.rack_run else [])]


def worker_resources(args: NcclJobArgs) -> core.ResourceRequirementsArgs:
    """Every GPU of the node and the HCAs as the configured RDMA mode hands them out (core/modes.py):
    as counts of the device plugins' resources, or as the worker's DRA claims (components/fabric/fabric_claims.py)."""
    gpus = args.sku.gpus_per_vm
    claimed = gpus_by_claim(args)
    extended = {**({} if claimed else {fabric.GPU_RESOURCE: str(gpus)}),
                **args.rdma_mode.limits(args.sku)}
    return core.ResourceRequirementsArgs(
        requests={**extended, "cpu": str(CPU_PER_RANK * gpus), "memory": f"{MEMORY_GI_PER_RANK * gpus}Gi"},
        limits=extended or None,
        claims=fabric_claims.worker_claims(args.rack_run).container if claimed else None,
    )


def job_spec(
    args: NcclJobArgs, launcher_configmap: str, configmaps: dict[str, str], config_hash: str
) -> dict[str, Any]:
    """The Volcano Job's spec: the launcher with the NCCL environment and mpirun binding of the SKU's
    generation, a worker per node with every GPU, the RDMA resource and (where Azure publishes one
    and `topology_file` is on) the topology file."""
    sku = args.sku
    env = {
        "NODES": str(args.node_count),
        "GPUS_PER_NODE": str(sku.gpus_per_vm),
        "ALL_REDUCE_ARGS": args.all_reduce_args,
        "ALL_REDUCE_BIN": ALL_REDUCE_BIN,
        **mpi_job.launcher_env(),  # the hostfile, MPI_HOME, the sshd wait, the pod's interface
        "MPI_MAP_BIND": " ".join(binding(sku).args),
        "LAUNCHER_NCCL_LOG": LAUNCHER_NCCL_LOG,
        **nccl_env(sku, topology_file=args.topology_file, sharp=args.sharp, rack=args.rack_run,
                   dra=args.rdma_mode.dra, rdma_driver=args.rdma_driver),
        # the log filter's and result's patterns: verify's (NCCL's DMA-BUF lines kept where the verdict needs them)
        **launcher_env.log_filter_env(dmabuf=rdma_drivers.gdr_via_dmabuf(sku, args.rdma_driver)),
        **launcher_env.result_env(),
        **doctor_env(args),
    }
    mounts, volumes = [], []
    if uses_topology_file(args):
        mounts.append(core.VolumeMountArgs(name="nccl-topology", mount_path=TOPOLOGY_DIR, read_only=True))
        volumes.append(core.VolumeArgs(
            name="nccl-topology",
            config_map=core.ConfigMapVolumeSourceArgs(
                name=configmaps["topology"], items=[core.KeyToPathArgs(key=TOPOLOGY_KEY, path=TOPOLOGY_KEY)]
            ),
        ))
    return mpi_job.job_spec(
        workers=args.node_count,
        launcher=mpi_job.launcher_template(
            args.job_name, args.image, env, core.ResourceRequirementsArgs(requests={"cpu": "1", "memory": "2Gi"}),
            args.deadline_minutes, config_hash, launcher_configmap, agent_pool=args.agent_pool,
        ),
        worker=mpi_job.worker_template(
            args.job_name, args.image, worker_resources(args), args.deadline_minutes, config_hash, mounts, volumes,
            resource_claims=fabric_claims.worker_claims(args.rack_run).pod if gpus_by_claim(args) else (),
            same_node_labels=same_node_labels(args), agent_pool=args.agent_pool,
        ),
        agent_pool=args.agent_pool,
    )


class NcclJob(pulumi.ComponentResource):
    """The GPU fabric test: a namespace, the launcher and topology ConfigMaps, the Volcano Job
    (see `mpi_job.declare_mpi_job`). Implements `fabric_test.FabricTestJob`; `spec_sha256` is the
    collect step's trigger."""

    kind: Kind = ALL_REDUCE
    namespace: pulumi.Resource
    topology: k8s.core.v1.ConfigMap | None
    launcher: k8s.core.v1.ConfigMap
    job: k8s.apiextensions.CustomResource
    sku: Sku
    job_name: str
    namespace_name: str
    node_count: int
    deadline_minutes: int
    sharp: bool  # whether the run used SHARP (CollNet): the result says which transport it measured
    rack_run: bool  # the rack's NVLink run (MNNVL on), judged by the rack figure (NcclJobArgs.rack_run)
    retest: dict[str, Any] | None  # what the certifier re-runs (retest_template); None for the rack's run
    spec: dict[str, Any]
    spec_sha256: str

    def __init__(self, name: str, args: NcclJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:kubernetes:NcclJob", name, None, opts)
        self.sku = args.sku
        self.namespace_name = args.namespace_name
        self.node_count = args.node_count  # nodes the test spans
        self.deadline_minutes = args.deadline_minutes  # the collector waits this long after setup
        self.sharp = args.sharp
        self.rack_run = args.rack_run
        topology = args.sku.nccl_topology if uses_topology_file(args) else None
        declared = mpi_job.declare_mpi_job(
            name,
            self,
            job_name=args.job_name,
            namespace_name=args.namespace_name,
            launcher_script=LAUNCHER_SCRIPT,
            configmaps={"topology": {TOPOLOGY_KEY: render_xml(topology)} if topology else None},
            build_spec=lambda launcher, configmaps, config_hash: job_spec(args, launcher, configmaps, config_hash),
            wait_for=args.wait_for,
            driver_versions=args.driver_versions,
            namespaced=(lambda namespace: fabric_claims.declare(
                name, self, namespace, sku=args.sku, nics=args.rdma_mode.dra,
                compute_domain=args.rack_run, wait_for=args.wait_for)) if gpus_by_claim(args) else None,
        )
        self.namespace, self.launcher, self.job = declared.namespace, declared.launcher, declared.job
        self.topology = declared.configmaps.get("topology")
        self.job_name = declared.name  # the Volcano Job's: args.job_name and its spec's hash
        self.spec, self.spec_sha256 = declared.spec, declared.spec_sha256
        # the recurring certifier re-tests the fabric, never the rack's NVLink run
        self.retest = None if args.rack_run else retest_template(args, declared.spec)
        self.register_outputs({"job_name": self.job_name, "namespace": self.namespace.name,
                               "spec_sha256": self.spec_sha256})
