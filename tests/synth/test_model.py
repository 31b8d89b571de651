"""The graphical-model estimator (privframe.synth.model): recovery, consistency, noise, samples.

The statistical test (noisy measurements) is a one-sided paired test over
``REPS`` fixed seeds at significance 0.001 (z = 3.09): the estimate's mean
squared error to the truth must be below the raw measurements' by more than z
standard errors of the paired differences. With these seeds the estimate's
mean squared error is 0.40 of the measurements' on average (z = 18.6): the
model pools each pair with the one-way measurements of its columns and with
the pairs sharing a column. Seeds are fixed, so the outcome is reproducible;
the significance states what the test can tell apart.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privframe.errors import InvalidValueError
from privframe.synth.model import Measured, Model, estimate, model_size

DOMAIN = {"a": 2, "b": 3, "c": 2, "d": 3, "e": 2}
# A tree: b is the parent of a, c and d; e hangs off d.
EDGES = [("a", "b"), ("b", "c"), ("b", "d"), ("d", "e")]
N = 1000.0
REPS = 30
Z = 3.09  # one-sided, significance 0.001


def _joint(seed: int) -> np.ndarray:
    """A random joint distribution over DOMAIN that factorizes along EDGES (brute force)."""
    rng = np.random.default_rng(seed)
    names = list(DOMAIN)
    joint = np.ones(tuple(DOMAIN.values()))
    for pair in EDGES:
        factor = rng.dirichlet(np.ones(DOMAIN[pair[0]] * DOMAIN[pair[1]])).reshape(
            DOMAIN[pair[0]], DOMAIN[pair[1]]
        )
        shape = [DOMAIN[c] if c in pair else 1 for c in names]
        joint = joint * factor.reshape(shape)
    return joint / joint.sum()


def _true(joint: np.ndarray, columns: tuple[str, ...]) -> np.ndarray:
    names = list(DOMAIN)
    summed = joint.sum(axis=tuple(k for k, c in enumerate(names) if c not in columns))
    held = [c for c in names if c in columns]
    return N * summed.transpose([held.index(c) for c in columns])


def _measure(joint: np.ndarray, sigma: float, rng: np.random.Generator | None) -> list[Measured]:
    out = []
    for pair in EDGES:
        exact = _true(joint, pair)
        noise = 0.0 if rng is None else rng.normal(0, sigma, exact.shape)
        out.append(Measured(pair, exact + noise, sigma))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noiseless_measurements_of_a_tree_are_recovered(seed: int) -> None:
    joint = _joint(seed)
    model = estimate(DOMAIN, _measure(joint, 1.0, None), iterations=3000)
    assert model.total == pytest.approx(N)
    for columns in [*EDGES, ("e", "a"), ("a", "c", "e"), ("d",), tuple(DOMAIN)]:
        np.testing.assert_allclose(model.marginal(columns), _true(joint, columns), atol=1e-6)


def test_marginals_are_consistent_non_negative_and_sum_to_total() -> None:
    rng = np.random.default_rng(7)
    model = estimate(DOMAIN, _measure(_joint(7), 30.0, rng))
    b_from_ab = model.marginal(("a", "b")).sum(axis=0)
    b_from_bd = model.marginal(("b", "d")).sum(axis=1)
    np.testing.assert_allclose(b_from_ab, b_from_bd, rtol=1e-9)
    np.testing.assert_allclose(model.marginal(("b",)), b_from_ab, rtol=1e-9)
    for r in range(1, len(DOMAIN) + 1):
        for columns in itertools.combinations(DOMAIN, r):
            values = model.marginal(columns)
            assert values.shape == tuple(DOMAIN[c] for c in columns)
            assert values.min() >= 0
            assert values.sum() == pytest.approx(model.total, rel=1e-9)


def test_marginals_match_the_brute_force_joint_of_a_triangulated_model() -> None:
    # A 4-cycle p-q-r-s gets a chord, t hangs off s, u is never measured: the
    # junction tree has fill, a chain and an empty separator. Every marginal
    # of every column set must be the joint's, the joint being exp(Σ θ_C)
    # normalised by brute force (the model's potentials, read directly).
    domain = {"p": 2, "q": 3, "r": 2, "s": 2, "t": 3, "u": 2}
    rng = np.random.default_rng(5)
    sets = [("p", "q"), ("q", "r"), ("r", "s"), ("s", "p"), ("s", "t")]
    measured = [Measured(s, rng.uniform(10, 100, tuple(domain[c] for c in s)), 5.0) for s in sets]
    model = estimate(domain, measured, iterations=100)
    names = list(domain)
    log_joint = np.zeros(tuple(domain.values()))
    for clique, theta in zip(model.cliques, model._potentials, strict=True):
        log_joint = log_joint + theta.reshape([domain[c] if c in clique else 1 for c in names])
    joint = np.exp(log_joint - log_joint.max())
    joint *= model.total / joint.sum()
    for r in range(1, len(domain) + 1):
        for columns in itertools.combinations(names, r):
            outside = tuple(k for k, c in enumerate(names) if c not in columns)
            np.testing.assert_allclose(model.marginal(columns), joint.sum(axis=outside), rtol=1e-9)
    # The cycle got one chord (p-r), so two triangles; u is a clique of its own.
    assert model.cliques == (("p", "q", "r"), ("p", "r", "s"), ("s", "t"), ("u",))


def test_marginal_axes_follow_the_order_asked() -> None:
    model = estimate(DOMAIN, _measure(_joint(4), 1.0, None), iterations=50)
    np.testing.assert_allclose(model.marginal(("e", "a")), model.marginal(("a", "e")).T)


def test_a_measurement_may_list_its_columns_in_any_order() -> None:
    values = np.arange(6.0).reshape(2, 3) + 1
    ab = estimate(DOMAIN, [Measured(("a", "b"), values, 1.0)])
    ba = estimate(DOMAIN, [Measured(("b", "a"), values.T, 1.0)])
    np.testing.assert_allclose(ba.marginal(("a", "b")), ab.marginal(("a", "b")))
    np.testing.assert_allclose(ab.marginal(("a", "b")), values, atol=1e-6)


def test_a_measurement_of_no_columns_is_the_total() -> None:
    model = estimate(DOMAIN, [Measured((), np.array(50.0), 1.0)])
    assert model.total == 50.0
    assert model.marginal(()).shape == ()
    assert float(model.marginal(())) == pytest.approx(50.0)
    np.testing.assert_allclose(model.marginal(("b",)), [50 / 3] * 3)


def test_a_column_never_measured_is_uniform_and_independent() -> None:
    ab = Measured(("a", "b"), np.arange(6.0).reshape(2, 3) + 10, 1.0)
    model = estimate({"a": 2, "b": 3, "z": 4}, [ab])
    joint = model.marginal(("a", "b", "z"))
    np.testing.assert_allclose(
        joint, np.repeat(model.marginal(("a", "b"))[:, :, None] / 4, 4, axis=2)
    )


@pytest.mark.statistical
def test_the_estimate_is_closer_to_the_truth_than_the_measurements() -> None:
    # Each pair is measured, and each column alone too: the model pools them.
    differences = []
    for seed in range(REPS):
        rng = np.random.default_rng(1000 + seed)
        joint = _joint(seed)
        measured = _measure(joint, 20.0, rng)
        measured += [
            Measured((c,), _true(joint, (c,)) + rng.normal(0, 20.0, DOMAIN[c]), 20.0)
            for c in DOMAIN
        ]
        model = estimate(DOMAIN, measured)
        raw = np.mean([np.mean((m.values - _true(joint, m.columns)) ** 2) for m in measured])
        fitted = np.mean(
            [np.mean((model.marginal(m.columns) - _true(joint, m.columns)) ** 2) for m in measured]
        )
        differences.append(raw - fitted)
    d = np.array(differences)
    assert d.mean() > Z * d.std(ddof=1) / np.sqrt(REPS)


def test_samples_match_the_model_clique_marginals_within_rounding() -> None:
    rng = np.random.default_rng(11)
    model = estimate(DOMAIN, _measure(_joint(11), 5.0, rng))
    rows = 100_000
    data = model.sample(rows, np.random.default_rng(12).random)
    assert data.shape == (rows, len(DOMAIN))
    assert data.dtype == np.int64
    assert (data.min(axis=0) >= 0).all()
    assert (data.max(axis=0) < np.array(list(DOMAIN.values()))).all()
    names = list(DOMAIN)
    for clique in model.cliques:
        at = [names.index(c) for c in clique]
        shape = tuple(DOMAIN[c] for c in clique)
        codes = np.ravel_multi_index(tuple(data[:, at].T), shape)
        counts = np.bincount(codes, minlength=int(np.prod(shape))).reshape(shape)
        expected = model.marginal(clique) * rows / model.total
        # Independent draws would miss by about sqrt(expected) (up to 180 here).
        # Rounding misses each cell by less than 1; a child's group sizes are sums of
        # rounded cells above, off by about one record. Seen here: at most 1.07.
        assert np.abs(counts - expected).max() < 3


def test_sampling_no_rows_gives_an_empty_table() -> None:
    model = estimate(DOMAIN, _measure(_joint(5), 1.0, None), iterations=10)
    data = model.sample(0, np.random.default_rng(0).random)
    assert data.shape == (0, len(DOMAIN))
    assert data.dtype == np.int64


def test_samples_are_reproducible_and_shuffled() -> None:
    model = estimate(DOMAIN, _measure(_joint(6), 1.0, None), iterations=50)
    first = model.sample(500, np.random.default_rng(3).random)
    np.testing.assert_array_equal(first, model.sample(500, np.random.default_rng(3).random))
    # Shuffled: the rows are not grouped by the root clique's cells.
    assert (np.diff(first[:, 0]) != 0).sum() > 100


def test_warm_start_reaches_the_cold_result_in_fewer_steps() -> None:
    rng = np.random.default_rng(21)
    joint = _joint(21)
    first = _measure(joint, 10.0, rng)
    extra = Measured(("a", "c"), _true(joint, ("a", "c")) + rng.normal(0, 10.0, (2, 2)), 10.0)
    before = estimate(DOMAIN, first)
    cold = estimate(DOMAIN, [*first, extra])
    warm = estimate(DOMAIN, [*first, extra], warm=before)
    assert warm.cliques == cold.cliques
    assert warm.loss == pytest.approx(cold.loss, rel=1e-3)
    for columns in [*EDGES, ("a", "c")]:
        np.testing.assert_allclose(warm.marginal(columns), cold.marginal(columns), atol=0.5)
    assert warm.iterations < cold.iterations


def test_a_warm_start_from_the_same_fit_stops_at_once() -> None:
    measured = _measure(_joint(8), 10.0, np.random.default_rng(8))
    first = estimate(DOMAIN, measured, iterations=3000)
    again = estimate(DOMAIN, measured, warm=first)
    assert again.iterations <= 12
    assert again.loss == pytest.approx(first.loss, rel=1e-4)


def test_extra_cliques_join_the_structure() -> None:
    model = estimate(DOMAIN, _measure(_joint(9), 1.0, None), cliques=[("a", "e")], iterations=5)
    assert any({"a", "e"} <= set(c) for c in model.cliques)


def test_total_is_the_inverse_variance_weighted_mean_of_the_sums() -> None:
    precise = Measured(("a",), np.array([60.0, 40.0]), 1.0)  # sum 100, variance 2
    rough = Measured(("b",), np.array([70.0, 60.0, 70.0]), 2.0)  # sum 200, variance 12
    model = estimate(DOMAIN, [precise, rough])
    assert model.total == pytest.approx((100 / 2 + 200 / 12) / (1 / 2 + 1 / 12))
    assert estimate(DOMAIN, [precise], total=500.0).total == 500.0
    assert estimate(DOMAIN, [Measured(("a",), np.array([-5.0, 2.0]), 1.0)]).total == 1.0


@pytest.mark.parametrize(
    ("cliques", "size"),
    [
        ([], 2 + 3 + 4 + 5),  # every column alone
        ([("a", "b"), ("b", "c")], 6 + 12 + 5),  # a chain: ab, bc, d
        ([("a", "b"), ("b", "c"), ("c", "a")], 24 + 5),  # a triangle: abc, d
        # A 4-cycle gets one chord: a-c makes abc (24) and acd (40); b-d would make 30 + 60.
        ([("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")], 24 + 40),
        ([("a", "b", "c", "d")], 120),
    ],
)
def test_model_size_counts_the_cells_of_the_maximal_cliques(
    cliques: list[tuple[str, ...]], size: int
) -> None:
    assert model_size({"a": 2, "b": 3, "c": 4, "d": 5}, cliques) == size


def test_model_size_matches_the_cliques_of_the_estimated_model() -> None:
    domain = {"a": 2, "b": 3, "c": 4, "d": 5}
    sets = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    measured = [Measured(s, np.ones(tuple(domain[c] for c in s)), 1.0) for s in sets]
    model = estimate(domain, measured, iterations=1)
    assert model_size(domain, sets) == sum(
        int(np.prod([domain[c] for c in clique])) for clique in model.cliques
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Measured(("a",), np.ones(2), 0.0), "sigma 0.0: it must be finite and positive"),
        (lambda: Measured(("a",), np.ones(2), float("nan")), "sigma nan"),
        (lambda: Measured(("a",), np.array([1.0, np.inf]), 1.0), "non-finite values"),
        (lambda: Measured(("a", "a"), np.ones((2, 2)), 1.0), "repeats a column"),
        (lambda: estimate(DOMAIN, [Measured(("x",), np.ones(2), 1.0)]), "unknown columns ['x']"),
        (lambda: estimate(DOMAIN, [Measured(("b",), np.ones(2), 1.0)]), "shape (2,)"),
        (lambda: estimate(DOMAIN, [], cliques=[("a", "y")]), "unknown columns ['y']"),
        (lambda: estimate(DOMAIN, []), "needs measurements or a total"),
        (lambda: estimate(DOMAIN, [], total=0.5), "at least 1"),
        (lambda: estimate({}, [], total=5.0), "the domain is empty"),
        (lambda: estimate({"a": 0}, [], total=5.0), "sizes are positive integers"),
        (lambda: model_size(DOMAIN, [("q",)]), "unknown columns ['q']"),
        (lambda: estimate(DOMAIN, [], total=5.0).marginal(("a", "w")), "unknown columns ['w']"),
        (lambda: estimate(DOMAIN, [], total=5.0).sample(-1, np.zeros), "rows"),
    ],
)
def test_invalid_input_is_refused_with_a_clear_message(make: object, message: str) -> None:
    with pytest.raises(InvalidValueError) as caught:
        make()  # type: ignore[operator]
    assert message in str(caught.value)


def test_a_warm_model_of_another_domain_is_refused() -> None:
    other: Model = estimate({"a": 2}, [], total=5.0)
    with pytest.raises(InvalidValueError, match="another domain"):
        estimate(DOMAIN, [], total=5.0, warm=other)
