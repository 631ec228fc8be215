"""The RDMA driver stack of a pool (core/rdma_drivers.py) and the one rule of which size may run which, read
from each size's catalog evidence (Sku.inbox_rdma)."""

from __future__ import annotations

import pytest

from core import catalog, rdma_drivers

ALLOWED = {"Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5", "Standard_HB120rs_v3", "Standard_HB176rs_v4",
           "Standard_HX176rs"}



def test_the_drivers_are_doca_and_inbox_and_doca_is_the_default():
    assert rdma_drivers.names() == ["doca", "inbox"] and rdma_drivers.DEFAULT == "doca"
    assert rdma_drivers.DOCA.installs_doca and rdma_drivers.DOCA.gdr == rdma_drivers.PEERMEM
    assert not rdma_drivers.INBOX.installs_doca and rdma_drivers.INBOX.gdr == rdma_drivers.DMABUF
    with pytest.raises(KeyError, match="unknown rdmaDriver 'mofed'; known: doca, inbox"):
        rdma_drivers.rdma_driver("mofed")


@pytest.mark.parametrize("size", sorted(catalog.SKUS))
def test_doca_runs_every_size_and_inbox_only_those_with_evidence(size):
    sku = catalog.lookup(size)
    assert rdma_drivers.problem(sku, rdma_drivers.DOCA) is None
    why = rdma_drivers.problem(sku, rdma_drivers.INBOX)
    assert (why is None) == (size in ALLOWED) == sku.inbox_rdma.allowed
    assert sku.inbox_rdma.why  # the evidence, or the reason: never empty
    if why:
        assert why.startswith(f"{size} cannot run on the node image's own RDMA drivers: ")
        assert "would change that" in why


def test_grace_blackwell_is_refused_for_its_doca_path_and_a100_for_want_of_evidence():
    gb = rdma_drivers.problem(catalog.lookup("Standard_ND128isr_GB300_v6"), rdma_drivers.INBOX)
    a100 = rdma_drivers.problem(catalog.lookup("Standard_ND96asr_v4"), rdma_drivers.INBOX)
    assert "DOCA with nvidia-peermem" in gb and "no source shows this size" in a100


def test_dmabuf_is_required_on_gpu_sizes_without_peer_memory_only():
    h100, hb = catalog.lookup("Standard_ND96isr_H100_v5"), catalog.lookup("Standard_HB176rs_v4")
    assert rdma_drivers.gdr_via_dmabuf(h100, rdma_drivers.INBOX)
    assert not rdma_drivers.gdr_via_dmabuf(h100, rdma_drivers.DOCA)
    assert not rdma_drivers.gdr_via_dmabuf(hb, rdma_drivers.INBOX)
