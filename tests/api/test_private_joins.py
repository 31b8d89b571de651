"""Several private tables, join_private, flat_map, per-person columns and the per-unit stage.

The builder's surface and its refusals: each refusal is a PrivframeError of
the documented type, names the problem, carries no exception chain and
charges nothing. Beside them, what the constructs do: the limits explain
derives (and the sensitivity planned from them), hash and random truncation,
left joins, per-person values (exact, or null, and independent of the rows'
order), and a ledger file over several tables.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from internals import column_of, released_exactly

import privframe as pf
from privframe.accounting.ledger import DataIdentity
from privframe.api.query import Query
from privframe.api.wire import encode_plan
from privframe.engines.spec import COUNT, PerUnit, PrivateJoin, UnitColumns, apply_steps
from privframe.plan.ir import Plan

SECRET = "SECRET-9d2a"


def _visits() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "pid": [1, 1, 2, 3],
            "clinic": ["a", "b", "a", SECRET],
            "day": [1, 2, 3, 4],
            "items": [["tea"], ["jam", "tea"], [], None],
            "amount": [10.0, 20.0, 30.0, 40.0],
        }
    )


def _drugs() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "pid": [1, 2, 2, 4],
            "drug": ["x", "y", "x", "y"],
            "day": ["1", "2", "3", "4"],
            "dose": [5.0, 6.0, 7.0, 8.0],
        }
    )


@pytest.fixture
def sess() -> pf.Session:
    return pf.Session({"visits": _visits(), "drugs": _drugs()}, "pid", pf.zCDP(1.0, 1e-6))


def _refused(sess: pf.Session, action: Callable[[], Any], error: type[pf.PrivframeError]) -> str:
    """The message of the refusal of ``action``, after checking nothing was charged or leaked."""
    with pytest.raises(error) as info:
        action()
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    message = str(info.value)
    assert SECRET not in message
    assert sess.spent == pf.zCDP(0)
    assert sess.ledger == ()
    return message


def _join(sess: pf.Session, other: Query | None = None, **kwargs: Any) -> Query:
    arguments: dict[str, Any] = {"on": "pid", "left_rows": 2, "right_rows": 3, **kwargs}
    return sess.query().join_private(other or sess.query("drugs"), **arguments)


# --------------------------------------------------------------------------- refusals


def test_a_join_whose_keys_leave_out_the_unit_is_refused_saying_why(sess: pf.Session) -> None:
    message = _refused(sess, lambda: _join(sess, on="day"), pf.InvalidValueError)
    assert "leave out the privacy unit 'pid'" in message
    assert "would belong to both" in message
    assert "join on ['pid', 'day']" in message


def test_a_join_with_another_sessions_query_is_refused(sess: pf.Session) -> None:
    other = pf.Session({"visits": _visits(), "drugs": _drugs()}, "pid", pf.zCDP(1.0))
    message = _refused(sess, lambda: _join(sess, other.query("drugs")), pf.InvalidArgumentError)
    assert "joins a query of the same session" in message
    assert other.spent == pf.zCDP(0)


@pytest.mark.parametrize(
    "right",
    [
        lambda q: q.group_by("drug", keys=["x"]),
        lambda q: q.agg(pf.count()),
        lambda q: q.bound(max_rows=1),
    ],
    ids=["grouped", "aggregated", "bounded"],
)
def test_a_join_with_a_grouped_aggregated_or_bounded_right_query_is_refused(
    sess: pf.Session, right: Callable[[Query], Query]
) -> None:
    message = _refused(sess, lambda: _join(sess, right(sess.query("drugs"))), pf.InvalidValueError)
    assert "holds its table and row steps only" in message
    assert "bound, group and aggregate the joined query instead" in message


def test_a_query_of_an_unknown_table_is_refused_naming_the_tables(sess: pf.Session) -> None:
    message = _refused(sess, lambda: sess.query("prescriptions"), pf.InvalidValueError)
    assert "'prescriptions' is not a private table of this session" in message
    assert "['visits', 'drugs']" in message


def test_a_plan_starting_from_or_joining_an_unknown_table_is_refused(sess: pf.Session) -> None:
    # Plans arrive built (from SQL, a report, the wire): the session checks their tables.
    start = Query(sess, Plan(table="prescriptions")).agg(pf.count())
    message = _refused(sess, lambda: start.release(rho=0.1), pf.InvalidValueError)
    assert "'prescriptions' is not a private table of this session" in message
    step = PrivateJoin("prescriptions", (), ("pid",), "inner", left_rows=1, right_rows=1)
    joined = Query(sess, Plan(steps=(step,))).agg(pf.count())
    message = _refused(sess, lambda: joined.release(rho=0.1), pf.InvalidValueError)
    assert "join_private: 'prescriptions' is not a private table of this session" in message


def test_join_keys_of_different_types_are_refused_naming_both(sess: pf.Session) -> None:
    query = _join(sess, on=["pid", "day"]).agg(pf.count())
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidArgumentError)
    assert "column 'day' is Int64 on the left and String on the right" in message
    assert "cast one with with_columns first" in message


def test_join_keys_missing_on_one_side_are_refused_naming_the_side(sess: pf.Session) -> None:
    query = _join(sess, on=["pid", "drug"]).agg(pf.count())
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "the left side has no column 'drug' to join on" in message


@pytest.mark.parametrize(
    ("arguments", "error", "expected"),
    [
        ({"how": "outer"}, pf.InvalidArgumentError, "how= must be 'inner' or 'left'"),
        ({"truncation": "first"}, pf.InvalidArgumentError, "truncation must be 'random' or"),
        ({"left_rows": 0}, pf.InvalidValueError, "left_rows must be a positive integer"),
        ({"right_rows": True}, pf.InvalidValueError, "right_rows must be a positive integer"),
        ({"suffix": ""}, pf.InvalidArgumentError, "suffix must be a non-empty string"),
    ],
)
def test_bad_join_arguments_are_refused(
    sess: pf.Session, arguments: dict[str, Any], error: type[pf.PrivframeError], expected: str
) -> None:
    assert expected in _refused(sess, lambda: _join(sess, **arguments), error)


def test_a_flat_map_without_max_rows_is_refused(sess: pf.Session) -> None:
    message = _refused(sess, lambda: sess.query().flat_map("items"), pf.InvalidArgumentError)
    assert "missing the argument 'max_rows'" in message
    none = _refused(
        sess, lambda: sess.query().flat_map("items", max_rows=None), pf.InvalidValueError
    )
    assert "flat_map needs max_rows=" in none
    assert "any number of rows" in none


@pytest.mark.parametrize("max_rows", [0, -1, True, False, 2.0])
def test_a_flat_map_limit_must_be_a_positive_integer(sess: pf.Session, max_rows: Any) -> None:
    message = _refused(
        sess, lambda: sess.query().flat_map("items", max_rows=max_rows), pf.InvalidValueError
    )
    assert f"max_rows must be a positive integer, got {max_rows!r}" in message


def test_a_flat_map_of_a_column_that_is_not_a_list_is_refused(sess: pf.Session) -> None:
    query = sess.query().flat_map("clinic", max_rows=2).agg(pf.count())
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidArgumentError)
    assert "flat_map needs a list column; 'clinic' has type String" in message
    missing = sess.query().flat_map("basket", max_rows=2).agg(pf.count())
    message = _refused(sess, lambda: missing.release(rho=0.1), pf.InvalidValueError)
    assert "flat_map column 'basket' is not in the data" in message


def test_a_flat_map_may_not_write_the_unit_column(sess: pf.Session) -> None:
    query = sess.query().flat_map("items", max_rows=2, name="pid").agg(pf.count())
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "may not rewrite the privacy unit column 'pid'" in message


def test_a_per_unit_stage_refuses_a_value_per_row(sess: pf.Session) -> None:
    message = _refused(
        sess, lambda: sess.query().per_unit(r=pf.unit.rank("day")), pf.InvalidValueError
    )
    assert "pf.unit.rank(by='day') is a value per row: use it in with_columns" in message
    plain = _refused(
        sess, lambda: sess.query().per_unit(t=pl.col("amount")), pf.InvalidArgumentError
    )
    assert "'t' is not one" in plain


def test_private_group_selection_over_a_per_unit_stage_needs_a_group_bound(
    sess: pf.Session,
) -> None:
    # per_unit("clinic") makes one row per person and clinic (m = 1), but a person may
    # be in any number of clinics: no row limit bounds their groups.
    query = (
        sess.query()
        .per_unit("clinic", total=pf.unit.sum("amount"))
        .group_by("clinic")
        .agg(pf.count())
    )
    message = _refused(sess, lambda: query.release(rho=0.1, delta=1e-7), pf.InvalidValueError)
    assert "choosing groups privately" in message
    assert "needs .bound(max_groups=...)" in message


def test_a_per_unit_stage_grouped_by_other_columns_needs_contribution_limits(
    sess: pf.Session,
) -> None:
    query = (
        sess.query()
        .per_unit("clinic", "day", total=pf.unit.sum("amount"))
        .group_by("day", keys=[1, 2])
        .agg(pf.count())
    )
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "needs contribution limits: call .bound(" in message


@pytest.mark.parametrize(
    "aggregate",
    [lambda: pf.sum("total"), lambda: pf.mean("total", None)],  # type: ignore[call-arg,arg-type]
    ids=["no bounds", "bounds None"],
)
def test_an_aggregate_of_a_per_unit_value_needs_public_bounds(
    sess: pf.Session, aggregate: Callable[[], Any]
) -> None:
    def release() -> None:
        query = sess.query().per_unit("clinic", total=pf.unit.sum("amount"))
        query.group_by("clinic", keys=["a", "b"]).agg(aggregate()).release(rho=0.1)

    message = _refused(sess, release, pf.InvalidArgumentError)
    assert "bounds" in message
    assert "never computed from the data" in message


def test_private_tables_with_different_unit_types_are_refused() -> None:
    drugs = _drugs().with_columns(pl.col("pid").cast(pl.String))
    with pytest.raises(pf.InvalidValueError) as info:
        pf.Session({"visits": _visits(), "drugs": drugs}, "pid", pf.zCDP(1.0))
    assert info.value.__context__ is None
    message = str(info.value)
    assert "'pid' has different types in the private tables (visits: Int64, drugs: String)" in (
        message
    )
    assert "a lossy cast could merge people" in message


def test_several_private_tables_need_a_privacy_unit() -> None:
    with pytest.raises(pf.InvalidValueError) as info:
        pf.Session({"visits": _visits(), "drugs": _drugs()}, None, pf.zCDP(1.0))
    assert info.value.__context__ is None
    assert "several private tables need a privacy unit column" in str(info.value)


def test_a_refused_session_over_several_tables_writes_no_ledger(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    drugs = _drugs().with_columns(pl.col("pid").cast(pl.Float64))
    with pytest.raises(pf.InvalidValueError):
        pf.Session({"visits": _visits(), "drugs": drugs}, "pid", pf.zCDP(1.0), path)
    assert not path.exists()


# --------------------------------------------------------------------------- what explain derives

KEYS = ["x", "y", "z"]


def _count(query: Query, keys: list[str] = KEYS, by: str = "drug", column: str = "dose") -> Query:
    return query.group_by(by, keys=keys).agg(pf.count(), pf.sum(column, (0.0, 10.0)))


def _is_sqrt(value: float, squares: int) -> bool:
    """Whether ``value`` is sqrt(squares), rounded up (the safe direction) to a float."""
    return Fraction(value) ** 2 >= squares and value <= math.nextafter(math.sqrt(squares), math.inf)


@pytest.mark.parametrize(
    ("bound", "squares", "line"),
    [
        # no bound: M = l·r = 6 rows, all in one of the 3 keys at worst: S = 6²
        (None, 36, "k=3, m=6, M=6: q=1 full groups + r=0 rows: S = q·m² + r² = 36"),
        # k·m = 4 <= M: S = k·m²
        ({"max_groups": 2, "max_rows_per_group": 2}, 8, "k=2 groups × m=2 rows: S = k·m² = 8"),
        # k·m = 12 > M = 6: one full group of 4 and 2 rows more: S = 16 + 4
        (
            {"max_groups": 3, "max_rows_per_group": 4},
            20,
            "k=3, m=4, M=6: q=1 full groups + r=2 rows: S = q·m² + r² = 20",
        ),
    ],
    ids=["derived", "k·m below l·r", "l·r below k·m"],
)
def test_a_join_plans_its_sensitivity_from_l_times_r(
    sess: pf.Session, bound: dict[str, int] | None, squares: int, line: str
) -> None:
    joined = _join(sess)
    query = _count(joined if bound is None else joined.bound(**bound))
    explained = query.explain(rho=0.5)
    derivation = "join_private(drugs): at most 2 left × 3 right rows per unit: M ≤ 6"
    assert explained.bound == f"{derivation}; {line}"
    assert explained.plan.limits.max_rows == 6
    assert explained.plan.limits.squares == squares
    count, total = explained.measurements
    assert _is_sqrt(count.sensitivity, squares)
    assert _is_sqrt(total.sensitivity / 5, squares)  # times (U − L)/2
    assert f"sqrt({squares})" in count.derivation
    assert derivation in str(explained)


def test_a_join_after_a_flat_map_takes_the_smaller_left_limit(sess: pf.Session) -> None:
    mapped = sess.query().flat_map("items", max_rows=1, name="item")
    joined = mapped.join_private(sess.query("drugs"), on="pid", left_rows=2, right_rows=3)
    assert _count(joined).explain(rho=0.5).bound.split("; ")[:2] == [
        "flat_map(items): at most 1 rows per unit: M ≤ 1",
        "join_private(drugs): at most 1 left × 3 right rows per unit: M ≤ 3",
    ]


def test_a_flat_map_plans_from_its_max_rows(sess: pf.Session) -> None:
    query = sess.query().flat_map("items", max_rows=3, name="item")
    explained = _count(query, ["tea", "jam", "bread", "milk"], "item", "amount").explain(rho=0.5)
    assert explained.bound == (
        "flat_map(items): at most 3 rows per unit: M ≤ 3; "
        "k=4, m=3, M=3: q=1 full groups + r=0 rows: S = q·m² + r² = 9"
    )
    assert explained.measurements[0].sensitivity == 3.0


def test_a_per_unit_stage_plans_one_row_per_group_or_per_person(sess: pf.Session) -> None:
    by_clinic = sess.query().per_unit("clinic", total=pf.unit.sum("amount"))
    grouped = by_clinic.group_by("clinic", keys=["a", "b", "c"]).agg(
        pf.count(), pf.mean("total", (0.0, 100.0))
    )
    explained = grouped.explain(rho=0.5)
    assert explained.bound == (
        "per_unit(clinic): one row per unit and group: m = 1; k=3 groups × m=1 rows: S = k·m² = 3"
    )
    assert _is_sqrt(explained.measurements[0].sensitivity, 3)
    each = sess.query().per_unit(total=pf.unit.sum("amount"), first=pf.unit.first("clinic", "day"))
    overall = each.group_by("first", keys=["a", "b"]).agg(pf.count()).explain(rho=0.5)
    assert overall.bound.startswith("per_unit(): one row per unit: M = 1; ")
    assert overall.measurements[0].sensitivity == 1.0


def test_private_selection_over_one_row_per_person_needs_no_group_bound(
    sess: pf.Session,
) -> None:
    each = sess.query().per_unit(first=pf.unit.first("clinic", by="day"))
    explained = each.group_by("first").agg(pf.count()).explain(rho=0.5, delta=1e-7)
    assert explained.plan.limits.max_groups == 1
    assert explained.plan.selection is not None
    assert explained.plan.selection.measurement.l2_units == 1.0


def test_the_ledger_describes_the_derivation(sess: pf.Session) -> None:
    _count(_join(sess)).release(rho=0.25)
    (entry,) = sess.ledger
    assert entry.description["limits"].startswith(
        "join_private(drugs): at most 2 left × 3 right rows per unit: M ≤ 6; "
    )


# --------------------------------------------------------------------------- what the steps do


def _people_in_many_clinics() -> dict[str, pl.DataFrame]:
    """Three people with a visit in each of 8 clinics and one prescription each."""
    clinics = [f"c{i}" for i in range(8)]
    visits = pl.DataFrame({"pid": [p for p in range(3) for _ in clinics], "clinic": clinics * 3})
    drugs = pl.DataFrame({"pid": [0, 1, 2], "drug": ["x", "y", "x"]})
    return {"visits": visits, "drugs": drugs}


def _exact_counts(truncation: str, releases: int) -> tuple[list[list[int]], list[int]]:
    sess = pf.Session(_people_in_many_clinics(), "pid", pf.zCDP(1.0))
    joined = sess.query().join_private(
        sess.query("drugs"),
        on="pid",
        left_rows=1,
        right_rows=1,
        truncation=truncation,  # type: ignore[arg-type]
    )
    query = joined.group_by("clinic", keys=[f"c{i}" for i in range(8)]).agg(pf.count())
    runs = [released_exactly(sess, query, rho=0.1) for _ in range(releases)]
    return [r.exact[COUNT].to_list() for r in runs], [r.spec.seed for r in runs]


def test_hash_truncation_keeps_the_same_rows_in_every_release() -> None:
    counts, seeds = _exact_counts("hash", 4)
    assert len(set(seeds)) == 4  # fresh seeds, but the hash's key is fixed
    assert all(c == counts[0] for c in counts)
    assert sum(counts[0]) == 3  # one row per person: l = r = 1


def test_random_truncation_chooses_afresh_in_each_release() -> None:
    # Each person keeps 1 of their 8 visits: two releases count alike with probability
    # at most 3!/8³, so 6 all alike by chance has probability below (6/512)⁵ < 1e-9.
    counts, seeds = _exact_counts("random", 6)
    assert len(set(seeds)) == 6
    assert len({tuple(c) for c in counts}) > 1
    assert all(sum(c) == 3 for c in counts)


def test_a_left_join_keeps_the_left_rows_without_a_match() -> None:
    visits = pl.DataFrame({"pid": [1, 2, 3], "clinic": ["a", "a", "b"]})
    drugs = pl.DataFrame({"pid": [1, 4], "drug": ["x", "y"]})
    sess = pf.Session({"visits": visits, "drugs": drugs}, "pid", pf.zCDP(1.0))

    def exact(how: str, by: str, keys: list[str]) -> list[int]:
        joined = sess.query().join_private(
            sess.query("drugs"),
            on="pid",
            left_rows=1,
            right_rows=1,
            how=how,  # type: ignore[arg-type]
        )
        query = joined.group_by(by, keys=keys).agg(pf.count())
        return released_exactly(sess, query, rho=0.1).exact[COUNT].to_list()

    assert exact("inner", "clinic", ["a", "b"]) == [1, 0]
    assert exact("left", "clinic", ["a", "b"]) == [2, 1]  # persons 2 and 3 kept
    assert exact("left", "drug", ["x", "y"]) == [1, 0]  # their drug is null; person 4 absent


def test_the_right_sides_columns_the_left_has_get_the_suffix(sess: pf.Session) -> None:
    joined = _join(sess, on="pid", suffix="_rx")
    assert "day_rx" in sess.check(joined.plan)
    assert sess.check(joined.plan)["day_rx"] == pl.String


def test_a_per_person_integer_sum_past_int64_is_null_not_wrapped() -> None:
    frame = pl.DataFrame({"pid": [1, 1, 2, 2], "x": [2**62, 2**62, 2, 3]})
    values = (("total", pf.unit.sum("x")),)
    rows = apply_steps(frame.lazy(), (UnitColumns(values),), unit="pid").collect()
    assert rows["total"].to_list() == [None, None, 5, 5]
    per = apply_steps(frame.lazy(), (PerUnit((), values),), unit="pid").collect().sort("pid")
    assert per["total"].to_list() == [None, 5]
    # Through a release: person 1's total is missing, not a negative number in [0, 10].
    sess = pf.Session(frame, "pid", pf.zCDP(1.0))
    query = sess.query().per_unit(**dict(values)).agg(pf.mean("total", (0, 10), missing="drop"))
    out = released_exactly(sess, query, rho=0.5)
    (present,) = [m for m in out.release.measurements if m.kind == "values"]
    assert out.exact[column_of(out.release, present)].to_list() == [1]


def test_first_last_and_rank_follow_their_documented_rules() -> None:
    frame = pl.DataFrame(
        {
            "pid": [1, 1, 1, 1, 2, 2, 3],
            "dx": ["flu", "cold", None, "cough", "flu", "acne", "cold"],
            "day": [3, 1, 1, 3, None, 5, None],
        }
    )
    first, last = pf.unit.first("dx", by="day"), pf.unit.last("dx", by="day")
    values = (("first", first), ("last", last), ("rank", pf.unit.rank("day")))
    rows = apply_steps(frame.lazy(), (UnitColumns(values),), unit="pid").collect()
    # Person 1: day 1 holds null and "cold" (ties ordered by the value, nulls first),
    # day 3 holds "cough" and "flu". Person 2's null day is out of the order. Person 3
    # has no day: no first, no last, no rank.
    assert rows["first"].to_list() == [None] * 4 + ["acne"] * 2 + [None]
    assert rows["last"].to_list() == ["flu"] * 4 + ["acne"] * 2 + [None]
    assert rows["rank"].to_list() == [3, 1, 1, 3, None, 1, None]  # "min" ranks
    per = apply_steps(frame.lazy(), (PerUnit((), values[:2]),), unit="pid").collect()
    assert per.sort("pid").rows() == [(1, None, "flu"), (2, "acne", "acne"), (3, None, None)]
    # The same whatever the rows' order.
    backwards = apply_steps(frame.reverse().lazy(), (PerUnit((), values[:2]),), unit="pid")
    assert backwards.collect().sort("pid").equals(per.sort("pid"))


def test_per_person_float_totals_do_not_depend_on_the_rows_order() -> None:
    # Added in arrival order, 1e16 − 1e16 + 1 is 1 and 1 − 1e16 + 1e16 is 0: a total must
    # not depend on that order (a join orders rows by the whole data). Added ascending,
    # −1e16 + 1 rounds to −1e16, so the total is 0 in every order.
    frame = pl.DataFrame({"pid": [1, 1, 1, 2], "x": [1e16, -1e16, 1.0, 2.5]})
    values = (("total", pf.unit.sum("x")), ("mean", pf.unit.mean("x")))
    for step in (UnitColumns(values), PerUnit((), values)):
        outs = [
            apply_steps(f.lazy(), (step,), unit="pid").collect().sort("pid", maintain_order=True)
            for f in (frame, frame.reverse(), frame[[2, 0, 3, 1]])
        ]
        for out in outs:
            assert out.group_by("pid").agg(pl.col("total", "mean").first()).sort("pid").rows() == [
                (1, 0.0, 0.0),
                (2, 2.5, 2.5),
            ]


# --------------------------------------------------------------------------- a ledger file


def test_a_ledger_over_several_tables_records_them_all_and_refuses_others(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spend.ledger"
    tables = {"visits": _visits(), "drugs": _drugs()}
    sess = pf.Session(tables, "pid", pf.zCDP(1.0), path)
    _count(_join(sess)).release(rho=0.25)
    conn = sqlite3.connect(path)
    (record,) = conn.execute("SELECT value FROM meta WHERE key = 'data'").fetchone()
    conn.close()
    names = [name for name, _ in DataIdentity.from_json(record).columns]
    assert names == [f"visits.{c}" for c in _visits().columns] + [
        f"drugs.{c}" for c in _drugs().columns
    ]
    assert SECRET not in path.read_bytes().decode("latin-1")
    again = pf.Session(tables, "pid", pf.zCDP(1.0), path)
    assert again.spent == pf.zCDP(0.25)
    before = path.read_bytes()
    for other in (
        {"visits": _visits()},
        {"visits": _visits(), "prescriptions": _drugs()},
        {"visits": _visits(), "drugs": _drugs().drop("dose")},
    ):
        with pytest.raises(pf.LedgerError) as info:
            pf.Session(other, "pid", pf.zCDP(1.0), path)
        assert "not in the ledger's data" in str(info.value) or "not here" in str(info.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "copy",
    [
        lambda q: q.per_unit(who=pf.unit.min("pid")),
        lambda q: q.per_unit(who=pf.unit.first("pid", by="day")),
        lambda q: q.with_columns(who=pf.unit.max("pid")).bound(max_rows=1),
        lambda q: q.with_columns(id=pl.col("pid") + 1).per_unit(
            "id", who=pf.unit.last("id", "day")
        ),
    ],
    ids=["per_unit min", "per_unit first", "per-person column max", "of a copy"],
)
def test_grouping_by_a_per_person_copy_of_the_unit_is_refused(
    sess: pf.Session, copy: Callable[[Query], Query]
) -> None:
    query = copy(sess.query()).group_by("who", keys=[1, 2]).agg(pf.count())
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "group_by column 'who' is computed from the privacy unit column 'pid'" in message


def test_a_per_person_value_of_another_column_may_be_grouped_by(sess: pf.Session) -> None:
    each = sess.query().with_columns(id=pl.col("pid") + 1).per_unit(who=pf.unit.n_unique("id"))
    assert each.group_by("who", keys=[1, 2]).agg(pf.count()).explain(rho=0.1).plan.limits.rows == 1


def test_grouping_by_a_copy_of_the_unit_made_on_the_joined_side_is_refused(
    sess: pf.Session,
) -> None:
    right = sess.query("drugs").with_columns(who=pl.col("pid"))
    joined = sess.query().join_private(right, on="pid", left_rows=2, right_rows=2)
    message = _refused(
        sess,
        lambda: joined.group_by("who", keys=[1, 2]).agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
    )
    assert "computed from the privacy unit" in message


def test_a_table_joins_itself_in_a_one_table_session() -> None:
    df = pl.DataFrame({"pid": [1, 1, 2], "x": [1.0, 2.0, 3.0]})
    one = pf.Session(df, "pid", pf.zCDP(1.0))
    q = one.query().join_private(one.query(), on="pid", left_rows=2, right_rows=2)
    released = q.agg(pf.count()).release(rho=0.5)
    assert released.columns == ["count"]
    assert one.spent.rho == 0.5


def test_a_unit_missing_from_a_second_table_is_refused_naming_the_table() -> None:
    tables = {"a": pl.DataFrame({"pid": [1]}), "b": pl.DataFrame({"id": [1]})}
    with pytest.raises(pf.InvalidValueError, match="private table 'b'") as caught:
        pf.Session(tables, "pid", pf.zCDP(1.0))
    assert caught.value.__context__ is None


def test_per_unit_refuses_the_unit_among_its_columns(sess: pf.Session) -> None:
    message = _refused(sess, lambda: sess.query().per_unit("pid"), pf.InvalidValueError)
    assert "always keeps the privacy unit" in message


def test_a_flat_map_may_not_replace_another_column() -> None:
    df = pl.DataFrame({"u": [1], "items": [["a"]], "x": [1]})
    one = pf.Session(df, "u", pf.zCDP(1.0))
    query = one.query().flat_map("items", max_rows=1, name="x").agg(pf.count())
    message = _refused(one, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "already a column" in message


def test_a_plan_whose_join_keys_leave_out_the_unit_is_refused_by_the_schema_check(
    sess: pf.Session,
) -> None:
    step = PrivateJoin("drugs", (), ("day",), "inner", left_rows=1, right_rows=1)
    plan = Plan(steps=(step,), aggregates=(pf.count(),))
    message = _refused(sess, lambda: sess.check(plan), pf.InvalidValueError)
    assert "two people" in message


def test_steps_over_units_have_no_wire_form_yet(sess: pf.Session) -> None:
    query = sess.query().per_unit(n=pf.unit.count()).agg(pf.count())
    with pytest.raises(pf.InvalidArgumentError, match="per_unit has no wire form yet"):
        encode_plan(query.plan)


def test_a_release_over_decimal_list_elements_never_fails_on_the_data() -> None:
    # Decimal elements used to reach the per-person sum as decimals, whose overflow
    # failed the release on some data only (one bit per query, for free).
    big = 9 * 10**37
    df = pl.DataFrame(
        {"u": [1, 2], "d": [[big, big], [1]]},
        schema={"u": pl.Int64, "d": pl.List(pl.Decimal(38, 0))},
    )
    one = pf.Session(df, "u", pf.zCDP(10.0))
    query = one.query().flat_map("d", max_rows=2).per_unit(total=pf.unit.sum("d"))
    released = query.agg(pf.sum("total", (0, 10))).release(rho=0.1)
    assert released.columns == ["total_sum"]
    assert one.spent.rho == 0.1
