"""Session budgets and ledgers: charges, refusals, persistence, seeded releases."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from session_setup import (
    SENTINEL_TEXT,
    make_data,
)

import privframe as pf
from privframe.api.cli import readme_query
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


# -- budget and ledger ------------------------------------------------------------------


def test_release_twice_charges_twice():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.25, label="first")
    query.release(rho=0.25, label="second")
    assert sess.spent.rho == pytest.approx(0.5)
    assert [e.label for e in sess.ledger] == ["first", "second"]
    assert [e.rho for e in sess.ledger] == [0.25, 0.25]


def test_a_release_drowned_in_noise_warns_before_it_is_charged():
    # rho = 2.8e-17 once returned counts of hundreds of millions for groups of thousands.
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pf.ExcessiveNoiseWarning)
        with pytest.raises(pf.ExcessiveNoiseWarning, match=r"share of rho below 5e-13"):
            query.release(rho=2.8e-17)
        assert sess.ledger == ()  # as an error, it stops the release before the charge
        query.release(rho=0.1)  # an ordinary rho does not warn
    with pytest.warns(pf.ExcessiveNoiseWarning) as caught:
        query.release(rho=1e-12)
    assert caught[0].filename == __file__  # attributed to the caller's line
    assert len(sess.ledger) == 2


def test_budget_refusal_leaves_ledger_unchanged_and_releases_nothing(monkeypatch):
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.75)
    before = (sess.spent, sess.remaining, sess.ledger)

    def must_not_run(spec):
        raise AssertionError("the engine ran for a refused release")

    monkeypatch.setattr(sess._engine, "aggregate", must_not_run)
    with pytest.raises(pf.BudgetExceededError):
        query.release(rho=0.5)
    assert (sess.spent, sess.remaining, sess.ledger) == before


def test_remaining_budget_can_be_spent_exactly():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.1)
    query.release(rho=sess.remaining.rho)
    with pytest.raises(pf.BudgetExceededError):
        query.release(rho=1e-9)


def test_persisted_ledger(tmp_path):
    path = tmp_path / "spend.sqlite"
    first = pf.Session(make_data(), "user_id", pf.zCDP(1.0), ledger=path)
    readme_query(first).release(rho=0.4, label="q1")
    first.accountant.close()
    again = pf.Session(make_data(), "user_id", pf.zCDP(1.0), ledger=str(path))
    assert again.spent.rho == pytest.approx(0.4)
    assert [e.label for e in again.ledger] == ["q1"]
    with pytest.raises(pf.BudgetExceededError):
        readme_query(again).release(rho=0.7)
    again.accountant.close()
    with pytest.raises(pf.LedgerError):
        pf.Session(make_data(), "user_id", pf.zCDP(5.0), ledger=path)


def test_ledger_description_is_public():
    df = make_data().with_columns(
        region=pl.when(pl.col("age") == 30).then(pl.lit(SENTINEL_TEXT)).otherwise("region")
    )
    sess = pf.Session(df, "user_id", pf.zCDP(1.0))
    readme_query(sess).release(rho=0.1)
    entry = sess.ledger[0]
    text = repr(entry)
    assert SENTINEL_TEXT not in text
    assert str(df.height) not in str(entry.description)


# -- reproducibility --------------------------------------------------------------------


def test_seeded_sessions_are_reproducible_and_flagged():
    df = pl.concat([make_data(), make_data(seed=1)])
    results = []
    for seed in (42, 42, 43):
        sess = pf.Session(df, "user_id", pf.zCDP(1.0), rng=SeededRandomness(seed))
        with pytest.warns(pf.SeededRandomnessWarning):
            results.append(readme_query(sess).release(rho=0.5))
        assert sess.ledger[0].seeded is True
    assert results[0].equals(results[1])
    assert not results[0].equals(results[2])
    unseeded = pf.Session(df, "user_id", pf.zCDP(1.0))
    readme_query(unseeded).release(rho=0.5)
    assert unseeded.ledger[0].seeded is False


def test_converted_approx_dp_and_gdp_budgets_spend_rho():
    converted = pf.ApproxDP(epsilon=2.0, delta=1e-6).to_zcdp()
    for budget in (converted, pf.GDP(mu=1.0)):
        sess = pf.Session(make_data(), "user_id", budget)
        readme_query(sess).release(rho=0.05)
        assert sess.spent.rho == pytest.approx(0.05)


def test_an_approx_dp_budget_spends_epsilon_and_delta():
    sess = pf.Session(make_data(), "user_id", pf.ApproxDP(epsilon=2.0, delta=1e-6))
    readme_query(sess).release(epsilon=0.5, delta=1e-7)
    assert sess.basic_spent == pf.ApproxDP(0.5, 1e-7)
    assert sess.spent.epsilon <= 0.5
