"""Private quantiles: pf.quantile / pf.median, the exponential mechanism and the histogram engine.

The reference computations (candidates, positions, rank intervals, distances,
probabilities, histograms) are in ``tests/quantile_reference.py``, written from
the definitions alone; the statistical tests are in
``tests/statistical/test_quantiles_statistical.py``. Every random draw comes
from a fixed ``SeededRandomness`` stream, so every run is reproducible.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import random
import signal
from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd
import polars as pl
import pytest
from quantile_reference import (
    float_candidates,
    hist_distances,
    hist_of,
    hspec,
    interval_distance,
    log_probabilities,
    probabilities,
    ref_hist,
    ref_position,
    run,
    value_distances,
    value_intervals,
)

import privframe as pf
from privframe.engines.spec import COUNT
from privframe.mechanisms import noise, quantiles
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

ALPHA = 1e-3


# --------------------------------------------------------------------------- references


def capture_choose(
    monkeypatch: pytest.MonkeyPatch, hist: np.ndarray, q: float, eta: float
) -> tuple[np.ndarray, object]:
    """The (x̂, exact_x) that choose hands to the sampler."""
    seen: dict[str, object] = {}

    def fake(x_hat, exact_x, rng=None):
        seen["x_hat"] = np.array(x_hat, dtype=np.float64)
        seen["exact_x"] = exact_x
        return np.zeros(len(x_hat), dtype=np.int64)

    with monkeypatch.context() as m:
        m.setattr(quantiles, "exponential_choice", fake)
        quantiles.choose(hist, q, eta)
    return seen["x_hat"], seen["exact_x"]  # type: ignore[return-value]


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds`` (SIGALRM: main thread, Unix)."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_reference_distance_examples() -> None:
    # The reference itself, on hand-computed cases (3 candidates, 5 positions).
    assert hist_distances([0, 0, 4, 0, 0], 0.5) == [2, 0, 2]  # all tied on c_1
    assert hist_distances([0, 2, 0, 2, 0], 0.5) == [2, 0, 2]  # 2 rows between each pair
    assert hist_distances([1, 0, 1, 0, 1], Fraction(1, 2)) == [Fraction(1, 2), 0, Fraction(1, 2)]
    assert hist_distances([0, 0, 0, 0, 0], 0.3) == [0, 0, 0]  # empty: all equal
    grid = float_candidates(0, 1, 3)
    assert [ref_position(v, grid) for v in (-1.0, 0.0, 0.2, 0.5, 0.7, 1.0, 9.0)] == [
        0,
        0,
        1,
        2,
        3,
        4,
        4,
    ]
    assert value_intervals([0.5, 0.5, 0.7, None, math.nan], grid) == ([(0, 0), (0, 2), (3, 3)], 3)


# --------------------------------------------------------------------------- 1. sampling


def test_choose_hands_the_sampler_the_exact_distances(monkeypatch: pytest.MonkeyPatch) -> None:
    # Deterministic: for random (groups × (2N − 1)) position histograms (empty groups,
    # rows tied on candidates and between them, q·n not an integer, q ∈ {0, 1}, counts
    # up to 2^31), exact_x(g, i) = η·(d_i − min d) exactly and x̂ is within the
    # sampler's margin 2^-45·(1 + x) of it.
    rnd = random.Random(20260101)
    qs = [0.0, 1.0, 0.5, 0.1, 0.9, 0.3, 1 / 3, 0.25, 0.999]
    ties = 0
    for case in range(400):
        n_cand = rnd.randint(2, 9)
        groups = rnd.randint(1, 4)
        top = rnd.choice([1, 3, 10, 10**6, 2**31])
        hist = np.array(
            [
                [rnd.randint(0, top) if rnd.random() < 0.6 else 0 for _ in range(2 * n_cand - 1)]
                for _ in range(groups)
            ],
            dtype=np.int64,
        )
        if case % 7 == 0:
            hist[0] = 0  # an empty group: uniform
        if case % 5 == 0:
            hist[-1] = 0
            hist[-1, 2 * rnd.randrange(n_cand)] = rnd.randint(1, top)  # all tied on one c_i
        ties += int((hist[:, 0::2] > 0).any())
        q = rnd.choice([*qs, rnd.random()])
        eta = rnd.choice([1e-3, 0.7, 2.0, 64.0])
        x_hat, exact_x = capture_choose(monkeypatch, hist, q, eta)
        assert x_hat.shape == (groups, n_cand)
        for g in range(groups):
            d = hist_distances(hist[g], q)
            best = min(d)
            for i in range(n_cand):
                x = exact_x(g, i)  # type: ignore[operator]
                assert x == Fraction(eta) * (d[i] - best), (case, g, i)
                assert x_hat[g, i] >= 0
                assert abs(Fraction(float(x_hat[g, i])) - x) <= Fraction(2) ** -45 * (1 + x)
    assert ties > 300  # most cases have rows on candidates


def test_choose_with_zero_groups() -> None:
    out = quantiles.choose(np.zeros((0, 9), dtype=np.int64), 0.5, 1.0, rng=SeededRandomness(1))
    assert out.shape == (0,)


def test_exponential_choice_all_zero_rows_and_empty_input() -> None:
    x = np.zeros((3000, 4))
    out = noise.exponential_choice(x, lambda r, i: Fraction(0), rng=SeededRandomness(9))
    assert set(out.tolist()) == {0, 1, 2, 3}
    empty = noise.exponential_choice(np.zeros((0, 4)), lambda r, i: Fraction(0))
    assert empty.shape == (0,)


def test_rank_error_bounds_the_excess_distance_exactly() -> None:
    # Deterministic: under the exact output distribution, P(d_out > d_min + rank_error(p))
    # is at most 1 − p (the utility theorem), for random position histograms and η.
    rnd = random.Random(4)
    for _ in range(200):
        n_cand = rnd.randint(2, 60)
        row = [rnd.randint(0, 5) for _ in range(2 * n_cand - 1)]
        q = rnd.choice([0.0, 0.5, 0.9, 1.0, rnd.random()])
        eta = rnd.choice([0.02, 0.2, 1.0, 5.0])
        p = rnd.choice([0.5, 0.95, 0.999])
        d = hist_distances(row, q)
        probs = probabilities(d, eta)
        bound = quantiles.rank_error(eta, n_cand, p)
        excess = np.array([float(x - min(d)) for x in d])
        assert probs[excess > bound].sum() <= 1 - p + 1e-12
    assert quantiles.rank_error(2.0, 1001) == pytest.approx((math.log(1001) + math.log(20)) / 2)


# --------------------------------------------------------------------------- 2. privacy


PALETTE: list[float | None] = [None, math.nan, -math.inf, math.inf, -7.0, 0.0, 0.5, 1.0]
PALETTE += [1.25, 2.5, 3.0, 4.0, 4.2, 13.0]
BOUNDS = (0.0, 4.0)  # with N = 9: candidates 0, 0.5, ..., 4 (some values sit on them)
BR_GRID = float_candidates(*BOUNDS, 9)
BR_QS = [0.0, 0.1, 0.5, 0.9, 1.0, 0.3, 1 / 3]


def _random_values(
    rnd: random.Random, size: int, grid: Sequence[float] = BR_GRID
) -> list[float | None]:
    """Values anywhere: exactly on a candidate, from PALETTE, or uniform in [-1, 5]."""
    out: list[float | None] = []
    for _ in range(size):
        r = rnd.random()
        if r < 0.35:
            out.append(rnd.choice(grid))
        elif r < 0.65:
            out.append(rnd.choice(PALETTE))
        else:
            out.append(rnd.uniform(-1, 5))
    return out


def test_one_unit_moves_the_log_probabilities_within_the_bounded_range() -> None:
    # Deterministic brute force over neighbours D, D' = D + one unit with w <= m = 3
    # rows in the group (values anywhere: null, NaN, ±inf, outside the bounds, exactly
    # on a candidate, and blocks of rows tied on one candidate in D and in the unit,
    # often the same candidate). Exactly: max_i (d'_i − d_i) − min_i (d'_i − d_i)
    # <= 2·max(q, 1 − q)·w, and in floating point for the log-probabilities at two η.
    rnd = random.Random(11)
    m = 3
    attained = Fraction(0)
    shared_ties = 0
    for case in range(1500):
        w = rnd.randint(1, m)
        if case % 3 == 0:
            base = _random_values(rnd, rnd.randint(0, 10))
            unit = _random_values(rnd, w)
        else:
            # A tied block in D, plus a few other rows; the unit ties on the same
            # candidate (case % 3 == 1) or on random candidates.
            c = rnd.choice(BR_GRID)
            base = [c] * rnd.randint(1, 8) + _random_values(rnd, rnd.randint(0, 3))
            unit = [c] * w if case % 3 == 1 else [rnd.choice(BR_GRID) for _ in range(w)]
            rnd.shuffle(base)
        on_base = {ref_position(v, BR_GRID) for v in base} - {None}
        on_unit = {ref_position(v, BR_GRID) for v in unit} - {None}
        shared_ties += any(p % 2 == 0 for p in on_base & on_unit)
        intervals, n = value_intervals(base, BR_GRID)
        intervals2, n2 = value_intervals(base + unit, BR_GRID)
        for q in BR_QS:
            spread = max(Fraction(q), 1 - Fraction(q))
            d = [interval_distance(a, b, Fraction(q) * n) for a, b in intervals]
            d2 = [interval_distance(a, b, Fraction(q) * n2) for a, b in intervals2]
            diff = [b - a for a, b in zip(d, d2, strict=True)]
            assert max(abs(x) for x in diff) <= spread * w  # each distance moves that little
            width = max(diff) - min(diff)
            assert width <= 2 * spread * w
            if q == 0.5:
                attained = max(attained, width / (2 * spread * w))
            for eta in (0.4, 3.0):
                ratio = log_probabilities(d, eta) - log_probabilities(d2, eta)
                assert ratio.max() - ratio.min() <= 2 * eta * float(spread) * w + 1e-9
    assert shared_ties > 500  # the unit often adds rows on a candidate D has rows on
    # The bound is attained, so the test would fail if the constant 2 were halved.
    assert attained == 1


def test_bounded_range_is_attained_by_a_constructed_pair() -> None:
    # D = four rows tied at the candidate 1, q = 1/2; the unit adds w = 2 rows tied at
    # the candidate 3. Candidates below 1 and above 3 gain (1 − q)·w = 1 of distance
    # (3 vs 2), candidates in (1, 3] lose q·w = 1 (1 vs 2): width 2 = 2·(1/2)·2.
    d = value_distances([1.0] * 4, 0.5, BR_GRID)
    d2 = value_distances([1.0] * 4 + [3.0, 3.0], 0.5, BR_GRID)
    assert d == [2, 2, 0, 2, 2, 2, 2, 2, 2]
    assert d2 == [3, 3, 0, 1, 1, 1, 1, 3, 3]
    diff = [b - a for a, b in zip(d, d2, strict=True)]
    assert max(diff) - min(diff) == 2
    eta = 1.7
    ratio = log_probabilities(d, eta) - log_probabilities(d2, eta)
    assert ratio.max() - ratio.min() == pytest.approx(2 * eta * 0.5 * 2, rel=1e-12)
    assert ratio.max() - ratio.min() > eta * 0.5 * 2 * 1.5  # beyond the halved constant


def test_engine_histograms_of_neighbours_differ_by_the_units_rows() -> None:
    # Adding a unit (w <= m rows in one key, including null, NaN, out-of-bounds values
    # and values exactly on candidates) changes only that key's histogram, by exactly
    # its non-null rows' positions.
    rnd = random.Random(12)
    lower, upper, n = -2.0, 6.0, 17
    grid = float_candidates(lower, upper, n)
    for trial in range(8):
        rows: dict[str, list] = {"u": [], "g": [], "x": []}
        for u in range(30):
            for _ in range(rnd.randint(1, 3)):
                rows["u"].append(u)
                rows["g"].append(rnd.choice("abc"))
                rows["x"].append(_random_values(rnd, 1, grid)[0])
        base = pl.DataFrame(rows, schema={"u": pl.Int64, "g": pl.String, "x": pl.Float64})
        key = rnd.choice("abc")
        added = _random_values(rnd, rnd.randint(1, 3), grid)
        added[0] = rnd.choice(grid)  # at least one row tied on a candidate
        extra = pl.DataFrame(
            {"u": [999] * len(added), "g": [key] * len(added), "x": added},
            schema=base.schema,
        )
        spec = hspec(keys=["a", "b", "c"], m=3, lower=lower, upper=upper, n=n, seed=trial)
        h = hist_of(run(base, spec), n)
        h2 = hist_of(run(pl.concat([base, extra]), spec), n)
        expected = np.zeros_like(h)
        expected["abc".index(key)] = ref_hist(added, grid)
        assert (h2 - h == expected).all()


# --------------------------------------------------------------------------- 3. cost


def test_scale_is_the_largest_feasible_eta_and_cost_is_the_formula() -> None:
    rnd = random.Random(3)
    for _ in range(3000):
        rho = 10 ** rnd.uniform(-9, 4)
        q = rnd.choice([0.0, 1.0, 0.5, 0.1, 0.9, rnd.random()])
        squares = rnd.choice([1, 2, 18, rnd.randint(1, 10**7)])
        eta = quantiles.scale(rho, q, squares)
        assert 0 < eta <= quantiles.MAX_SCALE
        spent = quantiles.cost(eta, q, squares)
        spread = max(Fraction(q), 1 - Fraction(q))
        assert spent == (Fraction(eta) * spread) ** 2 * squares / 2
        assert spent <= Fraction(rho)
        if eta < quantiles.MAX_SCALE:
            # Exactly the largest feasible float: the next one up costs too much.
            assert quantiles.cost(math.nextafter(eta, math.inf), q, squares) > Fraction(rho)
    assert quantiles.scale(1e9, 0.5, 1) == quantiles.MAX_SCALE
    assert quantiles.scale(0.5, 0.5, 1) == 2.0
    with pytest.raises(pf.InvalidBudgetError):
        quantiles.scale(0.0, 0.5, 1)


def test_scale_steps_up_when_the_first_estimate_is_rounded_low() -> None:
    # The float estimate sqrt(2ρ/S)/max(q, 1 − q) is 0.001639558681427656 here, one float
    # below the largest η that fits ρ: scale() must step up from it, not only down.
    rho, q, squares = 0.9122025791007018, 0.9, 837881
    eta = quantiles.scale(rho, q, squares)
    assert quantiles.cost(eta, q, squares) <= Fraction(rho)
    assert quantiles.cost(math.nextafter(eta, math.inf), q, squares) > Fraction(rho)
    assert eta > 0.001639558681427656


# When 2ρ/S is subnormal or underflows to 0, a float estimate of η is far off and a walk
# from it one float at a time never ends: scale() estimates exactly (Fractions), answers
# promptly, and refuses an η below 2^-500.
@pytest.mark.parametrize(
    ("rho", "q", "squares"),
    [(1e-300, 0.9, 10**30), (1e-10, 0.5, 10**308)],
    ids=["underflow-to-zero", "subnormal"],
)
def test_scale_is_prompt_when_2rho_over_s_underflows(rho, q, squares) -> None:
    with time_limit(0.5):
        try:
            eta = quantiles.scale(rho, q, squares)
        except pf.InvalidValueError:
            return
    assert 0 < eta <= quantiles.MAX_SCALE
    assert quantiles.cost(eta, q, squares) <= Fraction(rho)
    assert quantiles.cost(math.nextafter(eta, math.inf), q, squares) > Fraction(rho)


def test_planner_is_prompt_with_a_large_row_bound_at_a_small_rho() -> None:
    # The same bug through the public API (see above): S = 10^308, ρ = 1e-10.
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
    query = sess.query().bound(max_rows_per_group=10**154).agg(pf.median("x", bounds=(0, 10)))
    with time_limit(0.5):
        try:
            plan = query.explain(rho=1e-10).plan
        except pf.InvalidValueError:
            return
    (qm,) = plan.quantiles
    assert 0 < float(qm.exact_share) <= 1e-10


def _sample_frame() -> pl.DataFrame:
    rng = np.random.default_rng(1)
    n = 4000
    return pl.DataFrame(
        {
            "u": rng.integers(0, 800, n),
            "g": rng.choice(["a", "b", "c"], n),
            "x": rng.uniform(0, 100, n),
            "s": rng.choice(["p", "q"], n),
        }
    )


def round_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def test_planner_cost_shares_and_explain_text() -> None:
    sess = pf.Session(_sample_frame(), "u", pf.zCDP(5.0))
    query = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("g", keys=["a", "b", "c", "d"])
        .agg(
            pf.count(),
            pf.median("x", bounds=(0, 100)),
            pf.quantile("x", [0.1, 0.9], bounds=(0, 100), candidates=101),
        )
    )
    rho = 0.8
    explanation = query.explain(rho=rho)
    plan = explanation.plan
    assert plan.limits.squares == 18  # S = k·m² = 2·9
    assert len(plan.quantiles) == 3
    total = Fraction(0)
    for qm in plan.quantiles:
        share = Fraction(repr(rho)) / 4  # four outputs, equal weights, one measurement each
        agg = qm.aggregate
        assert qm.eta == quantiles.scale(float(share), agg.q, 18) or qm.eta == quantiles.scale(
            math.nextafter(float(share), 0), agg.q, 18
        )
        exact = quantiles.cost(qm.eta, agg.q, 18)
        assert qm.exact_share == share  # charged its share, which its cost fits
        assert exact <= share
        assert float(exact) == pytest.approx(float(share), rel=1e-12)  # η is not capped here
        total += qm.exact_share
        assert "S = 18" in qm.derivation
    total += sum((m.exact_share for m in plan.measurements), Fraction(0))
    assert plan.cost.exact_rho == total == Fraction(repr(rho))  # exactly the ρ asked
    assert plan.cost.delta == 0
    text = str(explanation)
    for qm in plan.quantiles:
        bound = quantiles.rank_error(qm.eta, qm.aggregate.candidates)
        assert qm.rank_error() == bound
        assert f"{bound:.4g} rows of rank" in text
        assert f"95% rank error <= {bound:.4g} rows" in text
    assert {row["output"] for row in explanation.rows} == {"count", "x_median", "x_p10", "x_p90"}
    assert sess.spent.rho == 0  # explain spends nothing


def test_planner_caps_eta_and_charges_the_whole_share() -> None:
    sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1e6))
    explanation = sess.query().agg(pf.median("x", bounds=(0, 10))).explain(rho=1e5)
    (qm,) = explanation.plan.quantiles
    assert qm.eta == quantiles.MAX_SCALE
    # A capped η costs 512, less than its share; the share is charged, as asked.
    assert round_up(quantiles.cost(quantiles.MAX_SCALE, 0.5, 1)) == 512.0
    assert explanation.plan.cost.rho == float(qm.exact_share) == 1e5
    assert "capped at 64, the sampler's margin: it costs rho = 512" in str(explanation)
    assert "the whole share 100000 is charged" in str(explanation)


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
@pytest.mark.parametrize(
    ("rho", "with_count"), [(1000.0, False), (1e6, True), (0.3, False)], ids=str
)
def test_a_release_with_a_median_spends_exactly_the_rho_asked(rho: float, with_count: bool) -> None:
    df = pl.DataFrame({"x": [1.0, 2.0, 3.0]})
    sess = pf.Session(df, None, pf.zCDP(2e6), rng=SeededRandomness(1))
    aggregates = [pf.median("x", bounds=(0, 10))] + ([pf.count()] if with_count else [])
    sess.query().agg(*aggregates).release(rho=rho)
    assert sess.spent.rho == rho
    (entry,) = sess.ledger
    assert entry.rho == rho
    # The ledger states the η used and the ρ charged for it: the whole share.
    (median,) = [m for m in entry.description["measurements"] if "eta" in m]
    quantile_events = [e for e in entry.description["events"] if e.get("rho", 0) > 0]
    assert median["eta"] <= quantiles.MAX_SCALE
    assert [e["rho"] for e in quantile_events] == [median["rho"]]
    others = sum(m["rho"] for m in entry.description["measurements"] if "eta" not in m)
    assert median["rho"] + others == pytest.approx(rho, rel=1e-12)


def test_weights_change_the_rho_split() -> None:
    sess = pf.Session(_sample_frame(), "u", pf.zCDP(5.0), rng=SeededRandomness(1))
    query = (
        sess.query()
        .bound(max_groups=3, max_rows_per_group=1)
        .group_by("g", keys=["a", "b", "c"])
        .agg(pf.count(), pf.median("x", bounds=(0, 100)))
    )
    even = query.explain(rho=1.0).plan
    tilted = query.explain(rho=1.0, weights={"x_median": 3.0}).plan
    assert float(even.quantiles[0].exact_share) == pytest.approx(0.5)
    assert float(tilted.quantiles[0].exact_share) == pytest.approx(0.75)
    assert float(tilted.measurement("count").exact_share) == pytest.approx(0.25)
    assert tilted.quantiles[0].eta == pytest.approx(even.quantiles[0].eta * math.sqrt(1.5))
    query.release(rho=1.0, weights={"x_median": 3.0})
    assert sess.ledger[-1].rho == tilted.cost.rho


def test_huge_row_bound_is_refused_at_plan_time_and_charges_nothing() -> None:
    # S = 10^400 is beyond the float range: refused like the same bound on count(), with
    # no OverflowError.
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
    query = sess.query().bound(max_rows_per_group=10**200)
    with pytest.raises(pf.InvalidValueError):
        query.agg(pf.count()).explain(rho=0.5)
    median = query.agg(pf.median("x", bounds=(0, 10)))
    with pytest.raises(pf.InvalidValueError, match="limits are too large"):
        median.explain(rho=0.5)
    with pytest.raises(pf.InvalidValueError, match="limits are too large"):
        median.release(rho=0.5)
    assert sess.spent.rho == 0
    assert sess.ledger == ()


# --------------------------------------------------------------------------- 4. engine


_SCHEMA = {"u": pl.Int64, "g": pl.String, "x": pl.Float64}
GRID = float_candidates(0.0, 100.0, 101)  # hspec's default grid: 0, 1, ..., 100


def _engine_data(seed: int = 0) -> pl.DataFrame:
    rnd = random.Random(seed)
    rows: dict[str, list] = {"u": [], "g": [], "x": []}
    for u in range(60):
        g = rnd.choice("abc")  # one key per unit, <= 2 rows: no bound binds below
        for _ in range(rnd.randint(1, 2)):
            rows["u"].append(u)
            rows["g"].append(g)
            # Half the values sit exactly on a candidate (an integer in 0..100).
            rows["x"].append(rnd.choice([rnd.uniform(-20, 120), float(rnd.randint(0, 100))]))
    return pl.DataFrame(rows)


def _brute(df: pl.DataFrame, key: str | None, grid: Sequence[float] = GRID) -> np.ndarray:
    rows = df if key is None else df.filter(pl.col("g") == key)
    return ref_hist(rows["x"].to_list(), grid)


@pytest.mark.parametrize("streaming", [False, True])
def test_engine_histogram_matches_brute_force_with_public_keys(streaming: bool) -> None:
    df = _engine_data()
    out = run(df, hspec(keys=["c", "a", "zz", "b"], m=2, k=1), streaming=streaming)
    assert out["g"].to_list() == ["c", "a", "zz", "b"]
    h = hist_of(out)
    for i, key in enumerate(["c", "a", "zz", "b"]):
        assert (h[i] == _brute(df, key)).all(), key
    assert not h[2].any()  # the absent public key: all zeros
    assert (h.sum(axis=1) == out[COUNT].to_numpy()).all()
    assert h[:, 0::2].sum() > 0  # rows tied on candidates were counted there
    assert h[:, 1::2].sum() > 0


def test_engine_histogram_observed_keys_and_global_group() -> None:
    df = pl.concat(
        [_engine_data(1), pl.DataFrame({"u": [500], "g": [None], "x": [5.0]}, schema=_SCHEMA)]
    )
    out = run(df, hspec(keys=None, group_by=("g",), m=2, k=1))
    assert out["g"].to_list() == ["a", "b", "c"]  # sorted, null key dropped
    h = hist_of(out)
    for i, key in enumerate(["a", "b", "c"]):
        assert (h[i] == _brute(df, key)).all()
    whole = run(df, hspec(keys=None, m=2, k=1))
    assert whole.height == 1
    assert (hist_of(whole)[0] == _brute(df, None)).all()


def test_engine_histogram_on_a_non_dyadic_grid() -> None:
    # Candidates -3, -8/3, ..., 7 (spacing 1/3, correctly rounded). The engine compares
    # exactly against the rounded candidates: every candidate itself is at an even
    # position, and its float neighbours (one ulp below and above) at the odd positions
    # around it, as are random values.
    lower, upper, n = -3.0, 7.0, 31
    grid = float_candidates(lower, upper, n)
    rnd = random.Random(5)
    values = [rnd.uniform(-5, 9) for _ in range(500)]
    values += grid
    values += [math.nextafter(c, -math.inf) for c in grid]
    values += [math.nextafter(c, math.inf) for c in grid]
    df = pl.DataFrame({"x": values})
    h = hist_of(run(df, hspec(unit=None, lower=lower, upper=upper, n=n)), n)[0]
    assert (h == ref_hist(values, grid)).all()
    assert (h[0::2] >= 1).all()
    assert h[0] >= 2  # c_0 and the values below it, clipped to c_0
    assert (h[1::2] >= 2).all()  # each gap holds the ulp neighbours of its two ends


def test_engine_ignores_null_and_nan_and_clips_out_of_bounds() -> None:
    values = [None, math.nan, -math.inf, -1e300, -5.0, 0.0, 0.5, 99.5, 100.0, 150.0, math.inf]
    values += [1e300, 42.0, -0.0]
    df = pl.DataFrame({"x": values}, schema={"x": pl.Float64})
    h = hist_of(run(df, hspec(unit=None)))[0]
    assert h.size == 201
    assert h.sum() == 12  # nulls and NaN have no position
    assert h[0] == 5  # -inf, -1e300, -5, 0 and -0.0 clip to (or equal) c_0 = 0
    assert h[1] == 1  # 0.5 is strictly between c_0 = 0 and c_1 = 1
    assert h[199] == 1  # 99.5 is strictly between c_99 and c_100
    assert h[200] == 4  # 100, 150, inf and 1e300: on c_100 = U
    assert h[84] == 1  # 42 is on c_42
    assert (h == ref_hist(values, GRID)).all()
    # An integer column works too: 3 and 7 are on candidates.
    ints = pl.DataFrame({"x": [3, 3, 7, None]}, schema={"x": pl.Int32})
    h = hist_of(run(ints, hspec(unit=None)))[0]
    assert (h == ref_hist([3, 3, 7, None], GRID)).all()
    assert h[6] == 2
    assert h[14] == 1


def test_engine_without_a_unit_counts_every_row() -> None:
    df = _engine_data(2).with_columns(pl.col("u") % 3)  # units repeat, but are ignored
    out = run(df, hspec(unit=None, keys=["a", "b", "c"], m=1))
    h = hist_of(out)
    for i, key in enumerate("abc"):
        assert (h[i] == _brute(df, key)).all()


def test_engine_cuts_a_heavy_unit_to_m_of_its_own_rows() -> None:
    # Unit 0 has 100 rows in key "a", all at 60 or above (some on candidates); 40 other
    # units one row each, on the candidates 0..39. With m = 3, exactly 3 of unit 0's
    # rows enter "a"'s histogram.
    heavy = [60.0 + 0.3 * j for j in range(100)]
    light = [float(j) for j in range(40)]
    df = pl.DataFrame({"u": [0] * 100 + list(range(1, 41)), "g": ["a"] * 140, "x": heavy + light})
    heavy_positions = ref_hist(heavy, GRID)
    assert heavy_positions[0::2].sum() > 0
    assert heavy_positions[1::2].sum() > 0
    chosen = set()
    for seed in range(6):
        out = run(df, hspec(keys=["a"], m=3, seed=seed))
        diff = hist_of(out)[0] - ref_hist(light, GRID)
        assert out[COUNT].to_list() == [43]
        assert diff.sum() == 3
        assert (diff >= 0).all()
        assert (diff <= heavy_positions).all()  # among its own values
        chosen.add(tuple(diff.tolist()))
    assert len(chosen) > 1  # a fresh seed picks other rows


def test_engine_max_groups_and_max_rows_bind() -> None:
    # Unit 0: one row in each of 5 keys (k = 2 keeps 2 of them). Unit 1: 5 rows in "a" and
    # 5 in "b" with m = 5, M = 6: weights rescaled to 3 and 3.
    df = pl.DataFrame(
        {
            "u": [0] * 5 + [1] * 10,
            "g": list("abcde") + ["a"] * 5 + ["b"] * 5,
            "x": [1.0, 2.0, 3.0, 4.0, 5.0] + [50.0] * 10,
        }
    )
    only0 = df.filter(pl.col("u") == 0)
    h0 = hist_of(run(only0, hspec(keys=list("abcde"), k=2, m=5, big_m=6)))
    assert h0.sum() == 2
    assert sorted(h0.sum(axis=1).tolist()) == [0, 0, 0, 1, 1]
    only1 = df.filter(pl.col("u") == 1)
    out = run(only1, hspec(keys=["a", "b"], k=2, m=5, big_m=6))
    assert hist_of(out).sum(axis=1).tolist() == [3, 3]
    assert hist_of(out)[:, 100].tolist() == [3, 3]  # 50 is on c_50: position 100
    assert out[COUNT].to_list() == [3, 3]


def test_engine_histogram_sums_to_the_bounded_count() -> None:
    # Random data and limits: the histogram of each key sums to the engine's bounded
    # count (no null values here) and never exceeds the unbounded histogram.
    rnd = random.Random(6)
    for trial in range(10):
        rows: dict[str, list] = {"u": [], "g": [], "x": []}
        for u in range(80):
            for _ in range(rnd.randint(1, 6)):
                rows["u"].append(u)
                rows["g"].append(rnd.choice("abcd"))
                rows["x"].append(rnd.choice([rnd.uniform(-10, 110), float(rnd.randint(0, 100))]))
        df = pl.DataFrame(rows)
        k = rnd.choice([1, 2, 3, None])
        m = rnd.choice([1, 2, 3])
        big_m = rnd.choice([None, 2, 4])
        out = run(df, hspec(keys=list("abcd"), k=k, m=m, big_m=big_m, seed=trial))
        h = hist_of(out)
        assert (h.sum(axis=1) == out[COUNT].to_numpy()).all()
        for i, key in enumerate("abcd"):
            assert (h[i] <= _brute(df, key)).all()


# --------------------------------------------------------------------------- 5. end to end


def test_pandas_in_pandas_out_with_error_columns() -> None:
    df = pd.DataFrame(
        {"u": np.arange(300) % 100, "g": ["a", "b", "c"] * 100, "x": np.linspace(0, 99, 300)}
    )
    sess = pf.Session(df, "u", pf.zCDP(2.0), rng=SeededRandomness(3))
    query = (
        sess.query()
        .bound(max_groups=3, max_rows_per_group=1)
        .group_by("g", keys=["a", "b"])
        .agg(pf.count(), pf.quantile("x", [0.25, 0.75], bounds=(0, 100), candidates=101))
    )
    out = query.release(rho=1.0, with_error=True)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [
        "g",
        "count",
        "count_std",
        "count_ci95",
        "x_p25",
        "x_p25_rank_ci95",
        "x_p75",
        "x_p75_rank_ci95",
    ]
    grid = set(float_candidates(0, 100, 101))
    assert set(out["x_p25"]) <= grid
    assert set(out["x_p75"]) <= grid
    plan = query.explain(rho=1.0).plan
    bounds = {qm.aggregate.output_name: qm.rank_error() for qm in plan.quantiles}
    assert (out["x_p25_rank_ci95"] == bounds["x_p25"]).all()
    assert (out["x_p75_rank_ci95"] == bounds["x_p75"]).all()


def test_global_quantile_over_a_lazyframe_and_an_empty_group() -> None:
    lazy = pl.DataFrame({"x": [float(v) for v in range(1, 100)]}).lazy()
    sess = pf.Session(lazy, None, pf.zCDP(1e3), rng=SeededRandomness(4))
    query = sess.query().agg(pf.median("x", bounds=(0, 100), candidates=101))
    (qm,) = query.explain(rho=100.0).plan.quantiles
    out = query.release(rho=100.0)
    assert out.columns == ["x_median"]
    grid = float_candidates(0, 100, 101)
    # n = 99, q·n = 49.5: candidate 50's interval [49, 50] holds it (distance 0), 49 and
    # 51 are 0.5 away and the rest at least 1.5. With η ≈ 28 any other output has
    # probability below 1e-5 (computed here), so the median must be 50.
    d = value_distances([float(v) for v in range(1, 100)], 0.5, grid)
    assert d[50] == 0
    assert 1 - probabilities(d, qm.eta)[50] < 1e-5
    assert out["x_median"][0] == grid[50] == 50.0
    empty = pl.DataFrame({"x": [1.0]}).clear()
    sess = pf.Session(empty, None, pf.zCDP(1.0), rng=SeededRandomness(5))
    out = sess.query().agg(pf.median("x", bounds=(0, 10), candidates=11)).release(rho=0.5)
    grid = float_candidates(0, 10, 11)
    assert out["x_median"][0] in grid  # n = 0: uniform on the grid


def test_names_flattening_and_candidates() -> None:
    qs = pf.quantile("x", [0.25, 0.5, 0.999], bounds=(0, 10))
    assert isinstance(qs, tuple)
    assert [a.output_name for a in qs] == ["x_p25", "x_p50", "x_p99.9"]
    assert pf.median("x", bounds=(0, 10)).output_name == "x_median"
    assert pf.median("x", bounds=(0, 10)).q == 0.5
    assert pf.quantile("x", 0.5, bounds=(0, 10)).alias("m").output_name == "m"
    agg = pf.quantile("x", 0.3, bounds=(-2, 3), candidates=6)
    assert agg.candidate_values() == [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
    assert all(type(c) is float for c in agg.candidate_values())
    assert agg.spacing == 1.0
    sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
    query = sess.query().agg(pf.count(), qs, pf.median("x", bounds=(0, 10)))
    assert [a.output_name for a in query.plan.aggregates] == [
        "count",
        "x_p25",
        "x_p50",
        "x_p99.9",
        "x_median",
    ]
    with pytest.raises(pf.InvalidValueError, match="both be called"):
        sess.query().agg(qs, pf.quantile("x", 0.5, bounds=(0, 10)))


def test_numpy_q_and_candidates_are_accepted() -> None:
    # A 1-D numpy array of q's is a sequence of q's; a numpy integer is a candidate count.
    from_numpy = pf.quantile("x", np.array([0.25, 0.75]), bounds=(0, 10), candidates=np.int64(11))
    from_list = pf.quantile("x", [0.25, 0.75], bounds=(0, 10), candidates=11)
    assert from_numpy == from_list
    assert isinstance(from_numpy, tuple)
    assert all(type(a.q) is float and type(a.candidates) is int for a in from_numpy)
    assert [a.output_name for a in from_numpy] == ["x_p25", "x_p75"]
    single = pf.quantile("x", np.float64(0.5), bounds=(0, 10), candidates=np.int32(3))
    assert single == pf.quantile("x", 0.5, bounds=(0, 10), candidates=3)
    assert type(single.candidates) is int
    assert single.candidate_values() == [0.0, 5.0, 10.0]
    # ... and releases like the list form.
    sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0, 3.0]}), None, pf.zCDP(1.0))
    out = sess.query().agg(from_numpy).release(rho=0.5)
    assert out.columns == ["x_p25", "x_p75"]


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: pf.quantile("x", 1.5, (0, 1)), pf.InvalidValueError, r"q must be in \[0, 1\]"),
        (lambda: pf.quantile("x", -0.1, (0, 1)), pf.InvalidValueError, r"q must be in \[0, 1\]"),
        (lambda: pf.quantile("x", math.nan, (0, 1)), pf.InvalidValueError, "q must be finite"),
        (lambda: pf.quantile("x", [0.5, math.nan], (0, 1)), pf.InvalidValueError, "q must be"),
        (lambda: pf.quantile("x", True, (0, 1)), pf.InvalidArgumentError, "q must be a real"),
        (lambda: pf.quantile("x", "0.5", (0, 1)), pf.InvalidArgumentError, "q must be a real"),
        (lambda: pf.quantile("x", [], (0, 1)), pf.InvalidValueError, "non-empty"),
        (lambda: pf.quantile("x", [0.5, 0.5], (0, 1)), pf.InvalidValueError, "distinct"),
        (
            lambda: pf.quantile("x", np.array([0.5, 0.5]), (0, 1)),
            pf.InvalidValueError,
            "distinct",
        ),
        (
            lambda: pf.quantile("x", np.array([[0.5]]), (0, 1)),
            pf.InvalidArgumentError,
            "q must be a real",
        ),
        (
            lambda: pf.quantile("x", np.array([1.5]), (0, 1)),
            pf.InvalidValueError,
            r"q must be in \[0, 1\]",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=1),
            pf.InvalidArgumentError,
            "candidates must be an integer >= 2",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=True),
            pf.InvalidArgumentError,
            "candidates must be an integer",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=np.True_),
            pf.InvalidArgumentError,
            "candidates must be an integer",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=11.0),
            pf.InvalidArgumentError,
            "candidates must be an integer",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=2**16 + 1),
            pf.InvalidValueError,
            r"candidates must be at most 2\*\*16",
        ),
        (
            lambda: pf.quantile("x", 0.5, (0, 1), candidates=np.int64(2**16 + 1)),
            pf.InvalidValueError,
            r"candidates must be at most 2\*\*16",
        ),
        (
            lambda: pf.median("x", (0, 1), candidates=0),
            pf.InvalidArgumentError,
            "candidates must be an integer >= 2",
        ),
        (lambda: pf.quantile("x", 0.5, (1, 0)), pf.InvalidValueError, "lower < upper"),
        (lambda: pf.median("x", (5, 5)), pf.InvalidValueError, "lower < upper"),
        (
            lambda: pf.median("x", (1.0, math.nextafter(1.0, 2.0)), candidates=3),
            pf.InvalidValueError,
            "too close for 3 distinct candidates",
        ),
        (
            lambda: pf.quantile("x", [0.1, 0.9], (0.0, 5e-324 * 100), candidates=1001),
            pf.InvalidValueError,
            "too close",
        ),
        (lambda: pf.quantile("", 0.5, (0, 1)), pf.InvalidArgumentError, "column must be"),
    ],
)
def test_invalid_quantile_arguments(make, error, match) -> None:
    with pytest.raises(error, match=match):
        make()


def test_candidates_limits_are_accepted() -> None:
    assert pf.quantile("x", 0.5, (0, 1), candidates=2).candidate_values() == [0.0, 1.0]
    assert pf.quantile("x", 0.5, (0, 1), candidates=2**16).candidates == 2**16
    # The closest bounds that still give distinct candidates are accepted.
    tight = pf.median("x", (1.0, math.nextafter(1.0, 2.0)), candidates=2)
    assert tight.candidate_values() == [1.0, math.nextafter(1.0, 2.0)]


@pytest.mark.parametrize(
    ("agg", "error", "match"),
    [
        (pf.median("s", bounds=(0, 1)), pf.InvalidArgumentError, "numeric"),
        (pf.quantile("nope", 0.5, bounds=(0, 1)), pf.InvalidValueError, "'nope' is not in"),
    ],
)
def test_release_refusals_charge_nothing(agg, error, match) -> None:
    sess = pf.Session(_sample_frame(), "u", pf.zCDP(1.0))
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count(), agg)
    with pytest.raises(error, match=match):
        query.release(rho=0.5)
    with pytest.raises(error, match=match):
        query.explain(rho=0.5)
    assert sess.spent.rho == 0
    assert sess.ledger == ()


def test_over_budget_release_charges_nothing_and_each_release_once() -> None:
    sess = pf.Session(_sample_frame(), "u", pf.zCDP(1.0), rng=SeededRandomness(6))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g", keys=["a", "b", "c"])
        .agg(pf.median("x", bounds=(0, 100)), pf.quantile("x", [0.2, 0.8], bounds=(0, 100)))
    )
    with pytest.raises(pf.BudgetExceededError):
        query.release(rho=2.0)
    assert sess.ledger == ()
    cost = query.explain(rho=0.4).plan.cost.rho
    query.release(rho=0.4)
    query.release(rho=0.4)
    assert [e.rho for e in sess.ledger] == [cost, cost]
    assert sess.spent.rho == pytest.approx(2 * cost)
    assert sess.ledger[0].description["outputs"] == ("x_median", "x_p20", "x_p80")


def test_ledger_description_lists_each_quantile_measurement_with_rho_and_eta() -> None:
    sess = pf.Session(_sample_frame(), "u", pf.zCDP(5.0), rng=SeededRandomness(13))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("g", keys=["a", "b", "c"])
        .agg(
            pf.count(),
            pf.mean("x", bounds=(0, 100)),
            pf.median("x", bounds=(0, 100)),
            pf.quantile("x", [0.2, 0.8], bounds=(0, 100), candidates=101),
        )
    )
    plan = query.explain(rho=1.0).plan
    query.release(rho=1.0)
    (entry,) = sess.ledger
    described = [dict(m) for m in entry.description["measurements"]]
    assert len(described) == len(plan.measurements) + len(plan.quantiles) == 5
    with_eta = [m for m in described if "eta" in m]
    assert with_eta == [
        {"key": qm.key, "rho": float(qm.exact_share), "eta": qm.eta} for qm in plan.quantiles
    ]
    with_sigma = [m for m in described if "sigma" in m]
    assert with_sigma == [
        {"key": m.key, "rho": float(m.exact_share), "sigma": m.sigma} for m in plan.measurements
    ]
    keys = [m["key"] for m in described]
    assert len(set(keys)) == len(keys)
    squares = plan.limits.squares
    for m, qm in zip(with_eta, plan.quantiles, strict=True):
        # The listed ρ is the quantile's share; the listed η's exact cost (recomputed
        # here) fits within it.
        spread = max(Fraction(qm.aggregate.q), 1 - Fraction(qm.aggregate.q))
        assert (Fraction(m["eta"]) * spread) ** 2 * squares / 2 <= Fraction(m["rho"])
        assert m["eta"] > 0
    assert entry.exact_rho == plan.cost.exact_rho == 1
    assert sum(m["rho"] for m in described) == pytest.approx(entry.rho, rel=1e-15)


# --------------------------------------------------------------------------- ties and edges


# Values tied on a candidate: a candidate's distance is to its rank interval
# [#{v < c_i}, #{v <= c_i}], so rows equal to a candidate count. With all values on one
# candidate (or all above U, clipped to c_{N−1}) that candidate is released, not a uniform
# draw over [L, U]; ratings 3 (55%) and 5 (45%) on the grid 1..5 have median 3.
# Each case: (values repeated to 2,000 rows per group, bounds, candidates, {q: expected}).
TIE_CASES = {
    # Every value on one interior candidate: 500 for every q.
    "point-mass": ([500.0], (0, 1000), 1001, {0.1: 500.0, 0.5: 500.0, 0.9: 500.0}),
    # Every value above U: all clipped to U.
    "all-above-upper-bound": ([5000.0], (0, 1000), 1001, {0.1: 1000.0, 0.5: 1000.0, 0.9: 1000.0}),
    # Ratings: 55% at 3, 45% at 5. p25 and median 3, p75 5.
    "ratings": ([3.0] * 11 + [5.0] * 9, (1, 5), 5, {0.25: 3.0, 0.5: 3.0, 0.75: 5.0}),
}


@pytest.mark.parametrize("case", list(TIE_CASES))
def test_tied_values_are_counted_at_their_candidate(case: str) -> None:
    values, bounds, candidates, expected = TIE_CASES[case]
    keys = [f"k{i}" for i in range(20)]
    reps = 2000 // len(values)
    group_values = values * reps
    df = pl.DataFrame({"g": np.repeat(keys, len(group_values)), "x": group_values * len(keys)})
    sess = pf.Session(df, None, pf.zCDP(10.0), rng=SeededRandomness(10))
    query = (
        sess.query()
        .group_by("g", keys=keys)
        .agg(pf.quantile("x", list(expected), bounds=bounds, candidates=candidates))
    )
    plan = query.explain(rho=1.0).plan
    grid = float_candidates(*bounds, candidates)
    # The reference: the expected value is the only candidate at distance 0, and the
    # chance that any of the 20 groups releases another candidate is far below ALPHA
    # (P(not best) <= Σ_{i≠best} exp(−η·(d_i − d_best)), in logs to avoid underflow).
    log_fail = -math.inf
    for qm in plan.quantiles:
        d = value_distances(group_values, qm.aggregate.q, grid)
        best = grid.index(expected[qm.aggregate.q])
        assert d[best] == 0
        assert sorted(d)[1] >= 100  # every other candidate is >= 100 rows away
        for i, di in enumerate(d):
            if i != best:
                log_fail = np.logaddexp(log_fail, math.log(len(keys)) - qm.eta * float(di))
    assert log_fail < math.log(ALPHA) - 100
    out = query.release(rho=1.0)
    assert out["g"].to_list() == keys
    for q, value in expected.items():
        name = pf.quantile("x", q, bounds=bounds).output_name
        assert out[name].to_list() == [value] * len(keys), (case, q)


def test_tied_values_give_the_point_mass_at_moderate_rho() -> None:
    # One group of 200 rows all at 500, bounds (0, 1000): at ρ = 0.02 (η = 0.4) every
    # other candidate is 100 rows away, so the median is 500 with probability
    # >= 1 − 1000·e^{−40} (the first version: 1/1001). 20 seeded releases must all give
    # exactly 500.
    df = pl.DataFrame({"x": [500.0] * 200})
    sess = pf.Session(df, None, pf.zCDP(10.0), rng=SeededRandomness(21))
    query = sess.query().agg(pf.median("x", bounds=(0, 1000)))
    (qm,) = query.explain(rho=0.02).plan.quantiles
    assert qm.eta == pytest.approx(0.4)
    assert 20 * 1000 * math.exp(-qm.eta * 100) < ALPHA
    released = [query.release(rho=0.02)["x_median"][0] for _ in range(20)]
    assert released == [500.0] * 20


# Private key selection that keeps no group (or data without rows, observed keys): the
# charged release is an empty frame with the full column list, not an error.
def test_no_selected_group_releases_an_empty_frame() -> None:
    df = pl.DataFrame({"u": range(10), "g": [f"k{i}" for i in range(10)], "x": [1.0] * 10})
    sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6), rng=SeededRandomness(2))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g")
        .agg(pf.count(), pf.median("x", bounds=(0, 10)))
    )
    out = query.release(rho=0.5, with_error=True)  # ten one-unit groups: none survives
    assert out.height == 0
    assert out.columns == [
        "g",
        "count",
        "count_std",
        "count_ci95",
        "x_median",
        "x_median_rank_ci95",
    ]
    assert len(sess.ledger) == 1
    # No rows at all, observed keys: nothing to select from.
    empty = pf.Session(df.clear(), "u", pf.zCDP(1.0, delta=1e-6), rng=SeededRandomness(3))
    out = (
        empty.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g")
        .agg(pf.quantile("x", [0.25, 0.75], bounds=(0, 10)))
        .release(rho=0.5)
    )
    assert out.height == 0
    assert out.columns == ["g", "x_p25", "x_p75"]
    assert len(empty.ledger) == 1


# Each candidate is correctly rounded once (7.0, not 7.000000000000001, for bounds
# (0, 100) and 101 candidates), also for bounds near the float range (no overflow) and
# non-dyadic spacings.
@pytest.mark.parametrize(
    ("bounds", "n"),
    [
        ((0, 100), 101),
        ((0, 1000), 1001),
        ((-1, 1), 201),
        ((0.1, 0.7), 7),
        ((-3, 7), 31),
        ((-1.7976931348623157e308, 1.7976931348623157e308), 1001),
        ((1e-300, 3e-300), 11),
    ],
)
def test_candidate_values_are_the_correctly_rounded_grid(bounds, n) -> None:
    values = pf.median("x", bounds=bounds, candidates=n).candidate_values()
    assert values == float_candidates(*bounds, n)
    assert values[0] == bounds[0]
    assert values[-1] == bounds[-1]
    assert all(a < b for a, b in itertools.pairwise(values))
    if bounds == (0, 100):
        assert values[7] == 7.0
        assert values[29] == 29.0
        assert values[57] == 57.0
