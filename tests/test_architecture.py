"""The architecture's promises, and the recipes of docs/architecture.md followed once each.

* No import cycle anywhere in privframe/, not even through type-only imports.
* Every aggregate family owns every piece (measurements with sensitivity,
  estimate, error columns, explain row, balance terms, names); a family that
  leaves one out is refused when its class is created.
* Recipe "add an aggregate": a new family in one class, released through
  ``Session``, explained, balanced and audited for its sensitivity.
* Recipe "add an engine": an input kind the polars engine does not take,
  opened by a registered engine.
* Recipe "add a front end": a plan built from a dict, checked, explained and
  released through the same pipeline as the builder and SQL.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import grimp
import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.api.spec_values import AGGREGATE_KINDS
from privframe.engines.inputs import ColumnType, Opened, check_declared_types
from privframe.engines.polars import PolarsEngine
from privframe.engines.registry import EngineEntry, engine_for, register, unregister
from privframe.plan.aggregates import FAMILIES, Aggregate, Bounded
from privframe.plan.aggregates.base import Measured, Summary, Summed, Width, bounded
from privframe.plan.aggregates.count import CountNeed
from privframe.plan.aggregates.sum import CentredSumNeed, centre_of
from privframe.plan.ir import Bound, Plan
from privframe.plan.keys import from_list
from privframe.plan.limits import Limits
from privframe.plan.measurements import Z95, GaussianNeed, Measurement, Need, Share

DATA = pl.DataFrame(
    {
        "user": [1, 1, 2, 3, 3, 3, 4],
        "region": ["n", "s", "n", "s", "s", "n", "n"],
        "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    }
)
ONE_OF_EACH: dict[str, Aggregate] = {
    "count": pf.count(),
    "count_distinct": pf.count_distinct(),
    "sum": pf.sum("x", (0, 10)),
    "mean": pf.mean("x", (0, 10)),
    "var": pf.var("x", (0, 10)),
    "std": pf.std("x", (0, 10)),
    "quantile": pf.quantile("x", 0.5, (0, 10), candidates=11),
}


def _session() -> pf.Session:
    return pf.Session(DATA, "user", pf.zCDP(10.0))


def _query(sess: pf.Session, *aggregates: Aggregate) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=2)
        .group_by("region", keys=["n", "s"])
        .agg(*aggregates)
    )


@pytest.fixture
def families() -> Iterator[list[type[Aggregate]]]:
    """FAMILIES as it was, restored after a test that defines a family of its own."""
    before = list(FAMILIES)
    yield FAMILIES
    FAMILIES[:] = before


def test_no_module_imports_one_that_imports_it_back() -> None:
    # Type-only imports count too: a cycle closed by "if TYPE_CHECKING:" is still a cycle.
    graph = grimp.build_graph("privframe", cache_dir=None)
    cycles = sorted(
        (module, imported)
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if imported != module and graph.chain_exists(importer=imported, imported=module)
    )
    assert cycles == []


def test_every_family_is_exercised_here() -> None:
    assert sorted(f.spec_name for f in FAMILIES) == sorted(ONE_OF_EACH)
    assert {type(a) for a in ONE_OF_EACH.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(ONE_OF_EACH))
def test_every_family_owns_each_piece_of_a_release(name: str) -> None:
    agg = ONE_OF_EACH[name]
    limits = Limits(2, 2, None, 8)
    needs = agg.needs()
    assert needs
    assert [n.key for n in needs] == list(agg.keys())
    for need in needs:
        assert need.error_coefficient(limits) > 0
        for family in ("gaussian", "laplace"):
            measured = need.measure(limits, Share(Fraction(1, 4), family))
            assert measured.key == need.key  # type: ignore[attr-defined]
            assert measured.exact_share <= Fraction(1, 4)  # type: ignore[attr-defined]
    sess = _session()
    released = _query(sess, agg).release(0.5, with_error=True)
    assert list(released.columns) == ["region", agg.output_name, *agg.error_columns()]
    assert released[agg.output_name].dtype.is_integer() == agg.integer_output
    explanation = _query(sess, agg).explain(0.5)
    (row,) = explanation.rows
    assert row["output"] == agg.output_name
    assert agg.describe().startswith(agg.spec_name)
    assert row["std"]
    assert row["ci95"]
    expected = None if not agg.needs_expected else 3.0  # off the midpoint, 5
    terms = agg.balance_terms(dict.fromkeys(agg.keys(), 1.0), 10.0, expected)
    assert set(terms) == set(agg.keys())
    assert all(b > 0 for b in terms.values())
    split = agg.split_terms(dict.fromkeys(agg.keys(), 1.0))
    assert set(split) == set(agg.keys())
    assert all(b > 0 for b in split.values())
    assert row["formula"]
    low, high = agg.possible_range()
    assert low < high
    # tune models it (a value and a size from a group's summary) or spans its values.
    _, size = agg.typical_value(Summary(100.0, 40.0, 3.0, 3.0, 2.0))
    assert (size > 0) != agg.tuned_by_coverage


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES if f.sql_functions], ids=lambda f: f.__name__
)
def test_the_sql_names_of_a_family_make_that_family(family: type[Bounded]) -> None:
    sess = pf.Session(
        DATA,
        "user",
        pf.zCDP(1.0),
        metadata={"x": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=2),
    )
    for function in family.sql_functions:
        query = sess.sql(f"SELECT {function}(x) AS v FROM data")
        (out,) = query.explain(0.5).plan.outputs
        assert type(out.aggregate) is family, function


def test_every_family_is_a_kind_of_report_spec() -> None:
    for family in FAMILIES:
        build, fields = AGGREGATE_KINDS[family.spec_name]
        made = build() if "column" not in fields else None
        if made is not None:
            assert type(made) is family


def test_a_gaussian_need_must_say_what_the_engine_computes_for_it() -> None:
    class Unread(GaussianNeed):
        @property
        def key(self) -> str:
            return "unread"

        def measure(self, limits: Limits, rho: Fraction) -> Measurement:
            raise AssertionError("never measured")

        def error_coefficient(self, limits: Limits) -> float:
            return 1.0

        def value_spec(self, measurement: Measurement, name: str) -> None:
            return None

    with pytest.raises(TypeError, match="exact_column"):
        Unread()  # type: ignore[abstract]


def test_a_family_missing_a_piece_is_refused_when_its_class_is_made(
    families: list[type[Aggregate]],
) -> None:
    with pytest.raises(TypeError, match=r"does not define \['estimate'"):

        @dataclass(frozen=True, kw_only=True)
        class Incomplete(Bounded):
            spec_name = "incomplete"

            def _default_name(self) -> str:
                return "incomplete"

            def needs(self) -> tuple[Need, ...]:
                return (CentredSumNeed(self),)

            def width(self, measured: Measured) -> Width:
                return Width(0.0, 0.0)

            def balance_terms(
                self, coefficients: Mapping[str, float], rows: float, expected: float | None
            ) -> dict[str, float]:
                return {}

    assert all(f.__name__ != "Incomplete" for f in families)


# -- recipe: add an aggregate ---------------------------------------------------------


def _rate_family() -> type[Summed]:
    """The class statement of a new aggregate module (it registers itself in FAMILIES)."""

    @dataclass(frozen=True, kw_only=True)
    class _Rate(Summed):
        """Recipe: rows' clipped values per 1,000 rows, from the centred sum and count it shares."""

        spec_name: ClassVar[str] = "rate"
        per: ClassVar[float] = 1000.0

        def _default_name(self) -> str:
            return f"{self.column}_rate"

        def needs(self) -> tuple[Need, ...]:
            return (CentredSumNeed(self), CountNeed())

        def estimate(
            self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
        ) -> dict[str, np.ndarray]:
            total, count = (measured.measurement(key) for key in self.keys())
            n = np.maximum(noisy[count.key], 1).astype(np.float64)
            centred = np.ldexp(noisy[total.key].astype(np.float64), -total.grid_exponent)
            values = self.per * (centre_of(total) + centred / n)
            columns = {self.output_name: values}
            if with_error:
                offset = values / self.per - centre_of(total)
                std = self.per * np.hypot(total.sigma, offset * count.sigma) / n
                columns[f"{self.output_name}_std"] = std
                columns[f"{self.output_name}_ci95"] = Z95 * std
            return columns

        def formula(self, measured: Measured) -> str:
            return f"{self.per:g}·(midpoint + centred sum / count)"

        def width(self, measured: Measured) -> Width:
            sigma = self.per * measured.measurement(self.keys()[0]).sigma
            return Width(Z95 * sigma, sigma, approx=True, per="count")

        def balance_terms(
            self, coefficients: Mapping[str, float], rows: float, expected: float | None
        ) -> dict[str, float]:
            assert expected is not None
            total, count = self.keys()
            return {
                total: (self.per / (rows * expected)) ** 2 * coefficients[total],
                count: coefficients[count] / rows**2,
            }

    return _Rate


def test_recipe_add_an_aggregate(families: list[type[Aggregate]]) -> None:
    family = _rate_family()
    assert families[-1] is family
    rate = bounded(family, "x", (0, 10))
    sess = _session()
    query = _query(sess, rate, pf.count())
    explanation = query.explain(1.0)
    keys = [m.key for m in explanation.measurements]
    assert keys == ["centred_sum(x, [0, 10])", "count"]  # the count is measured once, shared
    released = query.release(1.0, with_error=True)
    rate_columns = {"x_rate", "x_rate_std", "x_rate_ci95"}
    assert set(released.columns) == {"region", "count", "count_std", "count_ci95"} | rate_columns
    assert (released["x_rate_std"] > 0).all()
    balanced = query.explain(1.0, weights=pf.balance(rows=3, x_rate=4000))
    assert {name for name, _ in balanced.plan.relative_errors} == {"x_rate", "count"}
    # Its centred sum's sensitivity is the mean's: sqrt(S)·(U − L)/2 with S = k·m² = 8.
    total = explanation.plan.measurement("centred_sum(x, [0, 10])")
    assert total.l2_sensitivity == pytest.approx(math.sqrt(8) * 5, rel=1e-9)


# -- recipe: add an engine ------------------------------------------------------------


class _Records(list):  # type: ignore[type-arg]
    """An input kind no engine takes: a list of row dicts."""


def _open_records(
    data: object, unit: str | None, results: str, types: Mapping[str, ColumnType]
) -> Opened:
    frame = pl.LazyFrame(list(data))  # type: ignore[call-overload]
    check_declared_types(types, frame.collect_schema())  # typed input: the owner's word holds
    return Opened(PolarsEngine(frame), frame.collect_schema(), "polars", lambda table: table)


def test_recipe_add_an_engine() -> None:
    records = _Records(DATA.to_dicts())
    with pytest.raises(pf.PrivframeError):
        pf.Session(records, "user", pf.zCDP(1.0))  # type: ignore[arg-type]
    register(EngineEntry("records", lambda data: isinstance(data, _Records), _open_records))
    try:
        assert engine_for(records).name == "records"
        sess = pf.Session(records, "user", pf.zCDP(1.0))  # type: ignore[arg-type]
        released = _query(sess, pf.count()).release(0.5)
        assert isinstance(released, pl.DataFrame)
        assert released["region"].to_list() == ["n", "s"]
    finally:
        unregister("records")
    assert engine_for(records).name == "polars"


# -- recipe: add a front end ----------------------------------------------------------


def _plan_from_dict(spec: Mapping[str, Any]) -> Plan:
    """A front end: a plain dict (as a JSON body would hold) to the plan IR."""
    makers = {"count": lambda a: pf.count(), "mean": lambda a: pf.mean(a["column"], a["bounds"])}
    (column,) = spec["group_by"]
    return Plan(
        bound=Bound(**spec["bound"]),
        group_by=(column,),
        keys=from_list(column, spec["keys"]),
        aggregates=tuple(makers[a["kind"]](a) for a in spec["aggregates"]),
    )


def test_recipe_add_a_front_end() -> None:
    spec = {
        "group_by": ["region"],
        "keys": ["n", "s", "e"],
        "bound": {"max_groups": 2, "max_rows_per_group": 2},
        "aggregates": [{"kind": "count"}, {"kind": "mean", "column": "x", "bounds": [0, 10]}],
    }
    sess = _session()
    plan = _plan_from_dict(spec)
    assert dict(sess.check(plan)) == dict(DATA.schema)
    explanation = sess.explain(plan, rho=0.5)
    assert [o.name for o in explanation.plan.outputs] == ["count", "x_mean"]
    (released,) = sess.release_all([Query(sess, plan).request(0.5, label="from a dict")])
    assert released["region"].to_list() == ["n", "s", "e"]
    assert sess.ledger[-1].label == "from a dict"
    assert sess.spent == pf.zCDP(0.5)
