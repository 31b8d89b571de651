"""How a released frame is read by the views: its outputs with intervals and their error columns.

A release ``with_error=True`` adds ``<name>_std`` and ``<name>_ci95`` beside
an output (``<name>_rank_ci95`` for a quantile); the table and the chart of
a result fold those into their output, and mark the outputs the noise
dominates (:class:`NoiseRule`): a rule on released numbers and the query's
public parameters only, so marking is post-processing and reveals nothing more.

Example:
    >>> from privframe.api._frames import error_columns, interval_columns
    >>> columns = ["region", "n", "n_std", "n_ci95"]
    >>> interval_columns(columns), sorted(error_columns(columns, interval_columns(columns)))
    ({'n': 'n_ci95'}, ['n_ci95', 'n_std'])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeAlias

import pandas as pd
import polars as pl

from privframe.plan.aggregates.base import CI95_SUFFIX, RANK_CI95_SUFFIX, STD_SUFFIX
from privframe.plan.aggregates.count import Count
from privframe.plan.aggregates.distinct import CountDistinct
from privframe.plan.ir import Plan

__all__ = [
    "NOISE_NOTE",
    "Frame",
    "NoiseRule",
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
    "A grey value's 95% interval includes 0: neither its size nor its sign is known; or "
    "(a mean, variance or standard deviation, when its query is known) its 95% interval "
    "spans at least half the range its bounds allow: the release says little more than the "
    "public bounds do. Give the release "
    "more budget (rho, or epsilon), or merge small groups, to make them data."
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


def _finite(value: object) -> float | None:
    """A released cell as a finite number, or None for one that cannot be judged."""
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def within_noise(value: object, half: object) -> bool:
    """Whether a released value's 95% interval ``value ± half`` includes 0: noise dominates it.

    A missing or non-finite value or half-width is not judged (False).

    Example:
        >>> from privframe.api._frames import within_noise
        >>> within_noise(30.2, 29.0), within_noise(3.0, 48.0), within_noise(None, 1.0)
        (False, True, False)
    """
    number, width = _finite(value), _finite(half)
    return number is not None and width is not None and abs(number) <= width


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


@dataclass(frozen=True)
class NoiseRule:
    """Which released rows and values the noise dominates, from released numbers only.

    A row is noise when the 95% interval of one of its ``counts`` includes 0
    (:func:`noisy_rows`). A value is noise when its 95% interval includes 0
    (:func:`within_noise`), or, for an output with a bounded range
    (``ranges``: a mean's bounds, a variance's ``[0, ((U − L)/2)²]``), when
    the interval ``value ± half`` spans at least half the range
    (``2·half >= (high − low)/2``): the release narrows down what the public
    bounds say by less than half. That second test catches a mean of an empty
    group, noise about the bounds' midpoint whose interval need not include 0
    (bounds (1000, 2000): 1916.5 ± 1275.4), in a query that releases no count.
    A bare frame does not know its bounds; :meth:`of_plan` reads them (and the
    count outputs) from the query's plan, public parameters only.

    Example:
        >>> from privframe.api._frames import NoiseRule
        >>> rule = NoiseRule(ranges={"wage_mean": (1000.0, 2000.0)})
        >>> rule.noise("wage_mean", 1916.5, 1275.4), rule.noise("wage_mean", 1500.0, 40.0)
        (True, False)
    """

    counts: tuple[str, ...] = ("count",)
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of_plan(cls, plan: Plan) -> NoiseRule:
        """The plan's count outputs mark rows; its outputs with finite ranges are judged by them.

        Example:
            >>> import privframe as pf
            >>> from privframe.api._frames import NoiseRule
            >>> sess = pf.Session(pf.datasets.synthetic_transactions(100), "user_id", pf.zCDP(1))
            >>> q = sess.query().agg(pf.count().alias("n"), pf.mean("amount", bounds=(0, 10)))
            >>> rule = NoiseRule.of_plan(q.plan)
            >>> rule.counts, dict(rule.ranges)
            (('n',), {'amount_mean': (0.0, 10.0)})
        """
        counted = (a for a in plan.aggregates if isinstance(a, Count | CountDistinct))
        counts = tuple(a.output_name for a in counted)
        ranges = {
            a.output_name: (float(low), float(high))
            for a in plan.aggregates
            for low, high in [a.possible_range()]
            if math.isfinite(low) and math.isfinite(high)
        }
        return cls(counts, MappingProxyType(ranges))

    def rows(self, data: pl.DataFrame) -> list[bool]:
        """Per row, whether one of its counts is within noise of 0."""
        return noisy_rows(data, self.counts)

    def noise(self, name: str, value: object, half: object) -> bool:
        """Whether the value ``value ± half`` of output ``name`` is dominated by noise."""
        if within_noise(value, half):
            return True
        span = self.ranges.get(name)
        if span is None or _finite(value) is None:
            return False
        width = _finite(half)
        # Half the range, not all of it: an empty group's mean is divided by its noisy
        # count, often 2 or 3, which narrows its interval below the whole range.
        return width is not None and 2 * width >= (span[1] - span[0]) / 2
