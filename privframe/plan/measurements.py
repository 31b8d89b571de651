"""Noisy measurements: the vectors a release draws, and their sensitivity on a grid.

An aggregate (:mod:`privframe.plan.aggregates`) says which measurements it
needs, as :class:`Need` objects; needs with equal keys are measured once and
shared (a mean and a count share the count). Each need derives its own
sensitivity from the contribution limits (:class:`~privframe.plan.limits.Limits`)
with the helpers here, which put every value on an integer grid so that exact
integer noise (:mod:`privframe.mechanisms.noise`) can be added.

A measurement's :class:`Share` says which noise spends its part of the
release's budget: the discrete Gaussian at a share ρ of a zCDP budget,
calibrated to the L2 sensitivity (σ = Δ₂/sqrt(2ρ), Bun & Steinke 2016,
Prop. 1.6; Canonne, Kamath & Steinke 2020, Thm. 14), or the discrete Laplace
at a share ε of a pure-DP budget, calibrated to the L1 sensitivity
(scale b = Δ₁/ε: Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath &
Steinke 2020, Sec. 2.2). Both sensitivities are derived, and ``explain``
shows the one that calibrates the noise: a unit's weights w_g (rows per
group, at most m in each of at most k groups) have sum_g w_g² <= S and
sum_g w_g <= W (:class:`~privframe.plan.limits.Limits`), so a grouped count
has Δ₂ = sqrt(S) and Δ₁ = W.

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
    >>> m = need.measure(Limits(1, 3, None, 9), Share(Fraction(1, 2)))
    >>> m.l2_sensitivity, m.sigma
    (3.0, 3.0)
    >>> laplace = need.measure(Limits(1, 3, None, 9), Share(Fraction(1, 2), "laplace"))
    >>> laplace.sensitivity, laplace.scale_units
    (3.0, 6.0)
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
from privframe.mechanisms.draws import Family
from privframe.mechanisms.laplace import laplace_scale
from privframe.mechanisms.noise import discrete_gaussian_halfwidth, discrete_laplace_halfwidth
from privframe.numeric import round_down, round_up, sqrt_up
from privframe.plan.limits import Limits

__all__ = [
    "Z95",
    "Family",
    "GaussianNeed",
    "GridRange",
    "Kind",
    "Measurement",
    "Need",
    "NoiseRangeError",
    "Share",
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


@dataclass(frozen=True)
class Share:
    """A measurement's exact share of its release's budget, and the noise that spends it.

    ``amount`` is a ρ (zCDP) for ``"gaussian"`` noise and an ε (pure DP) for
    ``"laplace"`` noise.

    Example:
        >>> from fractions import Fraction
        >>> Share(Fraction(1, 4), "laplace").parameter
        'epsilon'
    """

    amount: Fraction
    family: Family = "gaussian"

    @property
    def parameter(self) -> str:
        """The budget parameter the share is a part of: ``rho`` or ``epsilon``."""
        return "rho" if self.family == "gaussian" else "epsilon"

    def times(self, fraction: Fraction) -> Share:
        """This share's noise at ``fraction`` of its amount."""
        return Share(self.amount * fraction, self.family)


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
    def measure(self, limits: Limits, share: Share) -> object:
        """The measurement at its exact ``share``, with its derived sensitivity and noise.

        Raises:
            NoiseRangeError: no exact noise exists for it at that share.
        """

    @abc.abstractmethod
    def error_coefficient(self, limits: Limits) -> float:
        """C with a squared 95% error of c/ρ (value units; ranks for quantiles)."""


class GaussianNeed(Need):
    """A need measured by integer noise on an exact integer vector from the engine.

    The noise is the discrete Gaussian or the discrete Laplace, as its
    :class:`Share` says (the name is historical: Gaussian noise came first).

    Besides its sensitivity, it says what the engine computes for it: a
    column the engine always returns (``COUNT``, ``DISTINCT``) or per-row
    values it sums (a :class:`~privframe.engines.spec.ValueSpec`). Both are
    abstract, so a need that forgets one cannot be made, and nothing is
    charged for it.
    """

    @abc.abstractmethod
    def measure(self, limits: Limits, share: Share) -> Measurement:
        """The measurement at its exact ``share``, with its derived sensitivity and noise."""

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
    l1_units: float  # W·row_units, rounded up
    share: Share  # its exact share of the release's budget; the noise is calibrated to it
    scale_units: float  # the sampler's parameter: σ (Gaussian) or the scale b (Laplace)
    sigma_units: float  # a bound on the noise's std: σ, or sqrt(2)·b for the Laplace
    derivation: str
    need: GaussianNeed = field(compare=False, repr=False)
    pooled: int = 1  # the noise is a sum of this many independent draws (a total row's)

    @property
    def family(self) -> Family:
        """The noise this measurement draws."""
        return self.share.family

    @property
    def exact_share(self) -> Fraction:
        """Its exact share of the release's ρ (Gaussian) or ε (Laplace), as charged."""
        return self.share.amount

    @property
    def noise(self) -> dict[str, float]:
        """Its share and noise, named: ``rho`` and ``sigma``, or ``epsilon`` and ``scale``.

        In value units, as the ledger description and ``explain`` show them.
        """
        if self.family == "gaussian":
            return {"rho": float(self.exact_share), "sigma": self.sigma}
        return {"epsilon": float(self.exact_share), "scale": self.scale_units * self.scale}

    @property
    def sensitivity_units(self) -> float:
        """The sensitivity the noise is calibrated to, in grid units: L2 or L1."""
        return self.l2_units if self.family == "gaussian" else self.l1_units

    @property
    def sensitivity(self) -> float:
        """The sensitivity the noise is calibrated to (L2 or L1), in value units."""
        return self.sensitivity_units * self.scale

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
        """Half-width of the 95% interval of the noise, in value units.

        Exact for one draw. A sum of Gaussian draws is Gaussian; a sum of
        Laplace draws (a total row's) gets the normal approximation 1.96·std,
        which covers a little less than 95% for few draws (92.7% for two draws
        of scale 1, 94.6% for five of scale 100) and tends to 95% with more.
        """
        if self.family == "gaussian":
            return discrete_gaussian_halfwidth(self.sigma_units, 0.95) * self.scale
        if self.pooled == 1:
            return discrete_laplace_halfwidth(self.scale_units, 0.95) * self.scale
        return Z95 * self.sigma_units * self.scale

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


def _noise(l2: float, l1: float, share: Share, key: str) -> tuple[float, float]:
    """The sampler's parameter and the std bound at ``share``, rounded towards more noise.

    Gaussian: σ with Δ₂²/(2σ²) <= ρ exactly (Bun & Steinke 2016, Prop. 1.6).
    Laplace: the scale b >= Δ₁/ε, so the discrete Laplace is (Δ₁/b)-DP with
    Δ₁/b <= ε (Canonne, Kamath & Steinke 2020, Sec. 2.2); its std is at most
    sqrt(2)·b (the discrete Laplace's variance 2p/(1 − p)², p = e^(−1/b), is
    below the continuous one's 2b²).
    """
    failure = f"{key} would need noise beyond the float range"
    try:
        if share.family == "gaussian":
            sigma = gaussian_sigma(l2, share.amount)
            return sigma, sigma
        scale = laplace_scale(l1, share.amount)
        return scale, round_up(Fraction(scale) * Fraction(sqrt_up(Fraction(2))))
    except (PrivframeError, OverflowError, ZeroDivisionError):
        pass
    raise NoiseRangeError(failure)


def integer_measurement(
    key: str,
    kind: Literal["count", "distinct", "values"],
    bound: tuple[int, str, int, str],
    share: Share,
    need: GaussianNeed,
) -> Measurement:
    """A per-group integer count with L2 sensitivity sqrt(squares) and L1 sensitivity ``l1``.

    ``bound`` is (squares, its symbol, l1, its symbol): e.g. (S, "S", W, "W")
    for a row count.
    """
    squares, square_symbol, l1, l1_symbol = bound
    l2 = sqrt_up(Fraction(squares))
    l1_units = round_up(Fraction(l1))  # above 2^53 a float can be below it
    scale, sigma = _noise(l2, l1_units, share, key)
    derivation = (
        f"sensitivity sqrt({square_symbol}) = sqrt({squares}) = {l2:.6g}"
        if share.family == "gaussian"
        else f"L1 sensitivity {l1_symbol} = {l1}"
    )
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
        l1_units=l1_units,
        share=share,
        scale_units=scale,
        sigma_units=sigma,
        derivation=derivation,
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
    measurement, is half the range; ``formula`` writes the spread in the
    bounds (``(U−L)/2``) for the derivation ``explain`` shows.
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
    limits: Limits,
    share: Share,
    need: GaussianNeed,
) -> Measurement:
    """A sum of per-row values in [low, high], snapped to a grid chosen from public numbers.

    With the per-row bound R in grid units, the grouped vector's L2
    sensitivity is sqrt(S)·R and its L1 sensitivity W·R (S and W from the
    contribution limits).
    """
    low, high = values.low, values.high
    scale = max(abs(low), abs(high))
    squares, rows = limits.squares, limits.rows
    amount = round_down(share.amount)
    if not amount:
        estimate = math.inf
    elif share.family == "gaussian":
        estimate = math.sqrt(squares) * values.spread / math.sqrt(2 * amount)
    else:
        estimate = math.sqrt(2) * rows * values.spread / amount
    if (
        not (high > low and math.isfinite(estimate))
        or _grid_exponent(scale, estimate) > _MAX_GRID_BITS
    ):
        raise NoiseRangeError(
            f"the bounds ({bounds[0]:g}, {bounds[1]:g}) of column {column!r} are too "
            f"extreme for {'a variance' if values.round_top_up else 'exact arithmetic'} at "
            f"its {share.parameter} share {float(share.amount):.3g}"
        )
    j = _grid_exponent(scale, estimate)
    lo = round(math.ldexp(low, j))
    hi = math.ceil(math.ldexp(high, j)) if values.round_top_up else round(math.ldexp(high, j))
    centre = (lo + hi) // 2
    row_units = max(centre - lo, hi - centre)
    if row_units == 0:
        raise NoiseRangeError(
            f"at its {share.parameter} share {float(share.amount):.3g}, the noise of {key} would "
            f"exceed the bounds of column {column!r} 2^39 times over"
        )
    l2 = sqrt_up(Fraction(squares) * row_units * row_units)
    l1 = round_up(Fraction(rows * row_units))  # above 2^53 a float can be below it
    noise_scale, sigma = _noise(l2, l1, share, key)
    noun = "squares" if values.round_top_up else "values"
    if share.family == "gaussian":
        derivation = (
            f"sensitivity sqrt(S)·{values.formula} = sqrt({squares})·{values.spread:g} = "
            f"{math.ldexp(l2, -j):.6g} ({noun} on the grid 2^{-j})"
        )
    else:
        derivation = (
            f"L1 sensitivity W·{values.formula} = {rows}·{values.spread:g} = "
            f"{math.ldexp(l1, -j):.6g} ({noun} on the grid 2^{-j})"
        )
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
        l1_units=l1,
        share=share,
        scale_units=noise_scale,
        sigma_units=sigma,
        derivation=derivation,
        need=need,
    )
