"""Privacy loss distributions on a grid: discretised, convolved and self-composed.

The numerics behind :class:`~privframe.accounting.pld.PLDAccountant`, whose
module docstring states the method and its error analysis: the loss CDFs of
the Gaussian, the Poisson-subsampled Gaussian and ε-randomized response
(:func:`gaussian_loss`, :func:`sampled_loss`, :func:`randomized_response_loss`),
their pessimistic or optimistic discretisation on a grid of spacing h
(:func:`discretize`), and composition by FFT
(:func:`convolve`, :func:`self_compose`), each carrying a bound on its
floating-point error.

Example:
    >>> pld = discretize(gaussian_loss(1.0), 1e-3, 1e-15, pessimistic=True)
    >>> 0.12 < pld.delta(1.0) < 0.13
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy

from privframe.accounting._subsampled import log_sum_exp
from privframe.errors import InvalidValueError
from privframe.numeric import ULP

__all__ = [
    "MAX_COUNT",
    "GridPLD",
    "GridTooLargeError",
    "LossCDF",
    "convolve",
    "discretize",
    "gaussian_loss",
    "randomized_response_loss",
    "sampled_loss",
    "self_compose",
]

_FFT_UNIT = float(np.finfo(np.longdouble).eps)
"""Unit roundoff of the FFTs, which run in long double (80-bit on x86-64, else double)."""

_FFT_GAMMA = 10 * _FFT_UNIT
"""Relative ℓ₂ error per FFT level (Higham §24.1, with margin)."""

_CDF_ERROR = 8 * ULP
"""Bound on the absolute error of each computed loss CDF value.

scipy's ``ndtr`` (Cephes erf/erfc; peak relative error ~3.5e-16 in their
tests, under 2 ulps) is within 2 ulps of 1 in absolute terms; a CDF here is a
mixture of at most two of them, plus a multiply and an add: 8 ulps covers it.
The rounding of the *argument* is not a mass error: it moves the point at
which the CDF was evaluated, which :attr:`LossCDF.scale` covers.
"""

MAX_COUNT = 2**40
"""Most repetitions of one subsampled event (the FFT power's exponent)."""

_MAX_POINTS = 2**22
"""Largest PLD support accepted (64 MiB per long-double array, ~1 s per FFT power)."""


# ---------------------------------------------------------------------------
# Loss CDFs of the events with a PLD
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LossCDF:
    """CDFs of the privacy loss under P and under Q, at an array of loss values.

    ``cdf(eps)`` returns (P[L <= ε], P[L > ε], Q[L <= ε], Q[L > ε]), P and Q
    evaluated at the same computed threshold (certifying a merged window's loss
    relies on it), each value within :data:`_CDF_ERROR` of the exact one at a
    point within ``scale``'s bound of ε.
    ``range(tail)`` gives losses (lo, hi) with P[L < lo] and P[L > hi] both <= tail.
    ``scale`` bounds the magnitude of the intermediate values (thresholds over
    σ², means), so that 64·u·(1 + |ε| + scale) bounds how far from ε, in loss,
    the rounded arithmetic evaluated the CDFs.
    """

    cdf: Callable[[np.ndarray], tuple[np.ndarray, ...]]
    range: Callable[[float], tuple[float, float]]
    scale: float


def gaussian_loss(mu: float) -> LossCDF:
    mean, sd = mu * mu / 2, mu

    def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
        zp = (eps - mean) / sd
        zq = (eps + mean) / sd
        return (
            scipy.special.ndtr(zp),
            scipy.special.ndtr(-zp),
            scipy.special.ndtr(zq),
            scipy.special.ndtr(-zq),
        )

    def loss_range(tail: float) -> tuple[float, float]:
        z = -float(scipy.special.ndtri(tail))
        return mean - z * sd, mean + z * sd

    return LossCDF(cdf, loss_range, mean + 40 * sd)


def sampled_loss(q: float, sigma: float, *, remove: bool) -> LossCDF:
    """The loss of the Poisson-subsampled Gaussian (0 < q < 1) in one direction.

    With ψ(y) = ln(1 − q + q·e^{(2y−1)/(2σ²)}), increasing in the output y,
    the remove direction's loss is ψ(y) with y ~ P = (1−q)N(0,σ²) + qN(1,σ²),
    and the add direction's is −ψ(y) with y ~ P = N(0, σ²).
    """
    var = sigma * sigma
    log_q = math.log(q)

    def threshold(eps: np.ndarray) -> np.ndarray:
        # ψ(y) <= t  ⇔  y <= σ² ln((e^t − 1 + q)/q) + 1/2, for e^t > 1 − q.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            gap = np.expm1(eps) + q
            return np.where(gap > 0, var * (np.log(np.maximum(gap, 1e-300)) - log_q) + 0.5, -np.inf)

    def psi(y: float) -> float:
        x = (2 * y - 1) / (2 * var)
        if x <= 0:
            return math.log1p(q * math.expm1(x))
        return x + math.log(q + (1 - q) * math.exp(-x))

    def mixture(y: np.ndarray, upper: bool) -> np.ndarray:
        """P[Y <= y] (or P[Y > y]) for Y ~ (1−q)N(0,σ²) + qN(1,σ²)."""
        sign = -1.0 if upper else 1.0
        return (1 - q) * scipy.special.ndtr(sign * y / sigma) + q * scipy.special.ndtr(
            sign * (y - 1) / sigma
        )

    if remove:

        def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
            y = threshold(eps)
            z = y / sigma
            return (
                mixture(y, False),
                mixture(y, True),
                scipy.special.ndtr(z),
                scipy.special.ndtr(-z),
            )

        def loss_range(tail: float) -> tuple[float, float]:
            z = -float(scipy.special.ndtri(tail))
            return psi(-sigma * z), psi(1 + sigma * z)

    else:

        def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
            # −ψ(y) <= ε  ⇔  ψ(y) >= −ε  ⇔  y >= threshold(−ε).
            y = threshold(-eps)
            z = y / sigma
            return (
                scipy.special.ndtr(-z),
                scipy.special.ndtr(z),
                mixture(y, True),
                mixture(y, False),
            )

        def loss_range(tail: float) -> tuple[float, float]:
            z = -float(scipy.special.ndtri(tail))
            return -psi(sigma * z), -psi(-sigma * z)

    return LossCDF(cdf, loss_range, (2 + 40 * sigma) / var + abs(log_q))


def randomized_response_loss(epsilon: float) -> LossCDF:
    """The loss of ε-randomized response (ε > 0), the same in both directions.

    P = (p, 1 − p) and Q = (1 − p, p) on two outputs, p = e^ε/(1 + e^ε): the
    loss is +ε with probability p and −ε with probability 1 − p under P, and
    the other way round under Q. Its CDFs are steps; p and 1 − p are each
    computed to a few ulps.
    """
    high = 1 / (1 + math.exp(-epsilon))  # P[L = ε] = Q[L = −ε]
    low = 1 / (1 + math.exp(epsilon))  # P[L = −ε] = Q[L = ε]

    def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
        top, middle = eps >= epsilon, eps >= -epsilon
        p_le = np.where(top, 1.0, np.where(middle, low, 0.0))
        p_gt = np.where(top, 0.0, np.where(middle, high, 1.0))
        q_le = np.where(top, 1.0, np.where(middle, high, 0.0))
        q_gt = np.where(top, 0.0, np.where(middle, low, 1.0))
        return p_le, p_gt, q_le, q_gt

    def loss_range(tail: float) -> tuple[float, float]:
        return -epsilon, epsilon

    return LossCDF(cdf, loss_range, epsilon)


# ---------------------------------------------------------------------------
# Discretised PLDs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GridPLD:
    """A discretised PLD: P-mass ``pmf[i]`` at loss (offset + i)·h, ``infinity`` at +∞.

    ``error`` bounds the floating-point error of ``pmf`` in Kolmogorov
    (sup-CDF) distance, and so the error of any δ(ε) = E[g(L)], g being
    monotone with values in [0, 1]; convolving with a sub-probability does not
    increase that distance, so errors add up under composition. ``shift``
    bounds how far from their grid points, in loss, rounding placed the
    masses. ``pessimistic`` says which way the discretisation and tail cuts
    went, and so which way :meth:`delta` applies both bounds.
    """

    h: float
    offset: int
    pmf: np.ndarray
    infinity: float
    error: float
    shift: float
    pessimistic: bool

    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(self.pmf.size)) * self.h

    def delta(self, epsilon: float) -> float:
        """δ(ε) of this PLD, moved by the error bounds in its own direction."""
        epsilon = epsilon - self.shift if self.pessimistic else epsilon + self.shift
        losses = self.losses()
        mask = losses > epsilon
        terms = self.pmf[mask] * -np.expm1(epsilon - losses[mask])
        value = float(terms.sum())
        rounding = (math.log2(terms.size + 1) + 4) * ULP * value
        if self.pessimistic:
            return min(1.0, self.infinity + value + rounding + self.error)
        return max(0.0, self.infinity + value - rounding - self.error)

    def delta_at_grid(self) -> np.ndarray:
        """δ(ℓ_j) at every support point ℓ_j, without the error terms.

        δ(ℓ_j) = ∞-mass + Σ_{i>j} p_i − Σ_{i>j} p_i e^{ℓ_j − ℓ_i}; the last sum
        obeys T_j = e^{−h}(p_{j+1} + T_{j+1}), a decaying linear recurrence.
        """
        # Imported here: scipy.signal (and the scipy.stats it loads) would add ~0.3 s
        # to every `import privframe`, for a filter only PLD conversions use.
        from scipy.signal import lfilter

        pmf = self.pmf
        above = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])
        decay = math.exp(-self.h)
        reversed_t = lfilter([decay], [1.0, -decay], pmf[::-1])
        t = np.concatenate([reversed_t[::-1][1:], [0.0]])
        return self.infinity + np.maximum(above - t, 0.0)

    def epsilon(self, delta: float) -> float:
        """The ε at which :meth:`delta` crosses ``delta``, to 1e-12 relative.

        Pessimistic: the smallest ε found with δ(ε) <= ``delta`` (an upper bound
        on the exact ε). Optimistic: the largest ε found with δ(ε) > ``delta``
        (a lower bound). δ(ε) is non-increasing, so a bisection brackets it; the
        grid, without the error terms, gives the first bracket.
        """
        if self.delta(0.0) <= delta:
            return 0.0
        # Beyond the top loss (and the shift) δ is the constant ∞-mass term.
        top = (self.offset + self.pmf.size) * self.h + self.shift + self.h
        if self.delta(top) > delta:
            return math.inf
        lo, hi = 0.0, top
        losses = self.losses()
        crossed = np.nonzero(self.delta_at_grid() <= delta)[0]
        if crossed.size:
            j = int(crossed[0])
            below = float(losses[j - 1]) if j > 0 else 0.0
            for guess in (below - self.shift - self.h, float(losses[j]) + self.shift + self.h):
                if lo < guess < hi:
                    if self.delta(guess) <= delta:
                        hi = guess
                    else:
                        lo = guess
        while hi - lo > 1e-12 * max(1.0, hi):
            mid = (lo + hi) / 2
            if self.delta(mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi if self.pessimistic else lo


class GridTooLargeError(InvalidValueError):
    """A PLD would need more than :data:`_MAX_POINTS` grid points."""


def _interval_masses(cdf: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """The mass between consecutive points, from whichever tail is smaller there.

    Differences of the smaller tail keep their relative accuracy; either way they
    telescope, so the masses' CDF stays within a few :data:`_CDF_ERROR` of the exact one.
    """
    return np.maximum(np.where(cdf[:-1] < 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:]), 0.0)


def _split_bias(mass_p: np.ndarray, mass_q: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Relative error of e^{exponent}·ΔQ/ΔP from the CDFs' error and the exponent's rounding."""
    with np.errstate(divide="ignore"):
        return 2 * _CDF_ERROR * (1 / mass_p + 1 / mass_q) + 4 * ULP * (np.abs(exponent) + 1)


def discretize(loss: LossCDF, h: float, tail: float, *, pessimistic: bool) -> GridPLD:
    lo, hi = loss.range(tail)
    # The top point lies strictly above hi, so P[L > top] <= tail even when hi rounds to 0.
    first, last = math.floor(lo / h), math.floor(hi / h) + 1
    if last - first + 1 > _MAX_POINTS:
        raise GridTooLargeError(
            f"value_discretization_interval={h!r} needs {last - first + 1} grid points for "
            f"this event (limit {_MAX_POINTS}); use a coarser interval, or RDP accounting"
        )
    points = np.arange(first, last + 1) * h
    fp, sp, fq, sq = loss.cdf(points)
    mass_p, mass_q = _interval_masses(fp, sp), _interval_masses(fq, sq)
    pmf = np.zeros(points.size)
    infinity = 0.0
    if pessimistic:
        # Connect the dots: the Q-mass of an interval with likelihood ratio r̄ = ΔP/ΔQ
        # splits as hat weights between e^{a} and e^{a+h}; in P-mass the lower
        # point gets the fraction (e^{a+h}/r̄ − 1)/(e^h − 1). Its rounding must not
        # favour the lower point, so the fraction is lowered by its error bound,
        # which only moves mass up by less than h (more pessimism, ~h·error in δ).
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            exponent = points[1:] + np.log(mass_q) - np.log(mass_p)
            raw = np.expm1(exponent) / math.expm1(h)
            bias = _split_bias(mass_p, mass_q, points[1:]) * np.exp(exponent) / math.expm1(h)
            fraction = np.clip(np.nan_to_num(raw - bias, nan=0.0), 0.0, 1.0)
        lower = mass_p * fraction
        pmf[:-1] += lower
        pmf[1:] += mass_p - lower
        pmf[0] += fp[0]
        # Above the grid the profile is cut flat at δ(top): Q-mass e^{top}·Q[L > top]
        # stays at the top point, the rest of P[L > top] goes to +∞.
        top_p, top_q = float(sp[-1]), float(sq[-1])
        at_top = 0.0
        if top_p > 0 and top_q > 0:
            exponent_top = float(points[-1]) + math.log(top_q) - math.log(top_p)
            share = math.exp(min(exponent_top, 0.0))
            bias_top = float(_split_bias(np.array(top_p), np.array(top_q), points[-1:])[0])
            at_top = top_p * max(0.0, min(1.0, share * (1 - bias_top)))
        pmf[-1] += at_top
        infinity = top_p - at_top
    else:
        pmf = _merged_down(loss, points, h)
        first -= 1
    shift = 64 * ULP * (1 + max(abs(lo), abs(hi)) + loss.scale)
    # Masses telescope to within 2·_CDF_ERROR of the exact CDF; where the two tails'
    # differences meet, and where an uncertified window moves a point down, up to 8.
    return GridPLD(h, first, pmf, infinity, 8 * _CDF_ERROR, shift, pessimistic)


def _merged_down(loss: LossCDF, points: np.ndarray, h: float) -> np.ndarray:
    """The optimistic pmf: each window's outputs merged, then its loss rounded down.

    Merging the outputs whose loss lies in W_j = (a_j − h/2 + c, a_j + h/2 + c]
    is post-processing, so the merged pair is dominated by the mechanism; its
    loss there is ln(P[W_j]/Q[W_j]), which lies in W_j. Rounding each merged
    loss down to a grid point keeps it dominated (coupling). The merged loss
    sits near a_j + c (its offset from the window's centre is O(h²)), so it
    goes to a_j when certified >= a_j, else to a_{j−1}, which is below the
    window. With c = h/64 a step loses about h/64 of loss instead of the h/2 of
    plain rounding down. Mass below the lowest window is dropped; mass above
    the highest goes to its point. The pmf returned starts one grid point below
    ``points``.
    """
    offset = h / 64
    bounds = np.concatenate([points - h / 2, points[-1:] + h / 2]) + offset
    fp, sp, fq, sq = loss.cdf(bounds)
    window_p, window_q = _interval_masses(fp, sp), _interval_masses(fq, sq)
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.log(window_p) - np.log(window_q) - points
        error = _split_bias(window_p, window_q, points)
        certified = np.isfinite(error) & (error < h / 2) & (excess >= error)
    # One point below the grid takes the lowest window when it is not certified.
    pmf = np.concatenate([[0.0], np.where(certified, window_p, 0.0)])
    pmf[:-1] += np.where(certified, 0.0, window_p)
    pmf[-1] += sp[-1]
    return pmf


def _truncate(pld: GridPLD, tail: float) -> GridPLD:
    """Cut tails holding at most ``tail`` mass each, in the PLD's own direction."""
    pmf = pld.pmf
    if pmf.size <= 2:
        return pld
    left = np.cumsum(pmf)
    right = np.cumsum(pmf[::-1])[::-1]
    start = int(np.searchsorted(left, tail, side="right"))
    stop = pmf.size - int(np.searchsorted(right[::-1], tail, side="right"))
    start, stop = min(start, pmf.size - 1), max(stop, start + 1)
    kept = pmf[start:stop].copy()
    below = float(pmf[:start].sum())
    above = float(pmf[stop:].sum())
    infinity = pld.infinity
    if pld.pessimistic:
        kept[0] += below
        infinity += above
    else:
        kept[-1] += above
    return GridPLD(pld.h, pld.offset + start, kept, infinity, pld.error, pld.shift, pld.pessimistic)


def _combine_infinity(a: float, b: float, pessimistic: bool) -> float:
    """1 − (1 − a)(1 − b), the +∞ mass of a composition, rounded in the PLD's direction."""
    value = a + b - a * b
    return min(1.0, value * (1 + 4 * ULP)) if pessimistic else max(0.0, value * (1 - 4 * ULP))


def _fft_size(size: int) -> int:
    """The power of two >= ``size``: Higham's error bound is for radix-2 FFTs."""
    return 1 << max(0, size - 1).bit_length()


def _wide(pmf: np.ndarray) -> np.ndarray:
    """The pmf in long double: FFT rounding error is what bounds the δ of long compositions."""
    return pmf.astype(np.longdouble)


def convolve(a: GridPLD, b: GridPLD, tail: float) -> GridPLD:
    size = a.pmf.size + b.pmf.size - 1
    n = _fft_size(size)
    spectrum = scipy.fft.rfft(_wide(a.pmf), n) * scipy.fft.rfft(_wide(b.pmf), n)
    out = np.maximum(scipy.fft.irfft(spectrum, n)[:size].astype(np.float64), 0.0)
    norms = np.linalg.norm(a.pmf) + np.linalg.norm(b.pmf) + 2 * np.linalg.norm(out)
    # + the rounding of the result to float64, relative u per entry.
    fft_error = _FFT_GAMMA * math.log2(n) * math.sqrt(n) * float(norms) + 2 * ULP
    composed = GridPLD(
        a.h,
        a.offset + b.offset,
        out,
        _combine_infinity(a.infinity, b.infinity, a.pessimistic),
        a.error + b.error + fft_error,
        a.shift + b.shift,
        a.pessimistic,
    )
    return _truncate(composed, tail)


def _chernoff_range(pld: GridPLD, count: int, tail: float) -> tuple[int, int]:
    """Grid indices [lo, hi] outside which the ``count``-fold sum has mass <= ``tail`` per side.

    P[S > s] <= M(λ)^count e^{−λs} for every λ > 0, with M the moment
    generating function of one finite loss (and symmetrically below); the
    best λ of a geometric grid is used.
    """
    losses = pld.losses()
    with np.errstate(divide="ignore"):
        log_p = np.log(pld.pmf)
    log_tail = math.log(tail)
    lambdas = np.geomspace(1e-3, 1e4, 81)
    finite = np.isfinite(log_p)
    log_p, losses = log_p[finite], losses[finite]
    first = count * pld.offset
    if not log_p.size:
        return first, first

    def reach(sign: float) -> float:
        best = math.inf
        for lam in lambdas:
            log_m = log_sum_exp(log_p + sign * lam * losses)
            best = min(best, (count * log_m - log_tail) / lam)
        return best

    last = count * (pld.offset + pld.pmf.size - 1)
    lo = max(first, math.floor(-reach(-1.0) / pld.h))
    hi = min(last, math.ceil(reach(1.0) / pld.h))
    return lo, max(hi, lo)


def self_compose(pld: GridPLD, count: int, tail: float) -> GridPLD:
    """``count``-fold composition: one FFT, a power, one inverse FFT (circular).

    The circular array covers the Chernoff range of the sum, so the mass that
    wraps around is <= 2·``tail``; it and the mass outside the range (<= tail
    above) are added to the error bound, as is the FFT error: a Fourier
    coefficient's error grows at most ``count``-fold under the power, since
    every coefficient of a sub-probability vector has modulus <= 1.
    """
    if count == 1:
        return pld
    lo, hi = _chernoff_range(pld, count, tail)
    n = _fft_size(max(hi - lo + 1, pld.pmf.size))
    if n > _MAX_POINTS:
        raise GridTooLargeError(
            f"composing this event {count} times needs {n} grid points (limit {_MAX_POINTS}); "
            "use a coarser value_discretization_interval"
        )
    spectrum = scipy.fft.rfft(_wide(pld.pmf), n)
    circular = scipy.fft.irfft(spectrum**count, n).astype(np.float64)
    # Position p holds the sums of grid indices ≡ p (mod n); pick those in [lo, lo + n).
    shift = (lo - count * pld.offset) % n
    out = np.maximum(np.roll(circular, -shift)[: hi - lo + 1], 0.0)
    log_n = math.log2(n)
    l2_in, l2_out = float(np.linalg.norm(pld.pmf)), float(np.linalg.norm(out))
    fft_error = (
        math.sqrt(n)
        * (
            count * _FFT_GAMMA * log_n * l2_in
            + (_FFT_GAMMA * log_n + 2 * count * _FFT_UNIT) * l2_out
        )
        + 2 * ULP
    )
    infinity = -math.expm1(count * math.log1p(-pld.infinity)) if pld.infinity < 1 else 1.0
    infinity = min(1.0, infinity * (1 + 8 * ULP)) if pld.pessimistic else infinity * (1 - 8 * ULP)
    error = count * pld.error + fft_error + 3 * tail
    composed = GridPLD(pld.h, lo, out, infinity, error, count * pld.shift, pld.pessimistic)
    return _truncate(composed, tail)
