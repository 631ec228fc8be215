"""The fabric outputs of a stack of several IB pools: each pool's day-0 verdict and its figures, as maps keyed by
pool name (`fabricVerdictByPool`, `allReduceBusBwAtMaxSizeGbpsByPool`, ...), and `fabricVerdict`, the worst of
them. A stack of one pool exports its check's outputs as they always were (`FabricCheck.stack_outputs`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.fabric.fabric_check import PENDING, FabricCheck

# Worst first: a FAIL anywhere is the stack's; then a verdict that could not be reached, a pool still running,
# a WARN; PASS only when every pool passed.
WORST_FIRST = ("FAIL", "UNKNOWN", PENDING, "WARN", "PASS")


def worst(verdicts: list[str]) -> str:
    """The stack's verdict from its pools': the first of WORST_FIRST that any pool has."""
    return next((v for v in WORST_FIRST if v in verdicts), "UNKNOWN")


def stack_outputs_by_pool(checks: Mapping[str, FabricCheck]) -> dict[str, pulumi.Output[Any]]:
    """`<output>ByPool` for each of the checks' outputs (a pool whose kind has no such figure is left out of
    that map), and `fabricVerdict`: the worst pool's."""
    by_output: dict[str, dict[str, pulumi.Output[Any]]] = {}
    for pool, check in checks.items():
        for output_name, value in check.stack_outputs().items():
            by_output.setdefault(f"{output_name}ByPool", {})[pool] = value
    verdicts = [check.verdict for check in checks.values()]
    return {"fabricVerdict": pulumi.Output.all(*verdicts).apply(lambda vs: worst(list(vs))), **by_output}
