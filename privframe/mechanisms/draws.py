"""Many discrete Gaussian vectors at once: the noise of one release, drawn in parallel.

A release adds one discrete Gaussian vector (Canonne, Kamath & Steinke 2020)
per measurement, each with its own σ. The sampler spends its time in numpy,
which releases the GIL, so large draws from the OS CSPRNG run in a few
threads; a seeded stream is drawn in order, so that it stays reproducible.

Example:
    >>> from privframe.mechanisms.draws import discrete_gaussian_vectors
    >>> [v.shape for v in discrete_gaussian_vectors([1.0, 2.0], 3, rng=None)]
    [(3,), (3,)]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from privframe.mechanisms.noise import Randomness, discrete_gaussian

__all__ = ["discrete_gaussian_vectors"]

_PARALLEL_SAMPLES = 200_000  # below this, threads cost more than they save


def discrete_gaussian_vectors(
    sigmas: Sequence[float], size: int, rng: Randomness | None
) -> list[np.ndarray]:
    """One discrete Gaussian vector of ``size`` per σ, from ``rng`` (the OS CSPRNG if None)."""
    if rng is not None or len(sigmas) < 2 or size * len(sigmas) < _PARALLEL_SAMPLES:
        return [discrete_gaussian(sigma, size, rng=rng) for sigma in sigmas]
    workers = min(len(sigmas), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda sigma: discrete_gaussian(sigma, size), sigmas))
