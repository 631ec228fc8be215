"""The NCCL topology file of an ND-series VM, rendered from facts this program owns.

Azure's hypervisor hides the real PCI tree: inside the VM every GPU and every InfiniBand HCA sits on
its own PCI domain, so NCCL cannot tell which HCA is next to which GPU, nor which NUMA node either
belongs to. The topology file tells it (mounted in the job, named by `NCCL_TOPO_FILE`). Without it
NCCL pairs GPUs with far-away HCAs and crosses the CPU interconnect; all-reduce bus bandwidth drops.

The layouts below carry the facts of Azure's published files (Azure/aks-rdma-infiniband@700dabb
tests/scenarios/nvidia-topology/ndv4-topo.xml and ndv5-topo.xml, which come from azhpc-images):
NUMA nodes and their CPUs, one PCIe switch ("bridge") per group, and in each group the GPUs and
HCAs by bus id. `tests/test_nccl_topology.py` checks that the rendering equals those files as
element trees. The catalog names which layout a VM size uses (`Sku.nccl_topology`).

Pure Python (no Pulumi import).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

# PCI class codes as NCCL writes them.
PCI_CLASS_BRIDGE = "0x060400"  # PCI-to-PCI bridge (the PCIe switch of a GPU/HCA group)
PCI_CLASS_GPU = "0x030200"  # 3D controller
PCI_CLASS_IB = "0x020700"  # InfiniBand controller

SOURCE = "Azure/aks-rdma-infiniband@700dabb tests/scenarios/nvidia-topology/"


@dataclass(frozen=True)
class Pair:
    """A GPU and the HCA next to it (same PCIe switch): NCCL sends that GPU's traffic through it."""

    gpu_busid: str
    hca_busid: str


@dataclass(frozen=True)
class Switch:
    """One PCIe switch and the GPU/HCA pairs behind it, in the order NCCL lists them."""

    busid: str
    pairs: tuple[Pair, ...]


@dataclass(frozen=True)
class Numa:
    numaid: int
    switches: tuple[Switch, ...]


@dataclass(frozen=True)
class Layout:
    """What NCCL needs to know about one VM size's host: CPUs, NUMA nodes, switches, GPUs, HCAs."""

    id: str  # the catalog's `nccl_topology`
    vcpus: int  # CPUs the VM exposes; split evenly across the NUMA nodes, in order
    cpu_vendor: str  # as /proc/cpuinfo's vendor_id
    cpu_family: int
    cpu_model: int
    link_speed: str  # PCIe link speed as NCCL prints it for this host's generation
    link_width: int
    numas: tuple[Numa, ...]
    # ND v5 files also carry vendor/device ids on the switches (zeros: hidden by the hypervisor)
    switch_ids: bool = False
    arch: str = "x86_64"

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(p.gpu_busid for n in self.numas for s in n.switches for p in s.pairs)

    @property
    def hcas(self) -> tuple[str, ...]:
        return tuple(p.hca_busid for n in self.numas for s in n.switches for p in s.pairs)

    def affinity(self, numa_index: int) -> str:
        """The CPU mask of a NUMA node, as the kernel's cpumap: 32-bit hex words, most significant first."""
        per_numa = self.vcpus // len(self.numas)
        mask = ((1 << per_numa) - 1) << (per_numa * numa_index)
        words = -(-self.vcpus // 32)  # ceil
        return ",".join(f"{(mask >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def _pairs(*ids: tuple[str, str]) -> tuple[Pair, ...]:
    return tuple(Pair(f"{g}:00:00.0", f"{h}:00:00.0") for g, h in ids)


def _switch(n: int, *ids: tuple[str, str]) -> Switch:
    return Switch(f"ffff:ff:{n:02x}.0", _pairs(*ids))


LAYOUTS: dict[str, Layout] = {
    # ND A100 v4 (ND96asr_v4, ND96amsr_A100_v4): 96 vCPUs of AMD EPYC 7V12 (Rome, family 23 model 49)
    # in 4 NUMA nodes; per node one PCIe Gen4 switch with 2 GPUs and their 2 HDR HCAs.
    "ndv4": Layout(
        id="ndv4",
        vcpus=96,
        cpu_vendor="AuthenticAMD",
        cpu_family=23,
        cpu_model=49,
        link_speed="16 GT/s",
        link_width=16,
        numas=(
            Numa(0, (_switch(1, ("0003", "0103"), ("0004", "0104")),)),
            Numa(1, (_switch(2, ("0001", "0101"), ("0002", "0102")),)),
            Numa(2, (_switch(3, ("000d", "0107"), ("000e", "0108")),)),
            Numa(3, (_switch(4, ("000b", "0105"), ("000c", "0106")),)),
        ),
    ),
    # ND H100 v5 / ND H200 v5 (ND96isr_*_v5): 96 vCPUs of Intel Xeon Sapphire Rapids (family 6
    # model 143) in 2 NUMA nodes; per node four PCIe Gen5 switches, each with 1 GPU and its NDR HCA.
    "ndv5": Layout(
        id="ndv5",
        vcpus=96,
        cpu_vendor="GenuineIntel",
        cpu_family=6,
        cpu_model=143,
        link_speed="32.0 GT/s PCIe",
        link_width=16,
        switch_ids=True,
        numas=(
            Numa(0, (
                _switch(1, ("0001", "0101")),
                _switch(2, ("0002", "0102")),
                _switch(3, ("0003", "0103")),
                _switch(4, ("0008", "0104")),
            )),
            Numa(1, (
                _switch(5, ("0009", "0105")),
                _switch(6, ("000a", "0106")),
                _switch(7, ("000b", "0107")),
                _switch(8, ("000c", "0108")),
            )),
        ),
    ),
}


def layout(topology_id: str) -> Layout:
    try:
        return LAYOUTS[topology_id]
    except KeyError:
        raise KeyError(
            f"no NCCL topology layout {topology_id!r}; known: {', '.join(sorted(LAYOUTS))}"
        ) from None


def to_element(lay: Layout) -> ET.Element:
    system = ET.Element("system", {"version": "1"})
    link = {"link_speed": lay.link_speed, "link_width": str(lay.link_width)}
    for i, numa in enumerate(lay.numas):
        cpu = ET.SubElement(system, "cpu", {
            "numaid": str(numa.numaid),
            "affinity": lay.affinity(i),
            "arch": lay.arch,
            "vendor": lay.cpu_vendor,
            "familyid": str(lay.cpu_family),
            "modelid": str(lay.cpu_model),
        })
        for sw in numa.switches:
            attrs = {"busid": sw.busid, "class": PCI_CLASS_BRIDGE, **link}
            if lay.switch_ids:
                attrs.update(vendor="0x0000", device="0x0000", subsystem_vendor="0x0000", subsystem_device="0x0000")
            bridge = ET.SubElement(cpu, "pci", attrs)
            for pair in sw.pairs:
                ET.SubElement(bridge, "pci", {"busid": pair.gpu_busid, "class": PCI_CLASS_GPU, **link})
                ET.SubElement(bridge, "pci", {"busid": pair.hca_busid, "class": PCI_CLASS_IB, **link})
    return system


def render_xml(topology_id: str) -> str:
    """The topology file for `topology_id` (the catalog's `Sku.nccl_topology`), as NCCL reads it."""
    root = to_element(layout(topology_id))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"

