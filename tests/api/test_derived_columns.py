"""Derived columns (with_columns) and public bins (pf.bin) before aggregation."""

from __future__ import annotations

import polars as pl
import pytest
from internals import column_of, spec_of

import privframe as pf
from privframe.api.query import Query
from privframe.engines.spec import COUNT
from privframe.plan.planner import plan_release


def _data() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "u": [1, 1, 2, 3, 4, 5],
            "region": ["n", "s", "n", "e", "w", "n"],
            "price": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            "qty": [1, 2, 3, 1, 1, 2],
            "age": [15, 15, 30, 45, 70, 200],
        }
    )


def _exact(sess: pf.Session, query: Query) -> pl.DataFrame:
    """The exact (pre-noise) aggregates of a query, through the session's own plan."""
    release = plan_release(query.plan, True, 1.0)
    return sess._engine.aggregate(spec_of(sess, query.plan, release))


def test_a_derived_value_column_is_aggregated() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .with_columns(revenue=pl.col("price") * pl.col("qty"))
        .bound(max_groups=4, max_rows_per_group=10)
        .group_by("region", keys=["n", "s", "e", "w"])
        .agg(pf.sum("revenue", bounds=(0, 100)))
    )
    exact = _exact(sess, query)
    release = query.explain(rho=1.0).plan
    centred = release.measurement("centred_sum(revenue, [0, 100])")
    sums = exact[column_of(release, centred)].to_list()
    counts = exact[release.measurement("count").need.exact_column("")].to_list()
    scale = 2.0**-centred.grid_exponent
    exact_sums = [(s + centred.centre_units * n) * scale for s, n in zip(sums, counts, strict=True)]
    assert exact_sums == [2.0 + 12.0 + 14.0, 6.0, 5.0, 6.0]


def test_a_filter_can_use_a_derived_column_and_order_is_kept() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .with_columns(adult=pl.col("age") >= 18)
        .filter(pl.col("adult"))
        .bound(max_groups=4, max_rows_per_group=10)
        .group_by("region", keys=["n", "s", "e", "w"])
        .agg(pf.count())
    )
    assert _exact(sess, query)[COUNT].to_list() == [2, 0, 1, 1]
    assert [s.kind for s in query.plan.steps] == ["with_columns", "filter"]


def test_a_rewritten_key_column_is_bounded_as_rewritten() -> None:
    # Every row moved into one group: a unit with rows in two regions now has two
    # rows in "n", and m = 1 must bound it there (no stale bound from before).
    sess = pf.Session(_data(), "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .with_columns(region=pl.lit("n"))
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=["n"])
        .agg(pf.count())
    )
    assert _exact(sess, query)[COUNT].to_list() == [5]  # 5 units, 1 row each


def test_the_privacy_unit_column_cannot_be_rewritten() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0))
    for rewrite in (pl.col("u") * 10 + pl.col("qty"), pl.lit(1).alias("u")):
        query = sess.query().with_columns(rewrite).bound(max_rows_per_group=1).agg(pf.count())
        with pytest.raises(pf.InvalidValueError, match="privacy unit"):
            query.release(rho=0.5)
    query = sess.query().with_columns(u=pl.col("qty")).bound(max_rows_per_group=1).agg(pf.count())
    with pytest.raises(pf.InvalidValueError, match="privacy unit"):
        query.explain(rho=0.5)
    assert sess.ledger == ()


def test_unsafe_derived_columns_are_refused() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="row"):
        sess.query().with_columns(z=pl.col("price") - pl.col("price").mean())
    with pytest.raises(pf.InvalidArgumentError, match="strict"):
        sess.query().with_columns(z=pl.col("region").cast(pl.Int64))
    with pytest.raises(pf.InvalidValueError, match="at least one"):
        sess.query().with_columns()


def test_a_derived_column_that_does_not_fit_the_schema_is_a_clear_error() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0))
    query = (
        sess.query()
        .with_columns(z=pl.col("nope") + 1)
        .bound(max_rows_per_group=1)
        .agg(pf.sum("z", (0, 1)))
    )
    with pytest.raises(pf.InvalidValueError, match="nope"):
        query.release(rho=0.5)
    assert sess.ledger == ()


def test_bins_make_a_public_histogram() -> None:
    ages = pf.bin("age", [0, 18, 65, 120])
    assert ages.keys == ["[0, 18)", "[18, 65)", "[65, 120]"]
    sess = pf.Session(_data(), "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .with_columns(band=ages)
        .bound(max_groups=3, max_rows_per_group=10)
        .group_by("band", keys=ages.keys)
        .agg(pf.count())
    )
    # 15, 15 | 30, 45 | 70; age 200 is outside the edges and dropped.
    assert _exact(sess, query)[COUNT].to_list() == [2, 2, 1]
    released = query.release(rho=1.0)
    assert released["band"].to_list() == ages.keys


@pytest.mark.parametrize(
    ("edges", "labels", "error"),
    [
        ([1], None, pf.InvalidValueError),
        ([1, 1], None, pf.InvalidValueError),
        ([2, 1], None, pf.InvalidValueError),
        ([0, float("inf")], None, pf.InvalidValueError),
        ([0, 1, 2], ["a"], pf.InvalidValueError),
        ([0, 1, 2], ["a", "a"], pf.InvalidValueError),
        (["0", 1], None, pf.InvalidArgumentError),
    ],
)
def test_bad_bins_are_refused(edges: list, labels: list | None, error: type) -> None:
    with pytest.raises(error):
        pf.bin("age", edges, labels)


def test_bin_labels_can_be_named() -> None:
    assert pf.bin("age", [0, 18, 120], ["minor", "adult"]).keys == ["minor", "adult"]


def test_a_public_table_is_joined_row_wise() -> None:
    regions = pl.DataFrame({"region": ["n", "s", "e"], "zone": ["cold", "cold", "warm"]})
    sess = pf.Session(_data(), "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .join(regions, on="region", how="inner")  # drops region "w": no match
        .bound(max_groups=2, max_rows_per_group=10)
        .group_by("zone", keys=["cold", "warm"])
        .agg(pf.count())
    )
    assert _exact(sess, query)[COUNT].to_list() == [4, 1]
    left = (
        sess.query()
        .join(regions, on="region")
        .bound(max_groups=1, max_rows_per_group=10)
        .agg(pf.count())
    )
    assert _exact(sess, left)[COUNT].to_list() == [6]  # a left join keeps every row


def test_a_public_table_must_be_unique_on_the_join_columns() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0))
    twice = pl.DataFrame({"region": ["n", "n"], "zone": ["a", "b"]})
    with pytest.raises(pf.InvalidValueError, match="unique"):
        sess.query().join(twice, on="region")
    with pytest.raises(pf.InvalidValueError, match="no column"):
        sess.query().join(twice, on="nope")
    with pytest.raises(pf.InvalidArgumentError, match="DataFrame"):
        sess.query().join([1, 2], on="region")  # type: ignore[arg-type]


def test_a_public_table_may_not_shadow_private_columns() -> None:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0))
    clash = pl.DataFrame({"region": ["n"], "u": [7]})
    query = sess.query().join(clash, on="region").bound(max_rows_per_group=1).agg(pf.count())
    with pytest.raises(pf.InvalidValueError, match="already exist"):
        query.release(rho=0.5)
    assert sess.ledger == ()


def test_other_collects_non_public_and_null_keys() -> None:
    df = pl.DataFrame({"u": [1, 2, 3, 4, 5, 6], "g": ["a", "b", "zz", "yy", None, "a"]})
    sess = pf.Session(df, "u", pf.zCDP(1e6))
    query = (
        sess.query()
        .bound(max_rows_per_group=1)
        .group_by("g", keys=["a", "b"], other="other")
        .agg(pf.count())
    )
    assert _exact(sess, query)[COUNT].to_list() == [2, 1, 3]
    assert query.release(rho=1.0)["g"].to_list() == ["a", "b", "other"]
    # "other" is one more public group: it counts toward the groups a unit can reach.
    assert query.explain(rho=1.0).plan.limits.max_groups == 3


def test_bad_other_labels_are_refused() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "g": ["a"], "n": [1]}), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidValueError, match="already"):
        sess.query().group_by("g", keys=["a", "b"], other="a")
    with pytest.raises(pf.InvalidValueError, match="public keys"):
        sess.query().group_by("g", other="other")
    with pytest.raises(pf.InvalidArgumentError, match="string"):
        sess.query().group_by("g", keys=["a"], other=3)  # type: ignore[arg-type]
    numeric = sess.query().bound(max_rows_per_group=1).group_by("n", keys=[1], other="x")
    with pytest.raises(pf.InvalidArgumentError, match="string key column"):
        numeric.agg(pf.count()).release(rho=0.5)
