"""Regressions for the third privacy review (SQL, reports, expressions, CSV input)."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf


def _session(df: pl.DataFrame | str, **kw) -> pf.Session:
    return pf.Session(
        df,
        "u",
        pf.zCDP(10.0),
        metadata={"x": pf.Column(bounds=(0, 10)), "g": pf.Column(keys=["a", "b"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        **kw,
    )


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
