"""The fabric-test kind record (core/kinds.py): looked up by name, one per size, and the per-kind
facts the configuration checks read from it."""

from __future__ import annotations

import re

import pytest
from conftest import dev_config

import stack_config
from core import catalog, kinds
from stack_config.engine import ConfigError

A100 = "Standard_ND96asr_v4"


def test_an_unknown_kind_is_refused_by_name():
    assert kinds.kind("p2p") is kinds.POINT_TO_POINT and kinds.kind("nccl") is kinds.ALL_REDUCE
    for bad in ("NCCL", "osu", "", None):
        with pytest.raises(ValueError, match=f"kind: got {bad!r}; expected one of nccl, p2p"):
            kinds.kind(bad)


def test_every_size_has_exactly_one_kind_and_the_kinds_differ_where_they_must():
    for sku in catalog.SKUS.values():
        assert kinds.kind_for(sku).gpus == sku.has_gpus
    records = list(kinds.BY_NAME.values())
    for field in ("threshold_key", "threshold_flag", "unit"):
        assert len({getattr(k, field) for k in records}) == len(records), field
    exported = [name for k in records for name, _ in k.stack_outputs]
    assert len(exported) == len(set(exported))  # no stack output is claimed by two kinds
    assert kinds.KINDS == ("nccl", "p2p")


def test_a_kind_of_a_fixed_node_count_is_what_its_job_spans_and_only_the_others_name_their_nodes(monkeypatch):
    """Kind.nodes: None, the run spans the pool and `certify` is given --nodes; a number, the job has that
    many workers (components/fabric/p2p_job.py WORKERS) and the collector knows it."""
    from types import SimpleNamespace

    from components.fabric import certifier, fabric_check, p2p_job

    assert kinds.ALL_REDUCE.nodes is None and kinds.POINT_TO_POINT.nodes == p2p_job.WORKERS == 2
    monkeypatch.setattr(certifier, "policy_args", lambda args, pool=None: [])

    def argv(kind: kinds.Kind) -> list[str]:
        job = SimpleNamespace(kind=kind, sku=catalog.lookup(A100), namespace_name="ns", job_name="j", node_count=4,
                              deadline_minutes=30, sharp=False, rack_run=False, spec_sha256="0" * 64, job=None)
        return fabric_check.certify_argv(fabric_check.FabricCheckArgs(job=job, certifier=SimpleNamespace(args=None)))

    spans_pool, fixed = argv(kinds.ALL_REDUCE), argv(kinds.POINT_TO_POINT)
    assert spans_pool[spans_pool.index("--nodes") + 1] == "4" and "--nodes" not in fixed


@pytest.mark.parametrize("key, value, why", [
    ("doctor", "always", "which has no doctor"),
    ("sharp", True, "which has no NCCL and no SHARP setting"),
])
def test_the_configuration_refuses_what_the_kind_of_the_size_does_not_have(key, value, why):
    with pytest.raises(ConfigError, match=re.escape(f"fabricTest.{key}: ") + ".*"
                       + re.escape(f"{kinds.POINT_TO_POINT.test}, {why}")):
        stack_config.parse(dev_config(ibPool={"vmSize": "Standard_HB176rs_v4"}, fabricTest={key: value}), "dev")
    # the all-reduce has both
    assert stack_config.parse(dev_config(fabricTest={key: value}), "dev").fabric_test


def test_the_assembly_has_a_job_for_every_kind_and_refuses_a_kind_without_one():
    """stack/fabric_test.py JOBS: one entry per kind, so a kind added to core/kinds.py without its job fails
    here, not on the first stack of a size that runs it."""
    from dataclasses import replace

    from stack import fabric_test

    assert set(fabric_test.JOBS) == set(kinds.BY_NAME)
    with pytest.raises(ValueError, match="fabricTest: no job runs the 'ib_write_bw' fabric test"):
        fabric_test.job_of(replace(kinds.POINT_TO_POINT, name="ib_write_bw"))


def test_each_record_names_its_launcher_and_a_log_format_verify_reads():
    """Kind.launcher is the script the job mounts (components/fabric/mpi_job.py SCRIPTS); Kind.log_format has
    a reader (verify/readers.py BY_FORMAT) and figures (verify/result.py BY_FORMAT), each judging in the
    record's unit through its threshold flag."""
    import argparse

    from components.fabric import mpi_job, nccl_job, p2p_job
    from verify import readers, result

    assert set(readers.BY_FORMAT) == set(result.BY_FORMAT) == set(kinds.LOG_FORMATS)
    for k in kinds.BY_NAME.values():
        assert (mpi_job.SCRIPTS / k.launcher).is_file(), k.launcher
        reader = readers.reader(k.name)
        assert reader.record is k and result.figures_of(k.name) == result.BY_FORMAT[k.log_format]
        args = argparse.Namespace(threshold_gbps=1.5, threshold_gbits=12.0)
        assert reader.threshold(args) == {"--threshold-gbps": 1.5, "--threshold-gbits": 12.0}[k.threshold_flag]
    assert nccl_job.LAUNCHER_SCRIPT.name == "nccl-launcher.sh" and p2p_job.LAUNCHER_SCRIPT.name == "p2p-launcher.sh"


def test_a_new_kind_of_a_format_verify_reads_needs_no_verify_code(monkeypatch):
    """The replay of docs/developing.md's claim on verify's side: a record whose launcher prints OSU tables
    (here a GPU-node pair test, say), added to core/kinds.py only, is read, judged and written under its own
    name with its format's figures, and read back; its nodes and flags are its record's."""
    import argparse
    from dataclasses import replace

    from tests.paths import DATA
    from verify import readers
    from verify.result import FabricResult

    pair = replace(kinds.POINT_TO_POINT, name="gpu-pair", test="osu_bw between two GPU nodes", gpus=True)
    monkeypatch.setitem(kinds.BY_NAME, pair.name, pair)
    reader = readers.for_kind(pair)
    log = (DATA / "osu_bw_v5.8_azure-hb120-96rs_v3.txt").read_text()
    judged = reader.judge(log, readers.Settings(sku="Standard_HB120rs_v3", nodes=None, threshold=None))
    assert judged.result.kind == "gpu-pair" and judged.result.nodes == 2
    assert judged.result.p2p.bw_at_max_size_gbits and judged.result.verdict in ("PASS", "WARN")
    # the shipped schema predates the kind (conftest holds every other write to it); `make golden` would
    # rewrite it from the records, and that schema takes the document
    import jsonschema

    from verify import result_schema

    write = getattr(FabricResult.to_json, "__wrapped__", FabricResult.to_json)
    doc = write(judged.result)
    assert doc["kind"] == "gpu-pair" and doc["bw_at_max_size_gbits"] == judged.result.p2p.bw_at_max_size_gbits
    jsonschema.Draft202012Validator(result_schema.json_schema()).validate(doc)
    assert FabricResult.from_json(doc) == judged.result
    args = argparse.Namespace(command="report", nodes=3, threshold_gbps=None, threshold_gbits=None)
    assert reader.problem(args) == "--nodes 3: a gpu-pair result spans 2 nodes (omit --nodes)"
