"""How a released frame is read by the views: its outputs with intervals and their error columns.

A release ``with_error=True`` adds ``<name>_std`` and ``<name>_ci95`` beside
an output (``<name>_rank_ci95`` for a quantile); the table and the chart of
a result fold those into their output.

Example:
    >>> from privframe.api._frames import error_columns, interval_columns
    >>> columns = ["region", "n", "n_std", "n_ci95"]
    >>> interval_columns(columns), sorted(error_columns(columns, interval_columns(columns)))
    ({'n': 'n_ci95'}, ['n_ci95', 'n_std'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import pandas as pd
import polars as pl

from privframe.plan.aggregates.base import CI95_SUFFIX, RANK_CI95_SUFFIX, STD_SUFFIX

__all__ = ["Frame", "as_polars", "error_columns", "interval_columns"]

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
