"""Secure noise: exact, vectorized discrete Gaussian and discrete Laplace samplers and mechanisms.

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

The discrete Laplace (:func:`discrete_laplace`, P[X = x] ∝ exp(−|x|/b), any
rational scale b) is the same paper's Algorithm 2 on the same exact coins, and
:func:`laplace_mechanism` is the pure ε-DP sibling of :func:`gaussian_mechanism`.

Example:
    >>> import privframe as pf
    >>> x = pf.discrete_gaussian(sigma=3.0, size=5)
    >>> x.dtype.name, x.shape
    ('int64', (5,))
    >>> pf.noise.discrete_laplace(scale=2.0, size=5).shape
    (5,)
"""

from privframe.mechanisms.exponential import exponential_choice
from privframe.mechanisms.gaussian import (
    clipped_gaussian_sum,
    gaussian_mechanism,
    grid_exponent,
    snap_to_grid,
)
from privframe.mechanisms.laplace import (
    discrete_laplace,
    discrete_laplace_halfwidth,
    discrete_laplace_std,
    laplace_mechanism,
)
from privframe.mechanisms.randomness import Randomness, SeededRandomness, SystemRandomness
from privframe.mechanisms.sampler import (
    MAX_LAPLACE_SCALE,
    MAX_SIGMA,
    MIN_LAPLACE_SCALE,
    MIN_SIGMA,
    discrete_gaussian,
    discrete_gaussian_halfwidth,
)

__all__ = [
    "MAX_LAPLACE_SCALE",
    "MAX_SIGMA",
    "MIN_LAPLACE_SCALE",
    "MIN_SIGMA",
    "Randomness",
    "SeededRandomness",
    "SystemRandomness",
    "clipped_gaussian_sum",
    "discrete_gaussian",
    "discrete_gaussian_halfwidth",
    "discrete_laplace",
    "discrete_laplace_halfwidth",
    "discrete_laplace_std",
    "exponential_choice",
    "gaussian_mechanism",
    "grid_exponent",
    "laplace_mechanism",
    "snap_to_grid",
]
