"""Unit tests of the discrete Laplace sampler, its interval and std, and the Laplace mechanism.

Non-statistical: shapes, refusals, exact calibration, reproducibility, and
the interval and std checked against independent high-precision arithmetic
(``decimal``). The distribution itself is tested in
``tests/statistical/test_laplace_statistical.py``.
"""

from __future__ import annotations

import math
import random
import warnings
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest

import privframe as pf
from privframe.mechanisms import laplace, noise
from privframe.mechanisms.draws import NoiseDraw, noise_vectors
from privframe.mechanisms.laplace import laplace_scale
from privframe.mechanisms.noise import (
    MAX_LAPLACE_SCALE,
    MIN_LAPLACE_SCALE,
    SeededRandomness,
    discrete_gaussian,
    discrete_laplace,
    discrete_laplace_halfwidth,
    discrete_laplace_std,
    laplace_mechanism,
)
from privframe.mechanisms.sampler import DiscreteLaplaceSampler, check_laplace_scale

seeded_ok = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def tail(scale: Fraction, h: int) -> Decimal:
    """P(|X| > h) = 2p^(h+1)/(1 + p), p = e^(-1/b), at 60 significant digits."""
    with localcontext() as ctx:
        ctx.prec = 60
        inv_b = Decimal(scale.denominator) / Decimal(scale.numerator)
        p = (-inv_b).exp()
        return 2 * (-(h + 1) * inv_b).exp() / (1 + p)


# ----------------------------------------------------------------- the sampler


def test_shapes_and_dtype() -> None:
    assert discrete_laplace(2.0).shape == ()
    assert discrete_laplace(2.0, 7).shape == (7,)
    assert discrete_laplace(0.3, (3, 4)).shape == (3, 4)
    assert discrete_laplace(2.0, 0).size == 0
    assert discrete_laplace(Fraction(10, 3), 5).dtype == np.int64
    assert pf.discrete_laplace is discrete_laplace
    assert pf.laplace_mechanism is laplace_mechanism


@pytest.mark.parametrize(
    "bad", [0.0, -1.0, math.nan, math.inf, -math.inf, 2.0**41, 2.0**-11, Fraction(-1, 2)]
)
def test_invalid_scale_is_refused(bad: float) -> None:
    with pytest.raises(pf.InvalidValueError, match="scale"):
        discrete_laplace(bad, 3)


@pytest.mark.parametrize("bad", ["3", True, None, Decimal("2")])
def test_scale_of_the_wrong_type_is_refused(bad: object) -> None:
    with pytest.raises(pf.InvalidArgumentError, match="scale"):
        discrete_laplace(bad, 3)  # type: ignore[arg-type]


def test_a_fraction_with_a_huge_numerator_is_refused() -> None:
    with pytest.raises(pf.InvalidValueError, match="numerator"):
        discrete_laplace(Fraction(2**53 + 1, 2**20), 3)


def test_every_float_scale_in_range_is_exact_in_the_sampler() -> None:
    # A float in range has t < 2^53 and s < 2^63 in lowest terms (the sampler's needs).
    for b in [MIN_LAPLACE_SCALE, 0.3, 2 / 0.7, 1.0, 37.5, 1e6, MAX_LAPLACE_SCALE,
              math.nextafter(MIN_LAPLACE_SCALE, 1.0), math.nextafter(1.0, 0.0)]:  # fmt: skip
        exact = check_laplace_scale(b)
        assert exact == Fraction(b)
        assert exact.numerator < 2**53
        assert exact.denominator < 2**63


def test_numpy_scalars_are_accepted() -> None:
    assert discrete_laplace(np.float32(2.0), np.int64(3)).shape == (3,)
    assert discrete_laplace(np.int64(4), 2).shape == (2,)
    assert laplace_mechanism(np.arange(2), np.int64(1), np.float64(0.5)).shape == (2,)


@pytest.mark.parametrize(
    ("size", "error"), [(-1, pf.InvalidValueError), (2.5, pf.InvalidArgumentError)]
)
def test_bad_sizes_are_refused(size: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="size"):
        discrete_laplace(1.0, size)  # type: ignore[arg-type]


def test_rng_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(pf.InvalidArgumentError, match="rng"):
        discrete_laplace(1.0, 3, rng=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [0.3, 2.0, Fraction(20, 7), 1e6])
def test_seeded_draws_are_reproducible_and_warn(scale: float) -> None:
    with pytest.warns(pf.SeededRandomnessWarning, match="NOT differentially private"):
        a = discrete_laplace(scale, 1000, rng=SeededRandomness(42))
    with pytest.warns(pf.SeededRandomnessWarning):
        b = discrete_laplace(scale, 1000, rng=SeededRandomness(42))
    with pytest.warns(pf.SeededRandomnessWarning):
        c = discrete_laplace(scale, 1000, rng=SeededRandomness(43))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_os_randomness_does_not_warn_and_differs_between_draws() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = discrete_laplace(1e6, 16), discrete_laplace(1e6, 16)
        laplace_mechanism(np.arange(3), 1.0, 0.5)
    assert not np.array_equal(a, b)


def test_large_scale_stays_in_int64() -> None:
    x = discrete_laplace(MAX_LAPLACE_SCALE, 1000)
    assert x.dtype == np.int64
    assert np.abs(x).max() < 60 * MAX_LAPLACE_SCALE


def test_smallest_scale_is_a_point_mass() -> None:
    # P(X != 0) = 2p/(1 + p) < 1e-440 at b = 2^-10.
    assert not discrete_laplace(MIN_LAPLACE_SCALE, 10_000).any()


class _Bits(noise.Randomness):
    """A deterministic word source, to drive the exact path of the geometric."""

    def __init__(self, words: list[int]) -> None:
        self._words = list(words)

    def words(self, n: int) -> np.ndarray:
        out, self._words = self._words[:n], self._words[n:]
        return np.array(out, dtype=np.uint64)


def test_an_exactly_decided_geometric_is_combined_in_python_integers() -> None:
    # Scale t/s = 1/2 (t = 1: no uniform, no coin). V's word has prefix 0, so the fast
    # path cannot decide it; refinement words of 0 make U < 2^-117, i.e. V = 81, and
    # then a word of all ones stops it. Y = floor(81/2) = 40, sign bit 0.
    sampler = DiscreteLaplaceSampler(Fraction(1, 2), _Bits([0, 0, 2**64 - 1]))
    assert sampler.candidates(1).tolist() == [40]


# ----------------------------------------------------------------- the std and the interval


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.0, 37.5, 1e6])
def test_std_is_the_exact_formula_and_below_the_continuous_one(scale: float) -> None:
    with localcontext() as ctx:
        ctx.prec = 40
        p = (-1 / Decimal(scale)).exp()
        exact_std = float((2 * p).sqrt() / (1 - p))
    assert discrete_laplace_std(scale) == pytest.approx(exact_std, rel=1e-12)
    assert discrete_laplace_std(scale) <= math.sqrt(2) * scale


def test_std_of_a_count_at_epsilon_one_half() -> None:
    # Δ₁ = 1, ε = 0.5: scale 2, std sqrt(2p)/(1-p) = 2.7992, just below sqrt(2)/0.5 = 2.83.
    assert laplace_scale(1.0, 0.5) == 2.0
    assert discrete_laplace_std(2.0) == pytest.approx(2.7992, abs=1e-4)


@pytest.mark.parametrize("scale", [0.3, 2 / 0.7, 1.0, 37.5, 1e6, Fraction(10, 3), 2.0**40])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99, 1 - 1e-9])
def test_halfwidth_is_the_smallest_with_the_coverage(scale: float, level: float) -> None:
    h = discrete_laplace_halfwidth(scale, level)
    b = Fraction(scale)
    allowed = 1 - max(Decimal(level), Decimal(repr(level)))
    assert tail(b, h) <= allowed
    assert h == 0 or tail(b, h - 1) > allowed


def test_halfwidth_refuses_bad_levels() -> None:
    for bad in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(pf.InvalidValueError, match="level"):
            discrete_laplace_halfwidth(1.0, bad)


# ----------------------------------------------------------------- the mechanism


class _RecordingSampler(DiscreteLaplaceSampler):
    scales: ClassVar[list[Fraction]] = []

    def __init__(self, scale: Fraction, rng: noise.Randomness) -> None:
        type(self).scales.append(scale)
        super().__init__(scale, rng)


@pytest.mark.parametrize(("delta_1", "epsilon"), [(1.0, 0.5), (3.0, 0.3), (0.7, 0.1), (2.0, 7)])
def test_integer_mechanism_scale_is_sensitivity_over_epsilon_rounded_up(
    monkeypatch: pytest.MonkeyPatch, delta_1: float, epsilon: float
) -> None:
    monkeypatch.setattr(laplace, "DiscreteLaplaceSampler", _RecordingSampler)
    _RecordingSampler.scales = []
    laplace_mechanism(np.arange(5), delta_1, epsilon)
    (scale,) = _RecordingSampler.scales
    eps = Fraction(repr(epsilon))  # epsilon is read as the decimal typed
    assert Fraction(delta_1) / scale <= eps  # ε-DP, exactly
    assert Fraction(math.nextafter(float(scale), 0.0)) < Fraction(delta_1) / eps  # smallest
    assert float(scale) == laplace_scale(delta_1, epsilon)


@pytest.mark.parametrize(("delta_1", "n"), [(1.0, 100), (3e5, 7), (1e-3, 10**4), (1.0, 1)])
def test_real_mechanism_charges_the_rounding_to_the_sensitivity(
    monkeypatch: pytest.MonkeyPatch, delta_1: float, n: int
) -> None:
    monkeypatch.setattr(laplace, "DiscreteLaplaceSampler", _RecordingSampler)
    _RecordingSampler.scales = []
    epsilon = 0.3
    out = laplace_mechanism(np.full(n, 0.1), delta_1, epsilon)
    (units,) = _RecordingSampler.scales
    # The grid: the largest 2^-j with 2^-j <= b/2^12 and 2^-j·n <= Δ₁/2^12.
    b = Fraction(delta_1) / Fraction(3, 10)
    width = min(b, Fraction(delta_1) / n) / 2**12
    j = next(j for j in range(-100, 100) if Fraction(2) ** -j <= width)
    g = Fraction(2) ** -j
    assert 2 * g > width
    scaled = np.ldexp(out, j)
    assert np.array_equal(scaled, np.rint(scaled))  # every output is a grid point
    # The L1 sensitivity in grid units, Δ₁/g + n, over the scale is at most ε, exactly.
    assert (Fraction(delta_1) / g + n) / units <= Fraction(3, 10)
    # ... and the rounding costs little: at most 2^-12 more noise than Δ₁/ε.
    assert units * g <= b * (1 + Fraction(1, 2**12)) * (1 + Fraction(1, 2**50))


def test_integer_mechanism_keeps_dtype_and_shape() -> None:
    out = laplace_mechanism(np.array([[1, 2], [3, 4]], dtype=np.int32), 1.0, 0.5)
    assert out.dtype == np.int64
    assert out.shape == (2, 2)
    assert laplace_mechanism(np.array(7), 1.0, 0.5).shape == ()
    assert laplace_mechanism(np.array(7.5), 1.0, 0.5).shape == ()


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (np.array([True, False]), pf.InvalidArgumentError),
        (np.array(["a"]), pf.InvalidArgumentError),
        (np.ma.masked_array([1, 2], mask=[0, 1]), pf.InvalidArgumentError),
        ([[1, 2], [3]], pf.InvalidValueError),
        (np.array([1.0, math.inf]), pf.InvalidValueError),
        (np.array([math.nan]), pf.InvalidValueError),
        (np.array([2**62], dtype=np.int64), pf.InvalidValueError),
    ],
)
def test_mechanism_refuses_bad_values(values: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        laplace_mechanism(values, 1.0, 0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delta_1", "epsilon", "name"),
    [(0.0, 0.5, "l1_sensitivity"), (-1.0, 0.5, "l1_sensitivity"), (1.0, 0.0, "epsilon"),
     (1.0, math.nan, "epsilon"), (math.inf, 0.5, "l1_sensitivity"), ("1", 0.5, "l1_sensitivity")],
)  # fmt: skip
def test_mechanism_refuses_bad_parameters(delta_1: float, epsilon: float, name: str) -> None:
    with pytest.raises(pf.PrivframeError, match=name):
        laplace_mechanism(np.arange(3), delta_1, epsilon)


def test_noise_out_of_the_sampler_range_names_the_parameters() -> None:
    with pytest.raises(pf.CalibrationError, match="epsilon=1e-13"):
        laplace_mechanism(np.zeros(3, dtype=np.int64), 1.0, 1e-13)
    with pytest.raises(pf.CalibrationError, match="n=1000000"):
        laplace_mechanism(np.zeros(10**6), 1.0, 1e-3)


def test_mechanism_runs_with_float_samplers_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a floating-point random sampler was called")

    for name in dir(np.random):
        if not name.startswith("_") and callable(getattr(np.random, name)):
            monkeypatch.setattr(np.random, name, forbidden)
    for name in ("random", "gauss", "normalvariate", "uniform", "getrandbits", "randbytes"):
        monkeypatch.setattr(random, name, forbidden)
    laplace_mechanism(np.arange(100), 1.0, 0.5)
    laplace_mechanism(np.linspace(0, 1, 100), 1.0, 0.5)
    discrete_laplace(0.3, 1000)


# ----------------------------------------------------------------- one release's draws


@seeded_ok
def test_a_seeded_stream_draws_mixed_vectors_in_order() -> None:
    draws = [NoiseDraw("gaussian", 3.0), NoiseDraw("laplace", 2.0), NoiseDraw("laplace", 0.3)]
    together = noise_vectors(draws, 500, SeededRandomness(8))
    rng = SeededRandomness(8)
    one_by_one = [
        discrete_gaussian(3.0, 500, rng=rng),
        discrete_laplace(2.0, 500, rng=rng),
        discrete_laplace(0.3, 500, rng=rng),
    ]
    assert all(np.array_equal(a, b) for a, b in zip(together, one_by_one, strict=True))


def test_parallel_draws_have_the_requested_shapes() -> None:
    draws = [NoiseDraw("laplace", 2.0), NoiseDraw("gaussian", 5.0), NoiseDraw("laplace", 1e6)]
    vectors = noise_vectors(draws, 100_000, None)  # 300,000 samples: the threaded path
    assert [(v.shape, v.dtype) for v in vectors] == [((100_000,), np.int64)] * 3


@pytest.mark.parametrize(
    ("kind", "scale", "error"),
    [("uniform", 1.0, pf.InvalidValueError), ("laplace", 0.0, pf.InvalidValueError),
     ("gaussian", math.inf, pf.InvalidValueError), ("laplace", "2", pf.InvalidArgumentError)],
)  # fmt: skip
def test_a_bad_noise_draw_is_refused_when_made(kind: str, scale: float, error: type) -> None:
    with pytest.raises(error):
        NoiseDraw(kind, scale)  # type: ignore[arg-type]


def test_the_laplace_mechanism_charges_its_accountant_before_drawing() -> None:
    acct = pf.accounting.Accountant(pf.PureDP(1.0))
    pf.laplace_mechanism(np.array([1, 2]), 1.0, 0.75, accountant=acct, label="first")
    assert acct.spent == pf.PureDP(0.75)
    with pytest.raises(pf.BudgetExceededError):
        pf.laplace_mechanism(np.array([1, 2]), 1.0, 0.5, accountant=acct, label="second")
    assert [e.label for e in acct.entries] == ["first"]
