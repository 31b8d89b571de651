"""The SQL conformance suite's queries, their sources, synthetic data and sessions.

Used by tests/api/test_sql_conformance.py. Every query was copied from the
public documentation or tests of a peer (Google's BigQuery/ZetaSQL
differential privacy, Google's PostgreSQL anonymization extension, SmartNoise
SQL); the comment above each names its file and line. A query runs as published:
the Session is given the published table name (``Case.table``, e.g.
``PUMS.PUMS``) with ``name=``; only BigQuery's ``{{USERNAME}}`` placeholder,
which its docs ask the reader to replace, is replaced by a dataset name.

The data has the peers' schemas (PUMS, the professors/items example, fruit
eaten), is generated with seeded numpy, and is built so that no bound or
contribution limit ever binds: each person's rows fit the Session's limits and
every value lies inside its column's bounds, so the exact answer on the data
(``Truth``, computed with polars) is what a release estimates. Every key of
every keyed column occurs in the data, for every combination a query groups by.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

DATASET_NAME = "mydataset"  # what a BigQuery reader writes for {{USERNAME}}

# -- synthetic data ---------------------------------------------------------------------------

FRUITS = ["apple", "banana", "guava", "kiwi", "pear"]  # as in cc/postgres/fruiteaten.csv
COLORS = ["blue", "green", "red", "violet", "yellow"]  # as in cc/postgres/shirts.csv
ITEMS = ["pen", "pencil", "scissors"]  # the professors example's items


def pums(n: int = 10_000, seed: int = 1) -> pl.DataFrame:
    """PUMS-like people, one row each, coded as in smartnoise-sdk datasets/PUMS_pid.csv."""
    rng = np.random.default_rng(seed)
    earns = rng.random(n) > 0.1
    return pl.DataFrame(
        {
            "age": rng.integers(18, 94, n),
            "sex": rng.integers(0, 2, n),
            "educ": rng.integers(1, 17, n),
            "race": rng.integers(1, 7, n),
            "income": np.where(earns, np.minimum(rng.lognormal(10.3, 0.8, n), 400_000), 0).astype(
                np.int64
            ),
            "married": rng.integers(0, 2, n),
            "pid": np.arange(1, n + 1),
        }
    )


def professors(n: int = 900, seed: int = 2) -> pl.DataFrame:
    """Requests of items: one row per professor, so no per-unit limit of BigQuery's binds."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "id": np.arange(101, 101 + n),
            "item": rng.choice(ITEMS, n, p=[0.35, 0.45, 0.2]),
            "quantity": rng.integers(0, 101, n),
        }
    )


def fruit_eaten(people: int = 1_000, seed: int = 3) -> pl.DataFrame:
    """One row per fruit eaten: each person eats 1-5 kinds of fruit, 1-3 of each."""
    rng = np.random.default_rng(seed)
    uids, fruits = [], []
    for uid in range(1, people + 1):
        kinds = rng.choice(FRUITS, rng.integers(1, 6), replace=False)
        for fruit in kinds:
            times = int(rng.integers(1, 4))
            uids += [uid] * times
            fruits += [str(fruit)] * times
    return pl.DataFrame({"uid": uids, "fruit": fruits})


def shirts(people: int = 1_000, seed: int = 4) -> pl.DataFrame:
    """Each person's shirt colour (a public table here, unique on uid)."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"uid": np.arange(1, people + 1), "color": rng.choice(COLORS, people)})


@dataclass(frozen=True)
class Dataset:
    """A private table with its privacy unit, public metadata, limits and public tables."""

    frame: pl.DataFrame
    unit: str
    metadata: dict[str, pf.Column]
    contributions: pf.Bound
    tables: dict[str, pl.DataFrame]


# Keys only for small public domains; age, income and item have none, so grouping by
# them selects groups privately (with delta=), as SmartNoise and BigQuery do by default.
DATASETS = {
    "pums": Dataset(
        pums(),
        "pid",
        {
            "age": pf.Column(bounds=(0, 100), candidates=101),
            "income": pf.Column(bounds=(0, 500_000)),
            "sex": pf.Column(keys=[0, 1]),
            "educ": pf.Column(keys=list(range(1, 17))),
            "race": pf.Column(keys=list(range(1, 7))),
            "married": pf.Column(keys=[0, 1]),
        },
        pf.Bound(max_groups=1, max_rows_per_group=1),
        {},
    ),
    "professors": Dataset(
        professors(),
        "id",
        {"quantity": pf.Column(bounds=(0, 100), candidates=101)},
        pf.Bound(max_groups=1, max_rows_per_group=1),
        {},
    ),
    "fruit": Dataset(
        fruit_eaten(),
        "uid",
        {"fruit": pf.Column(keys=FRUITS), "color": pf.Column(keys=COLORS)},
        # a person's rows all fall in one colour group when joined with shirts: up to 5 x 3
        pf.Bound(max_groups=5, max_rows_per_group=15),
        {"shirts": shirts()},
    ),
}
# Room for BigQuery's OPTIONS(epsilon=1e20, delta=.01), its docs' way to see an answer without
# noise: rho <= 1e20, and delta/2 to select. A data owner who grants it grants a demonstration.
BUDGET = pf.zCDP(rho=1e20, delta=0.01)
RHO = 1.0  # spent by each query without OPTIONS
DELTA = 1e-6  # spent by a query that selects its groups privately


def session(dataset: str, seed: int, name: str = "data") -> pf.Session:
    """A fresh seeded Session over one dataset (each query gets its own), its table ``name``."""
    d = DATASETS[dataset]
    return pf.Session(
        d.frame,
        d.unit,
        BUDGET,
        rng=SeededRandomness(seed),
        metadata=d.metadata,
        contributions=d.contributions,
        tables=d.tables,
        name=name,
    )


# -- the true answer ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """A group column in the select list (its value per group: ``expr`` of the group's rows)."""

    expr: pl.Expr


@dataclass(frozen=True)
class Const:
    """A constant in the select list."""

    value: object


@dataclass(frozen=True)
class Quantile:
    """The ``q`` quantile of ``column``: checked by rank, not by value."""

    column: str
    q: float


@dataclass(frozen=True)
class Quantiles:
    """``APPROX_QUANTILES(column, n)``: the n + 1 quantiles i/n, each checked by rank."""

    column: str
    n: int


Item = pl.Expr | Key | Const | Quantile | Quantiles


def key(name: str | pl.Expr) -> Key:
    return Key(pl.col(name) if isinstance(name, str) else name)


@dataclass(frozen=True)
class Truth:
    """The exact answer: ``out`` per group of ``by`` over the rows matching ``where``.

    ``out`` follows the query's select list. HAVING, ORDER BY and LIMIT are left
    out: on a release they apply to noisy values, so the released groups are a
    subset of these.
    """

    out: tuple[Item, ...]
    by: tuple[str | pl.Expr, ...] = ()
    where: pl.Expr | None = None
    join: str | None = None  # a public table of the dataset, inner-joined on the unit

    def compute(self, dataset: Dataset, *, empty: bool = False) -> pl.DataFrame:
        """One row per group, columns ``_0, _1, ...`` in select-list order.

        With ``empty``, the one row of a group no row falls in (a public key
        absent from the data): counts and sums 0, means and the rest null.
        """
        frame = dataset.frame.lazy()
        if self.join is not None:
            frame = frame.join(dataset.tables[self.join].lazy(), on=dataset.unit)
        frame = frame.head(0) if empty else frame
        if self.where is not None:
            frame = frame.filter(self.where)
        grouped = bool(self.by) and not empty
        exprs = [self._expr(item, grouped).alias(f"_{i}") for i, item in enumerate(self.out)]
        if grouped:
            by = [pl.col(b) if isinstance(b, str) else b for b in self.by]
            return frame.group_by(by).agg(exprs).collect()
        return frame.select(exprs).collect()

    @staticmethod
    def _expr(item: Item, grouped: bool) -> pl.Expr:
        if isinstance(item, Key):
            return item.expr.first()
        if isinstance(item, Const):
            return pl.lit(item.value)
        if isinstance(item, Quantile | Quantiles):
            values = pl.col(item.column).drop_nulls().sort()
            return values if grouped else values.implode()
        return item


# -- the queries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A published query: its text, its private table's name there, its data and truth.

    ``truth`` is None for a query with no exact answer to compare with (no
    aggregate, random values, nested aggregation): it must be refused.
    """

    name: str
    dataset: str
    table: str
    sql: str
    truth: Truth | None

    def text(self) -> str:
        """The published SQL, with BigQuery's ``{{USERNAME}}`` placeholder filled in."""
        return _filled(self.sql)

    def private_name(self) -> str:
        """The published name of the private table, the Session's ``name=``."""
        return _filled(self.table)


def _filled(text: str) -> str:
    return text.replace("{{USERNAME}}", DATASET_NAME)


N = pl.len()
AGE, INCOME, QTY = pl.col("age"), pl.col("income"), pl.col("quantity")


def pums_case(name: str, sql: str, truth: Truth | None, table: str = "PUMS.PUMS") -> Case:
    return Case(name, "pums", table, sql, truth)


def prof_case(name: str, sql: str, truth: Truth | None, table: str) -> Case:
    return Case(name, "professors", table, sql, truth)


VIEW = "{{USERNAME}}.view_on_professors"
BY_ITEM_AVG = Truth((key("item"), QTY.mean()), by=("item",))
BY_ITEM_COUNT = Truth((key("item"), N), by=("item",))
BY_ITEM_SUM = Truth((key("item"), QTY.sum()), by=("item",))
BY_ITEM_VAR_POP = Truth((key("item"), QTY.var(ddof=0)), by=("item",))
BY_ITEM_MEDIAN = Truth((key("item"), Quantile("quantity", 0.5)), by=("item",))
AGE_SEX = Truth((key("age"), key("sex"), N, INCOME.sum()), by=("age", "sex"))
AGE_MARRIED = Truth((key("age"), key("married"), N, INCOME.sum()), by=("age", "married"))

# SmartNoise SQL: github.com/opendp/smartnoise-sdk at 81d1351, under sql/.
SMARTNOISE = [
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:1
    pums_case("sn-validate-1", "SELECT SUM(age) FROM PUMS.PUMS;", Truth((AGE.sum(),))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:2
    pums_case(
        "sn-validate-2",
        "SELECT COUNT(*), VAR(age) AS var_age FROM PUMS.PUMS;",
        Truth((N, AGE.var())),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:3
    pums_case(
        "sn-validate-3",
        "SELECT married, educ, income, AVG(age) FROM PUMS.PUMS GROUP BY married, educ, income;",
        Truth(
            (key("married"), key("educ"), key("income"), AGE.mean()),
            by=("married", "educ", "income"),
        ),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:4
    pums_case(
        "sn-validate-4",
        "SELECT p.married, AVG(age) AS aa FROM PUMS.PUMS AS p GROUP BY married;",
        Truth((key("married"), AGE.mean()), by=("married",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:5
    pums_case(
        "sn-validate-5",
        "SELECT TOP 5 educ, AVG(income) FROM PUMS.PUMS GROUP BY educ;",
        Truth((key("educ"), INCOME.mean()), by=("educ",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:6
    pums_case(
        "sn-validate-6",
        "SELECT COUNT(married), AVG(age) FROM PUMS.PUMS;",
        Truth((pl.col("married").count(), AGE.mean())),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:7
    pums_case(
        "sn-validate-7",
        "SELECT 3 AS three, p.married, educ, AVG(income) FROM PUMS.PUMS AS p"
        " GROUP BY educ, married;",
        Truth((Const(3), key("married"), key("educ"), INCOME.mean()), by=("educ", "married")),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:8
    pums_case(
        "sn-validate-8",
        "SELECT educ FROM PUMS.PUMS GROUP BY educ;",
        Truth((key("educ"),), by=("educ",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:9
    pums_case("sn-validate-9", "SELECT SUM(age) AS age FROM PUMS.PUMS;", Truth((AGE.sum(),))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:10
    pums_case("sn-validate-10", "SELECT (SUM(age)) AS age FROM PUMS.PUMS;", Truth((AGE.sum(),))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:11
    pums_case("sn-validate-11", "SELECT SUM(age) * 1 AS age FROM PUMS.PUMS;", Truth((AGE.sum(),))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:12
    pums_case("sn-validate-12", "SELECT SUM(age), COUNT(*) FROM PUMS.PUMS;", Truth((AGE.sum(), N))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:13
    # (RAND(): no exact answer)
    pums_case("sn-validate-13", "SELECT PI(), RAND(), POWER(AVG(age), 2) FROM PUMS.PUMS;", None),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums.sql:14
    # (the group columns are not selected: each released sum must match some group's)
    pums_case(
        "sn-validate-14",
        "SELECT SUM(age) FROM PUMS.PUMS GROUP BY married, CASE WHEN age > 90 THEN 1 ELSE 0 END;",
        Truth((AGE.sum(),), by=("married", (AGE > 90).cast(pl.Int64).alias("old"))),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:1
    pums_case(
        "sn-validate-fail-1",
        "SELECT SUM(Age + Income) FROM PUMS.PUMS;",
        Truth(((AGE + INCOME).sum(),)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:2
    pums_case("sn-validate-fail-2", "SELECT SUM(SUM(age)) FROM PUMS.PUMS;", None),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:4
    pums_case("sn-validate-fail-4", "SELECT COUNT(*) FROM (SELECT * FROM PUMS.PUMS);", Truth((N,))),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:8
    pums_case(
        "sn-validate-fail-8",
        "SELECT CASE WHEN age > 90 THEN 1 ELSE 0 END AS age FROM PUMS.PUMS;",
        None,
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:9
    pums_case(
        "sn-validate-fail-9",
        "SELECT SUM(CASE WHEN age > 90 THEN 1 ELSE 0 END) AS age FROM PUMS.PUMS;",
        Truth(((AGE > 90).cast(pl.Int64).sum(),)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/queries/validate_pums/validate_pums_fail.sql:10
    pums_case(
        "sn-validate-fail-10",
        "SELECT SUM(age + 1) * 1 AS age FROM PUMS.PUMS;",
        Truth(((AGE + 1).sum(),)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:33
    pums_case(
        "sn-having-33",
        "SELECT age, sex, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS"
        " GROUP BY age, sex HAVING income > 100000",
        AGE_SEX,
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:48
    pums_case(
        "sn-having-48",
        "SELECT age, COUNT(*) FROM PUMS.PUMS GROUP BY age HAVING age < 30 OR age > 60",
        Truth((key("age"), N), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:53
    pums_case(
        "sn-having-53",
        "SELECT age * 1000 as age, COUNT(*) FROM PUMS.PUMS GROUP BY age"
        " HAVING age < 30000 OR age > 60000",
        Truth((key(AGE * 1000), N), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:61
    pums_case(
        "sn-having-61",
        "SELECT age, COUNT(*) AS n FROM PUMS.PUMS GROUP BY age"
        " HAVING (age < 30 OR age > 60) AND n > 10",
        Truth((key("age"), N), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:65
    pums_case(
        "sn-having-65",
        "SELECT age, COUNT(*) * 1000 AS n FROM PUMS.PUMS GROUP BY age"
        " HAVING (age < 30 OR age > 60) AND n > 10000",
        Truth((key("age"), N * 1000), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:123
    pums_case(
        "sn-having-123",
        "SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS"
        " GROUP BY age, married HAVING married = 1",
        AGE_MARRIED,
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_having.py:147
    pums_case(
        "sn-having-147",
        "SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS"
        " GROUP BY age, married HAVING NOT married",
        AGE_MARRIED,
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_query.py:31
    # (no aggregate: rows would leave the session)
    pums_case("sn-query-31", "SELECT age as a FROM PUMS.PUMS WHERE age > 100", None),
    # opendp/smartnoise-sdk sql/tests/query/test_query.py:40
    pums_case(
        "sn-query-40",
        "SELECT COUNT(*) AS c, married AS m FROM PUMS.PUMS GROUP BY married ORDER BY c",
        Truth((N, key("married")), by=("married",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_query.py:50
    pums_case(
        "sn-query-50",
        "SELECT COUNT(*) * 5 AS c, married AS m FROM PUMS.PUMS GROUP BY married ORDER BY c DESC",
        Truth((N * 5, key("married")), by=("married",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_query.py:75
    pums_case(
        "sn-query-75",
        "SELECT COUNT(*) as c FROM PUMS.PUMS WHERE age > 100",
        Truth((N,), where=AGE > 100),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_query.py:91
    pums_case(
        "sn-query-91",
        "SELECT POWER(SUM(age), 2) as age_total FROM PUMS.PUMS",
        Truth((AGE.sum().cast(pl.Float64).pow(2),)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_fq_object_name.py:11
    pums_case(
        "sn-fq-name-11", "SELECT COUNT(*) FROM PUMS.PUMS.PUMS", Truth((N,)), "PUMS.PUMS.PUMS"
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_top.py:35
    pums_case(
        "sn-top-35",
        "SELECT TOP 5 educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ ORDER BY n DESC",
        Truth((key("educ"), N), by=("educ",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_top.py:49
    pums_case(
        "sn-top-49",
        "SELECT educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ LIMIT 4",
        Truth((key("educ"), N), by=("educ",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_top.py:70
    pums_case(
        "sn-top-70",
        "SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS"
        " GROUP BY age, married ORDER BY married, age DESC LIMIT 10",
        AGE_MARRIED,
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:20
    pums_case(
        "sn-rewrite-20", "SELECT ((SUM(age))) as age_total FROM PUMS.PUMS", Truth((AGE.sum(),))
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:24
    pums_case(
        "sn-rewrite-24", "SELECT STDDEV(age) as age_total FROM PUMS.PUMS", Truth((AGE.std(),))
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:28
    pums_case(
        "sn-rewrite-28",
        "SELECT age, SUM(income) AS sum_income FROM PUMS.PUMS GROUP BY age"
        " HAVING age > 5 AND COUNT(*) > 7 OR NOT ( age < 5)",
        Truth((key("age"), INCOME.sum()), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:30
    pums_case(
        "sn-rewrite-30",
        "SELECT COUNT(*) AS count_all, SUM(income) AS sum_income, AVG(income) AS avg_income,"
        " VARIANCE(income) AS var_income, STDDEV(income) AS stddev_income FROM PUMS.PUMS",
        Truth((N, INCOME.sum(), INCOME.mean(), INCOME.var(), INCOME.std())),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:31
    pums_case(
        "sn-rewrite-31",
        "SELECT (VAR(age)) AS my_var, married FROM PUMS.PUMS GROUP BY married",
        Truth((AGE.var(), key("married")), by=("married",)),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:32
    pums_case(
        "sn-rewrite-32",
        "SELECT age, sex, SUM(income) AS my_sum, SUM(age) AS sum_age FROM PUMS.PUMS"
        " GROUP BY age, sex HAVING NOT ( sex = True ) ORDER BY my_sum, sex DESC LIMIT 10",
        Truth((key("age"), key("sex"), INCOME.sum(), AGE.sum()), by=("age", "sex")),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:46
    pums_case(
        "sn-rewrite-46",
        "SELECT SUM(income) AS income FROM PUMS.PUMS WHERE sex = True",
        Truth((INCOME.sum(),), where=pl.col("sex") == 1),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:48
    pums_case(
        "sn-rewrite-48",
        "SELECT educ, SUM(income) AS total_income, AVG(income) AS avg_income, AVG(age)"
        " FROM PUMS.PUMS WHERE married = TRUE GROUP BY educ",
        Truth(
            (key("educ"), INCOME.sum(), INCOME.mean(), AGE.mean()),
            by=("educ",),
            where=pl.col("married") == 1,
        ),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:49
    pums_case(
        "sn-rewrite-49",
        "SELECT educ, SUM(income) AS income FROM PUMS.PUMS WHERE educ IN (2, 3)"
        " GROUP BY educ ORDER BY educ DESC",
        Truth((key("educ"), INCOME.sum()), by=("educ",), where=pl.col("educ").is_in([2, 3])),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:50
    pums_case(
        "sn-rewrite-50",
        "SELECT COUNT(DISTINCT pid) AS n, age, income FROM PUMS.PUMS WHERE age > 55"
        " GROUP BY age, income",
        Truth(
            (pl.col("pid").n_unique(), key("age"), key("income")),
            by=("age", "income"),
            where=AGE > 55,
        ),
    ),
    # opendp/smartnoise-sdk sql/tests/rewriter/test_rewriting.py:51
    pums_case(
        "sn-rewrite-51",
        "SELECT COUNT(DISTINCT pid) AS pid FROM PUMS.PUMS GROUP BY married",
        Truth((pl.col("pid").n_unique(),), by=("married",)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_thresholds.py:35
    pums_case(
        "sn-thresholds-35",
        "SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 70 GROUP BY educ",
        Truth((N,), by=("educ",), where=AGE > 70),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_thresholds.py:72
    pums_case(
        "sn-thresholds-72",
        "SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 70 AND educ < 2",
        Truth((N,), where=(AGE > 70) & (pl.col("educ") < 2)),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_thresholds.py:133
    pums_case(
        "sn-thresholds-133",
        "SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 90 AND educ = '8'",
        Truth((N,), where=(AGE > 90) & (pl.col("educ") == 8)),
    ),
    # opendp/smartnoise-sdk sql/tests/odometer/test_odometer.py:28
    pums_case(
        "sn-odometer-28",
        "SELECT VAR(age), VAR(income) FROM PUMS.PUMS GROUP BY sex",
        Truth((AGE.var(), INCOME.var()), by=("sex",)),
    ),
    # opendp/smartnoise-sdk sql/tests/odometer/test_odometer.py:66
    pums_case(
        "sn-odometer-66",
        "SELECT COUNT(DISTINCT age) FROM PUMS.PUMS GROUP BY educ",
        Truth((AGE.n_unique(),), by=("educ",)),
    ),
    # opendp/smartnoise-sdk sql/tests/odometer/test_odometer.py:89
    pums_case(
        "sn-odometer-89",
        "SELECT STD(age) FROM PUMS.PUMS GROUP BY sex",
        Truth((AGE.std(),), by=("sex",)),
    ),
    # opendp/smartnoise-sdk sql/tests/xpath/test_xpath.py:23
    pums_case(
        "sn-xpath-23",
        "SELECT AVG(age) + 3, STD(age), VAR(age), SUM(age) / 10, COUNT(age) + 2 FROM PUMS.PUMS",
        Truth((AGE.mean() + 3, AGE.std(), AGE.var(), AGE.sum() / 10, AGE.count() + 2)),
    ),
    # opendp/smartnoise-sdk sql/tests/ast/test_count_compare.py:13
    pums_case(
        "sn-count-compare-13",
        "SELECT COUNT(*) AS c, COUNT(sex) AS s, COUNT(age) AS a FROM PUMS.PUMS",
        Truth((N, pl.col("sex").count(), AGE.count())),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_opt_rewrite.py:27
    pums_case(
        "sn-opt-rewrite-27",
        "SELECT COUNT (*) AS foo, COUNT(DISTINCT pid) AS bar FROM PUMS.PUMS",
        Truth((N, pl.col("pid").n_unique())),
    ),
    # opendp/smartnoise-sdk sql/tests/query/test_grouping_clamp.py:24
    pums_case(
        "sn-grouping-clamp-24",
        "SELECT income, COUNT(pid) AS n FROM PUMS.PUMS GROUP BY income",
        Truth((key("income"), pl.col("pid").count()), by=("income",)),
    ),
    # opendp/smartnoise-sdk sql/tests/ast/test_visualize.py:51
    pums_case(
        "sn-visualize-51",
        "SELECT AVG(age) AS my_sum FROM PUMS.PUMS GROUP BY age",
        Truth((AGE.mean(),), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/README.md:41
    pums_case(
        "sn-readme-41",
        "SELECT sex, AVG(age) AS age FROM PUMS.PUMS GROUP BY sex",
        Truth((key("sex"), AGE.mean()), by=("sex",)),
    ),
    # opendp/smartnoise-sdk sql/README.md:112
    pums_case(
        "sn-readme-112",
        "SELECT AVG(age), AVG(income) FROM PUMS.PUMS",
        Truth((AGE.mean(), INCOME.mean())),
    ),
    # opendp/smartnoise-sdk sql/docs/source/advanced.rst:74
    pums_case(
        "sn-advanced-74",
        "SELECT age, COUNT(*) AS n FROM PUMS.PUMS GROUP BY age",
        Truth((key("age"), N), by=("age",)),
    ),
    # opendp/smartnoise-sdk sql/docs/source/advanced.rst:127
    pums_case(
        "sn-advanced-127",
        "SELECT sex, COUNT(*) AS n, AVG(age) AS age FROM PUMS.PUMS GROUP BY sex ORDER BY sex",
        Truth((key("sex"), N, AGE.mean()), by=("sex",)),
    ),
    # opendp/smartnoise-sdk sql/docs/source/advanced.rst:199
    pums_case(
        "sn-advanced-199",
        "SELECT TOP 2 educ, AVG(age) AS age FROM PUMS.PUMS GROUP BY educ ORDER BY age DESC",
        Truth((key("educ"), AGE.mean()), by=("educ",)),
    ),
]

# BigQuery / ZetaSQL: github.com/google/zetasql at 2d8f7b7, docs/ (the same examples are on
# cloud.google.com/bigquery/docs/reference/standard-sql/aggregate-dp-functions and
# .../query-syntax#dp_clause, with BigQuery's table names).
BIGQUERY = [
    # google/zetasql docs/aggregate-dp-functions.md:214
    prof_case(
        "bq-avg-214",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) average_quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:235
    prof_case(
        "bq-avg-235",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=1e20, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    AVG(quantity) average_quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:259
    prof_case(
        "bq-avg-259",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    AVG(quantity, contribution_bounds_per_group=>(0, 100)) average_quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:356
    prof_case(
        "bq-count-356",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    COUNT(*, contribution_bounds_per_group=>(0, 100)) times_requested
FROM professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:422
    prof_case(
        "bq-count-422",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=1e20, delta=.01, max_groups_contributed=1)
    item,
    COUNT(*, contribution_bounds_per_group=>(0, 100)) times_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:481
    prof_case(
        "bq-count-item-481",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    COUNT(item, contribution_bounds_per_group => (0,100)) times_requested
FROM professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:526
    prof_case(
        "bq-count-item-526",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    COUNT(item, contribution_bounds_per_group=>(0, 100)) times_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:626
    prof_case(
        "bq-percentile-626",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_row => (0,100)) percentile_requested
FROM professors
GROUP BY item;""",
        BY_ITEM_MEDIAN,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:651
    prof_case(
        "bq-percentile-651",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_row=>(0, 100)) percentile_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_MEDIAN,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:719
    prof_case(
        "bq-sum-719",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    SUM(quantity, contribution_bounds_per_group => (0,100)) quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_SUM,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:740
    prof_case(
        "bq-sum-740",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=1e20, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    SUM(quantity) quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_SUM,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:764
    prof_case(
        "bq-sum-764",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    SUM(quantity, contribution_bounds_per_group=>(0, 100)) quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_SUM,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:864
    prof_case(
        "bq-var-pop-864",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    VAR_POP(quantity, contribution_bounds_per_row => (0,100)) pop_variance
FROM professors
GROUP BY item;""",
        BY_ITEM_VAR_POP,
        "professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:890
    prof_case(
        "bq-var-pop-890",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    VAR_POP(quantity, contribution_bounds_per_row=>(0, 100)) pop_variance
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_VAR_POP,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:955
    prof_case(
        "bq-anon-avg-955",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_AVG(quantity CLAMPED BETWEEN 0 AND 100) average_quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:976
    prof_case(
        "bq-anon-avg-976",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=1e20, delta=.01, max_groups_contributed=1)
    item,
    ANON_AVG(quantity) average_quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1042
    prof_case(
        "bq-anon-count-1042",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_COUNT(*) times_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1117
    prof_case(
        "bq-anon-count-1117",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_COUNT(item CLAMPED BETWEEN 0 AND 100) times_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_COUNT,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1210
    prof_case(
        "bq-anon-percentile-1210",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_PERCENTILE_CONT(quantity, 0.5 CLAMPED BETWEEN 0 AND 100) percentile_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_MEDIAN,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1277
    prof_case(
        "bq-anon-quantiles-1277",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_QUANTILES(quantity, 4 CLAMPED BETWEEN 0 AND 100) quantiles_requested
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        Truth((key("item"), Quantiles("quantity", 4)), by=("item",)),
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1341
    prof_case(
        "bq-anon-stddev-pop-1341",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_STDDEV_POP(quantity CLAMPED BETWEEN 0 AND 100) pop_standard_deviation
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        Truth((key("item"), QTY.std(ddof=0)), by=("item",)),
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1404
    prof_case(
        "bq-anon-sum-1404",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_SUM(quantity CLAMPED BETWEEN 0 AND 100) quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_SUM,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1498
    prof_case(
        "bq-anon-var-pop-1498",
        """SELECT
  WITH ANONYMIZATION
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1)
    item,
    ANON_VAR_POP(quantity CLAMPED BETWEEN 0 AND 100) pop_variance
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_VAR_POP,
        VIEW,
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1578 (implicit bounds)
    prof_case(
        "bq-implicit-1578",
        """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS (
    epsilon = 1e20,
    delta = .01,
    privacy_unit_column=id
  )
  item,
  AVG(quantity) average_quantity
FROM view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "view_on_professors",
    ),
    # google/zetasql docs/aggregate-dp-functions.md:1746
    prof_case(
        "bq-explicit-1746",
        """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS (
    epsilon = 1e20,
    delta = .01,
    max_groups_contributed = 1
  )
  item,
  AVG(quantity, contribution_bounds_per_group=>(0,100)) AS average_quantity
FROM view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "view_on_professors",
    ),
    # google/zetasql docs/query-syntax.md:6412
    prof_case(
        "bq-add-noise-6412",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=2)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) AS average_quantity
FROM {{USERNAME}}.view_on_professors
GROUP BY item;""",
        BY_ITEM_AVG,
        VIEW,
    ),
    # google/zetasql docs/query-syntax.md:6434
    prof_case(
        "bq-add-noise-6434",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=2, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) AS average_quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "professors",
    ),
    # google/zetasql docs/query-syntax.md:6529
    prof_case(
        "bq-limit-groups-6529",
        """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=1e20, delta=.01, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) AS average_quantity
FROM professors
GROUP BY item;""",
        BY_ITEM_AVG,
        "professors",
    ),
    # google/zetasql docs/query-syntax.md:6574 (public groups; "book" is not in the data)
    prof_case(
        "bq-public-groups-6574",
        """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS (
    epsilon = 1e20,
    delta = .01,
    max_groups_contributed = 1,
    group_selection_strategy = PUBLIC_GROUPS
  )
  item,
  AVG(quantity) AS average_quantity
FROM {{USERNAME}}.view_on_professors
RIGHT OUTER JOIN
(SELECT DISTINCT item FROM UNNEST(['pen', 'pencil', 'book']))
USING (item)
GROUP BY item;""",
        BY_ITEM_AVG,
        VIEW,
    ),
    # google/zetasql docs/differential-privacy.md:165 (students has the professors' schema)
    prof_case(
        "bq-students-165",
        """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS (epsilon=10, delta=.01, privacy_unit_column=members.id)
  item,
  COUNT(*, contribution_bounds_per_group=>(0, 100))
FROM (SELECT * FROM students) AS members;""",
        None,
        "students",
    ),
    # google/zetasql docs/differential-privacy.md:181 (an error in BigQuery too: two private views)
    prof_case(
        "bq-two-views-181",
        """SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon=10, delta=.01, max_groups_contributed=2)
  item,
  AVG(quantity, contribution_bounds_per_group => (0,100)) average_quantity
FROM {{USERNAME}}.view_on_professors, {{USERNAME}}.view_on_students
GROUP BY item;""",
        None,
        VIEW,
    ),
]

# Google's PostgreSQL extension: github.com/google/differential-privacy at b5b0286,
# cc/postgres/README.md (FruitEaten and Shirts as in cc/postgres/*.csv).
POSTGRES = [
    # google/differential-privacy cc/postgres/README.md:215
    Case(
        "pg-fruit-215",
        "fruit",
        "FruitEaten",
        """SELECT fruit, COUNT(fruit)
FROM FruitEaten
GROUP BY fruit;""",
        Truth((key("fruit"), pl.col("fruit").count()), by=("fruit",)),
    ),
    # google/differential-privacy cc/postgres/README.md:225
    # (the user-level rewrite of the query above)
    Case(
        "pg-fruit-rewrite-225",
        "fruit",
        "FruitEaten",
        """SELECT result.fruit, result.number_eaten
FROM (
  SELECT per_person.fruit,
    ANON_SUM(per_person.fruit_count, LN(3)/2) as number_eaten,
    ANON_COUNT(uid, LN(3)/2) as number_eaters
    FROM(
      SELECT * , ROW_NUMBER() OVER (
        PARTITION BY uid
        ORDER BY random()
      ) as row_num
      FROM (
        SELECT fruit, uid, COUNT(fruit) as fruit_count
        FROM FruitEaten
        GROUP BY fruit, uid
      ) as per_person_raw
    ) as per_person
  WHERE per_person.row_num <= 5
  GROUP BY per_person.fruit
) as result
WHERE result.number_eaters > 50;""",
        Truth((key("fruit"), N), by=("fruit",)),
    ),
    # google/differential-privacy cc/postgres/README.md:253
    # (per person and fruit: groups of one person each)
    Case(
        "pg-per-person-253",
        "fruit",
        "FruitEaten",
        """SELECT fruit, uid, COUNT(fruit) as fruit_count
    FROM FruitEaten
    GROUP BY fruit, uid;""",
        Truth((key("fruit"), key("uid"), N), by=("fruit", "uid")),
    ),
    # google/differential-privacy cc/postgres/README.md:377
    Case(
        "pg-join-377",
        "fruit",
        "FruitEaten",
        """SELECT color, COUNT(fruit)
FROM FruitEaten f INNER JOIN Shirts s ON (f.uid = s.uid)
GROUP BY color;""",
        Truth((key("color"), pl.col("fruit").count()), by=("color",), join="shirts"),
    ),
    # google/differential-privacy cc/postgres/README.md:385
    Case(
        "pg-join-rewrite-385",
        "fruit",
        "FruitEaten",
        """SELECT result.color, result.number_eaten
FROM (
  SELECT per_person.color,
    ANON_SUM(per_person.fruit_count, LN(3)/2) as number_eaten,
    ANON_COUNT(uid, LN(3)/2) as number_eaters
    FROM(
      SELECT * , ROW_NUMBER() OVER (
        PARTITION BY uid
        ORDER BY random()
      ) as row_num
      FROM (
        SELECT color, f.uid as uid, COUNT(fruit) as fruit_count
        FROM FruitEaten f INNER JOIN Shirts s ON (f.uid = s.uid)
        GROUP BY color, f.uid
      ) as per_person_raw
    ) as per_person
  WHERE per_person.row_num <= 5
  GROUP BY per_person.color
) as result
WHERE result.number_eaters > 50;""",
        Truth((key("color"), N), by=("color",), join="shirts"),
    ),
]

CASES = SMARTNOISE + BIGQUERY + POSTGRES
