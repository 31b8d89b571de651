"""Privacy-loss-distribution (PLD) accounting of mechanism events.

:class:`PLDAccountant` replays :mod:`privframe.accounting.events` through their privacy
loss distributions (Koskela, Jälkö & Honkela 2020; Koskela & Honkela 2021;
Gopi, Lee & Wutschitz 2021; Doroshenko, Ghazi, Kamath, Kumar & Manurangsi
2022), which compose by convolution and give (ε, δ) far tighter than Rényi
accounting for many subsampled steps.

The privacy loss of a mechanism on neighbours D, D' is L = ln(P(o)/Q(o)) with
o ~ P = M(D), Q = M(D'); its privacy profile is
δ(ε) = P[L = ∞] + E_P[(1 − e^{ε−L})₊]. A pair (P̃, Q̃) whose profile is >= the
mechanism's at every ε (positive and negative) *dominates* it, and the
product of dominating pairs dominates the adaptive composition (Zhu, Dong &
Wang 2022, "Optimal Accounting of Differential Privacy via Characteristic
Function", Def. 4 and Thm. 10). Under add/remove neighbours both directions
(D' = D − x and D' = D + x) are tracked, and δ is the larger of the two.

**Events with a PLD.**

* Continuous Gaussian with noise multiplier z = σ/Δ: L ~ N(μ²/2, μ²) under P,
  μ = 1/z, in both directions. Gaussians compose *exactly* into one with
  μ² = Σ μᵢ², so a composition of Gaussians alone is evaluated in closed form
  on the μ-GDP curve (Dong, Roth & Su 2022, Cor. 2.13; Balle & Wang 2018,
  Thm. 8) with no discretisation at all.
* Poisson-subsampled Gaussian (sampling probability q, effective multiplier
  σ): remove direction P = (1−q)N(0, σ²) + qN(1, σ²), Q = N(0, σ²), and the add
  direction with P and Q swapped; the loss is monotone in the output, so its
  CDF is a mixture of normal CDFs at one threshold.
* :class:`~privframe.accounting.events.ThresholdEvent` with ρ = 0 (a δ spent outright):
  the pair with loss ∞ w.p. δ and 0 otherwise, so the composition has
  δ_total(ε) <= δ₀ + δ_PLD(ε).

**Discretisation: a certified bracket.** Losses live on the grid h·ℤ
(``value_discretization_interval``). Two discretisations are computed:

* *pessimistic* (the reported value): the "connect the dots" PLD of
  Doroshenko et al. 2022, whose profile interpolates the exact one linearly in
  e^ε between grid points. The profile is convex in e^ε, so the chord lies
  above it: the discretised pair dominates the mechanism, by construction.
  Each interval's probability mass is split between its two end points in
  proportion to where its likelihood ratio lies; the mass below the grid goes
  to its lowest point and the mass above it to the top point and to +∞.
* *optimistic*: the outputs whose loss falls in each window
  (a − h/2 + h/64, a + h/2 + h/64] are merged (post-processing, so the merged
  pair is dominated by the mechanism), and each merged loss, which lies near
  a + h/64, is rounded *down* to a when certified >= a, else to the point
  below. Its δ(ε) is <= the exact one; a step loses about h/64 of loss where
  losses spread over many grid points, and up to h where a step's loss is
  concentrated within one grid step (very small q).

Tails of a composition whose mass is below ``tail_mass`` are cut the same
way: into +∞ (or the lowest kept point) for the pessimistic PLD, onto the
highest kept point (or dropped) for the optimistic one. The exact ε lies in
``epsilon_bounds(δ)``; its width is the stated discretisation error.

**Floating point.** Every PLD carries two bounds, applied to δ in the
safe direction (added for the pessimistic PLD, subtracted for the optimistic):

* an error in Kolmogorov (sup-CDF) distance. δ(ε) = E[g(L)] with g monotone
  and in [0, 1], so it moves δ by at most that much, and convolving with a
  sub-probability does not increase it, so a k-fold composition has at most k
  times the error of one step. Per step: the normal CDFs' rounding (each CDF
  value within 8 ulps; interval masses telescope). Per FFT (power-of-two
  lengths, run in long double): Higham, "Accuracy and Stability of Numerical
  Algorithms", 2nd ed., §24.1, 10·u·log₂N relative ℓ₂ error per transform,
  with √N from ℓ₂ to ℓ₁, and the mass cut or wrapped around at the tails.
* a location error: how far from its grid point, in loss, rounding evaluated
  each CDF; it adds up under composition and shifts ε by at most that much.

The connect-the-dots split is lowered by its own rounding error bound, so it
can only move mass up. For 1,000 DP-SGD steps the δ error is ~1.5e-11.

**Events without a proven PLD.** The discrete Gaussian's privacy profile is
known only for one dimension and integer sensitivity (Canonne, Kamath &
Steinke 2020, Thm. 7), while privframe's releases are vectors with an L2
bound; what is proven for them is ρ-zCDP (their Rényi divergences are at most
the continuous Gaussian's). A :class:`~privframe.accounting.events.ZCDPEvent` or the
noisy counts of a :class:`~privframe.accounting.events.ThresholdEvent` with ρ > 0 are
likewise known only through ρ, and a Poisson-subsampled discrete Gaussian only
through Zhu & Wang's general subsampled-RDP bound
(:func:`privframe.accounting.rdp.poisson_rdp_general`). There is no dominating pair for
"some ρ-zCDP mechanism" whose compositions stay ρ-zCDP, so such events cannot
be mixed into a PLD soundly. When the events include any, the accountant says
so in :attr:`PLDAccountant.fallback` and reports a bound that is valid: the
zCDP conversion of the total ρ when nothing is subsampled (every event, plain
Gaussians included, has a ρ), otherwise the Rényi accountant over all events.

Example:
    >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
    >>> acct = PLDAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 1000)
    >>> lower, upper = acct.epsilon_bounds(1e-5)
    >>> lower <= upper == acct.epsilon(1e-5)
    True
    >>> round(upper, 2)
    1.52
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import fft, special

from privframe.accounting._numbers import (
    ULP,
    check_conversion_delta,
    check_nonnegative,
    check_positive,
    conversion_slack,
    round_up,
    sqrt_down,
    sqrt_up,
)
from privframe.accounting.budgets import GDP, mu_estimate, zCDP
from privframe.accounting.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ThresholdEvent,
    ZCDPEvent,
    _check_count,
)
from privframe.accounting.rdp import RDPAccountant, _effective_noise_multiplier, _log_sum_exp
from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = ["PLDAccountant", "mu_estimate"]

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
which the CDF was evaluated, which :attr:`_LossCDF.scale` covers.
"""

_MAX_COUNT = 2**40
"""Most repetitions of one subsampled event (the FFT power's exponent)."""

_MAX_POINTS = 2**22
"""Largest PLD support accepted (64 MiB per long-double array, ~1 s per FFT power)."""


# ---------------------------------------------------------------------------
# Loss CDFs of the events with a PLD
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _LossCDF:
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


def _gaussian_loss(mu: float) -> _LossCDF:
    mean, sd = mu * mu / 2, mu

    def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
        zp = (eps - mean) / sd
        zq = (eps + mean) / sd
        return special.ndtr(zp), special.ndtr(-zp), special.ndtr(zq), special.ndtr(-zq)

    def loss_range(tail: float) -> tuple[float, float]:
        z = -float(special.ndtri(tail))
        return mean - z * sd, mean + z * sd

    return _LossCDF(cdf, loss_range, mean + 40 * sd)


def _sampled_loss(q: float, sigma: float, *, remove: bool) -> _LossCDF:
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
        return (1 - q) * special.ndtr(sign * y / sigma) + q * special.ndtr(sign * (y - 1) / sigma)

    if remove:

        def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
            y = threshold(eps)
            z = y / sigma
            return mixture(y, False), mixture(y, True), special.ndtr(z), special.ndtr(-z)

        def loss_range(tail: float) -> tuple[float, float]:
            z = -float(special.ndtri(tail))
            return psi(-sigma * z), psi(1 + sigma * z)

    else:

        def cdf(eps: np.ndarray) -> tuple[np.ndarray, ...]:
            # −ψ(y) <= ε  ⇔  ψ(y) >= −ε  ⇔  y >= threshold(−ε).
            y = threshold(-eps)
            z = y / sigma
            return special.ndtr(-z), special.ndtr(z), mixture(y, True), mixture(y, False)

        def loss_range(tail: float) -> tuple[float, float]:
            z = -float(special.ndtri(tail))
            return -psi(sigma * z), -psi(-sigma * z)

    return _LossCDF(cdf, loss_range, (2 + 40 * sigma) / var + abs(log_q))


# ---------------------------------------------------------------------------
# Discretised PLDs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _PLD:
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


class _GridTooLargeError(InvalidValueError):
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


def _discretize(loss: _LossCDF, h: float, tail: float, *, pessimistic: bool) -> _PLD:
    lo, hi = loss.range(tail)
    # The top point lies strictly above hi, so P[L > top] <= tail even when hi rounds to 0.
    first, last = math.floor(lo / h), math.floor(hi / h) + 1
    if last - first + 1 > _MAX_POINTS:
        raise _GridTooLargeError(
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
    return _PLD(h, first, pmf, infinity, 8 * _CDF_ERROR, shift, pessimistic)


def _merged_down(loss: _LossCDF, points: np.ndarray, h: float) -> np.ndarray:
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


def _truncate(pld: _PLD, tail: float) -> _PLD:
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
    return _PLD(pld.h, pld.offset + start, kept, infinity, pld.error, pld.shift, pld.pessimistic)


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


def _convolve(a: _PLD, b: _PLD, tail: float) -> _PLD:
    size = a.pmf.size + b.pmf.size - 1
    n = _fft_size(size)
    spectrum = fft.rfft(_wide(a.pmf), n) * fft.rfft(_wide(b.pmf), n)
    out = np.maximum(fft.irfft(spectrum, n)[:size].astype(np.float64), 0.0)
    norms = np.linalg.norm(a.pmf) + np.linalg.norm(b.pmf) + 2 * np.linalg.norm(out)
    # + the rounding of the result to float64, relative u per entry.
    fft_error = _FFT_GAMMA * math.log2(n) * math.sqrt(n) * float(norms) + 2 * ULP
    composed = _PLD(
        a.h,
        a.offset + b.offset,
        out,
        _combine_infinity(a.infinity, b.infinity, a.pessimistic),
        a.error + b.error + fft_error,
        a.shift + b.shift,
        a.pessimistic,
    )
    return _truncate(composed, tail)


def _chernoff_range(pld: _PLD, count: int, tail: float) -> tuple[int, int]:
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
            log_m = _log_sum_exp(log_p + sign * lam * losses)
            best = min(best, (count * log_m - log_tail) / lam)
        return best

    last = count * (pld.offset + pld.pmf.size - 1)
    lo = max(first, math.floor(-reach(-1.0) / pld.h))
    hi = min(last, math.ceil(reach(1.0) / pld.h))
    return lo, max(hi, lo)


def _self_compose(pld: _PLD, count: int, tail: float) -> _PLD:
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
        raise _GridTooLargeError(
            f"composing this event {count} times needs {n} grid points (limit {_MAX_POINTS}); "
            "use a coarser value_discretization_interval"
        )
    spectrum = fft.rfft(_wide(pld.pmf), n)
    circular = fft.irfft(spectrum**count, n).astype(np.float64)
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
    composed = _PLD(pld.h, lo, out, infinity, error, count * pld.shift, pld.pessimistic)
    return _truncate(composed, tail)


# ---------------------------------------------------------------------------
# The accountant
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Parts:
    """What a composition reduces to before any discretisation."""

    gaussian_inverse_square: Fraction  # Σ 1/z² over continuous Gaussians (exact composition)
    sampled: tuple[tuple[float, float, int], ...]  # (q, σ_effective, count), merged
    threshold_delta: float  # δ spent outright
    zcdp_rho: float  # ρ of the events known only through zCDP
    rdp_only: bool = False  # an event bounded only in RDP (a subsampled discrete Gaussian)

    def __add__(self, other: _Parts) -> _Parts:
        counts: dict[tuple[float, float], int] = {}
        for q, sigma, count in self.sampled + other.sampled:
            counts[(q, sigma)] = counts.get((q, sigma), 0) + count
        return _Parts(
            self.gaussian_inverse_square + other.gaussian_inverse_square,
            tuple((q, s, c) for (q, s), c in counts.items() if c),
            min(1.0, round_up(Fraction(self.threshold_delta) + Fraction(other.threshold_delta))),
            round_up(Fraction(self.zcdp_rho) + Fraction(other.zcdp_rho)),
            self.rdp_only or other.rdp_only,
        )

    def times(self, count: int) -> _Parts:
        return _Parts(
            self.gaussian_inverse_square * count,
            tuple((q, s, c * count) for q, s, c in self.sampled if c * count),
            min(1.0, round_up(Fraction(self.threshold_delta) * count)),
            round_up(Fraction(self.zcdp_rho) * count),
            self.rdp_only and count > 0,
        )


_EMPTY = _Parts(Fraction(0), (), 0.0, 0.0)


def _parts(event: Event) -> _Parts:
    if isinstance(event, GaussianEvent):
        if event.discrete:
            # Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020); no proven PLD for vectors.
            rho = round_up(1 / (2 * Fraction(event.noise_multiplier) ** 2))
            return _Parts(Fraction(0), (), 0.0, rho)
        return _Parts(1 / Fraction(event.noise_multiplier) ** 2, (), 0.0, 0.0)
    if isinstance(event, PoissonSampledEvent):
        sigma, discrete = _effective_noise_multiplier(event.event)
        q = event.sampling_probability
        if math.isinf(sigma) or q == 0:
            return _EMPTY
        if discrete:
            # Subsampled discrete noise: only Zhu & Wang's general RDP bound is proven.
            return _Parts(Fraction(0), (), 0.0, 0.0, rdp_only=True)
        if q == 1:
            return _Parts(1 / Fraction(sigma) ** 2, (), 0.0, 0.0)
        return _Parts(Fraction(0), ((q, sigma, 1),), 0.0, 0.0)
    if isinstance(event, ThresholdEvent):
        return _Parts(Fraction(0), (), event.delta, event.rho)
    if isinstance(event, ZCDPEvent):
        return _Parts(Fraction(0), (), 0.0, event.rho)
    if isinstance(event, SelfComposedEvent):
        return _parts(event.event).times(event.count)
    if isinstance(event, ComposedEvent):
        total = _EMPTY
        for sub in event.events:
            total = total + _parts(sub)
        return total
    raise InvalidArgumentError(f"event must be a privframe event, got {type(event).__name__}")


class PLDAccountant:
    """Privacy-loss-distribution accountant over privframe events.

    See the module docstring for the construction and its error statement.

    Args:
        value_discretization_interval: the loss grid h, 0 < h <= 1 (default
            1e-4, as dp_accounting). The discretisation error shrinks with h;
            memory and time grow as 1/h.
        tail_mass: mass cut from each tail of every PLD (pessimistically),
            0 < tail_mass < 1e-6 (default 1e-15).

    Raises:
        InvalidValueError: an interval or a tail mass out of range.

    Example:
        >>> from privframe.accounting.events import GaussianEvent
        >>> acct = PLDAccountant().compose(GaussianEvent(2.0), count=4)
        >>> acct.epsilon(1e-5) == GDP(1.0).epsilon(1e-5)  # exact: μ = sqrt(4/2²)
        True
        >>> acct.mu_estimate(1e-5) == 1.0
        True
    """

    def __init__(
        self, value_discretization_interval: float = 1e-4, *, tail_mass: float = 1e-15
    ) -> None:
        self._h = check_positive("value_discretization_interval", value_discretization_interval)
        if self._h > 1:
            raise InvalidValueError(
                f"value_discretization_interval must be <= 1, got {value_discretization_interval!r}"
            )
        self._tail = check_positive("tail_mass", tail_mass)
        if self._tail >= 1e-6:
            raise InvalidValueError(f"tail_mass must be < 1e-6, got {tail_mass!r}")
        self._parts = _EMPTY
        self._events: list[Event] = []
        self._cache: dict[bool, tuple[_PLD, _PLD] | None] = {}

    @property
    def value_discretization_interval(self) -> float:
        """The loss grid h."""
        return self._h

    @property
    def events(self) -> tuple[Event, ...]:
        """The events composed so far, in order (``count > 1`` as a SelfComposedEvent)."""
        return tuple(self._events)

    @property
    def fallback(self) -> str | None:
        """Why the (ε, δ) is not a PLD bound, or None when it is.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0, discrete=True)).fallback
            'zcdp'
        """
        parts = self._parts
        if parts.zcdp_rho == 0 and not parts.rdp_only:
            return None
        # Without subsampled events every event has a ρ, and the zCDP conversion of
        # their total is the tightest bound both methods know.
        if not parts.sampled and not parts.rdp_only:
            return "zcdp"
        return "rdp"

    def compose(self, event: Event, count: int = 1) -> PLDAccountant:
        """Add ``count`` repetitions of ``event``; returns this accountant.

        Raises:
            InvalidArgumentError: ``event`` is not an event or ``count`` not an int.
            InvalidValueError: a negative count, a Poisson-subsampled event other
                than (composed) Gaussians, or one subsampled event composed more
                than 2^40 times; nothing is composed then.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0), 3).events[0].count
            3
        """
        if not isinstance(event, Event):
            raise InvalidArgumentError(
                f"event must be a privframe event, got {type(event).__name__}"
            )
        count = _check_count("count", count)
        parts = self._parts + _parts(event).times(count)
        for q, sigma, total in parts.sampled:
            if total > _MAX_COUNT:
                raise InvalidValueError(
                    f"the PLD accountant composes a subsampled event at most 2^40 times, got "
                    f"{total} of (q={q!r}, sigma={sigma!r}); use RDP accounting"
                )
        self._parts = parts
        self._events.append(event if count == 1 else SelfComposedEvent(event, count))
        self._cache.clear()
        return self

    # -- PLDs -----------------------------------------------------------------

    def _plds(self, pessimistic: bool) -> tuple[_PLD, _PLD] | None:
        """The (remove, add) PLDs of the events with a PLD; None if only Gaussians."""
        if pessimistic in self._cache:
            return self._cache[pessimistic]
        parts = self._parts
        result: tuple[_PLD, _PLD] | None = None
        if parts.sampled:
            directions = []
            for remove in (True, False):
                pld: _PLD | None = None
                for q, sigma, count in parts.sampled:
                    step = _discretize(
                        _sampled_loss(q, sigma, remove=remove),
                        self._h,
                        self._tail,
                        pessimistic=pessimistic,
                    )
                    composed = _self_compose(step, count, self._tail)
                    pld = composed if pld is None else _convolve(pld, composed, self._tail)
                if parts.gaussian_inverse_square:
                    gaussian = _discretize(
                        _gaussian_loss(self._gaussian_mu(pessimistic)),
                        self._h,
                        self._tail,
                        pessimistic=pessimistic,
                    )
                    pld = _convolve(pld, gaussian, self._tail)
                directions.append(pld)
            result = (directions[0], directions[1])
        self._cache[pessimistic] = result
        return result

    def _gaussian_mu(self, pessimistic: bool) -> float:
        """μ of the merged Gaussians, rounded in the bound's direction."""
        inverse_square = self._parts.gaussian_inverse_square
        return sqrt_up(inverse_square) if pessimistic else sqrt_down(inverse_square)

    def _zcdp(self) -> zCDP:
        """Every event's ρ added up (continuous Gaussians: 1/(2z²)), with the δ spent outright."""
        parts = self._parts
        rho = round_up(Fraction(parts.zcdp_rho) + parts.gaussian_inverse_square / 2)
        # Fractions: computed floats at their exact value (zCDP reads a float as its decimal).
        return zCDP(Fraction(rho), Fraction(parts.threshold_delta))

    def _rdp(self) -> RDPAccountant:
        rdp = RDPAccountant()
        for event in self._events:
            rdp.compose(event)
        return rdp

    def _pld_epsilon(self, delta: float, pessimistic: bool) -> float:
        parts = self._parts
        if pessimistic:
            # δ_total(ε) = δ₀ + (1 − δ₀)·δ_PLD(ε) <= δ₀ + δ_PLD(ε): δ − δ₀ suffices.
            residual = conversion_slack(delta, parts.threshold_delta)
        else:
            # The exact crossing is at δ_PLD = (δ − δ₀)/(1 − δ₀), rounded up for a lower ε.
            d0 = Fraction(parts.threshold_delta)
            residual = min(round_up((Fraction(delta) - d0) / (1 - d0)), delta)
        plds = self._plds(pessimistic)
        if plds is None:
            mu = self._gaussian_mu(pessimistic)
            eps = GDP(mu).epsilon(residual) if mu else 0.0
            if not pessimistic:
                # GDP.epsilon certifies upwards by a few ulps (relative) and ~1e-14 near
                # ε = 0 (absolute); a lower bound steps back by more than both.
                eps = max(0.0, eps * (1 - 1e-9) - 1e-12)
            return eps
        return max(pld.epsilon(residual) for pld in plds)

    def _check_delta(self, delta: float) -> float:
        delta = check_conversion_delta(delta)
        if not delta > self._parts.threshold_delta:
            raise InvalidValueError(
                f"delta={delta!r} must exceed the delta spent outright by threshold "
                f"events ({self._parts.threshold_delta!r})"
            )
        return delta

    def epsilon(self, delta: float) -> float:
        """Upper bound on ε such that everything composed is (ε, δ)-DP.

        The pessimistic PLD's ε (or, with :attr:`fallback`, the zCDP or Rényi
        bound), rounded up.

        Raises:
            InvalidBudgetError: δ not in (0, 1).
            InvalidValueError: δ not above the δ spent outright by threshold events.

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> step = PoissonSampledEvent(0.01, GaussianEvent(1.1))
            >>> round(PLDAccountant().compose(step, 1000).epsilon(1e-5), 3)
            1.515
        """
        delta = self._check_delta(delta)
        if self.fallback == "zcdp":
            return self._zcdp().epsilon(delta)
        if self.fallback == "rdp":
            return self._rdp().epsilon(delta)
        return self._pld_epsilon(delta, pessimistic=True)

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """(lower, upper): the exact ε of the composed events lies in between.

        ``upper`` is :meth:`epsilon`; ``lower`` is the optimistic PLD's ε. The
        width is the discretisation error at this δ (zero for Gaussians alone,
        up to rounding). The lower end rounds each step's merged losses down:
        over 10,000 steps at q = 0.01 the bracket is 0.016 wide, but where a
        step's loss sits within one grid step (q = 0.001, z = 0.8) it trails by
        up to h a step (the bracket is [0.60, 0.78] there). The upper end is the
        tight one.

        Raises:
            InvalidValueError: with a :attr:`fallback` (no PLD, so no lower bound).

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> acct = PLDAccountant().compose(PoissonSampledEvent(0.1, GaussianEvent(2.0)), 100)
            >>> lower, upper = acct.epsilon_bounds(1e-6)
            >>> 0 < upper - lower < 0.01
            True
        """
        delta = self._check_delta(delta)
        if self.fallback is not None:
            raise InvalidValueError(
                "no PLD bracket: the events include ones known only through zCDP "
                f"(accounted by {self.fallback})"
            )
        return self._pld_epsilon(delta, pessimistic=False), self._pld_epsilon(delta, True)

    def delta(self, epsilon: float) -> float:
        """Upper bound on δ such that everything composed is (ε, δ)-DP (at most 1).

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0)).delta(1.0) == GDP(1.0).delta(1.0)
            True
        """
        eps = check_nonnegative("epsilon", epsilon)
        parts = self._parts
        if self.fallback == "zcdp":
            return self._zcdp().delta_at(eps)
        if self.fallback == "rdp":
            return self._rdp().delta(eps)
        plds = self._plds(pessimistic=True)
        if plds is None:
            mu = self._gaussian_mu(pessimistic=True)
            value = GDP(mu).delta(eps) if mu else 0.0
        else:
            value = max(pld.delta(eps) for pld in plds)
        return min(1.0, round_up(Fraction(value) + Fraction(parts.threshold_delta)))

    def mu_estimate(self, delta: float) -> float:
        """The μ-GDP summary of this composition at δ (see :func:`mu_estimate`).

        Exact for continuous Gaussians alone; otherwise the μ of the Gaussian
        curve through (:meth:`epsilon` (δ), δ).

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> PLDAccountant().compose(GaussianEvent(0.5)).mu_estimate(1e-6)
            2.0
            >>> step = PoissonSampledEvent(0.01, GaussianEvent(1.1))
            >>> round(PLDAccountant().compose(step, 1000).mu_estimate(1e-5), 2)
            0.39
        """
        delta = self._check_delta(delta)
        parts = self._parts
        if self.fallback is None and not parts.sampled and parts.threshold_delta == 0:
            return self._gaussian_mu(pessimistic=True)
        return mu_estimate(self.epsilon(delta), delta)
