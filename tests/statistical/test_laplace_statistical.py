"""Statistical tests of the discrete Laplace sampler and the Laplace mechanism.

Significance: every test here rejects at the fixed level ALPHA = 1e-3 (two-sided
where it applies). Samples come from SeededRandomness streams so each run is
reproducible; the sampler's code path is the one the OS CSPRNG feeds, and one
test checks the OS-CSPRNG path (and one the threaded release path) at the same
level. The reference is the exact pmf P[X = x] = (1 − p)/(1 + p)·p^|x|,
p = e^(−1/b).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privframe.mechanisms import sampler
from privframe.mechanisms.draws import NoiseDraw, noise_vectors
from privframe.mechanisms.noise import (
    SeededRandomness,
    SystemRandomness,
    discrete_laplace,
    discrete_laplace_halfwidth,
    discrete_laplace_std,
    laplace_mechanism,
)

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3
Z = stats.norm.isf(ALPHA / 2)  # two-sided critical value
SCALES = [0.3, 1.0, 2 / 0.7, Fraction(20, 7), 37.5, 1e6]


def cdf(x: np.ndarray, scale: float) -> np.ndarray:
    """P(X <= x) of the discrete Laplace: p^-x/(1+p) below 0, 1 − p^(x+1)/(1+p) from 0."""
    inv = 1 / float(scale)
    p = math.exp(-inv)
    x = x.astype(np.float64)
    return np.where(x < 0, np.exp(x * inv) / (1 + p), 1 - np.exp(-(x + 1) * inv) / (1 + p))


def quantile(u: np.ndarray, scale: float) -> np.ndarray:
    """The smallest integer x with P(X <= x) >= u, by inverting :func:`cdf` (to float accuracy)."""
    b = float(scale)
    p = math.exp(-1 / b)
    low = u < 1 / (1 + p)
    with np.errstate(divide="ignore"):
        below = np.ceil(b * np.log(u * (1 + p)))
        above = np.ceil(-b * np.log((1 - u) * (1 + p))) - 1
    return np.where(low, below, above).astype(np.int64)


def chi_square_pvalue(samples: np.ndarray, scale: float, bins: int = 40) -> float:
    """Chi-square goodness of fit against the exact pmf.

    The bins are ~equiprobable integer ranges, split further into single atoms near 0
    where an atom expects at least 20 samples (a small scale has few quantiles), with
    the outer bins expecting at least 5.
    """
    n = samples.size
    atoms = np.arange(-20, 21)
    pmf = np.diff(cdf(np.arange(-21, 21), scale))  # P(X = x) for x in atoms
    quantiles = quantile(np.linspace(0, 1, bins + 1)[1:-1], scale)
    edges = np.union1d(quantiles, atoms[pmf * n >= 20])  # bin i holds values <= edges[i]
    while n * cdf(edges[:1], scale)[0] < 5:
        edges = edges[1:]
    while n * (1 - cdf(edges[-1:], scale)[0]) < 5:
        edges = edges[:-1]
    probs = np.diff(np.concatenate([[0.0], cdf(edges, scale), [1.0]]))
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=probs.size)
    return float(stats.chisquare(observed, probs * samples.size).pvalue)


@pytest.mark.parametrize("scale", SCALES, ids=str)
def test_chi_square_against_exact_pmf(scale: float) -> None:
    samples = discrete_laplace(scale, 400_000, rng=SeededRandomness(int(float(scale) * 1000)))
    assert chi_square_pvalue(samples, scale) > ALPHA


def test_chi_square_with_os_csprng() -> None:
    samples = discrete_laplace(2.5, 400_000, rng=SystemRandomness())
    assert chi_square_pvalue(samples, 2.5) > ALPHA


@pytest.mark.parametrize("scale", [0.3, 2 / 0.7, 1e6], ids=str)
def test_signs_are_fair_and_magnitudes_symmetric(scale: float) -> None:
    x = discrete_laplace(scale, 400_000, rng=SeededRandomness(int(scale * 77)))
    pos, neg = x[x > 0], -x[x < 0]
    assert stats.binomtest(pos.size, pos.size + neg.size, 0.5).pvalue > ALPHA
    # The magnitudes of positive and negative samples have one distribution.
    assert stats.mannwhitneyu(pos, neg).pvalue > ALPHA


def test_std_of_a_count_at_epsilon_one_half() -> None:
    # Δ₁ = 1, ε = 0.5: scale 2 and std sqrt(2p)/(1 − p) = 2.7992 (p = e^-1/2), close to
    # the continuous Laplace's sqrt(2)/ε = 2.83. The sample variance is within Z
    # standard errors sqrt((μ4 − σ⁴)/n), with μ4 from the exact pmf.
    n = 400_000
    noisy = laplace_mechanism(np.full(n, 100), 1.0, 0.5, rng=SeededRandomness(50))
    noise = (noisy - 100).astype(np.float64)
    p = math.exp(-0.5)
    support = np.arange(-400, 401, dtype=np.float64)
    pmf = (1 - p) / (1 + p) * p ** np.abs(support)
    var = float(np.sum(pmf * support**2))
    mu4 = float(np.sum(pmf * support**4))
    std = discrete_laplace_std(2.0)
    assert var == pytest.approx(std**2, rel=1e-12)
    assert abs(noise.mean()) <= Z * math.sqrt(var / n)
    assert abs(np.mean(noise**2) - var) <= Z * math.sqrt((mu4 - var**2) / n)
    assert std < math.sqrt(2) / 0.5


@pytest.mark.parametrize(("scale", "level"), [(1.0, 0.95), (2 / 0.7, 0.9), (37.5, 0.99)])
def test_halfwidth_coverage_matches_the_exact_probability(scale: float, level: float) -> None:
    n = 400_000
    h = discrete_laplace_halfwidth(scale, level)
    coverage = float(cdf(np.array([h]), scale)[0] - cdf(np.array([-h - 1]), scale)[0])
    assert coverage >= level
    x = discrete_laplace(scale, n, rng=SeededRandomness(int(scale * 13)))
    inside = int(np.count_nonzero(np.abs(x) <= h))
    assert stats.binomtest(inside, n, coverage).pvalue > ALPHA


def test_real_mechanism_noise_has_the_calibrated_spread() -> None:
    # Real values are noised on a grid far finer than the scale b = Δ₁/ε = 4: the noise is
    # a discrete Laplace of scale about b·2^j grid units, std within 2^-12 of that of b.
    n = 200_000
    noise = laplace_mechanism(np.full(n, 0.25), 2.0, 0.5, rng=SeededRandomness(4)) - 0.25
    expected = discrete_laplace_std(4.0)
    # The sample variance's relative sd is sqrt((κ − 1)/n) with κ <= 6 (a Laplace's).
    assert abs(np.mean(noise**2) / expected**2 - 1) <= Z * math.sqrt(5 / n) + 2**-11


def test_successive_calls_are_independent() -> None:
    n = 200_000
    a = discrete_laplace(3.0, n).astype(np.float64)
    b = discrete_laplace(3.0, n).astype(np.float64)
    # Under independence, sqrt(n)·r is approximately N(0, 1).
    assert abs(np.corrcoef(a, b)[0, 1]) * math.sqrt(n) <= Z
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) * math.sqrt(n) <= Z


def test_exact_path_alone_has_the_right_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make the float fast path decide nothing: every coin goes to integer arithmetic.
    def undecided(k: np.ndarray, x_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        none = np.zeros(k.shape, dtype=bool)
        return none, none.copy()

    monkeypatch.setattr(sampler, "fast_coin", undecided)
    for scale in (0.3, 2 / 0.7):
        samples = discrete_laplace(scale, 3_000, rng=SeededRandomness(5))
        assert chi_square_pvalue(samples, scale, bins=8) > ALPHA


def test_parallel_mixed_draws_have_the_right_spread() -> None:
    # The release's threaded path (OS CSPRNG only): each vector has its distribution's std.
    # At 10^6 samples the sample std is within 1% of it with overwhelming probability (its
    # relative sd is at most sqrt(5/(4n)) ≈ 0.11% for a Laplace).
    draws = [NoiseDraw("laplace", 2.0), NoiseDraw("gaussian", 40.0), NoiseDraw("laplace", 1e6)]
    vectors = noise_vectors(draws, 1_000_000, None)
    expected = [discrete_laplace_std(2.0), 40.0, discrete_laplace_std(1e6)]
    for vector, std in zip(vectors, expected, strict=True):
        assert vector.std() == pytest.approx(std, rel=0.01)
