"""A session's guarantee three ways: its zCDP total, and RDP and PLD replays of its events."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf
from privframe.events import GaussianEvent, ThresholdEvent, ZCDPEvent, from_dict


def _session(tmp_path=None) -> pf.Session:
    df = pl.DataFrame(
        {"u": list(range(400)), "g": ["a", "b"] * 200, "x": [float(i % 50) for i in range(400)]}
    )
    ledger = None if tmp_path is None else str(tmp_path / "ledger.sqlite")
    return pf.Session(df, "u", pf.zCDP(2.0, delta=1e-6), ledger)


def _spend(sess: pf.Session) -> None:
    q = sess.query().bound(max_groups=1, max_rows_per_group=2)
    q.group_by("g", keys=["a", "b"]).agg(pf.count(), pf.mean("x", (0, 50))).release(rho=0.3)
    q.group_by("g").agg(pf.count()).release(rho=0.2, delta=5e-7)
    q.agg(pf.median("x", (0, 50))).release(rho=0.1)


def test_ledger_entries_carry_events_whose_cost_is_the_charge(tmp_path) -> None:
    sess = _session(tmp_path)
    _spend(sess)
    for entry in sess.ledger:
        events = [from_dict(e) for e in entry.description["events"]]
        rho = 0.0
        for event in events:
            if isinstance(event, GaussianEvent):
                assert event.discrete
                # One noisy value per public key; a private selection's size is not public.
                public = entry.description["n_keys"]
                assert event.dimension == public or (public is None and event.dimension is None)
                rho += 1 / (2 * event.noise_multiplier**2)
            elif isinstance(event, ZCDPEvent):
                rho += event.rho
            else:
                assert isinstance(event, ThresholdEvent)
                assert event.delta == entry.delta
        # The events' zCDP cost is what the ledger charged (up to float rounding).
        assert rho == pytest.approx(entry.rho, rel=1e-9)
        assert rho <= entry.rho * (1 + 1e-12)
    # The events survive the SQLite ledger: reopen and replay.
    reopened = pf.Session(
        pl.DataFrame({"u": [1]}), "u", pf.zCDP(2.0, delta=1e-6), str(tmp_path / "ledger.sqlite")
    )
    assert reopened.guarantee(method="rdp") == pytest.approx(sess.guarantee(method="rdp"))


def test_rdp_replay_agrees_with_the_zcdp_total() -> None:
    sess = _session()
    _spend(sess)
    zcdp, rdp = sess.guarantee(), sess.guarantee(method="rdp")
    # Pure (discrete) Gaussian and zCDP events: RDP = rho·alpha, converted on a grid of
    # orders, so never below the continuous optimum and close to it.
    assert zcdp <= rdp * (1 + 1e-12)
    assert rdp <= zcdp * 1.02
    assert sess.guarantee(delta=1e-3) < zcdp


def test_unknown_method_is_refused() -> None:
    with pytest.raises(pf.InvalidValueError, match="method"):
        _session().guarantee(method="moments")


def test_pld_replay_states_the_zcdp_bound_for_discrete_gaussians() -> None:
    sess = _session()
    _spend(sess)
    statement = sess.guarantee_statement(method="pld")
    # Every event of a privframe release is a discrete Gaussian, a threshold or a
    # zCDP event: none has a proven PLD, so the PLD method falls back to zCDP.
    assert statement.epsilon == pytest.approx(sess.guarantee(), rel=1e-9)
    assert statement.method == "pld"
    assert "zCDP" in statement.basis
    assert "discrete Gaussian" in statement.basis
