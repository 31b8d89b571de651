"""Quantiles of a column clipped to public bounds, chosen by the exponential mechanism.

Each quantile is one output, chosen among ``candidates`` evenly spaced points
from ``lower`` to ``upper`` (:mod:`privframe.mechanisms.quantiles`,
``docs/quantiles.md``). Sensitivity: a unit moves each candidate's rank
distance by at most ``max(q, 1 − q)·w_g`` rows in each group, so the cost
over all groups is ``ρ = (η·max(q, 1 − q))²·S/2`` for the weight η per row of
rank distance. Null and NaN values are ignored (they still count toward a
unit's row limit). A candidate's distance from the target rank ``q·n`` is
measured to its rank interval ``[#{v < c}, #{v <= c}]``, so values tied on a
candidate count there.

Example:
    >>> import privframe as pf
    >>> [a.output_name for a in pf.quantile("age", [0.25, 0.75], bounds=(18, 90))]
    ['age_p25', 'age_p75']
"""

from __future__ import annotations

import functools
import itertools
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import overload

import numpy as np
import polars as pl

from privframe._arguments import hinted
from privframe.engines.spec import HistogramSpec
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError
from privframe.mechanisms import quantiles
from privframe.mechanisms.noise import Randomness
from privframe.numeric import round_down, round_up
from privframe.plan.aggregates.base import (
    BOUNDS_HINT,
    RANK_CI95_SUFFIX,
    Bounded,
    Measured,
    Width,
    check_bounds,
    check_column,
    check_number,
)
from privframe.plan.limits import Limits
from privframe.plan.measurements import Need, NoiseRangeError, Share, exact_text

__all__ = [
    "Quantile",
    "QuantileMeasurement",
    "QuantileNeed",
    "choose_quantiles",
    "histogram_specs",
    "median",
    "quantile",
]

_Q = "q is the quantile to release, a number in [0, 1] (0.5 for the median)"
_DEFAULT_CANDIDATES = 1001
_MAX_CANDIDATES = 1 << 16


@functools.lru_cache(maxsize=64)
def _grid(lower: float, upper: float, n: int) -> tuple[float, ...]:
    lo, width = Fraction(lower), Fraction(upper) - Fraction(lower)
    return tuple(float(lo + width * Fraction(i, n - 1)) for i in range(n))


@dataclass(frozen=True)
class QuantileMeasurement:
    """One quantile per key, chosen by the exponential mechanism (:mod:`~.mechanisms.quantiles`).

    ``eta`` is the weight per row of rank distance, the largest float whose
    cost over all groups fits the share it was given: ρ = (η·max(q, 1 − q))²·S/2
    under zCDP, ε = 2·η·max(q, 1 − q)·W under pure DP. A mechanism that costs
    less than its share also satisfies the share, so the quantile is charged
    its whole share, ``exact_share``: the release then costs exactly the
    budget asked, not a rounding error less. That holds for an η capped at
    :data:`~privframe.mechanisms.quantiles.MAX_SCALE` too, which costs less
    than its share and cannot use more: the share is charged all the same, so
    a budget is spent as asked (``derivation`` states the capped η's cost).
    """

    key: str
    aggregate: Quantile
    share: Share
    eta: float
    derivation: str

    @property
    def exact_share(self) -> Fraction:
        """The exact ρ (zCDP) or ε (pure DP) charged."""
        return self.share.amount

    def rank_error(self, probability: float = 0.95) -> float:
        """Rows of rank error beyond the best candidate's, at ``probability`` (public)."""
        return quantiles.rank_error(self.eta, self.aggregate.candidates, probability)


@dataclass(frozen=True)
class QuantileNeed(Need):
    """One quantile per group, by the exponential mechanism over the candidates."""

    aggregate: Quantile

    @property
    def key(self) -> str:
        """``quantile(<column>, q=..., [L, U], N candidates)``."""
        a = self.aggregate
        return (
            f"quantile({a.column}, q={a.q!r}, [{exact_text(a.lower)}, {exact_text(a.upper)}], "
            f"{a.candidates} candidates)"
        )

    def measure(self, limits: Limits, share: Share) -> QuantileMeasurement:
        """The exponential mechanism's η at ``share``, charged ``share``, exactly.

        η is found for the share rounded down to a float: its exact cost is at
        most that float, hence at most the share; a capped η costs less still.
        """
        agg, failure = self.aggregate, None
        gaussian = share.family == "gaussian"
        amount = round_down(share.amount)
        try:
            if gaussian:
                eta = quantiles.scale(amount, agg.q, limits.squares)
            else:
                eta = quantiles.epsilon_scale(amount, agg.q, limits.rows)
        except PrivframeError:
            failure = (
                f"the contribution limits are too large for {self.key} at its "
                f"{share.parameter} share {float(share.amount):.3g}: its choice would be all "
                "but uniform"
            )
        if failure is not None:
            raise NoiseRangeError(failure)
        capped = ""
        if eta >= quantiles.MAX_SCALE:
            used = round_up(
                quantiles.cost(eta, agg.q, limits.squares)
                if gaussian
                else quantiles.epsilon_cost(eta, agg.q, limits.rows)
            )
            capped = (
                f" (capped at {quantiles.MAX_SCALE:g}, the sampler's margin: it costs "
                f"{share.parameter} = {used:.6g}, and the whole share {float(share.amount):.6g} "
                "is charged)"
            )
        spread = max(agg.q, 1 - agg.q)
        error = quantiles.rank_error(eta, agg.candidates)
        cost = (
            f"rho = (eta·{spread:g})²·S/2 with S = {limits.squares}"
            if gaussian
            else f"epsilon = 2·eta·{spread:g}·W with W = {limits.rows}"
        )
        return QuantileMeasurement(
            key=self.key,
            aggregate=agg,
            share=share,
            eta=eta,
            derivation=(
                f"exponential mechanism over {agg.candidates} candidates (spacing "
                f"{agg.spacing:.6g}); a unit moves each rank distance by <= max(q,1−q)·w_g rows, "
                f"so {cost}: eta = {eta:.6g} per row{capped}; 95% rank error <= {error:.4g} "
                "rows beyond the nearest candidate"
            ),
        )

    def error_coefficient(self, limits: Limits) -> float:
        """The 95% rank error is (ln N + ln 20)/η with η² = 2ρ/(S·max(q, 1 − q)²)."""
        agg = self.aggregate
        spread = max(agg.q, 1 - agg.q) * quantiles.rank_error(1.0, agg.candidates)
        return spread * spread * limits.squares / 2


@dataclass(frozen=True, kw_only=True)
class Quantile(Bounded):
    """The q-quantile of a column's values, each clipped to [lower, upper], per group.

    Chosen among ``candidates`` evenly spaced points from ``lower`` to
    ``upper`` by the exponential mechanism (``docs/quantiles.md``). Null and
    NaN values are ignored (they still count toward a unit's row limit).
    A candidate's distance from the target rank q·n is measured to its rank
    interval [#{v < c}, #{v <= c}], so values tied on a candidate count there.
    """

    spec_name = "quantile"
    needs_expected = False
    tuned_by_coverage = True

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

    def describe(self) -> str:
        """Its q and candidates, for views of a query."""
        return f"quantile q = {self.q:g} ({self.candidates} candidates)"

    def missing_rule(self) -> str:
        """Null and NaN values are skipped: a quantile ranks the values there are."""
        return f"a row whose {self.column!r} is null or NaN is left out (a quantile ranks values)"

    def error_columns(self) -> tuple[str, ...]:
        """A 95% bound on the rank error, in rows."""
        return (self.output_name + RANK_CI95_SUFFIX,)

    def needs(self) -> tuple[Need, ...]:
        """The quantile itself."""
        return (QuantileNeed(self),)

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """The chosen candidates, and their public 95% rank-error bound."""
        (key,) = self.keys()
        values = noisy[key]
        if not with_error:
            return {self.output_name: values}
        bound = measured.quantile(key).rank_error()
        return {
            self.output_name: values,
            self.output_name + RANK_CI95_SUFFIX: np.full(values.shape, bound),
        }

    def possible_range(self) -> tuple[float, float]:
        """Within the bounds (every candidate is)."""
        return (self.lower, self.upper)

    def interval_columns(self) -> tuple[str, ...]:
        """None: a quantile's error is in ranks, not values."""
        return ()

    def formula(self, measured: Measured) -> str:
        """The candidate its measurement chose."""
        return f"the candidate chosen by {self.keys()[0]}"

    def width(self, measured: Measured) -> Width:
        """No std: the error is in ranks; the 95% rank error beyond the nearest candidate."""
        bound = measured.quantile(self.keys()[0]).rank_error()
        detail = f"beyond the nearest candidate (spacing {self.spacing:.6g})"
        return Width(bound, None, ranks=True, detail=detail)

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Rank error over rows."""
        (key,) = self.keys()
        return {key: coefficients[key] / rows**2}


def _histogram_of(agg: Quantile) -> Quantile:
    """The histogram a quantile reads: quantiles of one column, bounds and grid share one."""
    return Quantile(
        column=agg.column, lower=agg.lower, upper=agg.upper, q=0.0, candidates=agg.candidates
    )


def histogram_specs(found: Sequence[QuantileMeasurement]) -> dict[Quantile, HistogramSpec]:
    """The engine's histogram columns ('__' names are reserved), one per distinct grid."""
    grids = dict.fromkeys(_histogram_of(qm.aggregate) for qm in found)
    return {
        grid: HistogramSpec(f"__histogram{i}", grid.column, tuple(grid.candidate_values()))
        for i, grid in enumerate(grids)
    }


def _dense(pairs: pl.Series, positions: int) -> np.ndarray:
    """Per kept key, its (position, count) pairs as a dense row of counts.

    Built only for the released keys (public, or kept by the charged
    selection), so its size is a public or released number.
    """
    matrix = np.zeros((pairs.len(), positions), dtype=np.int64)
    flat = pl.DataFrame({"pairs": pairs}).with_row_index("row").explode("pairs").unnest("pairs")
    flat = flat.drop_nulls("position")
    matrix[flat["row"].to_numpy(), flat["position"].to_numpy()] = flat["count"].to_numpy()
    return matrix


def choose_quantiles(
    found: Sequence[QuantileMeasurement], exact: pl.DataFrame, rng: Randomness | None
) -> dict[str, np.ndarray]:
    """Each quantile's chosen candidate per group, from the engine's exact histograms."""
    specs = histogram_specs(found)
    chosen = {}
    for qm in found:
        agg = qm.aggregate
        hist = _dense(exact[specs[_histogram_of(agg)].name], 2 * agg.candidates - 1)
        picked = quantiles.choose(hist, agg.q, qm.eta, rng=rng)
        chosen[qm.key] = np.asarray(agg.candidate_values())[picked]
    return chosen


def _check_q(column: str, q: object) -> float:
    value = check_number(f"quantile({column!r})", "q", q, _Q)
    if not 0 <= value <= 1:
        raise InvalidValueError(f"quantile q must be in [0, 1], got {q!r}")
    return value


def _check_candidates(candidates: object) -> int:
    if (
        isinstance(candidates, bool)
        or not isinstance(candidates, numbers.Integral)
        or int(candidates) < 2
    ):
        raise InvalidArgumentError(
            f"candidates must be an integer >= 2 (the number of evenly spaced output values), "
            f"got {candidates!r}"
        )
    if int(candidates) > _MAX_CANDIDATES:
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
@hinted(bounds=BOUNDS_HINT, q=_Q)
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
    name = check_column(column)
    lower, upper = check_bounds("quantile", name, bounds)
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


@hinted(bounds=BOUNDS_HINT)
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
