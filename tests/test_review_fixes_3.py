"""Regressions for the third privacy review (SQL, reports, expressions, CSV input)."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf
from privframe.engines.expressions import check_types


def _session(df: pl.DataFrame | str, **kw) -> pf.Session:
    return pf.Session(
        df,
        "u",
        pf.zCDP(10.0),
        metadata={"x": pf.Column(bounds=(0, 10)), "g": pf.Column(keys=["a", "b"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        **kw,
    )


def test_a_null_literal_is_allowed_only_as_a_case_branch() -> None:
    schema = pl.Schema({"x": pl.Float64, "name": pl.String})
    check_types(pl.when(pl.col("x") > 1).then(pl.col("x")), schema)  # CASE without ELSE
    for oracle in (
        pl.when(pl.col("x") > 0).then(pl.lit(None).abs()).otherwise(0),
        pl.lit(None) + 1,
        pl.col("x") == pl.lit(None),
    ):
        with pytest.raises(pf.InvalidArgumentError):
            check_types(oracle, schema)


def test_abs_of_null_is_no_longer_a_free_membership_test() -> None:
    # It used to pass every check and fail only when some row matched: an uncharged oracle.
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0], "name": ["Alice", "Bob"]})
    sess = _session(df)
    text = (
        "SELECT SUM(CASE WHEN x > 0 THEN ABS(NULL) ELSE 0 END) AS z FROM data WHERE name = 'Alice'"
    )
    with pytest.raises(pf.PrivframeError):
        sess.sql(text, rho=0.1, metadata={"z": pf.Column(bounds=(0, 1))})
    assert sess.spent.rho == 0


def test_a_non_boolean_filter_is_refused_from_the_schema() -> None:
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    with pytest.raises(pf.InvalidValueError, match="Boolean"):
        sess.sql("SELECT COUNT(*) FROM data WHERE CASE x WHEN 1 THEN 1 END", rho=0.1)
    assert sess.spent.rho == 0


def test_csv_types_come_from_the_whole_file(tmp_path) -> None:
    # Integers for 200 rows, then a decimal: a type guessed from the first rows would
    # make SUM(x) fail only because of that later value.
    path = tmp_path / "data.csv"
    rows = [f"{i},a,{i % 7}" for i in range(200)] + ["999,b,12.5"]
    path.write_text("u,g,x\n" + "\n".join(rows) + "\n")
    sess = _session(str(path))
    assert sess.sql("SELECT g, SUM(x) AS s FROM data GROUP BY g", rho=0.5).height == 2


def test_an_unreadable_unit_column_is_withheld(tmp_path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("u,g,x\n1,a,1\nbob@example.com,a,2\n")
    with pytest.raises(pf.InvalidValueError) as info:
        pf.Session(
            pl.scan_csv(path, schema={"u": pl.Int64, "g": pl.String, "x": pl.Float64}),
            "u",
            pf.zCDP(1.0),
        )
    assert "bob" not in str(info.value)


def test_derived_columns_never_replace_data_columns() -> None:
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a"] * 3, "x": [1.0] * 3, "n_flag": [5, 5, 5]})
    sess = pf.Session(
        df,
        "u",
        pf.zCDP(1e9),
        metadata={"x": pf.Column(bounds=(0, 10)), "n_flag": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    out = sess.sql(
        "SELECT SUM(x * 2) AS x, AVG(x) AS a, COUNT(x) AS n, SUM(n_flag) AS f FROM data", rho=1e8
    )
    assert out["a"].item() == pytest.approx(1.0, abs=0.05)
    assert out["x"].item() == pytest.approx(6.0, abs=0.5)
    assert out["f"].item() == pytest.approx(15.0, abs=0.5)


def test_null_in_an_in_list_is_refused() -> None:
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    for text in (
        "SELECT COUNT(*) FROM data WHERE g NOT IN ('a', NULL)",
        "SELECT COUNT(*) FROM data WHERE g IN ('a', NULL)",
    ):
        with pytest.raises(pf.SQLError, match="IS NULL"):
            sess.sql(text)


def test_small_integer_columns_are_widened_and_do_not_wrap() -> None:
    df = pl.DataFrame(
        {"u": [1, 2], "g": ["a", "a"], "x": [1.0, 1.0], "c": [100, 100]},
        schema_overrides={"c": pl.Int8},
    )
    sess = pf.Session(
        df,
        "u",
        pf.zCDP(1e9),
        metadata={"g": pf.Column(keys=["a"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    out = sess.sql("SELECT g, COUNT(*) AS n FROM data WHERE c + c > 0 GROUP BY g", rho=1e8)
    assert out["n"].item() == pytest.approx(2, abs=0.5)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT g, COUNT(*) FROM data GROUP BY 1.5",
        "SELECT g, COUNT(*) AS n FROM data GROUP BY g ORDER BY 1.5",
        "SELECT COUNT(*) FROM data WHERE x > -'a'",
        "SELECT COUNT(*) FROM data WHERE " + "(" * 3000 + "x > 1" + ")" * 3000,
    ],
)
def test_malformed_sql_gets_an_sql_error(text: str) -> None:
    with pytest.raises(pf.SQLError):
        _session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]})).sql(text)


def test_a_group_column_selected_twice_under_two_names() -> None:
    sess = _session(pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0]}))
    out = sess.sql("SELECT g, g AS g2, COUNT(*) AS n FROM data GROUP BY g", rho=0.5)
    assert out.columns == ["g", "g2", "n"]
    assert out["g"].to_list() == out["g2"].to_list()


def test_explain_and_check_catch_post_processing_and_error_columns_before_charging() -> None:
    sess = _session(pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0]}))
    bad_order = sess.sql("SELECT g, COUNT(*) AS n FROM data GROUP BY g ORDER BY n LIKE 'a%'")
    with pytest.raises(pf.SQLError):
        bad_order.explain(rho=0.1)
    clash = sess.sql("SELECT g, COUNT(*) AS n, SUM(x) AS n_std FROM data GROUP BY g")
    with pytest.raises(pf.InvalidValueError, match="with_error"):
        clash.check(with_error=True)
    assert sess.spent.rho == 0


def test_an_engine_failure_keeps_no_trace_of_the_original_error(monkeypatch) -> None:
    # The withheld message must not survive as the error's __context__ either.
    from privframe.engines.polars import PolarsEngine

    def fail(self, spec):  # type: ignore[no-untyped-def]
        raise RuntimeError("private value 4242")

    monkeypatch.setattr(PolarsEngine, "aggregate", fail)
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    with pytest.raises(pf.InvalidValueError) as info:
        sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count()).release(rho=0.1)
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    assert "4242" not in str(info.value)
    assert sess.spent.rho == 0
