"""Builder mistakes a first session makes: each is refused with its real cause, spending nothing.

Every refusal is a PrivframeError naming the call, the argument or column, and
what to pass instead; none carries a data value or an exception chain.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query

SECRET = 987654.321
SECRET_TEXT = "SECRET-51c0"
BOUNDED = ("sum", "mean", "var", "std", "median")


@pytest.fixture
def sess() -> pf.Session:
    df = pl.DataFrame(
        {
            "user_id": [1, 2, 3, 4],
            "region": ["north", SECRET_TEXT, "south", "north"],
            "amount": [1.0, SECRET, 3.0, 4.0],
            "score": [0.5, 1.5, math.nan, 2.5],
        }
    )
    return pf.Session(df, "user_id", pf.zCDP(1.0))


def _refused(
    sess: pf.Session,
    action,
    error: type[pf.PrivframeError] = pf.InvalidArgumentError,
    *,
    budget: bool = True,
) -> str:
    """The message of the refusal of ``action``, after checking nothing was charged or leaked.

    ``budget=False``: the refusal must not be an InvalidBudgetError (the argument is no budget).
    """
    with pytest.raises(error) as info:
        action()
    assert isinstance(info.value, pf.PrivframeError)
    assert budget or not isinstance(info.value, pf.InvalidBudgetError)
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    message = str(info.value)
    assert SECRET_TEXT not in message
    assert "987654" not in message
    assert sess.spent.rho == 0
    assert sess.ledger == ()
    return message


def _query(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=1)
        .group_by("region", keys=["north", "south"])
        .agg(pf.count())
    )


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("kind", [*BOUNDED, "quantile"])
@pytest.mark.parametrize(
    ("bounds", "which"),
    [((0, math.inf), "upper"), ((-math.inf, 0), "lower"), ((math.nan, 1), "lower")],
    ids=["inf-upper", "-inf-lower", "nan-lower"],
)
def test_a_non_finite_bound_is_a_bounds_error_naming_aggregate_and_column(
    sess: pf.Session, kind: str, bounds: tuple[float, float], which: str
) -> None:
    args = ("amount", 0.5) if kind == "quantile" else ("amount",)
    message = _refused(
        sess, lambda: getattr(pf, kind)(*args, bounds=bounds), pf.InvalidValueError, budget=False
    )
    aggregate = "quantile" if kind == "median" else kind
    assert f"{aggregate}('amount')" in message
    assert f"the {which} bound must be finite" in message
    assert "bounds=(lower, upper)" in message


def test_a_bound_of_the_wrong_type_names_the_aggregate(sess: pf.Session) -> None:
    message = _refused(sess, lambda: pf.mean("amount", bounds=("0", 10)))
    assert "mean('amount')" in message
    assert "the lower bound must be a real number" in message


def test_a_nan_quantile_level_is_not_a_budget_error(sess: pf.Session) -> None:
    message = _refused(
        sess, lambda: pf.quantile("amount", math.nan, (0, 10)), pf.InvalidValueError, budget=False
    )
    assert "quantile('amount'): q must be finite" in message
    assert "[0, 1]" in message


@pytest.mark.parametrize(
    "aggregate",
    [pf.mean("x", (0, 1e300)), pf.var("x", (0, 1e-300)), pf.std("x", (0, 1e200))],
    ids=["mean huge", "var tiny", "std huge"],
)
def test_extreme_bounds_are_refused_before_any_charge(aggregate: object) -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidValueError, match="extreme"):
        sess.query().bound(max_rows_per_group=1).agg(aggregate).release(rho=0.5)
    assert sess.ledger == ()


# --------------------------------------------------------------------------- limits


@pytest.mark.parametrize("call", ["explain", "release"])
def test_max_groups_alone_says_that_max_rows_per_group_is_missing(
    sess: pf.Session, call: str
) -> None:
    query = sess.query().bound(max_groups=3).agg(pf.count())
    message = _refused(sess, lambda: getattr(query, call)(rho=0.1), pf.InvalidValueError)
    assert "max_rows_per_group is missing" in message
    assert "max_rows_per_group=5" in message  # an example value


def test_sql_limits_without_a_row_limit_say_that_max_rows_per_group_is_missing(
    sess: pf.Session,
) -> None:
    query = sess.sql("SELECT COUNT(*) AS n FROM data", contributions=pf.Bound(max_groups=3))
    message = _refused(sess, lambda: query.release(rho=0.1), pf.InvalidValueError)
    assert "max_rows_per_group is missing" in message


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("call", ["explain", "release"])
def test_epsilon_in_a_zcdp_session_says_to_pass_rho_and_how_to_spend_epsilon(
    sess: pf.Session, call: str
) -> None:
    query = _query(sess)
    message = _refused(sess, lambda: getattr(query, call)(epsilon=1.0))
    assert "pass rho=" in message
    assert "pf.PureDP(epsilon=...)" in message
    assert "pf.ApproxDP(epsilon=..., delta=...)" in message
    assert "pf.zCDP.from_approx_dp" in message


@pytest.mark.parametrize("call", ["explain", "release"])
def test_an_eps_argument_says_which_budget_to_pass(sess: pf.Session, call: str) -> None:
    query = _query(sess)
    message = _refused(sess, lambda: getattr(query, call)(eps=1.0))
    assert f"Query.{call}() got an argument it does not take: 'eps'" in message
    assert "epsilon=..." in message
    assert "rho=..." in message


def test_a_missing_rho_says_what_rho_is(sess: pf.Session) -> None:
    query = _query(sess)
    message = _refused(sess, lambda: query.release())
    assert "a release needs a budget" in message
    assert "rho=0.1" in message


@pytest.mark.parametrize("kind", [*BOUNDED, "quantile"])
def test_missing_bounds_say_to_pass_public_bounds(sess: pf.Session, kind: str) -> None:
    args = ("amount", 0.5) if kind == "quantile" else ("amount",)
    message = _refused(sess, lambda: getattr(pf, kind)(*args))
    assert f"{kind}() is missing the argument 'bounds'" in message
    assert "bounds=(lower, upper)" in message
    assert "never computed from the data" in message


@pytest.mark.parametrize(
    ("action", "wrong", "fragment"),
    [
        (lambda q: q.agg(n=pf.count()), "n", ".alias("),
        (lambda q: q.release(0.1, witherror=True), "witherror", "did you mean with_error=...?"),
        (lambda q: q.explain(0.1, weight={"count": 1}), "weight", "did you mean weights=...?"),
        (lambda q: q.bound(max_group=3), "max_group", "did you mean max_groups=...?"),
        (lambda q: q.group_by("region", key=["north"]), "key", "did you mean keys=...?"),
        (lambda q: q.filter(pl.col("amount") > 0, how="any"), "how", "takes: predicate."),
        (lambda q: q.join(pl.DataFrame({"region": ["n"]}), by="region"), "by", "takes: table"),
        (lambda q: q.check(error=True), "error", "did you mean with_error=...?"),
        (lambda q: pf.sum("amount", bound=(0, 1)), "bound", "did you mean bounds=...?"),
        (lambda q: pf.count(column="amount"), "column", "takes no column"),
        (lambda q: pf.quantile("x", 0.5, (0, 1), n=5), "n", "takes: column, q, bounds"),
    ],
    ids=[
        "agg",
        "release",
        "explain",
        "bound",
        "group_by",
        "filter",
        "join",
        "check",
        "sum",
        "count",
        "quantile",
    ],
)
def test_an_unknown_keyword_names_itself_and_what_the_call_takes(
    sess: pf.Session, action, wrong: str, fragment: str
) -> None:
    query = sess.query()
    message = _refused(sess, lambda: action(query))
    assert f"got an argument it does not take: {wrong!r}" in message
    assert fragment in message


def test_a_positional_surplus_is_refused_with_the_accepted_arguments(sess: pf.Session) -> None:
    message = _refused(sess, lambda: pf.count("amount"))  # type: ignore[call-arg]
    assert "count(): too many positional arguments" in message
    assert "count() takes: per_unit_bounds=." in message  # no column: a keyword only


def test_argument_errors_quote_names_never_values(sess: pf.Session) -> None:
    query = _query(sess)
    message = _refused(sess, lambda: query.release(eps=SECRET, label=SECRET_TEXT))
    assert "'eps'" in message


def test_checked_calls_keep_their_signatures_and_docs() -> None:
    assert list(inspect.signature(Query.release).parameters) == [
        "self",
        "rho",
        "epsilon",
        "with_error",
        "weights",
        "label",
        "delta",
        "clamp",
        "intervals",
        "total",
    ]
    assert list(inspect.signature(pf.sum).parameters) == [
        "column",
        "bounds",
        "missing",
        "per_unit_bounds",
    ]
    assert "exponential mechanism" in (pf.quantile.__doc__ or "")


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    "make",
    [
        lambda: pf.keys.from_list("score", [0.5, math.nan]),
        lambda: pf.keys.from_list("score", [np.float32(0.5), np.float32("nan")]),
        lambda: pf.keys.product(score=[0.5, float("nan")], region=["north"]),
        lambda: pf.keys.product(score=[1.0, math.nan], month=[1, 2]),
        lambda: pf.keys.from_dataframe(pl.DataFrame({"score": [0.5, math.nan]})),
        lambda: pf.keys.from_dataframe(pd.DataFrame({"score": [0.5, np.nan]})),
    ],
    ids=["list", "float32-list", "product", "product-of-two", "polars", "pandas"],
)
def test_nan_public_keys_are_refused_like_null(make) -> None:
    with pytest.raises(pf.InvalidValueError, match="'score'") as info:
        make()
    assert "NaN" in str(info.value) or "null" in str(info.value)


def test_a_group_by_over_nan_keys_is_refused_before_any_spend(sess: pf.Session) -> None:
    message = _refused(
        sess,
        lambda: (
            sess.query()
            .bound(max_groups=1, max_rows_per_group=1)
            .group_by("score", keys=[0.5, 1.5, math.nan])
            .agg(pf.count())
            .release(rho=0.1)
        ),
        pf.InvalidValueError,
    )
    assert "public keys of column 'score' contain NaN" in message


@pytest.mark.parametrize("keys", [{"a", "b"}, {"a": 1, "b": 2}, frozenset({"a"})])
def test_unordered_keys_are_refused(keys: object) -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "g": ["a"]}), "u", pf.zCDP(1e6))
    with pytest.raises(pf.InvalidArgumentError, match="ordered"):
        sess.query().group_by("g", keys=keys)  # type: ignore[arg-type]


def test_mixed_type_keys_are_refused() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "g": ["a"]}), "u", pf.zCDP(1e6))
    with pytest.raises(pf.InvalidArgumentError, match="one type"):
        sess.query().group_by("g", keys=[1, "a"])


# --------------------------------------------------------------------------- group_by


def test_a_second_group_by_is_refused_rather_than_replacing_the_first(sess: pf.Session) -> None:
    first = sess.query().bound(max_groups=2, max_rows_per_group=1).group_by("region", ["north"])
    message = _refused(sess, lambda: first.group_by("score", keys=[0.5]), pf.InvalidValueError)
    assert "already groups by ['region']" in message
    assert "call group_by once with every column" in message
    assert first.plan.group_by == ("region",)


@pytest.mark.parametrize("call", ["explain", "release"])
def test_a_sql_epsilon_argument_says_to_pass_rho(sess: pf.Session, call: str) -> None:
    query = sess.sql("SELECT COUNT(*) AS n FROM data", contributions=pf.Bound(1, 1))
    message = _refused(sess, lambda: getattr(query, call)(epsilon=1.0))
    assert "a zCDP session's release spends a zCDP rho, not epsilon" in message
    assert "pass rho=" in message


def test_a_one_shot_sql_epsilon_argument_says_to_pass_rho(sess: pf.Session) -> None:
    message = _refused(
        sess,
        lambda: sess.sql(
            "SELECT COUNT(*) AS n FROM data", epsilon=1.0, contributions=pf.Bound(1, 1)
        ),
    )
    assert "pass rho=" in message


def test_bad_group_by_and_weights_types() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "g": ["a"]}), "u", pf.zCDP(1e6))
    with pytest.raises(pf.InvalidArgumentError, match="group_by"):
        sess.query().group_by(5, keys=[1])  # type: ignore[arg-type]
    query = sess.query().bound(max_rows_per_group=1).agg(pf.count())
    with pytest.raises(pf.InvalidArgumentError, match="weights"):
        query.release(rho=1.0, weights=["count"])  # type: ignore[arg-type]
