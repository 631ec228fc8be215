"""The NCCL environment and the mpirun binding of the all-reduce, per Azure ND generation, in one place.

Every value carries its source (repository@commit path, or "ours" with the reason). Pure Python (no
Pulumi import): the job (components/fabric/nccl_job.py) reads it, the table in docs/fabric-test.md is generated from it
(`python -m components.fabric.nccl_settings` prints it, `make golden` writes it; a test keeps the two equal).

What is Azure's, and from where:
- ND H100 v5 / ND H200 v5 (`ndv5`): the settings of Azure's own AKS NCCL test (its Helm chart's
  values.yaml), which its Slurm `hopper.conf` and azhpc-images' ND v5 `/etc/nccl.conf` agree with
  where they overlap; and its NUMA-aware core binding for H100/H200.
- ND A100 v4 (`ndv4`): azhpc-images' ND v4 `/etc/nccl.conf`; no binding, as in Azure's AKS A100 test
  that published 187 GB/s (Azure/aks-rdma-infiniband).
- ND GB200 v6 / ND GB300 v6 (`ndv6`, Grace Blackwell): Azure's Grace Blackwell config
  (`graceblackwell.conf`) with its GB300 AKS values (`values-gb300.yaml`), which unset the ND v5
  settings and bind nothing. Its verdict run is IB-only (MNNVL and NVLS off, so two nodes of one
  NVL72 rack still cross InfiniBand); `rack=True` gives the MNNVL run reported beside it.

A generation is one `Family` (its settings and binding) in `FAMILIES`, looked up by the catalog's
`Sku.generation`; a GPU size of a generation with no family is refused.

Two switches change the environment: `sharp` (NCCL's own IB transport, or HPC-X's SHARP plugin with
CollNet) and `topology_file` (mount Azure's NCCL topology file, or let NCCL detect the topology).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core import rdma_drivers
from core.catalog import Sku
from core.rdma_drivers import RdmaDriver

TOPOLOGY_DIR = "/opt/nccl-topology"
TOPOLOGY_KEY = "topo.xml"

# --- sources, cited once ---------------------------------------------------------------------------
AKS_NCCL_TEST = "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_validations/aks/NCCL/helm/nccl-test"
AKS_VALUES = f"{AKS_NCCL_TEST}/values.yaml"
AKS_MPIJOB = f"{AKS_NCCL_TEST}/templates/mpijob.yaml"
AKS_GB300_VALUES = f"{AKS_NCCL_TEST}/values-gb300.yaml"
GB_CONF = "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_validations/slurm/NCCL/configs/graceblackwell.conf"
# The IB-only run of DRANET's AKS GB300 example (MNNVL and NVLS off), the run Azure's inter-rack figure names
DRANET_GB300_JOB = "kubernetes-sigs/dranet@ca195e2 examples/azure_aks_examples/gb300/mpi-job.yaml"
HOPPER_CONF = "Azure/ai-infrastructure-on-azure@a01b073 infrastructure_validations/slurm/NCCL/configs/hopper.conf"
AZHPC_NDV5 = "Azure/azhpc-images@8e9d055 components/customizations/ndv5.sh (/etc/nccl.conf)"
AZHPC_NDV4 = "Azure/azhpc-images@8e9d055 components/customizations/ndv4.sh (/etc/nccl.conf)"
AKS_RDMA_VALUES = "Azure/aks-rdma-infiniband@700dabb tests/scenarios/k8s/values.yaml"
AKS_RDMA_MPIJOB = "Azure/aks-rdma-infiniband@700dabb tests/scenarios/k8s/templates/mpi-job.yaml"
IMAGE_DOCKERFILE = (
    "coreweave/nccl-tests@8b67957 Dockerfile.ubuntu22: HPC-X's plugin at /opt/hpcx/nccl_rdma_sharp_plugin/lib "
    "(libnccl-net.so) is first on LD_LIBRARY_PATH and in /etc/ld.so.conf.d/hpcx.conf"
)
OURS = "ours"


@dataclass(frozen=True)
class Setting:
    value: str | None  # None: a variable a family removes from the shared groups (left to NCCL)
    why: str
    source: str  # repository@commit path, or OURS (then `why` is the whole reason)


def unset(why: str, source: str) -> Setting:
    return Setting(None, why, source)


# Every GPU generation, whatever the switches.
COMMON: dict[str, Setting] = {
    "NCCL_IB_DISABLE": Setting("0", "use the InfiniBand transport (NCCL falls back to TCP sockets only when it "
                                    "finds no HCA)", AKS_RDMA_VALUES),
    "NCCL_NET_GDR_LEVEL": Setting(
        "SYS", "GPUDirect RDMA at any PCI distance: the VM's virtual PCI tree puts every GPU and HCA on its own "
               "domain, so NCCL would otherwise stage through host memory", AKS_RDMA_VALUES),
    "NCCL_IB_PCI_RELAXED_ORDERING": Setting(
        "1", "relaxed PCIe ordering through Azure's virtual HCAs, needed for full bandwidth",
        f"{AKS_VALUES}; {AZHPC_NDV5}; {AZHPC_NDV4}"),
    "NCCL_SOCKET_IFNAME": Setting("eth0", "NCCL's bootstrap and out-of-band traffic on the pod network", AKS_VALUES),
    "NCCL_DEBUG": Setting("INFO", "the NCCL version and each rank's transport (NET/IB, GDRDMA) in the log, which "
                                  "the verdict reads (Azure's test logs WARN only)", OURS),
    "NCCL_DEBUG_SUBSYS": Setting("INIT,NET", "only the init and network lines of INFO", OURS),
    "CUDA_DEVICE_ORDER": Setting("PCI_BUS_ID", "GPUs numbered by PCI bus id, the order the topology file lists "
                                               "them in", AKS_VALUES),
}

# NCCL's own InfiniBand transport (fabricTest.sharp: false, the default): what the catalog's lines judge.
WITHOUT_SHARP: dict[str, Setting] = {
    "NCCL_NET_PLUGIN": Setting(
        "none", "NCCL's built-in IB transport, not the HPC-X SHARP plugin that NCCL would load by default from "
                "the image: the run measures the fabric without in-network reduction, as the thresholds assume",
        IMAGE_DOCKERFILE),
    "UCX_TLS": Setting("tcp", "MPI's own traffic (launching ranks, NCCL's unique id) over TCP: InfiniBand is left "
                              "to NCCL (Azure's test uses rc, which it needs for SHARP)", OURS),
    "UCX_NET_DEVICES": Setting("eth0", "that TCP on the pod network", OURS),
}

# HPC-X's SHARP plugin with CollNet (fabricTest.sharp: true): Azure's AKS test's SHARP settings. No
# NCCL_NET_PLUGIN: NCCL then loads libnccl-net.so from the library path, HPC-X's plugin in the image.
WITH_SHARP: dict[str, Setting] = {
    "NCCL_COLLNET_ENABLE": Setting("1", "CollNet: all-reduce through the switches' SHARP aggregation", AKS_VALUES),
    "SHARP_SMX_UCX_INTERFACE": Setting("mlx5_0:1", "the IB port SHARP's control channel (SMX over UCX) uses",
                                       AKS_VALUES),
    "SHARP_COLL_ENABLE_SAT": Setting("1", "SHARP streaming aggregation trees (large messages)", AKS_VALUES),
    "SHARP_COLL_LOG_LEVEL": Setting("3", "SHARP's own warnings and info in the log", AKS_VALUES),
    "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING": Setting("1", "relaxed PCIe ordering for SHARP's buffers too",
                                                      AKS_VALUES),
    "UCX_TLS": Setting("rc", "UCX over InfiniBand RC, as Azure's SHARP test sets it: SHARP's control channel is "
                             "UCX on an IB port, which a TCP-only UCX could not reach", AKS_VALUES),
    "UCX_NET_DEVICES": Setting("mlx5_0:1", "the same IB port as SHARP_SMX_UCX_INTERFACE", AKS_VALUES),
}

# By how the pool's GPU memory reaches the HCA (core/rdma_drivers.py `gdr`). NCCL_DMABUF_ENABLE defaults to 1 in the
# pinned NCCL (NVIDIA/nccl v2.30.4-1 src/init.cc: NCCL_PARAM(DmaBufEnable, "DMABUF_ENABLE", 1)); set, so an image's
# /etc/nccl.conf cannot turn off the only GPUDirect path a pool without nvidia-peermem has.
NCCL_DMABUF = "NVIDIA/nccl v2.30.4-1 src/init.cc (NCCL_DMABUF_ENABLE, default 1)"
BY_GDR: dict[str, dict[str, Setting]] = {
    rdma_drivers.PEERMEM: {},
    rdma_drivers.DMABUF: {
        "NCCL_DMABUF_ENABLE": Setting("1", "register GPU memory with the HCA through DMA-BUF: the pool's GPU driver "
                                           "has no nvidia-peermem (rdmaDriver: inbox)", f"{NCCL_DMABUF}; {GB_CONF}"),
    },
}


@dataclass(frozen=True)
class Family:
    """The NCCL settings family of one Azure ND generation (the catalog's `Sku.generation`)."""

    name: str  # the catalog's generation, e.g. "ndv5"
    label: str  # the sizes, for the docs table
    settings: dict[str, Setting]  # Azure's tuning for it, on top of COMMON
    numa_binding: bool  # mpirun binds each rank to cores on its GPU's NUMA node (else unbound)
    binding_source: str  # where the binding (or its absence) comes from
    # The rack's NVLink run of a multi-node-NVLink generation: what it changes of `settings`
    rack: dict[str, Setting] = field(default_factory=dict)


# Azure's per-generation tuning, one family each, looked up by name with `family()`.
NDV5 = Family(
    name="ndv5",
    label="ND H100/H200 v5",
    settings={
        "NCCL_IB_QPS_PER_CONNECTION": Setting("4", "4 queue pairs per connection spread traffic over the fabric's "
                                                   "paths", f"{AKS_VALUES}; {HOPPER_CONF}"),
        "NCCL_MIN_NCHANNELS": Setting("32", "at least 32 channels, enough to keep 8 NDR HCAs busy",
                                      f"{AKS_VALUES}; {HOPPER_CONF}"),
        "NCCL_P2P_NET_CHUNKSIZE": Setting("524288", "512 KiB chunks for point-to-point over the network "
                                                    "(hopper.conf uses 2 MiB; the AKS test's value is taken)",
                                          AKS_VALUES),
        "NCCL_PXN_DISABLE": Setting("1", "no PXN (relaying through a peer GPU's HCA over NVLink): every GPU "
                                         "sends on its own HCA", f"{AKS_VALUES}; {HOPPER_CONF}"),
        "NCCL_IGNORE_CPU_AFFINITY": Setting("1", "NCCL places its threads by the GPU's NUMA node, not the "
                                                 "affinity mpirun bound the rank to",
                                            f"{AKS_VALUES}; {HOPPER_CONF}; {AZHPC_NDV5}"),
    },
    numa_binding=True,
    binding_source=(f"{AKS_MPIJOB} (`--map-by ppr:$DEVICES_PER_NODE:node:pe=12 --bind-to core`, mpi.bindToCore: true "
                    f"in values.yaml, 'recommended for H100/H200')"),
)
NDV4 = Family(
    name="ndv4",
    label="ND A100 v4",
    settings={
        "NCCL_IGNORE_CPU_AFFINITY": Setting("1", "NCCL places its threads by the GPU's NUMA node", AZHPC_NDV4),
    },
    numa_binding=False,
    binding_source=AKS_RDMA_MPIJOB + " (-bind-to none; the run behind Azure's published 187 GB/s)",
)
# Grace Blackwell: graceblackwell.conf's NCCL variables for the IB side, with MNNVL and NVLS off (the
# verdict run); values-gb300.yaml unsets what only Hopper needs.
NDV6 = Family(
    name="ndv6",
    label="ND GB200 / GB300 v6",
    settings={
        "NCCL_NET_GDR_LEVEL": Setting("PHB", "GPUDirect RDMA where GPU and HCA share a PCIe host bridge: on "
                                             "Grace each GPU has its own HCAs next to it", GB_CONF),
        "NCCL_NET_GDR_C2C": Setting("1", "GPUDirect RDMA over Grace's chip-to-chip link (C2C) between the "
                                         "GPU and the CPU-attached HCA", GB_CONF),
        "NCCL_DMABUF_ENABLE": Setting("1", "register GPU memory with the HCA through DMA-BUF", GB_CONF),
        "NCCL_IB_SL": Setting("1", "InfiniBand service level 1, as Azure's Grace Blackwell fabric expects",
                              GB_CONF),
        "NCCL_IB_QPS_PER_CONNECTION": Setting("4", "4 queue pairs per connection", GB_CONF),
        "NCCL_P2P_NET_CHUNKSIZE": Setting("2097152", "2 MiB chunks for point-to-point over the network",
                                          GB_CONF),
        "NCCL_SHM_DISABLE": Setting("1", "no shared-memory transport: GPUs of a node talk over NVLink",
                                    GB_CONF),
        "NCCL_IGNORE_CPU_AFFINITY": Setting(
            "1", "NCCL places its threads by the GPU's NUMA node (graceblackwell.conf sets it; the GB300 AKS "
                 "values null it)", GB_CONF),
        "NCCL_MNNVL_ENABLE": Setting(
            "0", "IB-only: no multi-node NVLink, so the run crosses InfiniBand even between nodes of one NVL72 "
                 "rack and the verdict judges the fabric (graceblackwell.conf's 1 is the rack run's)",
            f"{DRANET_GB300_JOB}; {GB_CONF}"),
        "NCCL_NVLS_ENABLE": Setting("0", "IB-only: no NVLink SHARP (NVLS) reductions in the NVSwitch",
                                    f"{DRANET_GB300_JOB}; {GB_CONF}"),
        "NCCL_IB_PCI_RELAXED_ORDERING": unset("not set: Azure's GB300 values null the Hopper value (1)",
                                              AKS_GB300_VALUES),
        # graceblackwell.conf: the RDMA/SHARP plugin on the library path is "needed for dmabuf support"
        "NCCL_NET_PLUGIN": unset("not set: NCCL loads the image's RDMA plugin (libnccl-net.so on the library "
                                 "path), which Azure says DMA-BUF needs", f"{GB_CONF}; {IMAGE_DOCKERFILE}"),
    },
    numa_binding=False,
    binding_source=f"{AKS_GB300_VALUES} (mpi.bindToCore: false); {GB_CONF} (CPU_BIND=none)",
    # graceblackwell.conf's intra-rack values over the verdict run's; reported beside it, never in it
    rack={
        "NCCL_MNNVL_ENABLE": Setting("1", "multi-node NVLink across the nodes of one NVL72 rack", GB_CONF),
        "NCCL_NVLS_ENABLE": Setting("1", "NVLink SHARP reductions in the rack's NVSwitches", GB_CONF),
    },
)
FAMILIES: dict[str, Family] = {f.name: f for f in (NDV5, NDV4, NDV6)}


def family(sku: Sku) -> Family:
    """The settings family of `sku`'s generation; a ValueError naming the families there are otherwise."""
    if not sku.has_gpus:
        raise ValueError(f"sku: {sku.vm_size} has no GPUs; NCCL settings apply to GPU sizes only")
    try:
        return FAMILIES[sku.generation]
    except KeyError:
        raise ValueError(f"sku: {sku.vm_size} is of generation {sku.generation!r}, which has no NCCL settings "
                         f"family; the families are {', '.join(FAMILIES)} "
                         f"(components/fabric/nccl_settings.py)") from None


TOPOLOGY_SETTING = Setting(
    f"{TOPOLOGY_DIR}/{TOPOLOGY_KEY}",
    "which HCA sits next to which GPU, hidden from NCCL by virtualisation (fabricTest.topologyFile; Azure's "
    "AKS test mounts it, its health check dropped it: docs/nccl-tuning.md)",
    f"{AKS_VALUES} (NCCL_TOPO_FILE=/etc/topology/ndv5-topo.xml); {AKS_RDMA_MPIJOB}; {AZHPC_NDV5}",
)


@dataclass(frozen=True)
class Binding:
    """How mpirun maps and binds the ranks of one node (the launcher's MPI_MAP_BIND)."""

    args: tuple[str, ...]
    why: str
    source: str


def binding(sku: Sku) -> Binding:
    """ND v5: Azure's NUMA-aware core binding, `pe` = the catalog's cores per VM / GPUs per VM (96 / 8
    = 12, the figure Azure's template hard-codes). Elsewhere no binding, as in the Azure test each
    generation's reference figure comes from."""
    gpus, fam = sku.gpus_per_vm, family(sku)
    if fam.numa_binding:
        return Binding(
            ("--map-by", f"ppr:{gpus}:node:pe={sku.cpu_cores_per_vm // gpus}", "--bind-to", "core",
             "--report-bindings"),
            "each rank bound to its own cores, on the NUMA node of its GPU (ranks 0-3 on socket 0, 4-7 on "
            "socket 1); --report-bindings prints the binding in the log",
            f"{fam.binding_source}; cores: {sku.cpu_cores_source}",
        )
    return Binding(("-npernode", str(gpus), "--bind-to", "none"),
                   "one rank per GPU, unbound: NCCL pins its own threads", fam.binding_source)


# rdmaMode dra on GB300: DRANET hands each pod its HCAs as DRA devices, and its AKS GB300 example runs NCCL
# without mlx5 Data Direct. Mirrored until a run with it on is measured here.
DRANET_AKS = "kubernetes-sigs/dranet examples/azure_aks_examples/gb300/mpi-job.yaml (-x NCCL_IB_DATA_DIRECT=0)"
DRA_GB300 = {"NCCL_IB_DATA_DIRECT": Setting("0", "no mlx5 Data Direct DMA path, as DRANET's AKS GB300 example runs "
                                            "NCCL over DRA-allocated HCAs", DRANET_AKS)}


def settings(sku: Sku, *, topology_file: bool, sharp: bool, rack: bool = False, dra: bool = False,
             rdma_driver: RdmaDriver = rdma_drivers.DOCA) -> dict[str, Setting]:
    """Every NCCL/UCX/SHARP variable of the ranks for `sku`, with its reason and source, sorted (a
    family's unset entries removed); `rack`: the rack's NVLink run (the family's `rack` over the rest);
    `dra`: the HCAs come as DRA devices (rdmaMode dra); `rdma_driver`: the pool's (BY_GDR)."""
    fam = family(sku)
    out = {**COMMON, **(WITH_SHARP if sharp else WITHOUT_SHARP), **BY_GDR[rdma_driver.gdr], **fam.settings,
           **(DRA_GB300 if dra and "GB300" in sku.vm_size else {})}
    if topology_file and sku.nccl_topology:
        out["NCCL_TOPO_FILE"] = TOPOLOGY_SETTING
    if rack:
        if not (sku.has_mnnvl and fam.rack):
            raise ValueError(f"rack: {sku.vm_size} has no multi-node NVLink; the rack run applies to GB200/GB300")
        out.update(fam.rack)
    return dict(sorted((k, v) for k, v in out.items() if v.value is not None))


def nccl_env(sku: Sku, *, topology_file: bool, sharp: bool, rack: bool = False, dra: bool = False,
             rdma_driver: RdmaDriver = rdma_drivers.DOCA) -> dict[str, str]:
    """The environment of the launcher, forwarded to every rank by mpirun (-x)."""
    found = settings(sku, topology_file=topology_file, sharp=sharp, rack=rack, dra=dra, rdma_driver=rdma_driver)
    return {name: str(s.value) for name, s in found.items()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The table in docs/fabric-test.md: every variable, when it applies, its value, why, and its source."""
    groups = [
        ("every GPU size", COMMON),
        ("`sharp: false` (default)", WITHOUT_SHARP),
        ("`sharp: true`", WITH_SHARP),
        *((f.label, f.settings) for f in FAMILIES.values()),
        *((f"{f.label}, the rack's NVLink run", f.rack) for f in FAMILIES.values() if f.rack),
        ("`topologyFile: true` (ND v4, ND v5)", {"NCCL_TOPO_FILE": TOPOLOGY_SETTING}),
        ("GB300 with `rdmaMode: dra`", DRA_GB300),
        ("`ibPool.rdmaDriver: inbox` (GPUDirect over DMA-BUF)", BY_GDR[rdma_drivers.DMABUF]),
    ]
    lines = ["| variable | value | when | why | source |", "|---|---|---|---|---|"]
    for when, env in groups:
        for name, s in env.items():
            value = f"`{_cell(s.value)}`" if s.value is not None else "(unset)"
            lines.append(f"| `{name}` | {value} | {when} | {_cell(s.why)} | {_cell(s.source)} |")
    return "\n".join(lines) + "\n"


# The table's block in docs/fabric-test.md, which `make golden` writes (offline/docblocks.py).
TABLE_START, TABLE_END = "<!-- generated:nccl-settings.md start -->\n", "<!-- generated:nccl-settings.md end -->\n"
DOC = "docs/fabric-test.md"  # where the table is shown


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown_table())
