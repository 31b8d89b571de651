"""The exact samplers: discrete Laplace and discrete Gaussian (Canonne, Kamath & Steinke 2020).

:class:`DiscreteLaplaceSampler` is their Algorithm 2, for any rational scale
t/s; :class:`DiscreteGaussianSampler` (Algorithm 3) proposes from it at an
integer scale and accepts with a further coin. Every coin is a Bernoulli(exp(−x))
decided exactly (:mod:`privframe.mechanisms._coins`), so the outputs are exactly
the discrete Laplace and N_Z(0, σ²); ``docs/privacy.md`` gives the argument.
The public discrete Laplace functions are in :mod:`privframe.mechanisms.laplace`.

Example:
    >>> from privframe.mechanisms.sampler import discrete_gaussian
    >>> discrete_gaussian(2.0, size=(2, 3)).shape
    (2, 3)
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import scipy

from privframe.errors import InvalidArgumentError, InvalidBudgetError, InvalidValueError
from privframe.mechanisms._coins import (
    TWO_M53,
    exact_geometric,
    fast_coin,
    prefix,
    resolve,
    uniform_below,
)
from privframe.mechanisms.randomness import Randomness, resolve_randomness
from privframe.numeric import check_positive

__all__ = [
    "MAX_LAPLACE_SCALE",
    "MAX_SIGMA",
    "MIN_LAPLACE_SCALE",
    "MIN_SIGMA",
    "DiscreteGaussianSampler",
    "DiscreteLaplaceSampler",
    "check_laplace_scale",
    "check_sigma",
    "discrete_gaussian",
    "discrete_gaussian_halfwidth",
    "sample_shape",
]

MAX_SIGMA = 2.0**40
"""Largest σ the sampler accepts (about 1.1e12): keeps every candidate below 2^52."""

MIN_SIGMA = 2.0**-20
"""Smallest σ the sampler accepts (about 1e-6); below σ = 0.1 N_Z is already a point mass
at 0 up to probability 2e-22."""

MAX_LAPLACE_SCALE = 2.0**40
"""Largest discrete Laplace scale accepted (about 1.1e12), as :data:`MAX_SIGMA`: a sample
reaches 2^62 with probability about e^(-2^22)."""

MIN_LAPLACE_SCALE = 2.0**-10
"""Smallest discrete Laplace scale accepted (about 0.001), where P(X != 0) < 2e-444. With the
scale t/s in lowest terms and t < 2^53 (every float scale in range), s < 2^63 fits int64."""

_CHUNK = 1 << 16  # candidates per vectorized pass: large enough to amortize, small enough for L2
_MAX_EXACT_INT = 2**52  # |candidates| below this are exact in float64
_MAX_T = 2**53  # numerators t of Laplace scales stay below this: U0/t is one float rounding


def _fill(
    candidates: Callable[[int], npt.NDArray[np.int64]], size: int, overshoot: float
) -> npt.NDArray[np.int64]:
    """``size`` samples from batches of ``candidates(n)`` (each keeps about n/overshoot)."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        batch = min(_CHUNK, max(64, int(need * overshoot) + 64))
        got = candidates(batch)
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


class DiscreteLaplaceSampler:
    """Discrete Laplace on ℤ with scale t/s, P(x) ∝ exp(−|x|·s/t) (CKS Algorithm 2).

    ``scale`` is an exact rational t/s in lowest terms with t < 2^53 and s < 2^63:
    every scale :func:`check_laplace_scale` accepts, and every integer scale
    below 2^53 (the discrete Gaussian's proposals, s = 1).
    """

    def __init__(self, scale: Fraction, rng: Randomness) -> None:
        self.scale = scale
        self.rng = rng
        self.t = scale.numerator
        self.s = scale.denominator
        # Expected share of proposals kept, to size batches (public, not privacy-relevant):
        # the coin keeps (1 − e^-1)/(t(1 − e^(-1/t))) of them, the sign (1 + e^(-s/t))/2.
        coin = 1.0 if self.t == 1 else -math.expm1(-1.0) / (self.t * -math.expm1(-1.0 / self.t))
        kept = coin * (1.0 + math.exp(-self.s / self.t)) / 2
        self.overshoot = math.ceil(8.8 / kept) / 8  # 1.1/kept, rounded up to 1/8

    def candidates(self, n: int) -> npt.NDArray[np.int64]:
        """The samples among n proposals that survive both rejections."""
        t, s, rng = self.t, self.s, self.rng
        if t > 1:
            u0 = uniform_below(rng.words(n), t)
            # Bernoulli(exp(-U0/t)): U0, t < 2^53 are exact floats, so x̂ = fl(U0/t) is
            # within 2^-53·x of x.
            kd = prefix(rng.words(u0.size))
            x_hat = u0 / float(t)
            yes, no = fast_coin(kd, x_hat)
            keep = resolve(yes, no, kd, lambda i: Fraction(int(u0[i]), t), rng)
            u0 = u0[keep]
        else:
            u0 = np.zeros(n, dtype=np.int64)
        m = u0.size
        # Geometric V with P(V >= v) = e^-v: guess from a float log, then verify both
        # neighbouring thresholds with sure coins; anything unsure is decided exactly.
        wv = rng.words(m)
        kv = prefix(wv)
        guess = np.floor(-np.log((kv.astype(np.float64) + 0.5) * TWO_M53))
        above_yes, _ = fast_coin(kv, guess)
        _, below_no = fast_coin(kv, guess + 1.0)
        v = guess.astype(np.int64)
        unsure = np.flatnonzero(~(above_yes & below_no))
        v[unsure] = 0  # decided below
        # X = U0 + t·V and Y = floor(X/s): with a sure V <= 37, X < 38·2^53 fits int64.
        y = u0 + t * v
        if s > 1:
            y //= s
        for i in unsure.tolist():
            # An exactly decided V may be large: X in Python integers. Y overflows int64
            # (and numpy raises) only if V >= 2^22 here, probability about e^(-2^22).
            y[i] = (int(u0[i]) + t * exact_geometric(int(kv[i]), rng)) // s
        # The sign takes the lowest bit of V's word: bits below the 53-bit prefix are
        # independent of it. A negative zero is rejected so that 0 is not counted twice.
        negative = (wv & np.uint64(1)).astype(bool)
        keep = ~(negative & (y == 0))
        return np.where(negative, -y, y)[keep]

    def sample(self, size: int) -> npt.NDArray[np.int64]:
        """``size`` independent samples, drawn in vectorized batches."""
        return _fill(self.candidates, size, self.overshoot)


class DiscreteGaussianSampler:
    """Discrete Gaussian N_Z(0, σ²) by CKS Algorithm 3 over their Algorithm 2 (Laplace, scale t)."""

    def __init__(self, sigma: float, rng: Randomness) -> None:
        self.sigma = sigma
        self.rng = rng
        self.t = math.floor(sigma) + 1
        self.laplace = DiscreteLaplaceSampler(Fraction(self.t), rng)
        self.sigma2 = Fraction(sigma) ** 2
        # Correctly rounded constants (int/int and Fraction division round correctly).
        self.c = float(self.sigma2 / self.t)
        self.inv_two_sigma2 = float(1 / (2 * self.sigma2))

    def acceptance_x_hat(self, y: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Float x̂ of the acceptance coin; within 8·2^-53·(1 + x) of x when |y| < 2^52."""
        d = np.abs(y).astype(np.float64) - self.c
        return (d * d) * self.inv_two_sigma2

    def acceptance_x(self, y: int) -> Fraction:
        """Exact x = (|y| - σ²/t)² / (2σ²) of the acceptance coin exp(-x)."""
        diff = abs(y) - self.sigma2 / self.t
        return diff * diff / (2 * self.sigma2)

    def candidates(self, n: int) -> npt.NDArray[np.int64]:
        """Accepted discrete Gaussian samples out of n Laplace proposals (CKS Algorithm 3)."""
        y = self.laplace.candidates(n)
        big = np.abs(y) >= _MAX_EXACT_INT
        kc = prefix(self.rng.words(y.size))
        x_hat = self.acceptance_x_hat(y)
        x_hat[big] = 0.0  # forced to the exact path below
        yes, no = fast_coin(kc, x_hat)
        no &= ~big
        yes &= ~big
        return y[resolve(yes, no, kc, lambda i: self.acceptance_x(int(y[i])), self.rng)]

    def sample(self, size: int) -> npt.NDArray[np.int64]:
        """``size`` independent samples, drawn in vectorized batches."""
        # About 40% of proposals survive both rejections; overshoot a little.
        return _fill(self.candidates, size, 2.6)


def check_sigma(sigma: float) -> float:
    """``sigma`` as a float if the sampler accepts it (in [MIN_SIGMA, MAX_SIGMA]), else an error.

    Example:
        >>> from privframe.mechanisms.sampler import check_sigma
        >>> check_sigma(2)
        2.0
    """
    s = check_positive("sigma", sigma)
    if not MIN_SIGMA <= s <= MAX_SIGMA:
        raise InvalidBudgetError(f"sigma must be in [{MIN_SIGMA:.4g}, {MAX_SIGMA:.4g}], got {s!r}")
    return s


def check_laplace_scale(scale: float | Fraction) -> Fraction:
    """``scale`` as the exact rational the discrete Laplace sampler uses, or an error.

    A float is taken at its binary value (a float is a rational); an int or a
    :class:`~fractions.Fraction` is exact as it is. The scale must lie in
    [MIN_LAPLACE_SCALE, MAX_LAPLACE_SCALE] and, in lowest terms t/s, have
    t < 2^53, which every float in that range has.

    Raises:
        InvalidArgumentError: ``scale`` is not a real number.
        InvalidBudgetError: ``scale`` is not finite, not positive, or out of range.
        InvalidValueError: a fraction's numerator is 2^53 or more.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.mechanisms.sampler import check_laplace_scale
        >>> check_laplace_scale(2.5), check_laplace_scale(Fraction(10, 3))
        (Fraction(5, 2), Fraction(10, 3))
    """
    if isinstance(scale, numbers.Rational) and not isinstance(scale, bool):
        b = Fraction(int(scale.numerator), int(scale.denominator))
        if b <= 0:
            raise InvalidBudgetError(f"scale must be > 0, got {scale!r}")
    else:
        b = Fraction(check_positive("scale", scale))
    low, high = MIN_LAPLACE_SCALE, MAX_LAPLACE_SCALE
    if not low <= b <= high:
        raise InvalidBudgetError(f"scale must be in [{low:.4g}, {high:.4g}], got {float(b)!r}")
    if b.numerator >= _MAX_T:
        raise InvalidValueError(
            f"scale={scale!r} has a numerator of 2^53 or more in lowest terms; pass a float "
            "(rounding the scale up keeps a release private) or a fraction with a smaller numerator"
        )
    return b


def sample_shape(size: int | tuple[int, ...] | None) -> tuple[int, ...]:
    """The shape a sampler's ``size`` asks for: ``None`` is a 0-d array.

    Example:
        >>> from privframe.mechanisms.sampler import sample_shape
        >>> sample_shape(None), sample_shape(3), sample_shape((2, 3))
        ((), (3,), (2, 3))
    """
    if size is None:
        return ()
    dims = (size,) if not isinstance(size, tuple | list) else size
    try:
        shape = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise InvalidArgumentError(
            f"size must be an int or a tuple of ints, got {size!r}"
        ) from None
    if any(d < 0 for d in shape):
        raise InvalidValueError(f"size must be non-negative, got {size!r}")
    return shape


def discrete_gaussian(
    sigma: float,
    size: int | tuple[int, ...] | None = None,
    *,
    rng: Randomness | None = None,
) -> npt.NDArray[np.int64]:
    """Draw exact samples of the discrete Gaussian N_Z(0, σ²).

    P[X = x] ∝ exp(-x²/(2σ²)) on the integers (Canonne, Kamath & Steinke
    2020, Def. 1). σ is the scale parameter; the variance is slightly below σ².

    Args:
        sigma: the scale σ, 0 < σ <= MAX_SIGMA.
        size: an int or shape; ``None`` gives a 0-d array.
        rng: the random source; the OS CSPRNG by default. A
            :class:`SeededRandomness` warns that the output is not private.

    Returns:
        An int64 array of the requested shape.

    Example:
        >>> import privframe as pf
        >>> x = pf.discrete_gaussian(sigma=10.0, size=100_000)
        >>> bool(abs(x.std() - 10.0) < 0.2)
        True
    """
    s = check_sigma(sigma)
    shape = sample_shape(size)
    sampler = DiscreteGaussianSampler(s, resolve_randomness(rng))
    return sampler.sample(math.prod(shape)).reshape(shape)


def discrete_gaussian_halfwidth(sigma: float, level: float = 0.95) -> int:
    """The smallest h with P(|X| <= h) >= level for X ~ N_Z(0, σ²): an exact interval.

    Computed from the pmf for σ <= 10⁴. Above that the lattice is invisible at
    double precision and h = ceil(z·σ − 1/2) (the continuity-corrected normal
    quantile) is used.

    Example:
        >>> from privframe.mechanisms.noise import discrete_gaussian_halfwidth
        >>> discrete_gaussian_halfwidth(1.0), discrete_gaussian_halfwidth(100.0)
        (2, 196)
    """
    s = check_sigma(sigma)
    if not 0 < level < 1:
        raise InvalidValueError(f"level must be in (0, 1), got {level!r}")
    if s > 1e4:
        return math.ceil(float(scipy.special.ndtri((1 + level) / 2)) * s - 0.5)
    support = np.arange(0, math.ceil(14 * s) + 2, dtype=np.float64)
    weights = np.exp(-(support**2) / (2 * s * s))
    weights[1:] *= 2  # ±x
    mass = np.cumsum(weights) / weights.sum()
    return int(np.searchsorted(mass, level))
