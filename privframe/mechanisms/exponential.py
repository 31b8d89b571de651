"""The exponential mechanism's sampling step, exact: rejection from a uniform proposal.

Example:
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from privframe.mechanisms.exponential import exponential_choice
    >>> exponential_choice(np.zeros((1, 1)), lambda r, i: Fraction(0)).tolist()
    [0]
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from privframe.mechanisms._coins import fast_coin, prefix, resolve, uniform_indices
from privframe.mechanisms.randomness import Randomness, resolve_randomness

__all__ = ["exponential_choice"]


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
    source = resolve_randomness(rng)
    x_hat = np.asarray(x_hat, dtype=np.float64)
    rows, n = x_hat.shape
    chosen = np.full(rows, -1, dtype=np.int64)
    active = np.arange(rows)
    while active.size:
        proposal = uniform_indices(active.size, n, source)
        k = prefix(source.words(active.size))
        yes, no = fast_coin(k, x_hat[active, proposal])
        keep = resolve(yes, no, k, _at(exact_x, active, proposal), source)
        chosen[active[keep]] = proposal[keep]
        active = active[~keep]
    return chosen
