"""A ledger's entries as a lazy sequence: indexing, slicing, iterating, equality, snapshots."""

from __future__ import annotations

import shutil
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.ledger import Ledger, LedgerEntries, LedgerSummary, SQLiteLedger
from privframe.errors import LedgerError

N = 1100  # more than two pages of entries


def _fill(ledger: Ledger, n: int = N) -> None:
    ledger.append_all([Spend(pf.zCDP(Fraction(1, 2 * n)), f"q{i}", {"i": i}) for i in range(n)])


@pytest.fixture(params=["memory", "file"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path):
    made = Ledger() if request.param == "memory" else SQLiteLedger(tmp_path / "a", pf.zCDP(1.0))
    _fill(made)
    yield made
    made.close()


def test_length_indexing_and_negative_indexes(ledger: Ledger) -> None:
    entries = ledger.entries
    assert isinstance(entries, LedgerEntries)
    assert len(entries) == N
    assert entries[0].label == "q0"
    assert entries[N - 1].label == entries[-1].label == f"q{N - 1}"
    assert entries[-N].index == 0
    assert entries[True].index == 1  # an int, as a tuple takes it
    for bad in (N, -N - 1):
        with pytest.raises(IndexError, match="out of range"):
            entries[bad]
    with pytest.raises(TypeError):
        entries["0"]  # type: ignore[call-overload]


def test_slices_are_tuples_of_the_entries(ledger: Ledger) -> None:
    entries = ledger.entries
    assert [e.index for e in entries[500:515]] == list(range(500, 515))
    assert [e.index for e in entries[-3:]] == [N - 3, N - 2, N - 1]
    assert [e.index for e in entries[10:0:-4]] == [10, 6, 2]
    assert [e.index for e in entries[::500]] == [0, 500, 1000]
    assert entries[5:5] == ()
    assert isinstance(entries[5:5], tuple)
    assert entries[N + 10 :] == ()


def test_iteration_reads_every_entry_in_order(ledger: Ledger) -> None:
    entries = ledger.entries
    listed = list(entries)
    assert [e.index for e in listed] == list(range(N))
    assert listed[700].description == {"i": 700}
    assert sum(e.exact_rho for e in entries) == Fraction(1, 2)
    assert entries[700] in entries
    assert entries.index(entries[3]) == 3


def test_equality_with_tuples_lists_and_other_views(ledger: Ledger) -> None:
    entries = ledger.entries
    as_tuple = tuple(entries)
    assert entries == as_tuple
    assert as_tuple == entries
    assert entries == list(as_tuple)
    assert entries == ledger.entries
    assert entries != as_tuple[:-1]
    assert entries != ()
    assert Ledger().entries == ()
    assert entries != "not entries"
    with pytest.raises(TypeError):
        hash(entries)


def test_a_view_is_a_snapshot_of_its_entries(ledger: Ledger) -> None:
    before = ledger.entries
    ledger.append(0.125, label="later")
    assert len(before) == N
    assert before[-1].label == f"q{N - 1}"
    assert len(ledger.entries) == N + 1
    assert ledger.entries[-1].label == "later"
    assert list(ledger.entries)[:N] == list(before)


def test_a_view_stays_readable_after_close(ledger: Ledger) -> None:
    entries = ledger.entries
    ledger.close()
    assert entries[-1].label == f"q{N - 1}"
    assert len(list(entries)) == N
    with pytest.raises(LedgerError, match="closed"):
        _ = ledger.entries


def test_a_view_of_a_closed_ledger_refuses_a_file_replaced_since(tmp_path: Path) -> None:
    path, other = tmp_path / "a.ledger", tmp_path / "b.ledger"
    with SQLiteLedger(path, pf.zCDP(1.0)) as ledger:
        ledger.append(0.25, label="mine")
        entries = ledger.entries
    with SQLiteLedger(other, pf.zCDP(1.0)) as second:
        second.append(0.5, label="theirs")
    shutil.copyfile(other, path)
    with pytest.raises(LedgerError, match="holds another ledger"):
        entries[0]


def test_repr_does_not_read_the_entries(ledger: Ledger) -> None:
    assert repr(ledger.entries) == f"<{N} ledger entries>"
    assert repr(Ledger().entries) == "<0 ledger entries>"


def test_summary_matches_the_entries(ledger: Ledger) -> None:
    ledger.append(0.0, label="seeded", seeded=True)
    summary = ledger.summary()
    assert summary == LedgerSummary.of(ledger.entries)
    assert (summary.count, summary.rho, summary.seeded) == (N + 1, Fraction(1, 2), 1)
    assert ledger.totals() == (summary.rho, summary.delta)


def test_reopened_file_summary_matches_the_entries(tmp_path: Path) -> None:
    path = tmp_path / "a.ledger"
    with SQLiteLedger(path, pf.zCDP(1.0, 1e-6)) as ledger:
        _fill(ledger, 30)
        ledger.append(0.0, 1e-7, label="selection", seeded=True)
    with SQLiteLedger(path, pf.zCDP(1.0, 1e-6)) as ledger:
        assert ledger.summary() == LedgerSummary.of(ledger.entries)
        assert ledger.summary().delta == Fraction(1, 10**7)


def test_accountant_hands_out_views_and_reports_from_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        with pytest.warns(pf.SeededRandomnessWarning):
            acct.spend_all([Spend(pf.zCDP(0.25), "a"), Spend(pf.zCDP(0.25), "b", seeded=True)])
        assert isinstance(acct.entries, LedgerEntries)
        assert [e.label for e in acct.entries[1:]] == ["b"]
        report = acct.report()
        assert (report.n_entries, report.n_seeded, report.spent_rho) == (2, 1, 0.5)
