"""Consistent marginals: non-negative, agreeing on shared columns, never farther from the truth.

The estimate is the weighted least-squares projection of the noisy
marginals onto a convex set that holds every true table (true marginals are
non-negative and consistent), so it is never farther from the truth than the
measurements in that weighted norm (projections onto a closed convex set are
non-expansive towards its points): a deterministic property, checked over
random tables and noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from privframe.errors import InvalidValueError
from privframe.synth.consistency import consistent

SIZES = {"a": 2, "b": 3, "c": 4}
SETS = [("a", "b"), ("b", "c"), ("a", "c"), ("c",), ("a", "b", "c")]


def _truth(rng: np.random.Generator) -> list[np.ndarray]:
    joint = rng.integers(0, 6, size=(2, 3, 4)).astype(float)
    axes = "abc"
    out = []
    for s in SETS:
        summed = joint.sum(axis=tuple(i for i, c in enumerate(axes) if c not in s))
        out.append(summed)
    return out


def _weighted(values: list[np.ndarray], sigmas: list[float]) -> float:
    return float(sum((v**2).sum() / s**2 for v, s in zip(values, sigmas, strict=True)))


@pytest.mark.parametrize("seed", range(20))
def test_estimate_is_consistent_non_negative_and_no_farther_from_the_truth(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = _truth(rng)
    sigmas = [float(s) for s in rng.uniform(0.5, 4.0, len(SETS))]
    noisy = [t + rng.normal(0, s, t.shape) for t, s in zip(truth, sigmas, strict=True)]
    fixed = consistent(SETS, noisy, sigmas)
    scale = max(float(f.max()) for f in fixed)
    assert all((f >= 0).all() for f in fixed)
    ab, bc, ac, c, abc = fixed
    tol = 1e-6 * scale
    assert np.allclose(ab.sum(axis=0), bc.sum(axis=1), atol=tol)
    assert np.allclose(ac.sum(axis=0), c, atol=tol)
    assert np.allclose(abc.sum(axis=2), ab, atol=tol)
    assert np.allclose(abc.sum(axis=(0, 1)), c, atol=tol)
    after = _weighted([f - t for f, t in zip(fixed, truth, strict=True)], sigmas)
    before = _weighted([n - t for n, t in zip(noisy, truth, strict=True)], sigmas)
    assert after <= before * (1 + 1e-9)


def test_consistent_measurements_are_kept() -> None:
    rng = np.random.default_rng(0)
    truth = _truth(rng)
    fixed = consistent(SETS, truth, [1.0] * len(SETS))
    for f, t in zip(fixed, truth, strict=True):
        assert np.allclose(f, t, atol=1e-9)


def test_precise_measurement_moves_less() -> None:
    # Two measurements of one table: the weighted mean favours the small σ.
    fixed = consistent([("a",), ("a",)], [np.array([10.0, 0.0]), np.array([0.0, 10.0])], [1.0, 3.0])
    assert np.allclose(fixed[0], [9.0, 1.0])
    assert np.allclose(fixed[0], fixed[1])


def test_axes_of_different_lengths_are_refused() -> None:
    with pytest.raises(InvalidValueError, match="column 'a' has 2 values in one marginal and 3"):
        consistent([("a",), ("a",)], [np.zeros(2), np.zeros(3)], [1.0, 1.0])
