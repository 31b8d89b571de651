"""DP-SGD's noisy clipped sum (privframe.mechanisms.noise.clipped_gaussian_sum)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness, clipped_gaussian_sum


def _quiet(*args, **kwargs):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        return clipped_gaussian_sum(*args, rng=SeededRandomness(3), **kwargs)


def test_rows_are_clipped_to_c_and_non_finite_rows_count_as_zero() -> None:
    rows = np.array([[3.0, 4.0], [1e200, 1e200], [math.nan, 1.0], [0.1, 0.0], [-math.inf, 0]])
    out = _quiet(rows, 1.0, 1e-6)  # noise std 1e-6: the sum shows through
    expected = np.array([0.6 + 1 / math.sqrt(2) + 0.1, 0.8 + 1 / math.sqrt(2)])
    assert out == pytest.approx(expected, abs=1e-4)


def test_one_example_moves_the_sum_by_at_most_c() -> None:
    rng = np.random.default_rng(0)  # the gradients, not the noise
    for _ in range(50):
        rows = rng.normal(scale=rng.uniform(0.01, 100), size=(8, 5))
        with_it = _quiet(rows, 2.0, 1e-9)
        without = _quiet(rows[1:], 2.0, 1e-9)
        assert np.linalg.norm(with_it - without) <= 2.0 + 1e-6


def test_noise_std_is_at_least_z_times_c() -> None:
    # 200,000 coordinates: the sample std is within 1% of σ with overwhelming
    # probability (its relative sd is about 0.16%); σ itself is z·C up to the grid term.
    out = _quiet(np.zeros((3, 200_000)), 2.0, 1.5)
    assert out.std() == pytest.approx(3.0, rel=0.01)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((np.ones(3), 1.0, 1.0), pf.InvalidValueError),
        ((np.ones((2, 2)), 0.0, 1.0), pf.InvalidBudgetError),
        ((np.ones((2, 2)), 1.0, -1.0), pf.InvalidBudgetError),
        ((np.ones((2, 2)), "1", 1.0), pf.InvalidArgumentError),
    ],
)
def test_bad_arguments(args: tuple, error: type) -> None:
    with pytest.raises(error):
        clipped_gaussian_sum(*args)


def test_a_row_whose_norm_overflows_is_clipped_not_dropped() -> None:
    out = _quiet(np.array([[1.7e308, 1.7e308]]), 1.0, 1e-6)
    assert out == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)], abs=1e-4)
