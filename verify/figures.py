"""How a report prints a measured figure: small ones keep their significant digits.

A socket run's 0.08 GB/s printed with one decimal reads "0.1 GB/s", and with a fixed format it
could read "0.0 GB/s", which says nothing was measured. One decimal from 1 up (187.2 GB/s), two
significant digits below (0.84, 0.084, 0.0084).
"""

from __future__ import annotations

import math


def figure(value: float) -> str:
    """`value` as a report shows it: '187.2', '3.4', '0.84', '0.0084', '0'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}" if abs(value) >= 1e-4 else f"{value:.2e}"
