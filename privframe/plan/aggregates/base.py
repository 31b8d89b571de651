"""What every aggregate owns, behind one interface, and the checks of its public parameters.

An aggregate family is one module of :mod:`privframe.plan.aggregates`. Its
class says which noisy measurements it needs (:meth:`Aggregate.needs`, each
deriving its own sensitivity), how the noisy measurements become its output
and error columns (:meth:`Aggregate.estimate`, post-processing), its
``explain`` row, the terms of its relative error for ``pf.balance``, and the
names SQL and report specs use for it. A concrete subclass that leaves one of
these out is refused when its module is imported, so an aggregate can never
be released with a piece silently missing; every concrete family is listed in
:data:`FAMILIES`.

Example:
    >>> from privframe.plan.aggregates import FAMILIES
    >>> sorted(f.spec_name for f in FAMILIES)
    ['count', 'count_distinct', 'mean', 'quantile', 'std', 'sum', 'var']
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal, Protocol, Self, TypeAlias, TypeVar

import numpy as np

from privframe.engines.spec import ValueSpec
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError
from privframe.numeric import check_real
from privframe.plan.limits import Limits
from privframe.plan.measurements import (
    Z95,
    GaussianNeed,
    GridRange,
    Kind,
    Measurement,
    Need,
    Share,
    exact_text,
    grid_measurement,
)

__all__ = [
    "AUTO",
    "AUTO_STAND_IN",
    "BOUNDS_HINT",
    "CI95_SUFFIX",
    "ERROR_SUFFIXES",
    "FAMILIES",
    "HIGH_SUFFIX",
    "LOW_SUFFIX",
    "MISSING_HINT",
    "RANK_CI95_SUFFIX",
    "STD_SUFFIX",
    "Aggregate",
    "Bounded",
    "Bounds",
    "GridNeed",
    "Measured",
    "Missing",
    "Summary",
    "Summed",
    "Width",
    "bounded",
    "check_missing",
]

BOUNDS_HINT = (
    "bounds=(lower, upper) are public clipping bounds: finite numbers, lower < upper, chosen "
    "from knowledge of the domain (e.g. bounds=(0, 1000)), never computed from the data; "
    "values outside them are clipped to them"
)

AUTO = "auto"
"""The ``bounds`` value that asks the release to choose the bounds privately."""

Bounds = tuple[float, float] | Literal["auto"]
"""An aggregate's ``bounds``: a public (lower, upper) pair, or :data:`AUTO`."""

AUTO_STAND_IN = (0.0, 1.0)
"""The bounds an aggregate with ``bounds="auto"`` holds until its release chooses them.

Only ``explain`` plans with them (per unit of the bounds' magnitude); a
release replaces them first (:mod:`privframe.plan.auto_bounds`).
"""

MISSING_HINT = (
    'missing= says what a null or NaN value does: "midpoint" (the default) counts it as the '
    'bounds\' midpoint, and its row counts; "drop" leaves its row out of this aggregate (as '
    "SQL's SUM and AVG skip nulls; count() still counts the row); a number counts it as that "
    "value (clipped to the bounds). Which rows have a value is never checked: a rule that "
    "refused a release because of one person's missing value would disclose it"
)

Missing: TypeAlias = Literal["drop", "midpoint"] | float
"""What a null or NaN value of a summed column does (:data:`MISSING_HINT`)."""

STD_SUFFIX = "_std"
CI95_SUFFIX = "_ci95"
RANK_CI95_SUFFIX = "_rank_ci95"
LOW_SUFFIX = "_ci95_low"
HIGH_SUFFIX = "_ci95_high"
ERROR_SUFFIXES = (STD_SUFFIX, CI95_SUFFIX, RANK_CI95_SUFFIX, LOW_SUFFIX, HIGH_SUFFIX)
"""The suffixes of the error columns ``with_error=True`` (or ``intervals=True``) adds."""

FAMILIES: list[type[Aggregate]] = []
"""Every concrete aggregate class, in the order their modules were imported."""

_REQUIRED = ("needs", "estimate", "formula", "width", "balance_terms", "_default_name")


@dataclass(frozen=True)
class Summary:
    """A group as ``tune`` estimates it before bounding (:mod:`privframe.plan.tuning_choice`).

    ``rows`` and ``distinct`` units per group, and of a bounded column's
    values the ``mean``, mean absolute value ``spread`` and ``variance``
    (None where there is no estimate).

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.aggregates.base import Summary
        >>> pf.sum("x", (0, 10)).typical_value(Summary(100.0, 40.0, 2.0, 2.0, 1.0))
        (200.0, 200.0)
    """

    rows: float
    distinct: float
    mean: float | None = None
    spread: float | None = None
    variance: float | None = None


class RankMeasured(Protocol):
    """A measurement chosen by the exponential mechanism: its error is in ranks."""

    def rank_error(self, probability: float = 0.95) -> float:
        """Rows of rank error beyond the best candidate's, at ``probability`` (public)."""
        ...


class Measured(Protocol):
    """A release's measurements by key: what an aggregate's estimate and explain row read."""

    def measurement(self, key: str) -> Measurement:
        """The Gaussian measurement with this key."""
        ...

    def quantile(self, key: str) -> RankMeasured:
        """The quantile measurement with this key."""
        ...


_NO_STD = "n/a (exponential mechanism; error in ranks, not values)"


@dataclass(frozen=True)
class Width:
    """An output's noise from public parameters alone: its std and 95% half-width.

    The numbers ``explain`` prints and the budget planner draws. A mean's or
    a variance's error is that of its numerator over its released count:
    ``per`` names that count, and the numbers are the numerator's. A
    quantile's error is in ranks (``ranks``): ``ci95`` is rows of rank and
    there is no std.

    Attributes:
        ci95: the 95% half-width (exact unless ``approx``).
        std: the std, None for a quantile.
        approx: ``ci95`` is a normal approximation (a sum of several
            measurements) or first order (the delta method of a ratio).
        per: the output whose released value divides both numbers.
        ranks: ``ci95`` counts rows of rank, not the output's unit.
        detail: what follows the half-width in ``explain``.
        own_units: False when the numbers are another quantity's (a standard
            deviation's are its variance's), so no chart draws them as its.

    Example:
        >>> Width(ci95=19.6, std=10.0, approx=True, per="count").cells()
        ('≈ 10 / count', '≈ 19.6 / count')
    """

    ci95: float
    std: float | None
    approx: bool = False
    per: str | None = None
    ranks: bool = False
    detail: str = ""
    own_units: bool = True

    def interval(self) -> str:
        """The 95% half-width in brief, as the budget planner and the dashboard show it.

        An interval over a released count is stated at its worst: ``≤``.

        Example:
            >>> Width(ci95=19.6, std=10.0, approx=True, per="count").interval()
            '≤ ≈ ± 19.6 / count'
            >>> Width(ci95=12.0, std=None, ranks=True).interval()
            '± 12 rows of rank'
        """
        if self.ranks:
            return f"± {self.ci95:.4g} rows of rank"
        per = f" / {self.per}" if self.per else ""
        detail = f" {self.detail}" if self.detail else ""
        at_most = "≤ " if self.per else ""
        return f"{at_most}{'≈ ' if self.approx else ''}± {self.ci95:.6g}{per}{detail}"

    def cells(self) -> tuple[str, str]:
        """The (std, 95% half-width) as ``explain`` prints them."""
        if self.std is None:
            return _NO_STD, f"{self.ci95:.4g} rows of rank {self.detail}"
        per = f" / {self.per}" if self.per else ""
        tail = f" {self.detail}" if self.detail else ""
        # A std over a count is first order; a sum of measurements' std is exact.
        std = ("≈ " if self.per else "") + f"{self.std:.6g}{per}{tail}"
        return std, ("≈ " if self.approx else "") + f"{self.ci95:.6g}{per}{tail}"


@dataclass(frozen=True)
class Aggregate:
    """Base class of the aggregates; use :func:`~privframe.count`, :func:`~privframe.sum`, ...

    Subclasses set ``spec_name`` (the name in report specs) and
    ``sql_functions`` (SQL function names that make it from one bounded
    column), and implement every method below that raises
    ``NotImplementedError``; ``abstract=True`` in the class statement marks an
    intermediate base that is not a family itself.
    """

    spec_name: ClassVar[str] = ""
    sql_functions: ClassVar[tuple[str, ...]] = ()
    needs_expected: ClassVar[bool] = True  # pf.balance needs a guess of its size
    integer_output: ClassVar[bool] = False  # released as integers (counts), else floats
    # tune sets its bounds to span the values, not by its error model (quantiles).
    tuned_by_coverage: ClassVar[bool] = False
    # Its measurements add up over groups, so a total row can be estimated from their sum.
    additive: ClassVar[bool] = False
    # Its value is a fixed linear function of additive measurements: groups add up to the total.
    linear: ClassVar[bool] = False

    name: str | None = None

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        missing = [m for m in _REQUIRED if getattr(cls, m) is getattr(Aggregate, m)]
        if missing or not cls.spec_name:
            raise TypeError(
                f"aggregate {cls.__name__} does not define {missing or ['spec_name']}: every "
                "aggregate owns its measurements, estimate, explain row, balance terms, "
                "default name and spec name (docs/architecture.md)"
            )
        FAMILIES.append(cls)

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

    @property
    def columns(self) -> tuple[str, ...]:
        """The data columns it reads (they must exist and be numeric)."""
        return ()

    def error_columns(self) -> tuple[str, ...]:
        """The columns ``with_error=True`` adds: a standard deviation and a 95% half-width."""
        return (self.output_name + STD_SUFFIX, self.output_name + CI95_SUFFIX)

    def interval_columns(self) -> tuple[str, ...]:
        """The columns ``intervals=True`` adds: the 95% interval's ends (none for ranks)."""
        return (self.output_name + LOW_SUFFIX, self.output_name + HIGH_SUFFIX)

    def possible_range(self) -> tuple[float, float]:
        """Where its true value lies whatever the data: clamping clips estimates into it."""
        return (-math.inf, math.inf)

    def describe(self) -> str:
        """What it releases, in a word or a phrase, for views of a query (its spec name)."""
        return self.spec_name

    def missing_rule(self) -> str | None:
        """What a null or NaN value of its column does, for ``explain``; None without a column."""
        return None

    def keys(self) -> tuple[str, ...]:
        """The keys of the measurements it reads, in the order of :meth:`needs`."""
        return tuple(need.key for need in self.needs())

    def _default_name(self) -> str:
        raise NotImplementedError

    def needs(self) -> tuple[Need, ...]:
        """The noisy measurements this output is computed from (each derives its sensitivity)."""
        raise NotImplementedError

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """Its output column (and error columns) from the noisy measurements: post-processing."""
        raise NotImplementedError

    def formula(self, measured: Measured) -> str:
        """How ``explain`` shows its output derived from its measurements (post-processing)."""
        raise NotImplementedError

    def width(self, measured: Measured) -> Width:
        """Its std and 95% half-width, from public numbers (``explain`` and the planner)."""
        raise NotImplementedError

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Its squared first-order relative error as Σ_m b_m/ρ_m: the b_m per measurement key.

        ``coefficients`` holds each measurement's c (squared 95% error c/ρ),
        ``rows`` the public guess of rows per group and ``expected`` the guess
        of this output's value (None when ``needs_expected`` is False).
        """
        raise NotImplementedError

    def typical_value(self, summary: Summary) -> tuple[float, float]:
        """Its unbounded value and the size its relative error is taken at, for ``tune``.

        (0, 0) when ``tune``'s error model leaves it out (it keeps its ρ share).
        """
        return (0.0, 0.0)

    def split_terms(self, coefficients: Mapping[str, float]) -> dict[str, float]:
        """Its error terms b_m (squared error Σ_m b_m/ρ_m) for the default ρ split.

        The default split weighs each output's error relative to the least it
        could have alone, which does not depend on the output's scale, so
        these are :meth:`balance_terms` at any size: outputs whose terms
        depend on their value (a mean far from its midpoint needs a better
        count) override this with a public typical or worst case.
        """
        return self.balance_terms(coefficients, 1.0, 1.0)


def check_number(where: str, name: str, value: object, fix: str) -> float:
    """A public number of an aggregate (a bound, a quantile's q) as an exact, finite float.

    A bound or a quantile's q is not a budget: the accounting check's
    InvalidBudgetError becomes an InvalidValueError about the aggregate,
    saying how to ``fix`` it.

    Example:
        >>> from privframe.plan.aggregates.base import check_number
        >>> check_number("quantile('x')", "q", 0.5, "q is in [0, 1]")
        0.5
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


def check_bounds(kind: str, column: str, bounds: object) -> tuple[float, float]:
    """Public clipping bounds (lower, upper): finite, lower < upper.

    Example:
        >>> from privframe.plan.aggregates.base import check_bounds
        >>> check_bounds("sum", "x", (0, 10))
        (0.0, 10.0)
    """
    where = f"{kind}({column!r})"
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidArgumentError(
            f"{where}: bounds must be a (lower, upper) pair, got {bounds!r}. {BOUNDS_HINT}"
        )
    lower = check_number(where, "the lower bound", bounds[0], BOUNDS_HINT)
    upper = check_number(where, "the upper bound", bounds[1], BOUNDS_HINT)
    if not lower < upper:
        raise InvalidValueError(
            f"{where}: bounds must satisfy lower < upper, got ({lower!r}, {upper!r}). {BOUNDS_HINT}"
        )
    return lower, upper


def check_column(column: object) -> str:
    """A column name: a non-empty string.

    Example:
        >>> from privframe.plan.aggregates.base import check_column
        >>> check_column("amount")
        'amount'
    """
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(f"column must be a non-empty string, got {column!r}")
    return column


@dataclass(frozen=True, kw_only=True)
class Bounded(Aggregate, abstract=True):
    """An aggregate of one numeric column whose values are clipped to public bounds.

    With ``auto`` its bounds are :data:`AUTO_STAND_IN` until its release
    chooses them privately (:mod:`privframe.plan.auto_bounds`).
    """

    column: str
    lower: float
    upper: float
    auto: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The column it reads."""
        return (self.column,)

    @property
    def midpoint(self) -> Fraction:
        """(L + U)/2, exactly."""
        return (Fraction(self.lower) + Fraction(self.upper)) / 2

    @property
    def magnitude(self) -> float:
        """max(|L|, |U|): the largest change one row can make to a sum."""
        return max(abs(self.lower), abs(self.upper))

    @property
    def half_width(self) -> float:
        """(U − L)/2, without overflow near the float range."""
        return self.upper / 2 - self.lower / 2


def check_missing(where: str, missing: object) -> Missing:
    """A ``missing=`` rule: ``"drop"``, ``"midpoint"`` or a finite number.

    Example:
        >>> from privframe.plan.aggregates.base import check_missing
        >>> check_missing("mean('x')", "drop"), check_missing("mean('x')", 0)
        ('drop', 0.0)
    """
    if missing == "drop" or missing == "midpoint":
        return "drop" if missing == "drop" else "midpoint"
    if isinstance(missing, str | bool) or not isinstance(missing, int | float):
        raise InvalidArgumentError(
            f"{where}: missing must be 'drop', 'midpoint' or a number, got {missing!r}. "
            f"{MISSING_HINT}"
        )
    return check_number(where, "missing", missing, MISSING_HINT)


@dataclass(frozen=True, kw_only=True)
class Summed(Bounded, abstract=True):
    """A bounded aggregate read from sums of its values (sums, means, variances).

    ``missing`` says what a null or NaN value does (:data:`MISSING_HINT`): it
    counts as the midpoint (the default) or as a given number, both clipped
    to the bounds like any value, or (``"drop"``) its row adds nothing to
    the sums, which are then paired with the count of the column's values
    instead of the count of rows. The rule looks at no value: every row is
    treated by it, so nothing published or refused depends on which rows
    have one.
    """

    missing: Missing = "midpoint"

    def fill(self, measurement: Measurement) -> float | None:
        """The value a missing value counts as, or None when its row adds nothing (drop)."""
        if self.missing == "drop":
            return None
        return measurement.midpoint if self.missing == "midpoint" else float(self.missing)

    def missing_rule(self) -> str:
        """What a null or NaN value does to it, for ``explain`` and the notebook view."""
        x = repr(self.column)
        if self.missing == "drop":
            return f"a row whose {x} is null or NaN is left out (missing='drop')"
        if self.missing == "midpoint":
            mid = "chosen at release" if self.auto else exact_text(float(self.midpoint))
            return (
                f"a null or NaN {x} counts as the bounds' midpoint {mid} and its row counts "
                "(missing='midpoint', the default; missing='drop' leaves such rows out)"
            )
        given = exact_text(float(self.missing))
        if self.auto:
            value = f"{given} clipped to the bounds chosen at release"
        else:
            value = exact_text(min(max(float(self.missing), self.lower), self.upper))
        return f"a null or NaN {x} counts as {value} and its row counts (missing={given})"


_B = TypeVar("_B", bound=Bounded)


def bounded(cls: type[_B], column: object, bounds: object) -> _B:
    """A bounded aggregate of ``column`` after checking the column name and the bounds.

    Example:
        >>> from privframe.plan.aggregates import Sum
        >>> from privframe.plan.aggregates.base import bounded
        >>> bounded(Sum, "x", (0, 1)).upper
        1.0
        >>> bounded(Sum, "x", "auto").auto
        True
    """
    name = check_column(column)
    if isinstance(bounds, str) and bounds == AUTO:
        return cls(column=name, lower=AUTO_STAND_IN[0], upper=AUTO_STAND_IN[1], auto=True)
    lower, upper = check_bounds(cls.__name__.lower(), name, bounds)
    return cls(column=name, lower=lower, upper=upper)


_S = TypeVar("_S", bound=Summed)


def summed(cls: type[_S], column: object, bounds: object, missing: object) -> _S:
    """A summed aggregate of ``column`` after checking its name, bounds and ``missing`` rule.

    Example:
        >>> from privframe.plan.aggregates import Mean
        >>> from privframe.plan.aggregates.base import summed
        >>> summed(Mean, "x", (0, 1), "drop").missing
        'drop'
    """
    agg = bounded(cls, column, bounds)
    where = f"{cls.__name__.lower()}({agg.column!r})"
    return dataclasses.replace(agg, missing=check_missing(where, missing))


def value_key(kind: str, agg: Bounded) -> str:
    """A value measurement's key: equal for aggregates of one column and bounds.

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.aggregates.base import value_key
        >>> value_key("sum", pf.sum("x", bounds=(0, 1000)))
        'sum(x, [0, 1000])'
    """
    key = f"{kind}({agg.column}, [{exact_text(agg.lower)}, {exact_text(agg.upper)}]"
    # Another missing rule sums other row values: a measurement of its own.
    if isinstance(agg, Summed) and agg.missing != "midpoint":
        missing = agg.missing if agg.missing == "drop" else exact_text(agg.missing)
        key += f", missing {missing}"
    return key + ")"


@dataclass(frozen=True)
class GridNeed(GaussianNeed):
    """A noisy sum of per-row values of one bounded column, snapped to a public grid.

    A subclass says what one row adds (:meth:`values`: its range, how far
    one row moves the sum, and the derivation ``explain`` prints); the grid,
    the sensitivity ``sqrt(S)·spread`` and σ follow from it
    (:func:`~privframe.plan.measurements.grid_measurement`), and the engine
    sums the values into a working column of its own. A missing value is
    treated by the aggregate's ``missing`` rule (:class:`Summed`); with
    ``squared`` each row adds its squared distance from the midpoint.
    """

    aggregate: Summed
    kind: ClassVar[Kind]
    squared: ClassVar[bool] = False

    @property
    def key(self) -> str:
        """``<kind>(<column>, [L, U])``: aggregates of one column and bounds share it."""
        return value_key(self.kind, self.aggregate)

    @abc.abstractmethod
    def values(self, limits: Limits) -> GridRange:
        """What one row adds to the sum, and how far it moves it."""

    def measure(self, limits: Limits, share: Share) -> Measurement:
        """The sum on its grid: Δ₂ = sqrt(S)·spread, Δ₁ = W·spread."""
        a = self.aggregate
        values = self.values(limits)
        return grid_measurement(
            self.key, self.kind, a.column, (a.lower, a.upper), values, limits, share, self
        )

    def error_coefficient(self, limits: Limits) -> float:
        """Squared 95% error 1.96²·S·spread²/(2ρ)."""
        row = self.values(limits).spread
        return Z95 * Z95 * (limits.squares * row * row / 2)

    def value_spec(self, measurement: Measurement, name: str) -> ValueSpec:
        """Each row's clipped value (or squared distance from the midpoint), on the grid."""
        m = measurement
        assert m.column is not None
        assert m.lower is not None
        assert m.upper is not None
        return ValueSpec(
            name=name,
            column=m.column,
            lower=m.lower,
            upper=m.upper,
            grid_exponent=m.grid_exponent,
            lower_units=m.lower_units,
            upper_units=m.upper_units,
            centre_units=m.centre_units,
            fill=self.aggregate.fill(m),
            square_around=m.midpoint if self.squared else None,
        )

    def exact_column(self, name: str) -> str:
        """The column the engine sums the values into."""
        return name
