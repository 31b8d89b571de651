"""GROUP BY with public keys for some columns: the others chosen by partition selection.

Through ``Session.release`` (builder and SQL): the released groups are exactly
the public keys × the selected combinations of the other columns, absent keys
get noisy zeros, rows whose keyed columns are not public are dropped, and the
release charges exactly what a plain private selection of the same query
charges. The audit of the δ part is in
tests/privacy/test_privacy_audit_partial_keys.py.
"""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import privframe as pf
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.aggregates import Aggregate

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

REGIONS = ["north", "south", "east"]  # public; "east" has no rows, "west" is not public
RHO, DELTA = 8.0, 1e-6
# month 1: 200 units north and 200 south; month 2: 200 north; month 3: one unit (below
# any threshold); month 4: 300 units, all in the non-public region "west"; a null month.
TRUE_COUNTS = {(1, "north"): 200, (1, "south"): 200, (2, "north"): 200}


def data() -> pl.DataFrame:
    rows = (
        [(1, "north", 10.0)] * 200
        + [(1, "south", 20.0)] * 200
        + [(2, "north", 30.0)] * 200
        + [(3, "north", 40.0)]
        + [(4, "west", 50.0)] * 300
        + [(None, "north", 60.0)] * 50
    )
    month, region, amount = zip(*rows, strict=True)
    return pl.DataFrame(
        {"u": range(len(rows)), "month": month, "region": region, "amount": amount},
        schema_overrides={"month": pl.Int64},
    )


def session(seed: int = 0, budget: pf.Budget | None = None, frame: pl.DataFrame | None = None):
    return pf.Session(
        data() if frame is None else frame,
        "u",
        budget or pf.zCDP(rho=RHO, delta=DELTA),
        rng=SeededRandomness(seed),
        metadata={"region": pf.Column(keys=REGIONS)},
        contributions=pf.Bound(max_groups=2, max_rows_per_group=1),
    )


def partial_query(sess: pf.Session, *aggregates: Aggregate) -> Query:
    keys = pf.keys.product(region=REGIONS)
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=1)
        .group_by(["month", "region"], keys=keys)
        .agg(*(aggregates or (pf.count().alias("n"),)))
    )


def test_groups_are_the_public_keys_times_the_selected_combinations() -> None:
    out = partial_query(session()).release(RHO, delta=DELTA)
    # months 1 and 2 pass the threshold, 3 (one unit) does not, 4 had only non-public
    # rows (dropped before selection), null months are no combination; every public
    # region, in key order, for each selected month, in sorted order.
    assert out.select("month", "region").rows() == list(itertools.product([1, 2], REGIONS))


def test_absent_public_keys_get_noisy_zeros_and_present_ones_their_counts() -> None:
    sess = session(seed=3)
    query = partial_query(sess)
    (count,) = query.explain(RHO, delta=DELTA).plan.measurements
    sigma = count.sigma
    out = query.release(RHO, delta=DELTA, with_error=True, clamp=False)
    for month, region, n, std in out.select("month", "region", "n", "n_std").rows():
        assert std == pytest.approx(sigma)  # every row, present or not, is a noisy release
        assert abs(n - TRUE_COUNTS.get((month, region), 0)) <= 6 * sigma


def test_rows_with_a_non_public_key_are_dropped_before_bounding() -> None:
    # The 200 units of (1, north) also have rows of the non-public region "west" in months
    # 5 and 6. Kept until bounding, they would take two of each unit's three groups at
    # random (max_groups=2) and leave (1, north) about 133 units; dropped first, all 200 stay.
    extra = pl.DataFrame(
        {"u": [*range(200), *range(200)], "month": [5] * 200 + [6] * 200},
        schema_overrides={"month": pl.Int64},
    ).with_columns(region=pl.lit("west"), amount=pl.lit(0.0))
    sess = session(seed=4, frame=pl.concat([data(), extra.select(data().columns)]))
    out = partial_query(sess).release(RHO, delta=DELTA, clamp=False)
    assert "west" not in out["region"].to_list()
    assert not {4, 5, 6} & set(out["month"].to_list())
    n = dict(zip(zip(out["month"], out["region"], strict=True), out["n"], strict=True))
    assert abs(n[(1, "north")] - 200) <= 20
    assert abs(n[(1, "south")] - 200) <= 20


def test_charges_exactly_what_a_plain_private_selection_charges() -> None:
    partial, plain = session(seed=5), session(seed=5)
    plain_query = (
        plain.query()
        .bound(max_groups=2, max_rows_per_group=1)
        .group_by(["month", "region"])
        .agg(pf.count().alias("n"))
    )
    mixed = partial_query(partial).explain(RHO, delta=DELTA).plan
    alone = plain_query.explain(RHO, delta=DELTA).plan
    assert mixed.cost == alone.cost
    assert mixed.selection == alone.selection  # same threshold, σ and δ
    partial_query(partial).release(RHO, delta=DELTA)
    plain_query.release(RHO, delta=DELTA)
    (mixed_entry,), (plain_entry,) = partial.ledger, plain.ledger
    assert (mixed_entry.exact_rho, mixed_entry.exact_delta) == (
        plain_entry.exact_rho,
        plain_entry.exact_delta,
    )
    assert mixed_entry.delta == DELTA
    description = mixed_entry.description
    assert description["selection"] == plain_entry.description["selection"]
    assert description["selected"] == ("month",)
    assert description["n_keys"] is None  # how many groups appear is not public


def test_a_budget_without_delta_is_refused_before_anything_runs() -> None:
    sess = session(budget=pf.zCDP(rho=RHO))
    with pytest.raises(pf.InvalidBudgetError, match="public keys"):
        partial_query(sess).explain(RHO)
    with pytest.raises(pf.BudgetExceededError, match="delta"):
        partial_query(sess).release(RHO, delta=DELTA)
    assert sess.ledger == ()


def test_needs_max_groups() -> None:
    sess = session()
    query = (
        sess.query()
        .bound(max_rows_per_group=1)
        .group_by(["month", "region"], keys=pf.keys.product(region=REGIONS))
        .agg(pf.count())
    )
    with pytest.raises(pf.InvalidValueError, match=r"max_groups.*\['month'\]|\['month'\]"):
        query.release(RHO, delta=DELTA)


def test_sums_means_and_quantiles_follow_the_same_groups() -> None:
    sess = session(seed=6)
    query = partial_query(
        sess,
        pf.count().alias("n"),
        pf.sum("amount", bounds=(0, 100)).alias("total"),
        pf.mean("amount", bounds=(0, 100)).alias("average"),
        pf.quantile("amount", 0.5, bounds=(0, 100)).alias("median"),
    )
    out = query.release(RHO, delta=DELTA)
    assert out.select("month", "region").rows() == list(itertools.product([1, 2], REGIONS))
    present = out.filter(
        pl.struct("month", "region").is_in([{"month": m, "region": r} for m, r in TRUE_COUNTS])
    )
    expected = {(1, "north"): 10.0, (1, "south"): 20.0, (2, "north"): 30.0}
    for month, region, average, median in present.select(
        "month", "region", "average", "median"
    ).rows():
        assert average == pytest.approx(expected[(month, region)], abs=2)
        assert median == pytest.approx(expected[(month, region)], abs=5)


def test_builder_refuses_keys_for_a_column_it_does_not_group_by() -> None:
    query = session().query()
    with pytest.raises(pf.InvalidValueError, match="not group columns"):
        query.group_by(["month"], keys=pf.keys.product(region=REGIONS))


def test_other_needs_keys_for_every_group_column() -> None:
    query = session().query()
    with pytest.raises(pf.InvalidValueError, match="every group column"):
        query.group_by(["month", "region"], keys=pf.keys.product(region=REGIONS), other="rest")


def test_full_and_no_keys_keep_their_meaning() -> None:
    query = session().query()
    full = query.group_by(["month", "region"], keys=pf.keys.product(region=REGIONS, month=[1]))
    assert full.plan.selected == ()
    assert full.plan.n_groups == 3
    assert full.plan.keys is not None
    assert full.plan.keys.columns == ("month", "region")  # the group_by order
    assert query.group_by(["month", "region"]).plan.selected == ("month", "region")


def test_tune_is_refused_because_the_number_of_groups_is_not_public() -> None:
    query = partial_query(session())
    with pytest.raises(pf.InvalidValueError, match="public group keys"):
        query.tune(0.1, plan_rho=1.0)


def test_explain_names_public_and_selected_columns_and_reveals_nothing() -> None:
    one = partial_query(session()).explain(RHO, delta=DELTA)
    other_data = data().with_columns(month=pl.lit(7, pl.Int64))
    two = partial_query(session(frame=other_data)).explain(RHO, delta=DELTA)
    text = str(one)
    assert text == str(two)
    assert (
        "groups: every public key of ['region'] (3 keys) for each combination of ['month'] "
        "chosen privately"
    ) in text
    assert "noisy count >=" in text
    assert "groups: every public key of [&#x27;region&#x27;]" in one._repr_html_()


SQL = "SELECT month, region, COUNT(*) AS n FROM data GROUP BY region, month"


def test_sql_mixing_keyed_and_unkeyed_columns_is_refused_without_delta() -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as info:
        sess.sql(SQL, rho=RHO)
    assert info.value.construct == "GROUP BY"
    assert info.value.position is not None
    assert "'month'" in str(info.value)
    assert "delta=" in str(info.value)
    assert sess.ledger == ()


def test_sql_with_delta_releases_what_the_builder_releases() -> None:
    sql_sess, builder_sess = session(seed=8), session(seed=8)
    got = sql_sess.sql(SQL, rho=RHO, delta=DELTA)
    keys = pf.keys.product(region=REGIONS)
    expected = (
        builder_sess.query()
        .bound(max_groups=2, max_rows_per_group=1)
        .group_by(["region", "month"], keys=keys)
        .agg(pf.count().alias("n"))
        .release(RHO, delta=DELTA)
        .select("month", "region", "n")
    )
    assert_frame_equal(got, expected)
    assert got.select("month", "region").rows() == list(itertools.product([1, 2], REGIONS))
    assert sql_sess.ledger[0].exact_delta == builder_sess.ledger[0].exact_delta
    explained = str(session().sql(SQL).explain(RHO, delta=DELTA))
    assert "every public key of ['region'] (3 keys) for each combination of ['month']" in explained


def test_sql_explain_without_delta_names_only_the_columns_chosen_privately() -> None:
    query = session().sql("SELECT region, month, COUNT(*) AS n FROM data GROUP BY region, month")
    (note,) = [n for n in query.explain(rho=1.0).notes if "has no public keys" in n]
    assert note.startswith("GROUP BY month has no public keys")
