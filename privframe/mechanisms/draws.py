"""The noise of one release, drawn at once: a discrete Gaussian or discrete Laplace vector each.

A release adds one noise vector per measurement, each with its own
distribution and scale (:class:`NoiseDraw`): a discrete Gaussian of scale σ
or a discrete Laplace of scale b (Canonne, Kamath & Steinke 2020). The
samplers spend their time in numpy, which releases the GIL, so large draws
from the OS CSPRNG run in a few threads; a seeded stream is drawn in order,
so that it stays reproducible.

Example:
    >>> from privframe.mechanisms.draws import NoiseDraw, noise_vectors
    >>> draws = [NoiseDraw("gaussian", 1.0), NoiseDraw("laplace", 2.0)]
    >>> [v.shape for v in noise_vectors(draws, 3, rng=None)]
    [(3,), (3,)]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from privframe.errors import InvalidValueError
from privframe.mechanisms.noise import Randomness, discrete_gaussian, discrete_laplace
from privframe.mechanisms.sampler import check_laplace_scale, check_sigma

__all__ = ["Family", "NoiseDraw", "noise_vectors"]

Family = Literal["gaussian", "laplace"]
"""The noise a measurement draws: the discrete Gaussian (zCDP) or the discrete Laplace (pure DP)."""

_PARALLEL_SAMPLES = 200_000  # below this, threads cost more than they save


@dataclass(frozen=True, slots=True)
class NoiseDraw:
    """One measurement's noise: a discrete Gaussian (scale σ) or a discrete Laplace (scale b).

    ``NoiseDraw("gaussian", σ)`` is N_Z(0, σ²), ``NoiseDraw("laplace", b)`` the
    discrete Laplace P[X = x] ∝ exp(−|x|/b). The scale is checked when the draw
    is made, as the sampler would check it
    (:func:`~privframe.mechanisms.sampler.check_sigma`,
    :func:`~privframe.mechanisms.sampler.check_laplace_scale`).

    Example:
        >>> from privframe.mechanisms.draws import NoiseDraw
        >>> NoiseDraw("laplace", 2.0).sample(4, rng=None).shape
        (4,)
    """

    kind: Family
    scale: float

    def __post_init__(self) -> None:
        if self.kind == "gaussian":
            check_sigma(self.scale)
        elif self.kind == "laplace":
            check_laplace_scale(self.scale)
        else:
            raise InvalidValueError(
                f"a noise draw's kind must be 'gaussian' or 'laplace', got {self.kind!r}"
            )

    def sample(self, size: int, rng: Randomness | None) -> npt.NDArray[np.int64]:
        """``size`` samples from ``rng`` (the OS CSPRNG if None)."""
        if self.kind == "gaussian":
            return discrete_gaussian(self.scale, size, rng=rng)
        return discrete_laplace(self.scale, size, rng=rng)


def noise_vectors(
    draws: Sequence[NoiseDraw], size: int, rng: Randomness | None
) -> list[npt.NDArray[np.int64]]:
    """One vector of ``size`` samples per draw, from ``rng`` (the OS CSPRNG if None).

    With the OS CSPRNG, large draws run in threads, each with its own
    :class:`~privframe.mechanisms.randomness.SystemRandomness`; a given
    ``rng`` (a seeded stream) is drawn from in order, so its output is the
    same as drawing the vectors one after the other.
    """
    if rng is not None or len(draws) < 2 or size * len(draws) < _PARALLEL_SAMPLES:
        return [draw.sample(size, rng) for draw in draws]
    workers = min(len(draws), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda draw: draw.sample(size, None), draws))
