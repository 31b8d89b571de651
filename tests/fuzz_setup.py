"""The fuzz suites' planted data and checks: a refused call charges nothing and leaks nothing.

Used by tests/privacy/test_fuzz_*.py. Their cases are generated deterministically
(``itertools`` products and one fixed-seed ``random.Random``) across the builder
(Session arguments, query steps, group_by and keys, aggregates and bounds, release
arguments), SQL text, report specs, file inputs (CSV and parquet) and Spark. The
private data holds a planted marker: the text ``MARKER`` and the digits ``918273``
(in a unit ID, an amount, an age). For every case the suites check that:

- the call raises a :class:`~privframe.errors.PrivframeError` subclass, or
  (for a case marked as possibly valid) returns a result;
- a refused call charged nothing: the ledger's length and the spent budget
  are unchanged (a refused report creates no ledger file);
- the marker appears nowhere in the error's message, in any exception of its
  ``__cause__``/``__context__`` chain (their ``args`` and notes included), or
  in any warning raised during the call.
"""

from __future__ import annotations

import datetime as dt
import io
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import privframe as pf

MARKER = "MARKER-7f3a"
SECRET = 918273.645  # an amount only the private data holds
SECRET_ID = 918273645  # a unit ID
SECRET_AGE = 918273
PLANTED = ("marker-7f3a", "918273")  # what must never appear (compared in lower case)
KEYS = ["north", "south", "east"]
LIMITS = {"max_groups": 2, "max_rows_per_group": 3}


def private_data() -> pl.DataFrame:
    """The private data, with the marker planted in each column."""
    return pl.DataFrame(
        {
            "user_id": [1, 1, 2, 3, SECRET_ID, 5],
            "region": ["north", "south", MARKER, "north", "east", "south"],
            "amount": [10.0, SECRET, 5.0, 7.5, 1.0, 2.0],
            "age": [30, 40, SECRET_AGE, 25, 50, 60],
            "note": [MARKER, "a", "b", f"{MARKER}!", "c", "d"],
            "day": [dt.date(2024, 1, d) for d in range(1, 7)],
        }
    )


# ----------------------------------------------------------------------------- checking


def error_texts(err: BaseException) -> Iterator[str]:
    """Every text the error carries: messages, args and notes of its whole chain."""
    seen: set[int] = set()
    todo: list[BaseException] = [err]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield f"{type(current).__name__}: {current}"
        yield repr(current.args)
        yield from (str(note) for note in getattr(current, "__notes__", ()))
        linked = [current.__cause__, current.__context__]
        linked += [a for a in current.args if isinstance(a, BaseException)]
        linked += list(getattr(current, "exceptions", ()))
        todo.extend(e for e in linked if e is not None)


def assert_clean(text: str, where: str) -> None:
    """Fail if ``text`` (found at ``where``) carries a planted value."""
    lowered = text.lower()
    for planted in PLANTED:
        assert planted not in lowered, f"{where} carries the planted value: {text[:300]}"


def outcome(action: Callable[[], object], sess: pf.Session | None = None) -> BaseException | None:
    """Run ``action``; return its PrivframeError (checked clean, nothing charged) or None.

    Any other exception propagates and fails the test.
    """
    before = (len(sess.ledger), sess.spent) if sess is not None else None
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            action()
        except pf.PrivframeError as err:
            error = err
    for warning in caught:
        assert_clean(str(warning.message), f"warning {warning.category.__name__}")
    if error is None:
        return None
    for text in error_texts(error):
        assert_clean(text, "the error chain")
    if sess is not None:
        assert (len(sess.ledger), sess.spent) == before, "a refused call charged the budget"
    return error


def on_own_session(sess: pf.Session, action: Callable[[pf.Session], object]) -> object:
    """``action(sess)``; if it is refused, check first that it charged ``sess`` nothing."""
    before = (len(sess.ledger), sess.spent)
    try:
        return action(sess)
    except pf.PrivframeError:
        assert (len(sess.ledger), sess.spent) == before, "a refused call charged the budget"
        raise


@dataclass(frozen=True)
class Case:
    """One generated input: ``run(ctx)`` calls privframe; ``refused``: it must raise."""

    id: str
    run: Callable[[Any], object]
    refused: bool = True


def check_case(case: Case, ctx: Any, sess: pf.Session | None) -> None:
    """Run ``case`` on ``ctx``: refused (if it must be) without charging ``sess`` or leaking."""
    error = outcome(lambda: case.run(ctx), sess)
    if case.refused:
        assert error is not None, f"{case.id} was accepted"


# ----------------------------------------------------------------------------- context


@dataclass
class Context:
    """What a case runs on: a session over the private data and the data files."""

    sess: pf.Session
    files: dict[str, Path]
    folder: Path


def write_files(folder: Path) -> dict[str, Path]:
    """Data files, good and bad, each holding the planted values."""
    frame = private_data()
    files: dict[str, Path] = {}

    def text(name: str, content: str | bytes) -> None:
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        files[name] = path

    good = io.StringIO()
    frame.write_csv(good)
    rows = good.getvalue().splitlines()
    header, body = rows[0], rows[1:]
    text("good.csv", good.getvalue())
    text("bom.csv", "\ufeff" + good.getvalue())
    text("header_only.csv", header + "\n")
    text("empty.csv", "")
    # No header row: the first row of data becomes the column names.
    text("headerless.csv", "\n".join(body) + "\n")
    text("headerless_numbers.csv", f"{SECRET_ID},{SECRET},{SECRET_AGE}\n1,2.5,30\n")
    text("headerless_repeated.csv", f"{MARKER},{MARKER},x\n{MARKER},b,c\n")
    text("headerless_empty_field.csv", f"{MARKER},,x\nq,b,c\n")
    text("extra_field.csv", "\n".join([header, *body[:2], body[2] + f",{MARKER}", *body[3:]]))
    text("extra_fields_unit.csv", f"user_id,amount\n1,2\n{SECRET_ID},3,{MARKER},{SECRET}\n")
    text("short_row.csv", "\n".join([header, *body[:2], "7", *body[3:]]) + "\n")
    text("unclosed_quote.csv", f'user_id,note\n1,"{MARKER}\n2,b\n')
    text("bad_utf8.csv", f"user_id,note\n1,{MARKER}".encode() + b"\xff\xfe\n2,b\n")
    text("mixed_amount.csv", f"user_id,amount,region\n1,2.5,north\n2,{MARKER},south\n")
    text("null_unit.csv", f"user_id,amount,region\n1,2.5,north\n,{SECRET},south\n")
    text("binary.csv", b"PAR1\x00\x01" + MARKER.encode() + b"\x00" * 20)
    text("corrupt.parquet", b"PAR1" + MARKER.encode() + b"\x00garbage PAR1")
    text("empty.parquet", b"")
    text("csv_named.parquet", good.getvalue())
    text("data.txt", good.getvalue())
    text("no_suffix", good.getvalue())
    frame.write_parquet(folder / "good.parquet")
    files["good.parquet"] = folder / "good.parquet"
    whole = (folder / "good.parquet").read_bytes()
    text("truncated.parquet", whole[: len(whole) // 2])
    text("parquet_named.csv", whole)
    frame.with_columns(
        pl.when(pl.col("age") == SECRET_AGE)
        .then(float("nan"))
        .otherwise(pl.col("user_id").cast(pl.Float64))
        .alias("user_id")
    ).write_parquet(folder / "nan_unit.parquet")
    files["nan_unit.parquet"] = folder / "nan_unit.parquet"
    frame.with_columns(pl.concat_list("user_id").alias("user_id")).write_parquet(
        folder / "list_unit.parquet"
    )
    files["list_unit.parquet"] = folder / "list_unit.parquet"
    mixed = folder / "mixed_unit_dir.parquet"
    mixed.mkdir()
    frame.head(3).write_parquet(mixed / "a.parquet")
    frame.tail(3).with_columns(pl.col("user_id").cast(pl.String) + MARKER).write_parquet(
        mixed / "b.parquet"
    )
    files["mixed_unit_dir.parquet"] = mixed
    (folder / "a_directory.csv").mkdir()
    files["a_directory.csv"] = folder / "a_directory.csv"
    files["missing.csv"] = folder / "missing.csv"
    return files


def fuzz_context(tmp_path_factory: pytest.TempPathFactory) -> Context:
    """A session over the private data with a large budget, and the data files written."""
    folder = tmp_path_factory.mktemp("fuzz")
    sess = pf.Session(
        private_data(),
        "user_id",
        pf.zCDP(rho=1000.0, delta=1e-6),
        metadata={
            "amount": pf.Column(bounds=(0, 100)),
            "age": pf.Column(bounds=(0, 120)),
            "region": pf.Column(keys=KEYS),
        },
        contributions=pf.Bound(**LIMITS),
    )
    return Context(sess, write_files(folder), folder)


def bounded(c: Context) -> Any:
    """A query on the context's session with the usual contribution bounds."""
    return c.sess.query().bound(**LIMITS)


FILE_ACTIONS: dict[str, Callable[[pf.Session], object]] = {
    "open": lambda s: s,
    "count": lambda s: s.query().bound(**LIMITS).agg(pf.count()).release(rho=0.01),
    "sum": lambda s: s.query().bound(**LIMITS).agg(pf.sum("amount", (0, 10))).release(rho=0.01),
    "group": lambda s: (
        s.query().bound(**LIMITS).group_by("region", keys=KEYS).agg(pf.count()).release(rho=0.01)
    ),
    "sql": lambda s: s.sql(
        "SELECT COUNT(*) AS n, SUM(amount) AS total FROM data",
        0.01,
        metadata={"amount": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(**LIMITS),
    ),
}
"""Releases of every kind, run on a session opened over bad data (files, Spark)."""
