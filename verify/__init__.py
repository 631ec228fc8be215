"""Reading a fabric-test result: parse the log, judge it against the SKU's expectation, report it.
nccl-tests all-reduce on GPU sizes (here); OSU / perftest point to point on CPU-only sizes
(`verify.p2p`). `core.kinds` names the two.

Pure Python, no Pulumi: the same code runs inside the stack (the collect step) and from a shell
(`python -m verify report LOG`, `python -m verify collect ...`). SKU expectations come from
`core.catalog`, the one place that holds them.
"""

from verify.nccl import Measurement, NcclResult, ParseError, Rank, Row, parse, parse_file
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
