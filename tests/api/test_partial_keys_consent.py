"""Public keys for some group columns spend δ only when δ is asked for.

A group_by whose keys cover some of its columns chooses the others privately,
which spends δ. A builder release's default δ is all the δ left, so without
this rule a column left out of a KeySet by mistake (refused before keys for
some columns were supported) would silently spend the session's whole δ. So
the builder's release path and report specs need ``delta`` for such a query,
and refuse without it before anything is charged; ``explain`` (which spends
nothing) still runs without it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.api.report import SpecError, load_spec
from privframe.plan.keys import KeySet

RHO, DELTA = 1.0, 1e-6
DATA = pl.DataFrame(
    {"u": range(400), "region": ["north", "south"] * 200, "month": [1, 2, 3, 4] * 100}
)


def session() -> pf.Session:
    return pf.Session(DATA, "u", pf.zCDP(rho=RHO, delta=DELTA))


def by_region_and_month(sess: pf.Session, keys: KeySet) -> Query:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by(["region", "month"], keys=keys)
        .agg(pf.count())
    )


def test_a_release_without_delta_is_refused_before_anything_is_charged() -> None:
    sess = session()
    query = by_region_and_month(sess, pf.keys.product(region=["north", "south"]))
    with pytest.raises(pf.InvalidArgumentError) as info:
        query.release(RHO / 2)
    message = str(info.value)
    assert "['month'] have no public keys" in message
    assert "pass delta=... to opt in" in message
    assert sess.ledger == ()
    assert sess.remaining == pf.zCDP(rho=RHO, delta=DELTA)


def test_a_request_without_delta_is_refused_before_the_batch_runs() -> None:
    sess = session()
    query = by_region_and_month(sess, pf.keys.product(region=["north", "south"]))
    with pytest.raises(pf.InvalidArgumentError, match="spending delta"):
        sess.release_all([query.request(RHO / 2)])
    assert sess.ledger == ()


def test_explain_without_delta_still_shows_the_selection() -> None:
    query = by_region_and_month(session(), pf.keys.product(region=["north", "south"]))
    assert query.explain(RHO / 2).plan.selection is not None


def test_a_given_delta_is_what_the_release_spends() -> None:
    sess = session()
    query = by_region_and_month(sess, pf.keys.product(region=["north", "south"]))
    query.release(RHO / 2, delta=DELTA / 4)
    (entry,) = sess.ledger
    assert entry.delta == DELTA / 4
    assert sess.remaining.delta == pytest.approx(DELTA * 3 / 4)


def test_keys_for_every_group_column_need_no_delta_and_spend_none() -> None:
    sess = session()
    keys = pf.keys.product(region=["north", "south"], month=[1, 2, 3, 4])
    out = by_region_and_month(sess, keys).release(RHO / 2)
    assert out.height == 8
    assert sess.remaining.delta == DELTA


SPEC = """
[report]
title = "Monthly"

[data]
path = "data.parquet"
privacy_unit = "u"

[budget]
rho = 1.0
delta = 1e-6
ledger = "ledger.sqlite"

[metadata]
region = {{ keys = ["north", "south"] }}

[contributions]
max_groups = 1
max_rows_per_group = 1

[[queries]]
name = "by_region_month"
group_by = ["region", "month"]
aggregates = [{{ kind = "count" }}]
rho = 0.5
{extra}
"""


def load(tmp_path: Path, extra: str = "") -> KeySet | None:
    (tmp_path / "spec.toml").write_text(SPEC.format(extra=extra))
    (query,) = load_spec(tmp_path / "spec.toml").queries
    return query.keys


def test_a_report_query_with_keys_for_some_group_columns_needs_delta(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load(tmp_path)
    message = str(info.value)
    assert "queries[0] ('by_region_month')" in message
    assert "['month'] have no keys" in message
    assert "give delta = ..." in message


def test_a_report_query_with_delta_or_keys_for_every_column_loads(tmp_path: Path) -> None:
    assert load(tmp_path, "delta = 1e-7") is not None
    keyed = load(tmp_path, 'keys = { region = ["north"], month = [1, 2] }')
    assert keyed is not None
    assert sorted(keyed.columns) == ["month", "region"]
