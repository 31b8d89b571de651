"""Aggregates a query can release (counts, sums, means, variances, quantiles), as value objects.

An aggregate says *what* to compute and with which public bounds; the planner
derives its sensitivity and noise, and the engine computes it exactly.

Missing values: a null or NaN in a summed column counts as 0 in a sum (SQL's
SUM skips it), clipped to the bounds like any value (so with bounds (10, 20) it
adds 10), and as the midpoint of the bounds in a mean (it adds nothing to the
centred sum, and its row counts in the denominator). Filter such rows out
first (``.filter(pl.col("x").is_not_null() & pl.col("x").is_not_nan())``) for
SQL's AVG semantics. Infinities are clipped to the bounds like any other value.

Example:
    >>> import privframe as pf
    >>> pf.sum("amount", bounds=(0, 1000)).output_name
    'amount_sum'
    >>> pf.mean("amount", bounds=(0, 1000)).alias("avg").output_name
    'avg'
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Self, TypeVar, overload

import numpy as np

from privframe._arguments import hinted
from privframe.accounting._numbers import check_real
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError

__all__ = [
    "Aggregate",
    "Count",
    "CountDistinct",
    "Mean",
    "Quantile",
    "Std",
    "Sum",
    "Var",
    "count",
    "count_distinct",
    "mean",
    "median",
    "quantile",
    "std",
    "sum",
    "var",
]


_BOUNDS = (
    "bounds=(lower, upper) are public clipping bounds: finite numbers, lower < upper, chosen "
    "from knowledge of the domain (e.g. bounds=(0, 1000)), never computed from the data; "
    "values outside them are clipped to them"
)
_Q = "q is the quantile to release, a number in [0, 1] (0.5 for the median)"


def _number(where: str, name: str, value: object, fix: str) -> float:
    """``value`` as an exact, finite float, or an error of ``where`` saying how to ``fix`` it.

    A bound or a quantile's q is not a budget: the accounting check's
    InvalidBudgetError becomes an InvalidValueError about the aggregate.
    """
    error: type[PrivframeError]
    try:
        return check_real(name, value)
    except InvalidArgumentError as err:
        error, problem = InvalidArgumentError, str(err)
    except InvalidValueError as err:
        error, problem = InvalidValueError, str(err)
    # Raised outside the except blocks, so the accounting error is not chained to it.
    raise error(f"{where}: {problem}. {fix}")


def _check_bounds(kind: str, column: str, bounds: object) -> tuple[float, float]:
    where = f"{kind}({column!r})"
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidArgumentError(
            f"{where}: bounds must be a (lower, upper) pair, got {bounds!r}. {_BOUNDS}"
        )
    lower = _number(where, "the lower bound", bounds[0], _BOUNDS)
    upper = _number(where, "the upper bound", bounds[1], _BOUNDS)
    if not lower < upper:
        raise InvalidValueError(
            f"{where}: bounds must satisfy lower < upper, got ({lower!r}, {upper!r}). {_BOUNDS}"
        )
    return lower, upper


def _check_column(column: object) -> str:
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(f"column must be a non-empty string, got {column!r}")
    return column


@dataclass(frozen=True)
class Aggregate:
    """Base class of the aggregates; use :func:`count`, :func:`sum` and :func:`mean`."""

    name: str | None = None

    def alias(self, name: str) -> Self:
        """Return a copy whose output column is called ``name``.

        Example:
            >>> import privframe as pf
            >>> pf.count().alias("n").output_name
            'n'
        """
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"alias must be a non-empty string, got {name!r}")
        return dataclasses.replace(self, name=name)

    @property
    def output_name(self) -> str:
        """The output column's name: the alias, or a default derived from the aggregate."""
        return self.name or self._default_name()

    def _default_name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Aggregate):
    """The number of rows per group (after filtering and contribution bounding)."""

    def _default_name(self) -> str:
        return "count"


@dataclass(frozen=True)
class CountDistinct(Aggregate):
    """The number of distinct privacy units per group (after contribution bounding).

    Each unit adds 1 to at most ``max_groups`` groups, so the grouped vector
    has L2 sensitivity sqrt(k), whatever ``max_rows_per_group`` is. Without a
    privacy unit every row is a unit, and this equals :func:`count`.
    """

    def _default_name(self) -> str:
        return "count_distinct"


@dataclass(frozen=True, kw_only=True)
class _Bounded(Aggregate):
    column: str
    lower: float
    upper: float

    @property
    def midpoint(self) -> Fraction:
        """(L + U)/2, exactly."""
        return (Fraction(self.lower) + Fraction(self.upper)) / 2

    @property
    def magnitude(self) -> float:
        """max(|L|, |U|): the largest change one row can make to a sum."""
        return max(abs(self.lower), abs(self.upper))


@dataclass(frozen=True, kw_only=True)
class Sum(_Bounded):
    """The sum of a column's values, each clipped to [lower, upper], per group."""

    def _default_name(self) -> str:
        return f"{self.column}_sum"


@dataclass(frozen=True, kw_only=True)
class Mean(_Bounded):
    """The mean of a column's values, each clipped to [lower, upper], per group.

    Released as a noisy centred sum over a noisy count, shared with a
    ``count()`` in the same query.
    """

    def _default_name(self) -> str:
        return f"{self.column}_mean"


@dataclass(frozen=True, kw_only=True)
class Var(_Bounded):
    """The variance of a column's values, each clipped to [lower, upper], per group.

    Computed from three noisy measurements: the count (shared), the centred
    sum (shared with a mean of the same column and bounds) and the sum of
    squares about the midpoint. The plug-in estimate has the centred sum's
    noise bias removed (E[C²] = C² + σ_C²) and is clamped to [0, ((U − L)/2)²].
    """

    def _default_name(self) -> str:
        return f"{self.column}_var"


@dataclass(frozen=True, kw_only=True)
class Std(Var):
    """The standard deviation: the square root of :class:`Var`'s estimate."""

    def _default_name(self) -> str:
        return f"{self.column}_std"


@dataclass(frozen=True, kw_only=True)
class Quantile(_Bounded):
    """The q-quantile of a column's values, each clipped to [lower, upper], per group.

    Chosen among ``candidates`` evenly spaced points from ``lower`` to
    ``upper`` by the exponential mechanism (``docs/quantiles.md``). Null and
    NaN values are ignored (they still count toward a unit's row limit).
    A candidate's distance from the target rank q·n is measured to its rank
    interval [#{v < c}, #{v <= c}], so values tied on a candidate count there.
    """

    q: float
    candidates: int

    @property
    def spacing(self) -> float:
        """The distance between neighbouring candidates: the output's resolution."""
        return (self.upper / 2 - self.lower / 2) / (self.candidates - 1) * 2

    def candidate_values(self) -> list[float]:
        """The candidates, from lower to upper: L + (U − L)·i/(N − 1), each rounded once."""
        return list(_grid(self.lower, self.upper, self.candidates))

    def _default_name(self) -> str:
        return f"{self.column}_p{self.q * 100:g}"


_B = TypeVar("_B", bound=_Bounded)


def _bounded(cls: type[_B], column: object, bounds: object) -> _B:
    """A bounded aggregate of ``column`` after checking the column name and the bounds."""
    name = _check_column(column)
    lower, upper = _check_bounds(cls.__name__.lower(), name, bounds)
    return cls(column=name, lower=lower, upper=upper)


@hinted(
    "count() counts the rows of each group and takes no column; filter rows first, and name "
    "the output with .alias(...)"
)
def count() -> Count:
    """Count rows per group; the output column is ``count``.

    Example:
        >>> import privframe as pf
        >>> pf.count()
        Count(name=None)
    """
    return Count()


@hinted(
    "count_distinct() counts the distinct privacy units of each group and takes no column; "
    "name the output with .alias(...)"
)
def count_distinct() -> CountDistinct:
    """Count distinct privacy units per group; the output column is ``count_distinct``.

    Example:
        >>> import privframe as pf
        >>> pf.count_distinct().output_name
        'count_distinct'
    """
    return CountDistinct()


@hinted(bounds=_BOUNDS)
def sum(column: str, bounds: tuple[float, float]) -> Sum:
    """Sum ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper. They must
            come from knowledge of the domain, never from the private data.

    Example:
        >>> import privframe as pf
        >>> pf.sum("amount", bounds=(0, 1000)).magnitude
        1000.0
    """
    return _bounded(Sum, column, bounds)


@hinted(bounds=_BOUNDS)
def var(column: str, bounds: tuple[float, float]) -> Var:
    """Variance of ``column`` per group, each value clipped to ``bounds`` first.

    Example:
        >>> import privframe as pf
        >>> pf.var("age", bounds=(18, 90)).output_name
        'age_var'
    """
    return _bounded(Var, column, bounds)


@hinted(bounds=_BOUNDS)
def std(column: str, bounds: tuple[float, float]) -> Std:
    """Standard deviation of ``column`` per group, each value clipped to ``bounds`` first.

    Example:
        >>> import privframe as pf
        >>> pf.std("age", bounds=(18, 90)).output_name
        'age_std'
    """
    return _bounded(Std, column, bounds)


@hinted(bounds=_BOUNDS)
def mean(column: str, bounds: tuple[float, float]) -> Mean:
    """Average ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper.

    Example:
        >>> import privframe as pf
        >>> float(pf.mean("age", bounds=(18, 90)).midpoint)
        54.0
    """
    return _bounded(Mean, column, bounds)


_DEFAULT_CANDIDATES = 1001
_MAX_CANDIDATES = 1 << 16


@functools.lru_cache(maxsize=64)
def _grid(lower: float, upper: float, n: int) -> tuple[float, ...]:
    lo, width = Fraction(lower), Fraction(upper) - Fraction(lower)
    return tuple(float(lo + width * Fraction(i, n - 1)) for i in range(n))


def _check_q(column: str, q: object) -> float:
    value = _number(f"quantile({column!r})", "q", q, _Q)
    if not 0 <= value <= 1:
        raise InvalidValueError(f"quantile q must be in [0, 1], got {q!r}")
    return value


def _check_candidates(candidates: object) -> int:
    if (
        isinstance(candidates, bool)
        or not isinstance(candidates, numbers.Integral)
        or candidates < 2
    ):
        raise InvalidArgumentError(
            f"candidates must be an integer >= 2 (the number of evenly spaced output values), "
            f"got {candidates!r}"
        )
    if candidates > _MAX_CANDIDATES:
        raise InvalidValueError(f"candidates must be at most 2**16, got {candidates!r}")
    return int(candidates)


@overload
def quantile(
    column: str, q: float, bounds: tuple[float, float], *, candidates: int = ...
) -> Quantile: ...
@overload
def quantile(
    column: str, q: Sequence[float], bounds: tuple[float, float], *, candidates: int = ...
) -> tuple[Quantile, ...]: ...
@hinted(bounds=_BOUNDS, q=_Q)
def quantile(
    column: str,
    q: float | Sequence[float],
    bounds: tuple[float, float],
    *,
    candidates: int = _DEFAULT_CANDIDATES,
) -> Quantile | tuple[Quantile, ...]:
    """The ``q``-quantile(s) of ``column`` per group, values clipped to ``bounds``.

    Each quantile is one output (``<column>_p<100·q>``), released by the
    exponential mechanism over ``candidates`` evenly spaced points from the
    lower to the upper bound, so the output is always one of those points and
    its resolution is ``(upper − lower)/(candidates − 1)``. Several q at once
    give a tuple, which :meth:`~privframe.api.query.Query.agg` accepts as is; each
    takes its own share of ρ.

    Args:
        column: a numeric column.
        q: a number in [0, 1] (0.5 for the median) or a sequence of them.
        bounds: public (lower, upper) bounds, lower < upper.
        candidates: how many output values to choose from (>= 2; default 1001,
            so bounds (0, 1000) give a resolution of 1).

    Example:
        >>> import privframe as pf
        >>> [a.output_name for a in pf.quantile("age", [0.25, 0.75], bounds=(18, 90))]
        ['age_p25', 'age_p75']
        >>> pf.quantile("age", 0.5, bounds=(0, 100), candidates=11).candidate_values()[:3]
        [0.0, 10.0, 20.0]
    """
    name = _check_column(column)
    lower, upper = _check_bounds("quantile", name, bounds)
    n = _check_candidates(candidates)
    grid = _grid(lower, upper, n)
    if any(a >= b for a, b in itertools.pairwise(grid)):
        raise InvalidValueError(
            f"bounds ({lower!r}, {upper!r}) of column {name!r} are too close for {n} distinct "
            "candidates; use fewer candidates or wider bounds"
        )
    if isinstance(q, np.ndarray):
        q = q.tolist()
    if isinstance(q, str) or not isinstance(q, Sequence):
        return Quantile(column=name, lower=lower, upper=upper, q=_check_q(name, q), candidates=n)
    qs = [_check_q(name, x) for x in q]
    if not qs or len(set(qs)) != len(qs):
        raise InvalidValueError(f"q must be a non-empty sequence of distinct numbers, got {q!r}")
    return tuple(Quantile(column=name, lower=lower, upper=upper, q=x, candidates=n) for x in qs)


@hinted(bounds=_BOUNDS)
def median(
    column: str, bounds: tuple[float, float], *, candidates: int = _DEFAULT_CANDIDATES
) -> Quantile:
    """The median of ``column`` per group: ``quantile(column, 0.5, ...)`` named ``<column>_median``.

    Example:
        >>> import privframe as pf
        >>> pf.median("amount", bounds=(0, 1000)).output_name
        'amount_median'
    """
    return quantile(column, 0.5, bounds, candidates=candidates).alias(f"{column}_median")
