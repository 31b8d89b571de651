"""Gaussian measurements: the noisy vectors a release draws, and their sensitivity on a grid.

An aggregate (:mod:`privframe.plan.aggregates`) says which measurements it
needs, as :class:`Need` objects; needs with equal keys are measured once and
shared (a mean and a count share the count). Each need derives its own L2
sensitivity from the contribution limits (:class:`~privframe.plan.limits.Limits`)
with the helpers here, which put every value on an integer grid so that the
exact discrete Gaussian (:mod:`privframe.mechanisms.noise`) can be added.

Grid for sums: a row's clipped value is at most 2^32 grid units (so int64 sums
of fewer than 2^31 rows cannot overflow), and the noise is at most 2^39 units
(the sampler takes up to 2^40), so rounding each row costs at most σ·2^-40.
This rule snaps *rows* before aggregation; :func:`privframe.mechanisms.noise.grid_exponent`
snaps *released* real vectors in :func:`~privframe.mechanisms.noise.gaussian_mechanism`,
where rounding changes the sensitivity instead: the two grids answer different
questions.

Example:
    >>> from fractions import Fraction
    >>> import privframe as pf
    >>> from privframe.plan.limits import Limits
    >>> (need,) = pf.count().needs()
    >>> m = need.measure(Limits(1, 3, None, 9), Fraction(1, 2))
    >>> m.l2_sensitivity, m.sigma
    (3.0, 3.0)
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from privframe.accounting.calibration import gaussian_sigma
from privframe.engines.spec import ValueSpec
from privframe.errors import PrivframeError
from privframe.mechanisms.noise import discrete_gaussian_halfwidth
from privframe.numeric import round_down, sqrt_up
from privframe.plan.limits import Limits

__all__ = [
    "Z95",
    "GaussianNeed",
    "GridRange",
    "Kind",
    "Measurement",
    "Need",
    "NoiseRangeError",
    "exact_text",
    "grid_measurement",
    "integer_measurement",
]

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile, for the approximate intervals of means."""

_ROW_UNITS_BITS = 32
_NOISE_UNITS_BITS = 39
# Grid widths stay at least 2^-1000: normal floats, and 2^j does not overflow.
_MAX_GRID_BITS = 1000

Kind = Literal["count", "distinct", "values", "centred_sum", "centred_sum_sq"]


class NoiseRangeError(Exception):
    """A measurement cannot be drawn exactly at its ρ share (too little or too much noise)."""


class Need(abc.ABC):
    """A noisy measurement an aggregate needs; needs with equal keys are measured once.

    Subclasses live with the aggregate family that owns the measurement and
    derive its sensitivity in :meth:`measure`.
    """

    @property
    @abc.abstractmethod
    def key(self) -> str:
        """The measurement's name: two aggregates share a measurement iff their keys are equal."""

    @abc.abstractmethod
    def measure(self, limits: Limits, rho: Fraction) -> object:
        """The measurement at its exact share ``rho``, with its derived sensitivity and σ.

        Raises:
            NoiseRangeError: no exact noise exists for it at ``rho``.
        """

    @abc.abstractmethod
    def error_coefficient(self, limits: Limits) -> float:
        """C with a squared 95% error of c/ρ (value units; ranks for quantiles)."""


class GaussianNeed(Need):
    """A need measured by discrete Gaussian noise on an exact integer vector from the engine.

    Besides its sensitivity, it says what the engine computes for it: a
    column the engine always returns (``COUNT``, ``DISTINCT``) or per-row
    values it sums (a :class:`~privframe.engines.spec.ValueSpec`). Both are
    abstract, so a need that forgets one cannot be made, and nothing is
    charged for it.
    """

    @abc.abstractmethod
    def measure(self, limits: Limits, rho: Fraction) -> Measurement:
        """The measurement at its exact share ``rho``, with its derived sensitivity and σ."""

    @abc.abstractmethod
    def value_spec(self, measurement: Measurement, name: str) -> ValueSpec | None:
        """The per-row values the engine sums into column ``name`` (None: it counts rows)."""

    @abc.abstractmethod
    def exact_column(self, name: str) -> str:
        """The engine column holding this measurement's exact vector (``name`` if summed)."""


@dataclass(frozen=True)
class Measurement:
    """One noisy vector a release draws: a count, a centred sum or a sum of squares, per key."""

    key: str
    kind: Kind
    column: str | None
    lower: float | None
    upper: float | None
    grid_exponent: int  # values are integers in units of 2^-j (0 for counts)
    lower_units: int
    upper_units: int
    centre_units: int
    row_units: int  # the most one row changes this measurement, in grid units
    l2_units: float  # sqrt(S)·row_units, rounded up
    exact_rho: Fraction  # its exact share of the release's ρ; σ is calibrated to it
    sigma_units: float
    derivation: str
    need: GaussianNeed = field(compare=False, repr=False)

    @property
    def rho(self) -> float:
        """The ρ share as the nearest float, for display; ``exact_rho`` is charged."""
        return float(self.exact_rho)

    @property
    def scale(self) -> float:
        """The grid width 2^-j: value units per grid unit."""
        return math.ldexp(1.0, -self.grid_exponent)

    @property
    def l2_sensitivity(self) -> float:
        """L2 sensitivity in value units."""
        return self.l2_units * self.scale

    @property
    def sigma(self) -> float:
        """Noise scale in value units (the std is at most this)."""
        return self.sigma_units * self.scale

    @property
    def ci95(self) -> float:
        """Half-width of the exact 95% interval of the noise, in value units."""
        return discrete_gaussian_halfwidth(self.sigma_units, 0.95) * self.scale

    @property
    def midpoint(self) -> float:
        """(L + U)/2 of a value measurement, without overflow near the float range."""
        assert self.lower is not None
        assert self.upper is not None
        return self.lower / 2 + self.upper / 2


def exact_text(x: float) -> str:
    """Short when that is exact (1000, not 1000.0), else the float's full repr."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def sigma_for(l2: float, rho: Fraction, key: str) -> float:
    """σ calibrated to the exact share ``rho`` (rounded up: Δ²/(2σ²) <= ρ exactly)."""
    try:
        return gaussian_sigma(l2, rho)
    except PrivframeError:
        reason = f"{key} would need noise beyond the float range"
    raise NoiseRangeError(reason)


def integer_measurement(
    key: str,
    kind: Literal["count", "distinct", "values"],
    squares: int,
    symbol: str,
    rho: Fraction,
    need: GaussianNeed,
) -> Measurement:
    """A per-group integer count whose L2 sensitivity is sqrt(squares)."""
    l2 = sqrt_up(Fraction(squares))
    return Measurement(
        key=key,
        kind=kind,
        column=None,
        lower=None,
        upper=None,
        grid_exponent=0,
        lower_units=0,
        upper_units=1,
        centre_units=0,
        row_units=1,
        l2_units=l2,
        exact_rho=rho,
        sigma_units=sigma_for(l2, rho, key),
        derivation=f"sensitivity sqrt({symbol}) = sqrt({squares}) = {l2:.6g}",
        need=need,
    )


def _grid_exponent(row_magnitude: float, sigma_estimate: float) -> int:
    """J with 2^-j the smallest power of two >= max(B·2^-32, σ·2^-39)."""
    target = max(
        math.ldexp(row_magnitude, -_ROW_UNITS_BITS), math.ldexp(sigma_estimate, -_NOISE_UNITS_BITS)
    )
    if target == 0:  # subnormal bounds underflow: finer than any grid privframe draws on
        return _MAX_GRID_BITS + 1
    return -math.ceil(math.log2(target))


@dataclass(frozen=True)
class GridRange:
    """The per-row values of a summed measurement and how one row moves the sum.

    ``low``/``high`` bound a row's value; rows are summed about the middle
    of the grid range, so ``spread``, the most one row changes the
    measurement, is half the range; ``formula`` shows the derivation in
    ``explain``.
    """

    low: float
    high: float
    spread: float
    formula: str
    round_top_up: bool = False  # squares: no square is cut by the integer clip


def grid_measurement(
    key: str,
    kind: Kind,
    column: str,
    bounds: tuple[float, float],
    values: GridRange,
    squares: int,
    rho: Fraction,
    need: GaussianNeed,
) -> Measurement:
    """A sum of per-row values in [low, high], snapped to a grid chosen from public numbers.

    With the per-row bound R in grid units, the grouped vector's L2
    sensitivity is sqrt(S)·R (S from the contribution limits).
    """
    low, high = values.low, values.high
    scale = max(abs(low), abs(high))
    rho_f = round_down(rho)
    estimate = math.sqrt(squares) * values.spread / math.sqrt(2 * rho_f) if rho_f else math.inf
    if (
        not (high > low and math.isfinite(estimate))
        or _grid_exponent(scale, estimate) > _MAX_GRID_BITS
    ):
        raise NoiseRangeError(
            f"the bounds ({bounds[0]:g}, {bounds[1]:g}) of column {column!r} are too "
            f"extreme for {'a variance' if values.round_top_up else 'exact arithmetic'} at "
            f"its rho share {float(rho):.3g}"
        )
    j = _grid_exponent(scale, estimate)
    lo = round(math.ldexp(low, j))
    hi = math.ceil(math.ldexp(high, j)) if values.round_top_up else round(math.ldexp(high, j))
    centre = (lo + hi) // 2
    row_units = max(centre - lo, hi - centre)
    if row_units == 0:
        raise NoiseRangeError(
            f"at its rho share {float(rho):.3g}, the noise of {key} would exceed the bounds of "
            f"column {column!r} 2^39 times over"
        )
    l2 = sqrt_up(Fraction(squares) * row_units * row_units)
    noun = "squares" if values.round_top_up else "values"
    return Measurement(
        key=key,
        kind=kind,
        column=column,
        lower=bounds[0],
        upper=bounds[1],
        grid_exponent=j,
        lower_units=lo,
        upper_units=hi,
        centre_units=centre,
        row_units=row_units,
        l2_units=l2,
        exact_rho=rho,
        sigma_units=sigma_for(l2, rho, key),
        derivation=(
            f"sensitivity {values.formula} = {math.ldexp(l2, -j):.6g} ({noun} on the grid 2^{-j})"
        ),
        need=need,
    )
