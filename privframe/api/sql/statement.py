"""One SELECT parsed with sqlglot: syntax errors located, unsupported clauses refused.

Example:
    >>> from privframe.api.sql.statement import select
    >>> try:
    ...     select("SELEC COUNT(*) FROM data", ["x"])
    ... except Exception as err:
    ...     print(err)
    the SQL does not parse: 'SELEC' at line 1, column 1 is not a SQL keyword; did you mean SELECT?
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from privframe.api.sql._common import construct, misspelt_keyword, only, unsupported
from privframe.errors import SQLError

_SELECT_CLAUSES = {
    "expressions",
    "from",
    "from_",
    "joins",
    "where",
    "group",
    "having",
    "order",
    "limit",
    "offset",
    "kind",
}


def select(text: str, names: Sequence[str]) -> exp.Select:
    """The one SELECT statement of ``text``, or an SQLError; ``names`` are the known columns."""
    failure = None
    try:
        statements = sqlglot.parse(text)
    except sqlglot.errors.SqlglotError as err:  # parse and tokenizer errors alike
        failure = _syntax_error(text, err, names)
    if failure is not None:
        raise failure  # outside the handler: the sqlglot error is not kept as context
    found = [s for s in statements if s is not None]
    if len(found) != 1:
        raise SQLError(
            f"give exactly one SELECT statement, got {len(found)}", construct="statements"
        )
    (statement,) = found
    if not isinstance(statement, exp.Select):
        raise unsupported(statement, construct(statement), "only SELECT queries can be released")
    return statement


def refuse_unsupported(statement: exp.Select) -> None:
    """Refuse what no part of a SELECT translates: WITH, DISTINCT, subqueries, windows, ``*``.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.statement import refuse_unsupported
        >>> try:
        ...     refuse_unsupported(sqlglot.parse_one("SELECT * FROM data"))
        ... except Exception as err:
        ...     print(err)
        SELECT * is not supported at line 1, column 8: name the group columns and aggregates
    """
    named = {"with_": "WITH (common table expressions)", "distinct": "SELECT DISTINCT"}
    for key, what in named.items():
        node = statement.args.get(key)
        if node:
            raise unsupported(node if isinstance(node, exp.Expression) else statement, what)
    only(statement, _SELECT_CLAUSES, "a SELECT")
    for node in statement.find_all(exp.Subquery, exp.Window, exp.Star, exp.Filter):
        if isinstance(node, exp.Star) and isinstance(node.parent, exp.Count):
            continue
        if isinstance(node, exp.Star):
            raise unsupported(node, "SELECT *", "name the group columns and aggregates")
        if isinstance(node, exp.Filter):
            raise unsupported(node, "an aggregate's FILTER clause", "filter the rows with WHERE")
        raise unsupported(node, construct(node))


def _located(text: str, offset: int) -> tuple[int, int]:
    """(line, column), 1-based, of the character at ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _syntax_error(text: str, err: sqlglot.errors.SqlglotError, names: Sequence[str]) -> SQLError:
    """A parse error, located at the token to blame.

    sqlglot reports the token where parsing stopped, which is often after the
    real mistake: ``SELEC COUNT(*)`` stops at ``(`` (``SELEC`` read as a column
    and ``COUNT`` as its alias), ``FORM data`` at ``data``. So a word just
    before the stop that is not a known name but is close to a keyword is
    blamed first; otherwise the error points at the start of the stopping token.
    """
    detail = (getattr(err, "errors", None) or [{}])[0]
    line, col = detail.get("line"), detail.get("col")
    if not line:  # tokenizer errors carry no position
        return SQLError(f"the SQL does not parse: {err}", construct="syntax")
    tokens = sqlglot.tokenize(text)
    # sqlglot's (line, col) is the last character of the token it stopped at.
    stop = next(
        (i for i, t in enumerate(tokens) if (t.line, t.col) >= (line, col)), len(tokens) - 1
    )
    known = {n.casefold() for n in names}
    for token in reversed(tokens[max(0, stop - 2) : stop + 1]):
        keyword = None
        if token.token_type == TokenType.VAR and token.text.casefold() not in known:
            keyword = misspelt_keyword(token.text)
        if keyword is not None:
            where = _located(text, token.start)
            return SQLError(
                f"the SQL does not parse: {token.text!r} at line {where[0]}, column "
                f"{where[1]} is not a SQL keyword; did you mean {keyword}?",
                construct="syntax",
                position=where,
            )
    where = _located(text, tokens[stop].start) if tokens else (line, col)
    found = f" {tokens[stop].text!r}" if tokens else ""
    return SQLError(
        f"the SQL does not parse: {detail.get('description', 'invalid SQL')}{found} at line "
        f"{where[0]}, column {where[1]}",
        construct="syntax",
        position=where,
    )
