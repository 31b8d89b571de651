"""Unit and property tests of the noise module (non-statistical)."""

from __future__ import annotations

import ast
import math
import random
import warnings
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.mechanisms import _coins, gaussian, noise
from privframe.mechanisms.noise import (
    SeededRandomness,
    SystemRandomness,
    discrete_gaussian,
    gaussian_mechanism,
    grid_exponent,
    snap_to_grid,
)
from privframe.mechanisms.sampler import DiscreteGaussianSampler

PACKAGE = Path(pf.__file__).resolve().parent
seeded_ok = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def exp_neg_interval(x: Fraction, rel_bits: int = 64) -> tuple[Fraction, Fraction]:
    """Bounds on exp(-x) whose width is below 2^-rel_bits relative to exp(-x)."""
    lo, hi, w = _coins.exp_neg_bounds(x, rel_bits + math.ceil(1.45 * x) + 4)
    return Fraction(lo, 1 << w), Fraction(hi, 1 << w)


# ----------------------------------------------------------------- exact arithmetic


@pytest.mark.parametrize("x", [0.0, 1e-9, 0.3, 0.5, 1.0, 2.5, 37.0, 700.0])
def test_exp_bounds_bracket_and_are_tight(x: float) -> None:
    lo, hi = exp_neg_interval(Fraction(x), rel_bits=80)
    assert 0 < lo <= hi
    assert hi - lo <= hi / 2**80
    approx = Fraction(math.exp(-x))
    assert abs(approx - lo) <= approx / 2**50


def test_exp_bounds_of_a_sum_multiply() -> None:
    # exp(-(a+b)) = exp(-a)·exp(-b): the interval products must overlap.
    a, b = Fraction(3, 7), Fraction(11, 5)
    lo_a, hi_a = exp_neg_interval(a)
    lo_b, hi_b = exp_neg_interval(b)
    lo_ab, hi_ab = exp_neg_interval(a + b)
    assert lo_a * lo_b <= hi_ab
    assert lo_ab <= hi_a * hi_b


def test_numpy_exp_meets_the_fast_path_assumption() -> None:
    # The fast path assumes numpy's exp has relative error <= 2^-50 (docs/privacy.md).
    xs = np.concatenate([np.linspace(0, 700, 400), np.random.default_rng(0).random(400)])
    p_hats = np.exp(-xs)
    for x, p_hat in zip(xs, p_hats, strict=True):
        lo, hi = exp_neg_interval(Fraction(float(x)))
        assert abs(Fraction(float(p_hat)) - lo) <= lo / 2**50 + (hi - lo)


class _Bits(noise.Randomness):
    """A deterministic word source for driving the exact path."""

    def __init__(self, words: list[int]) -> None:
        self._words = list(words)

    def words(self, n: int) -> np.ndarray:
        out, self._words = self._words[:n], self._words[n:]
        return np.array(out, dtype=np.uint64)


def test_lazy_uniform_refines_until_decided() -> None:
    # U's 53-bit prefix 0 straddles exp(-40) ≈ 4.2e-18 < 2^-53; the next 64 bits decide.
    p = math.exp(-40)
    below = int(p / 2 * 2.0**117)  # U = below·2^-117 < p
    assert _coins.LazyUniform(0, _Bits([below])).less_than_exp_neg(Fraction(40))
    above = int(p * 2 * 2.0**117)
    assert not _coins.LazyUniform(0, _Bits([above])).less_than_exp_neg(Fraction(40))


def test_exact_geometric_counts_thresholds() -> None:
    # U in [k, k+1)·2^-53 with U ≈ e^-2.5 lies in [e^-3, e^-2): V = 2.
    k = int(math.exp(-2.5) * 2**53)
    assert _coins.exact_geometric(k, _Bits([])) == 2
    assert _coins.exact_geometric(2**53 - 1, _Bits([])) == 0


U53 = 2.0**-53


def test_fast_coin_never_contradicts_exact_arithmetic() -> None:
    rng = np.random.default_rng(1)
    n = 4_000
    x = rng.uniform(0, 40, size=n)
    k = rng.integers(0, 2**53, size=n, dtype=np.uint64)
    # Put U right next to p = exp(-x) for half of the cases, to stress the boundary.
    near = np.floor(np.exp(-x[: n // 2]) * 2.0**53) + rng.integers(-3, 4, size=n // 2)
    k[: n // 2] = np.clip(near, 0, 2**53 - 1).astype(np.uint64)
    # The fast path is handed x̂ off by the largest error the docs allow: 8u(1 + x).
    x_hat = x + rng.choice([-1.0, 1.0], size=n) * 8 * U53 * (1 + x)
    yes, no = _coins.fast_coin(k, x_hat)
    assert not (yes & no).any()
    for i in np.flatnonzero(yes | no):
        lo, hi = exp_neg_interval(Fraction(float(x[i])))
        u_lo, u_hi = Fraction(int(k[i]), 1 << 53), Fraction(int(k[i]) + 1, 1 << 53)
        if yes[i]:
            assert u_hi <= lo
        else:
            assert u_lo >= hi
    assert (yes | no)[n // 2 :].all()  # away from the boundary the fast path decides


def test_fast_coin_slack_is_needed() -> None:
    # U two grid steps below exp(-x̂): were x̂ too small by its allowed error, p could sit
    # below U. The fast path must leave this coin undecided; a slack of 2^-53 would not.
    x = np.array([2.0**-20])
    k = np.array([math.floor(math.exp(-(2.0**-20)) * 2**53) - 2], dtype=np.uint64)
    yes, no = _coins.fast_coin(k, x)
    assert not yes[0]
    assert not no[0]


@pytest.mark.parametrize("sigma", [0.1, 0.5, 1.0, 3.7, 1e3, 123456.789, 1e9, 2.0**40])
def test_acceptance_x_hat_meets_the_documented_error_bound(sigma: float) -> None:
    sampler = DiscreteGaussianSampler(sigma, SystemRandomness())
    centre = int(sampler.c)
    ys = np.unique(
        np.concatenate(
            [
                np.arange(0, 40),
                centre + np.arange(-40, 41),
                (np.linspace(0, 40, 200) * max(sigma, 1)).astype(np.int64),
            ]
        )
    )
    ys = ys[(ys >= 0) & (ys < 2**52)]
    x_hat = sampler.acceptance_x_hat(ys)
    for y, xh in zip(ys.tolist(), x_hat.tolist(), strict=True):
        exact = sampler.acceptance_x(y)
        assert abs(Fraction(xh) - exact) <= 8 * Fraction(U53) * (1 + exact), (sigma, y)


def test_out_of_range_words_are_rejected_not_folded() -> None:
    # 2^64 mod 3 = 1, so the word 2^64 - 1 must be dropped: folding it would make 0
    # slightly more likely than 1 and 2.
    words = np.array([2**64 - 1, 2**64 - 2, 5, 0], dtype=np.uint64)
    assert _coins.uniform_below(words, 3).tolist() == [(2**64 - 2) % 3, 2, 0]
    assert _coins.uniform_below(words, 1 << 40).tolist() == [
        (2**64 - 1) % (1 << 40),
        (2**64 - 2) % (1 << 40),
        5,
        0,
    ]


# ----------------------------------------------------------------- sampler API


def test_shapes_and_dtype() -> None:
    assert discrete_gaussian(2.0).shape == ()
    assert discrete_gaussian(2.0, 7).shape == (7,)
    assert discrete_gaussian(2.0, (3, 4)).shape == (3, 4)
    assert discrete_gaussian(2.0, 0).size == 0
    assert discrete_gaussian(2.0, 5).dtype == np.int64


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, 2.0**41, 1e-300])
def test_invalid_sigma_is_refused(bad: float) -> None:
    with pytest.raises(pf.InvalidBudgetError, match="sigma"):
        discrete_gaussian(bad, 3)


@pytest.mark.parametrize("bad", ["3", True, None])
def test_sigma_of_the_wrong_type_is_refused(bad: object) -> None:
    with pytest.raises(pf.InvalidArgumentError, match="sigma"):
        discrete_gaussian(bad, 3)  # type: ignore[arg-type]


def test_numpy_scalars_are_accepted() -> None:
    assert discrete_gaussian(np.float32(2.0), np.int64(3)).shape == (3,)
    assert gaussian_mechanism(np.arange(2), np.int64(1), np.float64(0.5)).shape == (2,)


@pytest.mark.parametrize(
    ("size", "error"),
    [
        (-1, pf.InvalidValueError),
        ((2, -1), pf.InvalidValueError),
        (2.5, pf.InvalidArgumentError),
        ("12", pf.InvalidArgumentError),
        ([2.7], pf.InvalidArgumentError),
    ],
)
def test_bad_sizes_are_refused(size: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="size"):
        discrete_gaussian(1.0, size)  # type: ignore[arg-type]


def test_rng_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(pf.InvalidArgumentError, match="rng"):
        discrete_gaussian(1.0, 3, rng=42)  # type: ignore[arg-type]


def test_sigma_one_billion_is_supported() -> None:
    x = discrete_gaussian(1e9, 1_000)
    assert x.dtype == np.int64
    assert np.abs(x).max() < 10 * 1e9


def test_system_randomness_differs_between_draws() -> None:
    a, b = SystemRandomness().words(4), SystemRandomness().words(4)
    assert not np.array_equal(a, b)
    assert not np.array_equal(discrete_gaussian(1e6, 16), discrete_gaussian(1e6, 16))


def test_seeded_randomness_is_reproducible_and_warns() -> None:
    with pytest.warns(pf.SeededRandomnessWarning, match="NOT differentially private"):
        a = discrete_gaussian(5.0, 100, rng=SeededRandomness(42))
    with pytest.warns(pf.SeededRandomnessWarning):
        b = discrete_gaussian(5.0, 100, rng=SeededRandomness(42))
    with pytest.warns(pf.SeededRandomnessWarning):
        c = discrete_gaussian(5.0, 100, rng=SeededRandomness(43))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@seeded_ok
def test_int_and_bytes_seeds_give_different_streams() -> None:
    assert not np.array_equal(SeededRandomness(0).words(4), SeededRandomness(b"\x00").words(4))


@seeded_ok
def test_seeded_stream_is_independent_of_request_sizes() -> None:
    a = SeededRandomness(b"k")
    whole = a.words(10)
    b = SeededRandomness(b"k")
    parts = np.concatenate([b.words(3), b.words(7)])
    assert np.array_equal(whole, parts)


def test_system_randomness_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        discrete_gaussian(3.0, 10)
        gaussian_mechanism(np.arange(3), 1.0, 0.5)


def test_seed_type_is_checked() -> None:
    with pytest.raises(pf.InvalidArgumentError):
        SeededRandomness(1.5)  # type: ignore[arg-type]


# ----------------------------------------------------------------- mechanism


def test_integer_mechanism_keeps_dtype_and_shape() -> None:
    out = gaussian_mechanism(np.array([[1, 2], [3, 4]], dtype=np.int32), 1.0, 0.5)
    assert out.dtype == np.int64
    assert out.shape == (2, 2)


@pytest.mark.parametrize("value", [7, 7.5])
def test_zero_d_input_gives_a_zero_d_array(value: float) -> None:
    out = gaussian_mechanism(np.array(value), 1.0, 0.5)
    assert isinstance(out, np.ndarray)
    assert out.shape == ()
    assert isinstance(discrete_gaussian(1.0), np.ndarray)


class _RecordingSampler(DiscreteGaussianSampler):
    sigmas: ClassVar[list[float]] = []

    def __init__(self, sigma: float, rng: noise.Randomness) -> None:
        type(self).sigmas.append(sigma)
        super().__init__(sigma, rng)


def test_real_mechanism_charges_the_rounding_to_the_sensitivity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gaussian, "DiscreteGaussianSampler", _RecordingSampler)
    _RecordingSampler.sigmas = []
    for delta_2, n in [(1.0, 100), (3e5, 7), (1e-3, 10**4)]:  # j > 0, j < 0, tiny Δ
        rho = 0.3
        _RecordingSampler.sigmas.clear()
        gaussian_mechanism(np.zeros(n), delta_2, rho)
        j = grid_exponent(pf.accounting.gaussian_sigma(delta_2, rho), delta_2, n)
        inflated = Fraction(delta_2) + Fraction(2) ** -j * Fraction(math.sqrt(n))
        (sigma_units,) = _RecordingSampler.sigmas
        # Exactly: the ρ charged covers the inflated sensitivity in grid units.
        rho_actual = (inflated * Fraction(2) ** j) ** 2 / (2 * Fraction(sigma_units) ** 2)
        assert rho_actual <= Fraction(rho)
        assert sigma_units > math.ldexp(pf.accounting.gaussian_sigma(delta_2, rho), j)


def test_integer_mechanism_noise_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaussian, "DiscreteGaussianSampler", _RecordingSampler)
    _RecordingSampler.sigmas = []
    gaussian_mechanism(np.arange(5), 2.0, 0.125)
    assert _RecordingSampler.sigmas == [pf.accounting.gaussian_sigma(2.0, 0.125)]


class _CountingRandomness(noise.Randomness):
    def __init__(self, seeded: bool = False) -> None:
        self.seeded = seeded
        self.drawn = 0
        self._inner = SystemRandomness()

    def words(self, n: int) -> np.ndarray:
        self.drawn += n
        return self._inner.words(n)


def test_release_with_accountant_charges_before_drawing() -> None:
    acct = Accountant(pf.zCDP(0.5))
    rng = _CountingRandomness()
    gaussian_mechanism(np.arange(4), 1.0, 0.375, rng=rng, accountant=acct, label="q1")
    assert [(e.label, e.rho, e.seeded) for e in acct.entries] == [("q1", 0.375, False)]
    drawn = rng.drawn
    with pytest.raises(pf.BudgetExceededError):
        gaussian_mechanism(np.arange(4), 1.0, 0.25, rng=rng, accountant=acct, label="q2")
    assert rng.drawn == drawn  # no noise was drawn for the refused release
    assert len(acct.entries) == 1


def test_release_with_bad_input_charges_nothing() -> None:
    acct = Accountant(pf.zCDP(1.0))
    with pytest.raises(pf.InvalidValueError):
        gaussian_mechanism(np.array([1.0, math.nan]), 1.0, 0.5, accountant=acct)
    with pytest.raises(pf.CalibrationError):
        gaussian_mechanism(np.zeros(3, dtype=np.int64), 1.0, 1e-30, accountant=acct)
    assert acct.entries == ()


@seeded_ok
def test_seeded_release_is_flagged_on_the_ledger() -> None:
    acct = Accountant(pf.zCDP(1.0))
    with pytest.warns(pf.SeededRandomnessWarning):
        gaussian_mechanism(np.arange(3), 1.0, 0.5, rng=SeededRandomness(1), accountant=acct)
    assert acct.entries[0].seeded


def test_real_mechanism_outputs_grid_points() -> None:
    values = np.array([0.1, 2.7, -3.3, 1e6])
    delta_2, rho = 2.0, 0.1
    sigma = delta_2 / math.sqrt(2 * rho)
    j = grid_exponent(pf.accounting.gaussian_sigma(delta_2, rho), delta_2, values.size)
    out = gaussian_mechanism(values, delta_2, rho)
    assert out.dtype == np.float64
    scaled = np.ldexp(out, j)
    assert np.array_equal(scaled, np.rint(scaled))  # every output is a multiple of 2^-j
    assert np.all(np.abs(out - values) < 12 * sigma)


@pytest.mark.parametrize(
    ("sigma", "delta_2", "n"), [(1.0, 1.0, 1), (0.01, 5.0, 10**6), (300, 1, 7)]
)
def test_grid_is_fine_enough_to_cost_little(sigma: float, delta_2: float, n: int) -> None:
    g = 2.0 ** -grid_exponent(sigma, delta_2, n)
    assert g <= sigma / 2**12
    assert g * math.sqrt(n) <= delta_2 / 2**12
    assert 2 * g > min(sigma, delta_2 / math.sqrt(n)) / 2**12  # the largest such power of two


def test_snap_to_grid_rounds_to_nearest() -> None:
    assert snap_to_grid(np.array([0.374, 0.376, -0.126]), 2).tolist() == [1, 2, -1]
    with pytest.raises(pf.InvalidValueError, match="finite"):
        snap_to_grid([1.0, math.nan], 3)
    with pytest.raises(pf.InvalidValueError, match="too large"):
        snap_to_grid([2.0**60], 3)


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (np.array([True, False]), pf.InvalidArgumentError),
        (np.array(["a"]), pf.InvalidArgumentError),
        (np.ma.masked_array([1, 2], mask=[0, 1]), pf.InvalidArgumentError),
        ([[1, 2], [3]], pf.InvalidValueError),
        (np.array([1.0, math.inf]), pf.InvalidValueError),
        (np.array([math.nan]), pf.InvalidValueError),
    ],
)
def test_mechanism_refuses_bad_values(values: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        gaussian_mechanism(values, 1.0, 0.5)  # type: ignore[arg-type]


def test_noise_out_of_the_sampler_range_names_the_parameters() -> None:
    with pytest.raises(pf.CalibrationError, match="rho=1e-12"):
        gaussian_mechanism(np.zeros(10**6), 1.0, 1e-12)


@pytest.mark.parametrize(("sigma", "delta_2"), [(0.0, 1.0), (math.nan, 1.0), (1.0, 1e-310)])
def test_grid_exponent_refuses_degenerate_scales(sigma: float, delta_2: float) -> None:
    with pytest.raises(pf.InvalidValueError):
        grid_exponent(sigma, delta_2, 1)


@pytest.mark.parametrize(("delta_2", "rho"), [(0.0, 0.5), (-1.0, 0.5), (1.0, 0.0), (1.0, math.nan)])
def test_mechanism_refuses_bad_parameters(delta_2: float, rho: float) -> None:
    with pytest.raises(pf.PrivframeError):
        gaussian_mechanism(np.arange(3), delta_2, rho)


def test_huge_integers_are_refused() -> None:
    with pytest.raises(pf.PrivframeError, match="2\\^62"):
        gaussian_mechanism(np.array([2**62], dtype=np.int64), 1.0, 0.5)


# ----------------------------------------------------------------- no float sampler


def _release_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_imports_an_insecure_random_source() -> None:
    for path in _release_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute) and node.attr == "random":
                names = ["numpy.random"]
            else:
                continue
            for name in names:
                assert name not in {"random", "numpy.random", "secrets"}, f"{path.name}: {name}"
                assert not name.startswith("numpy.random"), f"{path.name}: {name}"


def test_release_path_runs_with_float_samplers_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a floating-point random sampler was called")

    for name in dir(np.random):
        if not name.startswith("_") and callable(getattr(np.random, name)):
            monkeypatch.setattr(np.random, name, forbidden)
    for name in ("random", "gauss", "normalvariate", "uniform", "getrandbits", "randbytes"):
        monkeypatch.setattr(random, name, forbidden)
    gaussian_mechanism(np.arange(100), 1.0, 0.5)
    gaussian_mechanism(np.linspace(0, 1, 100), 1.0, 0.5)
    discrete_gaussian(1e6, 1000)
