"""Reading a fabric-test result: parse the log, judge it against the SKU's expectation, report it.
nccl-tests all-reduce on GPU sizes (here); OSU / perftest point to point on CPU-only sizes
(`verify.p2p`). `core.kinds` names the two.

Pure Python, no Pulumi and no cluster: the same code judges a saved log (`python -m verify report LOG`),
the stack's collect step and the in-cluster certifier. What reads or writes a cluster (the collector, the
certifier, their Kubernetes clients) is `clusterside/`, which imports this package and is never imported
by it; only the command line, verify/__main__.py, dispatches to it. SKU expectations come from
`core.catalog`, the one place that holds them.
"""

from verify.nccl import ParseError, parse, parse_file
from verify.nccl_result import Measurement, NcclResult, Rank, Row
from verify.verdict import Judgement, Verdict, judge

__all__ = [
    "Judgement",
    "Measurement",
    "NcclResult",
    "ParseError",
    "Rank",
    "Row",
    "Verdict",
    "judge",
    "parse",
    "parse_file",
]
