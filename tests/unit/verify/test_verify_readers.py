"""verify/readers.py: one reader per fabric-test kind, looked up by the kind's name; the CLI's report
and collect paths take the reader object (their behaviour: tests/unit/verify/test_verify_cli.py,
tests/unit/clusterside/test_verify_collect.py)."""

from __future__ import annotations

import pytest

from core import kinds
from verify import readers


def test_every_kind_has_its_reader_and_no_other():
    assert set(readers.READERS) == set(kinds.KINDS)
    assert all(readers.reader(k).record is kinds.kind(k) and readers.reader(k).kind == k for k in kinds.KINDS)


def test_an_unknown_kind_is_refused_by_name():
    with pytest.raises(KeyError, match=r"unknown fabric-test kind 'dra'; known: nccl, p2p"):
        readers.reader("dra")


@pytest.mark.parametrize("kind", kinds.KINDS)
def test_a_log_with_no_result_is_a_fail_of_that_kind_that_says_why(kind):
    reader = readers.reader(kind)
    settings = readers.Settings(sku=None, nodes=None, threshold=None, job_failed="Volcano job phase Failed")
    with pytest.raises(readers.PARSE_ERRORS) as err:
        reader.judge("ssh: connect to host w0 port 22: Connection refused\n", settings)
    judged = reader.unread("ssh: connect to host w0 port 22: Connection refused\n", settings, err.value)
    out = judged.result
    assert (out.kind, out.verdict, out.figures) == (kind, "FAIL", None)
    assert out.reasons[0] == "Volcano job phase Failed" and "holds no" in out.reasons[1]
    assert out.nodes == (2 if kind == kinds.P2P else None)
    assert judged.text.startswith("VERDICT: FAIL")


@pytest.mark.parametrize("kind", kinds.KINDS)
def test_the_threshold_is_read_from_the_kinds_own_flag(kind):
    from verify.__main__ import build_parser

    reader = readers.reader(kind)
    args = build_parser().parse_args(["report", "x.log", "--kind", kind, reader.threshold_flag, "123.5"])
    assert reader.threshold(args) == 123.5
    assert reader.problem(args) is None  # its own unit's flag is never refused
