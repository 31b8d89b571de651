"""A release's options are one value, ReleaseOptions, on every path a release takes.

The builder, SQL (parsed, or released at once by ``Session.sql``), reports
and the server's wire form all hand the pipeline the same
:class:`~privframe.plan.release_options.ReleaseOptions` for the same
keywords; every release call's signature and its refusal of an unknown
keyword list exactly the value's fields. A query whose BigQuery
``OPTIONS(epsilon, delta)`` carry its budget runs from ``sess.sql(text)``
and is charged exactly that budget.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
import warnings
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import privframe as pf
from privframe.api.cli import main
from privframe.api.query import Query, Request
from privframe.api.sql import SQLQuery
from privframe.api.sql_entry import SQLEntry
from privframe.api.wire import decode_request, encode_request
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.release_options import ReleaseKeywords, ReleaseOptions

FIELDS = [f.name for f in dataclasses.fields(ReleaseOptions)]
REGIONS = ["north", "south", "east", "west"]
GIVEN: dict[str, Any] = {
    "with_error": True,
    "weights": {"n": 2.0},
    "label": "monthly",
    "clamp": False,
    "intervals": True,
    "total": True,
}
"""Every option but delta away from its default (delta is spent by private groups only)."""
OPTIONS_TEXT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, max_groups_contributed=1) "
    "region, COUNT(*) AS n FROM data GROUP BY region"
)
OPTIONS_RHO = pf.ApproxDP(1, Fraction(1, 1_000_000)).to_zcdp().exact_rho


def session() -> pf.Session:
    frame = pl.DataFrame(
        {
            "u": list(range(40)),
            "region": [REGIONS[i % 4] for i in range(40)],
            "x": [float(i % 7) for i in range(40)],
        }
    )
    return pf.Session(
        frame,
        "u",
        pf.zCDP(10.0, delta=1e-5),
        rng=SeededRandomness(5),
        metadata={"region": pf.Column(keys=REGIONS), "x": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )


@pytest.fixture(autouse=True)
def _quiet_seeds() -> None:
    warnings.simplefilter("ignore", pf.SeededRandomnessWarning)


def builder(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=REGIONS)
        .agg(pf.count().alias("n"))
    )


SQL = "SELECT region, COUNT(*) AS n FROM data GROUP BY region"


def released_options(sess: pf.Session, release: Callable[[], object]) -> ReleaseOptions:
    """The options of the one request ``release()`` hands the session."""
    seen: list[Request] = []
    original = sess.release_all

    def spy(requests: list[Request]) -> list[Any]:
        seen.extend(requests)
        return original(requests)

    sess.release_all = spy  # type: ignore[method-assign]
    release()
    (request,) = seen
    return request.options


# -- one declaration ------------------------------------------------------------------------------


def test_the_typed_keywords_are_the_options_fields() -> None:
    keywords = typing.get_type_hints(ReleaseKeywords)
    assert list(keywords) == FIELDS
    assert keywords == typing.get_type_hints(ReleaseOptions)


CALLS = {
    "Query.release": Query.release,
    "Query.request": Query.request,
    "SQLQuery.release": SQLQuery.release,
    "SQLQuery.request": SQLQuery.request,
    "Session.sql": SQLEntry.sql,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_every_release_call_shows_the_options_fields_as_its_keywords(name: str) -> None:
    parameters = inspect.signature(CALLS[name]).parameters
    shown = [p for p in parameters.values() if p.name in FIELDS]
    assert [p.name for p in shown] == FIELDS
    assert [p.default for p in shown] == [f.default for f in dataclasses.fields(ReleaseOptions)]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in shown)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


UNKNOWN: dict[str, Callable[[pf.Session], object]] = {
    "Query.release": lambda s: builder(s).release(0.1, with_errors=True),
    "Query.request": lambda s: builder(s).request(0.1, with_errors=True),
    "SQLQuery.release": lambda s: s.parse_sql(SQL).release(0.1, with_errors=True),
    "SQLQuery.request": lambda s: s.parse_sql(SQL).request(0.1, with_errors=True),
    "Session.sql": lambda s: s.sql(SQL, rho=0.1, with_errors=True),
}


@pytest.mark.parametrize("name", list(UNKNOWN))
def test_an_unknown_keyword_is_refused_listing_every_option(name: str) -> None:
    sess = session()
    with pytest.raises(pf.InvalidArgumentError) as refused:
        UNKNOWN[name](sess)
    message = str(refused.value)
    assert f"{name}() got an argument it does not take: 'with_errors'" in message
    assert "did you mean with_error=...?" in message
    takes = message.split(f"{name}() takes: ")[1]
    assert all(f"{field}=" in takes for field in FIELDS)
    assert not sess.ledger


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"clamp": "yes"}, "clamp must be True or False, not a value of type str"),
        ({"with_error": 1}, "with_error must be True or False, not a value of type int"),
        ({"label": 5}, "label must be a str, not a value of type int"),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_before_any_charge(
    given: dict[str, Any], says: str
) -> None:
    sess = session()
    for release in (
        lambda: builder(sess).release(0.1, **given),
        lambda: sess.sql(SQL, rho=0.1, **given),
    ):
        with pytest.raises(pf.InvalidArgumentError, match=says):
            release()
    assert not sess.ledger


# -- the same value on every path -----------------------------------------------------------------


def test_every_front_end_hands_the_pipeline_the_same_options() -> None:
    want = ReleaseOptions(**GIVEN)
    sess = session()
    paths = {
        "builder release": lambda: builder(sess).release(0.1, **GIVEN),
        "builder request": lambda: sess.release_all([builder(sess).request(0.1, **GIVEN)]),
        "SQL release": lambda: sess.parse_sql(SQL).release(0.1, **GIVEN),
        "SQL request": lambda: sess.release_all([sess.parse_sql(SQL).request(0.1, **GIVEN)]),
        "Session.sql": lambda: sess.sql(SQL, rho=0.1, **GIVEN),
        "wire, builder": lambda: sess.release_all(
            [decode_request(encode_request(builder(sess).request(0.1, **GIVEN)), sess)]
        ),
        "wire, SQL": lambda: sess.release_all(
            [decode_request(encode_request(sess.parse_sql(SQL).request(0.1, **GIVEN)), sess)]
        ),
    }
    got = {name: released_options(sess, release) for name, release in paths.items()}
    assert got == dict.fromkeys(paths, want)


def test_changing_the_callers_weights_after_request_does_not_change_the_request() -> None:
    sess = session()
    query = builder(sess).agg(pf.sum("x", bounds=(0, 10)))
    weights = {"n": 3.0}
    request = query.request(0.1, weights=weights)
    weights["n"] = 0.001
    weights["not_an_output"] = 1.0
    assert request.options.weights == {"n": 3.0}
    with pytest.raises(TypeError):
        request.options.weights["n"] = 0.001  # type: ignore[index]
    sess.release_all([request])
    (entry,) = sess.ledger
    charged = {m["key"]: m["rho"] for m in entry.description["measurements"]}
    planned = query.explain(rho=0.1, weights={"n": 3.0}).plan
    assert charged == {m.key: float(m.exact_share) for m in planned.measurements}


def test_the_wire_form_carries_every_option() -> None:
    options = ReleaseOptions(**GIVEN, delta=Fraction(1, 10**6))
    assert options.given() == tuple(FIELDS)  # a new option must be given here too
    sess = session()
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("region")
    request = query.agg(pf.count().alias("n")).request_with(0.1, options)
    data = encode_request(request)
    assert [k for k in data if k in FIELDS] == FIELDS
    assert decode_request(data, sess).options == options


def test_the_wire_form_leaves_out_options_at_their_defaults() -> None:
    sess = session()
    data = encode_request(builder(sess).request(0.1))
    assert data == {"version": 1, "plan": data["plan"], "rho": "1/10"}
    assert decode_request(data, sess).options == ReleaseOptions()


def test_the_wire_form_that_names_every_option_is_still_read() -> None:
    sess = session()
    data = encode_request(builder(sess).request(0.1))
    # As clients sent it before options at their defaults were left out.
    data |= {"delta": None, "weights": None, "with_error": False, "label": ""}
    data |= {"clamp": True, "intervals": False, "total": False}
    assert decode_request(data, sess).options == ReleaseOptions()


def test_a_report_hands_the_pipeline_its_spec_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pf.datasets.synthetic_transactions(n_rows=2_000, seed=1).write_parquet(tmp_path / "d.parquet")
    (tmp_path / "spec.toml").write_text(
        f"""
[report]
title = "T"
rho = 0.2
[data]
path = "d.parquet"
privacy_unit = "user_id"
[budget]
rho = 1.0
ledger = "ledger.sqlite"
[metadata]
region = {{ keys = {REGIONS!r} }}
[contributions]
max_groups = 3
max_rows_per_group = 5
[[queries]]
name = "q"
group_by = ["region"]
aggregates = [{{ kind = "count" }}]
rho = 0.2
clamp = false
intervals = true
total = true
"""
    )
    seen: list[Request] = []
    batch = pf.Session.batch

    def spy(self: pf.Session, requests: list[Request]) -> Any:
        seen.extend(requests)
        return batch(self, requests)

    monkeypatch.setattr(pf.Session, "batch", spy)
    assert main(["report", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "out")]) == 0
    (request,) = seen
    keywords = {"with_error": True, "label": "T/q", "clamp": False, "intervals": True}
    assert request.options == ReleaseOptions(**keywords, total=True)
    assert request.options == builder(session()).request(0.2, **keywords, total=True).options


# -- BigQuery's OPTIONS: run as pasted -------------------------------------------------------------


def test_a_query_with_options_runs_from_sql_and_spends_exactly_their_budget() -> None:
    sess = session()
    released = sess.sql(OPTIONS_TEXT, with_error=True)
    assert isinstance(released, pl.DataFrame)
    assert released.columns == ["region", "n", "n_std", "n_ci95"]
    assert len(sess.ledger) == 1
    assert sess.spent.exact_rho == OPTIONS_RHO
    assert sess.spent.exact_delta == 0  # public keys: no delta spent on choosing groups
    assert sess.ledger[0].label == OPTIONS_TEXT


def test_a_query_with_options_runs_as_its_parsed_release_does() -> None:
    pasted, parsed = session(), session()
    got = pasted.sql(OPTIONS_TEXT)
    want = parsed.parse_sql(OPTIONS_TEXT).release()
    assert isinstance(got, pl.DataFrame)
    assert got.equals(want)
    assert pasted.spent == parsed.spent


@pytest.mark.parametrize("given", [{"rho": 0.1}, {"delta": 1e-6}])
def test_a_query_with_options_and_a_budget_argument_is_refused(given: dict[str, float]) -> None:
    sess = session()
    with pytest.raises(pf.SQLError, match="the budget is given twice") as refused:
        sess.sql(OPTIONS_TEXT, **given)  # type: ignore[call-overload]
    assert refused.value.construct == "WITH DIFFERENTIAL_PRIVACY OPTIONS"
    assert not sess.ledger


def test_parse_sql_parses_a_query_with_options_without_spending() -> None:
    sess = session()
    parsed = sess.parse_sql(OPTIONS_TEXT)
    assert isinstance(parsed, SQLQuery)
    assert parsed.options is not None
    assert "OPTIONS(epsilon=1, delta=1e-06)" in str(parsed.explain())
    assert not sess.ledger


def test_without_a_budget_sql_still_only_parses_and_refuses_release_keywords() -> None:
    sess = session()
    assert isinstance(sess.sql(SQL), SQLQuery)
    assert isinstance(sess.sql(SQL, with_error=False), SQLQuery)  # defaults configure nothing
    with pytest.raises(
        pf.InvalidArgumentError, match=re.escape("with_error=..., total=... configure")
    ):
        sess.sql(SQL, with_error=True, total=True)
    assert not sess.ledger
