"""``privframe admin`` grants pure-DP and (ε, δ) budgets, and a grant keeps its kind.

Every test runs on both databases the server supports (``postgres_service``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.events import LaplaceEvent
from privframe.api.server.admin import main
from privframe.api.server.store import Store


def _config(folder: Path, database: str, cap: str = "") -> str:
    path = folder / "serve.toml"
    path.write_text(
        f"[server]\ndatabase = {database!r}\n"
        '[datasets.sales]\ndata = "sales.parquet"\nprivacy_unit = "customer"\n'
        + (f"cap = {cap}\n" if cap else "")
        + '[datasets.visits]\ndata = "visits.parquet"\nprivacy_unit = "customer"\n'
    )
    return str(path)


def _admin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_admin_grants_tops_up_and_lists_budgets_of_every_kind(
    tmp_path: Path,
    database_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path, database_url)
    for name in ("alice", "bob", "carol", "dave"):
        assert _admin(capsys, config, "add-analyst", name)[0] == 0
    code, out, _ = _admin(capsys, config, "grant", "alice", "sales", "--epsilon", "1")
    assert (code, out) == (0, "Granted 'sales' to 'alice' with epsilon=1.\n")
    grant = ["grant", "bob", "sales", "--epsilon", "2", "--delta", "1e-6"]
    code, out, _ = _admin(capsys, config, *grant)
    assert (code, out) == (0, "Granted 'sales' to 'bob' with epsilon=2, delta=1e-06.\n")
    assert _admin(capsys, config, "grant", "carol", "visits", "--rho", "0.5")[0] == 0
    # --epsilon alone tops up an (ε, δ) grant's ε; a pure-DP grant takes --epsilon only.
    code, out, _ = _admin(capsys, config, "top-up", "bob", "sales", "--epsilon", "1/2")
    assert code == 0
    assert "its budget is epsilon=2.5, delta=1e-06" in out
    assert _admin(capsys, config, "set-budget", "alice", "sales", "--epsilon", "3/2")[0] == 0
    with Store(database_url) as store:
        assert store.budget("alice", "sales") == pf.PureDP(1.5)
        assert store.budget("bob", "sales") == pf.ApproxDP(2.5, 1e-6)
        laplace = {"events": [LaplaceEvent(10.0).to_dict()]}
        bob = Accountant(pf.ApproxDP(2.5, 1e-6), ledger=store.ledger("bob", "sales"))
        for i in range(3):
            bob.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=laplace)
        Accountant(pf.PureDP(1.5), ledger=store.ledger("alice", "sales")).spend(pf.PureDP(0.5))
        assert store.spent("bob", "sales") == bob.spent  # what bob's session is charged
    code, out, _ = _admin(capsys, config, "list")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["analyst", "dataset", "kind", "budget", "spent", "remaining", "budget", "delta",
         "spent", "delta"],
        ["alice", "sales", "PureDP(epsilon)", "1.5", "0.5", "1", "0", "0"],
        ["bob", "sales", "ApproxDP(epsilon)", "2.5", "0.3", "2.2", "1e-06", "3e-07"],
        ["carol", "visits", "zCDP(rho)", "0.5", "0", "0.5", "0", "0"],
        ["dave", "-", "-", "-", "-", "-", "-", "-"],
    ]  # fmt: skip
    code, out, _ = _admin(capsys, config, "datasets")
    assert code == 0
    assert out.splitlines()[0] == (
        "sales: cap none; all analysts together spent: PureDP grants epsilon=0.5; "
        "ApproxDP grants epsilon=0.3, delta=3e-07"
    )
    code, out, _ = _admin(capsys, config, "audit", "--limit", "4")
    assert [line.split()[1:3] + line.split()[5:] for line in out.splitlines()] == [
        ["bob", "admin:grant", "epsilon=2,", "delta=1e-06"],
        ["carol", "admin:grant", "rho=0.5,", "delta=0"],
        ["bob", "admin:top-up", "epsilon=0.5,", "delta=0"],
        ["alice", "admin:set-budget", "epsilon=1.5"],
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["top-up", "alice", "sales", "--rho", "1"], "'alice''s grant on 'sales' is a PureDP"),
        (["top-up", "alice", "sales", "--epsilon", "1", "--delta", "1e-6"], "give --epsilon E"),
        (["set-budget", "bob", "sales", "--rho", "1"], "give --epsilon E (and --delta D)"),
        (["top-up", "carol", "visits", "--epsilon", "1"], "give --rho R (and --delta D)"),
        (["grant", "dave", "sales", "--rho", "1", "--epsilon", "1"], "not allowed with"),
        (["grant", "dave", "sales", "--epsilon", "-1"], "epsilon must be >= 0"),
        (["grant", "dave", "sales", "--epsilon", "1", "--delta", "1"], "delta must be < 1"),
        (["grant", "dave", "sales", "--delta", "1e-6"], "--rho --epsilon is required"),
    ],
)
def test_admin_refuses_a_budget_of_another_kind_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    database = str(tmp_path / "server.db")
    config = _config(tmp_path, database)
    for name, dataset, budget in (
        ("alice", "sales", ["--epsilon", "1"]),
        ("bob", "sales", ["--epsilon", "1", "--delta", "1e-6"]),
        ("carol", "visits", ["--rho", "1"]),
    ):
        assert _admin(capsys, config, "add-analyst", name)[0] == 0
        assert _admin(capsys, config, "grant", name, dataset, *budget)[0] == 0
    assert _admin(capsys, config, "add-analyst", "dave")[0] == 0
    code, out, err = _admin(capsys, config, *argv)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert says in err
    with Store(database) as store:
        assert store.budget("alice", "sales") == pf.PureDP(1)
        assert store.budget("bob", "sales") == pf.ApproxDP(1, 1e-6)
        assert store.budget("carol", "visits") == pf.zCDP(1)
        assert store.budget("dave", "sales") is None


def test_a_capped_dataset_takes_grants_of_the_kind_its_cap_bounds(
    tmp_path: Path,
    database_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path, database_url, cap="{ epsilon = 2 }")
    with Store(database_url) as store:
        store.set_cap("sales", pf.PureDP(2))  # as privframe serve does at start
    for name in ("alice", "bob"):
        assert _admin(capsys, config, "add-analyst", name)[0] == 0
    assert _admin(capsys, config, "grant", "alice", "sales", "--epsilon", "1")[0] == 0
    code, _, err = _admin(capsys, config, "grant", "bob", "sales", "--rho", "1")
    assert code == 2
    assert "cap PureDP(epsilon=2.0)" in err
    code, out, _ = _admin(capsys, config, "datasets")
    assert out.splitlines()[0] == "sales: cap epsilon=2; all analysts together spent epsilon=0"
