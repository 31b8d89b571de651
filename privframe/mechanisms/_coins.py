"""Bernoulli(exp(−x)) coins, decided exactly: floats with a proven margin, else integers.

Every coin of the samplers compares a uniform U (revealed 53 bits at a time)
with a probability exp(−x). :func:`fast_coin` decides it in floats only when U
is farther from exp(−x) than a proven bound on the float error; otherwise
(probability below 2^-28 per coin) :func:`exact_coin` decides it exactly with
integer arithmetic and more random bits (``docs/privacy.md``, "Exactness").
The names are public for the mechanism modules; the module is private.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privframe.mechanisms.randomness import Randomness

__all__ = [
    "TWO_M53",
    "U_BITS",
    "LazyUniform",
    "exact_coin",
    "exact_geometric",
    "exp_neg_bounds",
    "fast_coin",
    "prefix",
    "resolve",
    "uniform_below",
    "uniform_indices",
]

U_BITS = 53  # bits of U the fast path uses; they make an exactly representable float
TWO_M53 = 2.0**-53
# Relative slack the fast path leaves around exp(-x): tol = exp(-x̂)·2^-30·(1 + x̂).
# The float error is below 2^-31·(1 + x) even if numpy's exp were off by 2^-32
# relative, a million ulps (docs/privacy.md, "Exactness").
_SLACK = 2.0**-30
_X_CLAMP = 700.0  # exp(-700) is a normal float far below 2^-53; see fast_coin

# --------------------------------------------------------------------------- exact path


def exp_neg_bounds(x: Fraction, prec: int) -> tuple[int, int, int]:
    """Integers (lo, hi, w) with lo/2^w <= exp(-x) <= hi/2^w and hi - lo tiny next to 2^(w-prec).

    Uses the alternating Taylor series of exp(-r) for r = x/2^s <= 1/2, whose
    consecutive partial sums bracket the limit, then squares s times with
    outward rounding. Only integer and rational arithmetic is involved.
    """
    if x < 0:
        raise ValueError("x must be >= 0")
    s = 0
    while x > Fraction(1, 2) * (1 << s):
        s += 1
    r = x / (1 << s)
    w = prec + s + 8
    eps = Fraction(1, 1 << (w + 2))
    total = Fraction(1)
    term = Fraction(1)
    n = 0
    while True:
        n += 1
        term = -term * r / n
        if abs(term) < eps:
            lower, upper = sorted((total, total + term))
            break
        total += term
    lo = (lower.numerator << w) // lower.denominator
    hi = -((-upper.numerator << w) // upper.denominator)
    for _ in range(s):
        lo = (lo * lo) >> w
        hi = -((-hi * hi) >> w)
    return lo, hi, w


class LazyUniform:
    """U uniform on [0, 1), known so far as U ∈ [k/2^b, (k+1)/2^b); more bits on demand."""

    def __init__(self, prefix: int, rng: Randomness) -> None:
        self.k = prefix
        self.b = U_BITS
        self._rng = rng

    def _refine(self) -> None:
        self.k = (self.k << 64) | int(self._rng.words(1)[0])
        self.b += 64

    def less_than_exp_neg(self, x: Fraction) -> bool:
        """Decide U < exp(-x) exactly."""
        while True:
            lo, hi, w = exp_neg_bounds(x, self.b + 16)
            # Compare k/2^b and (k+1)/2^b with lo/2^w and hi/2^w on a common denominator.
            shift = w - self.b
            u_lo, u_hi = self.k, self.k + 1
            if shift >= 0:
                u_lo, u_hi = u_lo << shift, u_hi << shift
            else:
                lo, hi = lo << -shift, hi << -shift
            if u_hi <= lo:
                return True
            if u_lo >= hi:
                return False
            self._refine()


def exact_coin(prefix: int, x: Fraction, rng: Randomness) -> bool:
    return LazyUniform(prefix, rng).less_than_exp_neg(x)


def exact_geometric(prefix: int, rng: Randomness) -> int:
    """V = max{v >= 0 : U < exp(-v)}, i.e. P(V >= v) = e^-v, decided exactly."""
    u = LazyUniform(prefix, rng)
    v = 0
    while u.less_than_exp_neg(Fraction(v + 1)):
        v += 1
    return v


# --------------------------------------------------------------------------- fast path


def prefix(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    return words >> np.uint64(64 - U_BITS)


def fast_coin(
    k: npt.NDArray[np.uint64], x_hat: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Masks (sure U < exp(-x), sure U >= exp(-x)) for U ∈ [k, k+1)·2^-53; the rest is unknown.

    ``x_hat`` must be within 2^-45·(1 + x) of the exact x (see docs). Clamping
    x̂ at 700 only enlarges p̂, which stays a valid upper bound there and can
    still be compared with U >= 2^-53.
    """
    x_hat = np.minimum(x_hat, _X_CLAMP)
    p_hat = np.exp(-x_hat)
    tol = p_hat * (_SLACK * (1.0 + x_hat))
    u_lo = k.astype(np.float64) * TWO_M53
    u_hi = u_lo + TWO_M53
    return u_hi <= p_hat - tol, u_lo >= p_hat + tol


def resolve(
    decided_true: npt.NDArray[np.bool_],
    decided_false: npt.NDArray[np.bool_],
    k: npt.NDArray[np.uint64],
    exact_x: Callable[[int], Fraction],
    rng: Randomness,
) -> npt.NDArray[np.bool_]:
    """Combine fast decisions with exact ones for the undecided positions."""
    result = decided_true.copy()
    for i in np.flatnonzero(~(decided_true | decided_false)).tolist():
        result[i] = exact_coin(int(k[i]), exact_x(i), rng)
    return result


def uniform_below(words: npt.NDArray[np.uint64], t: int) -> npt.NDArray[np.int64]:
    """Exactly uniform integers in {0, ..., t-1} from the words below the largest multiple of t.

    The words at or above it are dropped, not folded: folding would favour small values.
    """
    limit = np.uint64(((1 << 64) // t) * t - 1)
    return (words[words <= limit] % np.uint64(t)).astype(np.int64)


def uniform_indices(size: int, t: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """``size`` exactly uniform integers in {0, ..., t-1}."""
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        out = np.concatenate([out, uniform_below(rng.words(size - out.size + 8), t)])
    return out[:size]
