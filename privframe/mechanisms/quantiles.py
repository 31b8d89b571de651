"""Private quantiles: the exponential mechanism over a public grid of candidates.

For a group whose bounded rows have values v (clipped to [L, U]) and N
candidates c_0 = L < ... < c_{N−1} = U, candidate i has the rank interval
[a_i, b_i] = [#{v < c_i}, #{v <= c_i}] and distance
d_i = max(0, a_i − q·n, q·n − b_i) from the target rank q·n (n rows): 0 when
some ordering of the tied values puts c_i at rank q·n. The mechanism returns
candidate i with probability ∝ exp(−η·d_i) (McSherry & Talwar 2007; Smith 2011
for quantiles). Counting ties matters: with all values on one candidate, the
distance |#{v < c_i} − q·n| alone would be the same for every candidate.

**Privacy.** Adding a unit that keeps w <= m rows in a group moves a_i − q·n
by a_i's increase (in [0, w]) minus q·w, so by an amount in [−q·w, (1 − q)·w],
and q·n − b_i likewise within [−(1 − q)·w, q·w]; max(0, x, y) moves by at most
the larger move of x and y, so every d_i changes by at most max(q, 1 − q)·w,
and the log-probability ratio of any two outputs moves within an interval of
width 2·η·max(q, 1 − q)·w. The mechanism is therefore
ε_g-bounded-range with ε_g = 2·η·max(q, 1 − q)·w (Durfee & Rogers 2019), and
an ε-bounded-range mechanism is ε²/8-zCDP (Cesar & Rogers 2021, "Bounding,
concentrating, and truncating", Lemma 3.4). Over the unit's groups the costs
add: ρ = (η·max(q, 1 − q))²·Σ_g w_g²/2 <= (η·max(q, 1 − q))²·S/2, with S the
planner's bound on Σ_g w_g². :func:`scale` inverts this, rounding η down.
An ε-bounded-range mechanism is also ε-DP, so under pure DP the costs add as
ε = 2·η·max(q, 1 − q)·Σ_g w_g <= 2·η·max(q, 1 − q)·W, with W the planner's
bound on Σ_g w_g (:func:`epsilon_cost`, inverted by :func:`epsilon_scale`).

**Accuracy.** With probability at least 1 − β the output's distance exceeds
the best candidate's by at most (ln N + ln(1/β))/η rows (the exponential
mechanism's utility theorem); :func:`rank_error` states it.

**Exactness.** Distances are computed exactly (q·n as a rational number) and
the sampler (:func:`privframe.mechanisms.noise.exponential_choice`) draws with exact
probabilities, so no floating-point rounding reaches the distribution.

Example:
    >>> import numpy as np
    >>> from privframe.mechanisms.quantiles import scale, choose
    >>> eta = scale(rho=0.5, q=0.5, squares=1)
    >>> eta
    2.0
    >>> # 5 candidates; 10 rows strictly between each neighbouring pair:
    >>> hist = np.array([[0, 10, 0, 10, 0, 10, 0, 10, 0]])
    >>> int(choose(hist, 0.5, 64.0)[0])  # the middle candidate has rank 20 of 40
    2
    >>> int(choose(np.array([[0, 0, 0, 0, 40, 0, 0, 0, 0]]), 0.5, 64.0)[0])  # all tied on c_2
    2
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privframe.errors import InvalidValueError
from privframe.mechanisms.exponential import exponential_choice
from privframe.mechanisms.randomness import Randomness
from privframe.numeric import check_positive

__all__ = ["MAX_SCALE", "choose", "cost", "epsilon_cost", "epsilon_scale", "rank_error", "scale"]

MAX_SCALE = 64.0
"""The largest η used: beyond it a release is already all but deterministic, and a
bounded η keeps the float distances within the sampler's proven margin."""


def cost(eta: float, q: float, squares: int) -> Fraction:
    """The exact ρ of releasing one quantile over all groups: (η·max(q, 1 − q))²·S/2.

    Example:
        >>> from privframe.mechanisms.quantiles import cost
        >>> cost(2.0, 0.5, 1)
        Fraction(1, 2)
    """
    spread = Fraction(eta) * max(Fraction(q), 1 - Fraction(q))
    return spread * spread * squares / 2


def scale(rho: float, q: float, squares: int) -> float:
    """The largest float η <= :data:`MAX_SCALE` whose :func:`cost` is at most ``rho``.

    Raises:
        InvalidValueError: that η would be below 2^-500: the choice would be
            uniform to any precision that matters.

    Example:
        >>> from privframe.mechanisms.quantiles import scale
        >>> scale(rho=0.02, q=0.9, squares=4)
        0.1111111111111111
    """
    rho = check_positive("rho", rho)
    spread = max(q, 1 - q)
    budget = Fraction(rho)
    # η² = 2ρ/(S·spread²), in exact arithmetic: the float quotient can underflow.
    exact_square = 2 * budget / (squares * Fraction(spread) ** 2)
    if exact_square < Fraction(1, 1 << 1000):
        raise InvalidValueError(
            "the contribution limits are too large for a quantile at this rho: its choice "
            "would be all but uniform; use smaller limits or a larger rho"
        )
    eta = min(MAX_SCALE, math.sqrt(float(exact_square)))
    while eta > 0 and cost(eta, q, squares) > budget:
        eta = math.nextafter(eta, 0.0)
    while eta < MAX_SCALE and cost(up := math.nextafter(eta, math.inf), q, squares) <= budget:
        eta = up
    return eta


def epsilon_cost(eta: float, q: float, rows: int) -> Fraction:
    """The exact pure-DP ε of releasing one quantile over all groups: 2·η·max(q, 1 − q)·W.

    Example:
        >>> from privframe.mechanisms.quantiles import epsilon_cost
        >>> epsilon_cost(2.0, 0.5, 3)
        Fraction(6, 1)
    """
    return 2 * Fraction(eta) * max(Fraction(q), 1 - Fraction(q)) * rows


def epsilon_scale(epsilon: float, q: float, rows: int) -> float:
    """The largest float η <= :data:`MAX_SCALE` whose :func:`epsilon_cost` is at most ``epsilon``.

    Raises:
        InvalidValueError: that η would be below 2^-500 (a uniform choice).

    Example:
        >>> from privframe.mechanisms.quantiles import epsilon_scale
        >>> epsilon_scale(epsilon=0.5, q=0.5, rows=1)
        0.5
    """
    epsilon = check_positive("epsilon", epsilon)
    budget = Fraction(epsilon)
    exact_eta = budget / (2 * max(Fraction(q), 1 - Fraction(q)) * rows)
    if exact_eta < Fraction(1, 1 << 500):
        raise InvalidValueError(
            "the contribution limits are too large for a quantile at this epsilon: its choice "
            "would be all but uniform; use smaller limits or a larger epsilon"
        )
    eta = min(MAX_SCALE, float(exact_eta))
    while eta > 0 and epsilon_cost(eta, q, rows) > budget:
        eta = math.nextafter(eta, 0.0)
    return eta


def rank_error(eta: float, candidates: int, probability: float = 0.95) -> float:
    """Rows by which the output's rank distance exceeds the best candidate's, at ``probability``.

    (ln N + ln(1/(1 − probability)))/η, from public parameters only.

    Example:
        >>> from privframe.mechanisms.quantiles import rank_error
        >>> round(rank_error(2.0, 1001), 2)
        4.95
    """
    return (math.log(candidates) - math.log1p(-probability)) / eta


def choose(
    hist: npt.NDArray[np.int64], q: float, eta: float, rng: Randomness | None = None
) -> npt.NDArray[np.int64]:
    """Per group (row of ``hist``), the index of the released candidate.

    ``hist[g, p]`` counts group g's rows at position p (2N − 1 positions: 2i
    on candidate i, 2i − 1 strictly between candidates i − 1 and i), so
    a_i = hist[g, :2i].sum(), b_i = hist[g, :2i + 1].sum() and n = hist[g].sum().

    Per group, with t = q·n = ⌊t⌋ + f exactly, each distance is an integer k
    plus s·f with s ∈ {−1, 0, 1}: a_i − ⌊t⌋ − f when a_i > t, ⌊t⌋ − b_i + f when
    t > b_i, else 0. Subtracting the smallest, (k*, s*), leaves
    e_i = (k_i − k*) + (s_i − s*)·f >= 0: an integer plus at most 2f in size,
    so its float value is off by at most 2^-52 + 2^-53·e_i and η·e_i stays
    within the sampler's margin 2^-45·(1 + η·e_i) for η <= :data:`MAX_SCALE`.

    Example:
        >>> import numpy as np
        >>> from privframe.mechanisms.quantiles import choose
        >>> hist = np.array([[0, 1, 0, 1, 0, 1, 0, 1, 0], [0, 0, 0, 1, 0, 1, 0, 1, 1]])
        >>> choose(hist, 0.5, 64.0).tolist()
        [2, 3]
    """
    if not 0 < eta <= MAX_SCALE:
        raise InvalidValueError(
            f"eta must be in (0, {MAX_SCALE}] (the sampler's margin), got {eta}"
        )
    hist = np.asarray(hist, dtype=np.int64)
    groups, positions = hist.shape
    cumulative = np.cumsum(hist, axis=1)
    at_or_below = cumulative[:, 0::2]  # b_i: positions <= 2i
    below = np.zeros_like(at_or_below)  # a_i: positions < 2i
    below[:, 1:] = cumulative[:, 1::2]
    totals = cumulative[:, -1] if positions else np.zeros(groups, dtype=np.int64)
    q_exact = Fraction(q)
    eta_exact = Fraction(eta)
    x_hat = np.empty(at_or_below.shape, dtype=np.float64)
    parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Fraction]] = []
    for g in range(groups):
        target = q_exact * int(totals[g])
        whole = math.floor(target)
        frac = target - whole
        # In integers: a_i > t iff a_i > ⌊t⌋; b_i < t iff b_i < ⌊t⌋, or b_i = ⌊t⌋ < t.
        above = below[g] > whole  # the whole rank interval lies above t
        under = (at_or_below[g] < whole) | ((at_or_below[g] == whole) & (frac > 0))  # ... below
        k = np.where(above, below[g] - whole, np.where(under, whole - at_or_below[g], 0))
        s = np.where(above, -1, np.where(under, 1, 0))
        # The smallest distance, compared exactly (k + s·f for each sign class).
        _, k_best, s_best = min(
            (Fraction(int(k[cls].min())) + sign * frac, int(k[cls].min()), sign)
            for cls, sign in ((above, -1), (under, 1), (~(above | under), 0))
            if cls.any()
        )
        dk = k - k_best
        ds = s - s_best
        x_hat[g] = np.maximum(eta * (dk + ds * float(frac)), 0.0)
        parts.append((dk, ds, frac))

    def exact_x(g: int, i: int) -> Fraction:
        dk, ds, frac = parts[g]
        return eta_exact * (int(dk[i]) + int(ds[i]) * frac)

    return exponential_choice(x_hat, exact_x, rng)
