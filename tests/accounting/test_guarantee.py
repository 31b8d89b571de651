"""A session's guarantee three ways: its zCDP total, and RDP and PLD replays of its events."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf
from privframe.accounting import replay
from privframe.accounting.events import (
    GaussianEvent,
    PoissonSampledEvent,
    ThresholdEvent,
    ZCDPEvent,
    from_dict,
)
from privframe.accounting.ledger import LedgerEntries, LedgerEntry


def _data() -> pl.DataFrame:
    return pl.DataFrame(
        {"u": list(range(400)), "g": ["a", "b"] * 200, "x": [float(i % 50) for i in range(400)]}
    )


def _session(tmp_path=None) -> pf.Session:
    ledger = None if tmp_path is None else str(tmp_path / "ledger.sqlite")
    return pf.Session(_data(), "u", pf.zCDP(2.0, delta=1e-6), ledger)


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
    reopened = pf.Session(_data(), "u", pf.zCDP(2.0, delta=1e-6), str(tmp_path / "ledger.sqlite"))
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


def _entry(index: int, rho: float, delta: float, events: object) -> LedgerEntry:
    return LedgerEntry(
        index, "2026-01-01T00:00:00+00:00", f"e{index}", rho, delta, {"events": events}, False
    )


def test_events_that_do_not_account_for_the_charge_are_not_trusted() -> None:
    # The entry charged rho = 2 and delta = 5e-6; its events claim far less.
    cheap = _entry(0, 2.0, 5e-6, [GaussianEvent(100.0).to_dict()])
    charged = pf.zCDP(2.0, delta=5e-6).epsilon(6e-6)
    for method in ("rdp", "pld"):
        statement = replay.guarantee([cheap], 6e-6, method)
        assert statement.epsilon >= charged * (1 - 1e-12)
        assert "Entries [0] record events that do not account" in statement.basis
    # Events costing at least the charge are replayed.
    fair = _entry(1, 0.5, 0.0, [GaussianEvent(1.0).to_dict()])
    assert replay.entry_events(fair) == ([GaussianEvent(1.0)], True)


def test_malformed_events_name_the_entry() -> None:
    with pytest.raises(pf.InvalidValueError, match=r"ledger entry 3 \('e3'\)"):
        replay.guarantee([_entry(3, 0.1, 0.0, ["clicks"])], 1e-6, "rdp")
    with pytest.raises(pf.InvalidValueError, match="ledger entry 4"):
        replay.guarantee([_entry(4, 0.1, 0.0, "clicks")], 1e-6, "pld")


def test_the_basis_names_the_analyses_used() -> None:
    continuous = PoissonSampledEvent(0.01, GaussianEvent(1.1))
    discrete = PoissonSampledEvent(0.01, GaussianEvent(1.1, discrete=True))
    cost = 1 / (2 * 1.1**2)
    only_continuous = replay.guarantee([_entry(0, cost, 0.0, [continuous.to_dict()])], 1e-6, "rdp")
    assert "Mironov, Talwar & Zhang" in only_continuous.basis
    assert "Zhu & Wang" not in only_continuous.basis
    only_discrete = replay.guarantee([_entry(0, cost, 0.0, [discrete.to_dict()])], 1e-6, "rdp")
    assert "Zhu & Wang" in only_discrete.basis
    assert "Mironov, Talwar & Zhang" not in only_discrete.basis
    plain = [GaussianEvent(2.0).to_dict(), GaussianEvent(2.0, discrete=True).to_dict()]
    mixed = replay.guarantee([_entry(0, 0.25, 0.0, plain)], 1e-6, "pld")
    assert mixed.basis.startswith("every event is a plain Gaussian or known only through its rho")
    assert mixed.epsilon == pytest.approx(pf.zCDP(0.25).epsilon(1e-6), rel=1e-12)


def test_the_zcdp_guarantee_reads_no_ledger_entry(tmp_path, monkeypatch) -> None:
    sess = _session(tmp_path)
    _spend(sess)
    expected = sess.spent.epsilon(1e-5)

    def refuse(*_: object) -> None:
        raise AssertionError("the zCDP guarantee read the ledger's entries")

    monkeypatch.setattr(LedgerEntries, "__iter__", refuse)
    monkeypatch.setattr(LedgerEntries, "__getitem__", refuse)
    assert sess.guarantee(1e-5) == expected
    with pytest.raises(AssertionError, match="read the ledger"):
        sess.guarantee(1e-5, method="rdp")
