"""The NCCL topology files rendered from the program's facts equal Azure's published files."""

import xml.etree.ElementTree as ET

import pytest

from components.fabric import nccl_topology
from core import catalog


def canonical(el: ET.Element) -> tuple:
    """An element tree as nested tuples: tag, sorted attributes, children in order (whitespace ignored)."""
    return (el.tag, tuple(sorted(el.attrib.items())), tuple(canonical(c) for c in el))


def busids(root: ET.Element, pci_class: str) -> list[str]:
    return [p.get("busid") for p in root.iter("pci") if p.get("class") == pci_class]


TOPOLOGY_IDS = sorted({s.nccl_topology for s in catalog.SKUS.values() if s.nccl_topology})


def test_every_catalog_topology_has_a_layout():
    assert TOPOLOGY_IDS, "the catalog names no topology at all"
    for topo in TOPOLOGY_IDS:
        assert nccl_topology.layout(topo).id == topo


@pytest.mark.parametrize("topo", TOPOLOGY_IDS)
def test_rendering_equals_azures_file(reference, topo):
    ours = ET.fromstring(nccl_topology.render_xml(topo))
    azure = ET.parse(reference / "topology" / f"{topo}-topo.xml").getroot()
    # the GPU and HCA bus ids first, so that a mismatch names what differs
    for pci_class in (nccl_topology.PCI_CLASS_GPU, nccl_topology.PCI_CLASS_IB, nccl_topology.PCI_CLASS_BRIDGE):
        assert busids(ours, pci_class) == busids(azure, pci_class), pci_class
    assert [c.attrib for c in ours.iter("cpu")] == [c.attrib for c in azure.iter("cpu")]
    assert canonical(ours) == canonical(azure)


@pytest.mark.parametrize("vm_size", [s.vm_size for s in catalog.SKUS.values() if s.nccl_topology])
def test_layout_matches_the_skus_gpus_and_hcas(vm_size):
    sku = catalog.lookup(vm_size)
    lay = nccl_topology.layout(sku.nccl_topology)
    assert len(lay.gpus) == sku.gpus_per_vm
    assert len(lay.hcas) == sku.ib_hcas_per_vm
    assert len(set(lay.gpus + lay.hcas)) == len(lay.gpus) + len(lay.hcas), "a bus id is listed twice"


def test_ndv4_and_ndv5_differ_where_the_hardware_does():
    v4, v5 = nccl_topology.layout("ndv4"), nccl_topology.layout("ndv5")
    assert (len(v4.numas), len(v5.numas)) == (4, 2)
    assert v4.cpu_vendor == "AuthenticAMD" and v5.cpu_vendor == "GenuineIntel"
    # ND v4 shares a PCIe switch between two GPU/HCA pairs; ND v5 gives each pair its own
    assert {len(s.pairs) for n in v4.numas for s in n.switches} == {2}
    assert {len(s.pairs) for n in v5.numas for s in n.switches} == {1}


def test_affinity_masks_split_the_cpus_evenly():
    lay = nccl_topology.layout("ndv5")
    masks = [int(lay.affinity(i).replace(",", ""), 16) for i in range(len(lay.numas))]
    assert sum(bin(m).count("1") for m in masks) == lay.vcpus
    assert masks[0] & masks[1] == 0


def test_unknown_topology_names_the_known_ones():
    with pytest.raises(KeyError, match="ndv4"):
        nccl_topology.layout("ndv9")
