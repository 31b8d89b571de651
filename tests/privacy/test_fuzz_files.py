"""Bad data files are refused without charge or leak (checks: fuzz_setup.py).

CSV and parquet files that cannot be read, whose header is data or whose unit
column cannot be a privacy unit, each opened with and without a unit and released
from in each way; good files pass. A CSV's ``amount`` is declared (its columns
are text otherwise); parquet files keep their own types.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from fuzz_setup import (
    FILE_ACTIONS,
    Case,
    Context,
    check_case,
    fuzz_context,
    on_own_session,
)

import privframe as pf


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Context:
    return fuzz_context(tmp_path_factory)


UNREADABLE = {
    "unclosed_quote.csv",
    "corrupt.parquet",
    "empty.parquet",
    "csv_named.parquet",
    "data.txt",
    "no_suffix",
    "truncated.parquet",
    "a_directory.csv",
    "missing.csv",
    "empty.csv",
}
"""Files no session opens."""

HEADERLESS = {
    "headerless.csv",
    "headerless_numbers.csv",
    "headerless_repeated.csv",
    "headerless_empty_field.csv",
    "binary.csv",
    "parquet_named.csv",
}
"""Files whose column names are data: no unit and no column a query names is found."""

PER_ROW = {"extra_field.csv", "extra_fields_unit.csv", "bad_utf8.csv"}
"""CSV files whose flaws change their own rows only (extra fields dropped, bytes replaced)."""

DECLARED = {
    "good.csv",
    "bom.csv",
    "header_only.csv",
    "short_row.csv",
    "mixed_amount.csv",
    "extra_field.csv",
    "extra_fields_unit.csv",
    "null_unit.csv",
}
"""CSV files with an ``amount`` column, opened with its type declared."""

TYPES = {"amount": pf.Column(type="float64")}

BAD_UNIT = {"null_unit.csv", "nan_unit.parquet", "list_unit.parquet", "mixed_unit_dir.parquet"}
"""Files whose ``user_id`` column cannot be a privacy unit."""

GOOD_FILES = ["good.csv", "bom.csv", "header_only.csv", "short_row.csv", "good.parquet"]


def _file_cases() -> list[Case]:
    names = [*sorted(UNREADABLE | HEADERLESS | BAD_UNIT | PER_ROW), *GOOD_FILES, "mixed_amount.csv"]
    cases = []
    for name, unit, (action_name, action) in itertools.product(
        names, ("user_id", None), FILE_ACTIONS.items()
    ):

        def run(c: Context, n: str = name, u: str | None = unit, a: Any = action) -> object:
            types = TYPES if n in DECLARED else None
            return on_own_session(pf.Session(c.files[n], u, pf.zCDP(1.0), metadata=types), a)

        bad = (
            name in UNREADABLE
            or (name in HEADERLESS and (unit is not None or action_name not in ("open", "count")))
            or (name in BAD_UNIT and unit is not None)
        )
        cases.append(Case(f"file={name}-unit={unit}-{action_name}", run, refused=bad))
    for name, path in {"pathlike_missing": Path("no/such.parquet"), "int_path": 7}.items():
        cases.append(Case(f"file={name}", lambda c, p=path: pf.Session(p, None, pf.zCDP(1.0))))
    return cases


CASES = _file_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_without_charge_or_leak(ctx: Context, case: Case) -> None:
    check_case(case, ctx, ctx.sess)
