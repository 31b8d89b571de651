"""Generated bad SQL is refused without charge or leak (checks: fuzz_setup.py).

Products of bad SELECT, WHERE and GROUP BY clauses, bad statement texts (released
and explained) and bad options of ``Session.sql``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from fuzz_setup import (
    Case,
    Context,
    check_case,
    fuzz_context,
)

import privframe as pf


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Context:
    return fuzz_context(tmp_path_factory)


def _sql_cases() -> list[Case]:
    selects = {
        "count": "COUNT(*)",
        "sum_text": "SUM(region)",
        "sum_unknown": "SUM(missing)",
        "avg_no_bounds": "AVG(note)",
        "cast_text": "SUM(CAST(note AS INT))",
        "window": "COUNT(*) OVER ()",
        "star": "*",
        "unit": "user_id",
        "lag": "LAG(amount)",
        "subquery": "(SELECT 1)",
        "nested_agg": "SUM(COUNT(*))",
        "division": "SUM(amount / 0)",
    }
    wheres = {
        "none": "",
        "cast": "WHERE CAST(note AS INT) > 1",
        "unknown": "WHERE zone = 'x'",
        "regexp": "WHERE note REGEXP 'M.*'",
        "like_column": "WHERE note LIKE region",
        "text_vs_number": "WHERE region > 3",
        "in_subquery": "WHERE user_id IN (SELECT user_id FROM data)",
        "dangling": "WHERE age >",
    }
    groups = {
        "none": "",
        "region": "GROUP BY region",
        "note": "GROUP BY note",
        "unknown": "GROUP BY zone",
        "position": "GROUP BY 9",
    }
    cases = []
    for (s_name, select), (w_name, where), (g_name, group) in itertools.product(
        selects.items(), wheres.items(), groups.items()
    ):
        if (s_name, w_name, g_name) in {("count", "none", "none"), ("count", "none", "region")}:
            continue
        text = f"SELECT {select} FROM data {where} {group}"
        # SQL's CAST gives NULL for a value it cannot convert; GROUP BY note spends delta,
        # which a SQL release spends only when asked.
        valid = s_name == "count" and w_name == "cast" and g_name in ("none", "region")
        cases.append(
            Case(
                f"sql-{s_name}-{w_name}-{g_name}",
                lambda c, t=text: c.sess.sql(t, 0.01),
                refused=not valid,
            )
        )
    texts = {
        "empty": "",
        "blank": "   ",
        "int": 3,
        "none": None,
        "keyword_typo": "SELEC COUNT(*) FROM data",
        "two_statements": "SELECT COUNT(*) FROM data; SELECT 1",
        "drop": "DROP TABLE data",
        "insert": "INSERT INTO data VALUES (1)",
        "other_table": "SELECT COUNT(*) FROM customers",
        "unterminated": "SELECT COUNT(*) FROM data WHERE note = 'x",
        "deep": "SELECT " + "(" * 3000 + "1" + ")" * 3000 + " FROM data",
        "limit_negative": "SELECT region, COUNT(*) FROM data GROUP BY region LIMIT -1",
        "order_unknown": "SELECT region, COUNT(*) FROM data GROUP BY region ORDER BY zone",
        "having_text": "SELECT region, COUNT(*) AS n FROM data GROUP BY region HAVING n > 'x'",
        "join_unknown": "SELECT COUNT(*) FROM data JOIN t ON data.region = t.region",
        "union": "SELECT COUNT(*) FROM data UNION SELECT COUNT(*) FROM data",
        "aggregating_cte": (
            "WITH d AS (SELECT region, COUNT(*) AS n FROM data GROUP BY region) "
            "SELECT COUNT(*) FROM d"
        ),
        "recursive_cte": "WITH RECURSIVE d AS (SELECT * FROM d) SELECT COUNT(*) FROM d",
        "null_bytes": "SELECT COUNT(*) FROM data\x00",
        "unicode_quote": "SELECT COUNT(*) FROM data WHERE note = ’x’",
    }
    for name, text in texts.items():
        cases.append(Case(f"sql-text-{name}", lambda c, t=text: c.sess.sql(t, 0.01)))
        cases.append(
            Case(f"sql-text-{name}-explain", lambda c, t=text: c.sess.sql(t).explain(0.01))
        )
    options: dict[str, Callable[[Context], object]] = {
        "metadata_list": lambda c: c.sess.sql("SELECT COUNT(*) FROM data", 0.01, metadata=[1]),
        "contributions_int": lambda c: c.sess.sql(
            "SELECT COUNT(*) FROM data", 0.01, contributions=3
        ),
        "epsilon": lambda c: c.sess.sql("SELECT COUNT(*) FROM data", epsilon=1.0),
        "rho_text": lambda c: c.sess.sql("SELECT COUNT(*) FROM data", "0.1"),
        "bounds_reversed": lambda c: c.sess.sql(
            "SELECT SUM(amount) FROM data", 0.01, metadata={"amount": pf.Column(bounds=(5, 1))}
        ),
        "bounds_subnormal": lambda c: c.sess.sql(
            "SELECT AVG(amount) FROM data",
            0.01,
            metadata={"amount": pf.Column(bounds=(0, 5e-324))},
        ),
        "keys_mixed": lambda c: c.sess.sql(
            "SELECT region, COUNT(*) FROM data GROUP BY region",
            0.01,
            metadata={"region": pf.Column(keys=["north", 1])},
        ),
    }
    for name, run in options.items():
        cases.append(Case(f"sql-option-{name}", run))
    return cases


CASES = _sql_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_without_charge_or_leak(ctx: Context, case: Case) -> None:
    check_case(case, ctx, ctx.sess)
