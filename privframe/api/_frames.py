"""How a released frame is read by the views: its outputs with intervals and their error columns.

A release ``with_error=True`` adds ``<name>_std`` and ``<name>_ci95`` beside
an output (``<name>_rank_ci95`` for a quantile); the table and the chart of
a result fold those into their output, and mark the outputs the noise
dominates (:func:`within_noise`): a rule on released numbers only, so marking
is post-processing and reveals nothing more.

Example:
    >>> from privframe.api._frames import error_columns, interval_columns
    >>> columns = ["region", "n", "n_std", "n_ci95"]
    >>> interval_columns(columns), sorted(error_columns(columns, interval_columns(columns)))
    ({'n': 'n_ci95'}, ['n_ci95', 'n_std'])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

import pandas as pd
import polars as pl

from privframe.plan.aggregates.base import CI95_SUFFIX, RANK_CI95_SUFFIX, STD_SUFFIX

__all__ = [
    "NOISE_NOTE",
    "Frame",
    "as_polars",
    "error_columns",
    "interval_columns",
    "noisy_rows",
    "within_noise",
]

NOISE_NOTE = (
    "Grey: dominated by noise (judged from the released numbers only). A grey row's count "
    "has a 95% interval that includes 0: the group may have no rows at all, so its other "
    "outputs are mostly noise (a mean of an empty group is noise about the bounds' midpoint). "
    "A grey value's 95% interval includes 0: neither its size nor its sign is known. Give "
    "the release more rho, or merge small groups, to make them data."
)
"""What the grey rows and values of a result's table mean."""

Frame: TypeAlias = pl.DataFrame | pd.DataFrame
"""A released result: privframe returns the kind of frame it was given."""


def as_polars(frame: Frame) -> pl.DataFrame:
    """The frame as polars (a pandas frame is converted).

    Example:
        >>> import pandas as pd
        >>> from privframe.api._frames import as_polars
        >>> as_polars(pd.DataFrame({"n": [1]})).columns
        ['n']
    """
    return frame if isinstance(frame, pl.DataFrame) else pl.from_pandas(frame)


def interval_columns(columns: Sequence[str]) -> dict[str, str]:
    """Each output column with an interval, and the column holding it (``_ci95`` first).

    Example:
        >>> from privframe.api._frames import interval_columns
        >>> interval_columns(["x_p50", "x_p50_rank_ci95"])
        {'x_p50': 'x_p50_rank_ci95'}
    """
    found: dict[str, str] = {}
    for name in columns:
        for suffix in (CI95_SUFFIX, RANK_CI95_SUFFIX):
            if f"{name}{suffix}" in columns:
                found[name] = f"{name}{suffix}"
                break
    return found


def error_columns(columns: Sequence[str], outputs: dict[str, str]) -> set[str]:
    """The error columns folded into their outputs' cells (``_std`` goes with ``_ci95``).

    Example:
        >>> from privframe.api._frames import error_columns
        >>> sorted(error_columns(["n", "n_std", "n_ci95"], {"n": "n_ci95"}))
        ['n_ci95', 'n_std']
    """
    return {c for name in outputs for c in (name + STD_SUFFIX, outputs[name]) if c in columns}


def within_noise(value: object, half: object) -> bool:
    """Whether a released value's 95% interval ``value ± half`` includes 0: noise dominates it.

    A missing or non-finite value or half-width is not judged (False).

    Example:
        >>> from privframe.api._frames import within_noise
        >>> within_noise(30.2, 29.0), within_noise(3.0, 48.0), within_noise(None, 1.0)
        (False, True, False)
    """
    if not isinstance(value, int | float) or not isinstance(half, int | float):
        return False
    if not (math.isfinite(value) and math.isfinite(half)):
        return False
    return abs(value) <= half


def noisy_rows(data: pl.DataFrame, counts: Sequence[str]) -> list[bool]:
    """Per row, whether the 95% interval of one of its ``counts`` (released with one) includes 0.

    Example:
        >>> import polars as pl
        >>> from privframe.api._frames import noisy_rows
        >>> frame = pl.DataFrame({"count": [2, 900], "count_ci95": [48.0, 48.0]})
        >>> noisy_rows(frame, ["count"])
        [True, False]
    """
    judged = [c for c in counts if c in data.columns and c + CI95_SUFFIX in data.columns]
    pairs = [(data[c].to_list(), data[c + CI95_SUFFIX].to_list()) for c in judged]
    return [any(within_noise(v[i], h[i]) for v, h in pairs) for i in range(data.height)]
