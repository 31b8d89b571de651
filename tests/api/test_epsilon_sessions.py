"""Pure-DP and (ε, δ) sessions through Session.release: budgets, noise, refusals, SQL."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
import scipy

import privframe as pf

REGIONS = ["n", "s", "e", "w"]


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(7)
    n = 400
    return pl.DataFrame(
        {
            "uid": rng.integers(0, 100, n),
            "region": rng.choice(REGIONS, n),
            "amount": rng.uniform(0, 100, n),
        }
    )


def _session(budget: pf.PureDP | pf.ApproxDP | pf.zCDP) -> pf.Session:
    return pf.Session(_frame(), "uid", budget)


def _count(sess: pf.Session, k: int = 1, m: int = 2) -> pf.Query:
    return (
        sess.query()
        .bound(max_groups=k, max_rows_per_group=m)
        .group_by("region", keys=REGIONS)
        .agg(pf.count())
    )


def test_ten_pure_releases_at_a_tenth_spend_exactly_one() -> None:
    sess = _session(pf.PureDP(1.0))
    for _ in range(10):
        _count(sess).release(epsilon=0.1)
    assert sess.spent == pf.PureDP(1)
    assert sess.remaining == pf.PureDP(0)
    with pytest.raises(pf.BudgetExceededError):
        _count(sess).release(epsilon=0.1)
    assert len(sess.ledger) == 10


def test_a_pure_release_that_does_not_fit_is_refused_before_the_data_is_read() -> None:
    sess = _session(pf.PureDP(0.5))
    with pytest.raises(pf.BudgetExceededError):
        _count(sess).release(epsilon=0.75)
    assert sess.spent == pf.PureDP(0)
    assert len(sess.ledger) == 0


def test_rho_in_an_epsilon_session_is_refused_saying_to_pass_epsilon() -> None:
    for budget in (pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6)):
        sess = _session(budget)
        with pytest.raises(pf.InvalidArgumentError, match="epsilon=") as caught:
            _count(sess).release(rho=0.1)
        assert caught.value.__context__ is None
        with pytest.raises(pf.InvalidArgumentError, match="epsilon="):
            _count(sess).release(0.1)
        assert len(sess.ledger) == 0


def test_epsilon_in_a_zcdp_session_is_refused_saying_to_pass_rho() -> None:
    sess = _session(pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="rho=") as caught:
        _count(sess).release(epsilon=0.1)
    assert "PureDP" in str(caught.value)
    assert len(sess.ledger) == 0


def test_a_pure_count_is_calibrated_to_its_derived_l1_sensitivity() -> None:
    sess = _session(pf.PureDP(1.0))
    explanation = _count(sess, k=3, m=2).explain(epsilon=0.5)
    (m,) = explanation.measurements
    assert m.family == "laplace"
    assert m.sensitivity == 6.0  # k·m
    assert m.scale_units == 12.0  # Δ₁/ε
    text = str(explanation)
    assert "L1 sensitivity W = 6" in text
    assert "W = k·m = 6" in text
    assert "release costs epsilon = 0.5 (pure DP)" in text


def test_a_pure_sum_is_calibrated_to_w_times_half_the_range() -> None:
    sess = _session(pf.PureDP(1.0))
    q = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("region", keys=REGIONS)
        .agg(pf.sum("amount", (0, 100)))
    )
    by_kind = {m.kind: m for m in q.explain(epsilon=1.0).measurements}
    assert by_kind["count"].sensitivity == 6
    m = by_kind["centred_sum"]
    assert m.sensitivity == pytest.approx(6 * 50, rel=1e-9)
    assert "L1 sensitivity W·(U−L)/2 = 6·50" in m.derivation


def test_the_noise_of_a_pure_count_has_the_discrete_laplace_std() -> None:
    # 2,000 public keys that no row holds: each output is a noisy zero with
    # discrete Laplace noise of scale Δ₁/ε = 2 at ε = 0.5 (Δ₁ = 1).
    keys = [f"k{i}" for i in range(2000)]
    frame = pl.DataFrame({"uid": [1], "region": ["none"]})
    sess = pf.Session(frame, "uid", pf.PureDP(1.0))
    released = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=keys)
        .agg(pf.count())
        .release(epsilon=0.5, clamp=False)
    )
    noise = released["count"].to_numpy().astype(float)
    p = np.exp(-1 / 2)
    variance = 2 * p / (1 - p) ** 2  # ≈ 7.83, std ≈ 2.80 ≈ sqrt(2)/0.5
    n = noise.size
    # Two-sided z-test of the sample variance at the fixed level 1e-3, with the
    # band from the discrete Laplace's exact fourth moment (heavier than a normal's).
    fourth = 2 * p * (1 + 10 * p + p * p) / (1 - p) ** 4
    z = (noise.var(ddof=1) - variance) / np.sqrt((fourth - variance**2) / n)
    critical = scipy.stats.norm.ppf(1 - 1e-3 / 2)
    assert abs(z) < critical
    assert abs(noise.mean()) < critical * np.sqrt(variance / n)


def test_an_approx_release_chooses_laplace_for_one_group_and_gaussian_for_many() -> None:
    # Laplace's std grows as k (L1 = k), the Gaussian's as sqrt(k) (L2 = sqrt(k)): at
    # epsilon = 1, delta = 1e-6 the Gaussian wins from about k = 11 on.
    sess = _session(pf.ApproxDP(2.0, 1e-5))
    one = _count(sess, k=1, m=1).explain(epsilon=1.0, delta=1e-6)
    many = (
        sess.query()
        .bound(max_groups=16, max_rows_per_group=1)
        .group_by("region", keys=[*REGIONS, *(f"r{i}" for i in range(12))])
        .agg(pf.count())
        .explain(epsilon=1.0, delta=1e-6)
    )
    assert one.plan.family == "laplace"
    assert one.plan.choice.startswith("Laplace noise")
    assert many.plan.family == "gaussian"
    assert many.plan.choice.startswith("Gaussian noise")
    assert "noise: Gaussian noise" in str(many)
    # Whichever noise is used, the release is charged what it asked.
    sess.query().bound(max_groups=16, max_rows_per_group=1).group_by(
        "region", keys=[*REGIONS, *(f"r{i}" for i in range(12))]
    ).agg(pf.count()).release(epsilon=1.0, delta=1e-6)
    assert sess.ledger[0].description["measurements"][0]["rho"] > 0
    assert sess.basic_spent == pf.ApproxDP(1.0, 1e-6)


def test_an_approx_release_without_delta_is_pure_laplace() -> None:
    sess = _session(pf.ApproxDP(1.0, 1e-6))
    assert _count(sess, k=4, m=1).explain(epsilon=0.5).plan.family == "laplace"


def test_choosing_groups_privately_is_refused_under_pure_dp_with_the_fix() -> None:
    sess = _session(pf.PureDP(1.0))
    q = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("region").agg(pf.count())
    with pytest.raises(pf.InvalidBudgetError, match="keys") as caught:
        q.release(epsilon=0.5)
    assert "ApproxDP" in str(caught.value)
    assert len(sess.ledger) == 0


def test_choosing_groups_privately_under_approx_dp_spends_the_release_delta() -> None:
    sess = _session(pf.ApproxDP(1.0, 1e-5))
    q = sess.query().bound(max_groups=1, max_rows_per_group=2).group_by("region").agg(pf.count())
    with pytest.raises(pf.InvalidBudgetError, match="delta"):
        q.release(epsilon=0.5)
    released = q.release(epsilon=0.5, delta=1e-6)
    assert set(released["region"].to_list()) <= set(REGIONS)
    assert sess.basic_spent == pf.ApproxDP(0.5, 1e-6)


def test_a_pure_quantile_is_charged_in_epsilon() -> None:
    sess = _session(pf.PureDP(1.0))
    q = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("region", keys=REGIONS)
        .agg(pf.median("amount", (0, 100)))
    )
    (qm,) = q.explain(epsilon=0.5).plan.quantiles
    assert qm.share.parameter == "epsilon"
    assert qm.exact_share == Fraction(1, 2)
    assert "epsilon = 2·eta·0.5·W with W = 2" in qm.derivation
    q.release(epsilon=0.5)
    assert sess.spent == pf.PureDP(0.5)
    (event,) = sess.ledger[0].description["events"]
    assert event["type"] != "zcdp"


def test_sql_options_spend_exactly_their_epsilon_in_a_pure_session() -> None:
    sess = pf.Session(
        _frame(),
        "uid",
        pf.PureDP(1.0),
        contributions=pf.Bound(max_groups=1, max_rows_per_group=2),
    )
    sess.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.3) COUNT(*) AS n FROM data")
    assert sess.spent == pf.PureDP(Fraction(3, 10))
    with pytest.raises(pf.SQLError, match="delta"):
        sess.sql(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.3, delta=1e-6) "
            "COUNT(*) AS n FROM data"
        )
    sess.sql("SELECT COUNT(*) AS n FROM data", epsilon=0.2)
    assert sess.spent == pf.PureDP(Fraction(1, 2))


def test_sql_options_spend_exactly_their_epsilon_and_delta_in_an_approx_session() -> None:
    sess = pf.Session(
        _frame(),
        "uid",
        pf.ApproxDP(1.0, 1e-5),
        contributions=pf.Bound(max_groups=1, max_rows_per_group=2),
    )
    sess.sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, delta=1e-6) COUNT(*) AS n FROM data"
    )
    assert sess.basic_spent == pf.ApproxDP(Fraction(1, 2), Fraction(1, 10**6))
    assert sess.spent.delta == pytest.approx(1e-6)


def test_a_zcdp_session_still_needs_delta_with_options_epsilon() -> None:
    sess = pf.Session(
        _frame(), "uid", pf.zCDP(1.0), contributions=pf.Bound(max_groups=1, max_rows_per_group=2)
    )
    with pytest.raises(pf.SQLError, match="needs delta"):
        sess.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5) COUNT(*) AS n FROM data")


def test_tune_is_refused_in_an_epsilon_session_before_anything_is_spent() -> None:
    sess = _session(pf.PureDP(1.0))
    q = sess.query().bound(max_rows_per_group=1).agg(pf.sum("amount", (0, 1000)))
    with pytest.raises(pf.InvalidValueError, match="tune"):
        q.tune(0.1, plan_rho=0.5)
    assert len(sess.ledger) == 0


def test_an_approx_session_composes_tightly_and_fits_more_than_basic_composition() -> None:
    # 40 Laplace releases at (0.1, 1e-6): basic composition charges epsilon = 4, more
    # than the budget's 3.6; the session's tight composition (docs/accounting.md) fits.
    df = pl.DataFrame({"uid": list(range(50)), "region": ["n", "s"] * 25})
    sess = pf.Session(df, "uid", pf.ApproxDP(3.6, 1e-3))
    q = _count(sess, k=1, m=1)
    for _ in range(40):
        q.release(epsilon=0.1, delta=1e-6)
    assert sess.basic_spent == pf.ApproxDP(4, Fraction(4, 10**5))
    assert sess.spent.exact_epsilon <= Fraction(36, 10)
    assert sess.spent.exact_delta == Fraction(4, 10**5)
    assert sess.remaining.exact_epsilon == Fraction(36, 10) - sess.spent.exact_epsilon


def test_a_private_sql_group_by_in_a_pure_session_says_to_give_keys() -> None:
    sess = pf.Session(
        _frame(), "uid", pf.PureDP(1.0), contributions=pf.Bound(max_groups=1, max_rows_per_group=2)
    )
    with pytest.raises(pf.SQLError, match="give the keys in metadata") as caught:
        sess.sql("SELECT region, COUNT(*) AS n FROM data GROUP BY region", epsilon=0.5)
    assert "ApproxDP" in str(caught.value)
    assert len(sess.ledger) == 0


def test_balance_without_delta_in_an_approx_session_says_to_give_delta() -> None:
    sess = _session(pf.ApproxDP(1.0, 1e-6))
    with pytest.raises(pf.InvalidArgumentError, match="delta"):
        _count(sess).release(epsilon=0.5, weights=pf.balance(rows=100))
    assert len(sess.ledger) == 0


def test_the_default_guarantee_of_an_approx_session_is_its_charge() -> None:
    sess = _session(pf.ApproxDP(1.0, 1e-6))
    _count(sess).release(epsilon=0.5, delta=1e-7)
    assert sess.guarantee() == pytest.approx(sess.spent.epsilon)


def test_events_claim_no_more_noise_than_was_drawn() -> None:
    sess = _session(pf.PureDP(1.0))
    for eps in (Fraction(1, 37), Fraction(5, 37), Fraction(12, 37)):
        (m,) = _count(sess, k=3, m=13).explain(epsilon=eps).measurements
        _count(sess, k=3, m=13).release(epsilon=eps)
        (event,) = sess.ledger[-1].description["events"]
        assert Fraction(event["noise_multiplier"]) <= Fraction(m.scale_units) / Fraction(m.l1_units)


def test_explain_in_an_approx_session_shows_the_charge_beside_basic_composition() -> None:
    df = pl.DataFrame({"uid": list(range(50)), "region": ["n", "s"] * 25})
    sess = pf.Session(df, "uid", pf.ApproxDP(10, 1e-3))
    q = _count(sess, k=1, m=1)
    for _ in range(39):
        q.release(epsilon=0.1, delta=1e-6)
    (note,) = q.explain(epsilon=0.1, delta=1e-6).notes
    assert "basic composition, adding the releases up: epsilon = 4, delta = 4e-05" in note
    charged = float(note.split("charged epsilon = ")[1].split(",")[0])
    q.release(epsilon=0.1, delta=1e-6)
    assert charged == pytest.approx(sess.spent.epsilon, rel=1e-5)
    assert charged < 4
