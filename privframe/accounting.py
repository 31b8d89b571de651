"""Privacy budgets as value types, their conversions, and noise calibration.

Every release in privframe is charged in zero-concentrated DP (zCDP, Bun &
Steinke 2016): a Gaussian release with L2 sensitivity Δ and noise scale σ costs
ρ = Δ²/(2σ²), and releases compose by adding ρ. (ε, δ)-DP and μ-GDP are
reporting units, converted with the tightest conversion proven valid.

Budget arithmetic is exact on the rationals that floats represent and rounds
conservatively: a sum of spends rounds up, a difference (what is left) rounds
down, so accumulated floating-point error can never manufacture budget.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5) + pf.zCDP(0.25)
    zCDP(rho=0.75, delta=0.0)
    >>> pf.zCDP(1.0) - pf.zCDP(0.25)
    zCDP(rho=0.75, delta=0.0)
    >>> pf.zCDP(0.1) <= pf.zCDP(1.0)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from privframe.errors import InvalidBudgetError

__all__ = ["GDP", "ApproxDP", "Budget", "zCDP"]


def _round_up(x: Fraction) -> float:
    """Smallest float that is >= the exact rational ``x``."""
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def _round_down(x: Fraction) -> float:
    """Largest float that is <= the exact rational ``x``."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _check_nonnegative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidBudgetError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise InvalidBudgetError(f"{name} must be finite and >= 0, got {v!r}")
    return v


def _check_delta(value: object) -> float:
    d = _check_nonnegative("delta", value)
    if d >= 1:
        raise InvalidBudgetError(f"delta must be < 1, got {d!r}")
    return d


def _sum_up(a: float, b: float) -> float:
    return _round_up(Fraction(a) + Fraction(b))


def _difference_down(name: str, a: float, b: float) -> float:
    diff = Fraction(a) - Fraction(b)
    if diff < 0:
        raise InvalidBudgetError(
            f"cannot subtract a larger {name} ({b!r}) from a smaller one ({a!r})"
        )
    return _round_down(diff)


@dataclass(frozen=True, slots=True)
class zCDP:
    """A ρ-zCDP budget, optionally approximate: (ρ, δ)-zCDP.

    ``delta`` is nonzero only for sessions that spend δ outright, e.g. on
    private partition selection; Gaussian releases cost ρ alone.

    Args:
        rho: the zCDP parameter ρ >= 0 (Bun & Steinke 2016, Def. 1.1).
        delta: the additive δ of approximate zCDP, 0 <= δ < 1.

    Example:
        >>> import privframe as pf
        >>> b = pf.zCDP(0.5)
        >>> b.rho, b.delta
        (0.5, 0.0)
        >>> pf.zCDP(0.1, delta=1e-9) + pf.zCDP(0.2)
        zCDP(rho=0.30000000000000004, delta=1e-09)
    """

    rho: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _check_nonnegative("rho", self.rho))
        object.__setattr__(self, "delta", _check_delta(self.delta))

    def __add__(self, other: zCDP) -> zCDP:
        """Compose two zCDP budgets: ρ and δ add (Bun & Steinke 2016, Lemma 2.3)."""
        if not isinstance(other, zCDP):
            return NotImplemented
        return zCDP(_sum_up(self.rho, other.rho), _sum_up(self.delta, other.delta))

    def __sub__(self, other: zCDP) -> zCDP:
        """What is left of ``self`` after ``other``, rounded down."""
        if not isinstance(other, zCDP):
            return NotImplemented
        return zCDP(
            _difference_down("rho", self.rho, other.rho),
            _difference_down("delta", self.delta, other.delta),
        )

    def __le__(self, other: zCDP) -> bool:
        if not isinstance(other, zCDP):
            return NotImplemented
        return self.rho <= other.rho and self.delta <= other.delta

    def __lt__(self, other: zCDP) -> bool:
        if not isinstance(other, zCDP):
            return NotImplemented
        return self <= other and self != other

    def __ge__(self, other: zCDP) -> bool:
        if not isinstance(other, zCDP):
            return NotImplemented
        return other <= self

    def __gt__(self, other: zCDP) -> bool:
        if not isinstance(other, zCDP):
            return NotImplemented
        return other < self


@dataclass(frozen=True, slots=True)
class ApproxDP:
    """An (ε, δ)-DP budget (Dwork & Roth 2014, Def. 2.4).

    Adding two composes them by basic composition (ε and δ add).

    Args:
        epsilon: ε >= 0.
        delta: 0 <= δ < 1.

    Example:
        >>> import privframe as pf
        >>> pf.ApproxDP(1.0, 1e-6) + pf.ApproxDP(0.5, 1e-6)
        ApproxDP(epsilon=1.5, delta=2e-06)
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", _check_delta(self.delta))

    def __add__(self, other: ApproxDP) -> ApproxDP:
        """Basic composition (Dwork & Roth 2014, Thm. 3.16)."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(_sum_up(self.epsilon, other.epsilon), _sum_up(self.delta, other.delta))

    def __sub__(self, other: ApproxDP) -> ApproxDP:
        """What is left of ``self`` after ``other`` under basic composition, rounded down."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(
            _difference_down("epsilon", self.epsilon, other.epsilon),
            _difference_down("delta", self.delta, other.delta),
        )

    def __le__(self, other: ApproxDP) -> bool:
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def __ge__(self, other: ApproxDP) -> bool:
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return other <= self


@dataclass(frozen=True, slots=True)
class GDP:
    """A μ-Gaussian-DP budget (Dong, Roth & Su 2022, Def. 2.6).

    μ-GDP composes as μ = sqrt(μ₁² + μ₂²) (their Cor. 3.3). A Gaussian
    mechanism with sensitivity Δ and std σ is exactly (Δ/σ)-GDP, which is also
    Δ²/(2σ²)-zCDP; so μ = sqrt(2ρ) for Gaussian releases.

    Args:
        mu: μ >= 0.

    Example:
        >>> import privframe as pf
        >>> pf.GDP(3.0) + pf.GDP(4.0)
        GDP(mu=5.0)
    """

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _check_nonnegative("mu", self.mu))

    def __add__(self, other: GDP) -> GDP:
        """Compose: μ = sqrt(μ₁² + μ₂²), rounded up."""
        if not isinstance(other, GDP):
            return NotImplemented
        square = Fraction(self.mu) ** 2 + Fraction(other.mu) ** 2
        mu = math.sqrt(float(square))
        while Fraction(mu) ** 2 < square:
            mu = math.nextafter(mu, math.inf)
        return GDP(mu)

    def __le__(self, other: GDP) -> bool:
        if not isinstance(other, GDP):
            return NotImplemented
        return self.mu <= other.mu

    def __ge__(self, other: GDP) -> bool:
        if not isinstance(other, GDP):
            return NotImplemented
        return other <= self


Budget = zCDP | ApproxDP | GDP
"""Any budget a user may hand to privframe; sessions account in :class:`zCDP`."""
