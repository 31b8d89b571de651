"""What every part of the SQL front end shares: error positions, name matching, literals.

Public names in a private module: the parts of :mod:`privframe.api.sql` import
them from here, and nothing outside the package does.

Example:
    >>> import sqlglot
    >>> from privframe.api.sql._common import resolve
    >>> resolve(sqlglot.parse_one("Region"), ["region", "amount"], "in the data")
    'region'
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlglot import exp

from privframe.api.sql.dialect import ORIGINAL_NAME
from privframe.errors import (
    NAMES_WITHHELD,
    InvalidArgumentError,
    InvalidValueError,
    SQLError,
    names_look_like_data,
)

TABLE = "data"
"""The name of the private table in FROM."""

QUANTILE_LIST = "privframe_quantile_list"
"""The mark (in ``meta``) on the array APPROX_QUANTILES becomes: the only array released."""

# The clause and operator words a typo most often hits.
KEYWORDS = (
    *("SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET"),
    *("JOIN", "INNER", "LEFT", "OUTER", "ON", "USING", "AS", "DISTINCT", "ASC", "DESC"),
    *("AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "CAST"),
    *("CASE", "WHEN", "THEN", "ELSE", "END"),
)


# ------------------------------------------------------------------ errors and positions


def position(node: exp.Expr) -> tuple[int, int] | None:
    """(line, column) where a node starts: the earliest token sqlglot located in it.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import position
        >>> position(sqlglot.parse_one("SELECT  x FROM data").expressions[0])
        (1, 9)
    """
    found = []
    for sub in node.walk():
        meta = getattr(sub, "meta", None) or {}
        if "line" in meta and "col" in meta:
            # sqlglot's col is just past the token's end; report where it starts.
            width = int(meta.get("end", 0)) - int(meta.get("start", 0)) + 1
            found.append((int(meta["line"]), max(1, int(meta["col"]) - width + 1)))
    return min(found, default=None)


def located(node: exp.Expr) -> tuple[int, int] | None:
    """Where a node is: its :func:`position`, else that of the nearest enclosing node that has one.

    A node sqlglot built from no token of its own (an implicit one) is
    located at the construct around it, so that every refusal has a position.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import located
        >>> select = sqlglot.parse_one("SELECT  x FROM data")
        >>> located(select.args["from_"]), located(select)
        ((1, 16), (1, 9))
    """
    current: exp.Expr | None = node
    while current is not None:
        where = position(current)
        if where is not None:
            return where
        current = current.parent
    return None


def unsupported(node: exp.Expr, construct: str, hint: str = "") -> SQLError:
    """An SQLError saying "``construct`` is not supported at <position>", with a hint.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import unsupported
        >>> str(unsupported(sqlglot.parse_one("SELECT x"), "SELECT x", "aggregate it"))
        'SELECT x is not supported at line 1, column 8: aggregate it'
    """
    where = located(node)
    at = f" at line {where[0]}, column {where[1]}" if where else ""
    text = f"{construct} is not supported{at}"
    return SQLError(f"{text}: {hint}" if hint else text, construct=construct, position=where)


def refuse(node: exp.Expr, construct: str, message: str) -> SQLError:
    """An SQLError with a full message (not "X is not supported"), position appended.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import refuse
        >>> str(refuse(sqlglot.parse_one("x"), "IN", "use one type"))
        'use one type (at line 1, column 1)'
    """
    return refuse_at(located(node), construct, message)


def refuse_at(where: tuple[int, int] | None, construct: str, message: str) -> SQLError:
    """:func:`refuse` at a position already found (``None``: nowhere to point at).

    Example:
        >>> from privframe.api.sql._common import refuse_at
        >>> str(refuse_at((2, 5), "with_error", "alias one of them"))
        'alias one of them (at line 2, column 5)'
    """
    at = f" (at line {where[0]}, column {where[1]})" if where else ""
    return SQLError(f"{message}{at}", construct=construct, position=where)


def only(node: exp.Expr, allowed: set[str], what: str, hint: str = "") -> None:
    """Refuse any clause or modifier of ``node`` privframe does not translate.

    An allow-list, so that a construct sqlglot parses but privframe does not
    know (TABLESAMPLE, WITH ROLLUP, FETCH, ...) is refused, never ignored;
    ``hint`` says what to write instead.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import only
        >>> only(sqlglot.parse_one("SELECT x FROM data"), {"expressions", "from_"}, "a SELECT")
    """
    for key, value in node.args.items():
        if key in allowed or value is None or value is False or value == []:
            continue
        first = value[0] if isinstance(value, list) else value
        located = first if isinstance(first, exp.Expression) else node
        name = first.key.upper() if isinstance(first, exp.Expression) else key.upper()
        raise unsupported(located, f"{name.replace('_', ' ')} in {what}", hint)


def construct(node: exp.Expr) -> str:
    """A readable name for a node's SQL construct.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import construct
        >>> construct(sqlglot.parse_one("LAG(x)"))
        'the function LAG'
    """
    if isinstance(node, exp.Window):
        return "a window function (OVER ...)"
    if isinstance(node, exp.Subquery):
        return "a subquery"
    if isinstance(node, exp.Func):
        return f"the function {written(node)}"
    return node.key.upper().replace("_", " ")


def written(node: exp.Expr) -> str:
    """The name a function call was written with (``STRING_AGG``, ``ANON_SUM``), else its node's.

    sqlglot names a call by its canonical function (``STRING_AGG`` is
    ``GROUP_CONCAT``); the dialect keeps the name as written in the node's meta.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import written
        >>> from privframe.api.sql.dialect import Privframe
        >>> written(sqlglot.parse_one("string_agg(x, ',')", read=Privframe))
        'STRING_AGG'
    """
    name = node.meta.get(ORIGINAL_NAME)
    if name:
        return str(name)
    if isinstance(node, exp.Anonymous):
        return str(node.name).upper()
    return node.sql_name() if isinstance(node, exp.Func) else node.key.upper()


# ------------------------------------------------------------------ names


def misspelt_keyword(word: str) -> str | None:
    """The SQL keyword ``word`` is most likely a typo of (``SELEC`` -> ``SELECT``), if any.

    Example:
        >>> from privframe.api.sql._common import misspelt_keyword
        >>> misspelt_keyword("SELEC")
        'SELECT'
    """
    if len(word) < 2 or word.upper() in KEYWORDS:
        return None
    near = difflib.get_close_matches(word.upper(), KEYWORDS, n=1, cutoff=0.75)
    return near[0] if near else None


def identifier(node: exp.Expr) -> tuple[str, bool]:
    """The name a column, table or identifier node spells, and whether it was quoted.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import identifier
        >>> identifier(sqlglot.parse_one('"Region"'))
        ('Region', True)
    """
    inner = node.this if isinstance(node, exp.Column | exp.Table) else node
    return node.name, isinstance(inner, exp.Identifier) and bool(inner.quoted)


def lookup(name: str, quoted: bool, names: Iterable[str]) -> list[str]:
    """The ``names`` an identifier denotes: quoted, exactly; unquoted, ignoring case.

    Example:
        >>> from privframe.api.sql._common import lookup
        >>> lookup("REGION", False, ["region", "amount"])
        ['region']
    """
    if quoted:
        return [n for n in dict.fromkeys(names) if n == name]
    folded = name.casefold()
    return [n for n in dict.fromkeys(names) if n.casefold() == folded]


def resolve(
    node: exp.Expr, names: Iterable[str], where: str, hint: str = "", kind: str = "column"
) -> str:
    """The one name of ``names`` that ``node`` (a column or identifier) denotes, or an SQLError.

    SQL folds unquoted identifiers, so ``Region`` and ``REGION`` find the column
    ``region``; a quoted one (``"Region"``) must match exactly. Two names that
    differ only in case make an unquoted identifier ambiguous. Names are public
    schema, never data, so the error may list and suggest them, unless they
    look like a row of data (:func:`~privframe.errors.names_look_like_data`).
    """
    name, quoted = identifier(node)
    names = list(dict.fromkeys(names))
    found = lookup(name, quoted, names)
    if len(found) == 1:
        return found[0]
    what = f"the {kind} {name!r}"
    node = node.this if isinstance(node, exp.Column) else node  # the name, not its qualifier
    if found:
        raise refuse(
            node,
            what,
            f"{what} is ambiguous: it matches {found} {where}, which differ only in "
            f'case; write the one you mean in double quotes, e.g. "{found[0]}"',
        )
    raise refuse(node, what, f"{what} does not exist {where}{_advice(name, quoted, names, hint)}")


def _advice(name: str, quoted: bool, names: list[str], hint: str) -> str:
    """What to write instead of a name that matches nothing: a near name, or the names."""
    advice = ""
    folded = {n.casefold(): n for n in names}
    near = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)
    if names_look_like_data(names):  # a CSV without a header row: names are private values
        advice += f"; {NAMES_WITHHELD}"
    elif quoted and name.casefold() in folded:
        advice += f'; did you mean "{folded[name.casefold()]}"? (quoted, a name keeps its case)'
    elif quoted:  # most often a string written in double quotes
        advice += (
            f"; in SQL, double quotes name a column: for the text {name}, write it in single "
            f"quotes ('{name}')"
        )
    elif near:
        advice += f"; did you mean {folded[near[0]]!r}?"
    elif not hint:  # a hint says what can be used instead
        shown = sorted(names)
        advice += f"; they are {shown[:20]}" + (" ..." if len(shown) > 20 else "")
    if hint:
        advice += f"; {hint}"
    return advice


# ------------------------------------------------------------------ literals


def literal_value(node: exp.Expr) -> Any:
    """The Python value of a literal (number, string, boolean, NULL), or an SQLError.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import literal_value
        >>> literal_value(sqlglot.parse_one("-2.5")), literal_value(sqlglot.parse_one("'a'"))
        (-2.5, 'a')
    """
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        value = literal_value(node.this)
        if isinstance(value, str):
            raise unsupported(node, f"the negative string {node.sql()}")
        return -value
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else number(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Column) and identifier(node)[1]:
        name = node.name
        raise unsupported(
            node,
            f'the column "{name}"',
            f"only literal values are allowed here; in SQL, double quotes name a column: "
            f"write the text in single quotes ('{name}')",
        )
    raise unsupported(node, construct(node), "only literal values are allowed here")


def number(node: exp.Literal) -> int | float:
    """The int or float a number literal spells, or a located SQLError.

    The tokenizer reads ``1e`` (an exponent without digits) as a number;
    such text, an integer beyond 64 bits and a number beyond the largest
    float are refused where they are written.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import number
        >>> number(sqlglot.parse_one("12")), number(sqlglot.parse_one("1.5e3"))
        (12, 1500.0)
        >>> try:
        ...     number(sqlglot.parse_one("1e"))
        ... except Exception as err:
        ...     print(err)
        '1e' is not a number: write digits after its e, e.g. 1e3 (at line 1, column 1)
    """
    text = node.this
    problem = not_a_number(text)
    if problem is not None:
        raise refuse(node, f"the number {text[:30]}", problem)
    if text.lstrip("-").isdigit():
        integer = whole_number(text)
        if integer is None:
            raise unsupported(
                node,
                f"the integer {text[:30]}",
                "integers are 64-bit: write it as a decimal, e.g. 1e20",
            )
        return integer
    value = float(text)
    if not math.isfinite(value):
        raise unsupported(node, f"the number {text[:30]}", "it is beyond the largest float")
    return value


# A number as SQL writes it: digits with at most one point, then an optional exponent (a
# minus sign only where sqlglot builds a literal itself).
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def not_a_number(text: str) -> str | None:
    """What is wrong with the text of a number token (``1e``), or None if it is a number.

    Example:
        >>> from privframe.api.sql._common import not_a_number
        >>> not_a_number("1.5e-3"), not_a_number("1e")
        (None, "'1e' is not a number: write digits after its e, e.g. 1e3")
    """
    if _NUMBER.fullmatch(text):
        return None
    shown = text if len(text) <= 30 else f"{text[:30]}..."
    if text[-1:] in ("e", "E", "+", "-"):
        return f"{shown!r} is not a number: write digits after its e, e.g. 1e3"
    return f"{shown!r} is not a number: write it as digits, e.g. 12, 1.5 or 1e3"


def whole_number(text: str) -> int | None:
    """The 64-bit integer a literal's digits spell, or None beyond 64 bits.

    Over 19 digits is beyond 64 bits whatever they are: such text is never
    parsed (``int()`` of thousands of digits is slow, and Python refuses it).

    Example:
        >>> from privframe.api.sql._common import whole_number
        >>> whole_number("-42"), whole_number("9223372036854775808"), whole_number("1" * 5000)
        (-42, None, None)
    """
    if len(text.lstrip("-").lstrip("0")) > 19:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def position_number(node: exp.Literal, clause: str) -> int:
    """A select-list position (GROUP BY 2, ORDER BY 1): a positive integer literal.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import position_number
        >>> position_number(sqlglot.parse_one("2"), "GROUP BY")
        2
    """
    value = literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int):
        raise unsupported(node, f"{clause} {node.sql()}", "positions are whole numbers, from 1")
    return value


T = TypeVar("T")


def builder_refusal(
    compute: Callable[[], T], lead: str, node: exp.Expr | None = None, what: str = "query"
) -> T:
    """``compute()``, with a builder refusal of what the SQL asked re-raised as an SQLError.

    The builder checks the plan against the public schema only (e.g. a type
    mismatch in WHERE), so its message is kept, after ``lead``; every refused
    SQL query raises SQLError naming the construct, ``what``, at ``node``.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql._common import builder_refusal
        >>> from privframe.errors import InvalidValueError, SQLError
        >>> def bad() -> None:
        ...     raise InvalidValueError("no aggregates")
        >>> try:
        ...     builder_refusal(bad, "the query cannot be built", sqlglot.parse_one("SELECT 1"))
        ... except SQLError as err:
        ...     print(err, "|", err.construct)
        the query cannot be built: no aggregates (at line 1, column 8) | query
    """
    refusal = None
    try:
        return compute()
    except SQLError:
        raise
    except (InvalidArgumentError, InvalidValueError) as err:
        refusal = str(err)
    # Raised outside the handler, so the builder's error is not kept as its context.
    if node is None:
        raise SQLError(f"{lead}: {refusal}", construct=what)
    raise refuse(node, what, f"{lead}: {refusal}")
