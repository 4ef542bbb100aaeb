"""Constant tables that kernel templates bake into the HLS source when it is generated (the
templates see this module as `tables`)."""
from __future__ import annotations

import math


def quarter_sine(n: int) -> list[str]:
    """sin(2 pi j / n) for j in [0, n/4], as C float literals: computed in double, written with
    enough digits (10 significant) that the compiler rounds each to the nearest float."""
    return [f"{math.sin(2 * math.pi * j / n):.9e}f" for j in range(n // 4 + 1)]
