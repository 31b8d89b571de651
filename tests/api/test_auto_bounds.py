"""Automatic bounds: ``bounds="auto"`` spends a stated share of the release choosing them."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
import scipy
from sql_setup import assert_same_plan

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan import auto_bounds

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

KEYS = ["a", "b", "c"]


def _frame(n: int = 3000) -> pl.DataFrame:
    """n people, 1-3 rows each in one of three groups; x in [10, 90], a few rows null."""
    rng = np.random.default_rng(3)
    rows = [
        (u, KEYS[u % 3], None if rng.random() < 0.02 else float(rng.uniform(10, 90)))
        for u in range(n)
        for _ in range(1 + u % 3)
    ]
    return pl.DataFrame(rows, schema=["u", "g", "x"], orient="row")


def _session(budget: object = None, seed: int = 1) -> pf.Session:
    return pf.Session(_frame(), "u", budget or pf.zCDP(100.0), rng=SeededRandomness(seed))


def _query(sess: pf.Session) -> pf.Query:
    return (
        sess.query()
        .bound(max_rows_per_group=3)
        .group_by("g", keys=KEYS)
        .agg(pf.sum("x", bounds="auto", missing="drop"), pf.mean("x", bounds="auto"))
    )


def test_a_release_charges_the_bounds_share_and_the_rest_as_two_entries() -> None:
    sess = _session()
    _query(sess).bounds_share(Fraction(1, 4)).release(rho=2, label="wages")
    entries = [(e.label, e.cost.exact_rho) for e in sess.ledger]
    assert entries == [("wages: bounds", Fraction(1, 2)), ("wages", Fraction(3, 2))]
    assert sess.spent.exact_rho == 2
    assert sess.ledger[0].description["auto_bounds"]["share"] == "1/4"


def test_the_chosen_bounds_cover_the_data_and_are_recorded_in_the_ledger() -> None:
    sess = _session()
    out = _query(sess).release(rho=50, with_error=True)
    chosen = sess.ledger[-1].description["auto_bounds"]["chosen"]
    for name in ("x_sum", "x_mean"):
        lower, upper = chosen[name]
        # Values in [10, 90], all positive: the lower bound is 0, the upper the top
        # half-octave bucket's edge; nothing is clipped.
        assert lower == 0
        assert 90 <= upper < 128
    exact = _frame().group_by("g").agg(pl.col("x").sum().alias("s")).sort("g")
    released = out.sort("g")
    error = (released["x_sum"] - exact["s"]).abs()
    assert (error <= 4 * released["x_sum_std"]).all()
    assert sess.ledger[-1].description["auto_bounds"]["bounds_rho"] == pytest.approx(5.0)


def test_per_unit_bounds_auto_clamps_each_units_total_at_chosen_bounds() -> None:
    sess = _session()
    q = sess.query().group_by("g", keys=KEYS).agg(pf.sum("x", per_unit_bounds="auto"))
    out = q.release(rho=50).sort("g")
    per_unit = (
        _frame().group_by("u", "g").agg(pl.col("x").sum()).group_by("g").agg(pl.col("x").sum())
    )
    assert np.allclose(out["x_sum"], per_unit.sort("g")["x"], rtol=2e-3)
    lower, upper = sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"]
    # Most people's totals are at most 3 × 90; the top bucket holds those in [181, 256).
    assert lower <= 10
    assert upper >= 256


def test_explain_states_the_share_and_the_rest_and_spends_nothing() -> None:
    sess = _session()
    explanation = _query(sess).bounds_share(0.2).explain(rho=1)
    assert explanation.plan.cost.exact_rho == Fraction(4, 5)
    note = explanation.notes[-1]
    assert "share 1/5 of the budget: rho = 0.2" in note
    assert "rest, rho = 0.8" in note
    assert "x_sum's, x_mean's bounds are chosen at release" in note
    assert sess.spent.rho == 0


@pytest.mark.parametrize("share", [0, -0.1, 1, 1.5, float("nan")])
def test_a_share_outside_zero_one_is_refused(share: float) -> None:
    with pytest.raises(pf.InvalidBudgetError, match=r"bounds_share must be a number in \(0, 1\)"):
        _query(_session()).bounds_share(share)


def test_a_share_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(pf.InvalidArgumentError, match="bounds_share must be a real number"):
        _query(_session()).bounds_share("half")  # type: ignore[arg-type]


def test_a_release_over_the_budget_reads_and_charges_nothing() -> None:
    sess = _session(pf.zCDP(1.0))
    with pytest.raises(pf.BudgetExceededError):
        _query(sess).release(rho=1.5)
    assert len(sess.ledger) == 0


def test_a_release_that_cannot_be_planned_is_refused_before_the_bounds_are_charged() -> None:
    sess = _session()
    q = sess.query().group_by("g", keys=KEYS).agg(pf.sum("x", bounds="auto"))  # no bound()
    with pytest.raises(pf.InvalidValueError, match="contribution limits"):
        q.release(rho=1)
    assert len(sess.ledger) == 0


def test_sessions_that_do_not_spend_rho_refuse_automatic_bounds() -> None:
    sess = _session(pf.PureDP(10.0))
    with pytest.raises(pf.InvalidValueError, match="measure a histogram with Gaussian noise"):
        _query(sess).release(epsilon=1)
    assert len(sess.ledger) == 0


def test_too_few_people_for_the_share_is_refused_after_the_share_is_spent() -> None:
    small = _frame().filter(pl.col("u") < 4)
    sess = pf.Session(small, "u", pf.zCDP(1.0), rng=SeededRandomness(2))
    with pytest.raises(pf.InvalidValueError, match="x_sum, x_mean shows nothing above its noise"):
        _query(sess).release(rho=0.01)
    assert [e.label for e in sess.ledger] == ["bounds"]
    assert sess.spent.exact_rho == Fraction(1, 1000)


def test_given_and_automatic_bounds_mix_in_one_query() -> None:
    sess = _session()
    q = (
        sess.query()
        .bound(max_rows_per_group=3)
        .agg(pf.sum("x", (0, 100)).alias("given"), pf.mean("x", bounds="auto"))
    )
    q.release(rho=10)
    assert set(sess.ledger[-1].description["auto_bounds"]["chosen"]) == {"x_mean"}
    assert sess.ledger[0].description["tune"]["histograms"][0]["histogram"] == "values of x"


def test_a_batch_that_does_not_fit_draws_no_bounds_histogram() -> None:
    sess = _session(pf.zCDP(1.0))
    plain = sess.query().bound(max_rows_per_group=1).agg(pf.count())
    with pytest.raises(pf.BudgetExceededError):
        sess.release_all([_query(sess).request(0.5), plain.request(0.75)])
    assert len(sess.ledger) == 0


def test_a_batch_whose_later_request_cannot_be_planned_draws_no_bounds_histogram() -> None:
    sess = _session()
    unbounded = sess.query().agg(pf.sum("x", (0, 1)))  # no bound(): refused by the planner
    with pytest.raises(pf.InvalidValueError, match="contribution limits"):
        sess.release_all([_query(sess).request(0.5), unbounded.request(0.5)])
    assert len(sess.ledger) == 0


def test_tune_refuses_automatic_bounds_and_charges_nothing() -> None:
    sess = _session()
    with pytest.raises(pf.InvalidValueError, match='bounds="auto" gives none'):
        _query(sess).tune(0.1, plan_rho=0.9)
    assert len(sess.ledger) == 0


# -- SQL: BigQuery's implicit bounds ----------------------------------------------------------

BIGQUERY = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e6, delta=1e-5, "
    "max_groups_contributed=3, privacy_unit_column=u) g, "
    "SUM(x) AS total, AVG(x) AS average, COUNT(*) AS n FROM data GROUP BY g"
)


def _bigquery_session(seed: int = 4) -> pf.Session:
    return pf.Session(
        _frame(),
        "u",
        pf.zCDP(1e9, delta=0.5),
        rng=SeededRandomness(seed),
        metadata={"g": pf.Column(keys=KEYS)},
    )


def test_sql_without_bounds_clamps_per_unit_at_bounds_chosen_with_a_share() -> None:
    sess = _bigquery_session()
    released = sess.sql(BIGQUERY)
    assert [e.label for e in sess.ledger] == [f"{BIGQUERY}: bounds", BIGQUERY]
    chosen = sess.ledger[-1].description["auto_bounds"]["chosen"]
    assert set(chosen) == {"total", "average", "n"}
    per_unit = (
        _frame()
        .group_by("u", "g")
        .agg(
            # BigQuery's per-unit SUM of only NULLs is NULL (skipped), as privframe's.
            total=pl.when(pl.col("x").count() > 0).then(pl.col("x").sum()),
            average=pl.col("x").mean(),
            n=pl.len(),
        )
    )
    for name in ("total", "average", "n"):
        lower, upper = chosen[name]
        low, high = per_unit[name].min(), per_unit[name].max()
        assert lower <= low  # nobody is clamped up
        assert upper >= high / 2**0.5  # at most the sparse top half-octave is clamped
    truth = per_unit.group_by("g").agg(pl.col("n").sum()).sort("g")
    assert released.sort("g")["n"].to_list() == truth["n"].to_list()  # counts never bind


def test_sql_and_builder_forms_of_implicit_bounds_are_one_plan() -> None:
    sql = _bigquery_session().parse_sql(BIGQUERY).query
    builder = (
        _bigquery_session()
        .query()
        .bound(max_groups=3)
        .group_by("g", keys=KEYS)
        .agg(
            pf.sum("x", per_unit_bounds="auto").alias("total"),
            pf.mean("x", per_unit_bounds="auto").alias("average"),
            pf.count(per_unit_bounds="auto").alias("n"),
        )
    )
    assert_same_plan(sql.plan, builder.plan)


def test_sql_without_a_privacy_clause_still_needs_bounds() -> None:
    sess = _bigquery_session()
    with pytest.raises(pf.SQLError, match="needs public bounds"):
        sess.sql("SELECT g, SUM(x) AS total FROM data GROUP BY g", rho=1)
    assert len(sess.ledger) == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_spread_down_to_zero_are_never_clipped_up_at_a_small_share(seed: int) -> None:
    # At rho = 0.001 each bucket near 0 is too thin to show above the noise, though together
    # they hold a third of the values: the lower bound must still be 0, not a bucket edge.
    rng = np.random.default_rng(seed)
    data = pl.DataFrame({"u": np.arange(3000), "x": rng.uniform(0, 50, 3000)})
    sess = pf.Session(data, "u", pf.zCDP(1.0), rng=SeededRandomness(seed))
    sess.query().bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto")).release(rho=0.001)
    lower, _ = sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"]
    assert lower == 0


def test_sql_counts_alone_without_bounds_clamp_per_unit_when_no_row_limit_is_given() -> None:
    text = BIGQUERY.replace("SUM(x) AS total, AVG(x) AS average, COUNT(*) AS n", "COUNT(*) AS n")
    sess = _bigquery_session()
    released = sess.sql(text)
    assert set(sess.ledger[-1].description["auto_bounds"]["chosen"]) == {"n"}
    truth = _frame().group_by("g").agg(pl.len()).sort("g")
    assert released.sort("g")["n"].to_list() == truth["len"].to_list()


def test_sql_counts_alone_with_a_session_row_limit_count_rows_up_to_it() -> None:
    text = BIGQUERY.replace("SUM(x) AS total, AVG(x) AS average, COUNT(*) AS n", "COUNT(*) AS n")
    sess = pf.Session(
        _frame(),
        "u",
        pf.zCDP(1e9, delta=0.5),
        rng=SeededRandomness(4),
        metadata={"g": pf.Column(keys=KEYS)},
        contributions=pf.Bound(max_rows_per_group=1),
    )
    released = sess.sql(text)
    assert "auto_bounds" not in sess.ledger[-1].description
    people = _frame().group_by("g").agg(pl.col("u").n_unique()).sort("g")
    assert released.sort("g")["n"].to_list() == people["u"].to_list()


def test_a_mixed_sql_query_says_which_call_clamps_per_unit_and_which_clamps_rows() -> None:
    sess = pf.Session(
        _frame().with_columns(y=pl.col("x")),
        "u",
        pf.zCDP(1e9, delta=0.5),
        metadata={"x": pf.Column(bounds=(0, 100))},
    )
    text = BIGQUERY.replace(
        "SUM(x) AS total, AVG(x) AS average, COUNT(*) AS n", "SUM(y) AS t, SUM(x) AS total"
    )
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(text)
    message = str(caught.value)
    assert "SUM(y) clamps each privacy unit's value in a group at bounds chosen at release" in (
        message
    )
    assert "and SUM(x) would clamp rows" in message
    assert len(sess.ledger) == 0


def test_explain_counts_the_bounds_share_in_its_cost_and_in_one_releases_epsilon() -> None:
    sess = pf.Session(_frame(), "u", pf.zCDP(10.0, delta=1e-5))
    q = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=3)
        .group_by("g")  # groups chosen privately: explain states this release's (ε, δ)
        .agg(pf.sum("x", bounds="auto"))
    )
    explanation = q.explain(rho=1.0)
    assert str(explanation).splitlines()[0] == (
        "release costs rho = 1, delta = 1e-05 (zCDP): rho = 0.1 choosing the bounds, then "
        "rho = 0.9 releasing with them (below)"
    )
    selection = explanation.plan.selection
    assert selection is not None

    def epsilon(e: object) -> float:
        return float(e.single_release(selection).split("epsilon = ")[1].split(" ")[0])  # type: ignore[attr-defined]

    rest_only = dataclasses.replace(explanation, bounds_cost=None)
    assert epsilon(explanation) > epsilon(rest_only)
    # A unit whose groups are all new still moves the bounds' histogram: no joint analysis.
    assert "joint analysis does not cover" in explanation.single_release(selection)
    assert "by the joint analysis" in rest_only.single_release(selection)


def test_a_bounds_share_without_automatic_bounds_is_refused_before_anything_is_spent() -> None:
    sess = _session()
    q = sess.query().bound(max_rows_per_group=1).bounds_share(0.2).agg(pf.sum("x", (0, 100)))
    with pytest.raises(pf.InvalidValueError, match="no aggregate of this query has them"):
        q.release(rho=1)
    with pytest.raises(pf.InvalidValueError, match="no aggregate of this query has them"):
        q.explain(rho=1)
    assert len(sess.ledger) == 0


def _heavy_tail(rho: float) -> pl.DataFrame:
    """5,000 people in [8, 11.3) and a sparse tail over the four half-octaves above, to 45.3.

    Each tail bucket holds about 4σ of the bounds' histogram at ``rho`` (σ and
    its threshold τ ≈ 5.9σ from the design): below τ, so ApproxBounds clips
    them all, and above the 2σ at which the model reads a raw bucket. The tail
    holds about 4% of the sum, far more than the release's noise.
    """
    plan = pf.Session(pl.DataFrame({"u": [0], "x": [1.0]}), "u", pf.zCDP(1)).query()
    plan = plan.bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto")).plan
    (piece,) = auto_bounds.design(plan, True, auto_bounds.split(plan, Fraction(rho))[0]).pieces
    sigma = piece.sigma_units / piece.l2_units
    assert piece.threshold / piece.l2_units > 5.5 * sigma  # the window [2σ, τ) holds 4σ
    per_bucket = round(4 * sigma)
    rng = np.random.default_rng(5)
    tail = [v for v in (13.0, 20.0, 28.0, 40.0) for _ in range(per_bucket)]
    x = [*rng.uniform(8, 11.2, 5000), *tail]
    return pl.DataFrame({"u": range(len(x)), "g": ["a"] * len(x), "x": x})


def test_public_groups_move_the_bounds_by_the_error_model_private_selection_keeps_approx_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rho = 0.2
    data = _heavy_tail(rho)
    calls = []
    model = auto_bounds.choose_bounds

    def spy(*args: object) -> dict[str, tuple[float, float]]:
        calls.append(args)
        return model(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(auto_bounds, "choose_bounds", spy)
    uppers = {}
    for keys in (["a"], None):
        budget = pf.zCDP(1.0, delta=1e-6)
        sess = pf.Session(data, "u", budget, rng=SeededRandomness(7))
        q = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g", keys=keys)
        q.agg(pf.sum("x", bounds="auto")).release(rho=rho)
        uppers[keys is None] = sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"][1]
    assert len(calls) == 1  # the public keys' release only
    # Private selection: ApproxBounds clips the tail at the bulk's top bucket, [8, 11.3).
    assert uppers[True] == pytest.approx(2**3.5)
    # Public keys: the model reads the tail's raw buckets and keeps (most of) it.
    assert uppers[False] >= 32


def test_on_a_heavy_tail_the_models_bounds_err_less_than_approx_bounds_paired() -> None:
    # Pareto(1.5) values, one per person: per seed the same noisy histogram chooses
    # ApproxBounds' bounds and the model's; each release's expected squared error given
    # its bounds (the exact clipping, squared, plus its noise variance) is compared in a
    # one-sided Wilcoxon signed-rank test at ALPHA.
    alpha, runs = 0.01, 30
    rng = np.random.default_rng(11)
    x = (rng.pareto(1.5, 5000) + 1) * 100
    data = pl.DataFrame({"u": np.arange(x.size), "x": x})
    true = x.sum()

    def expected_error(seed: int, approx: bool) -> float:
        sess = pf.Session(data, "u", pf.zCDP(0.5), rng=SeededRandomness(seed))
        q = sess.query().bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto"))
        if approx:
            with pytest.MonkeyPatch.context() as m:
                m.setattr(auto_bounds, "choose_bounds", lambda *args: dict(args[-1]))
                out = q.release(rho=0.5, with_error=True)
        else:
            out = q.release(rho=0.5, with_error=True)
        lower, upper = sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"]
        bias = np.clip(x, lower, upper).sum() - true
        return float((bias**2 + out["x_sum_std"].item() ** 2) / true**2)

    approx = np.array([expected_error(s, True) for s in range(runs)])
    model = np.array([expected_error(s, False) for s in range(runs)])
    assert (model != approx).sum() >= 10  # the model moves the bounds in most runs
    test = scipy.stats.wilcoxon(approx, model, alternative="greater", zero_method="wilcox")
    assert test.pvalue < alpha, (approx.mean(), model.mean())


def test_sql_without_bounds_in_a_session_in_epsilon_is_refused_as_needing_bounds() -> None:
    text = BIGQUERY.replace("SUM(x) AS total, AVG(x) AS average, COUNT(*) AS n", "COUNT(*) AS n")
    sess = pf.Session(_frame(), "u", pf.ApproxDP(10.0, 1e-5), metadata={"g": pf.Column(keys=KEYS)})
    with pytest.raises(pf.SQLError, match="max_rows_per_group"):
        sess.sql(text)
    assert len(sess.ledger) == 0


def test_a_refusal_after_the_share_names_only_the_outputs_whose_bounds_are_chosen() -> None:
    small = _frame().filter(pl.col("u") < 4)
    sess = pf.Session(small, "u", pf.zCDP(1.0), rng=SeededRandomness(2))
    q = (
        sess.query()
        .bound(max_rows_per_group=3)
        .agg(pf.sum("x", bounds="auto"), pf.quantile("x", 0.5, bounds=(0, 100)))
    )
    with pytest.raises(pf.InvalidValueError) as caught:
        q.release(rho=0.01)
    assert "the values of x_sum shows nothing" in str(caught.value)
