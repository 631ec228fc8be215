"""The SKU catalog: required sizes, consistent figures, sources, and refusal of other sizes."""

import re
from dataclasses import replace

import pytest

from core import catalog, expectations, fabric, modes
from tests.paths import ROOT

PROVENANCE = expectations.Provenance(expectations.Basis.MEASURED,
                                     (expectations.Citation("x/y@0000000 z", "2026-01-01"),))
REQUIRED = [
    "Standard_ND96asr_v4",
    "Standard_ND96amsr_A100_v4",
    "Standard_ND96isr_H100_v5",
    "Standard_ND96isr_H200_v5",
    "Standard_HB120rs_v3",
    "Standard_HB176rs_v4",
]


@pytest.mark.parametrize("size", REQUIRED)
def test_required_sizes_are_in_the_catalog(size):
    assert catalog.lookup(size).vm_size == size


def test_lookup_is_case_insensitive_like_azure():
    assert catalog.lookup("standard_nd96isr_h100_v5").vm_size == "Standard_ND96isr_H100_v5"


@pytest.mark.parametrize("size", ["ND96asr_v4", "nd96ASR_v4", " Standard_ND96asr_v4 ", "STANDARD_ND96ASR_V4"])
def test_lookup_takes_the_size_without_standard_and_in_any_case(size):
    assert catalog.lookup(size).vm_size == "Standard_ND96asr_v4"


def test_an_unknown_size_is_refused_with_the_closest_names():
    with pytest.raises(KeyError) as err:
        catalog.lookup("Standard_ND96isr_H100_v4")
    assert "did you mean Standard_ND96isr_H100_v5" in str(err.value)
    assert catalog.closest("ND96asr") == ["Standard_ND96asr_v4"] + catalog.closest("ND96asr")[1:]
    assert catalog.closest("Standard_D8s_v5") == []


@pytest.mark.parametrize("size", ["Standard_NC24ads_A100_v4", "Standard_D8s_v5", "", "ND96isr_H100_v6"])
def test_non_infiniband_sizes_are_refused_with_the_supported_list(size):
    with pytest.raises(KeyError) as err:
        catalog.lookup(size)
    message = str(err.value)
    assert repr(size) in message
    for supported in REQUIRED:
        assert supported in message


@pytest.mark.parametrize("sku", catalog.SKUS.values(), ids=lambda s: s.vm_size)
def test_every_entry_is_consistent_and_sourced(sku):
    assert sku.ib_hcas_per_vm >= 1
    assert sku.ib_link_gbits == catalog.IB_GENERATIONS[sku.ib_generation].link_gbits
    assert sku.sources and all(s.strip() for s in sku.sources)
    assert (sku.gpus_per_vm > 0) == (sku.gpu_model is not None) == sku.has_gpus
    for exp in (sku.allreduce_2_nodes, sku.allreduce_more_nodes):
        if exp is not None:
            assert sku.has_gpus, "all-reduce expectations only make sense with GPUs"
            assert exp.source
            # busbw cannot exceed the node's aggregate injection rate without SHARP (not enabled here)
            assert exp.baseline_gbps <= sku.ib_hcas_per_vm * sku.ib_line_rate_gbps
    if sku.p2p is not None:
        assert sku.p2p.baseline_gbits == sku.ib_link_gbits
        assert sku.p2p.source


def test_gpu_sizes_have_a_topology_file_where_azure_publishes_one():
    assert catalog.lookup("Standard_ND96asr_v4").nccl_topology == "ndv4"
    assert catalog.lookup("Standard_ND96amsr_A100_v4").nccl_topology == "ndv4"
    assert catalog.lookup("Standard_ND96isr_H100_v5").nccl_topology == "ndv5"
    assert catalog.lookup("Standard_ND96isr_H200_v5").nccl_topology == "ndv5"
    for size in ("Standard_HB120rs_v3", "Standard_HB176rs_v4"):
        assert catalog.lookup(size).nccl_topology is None
        assert catalog.lookup(size).gpus_per_vm == 0


def test_azure_published_a100_result_is_the_a100_expectation():
    exp = catalog.lookup("Standard_ND96asr_v4").allreduce_expectation(2)
    assert (exp.baseline_gbps, exp.threshold_gbps) == (187.0, 180.0)
    assert "expected-output.md" in exp.source


def test_derived_figures_say_they_are_derived():
    exp = catalog.lookup("Standard_ND96isr_H100_v5").allreduce_expectation(2)
    assert exp.derived and exp.provenance.basis is expectations.Basis.DERIVED
    assert exp.source.startswith("derived (") and expectations.DERIVATION in exp.source
    published = catalog.lookup("Standard_ND96asr_v4").allreduce_expectation(2)
    assert not published.derived and published.source.startswith("measured (")


def _figures():
    for sku in catalog.SKUS.values():
        for figure in (sku.allreduce_2_nodes, sku.allreduce_more_nodes, sku.p2p, sku.allreduce_1_node):
            if figure is not None:
                yield sku.vm_size, figure


@pytest.mark.parametrize("size, figure", list(_figures()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_figure_cites_a_pinned_or_dated_source_in_a_short_line(size, figure):
    """The line a report prints: measured or derived, then citations a reader can open (a commit or a
    thread, each with its date), no research prose and no internal note."""
    source = figure.source
    assert len(source) <= 320, source
    assert not re.search(r"\bissue \d+|\bQ\d\b|NOT FOUND|DERIVED", source), source
    for cite in figure.provenance.cites:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cite.date), cite
        assert re.match(r"[\w.-]+/[\w.-]+(@[0-9a-f]{7,} \S|#\d+$)|https://", cite.ref), cite


def test_the_reasoning_behind_the_figures_is_in_the_docs():
    doc = (ROOT / "docs" / "sku-sources.md").read_text()
    assert "## Catalog figures" in doc  # the anchor every derived figure's line names
    for weighed in ("NVIDIA/aicr#1699", "NVIDIA/nccl-tests#119", "360/380"):
        assert weighed in doc


def test_no_expectation_below_two_nodes():
    assert catalog.lookup("Standard_ND96asr_v4").allreduce_expectation(1) is None


def test_feature_flag_is_skipped_only_where_azure_says_so():
    skipped = {s.vm_size for s in catalog.SKUS.values() if s.ib_feature is catalog.IbFeature.MUST_BE_ABSENT}
    assert skipped == {"Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6"}
    for size in skipped:
        assert "unregister" in " ".join(catalog.lookup(size).sources)


def test_expectation_rejects_a_threshold_above_its_baseline():
    with pytest.raises(ValueError):
        expectations.Expectation(baseline_gbps=100, threshold_gbps=120, provenance=PROVENANCE)


@pytest.mark.parametrize("sku", catalog.SKUS.values(), ids=lambda s: s.vm_size)
def test_rdma_request_per_mode(sku):
    assert modes.rdma_mode("shared").request(sku) == modes.RdmaRequest("rdma/shared_ib", 1)
    assert modes.rdma_mode("sriov").request(sku) == modes.RdmaRequest("rdma/ib", sku.ib_hcas_per_vm)
    with pytest.raises(ValueError, match="rdmaMode: got 'shard'; expected one of shared, sriov"):
        modes.rdma_mode("shard")


def test_taint_is_in_aks_syntax():
    assert re.fullmatch(r"[\w./-]+=[\w.-]+:(NoSchedule|PreferNoSchedule|NoExecute)", fabric.IB_TAINT)


def test_h200_thresholds_come_from_h200s_own_health_check_not_h100s():
    h100 = catalog.lookup("Standard_ND96isr_H100_v5").allreduce_expectation(2)
    h200 = catalog.lookup("Standard_ND96isr_H200_v5").allreduce_expectation(2)
    assert "nd96isr_h200_v5.conf: check_ib_bw_gdr 360" in h200.source
    assert "nd96isr_h100_v5.conf" not in h100.source
    # Azure gates H200's HCAs lower (360 vs 380 Gb/s): H100's derived lines scaled by that ratio
    for figure in ("baseline_gbps", "threshold_gbps"):
        assert getattr(h200, figure) == round(getattr(h100, figure) * 360 / 380, 1)
    assert h200.threshold_gbps < h100.threshold_gbps and h100.derived and h200.derived


def test_no_derived_line_sits_above_what_nccls_maintainers_call_the_peak():
    """'24GB/s is the peak performance per 200G NIC' (NVIDIA/nccl-tests#119): 384 GB/s for 8 NDR HCAs.
    A baseline above it could never be met by a healthy fabric."""
    assert expectations.nccl_peak_gbps(8, 200) == 192 and expectations.nccl_peak_gbps(8, 400) == 384
    for sku in catalog.SKUS.values():
        for exp in (sku.allreduce_2_nodes, sku.allreduce_more_nodes):
            if exp is not None:
                peak = expectations.nccl_peak_gbps(sku.ib_hcas_per_vm, sku.ib_link_gbits)
                assert exp.baseline_gbps <= peak, sku.vm_size


def test_the_docs_table_quotes_the_catalogs_all_reduce_lines():
    doc = (ROOT / "docs" / "fabric-test.md").read_text()
    for family, size in (("ND H100 v5", "Standard_ND96isr_H100_v5"), ("ND H200 v5", "Standard_ND96isr_H200_v5")):
        exp = catalog.lookup(size).allreduce_expectation(2)
        assert f"| {family} | **{exp.baseline_gbps:g} / {exp.threshold_gbps:g}, derived" in doc


def test_the_derivation_places_h100_where_the_published_pair_sits_against_its_peak():
    """ND A100 v4's published pair (187 / 180 GB/s) is 97.4 % / 93.75 % of its NICs' NCCL peak (8 x 24);
    ND H100 v5 gets the same fractions of 8 x 48."""
    a100 = catalog.lookup("Standard_ND96asr_v4")
    h100 = catalog.lookup("Standard_ND96isr_H100_v5")
    published, derived = a100.allreduce_expectation(2), h100.allreduce_expectation(2)
    a100_peak = expectations.nccl_peak_gbps(a100.ib_hcas_per_vm, a100.ib_link_gbits)
    h100_peak = expectations.nccl_peak_gbps(h100.ib_hcas_per_vm, h100.ib_link_gbits)
    assert derived.baseline_gbps == round(h100_peak * published.baseline_gbps / a100_peak, 1)
    assert derived.threshold_gbps == round(h100_peak * published.threshold_gbps / a100_peak, 1)
    assert derived.derived and "NVIDIA/nccl-tests#119" in derived.source
    h200 = catalog.lookup("Standard_ND96isr_H200_v5").allreduce_expectation(2)
    assert h200.derived and expectations.CITE_GDR_H100 in h200.provenance.cites  # from H100's line, by the gates


@pytest.mark.parametrize("sku", catalog.SKUS.values(), ids=lambda s: s.vm_size)
def test_cores_per_vm_are_sourced_and_split_evenly_across_gpus(sku):
    assert sku.cpu_cores_per_vm > 0 and str(sku.cpu_cores_per_vm) in sku.cpu_cores_source
    if sku.has_gpus:
        assert sku.cpu_cores_per_vm % sku.gpus_per_vm == 0


def test_link_expectation_rejects_a_warn_band_above_its_threshold():
    with pytest.raises(ValueError, match="WARN band"):
        expectations.LinkExpectation(baseline_gbits=400, threshold_gbits=390, provenance=PROVENANCE,
                                other_tool_warn_from_gbits=395)


@pytest.mark.parametrize("sku", [s for s in catalog.SKUS.values() if s.p2p], ids=lambda s: s.vm_size)
def test_each_point_to_point_gate_names_the_memory_it_was_measured_from(sku):
    """check_ib_bw_gdr moves GPU memory (ib_write_bw --use_cuda), check_ib_bw_non_gdr host memory: the
    doctor measures an HCA the way its gate was measured."""
    assert ("check_ib_bw_gdr" in sku.p2p.source) == (sku.p2p.gate_memory == "cuda")
    assert ("check_ib_bw_non_gdr" in sku.p2p.source) == (sku.p2p.gate_memory == "host")


def test_each_ib_generation_has_its_rate_and_xdr_is_there():
    """HDR 200, NDR 400, XDR 800 Gb/s per HCA; a size whose rate is not its generation's is refused."""
    assert {g: catalog.IB_GENERATIONS[g].link_gbits for g in catalog.IB_GENERATIONS} == {
        "HDR": 200, "NDR": 400, "XDR": 800}
    gb300 = catalog.lookup("Standard_ND128isr_GB300_v6")
    with pytest.raises(ValueError, match="ib_generation 'NDR' at 800 Gb/s"):
        replace(gb300, ib_generation="NDR")
    with pytest.raises(ValueError, match="generations: HDR 200, NDR 400, XDR 800"):
        replace(gb300, ib_generation="QDR")


def test_gb300_is_catalogued_as_azure_publishes_it():
    sku = catalog.lookup("ND128isr_GB300_v6")
    assert (sku.gpus_per_vm, sku.ib_hcas_per_vm, sku.ib_link_gbits, sku.ib_generation) == (4, 4, 800, "XDR")
    assert (sku.cpu_arch, sku.cpu_cores_per_vm, sku.needs_ubuntu_2404, sku.mnnvl_rack_nodes) == ("arm64", 128, True, 18)
    assert sku.cpu_cores_source.startswith("DERIVED")  # from the size name, not a published count
    ib = sku.allreduce_expectation(2)
    assert (ib.baseline_gbps, ib.threshold_gbps) == (200.0, 180.0) and not ib.derived
    assert "inter-rack, IB-only" in ib.source and "sku_performance_baseline" in ib.source
    rack = sku.allreduce_rack
    assert (rack.baseline_gbps, rack.threshold_gbps) == (937.0, 800.0) and not rack.derived
    assert "intra-rack, MNNVL" in rack.source
    assert sku.p2p is None and sku.allreduce_1_node is None  # Azure's health checks have no GB300 conf


def test_gb200_corrected_ubuntu_2404_and_a_rack_but_no_published_figures():
    sku = catalog.lookup("Standard_ND128isr_NDR_GB200_v6")
    assert (sku.ib_link_gbits, sku.ib_generation, sku.needs_ubuntu_2404, sku.mnnvl_rack_nodes) == (400, "NDR", True, 18)
    # GB300's figures are for twice the link rate: they are not copied to GB200
    assert sku.allreduce_2_nodes is None and sku.allreduce_rack is None


def test_only_multi_node_nvlink_sizes_have_a_rack_and_every_other_size_keeps_azures_default_os_sku():
    for sku in catalog.SKUS.values():
        assert sku.has_mnnvl == (sku.generation == "ndv6"), sku.vm_size
        assert sku.needs_ubuntu_2404 == sku.has_mnnvl, sku.vm_size
    with pytest.raises(ValueError, match="rack"):
        replace(catalog.lookup("Standard_ND96isr_H100_v5"), allreduce_rack=catalog.lookup(
            "Standard_ND128isr_GB300_v6").allreduce_rack)
