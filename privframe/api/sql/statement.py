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
from sqlglot.tokens import Token, TokenType

from privframe.api.sql._common import construct, misspelt_keyword, only, unsupported
from privframe.api.sql.dialect import Clamped, DialectRefusalError, PrivacyClause, Privframe
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
    "with_",
}


def select(text: str, names: Sequence[str]) -> exp.Select:
    """The one SELECT statement of ``text``, or an SQLError; ``names`` are the known columns."""
    failure = None
    try:
        statements = sqlglot.parse(text, read=Privframe)
    except DialectRefusalError as err:
        failure = _refusal(text, err)
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


def privacy_clause(statement: exp.Select) -> PrivacyClause | None:
    """Take BigQuery/ZetaSQL's ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` off ``statement``.

    The dialect parses the clause into the SELECT's ``hint`` slot
    (:mod:`~privframe.api.sql.dialect`); what is left there is an ordinary
    hint, which :func:`refuse_unsupported` refuses.

    Example:
        >>> from privframe.api.sql.statement import privacy_clause, select
        >>> statement = select("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM data", [])
        >>> privacy_clause(statement).this, "hint" in statement.args
        ('DIFFERENTIAL_PRIVACY', False)
    """
    clause = statement.args.get("hint")
    if not isinstance(clause, PrivacyClause):
        return None
    statement.args.pop("hint")
    return clause


def refuse_unsupported(statement: exp.Select) -> None:
    """Refuse what no part of a SELECT translates: DISTINCT, subqueries, windows, ``*``.

    A subquery in FROM and the WITH clause's tables are row sources, which
    :meth:`~privframe.api.sql.scope.Scope.read_from` checks and inlines;
    everywhere else a subquery is refused.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.statement import refuse_unsupported
        >>> try:
        ...     refuse_unsupported(sqlglot.parse_one("SELECT * FROM data"))
        ... except Exception as err:
        ...     print(err)
        SELECT * is not supported at line 1, column 8: name the group columns and aggregates
    """
    distinct = statement.args.get("distinct")
    if distinct:
        raise unsupported(distinct, "SELECT DISTINCT")
    only(statement, _SELECT_CLAUSES, "a SELECT")
    limit = statement.args.get("limit")
    if limit is not None and limit.meta.get("top") and limit.args.get("limit_options"):
        raise unsupported(limit, f"TOP {limit.expression.sql()} PERCENT or WITH TIES", "use TOP n")
    # Without its row sources and joined lists of groups, which Scope reads and checks.
    outer = statement.copy()
    outer.set("with_", None)
    for source in (outer.args.get("from_"), *(outer.args.get("joins") or [])):
        if source is not None and isinstance(source.this, exp.Subquery):
            source.set("this", exp.to_table("subquery"))
    for node in outer.find_all(exp.Subquery, exp.Window, exp.Star, exp.Filter):
        if isinstance(node, exp.Star) and _counted(node):
            continue
        if isinstance(node, exp.Star):
            raise unsupported(node, "SELECT *", "name the group columns and aggregates")
        if isinstance(node, exp.Filter):
            raise unsupported(node, "an aggregate's FILTER clause", "filter the rows with WHERE")
        hint = "a subquery is read only as a row source: FROM (SELECT ...) or WITH"
        raise unsupported(node, construct(node), hint if isinstance(node, exp.Subquery) else "")


def _counted(star: exp.Star) -> bool:
    """``*`` as COUNT's argument: ``COUNT(*)``, or with bounds, ``COUNT(*, contribution_...)``."""
    parent = star.parent
    if isinstance(parent, Clamped):
        parent = parent.parent
    return isinstance(parent, exp.Count)


def _refusal(text: str, err: DialectRefusalError) -> SQLError:
    """A construct of another dialect refused by the parser, at its token."""
    where = _located(text, err.token.start)
    return SQLError(
        f"{err.construct} is not supported at line {where[0]}, column {where[1]}: {err.hint}",
        construct=err.construct,
        position=where,
    )


def _located(text: str, offset: int) -> tuple[int, int]:
    """(line, column), 1-based, of the character at ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


# Words of other dialects' private SQL that sqlglot stops at, with the privframe way to say them.
_FOREIGN = {
    "CLAMPED": (
        "CLAMPED BETWEEN outside an ANON_ function",
        "ZetaSQL's CLAMPED BETWEEN goes in ANON_SUM, ANON_AVG, ANON_COUNT, ANON_VAR_POP, "
        "ANON_STDDEV_POP or ANON_PERCENTILE_CONT (ANON_SUM(x CLAMPED BETWEEN 0 AND 10)); "
        "for SUM, AVG, ... write SUM(x, contribution_bounds_per_group => (0, 10)) or SUM(x, 0, 10)",
    ),
}


def _foreign(text: str, tokens: Sequence[Token], stop: int) -> SQLError | None:
    """A refusal naming another dialect's construct near where parsing stopped, if one is there."""
    for token in tokens[max(0, stop - 1) : stop + 1]:
        word = token.text.upper()
        after_select = stop > 0 and tokens[stop - 1].token_type == TokenType.SELECT
        if token.token_type == TokenType.WITH and after_select:
            construct, hint = (
                "SELECT WITH <clause>",
                "the clause after SELECT WITH is BigQuery's DIFFERENTIAL_PRIVACY (or ZetaSQL's "
                "older ANONYMIZATION): SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
                "delta=1e-6, max_groups_contributed=1) ...",
            )
        elif word in _FOREIGN:
            construct, hint = _FOREIGN[word]
        else:
            continue
        where = _located(text, token.start)
        return SQLError(
            f"{construct} is not supported at line {where[0]}, column {where[1]}: {hint}",
            construct=construct,
            position=where,
        )
    return None


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
    tokens = sqlglot.tokenize(text, read=Privframe)
    # sqlglot's (line, col) is the last character of the token it stopped at.
    stop = next(
        (i for i, t in enumerate(tokens) if (t.line, t.col) >= (line, col)), len(tokens) - 1
    )
    foreign = _foreign(text, tokens, stop)
    if foreign is not None:
        return foreign
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
