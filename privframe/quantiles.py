"""Private quantiles: the exponential mechanism over a public grid of candidates.

For a group whose bounded rows have values v (clipped to [L, U]) and N
candidates c_0 = L < ... < c_{N−1} = U, candidate i has rank r_i = #{v < c_i}
and distance d_i = |r_i − q·n| from the target rank (n rows). The mechanism
returns candidate i with probability ∝ exp(−η·d_i) (McSherry & Talwar 2007;
Smith 2011 for quantiles).

**Privacy.** Adding a unit that keeps w <= m rows in a group moves every
r_i − q·n by an amount in [−q·w, (1 − q)·w], so every d_i changes by at most
max(q, 1 − q)·w and the log-probability ratio of any two outputs moves within
an interval of width 2·η·max(q, 1 − q)·w. The mechanism is therefore
ε_g-bounded-range with ε_g = 2·η·max(q, 1 − q)·w (Durfee & Rogers 2019), and
an ε-bounded-range mechanism is ε²/8-zCDP (Cesar & Rogers 2021, "Bounding,
concentrating, and truncating", Lemma 3.4). Over the unit's groups the costs
add: ρ = (η·max(q, 1 − q))²·Σ_g w_g²/2 <= (η·max(q, 1 − q))²·S/2, with S the
planner's bound on Σ_g w_g². :func:`scale` inverts this, rounding η down.

**Accuracy.** With probability at least 1 − β the output's distance exceeds
the best candidate's by at most (ln N + ln(1/β))/η rows (the exponential
mechanism's utility theorem); :func:`rank_error` states it.

**Exactness.** Distances are computed exactly (q·n as a rational number) and
the sampler (:func:`privframe.noise.exponential_choice`) draws with exact
probabilities, so no floating-point rounding reaches the distribution.

Example:
    >>> import numpy as np
    >>> from privframe.quantiles import scale, choose
    >>> eta = scale(rho=0.5, q=0.5, squares=1)
    >>> eta
    2.0
    >>> hist = np.array([[10, 10, 10, 10, 0]])  # ranks of the candidates: 0, 10, 20, 30, 40
    >>> int(choose(hist, 0.5, 64.0)[0])  # rank 20 of 40 rows
    2
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privframe.accounting import _check_positive
from privframe.noise import Randomness, exponential_choice

__all__ = ["MAX_SCALE", "choose", "cost", "rank_error", "scale"]

MAX_SCALE = 64.0
"""The largest η used: beyond it a release is already all but deterministic, and a
bounded η keeps the float distances within the sampler's proven margin."""


def cost(eta: float, q: float, squares: int) -> Fraction:
    """The exact ρ of releasing one quantile over all groups: (η·max(q, 1 − q))²·S/2.

    Example:
        >>> from privframe.quantiles import cost
        >>> cost(2.0, 0.5, 1)
        Fraction(1, 2)
    """
    spread = Fraction(eta) * max(Fraction(q), 1 - Fraction(q))
    return spread * spread * squares / 2


def scale(rho: float, q: float, squares: int) -> float:
    """The largest float η <= :data:`MAX_SCALE` whose :func:`cost` is at most ``rho``.

    Example:
        >>> from privframe.quantiles import scale
        >>> scale(rho=0.02, q=0.9, squares=4)
        0.1111111111111111
    """
    rho = _check_positive("rho", rho)
    spread = max(q, 1 - q)
    eta = min(MAX_SCALE, math.sqrt(2 * rho / squares) / spread)
    while cost(eta, q, squares) > Fraction(rho):
        eta = math.nextafter(eta, 0.0)
    return eta


def rank_error(eta: float, candidates: int, probability: float = 0.95) -> float:
    """Rows by which the output's rank distance exceeds the best candidate's, at ``probability``.

    (ln N + ln(1/(1 − probability)))/η, from public parameters only.

    Example:
        >>> from privframe.quantiles import rank_error
        >>> round(rank_error(2.0, 1001), 2)
        4.95
    """
    return (math.log(candidates) - math.log1p(-probability)) / eta


def choose(
    hist: npt.NDArray[np.int64], q: float, eta: float, rng: Randomness | None = None
) -> npt.NDArray[np.int64]:
    """Per group (row of ``hist``), the index of the released candidate.

    ``hist[g, j]`` counts group g's rows with exactly j + 1 candidates at or
    below their value, so r_i = hist[g, :i].sum() and n = hist[g].sum().

    Per group, with t = q·n = ⌊t⌋ + f exactly and k_i = r_i − ⌊t⌋, the distance
    is d_i = k_i − f for k_i >= 1 and −k_i + f otherwise: an integer a_i plus
    s_i·f with s_i = ∓1. Subtracting the smallest one, (a*, s*), leaves
    e_i = (a_i − a*) + (s_i − s*)·f >= 0: an integer plus 0 or ±2f, so its float
    value is off by at most 2^-52 + 2^-53·e_i and η·e_i stays within the
    sampler's margin 2^-45·(1 + η·e_i) for η <= :data:`MAX_SCALE`.

    Example:
        >>> import numpy as np
        >>> from privframe.quantiles import choose
        >>> choose(np.array([[1, 1, 1, 1, 0], [0, 1, 1, 1, 1]]), 0.5, 64.0).tolist()
        [2, 3]
    """
    hist = np.asarray(hist, dtype=np.int64)
    groups, n_candidates = hist.shape
    ranks = np.zeros((groups, n_candidates), dtype=np.int64)
    np.cumsum(hist[:, :-1], axis=1, out=ranks[:, 1:])
    totals = hist.sum(axis=1)
    q_exact = Fraction(q)
    eta_exact = Fraction(eta)
    x_hat = np.empty((groups, n_candidates), dtype=np.float64)
    parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Fraction]] = []
    for g in range(groups):
        target = q_exact * int(totals[g])
        whole = math.floor(target)
        frac = target - whole
        k = ranks[g] - whole
        above = k >= 1
        a = np.abs(k)
        s = np.where(above, -1, 1)
        # The smallest distance: the least a on each side, compared exactly.
        best = min(
            (Fraction(int(a[side].min())) + int(sign) * frac, int(a[side].min()), int(sign))
            for side, sign in ((above, -1), (~above, 1))
            if side.any()
        )
        _, a_best, s_best = best
        da = a - a_best
        ds = s - s_best
        x_hat[g] = np.maximum(eta * (da + ds * float(frac)), 0.0)
        parts.append((da, ds, frac))

    def exact_x(g: int, i: int) -> Fraction:
        da, ds, frac = parts[g]
        return eta_exact * (int(da[i]) + int(ds[i]) * frac)

    return exponential_choice(x_hat, exact_x, rng)
