"""Splitting a release's ρ across its measurements: by weights, or to balance relative error.

Both splits start from the same model. Each measurement's noise variance is
Δ²/(2ρ_m), so every output's error is, to first order, ``Σ_m b_im/ρ_m`` with
``b_im >= 0`` fixed by public numbers (:meth:`Aggregate.balance_terms
<privframe.plan.aggregates.base.Aggregate.balance_terms>`).

By weights (the default, :func:`weighted_fractions`): minimise the outputs'
total variance, each output's taken relative to the least it could have with
the whole budget, ``V_i* = (Σ_m sqrt(b_im))²/ρ``, and weighted by ``w_i²``.
Minimising ``Σ_m a_m/ρ_m`` subject to ``Σ_m ρ_m = ρ`` has the closed form
``ρ_m ∝ sqrt(a_m)`` (Cauchy–Schwarz), here with ``a_m = Σ_i w_i² b_im/V_i*``.
Outputs that share no measurement get ρ in proportion to their weights; an
output alone gets its own optimum (a sum read as centred sum plus midpoint
times count has then the variance of a plain sum, docs/sensitivity.md).

Every output's error is a function of the noise of the measurements it reads,
and each measurement's noise variance is Δ²/(2ρ_m). With ``b_im`` scaled
by the user's guesses of each output's magnitude (:class:`Balance`), the
squared relative error of output i is ``r_i² = Σ_m b_im/ρ_m``. Balancing relative
error means choosing ρ_m >= 0 with Σ ρ_m = ρ to minimise ``max_i r_i``, a
convex problem (each 1/ρ_m is convex) that is homogeneous: scaling ρ scales
every r_i by the same factor, so the optimal *fractions* do not depend on ρ.
:func:`balanced_fractions` solves it.

The guesses are public inputs, like bounds: they must come from domain
knowledge or earlier releases, never from a look at the private data. A bad
guess only makes the split less useful; the privacy cost is ρ either way.

Example:
    >>> from privframe.plan.split import balanced_fractions
    >>> # Two outputs on separate measurements, the second needing 4x the variance:
    >>> [round(f, 3) for f in balanced_fractions([[1.0, 0.0], [0.0, 4.0]])]
    [0.2, 0.8]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy

from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import check_positive, check_real

__all__ = ["Balance", "balance", "balanced_fractions", "weighted_fractions"]

_FLOOR = 0.01
_GUESS_RANGE = (1e-100, 1e100)  # guesses outside it would under- or overflow when squared


@dataclass(frozen=True)
class Balance:
    """Split ρ so that every output has about the same relative error.

    Attributes:
        rows: the expected number of rows per group (after bounding), used
            for counts, means, variances and quantiles (a quantile's relative
            error is its rank error over the rows).
        expected: the expected value of each other output, by output name:
            needed for sums, means, variances, standard deviations and
            distinct counts (a count's is ``rows``).
    """

    rows: float
    expected: Mapping[str, float] = field(default_factory=dict)


def balance(rows: float, **expected: float) -> Balance:
    """Ask a release to balance relative error, from public guesses of the outputs' sizes.

    Pass it as ``weights=``: ``release(rho=1.0, weights=pf.balance(rows=500,
    amount_sum=20_000, amount_mean=40))``. ``explain`` shows the split and
    each output's expected relative error.

    Example:
        >>> import privframe as pf
        >>> pf.balance(rows=500, amount_mean=40.0)
        Balance(rows=500.0, expected={'amount_mean': 40.0})
    """
    checked = {}
    low, high = _GUESS_RANGE
    for name, value in expected.items():
        number = check_real(f"expected value of {name!r}", value)
        if not low <= abs(number) <= high:
            raise InvalidValueError(
                f"expected value of {name!r} must be nonzero (a relative error needs a size) "
                f"and within [{low:g}, {high:g}] in size, got {value!r}"
            )
        checked[name] = number
    count = check_positive("rows", rows)
    if not 1 <= count <= high:
        raise InvalidValueError(f"rows (per group) must be in [1, {high:g}], got {rows!r}")
    return Balance(count, checked)


def weighted_fractions(b: Sequence[Sequence[float]], weights: Sequence[float]) -> list[float]:
    """Fractions f_m > 0 summing to 1 that minimise Σ_i w_i²·(Σ_m b[i][m]/f_m)/V_i*.

    ``V_i* = (Σ_m sqrt(b_im))²`` is the least output i's error could be with
    the whole budget, so each output counts relative to its own best, in any
    units; the closed form is ``f_m ∝ sqrt(Σ_i w_i² b_im/V_i*)``. A row
    that is not finite and positive (bounds so extreme that their squares
    overflow) counts as an equal split over the measurements it reads, and a
    measurement no output's terms need gets 1% of an equal share.

    Example:
        >>> from privframe.plan.split import weighted_fractions
        >>> # A sum (centred sum, count) and a count sharing the count:
        >>> [round(f, 3) for f in weighted_fractions([[1.0, 1.0], [0.0, 1.0]], [1.0, 1.0])]
        [0.309, 0.691]
        >>> [round(f, 3) for f in weighted_fractions([[1.0, 0.0], [0.0, 1.0]], [1.0, 3.0])]
        [0.25, 0.75]
    """
    matrix = np.asarray(b, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0 or w.shape != (matrix.shape[0],):
        raise InvalidArgumentError("b must be a non-empty matrix with one weight per row")
    total = np.zeros(matrix.shape[1])
    for row, weight in zip(matrix, w, strict=True):
        with np.errstate(over="ignore", invalid="ignore"):
            best = np.sum(np.sqrt(row)) ** 2
            scaled = row / best
        if not (np.all(np.isfinite(scaled)) and np.all(row >= 0) and best > 0):
            scaled = np.where(row != 0, 1.0, 0.0)
            scaled /= scaled.sum() ** 2 if scaled.any() else 1.0
        total += weight * weight * scaled
    f = np.sqrt(total)
    f = f / f.sum() if f.sum() > 0 else np.full(f.size, 1.0 / f.size)
    f = np.where(f > 0, f, _FLOOR / f.size)
    return [float(x) for x in f / f.sum()]


def balanced_fractions(b: Sequence[Sequence[float]]) -> list[float]:
    """Fractions f_m >= 0 summing to 1 that minimise max_i Σ_m b[i][m]/f_m.

    Solved through the dual: for output weights λ on the simplex, the best
    split of Σ_i λ_i·Σ_m b_im/f_m is f_m ∝ sqrt(a_m) with a = bᵀλ, worth
    (Σ_m sqrt(a_m))², so the minimax value is max over λ of Σ_m sqrt(a_m), a
    concave problem (SLSQP), and f is recovered from the best λ. Where that
    leaves a measurement with nothing (outputs that do not bind), a little of
    the equal split is mixed in. The result is never worse than the equal
    split, which is returned if the solver fails. Every measurement (column)
    keeps at least 1% of an equal share, so one that no output needs to
    first order (a count under a mean guessed at its midpoint) still feeds
    the estimates.

    Example:
        >>> from privframe.plan.split import balanced_fractions
        >>> [round(f, 3) for f in balanced_fractions([[1.0, 1.0]])]
        [0.5, 0.5]
    """
    matrix = np.asarray(b, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0 or not np.all(np.isfinite(matrix) & (matrix >= 0)):
        raise InvalidArgumentError("b must be a non-empty matrix of finite numbers >= 0")
    used = matrix.sum(axis=0) > 0
    if not used.any():
        raise InvalidArgumentError("no output reads any measurement")
    sub = matrix[:, used] / matrix.max()  # homogeneous: rescaling b leaves f alone
    outputs, n = sub.shape

    def worst(f: np.ndarray) -> float:
        # A measurement with nothing makes every output that reads it infinitely bad.
        with np.errstate(divide="ignore"):
            terms = np.divide(sub, f, out=np.zeros_like(sub), where=sub > 0)
        return float(np.max(terms.sum(axis=1)))

    def negative_value(lam: np.ndarray) -> float:
        return -float(np.sum(np.sqrt(np.maximum(sub.T @ lam, 0.0))))

    def gradient(lam: np.ndarray) -> np.ndarray:
        return -(sub @ (0.5 / np.sqrt(np.maximum(sub.T @ lam, 1e-300))))

    dual_solution = scipy.optimize.minimize(
        negative_value,
        np.full(outputs, 1.0 / outputs),
        jac=gradient,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * outputs,
        constraints=[{"type": "eq", "fun": lambda lam: np.sum(lam) - 1.0}],
        options={"maxiter": 1000, "ftol": 1e-15},
    )
    equal = np.full(n, 1.0 / n)
    candidates = [equal]
    if np.all(np.isfinite(dual_solution.x)):
        root = np.sqrt(np.maximum(sub.T @ np.clip(dual_solution.x, 0.0, None), 0.0))
        if root.sum() > 0:
            dual = root / root.sum()
            candidates += [(1 - t) * dual + t * equal for t in (0.0, 1e-6, 1e-4, 1e-2)]
    best = _polish(sub, min(candidates, key=worst))
    best = min((best, *candidates), key=worst)
    # Keep 1% of an equal share on every measurement: one the first-order terms
    # do not need (a count under a mean at the midpoint) still feeds the estimate.
    out = np.zeros(matrix.shape[1])
    out[used] = best
    out = np.maximum(out, _FLOOR / out.size)
    return [float(x) for x in out / out.sum()]


def _polish(b: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Minimise a log-sum-exp smoothing of max_i log(Σ_m b_im/f_m), sharpening it in steps."""
    start = np.clip(start, 1e-12, None)

    def smooth(z: np.ndarray, sharpness: float) -> float:
        f = np.exp(z - z.max())
        f /= f.sum()
        logs = np.log(b @ (1.0 / f))
        top = logs.max()
        return float(top + np.log(np.sum(np.exp(sharpness * (logs - top)))) / sharpness)

    z = np.log(start)
    for sharpness in (10.0, 100.0, 1000.0, 10000.0):
        z = scipy.optimize.minimize(smooth, z, args=(sharpness,), method="BFGS").x
    f = np.exp(z - z.max())
    return f / f.sum()
