"""Statistical tests of the discrete Gaussian sampler.

Significance: every test here rejects at the fixed level ALPHA = 1e-3 (two-sided
where it applies). Samples are drawn from a SeededRandomness stream so each run
is reproducible; the sampler code path is the one the OS CSPRNG feeds, and one
test checks the OS-CSPRNG path at the same level.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privframe.mechanisms import noise, sampler
from privframe.mechanisms.draws import NoiseDraw, noise_vectors
from privframe.mechanisms.noise import SeededRandomness, SystemRandomness, discrete_gaussian

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3
Z = stats.norm.isf(ALPHA / 2)  # two-sided critical value


def exact_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of N_Z(0, σ²), truncated where the tail is below 1e-30."""
    half = math.ceil(12 * sigma) + 2
    support = np.arange(-half, half + 1)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma * sigma))
    return support, weights / weights.sum()


def chi_square_pvalue(samples: np.ndarray, sigma: float, bins: int = 40) -> float:
    """Chi-square goodness of fit against the exact pmf, on ~equiprobable integer bins."""
    support, pmf = exact_pmf(sigma)
    cdf = np.cumsum(pmf)
    # Integer cut points at the quantiles; merge duplicates (small sigma has few atoms).
    cuts = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
    edges = support[cuts]  # bin i holds values <= edges[i]
    expected_cdf = cdf[cuts]
    probs = np.diff(np.concatenate([[0.0], expected_cdf, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=probs.size)
    keep = probs > 0
    expected = probs[keep] * samples.size
    assert observed[~keep].sum() == 0, "samples fell where the pmf is zero"
    if expected.size < 2:  # a point mass: all samples must equal it
        return 1.0 if observed.sum() == observed[keep].max() else 0.0
    return float(stats.chisquare(observed[keep], expected).pvalue)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 10.0, 1000.0, 1e6])
def test_chi_square_against_exact_pmf(sigma: float) -> None:
    samples = discrete_gaussian(sigma, 400_000, rng=SeededRandomness(int(sigma * 1000)))
    assert chi_square_pvalue(samples, sigma) > ALPHA


def test_chi_square_with_os_csprng() -> None:
    samples = discrete_gaussian(2.5, 400_000, rng=SystemRandomness())
    assert chi_square_pvalue(samples, 2.5) > ALPHA


def test_kolmogorov_smirnov_large_sigma() -> None:
    # For σ = 1e6 the lattice is invisible at the KS resolution: compare the
    # continuity-corrected samples with the continuous Gaussian CDF.
    sigma = 1e6
    samples = discrete_gaussian(sigma, 200_000, rng=SeededRandomness(11))
    jitter = np.linspace(-0.5, 0.5, samples.size)  # deterministic, spreads atoms
    assert stats.kstest(samples + jitter, stats.norm(scale=sigma).cdf).pvalue > ALPHA


def test_tiny_sigma_is_nearly_a_point_mass() -> None:
    samples = discrete_gaussian(0.1, 100_000, rng=SeededRandomness(3))
    # P[X != 0] ≈ 2e-22 at σ = 0.1.
    assert not samples.any()


def test_moments_and_tails_match_reference(reference_values: dict) -> None:
    n = 400_000
    for ref in reference_values["discrete_gaussian"]["values"]:
        sigma = float(ref["sigma"])
        x = discrete_gaussian(sigma, n, rng=SeededRandomness(int(sigma * 7919)))
        var = ref["variance"]
        assert abs(x.mean()) <= Z * math.sqrt(var / n), f"mean at sigma={sigma}"
        sample_var = float(np.mean(x.astype(np.float64) ** 2))
        assert abs(sample_var - var) <= Z * math.sqrt(ref["var_of_sample_variance_per_n"] / n), (
            f"variance at sigma={sigma}"
        )
        for tail in ref["tails"]:
            p = tail["P_abs_X_ge_t"]
            if p * n < 20:  # too rare to test at this n
                continue
            hits = int(np.count_nonzero(np.abs(x) >= tail["t"]))
            assert stats.binomtest(hits, n, p).pvalue > ALPHA, f"tail t={tail['t']} sigma={sigma}"


@pytest.mark.parametrize("sigma", [1e6, 1e9])
def test_mean_and_variance_large_sigma(sigma: float) -> None:
    n = 200_000
    x = discrete_gaussian(sigma, n, rng=SeededRandomness(int(math.log2(sigma)))).astype(np.float64)
    # For σ >= 1 the variance equals σ² to within 1e-7 relative (reference values).
    assert abs(x.mean()) <= Z * sigma / math.sqrt(n)
    assert abs(np.mean(x**2) / sigma**2 - 1) <= Z * math.sqrt(2 / n)


def test_successive_calls_are_independent() -> None:
    n = 200_000
    a = discrete_gaussian(3.0, n).astype(np.float64)
    b = discrete_gaussian(3.0, n).astype(np.float64)
    # Under independence, sqrt(n)·r is approximately N(0, 1).
    assert abs(np.corrcoef(a, b)[0, 1]) * math.sqrt(n) <= Z
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) * math.sqrt(n) <= Z
    table = np.zeros((3, 3))
    np.add.at(table, (np.sign(a).astype(int) + 1, np.sign(b).astype(int) + 1), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


@pytest.mark.slow
def test_exact_path_alone_has_the_right_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make the float fast path decide nothing: every coin goes to integer arithmetic.
    def undecided(k: np.ndarray, x_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        none = np.zeros(k.shape, dtype=bool)
        return none, none.copy()

    monkeypatch.setattr(sampler, "fast_coin", undecided)
    for sigma in (0.7, 2.0):
        samples = discrete_gaussian(sigma, 6_000, rng=SeededRandomness(5))
        assert chi_square_pvalue(samples, sigma, bins=12) > ALPHA


def test_gaussian_mechanism_noise_has_calibrated_scale() -> None:
    rho, delta_2 = 0.02, 3.0
    sigma = delta_2 / math.sqrt(2 * rho)
    n = 100_000
    ints = noise.gaussian_mechanism(np.zeros(n, dtype=np.int64), delta_2, rho)
    reals = noise.gaussian_mechanism(np.full(n, 0.25), delta_2, rho) - 0.25
    for noisy in (ints.astype(np.float64), reals):
        assert abs(np.mean(noisy**2) / sigma**2 - 1) <= Z * math.sqrt(2 / n) + 1e-3


def test_parallel_draws_have_the_right_shape_and_scale() -> None:
    # The release's threaded path (OS CSPRNG only): each vector is N_Z(0, σ²).
    # At 10^6 samples the sample std is within 0.5% of σ with overwhelming probability
    # (its relative sd is about 0.07%).

    sigmas = [3.0, 1e6, 40.0]
    draws = noise_vectors([NoiseDraw("gaussian", s) for s in sigmas], 1_000_000, None)
    assert [d.shape for d in draws] == [(1_000_000,)] * 3
    assert all(d.dtype == np.int64 for d in draws)
    for sigma, draw in zip(sigmas, draws, strict=True):
        assert draw.std() == pytest.approx(sigma, rel=0.005)
