"""Secure noise: an exact, vectorized discrete Gaussian sampler and the Gaussian mechanism.

Nothing here uses a floating-point random number generator. Random bits come
from the operating system's CSPRNG (:class:`SystemRandomness`) or, for tests
and demos only, from a seeded SHAKE-256 stream (:class:`SeededRandomness`),
which warns on every use.

The sampler is the rejection sampler of Canonne, Kamath & Steinke, "The
Discrete Gaussian for Differential Privacy" (NeurIPS 2020, Algorithms 2 and 3).
Every coin it flips compares a uniform U (revealed 53 bits at a time) with a
probability exp(-x). A vectorized float fast path decides the coin only when U
is farther from exp(-x) than a proven bound on the float error; otherwise
(probability below 2^-28 per coin) the coin is decided exactly with integer
arithmetic and more random bits. The output distribution is therefore exactly
N_Z(0, σ²); ``docs/privacy.md`` gives the argument and its constants.

Example:
    >>> import privframe as pf
    >>> x = pf.discrete_gaussian(sigma=3.0, size=5)
    >>> x.dtype.name, x.shape
    ('int64', (5,))
"""

from __future__ import annotations

import abc
import hashlib
import math
import operator
import os
import warnings
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from scipy import special

from privframe.accounting._numbers import check_positive, round_up, sqrt_up
from privframe.accounting.budgets import zCDP
from privframe.accounting.calibration import gaussian_sigma
from privframe.errors import (
    CalibrationError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    SeededRandomnessWarning,
)

if TYPE_CHECKING:
    from privframe.accounting.accountant import Accountant

__all__ = [
    "MAX_SIGMA",
    "MIN_SIGMA",
    "Randomness",
    "SeededRandomness",
    "SystemRandomness",
    "clipped_gaussian_sum",
    "discrete_gaussian",
    "discrete_gaussian_halfwidth",
    "exponential_choice",
    "gaussian_mechanism",
    "grid_exponent",
    "snap_to_grid",
]

MAX_SIGMA = 2.0**40
"""Largest σ the sampler accepts (about 1.1e12): keeps every candidate below 2^52."""

MIN_SIGMA = 2.0**-20
"""Smallest σ the sampler accepts (about 1e-6); below σ = 0.1 N_Z is already a point mass
at 0 up to probability 2e-22."""

_CHUNK = 1 << 16  # candidates per vectorized pass: large enough to amortize, small enough for L2
_U_BITS = 53  # bits of U the fast path uses; they make an exactly representable float
_TWO_M53 = 2.0**-53
# Relative slack the fast path leaves around exp(-x): tol = exp(-x̂)·2^-30·(1 + x̂).
# The float error is below 2^-31·(1 + x) even if numpy's exp were off by 2^-32
# relative, a million ulps (docs/privacy.md, "Exactness").
_SLACK = 2.0**-30
_X_CLAMP = 700.0  # exp(-700) is a normal float far below 2^-53; see _fast_coin
_MAX_EXACT_INT = 2**52  # |candidates| below this are exact in float64


class Randomness(abc.ABC):
    """A source of uniformly random 64-bit words for the samplers.

    Subclasses must be cryptographically secure unless they set ``seeded``.

    Example:
        >>> import privframe as pf
        >>> pf.noise.SystemRandomness().words(3).dtype.name
        'uint64'
    """

    seeded: bool = False

    @abc.abstractmethod
    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return ``n`` independent uniform 64-bit words."""


class SystemRandomness(Randomness):
    """The operating system's CSPRNG (``os.urandom``, i.e. getrandom(2) on Linux).

    Example:
        >>> from privframe.mechanisms.noise import SystemRandomness
        >>> len(SystemRandomness().words(4))
        4
    """

    seeded = False

    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return ``n`` uniform 64-bit words read from the OS CSPRNG."""
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


class SeededRandomness(Randomness):
    """A reproducible stream for tests and demos: SHAKE-256(seed, counter) blocks.

    Output made with it is NOT private, since anyone with the seed can
    recompute the noise. Every sampler call that uses it emits a
    :class:`~privframe.errors.SeededRandomnessWarning`, and the accountant
    flags the ledger entry of a release that used it.

    Args:
        seed: an integer or bytes; the same seed gives the same stream.

    Example:
        >>> import warnings
        >>> from privframe.mechanisms.noise import SeededRandomness
        >>> a, b = SeededRandomness(7), SeededRandomness(7)
        >>> bool((a.words(4) == b.words(4)).all())
        True
    """

    seeded = True

    def __init__(self, seed: int | bytes) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | bytes):
            raise InvalidArgumentError(f"seed must be an int or bytes, got {type(seed).__name__}")
        # The type tag keeps int and bytes seeds apart: SeededRandomness(0) != (b"\x00").
        if isinstance(seed, int):
            material = b"int:" + seed.to_bytes((seed.bit_length() + 8) // 8, "little", signed=True)
        else:
            material = b"bytes:" + seed
        self._key = hashlib.sha256(b"privframe-seeded-v1/" + material).digest()
        self._block = 0
        self._buffer = b""

    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return the next ``n`` 64-bit words of the seeded stream."""
        need = 8 * n
        parts = [self._buffer]
        have = len(self._buffer)
        while have < need:
            size = max(need - have, 1 << 16)
            block = hashlib.shake_256(self._key + self._block.to_bytes(8, "little"))
            parts.append(block.digest(size))
            self._block += 1
            have += size
        data = b"".join(parts)
        self._buffer = data[need:]
        return np.frombuffer(data[:need], dtype=np.uint64)


def _randomness(rng: Randomness | None) -> Randomness:
    """The caller's source, or the OS CSPRNG; warns loudly when it is seeded."""
    if rng is None:
        return SystemRandomness()
    if not isinstance(rng, Randomness):
        raise InvalidArgumentError(
            f"rng must be a privframe.noise.Randomness (SystemRandomness or SeededRandomness), "
            f"got {type(rng).__name__}"
        )
    if rng.seeded:
        warnings.warn(
            "privframe is drawing noise from a SEEDED stream: the output is reproducible "
            "and NOT differentially private. Use seeded randomness only in tests and demos.",
            SeededRandomnessWarning,
            stacklevel=3,
        )
    return rng


# --------------------------------------------------------------------------- exact path


def _exp_neg_bounds(x: Fraction, prec: int) -> tuple[int, int, int]:
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


class _LazyUniform:
    """U uniform on [0, 1), known so far as U ∈ [k/2^b, (k+1)/2^b); more bits on demand."""

    def __init__(self, prefix: int, rng: Randomness) -> None:
        self.k = prefix
        self.b = _U_BITS
        self._rng = rng

    def _refine(self) -> None:
        self.k = (self.k << 64) | int(self._rng.words(1)[0])
        self.b += 64

    def less_than_exp_neg(self, x: Fraction) -> bool:
        """Decide U < exp(-x) exactly."""
        while True:
            lo, hi, w = _exp_neg_bounds(x, self.b + 16)
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


def _exact_coin(prefix: int, x: Fraction, rng: Randomness) -> bool:
    return _LazyUniform(prefix, rng).less_than_exp_neg(x)


def _exact_geometric(prefix: int, rng: Randomness) -> int:
    """V = max{v >= 0 : U < exp(-v)}, i.e. P(V >= v) = e^-v, decided exactly."""
    u = _LazyUniform(prefix, rng)
    v = 0
    while u.less_than_exp_neg(Fraction(v + 1)):
        v += 1
    return v


# --------------------------------------------------------------------------- fast path


def _prefix(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    return words >> np.uint64(64 - _U_BITS)


def _fast_coin(
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
    u_lo = k.astype(np.float64) * _TWO_M53
    u_hi = u_lo + _TWO_M53
    return u_hi <= p_hat - tol, u_lo >= p_hat + tol


def _resolve(
    decided_true: npt.NDArray[np.bool_],
    decided_false: npt.NDArray[np.bool_],
    k: npt.NDArray[np.uint64],
    exact_x: Callable[[int], Fraction],
    rng: Randomness,
) -> npt.NDArray[np.bool_]:
    """Combine fast decisions with exact ones for the undecided positions."""
    result = decided_true.copy()
    for i in np.flatnonzero(~(decided_true | decided_false)):
        result[i] = _exact_coin(int(k[i]), exact_x(i), rng)
    return result


def _uniform_below(words: npt.NDArray[np.uint64], t: int) -> npt.NDArray[np.int64]:
    """Exactly uniform integers in {0, ..., t-1} from the words below the largest multiple of t.

    The words at or above it are dropped, not folded: folding would favour small values.
    """
    limit = np.uint64(((1 << 64) // t) * t - 1)
    return (words[words <= limit] % np.uint64(t)).astype(np.int64)


class _Sampler:
    """Discrete Gaussian N_Z(0, σ²) by CKS Algorithm 3 over their Algorithm 2 (Laplace, scale t)."""

    def __init__(self, sigma: float, rng: Randomness) -> None:
        self.sigma = sigma
        self.rng = rng
        self.t = math.floor(sigma) + 1
        self.sigma2 = Fraction(sigma) ** 2
        # Correctly rounded constants (int/int and Fraction division round correctly).
        self.c = float(self.sigma2 / self.t)
        self.inv_two_sigma2 = float(1 / (2 * self.sigma2))

    def _laplace(self, n: int) -> npt.NDArray[np.int64]:
        """Up to n candidates from the discrete Laplace with scale t (CKS Algorithm 2)."""
        t = self.t
        rng = self.rng
        if t > 1:
            u0 = _uniform_below(rng.words(n), t)
            # Bernoulli(exp(-U0/t)): x̂ = fl(U0/t) is within 2^-53·x of x.
            kd = _prefix(rng.words(u0.size))
            x_hat = u0 / float(t)
            yes, no = _fast_coin(kd, x_hat)
            keep = _resolve(yes, no, kd, lambda i: Fraction(int(u0[i]), t), rng)
            u0 = u0[keep]
        else:
            u0 = np.zeros(n, dtype=np.int64)
        m = u0.size
        # Geometric V with P(V >= v) = e^-v: guess from a float log, then verify both
        # neighbouring thresholds with sure coins; anything unsure is decided exactly.
        wv = rng.words(m)
        kv = _prefix(wv)
        guess = np.floor(-np.log((kv.astype(np.float64) + 0.5) * _TWO_M53))
        above_yes, _ = _fast_coin(kv, guess)
        _, below_no = _fast_coin(kv, guess + 1.0)
        v = guess.astype(np.int64)
        for i in np.flatnonzero(~(above_yes & below_no)):
            v[i] = _exact_geometric(int(kv[i]), rng)
        x = u0 + t * v
        # The sign takes the lowest bit of V's word: bits below the 53-bit prefix are
        # independent of it. A negative zero is rejected so that 0 is not counted twice.
        negative = (wv & np.uint64(1)).astype(bool)
        keep = ~(negative & (x == 0))
        return np.where(negative, -x, x)[keep]

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
        y = self._laplace(n)
        big = np.abs(y) >= _MAX_EXACT_INT
        kc = _prefix(self.rng.words(y.size))
        x_hat = self.acceptance_x_hat(y)
        x_hat[big] = 0.0  # forced to the exact path below
        yes, no = _fast_coin(kc, x_hat)
        no &= ~big
        yes &= ~big
        return y[_resolve(yes, no, kc, lambda i: self.acceptance_x(int(y[i])), self.rng)]

    def sample(self, size: int) -> npt.NDArray[np.int64]:
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            need = size - filled
            # About 40% of proposals survive both rejections; overshoot a little.
            batch = min(_CHUNK, max(64, int(need * 2.6) + 64))
            got = self.candidates(batch)
            take = min(got.size, need)
            out[filled : filled + take] = got[:take]
            filled += take
        return out


def _uniform_indices(size: int, t: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """``size`` exactly uniform integers in {0, ..., t-1}."""
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        out = np.concatenate([out, _uniform_below(rng.words(size - out.size + 8), t)])
    return out[:size]


def _at(
    exact_x: Callable[[int, int], Fraction],
    rows: npt.NDArray[np.int64],
    picks: npt.NDArray[np.int64],
) -> Callable[[int], Fraction]:
    """exact_x at the j-th (row, proposal) pair of one round."""
    return lambda j: exact_x(int(rows[j]), int(picks[j]))


def exponential_choice(
    x_hat: npt.NDArray[np.float64],
    exact_x: Callable[[int, int], Fraction],
    rng: Randomness | None = None,
) -> npt.NDArray[np.int64]:
    """For each row r, an index i drawn with probability exactly ∝ exp(−x[r, i]).

    The exponential mechanism's sampling step, without floating-point
    sampling: propose i uniformly, accept with a Bernoulli(exp(−x[r, i]))
    coin decided like the discrete Gaussian's (fast path with a proven margin,
    exact arithmetic otherwise), repeat until accepted. Rejection sampling
    from a uniform proposal is exact for any weights in (0, 1]; with a zero
    minimum per row, the expected number of rounds is at most the row length.

    Args:
        x_hat: shape (rows, n), x̂ >= 0 within 2^-45·(1 + x) of the exact x;
            every row's minimum exact x must be 0.
        exact_x: exact_x(r, i) is the exact x[r, i] as a Fraction (used only
            when the float coin is too close to call).
        rng: the randomness source (default: the OS CSPRNG).

    Example:
        >>> import numpy as np
        >>> from fractions import Fraction
        >>> from privframe.mechanisms.noise import exponential_choice
        >>> x = np.array([[0.0, 50.0, 50.0], [60.0, 60.0, 0.0]])
        >>> exponential_choice(x, lambda r, i: Fraction(x[r, i])).tolist()
        [0, 2]
    """
    source = _randomness(rng)
    x_hat = np.asarray(x_hat, dtype=np.float64)
    rows, n = x_hat.shape
    chosen = np.full(rows, -1, dtype=np.int64)
    active = np.arange(rows)
    while active.size:
        proposal = _uniform_indices(active.size, n, source)
        k = _prefix(source.words(active.size))
        yes, no = _fast_coin(k, x_hat[active, proposal])
        keep = _resolve(yes, no, k, _at(exact_x, active, proposal), source)
        chosen[active[keep]] = proposal[keep]
        active = active[~keep]
    return chosen


def _check_sigma(sigma: float) -> float:
    s = check_positive("sigma", sigma)
    if not MIN_SIGMA <= s <= MAX_SIGMA:
        raise InvalidBudgetError(f"sigma must be in [{MIN_SIGMA:.4g}, {MAX_SIGMA:.4g}], got {s!r}")
    return s


def _shape(size: int | tuple[int, ...] | None) -> tuple[int, ...]:
    if size is None:
        return ()
    dims = (size,) if not isinstance(size, tuple | list) else size
    try:
        shape = tuple(operator.index(d) for d in dims)  # type: ignore[arg-type]
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
    s = _check_sigma(sigma)
    shape = _shape(size)
    return _Sampler(s, _randomness(rng)).sample(math.prod(shape)).reshape(shape)


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
    s = _check_sigma(sigma)
    if not 0 < level < 1:
        raise InvalidValueError(f"level must be in (0, 1), got {level!r}")
    if s > 1e4:
        return math.ceil(float(special.ndtri((1 + level) / 2)) * s - 0.5)
    support = np.arange(0, math.ceil(14 * s) + 2, dtype=np.float64)
    weights = np.exp(-(support**2) / (2 * s * s))
    weights[1:] *= 2  # ±x
    mass = np.cumsum(weights) / weights.sum()
    return int(np.searchsorted(mass, level))


def grid_exponent(sigma: float, l2_sensitivity: float, n: int) -> int:
    """The j of the grid 2^-j that :func:`gaussian_mechanism` snaps real values to.

    The grid width g = 2^-j is the largest power of two with g <= σ/2^12 and
    g·sqrt(n) <= Δ/2^12. Rounding each of n coordinates to the grid moves the
    vector by at most g·sqrt(n) in L2, so the sensitivity grows from Δ to
    Δ + g·sqrt(n) <= Δ(1 + 2^-12): the mechanism accounts for that and costs
    at most 0.05% more variance than continuous noise. Only public parameters
    (σ, Δ, n) choose j, never the data.

    Raises:
        CalibrationError: the grid would leave the float range (σ or Δ/sqrt(n)
            beyond 2^±1000).

    Example:
        >>> from privframe.mechanisms.noise import grid_exponent
        >>> grid_exponent(sigma=1.0, l2_sensitivity=1.0, n=1)
        12
    """
    scale = min(
        check_positive("sigma", sigma),
        check_positive("l2_sensitivity", l2_sensitivity) / math.sqrt(max(n, 1)),
    )
    if not 2.0**-1000 <= scale <= 2.0**1000:
        raise CalibrationError(
            f"min(sigma, l2_sensitivity/sqrt(n)) = {scale!r} is outside [2^-1000, 2^1000]: "
            "rescale the values so the noise grid stays within float range"
        )
    return 12 - math.floor(math.log2(scale))


def snap_to_grid(values: npt.ArrayLike, j: int) -> npt.NDArray[np.int64]:
    """Round real values to the nearest multiple of 2^-j, as int64 grid units.

    Raises:
        InvalidValueError: a value is not finite or too large for int64 grid units.

    Example:
        >>> from privframe.mechanisms.noise import snap_to_grid
        >>> snap_to_grid([0.3, -1.0], 2).tolist()
        [1, -4]
    """
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InvalidValueError("values must be finite (no NaN or inf) to be noised")
    scaled = np.ldexp(arr, j)  # exact unless it overflows, which the bound below catches
    if scaled.size and not np.abs(scaled).max() < 2.0**62:
        raise InvalidValueError(
            f"values are too large for the noise grid 2^-{j}: |value| must be < 2^{62 - j}; "
            "rescale them or pass integers"
        )
    return np.rint(scaled).astype(np.int64)


def _as_numeric_array(values: npt.ArrayLike) -> npt.NDArray[Any]:
    if isinstance(values, np.ma.MaskedArray):
        raise InvalidArgumentError(
            "masked arrays are not supported: their hidden values would be released; "
            "fill or drop the masked entries first"
        )
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as err:
        raise InvalidValueError(f"values must form a rectangular numeric array: {err}") from None
    if arr.dtype.kind not in "iuf":
        raise InvalidArgumentError(f"values must be an int or float array, got dtype {arr.dtype}")
    return arr


def _calibrated_sampler(
    l2_sensitivity: float, rho: float, n: int, j: int, rng: Randomness
) -> _Sampler:
    """The sampler at σ = Δ/sqrt(2ρ) (rounded up), in units of the grid 2^-j."""
    sigma = math.ldexp(gaussian_sigma(l2_sensitivity, rho), j)
    if not MIN_SIGMA <= sigma <= MAX_SIGMA:
        raise CalibrationError(
            f"l2_sensitivity={l2_sensitivity!r}, rho={rho!r} over n={n} values call for noise "
            f"of scale {sigma:.4g} grid units, outside [{MIN_SIGMA:.4g}, {MAX_SIGMA:.4g}]; "
            "use a larger rho or rescale the values"
        )
    return _Sampler(sigma, rng)


def gaussian_mechanism(
    values: npt.ArrayLike,
    l2_sensitivity: float,
    rho: float,
    *,
    rng: Randomness | None = None,
    accountant: Accountant | None = None,
    label: str = "",
    description: Mapping[str, Any] | str = "",
) -> npt.NDArray[np.int64] | npt.NDArray[np.float64]:
    """Release ``values`` with discrete Gaussian noise calibrated to ρ-zCDP.

    Integer arrays get N_Z(0, σ²) noise with σ = Δ/sqrt(2ρ) (rounded up), which
    is ρ-zCDP for any integer-valued query of L2 sensitivity Δ (Canonne,
    Kamath & Steinke 2020, Thm. 14). Real arrays are snapped to the grid
    2^-j of :func:`grid_exponent`, noised there with σ computed from the
    rounding-inflated sensitivity Δ + 2^-j·sqrt(n), and scaled back, so every
    output is a grid point and no floating-point noise is ever sampled
    (Mironov 2012).

    With an ``accountant``, ρ is charged to it (with ``label``, ``description``
    and the ``seeded`` flag of ``rng``) after the input is validated and
    before any noise is drawn: a release that does not fit raises
    :class:`~privframe.errors.BudgetExceededError` and produces nothing.

    Args:
        values: an int or float array: the exact query answer.
        l2_sensitivity: Δ > 0, the L2 sensitivity of the query under add/remove
            of one privacy unit.
        rho: ρ > 0 spent by this release.
        rng: the random source; the OS CSPRNG by default.
        accountant: charge ρ here first; without it the caller must charge it.
        label: the ledger label, with ``accountant``.
        description: the ledger description, with ``accountant``.

    Returns:
        A noisy copy of the same shape: int64 for integer input, float64 for real input.

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> acct = pf.Accountant(pf.zCDP(1.0))
        >>> noisy = pf.gaussian_mechanism(
        ...     np.array([10, 20, 30]), l2_sensitivity=1.0, rho=0.5, accountant=acct, label="q1"
        ... )
        >>> noisy.dtype.name, noisy.shape, acct.remaining.rho
        ('int64', (3,), 0.5)
    """
    arr = _as_numeric_array(values)
    if arr.dtype.kind in "iu":
        if arr.size and not np.abs(arr.astype(np.float64)).max() < 2.0**62:
            raise InvalidValueError("integer values must satisfy |value| < 2^62 to be noised")
        j = 0
        units = arr.astype(np.int64)
        sensitivity = l2_sensitivity
    else:
        j = grid_exponent(gaussian_sigma(l2_sensitivity, rho), l2_sensitivity, arr.size)
        units = snap_to_grid(arr, j)
        # Δ + g·sqrt(n), rounded up: the sensitivity after snapping (see grid_exponent).
        root_n = Fraction(sqrt_up(Fraction(arr.size)))
        sensitivity = round_up(Fraction(l2_sensitivity) + root_n * Fraction(2) ** -j)
    sampler = _calibrated_sampler(sensitivity, rho, arr.size, j, _randomness(rng))
    if accountant is not None:
        accountant.spend(zCDP(rho), label=label, description=description, seeded=sampler.rng.seeded)
    noisy = units + sampler.sample(arr.size).reshape(arr.shape)
    return np.asarray(noisy if arr.dtype.kind in "iu" else np.ldexp(noisy.astype(np.float64), -j))


_CLIP_SLACK = 1.0 - 2.0**-50  # float error in a row's norm must never let it exceed C


def clipped_gaussian_sum(
    rows: npt.ArrayLike,
    clip_norm: float,
    noise_multiplier: float,
    *,
    rng: Randomness | None = None,
) -> npt.NDArray[np.float64]:
    """DP-SGD's step: clip each row (one example's gradient) to L2 norm C, sum, add noise.

    Adding or removing one example changes the sum by at most C in L2 norm,
    so the noisy sum with noise multiplier z is ρ = 1/(2z²)-zCDP (Abadi et al.
    2016). The noise is discrete Gaussian on a grid (:func:`gaussian_mechanism`),
    never floating-point: its σ is at least z·C (the grid rounding is added to
    the sensitivity), so accounting with z is conservative. One step with
    Poisson sampling rate q is therefore the event
    ``PoissonSampledEvent(q, GaussianEvent(z, discrete=True))``, which
    :func:`privframe.mechanisms.dpsgd.dpsgd_epsilon` accounts with ``discrete=True``
    (docs/accounting.md §5). Rows with a NaN or infinite entry count as zero
    rows, so no input value can make the step fail.

    Args:
        rows: a 2-D array, one row per example (numpy in, numpy out).
        clip_norm: C > 0.
        noise_multiplier: z > 0, the noise std in units of C.
        rng: the random source; the OS CSPRNG by default.

    Returns:
        The noisy sum, a float64 vector of the rows' width.

    Example:
        >>> import numpy as np
        >>> from privframe.mechanisms.noise import clipped_gaussian_sum
        >>> clipped_gaussian_sum(np.ones((4, 3)), clip_norm=1.0, noise_multiplier=1.1).shape
        (3,)
    """
    batch = _as_numeric_array(rows)
    if batch.ndim != 2:
        raise InvalidValueError(f"rows must be a 2-D array (examples x values), got {batch.ndim}-D")
    c = check_positive("clip_norm", clip_norm)
    z = check_positive("noise_multiplier", noise_multiplier)
    batch = batch.astype(np.float64)
    batch[~np.isfinite(batch).all(axis=1)] = 0.0
    # Each row as peak·unit with peak its largest |entry|: |row| = peak·|unit| cannot
    # overflow unnoticed, and a row to shrink is rescaled from its unit vector.
    peak = np.abs(batch).max(axis=1, initial=0.0)
    unit = batch / np.where(peak > 0, peak, 1.0)[:, None]
    length = np.sqrt(np.einsum("ij,ij->i", unit, unit))
    with np.errstate(over="ignore"):
        shrink = peak * length > c * _CLIP_SLACK
    factor = np.where(shrink, c * _CLIP_SLACK / np.where(shrink, length, 1.0), peak)
    total = (unit * factor[:, None]).sum(axis=0)
    # ρ = 1/(2z²) exactly: σ = Δ'/sqrt(2ρ), rounded up, is then at least z·C, so
    # accounting with z holds.
    rho = Fraction(1) / (2 * Fraction(z) ** 2)
    return gaussian_mechanism(total, l2_sensitivity=c, rho=rho, rng=rng)
