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

import re
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from privframe.api.sql._common import (
    construct,
    misspelt_keyword,
    not_a_number,
    only,
    unsupported,
)
from privframe.api.sql.dialect import (
    Clamped,
    DialectRefusalError,
    MalformedError,
    PrivacyClause,
    Privframe,
)
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
    """The one SELECT statement of ``text``, or an SQLError; ``names`` are the known columns.

    Every refusal is located: the text is tokenized first (an unclosed string
    or comment is refused where it starts), then split at its semicolons (one
    statement, ended by at most one ``;``), then parsed.

    Example:
        >>> from privframe.api.sql.statement import select
        >>> try:
        ...     select("SELECT COUNT(*) FROM data; SELECT 1", [])
        ... except Exception as err:
        ...     print(err.position)
        (1, 28)
    """
    tokens = _tokens(text)
    _one_statement(text, tokens)
    failure = None
    try:
        statements = Privframe().parser().parse(tokens, text)
    except DialectRefusalError as err:
        failure = _refusal(text, err)
    except sqlglot.errors.SqlglotError as err:
        failure = _syntax_error(text, tokens, err, names)
    if failure is not None:
        raise failure  # outside the handler: the sqlglot error is not kept as context
    (statement,) = [s for s in statements if s is not None]  # _one_statement made sure
    if not isinstance(statement, exp.Select):
        raise unsupported(statement, construct(statement), "only SELECT queries can be released")
    return statement


def _tokens(text: str) -> list[Token]:
    """The tokens of ``text``; text the tokenizer cannot read, or a malformed number, is refused."""
    tokenizer = Privframe().tokenizer()
    failure = None
    try:
        tokens = tokenizer.tokenize(text)
    except sqlglot.errors.TokenError:
        failure = _unreadable(text, tokenizer.tokens)
    if failure is not None:
        raise failure  # outside the handler: the sqlglot error is not kept as context
    for token in tokens:
        # The tokenizer reads ``1e`` (an exponent without digits) as a number.
        problem = not_a_number(token.text) if token.token_type == TokenType.NUMBER else None
        if problem is not None:
            where = _located(text, token.start)
            raise SQLError(
                f"the SQL does not parse at line {where[0]}, column {where[1]}: {problem}",
                construct="syntax",
                position=where,
            )
    return tokens


# Whitespace and complete comments, which the tokenizer skips between tokens.
_BETWEEN_TOKENS = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)

# What an unclosed opening means, by its first characters.
_UNCLOSED = {
    "'": ("the string", "'"),
    '"': ("the quoted name", '"'),
    "`": ("the quoted name", "`"),
    "/*": ("the comment", "*/"),
}


def _unreadable(text: str, read: Sequence[Token]) -> SQLError:
    """The refusal of text the tokenizer stopped in, at the token it could not read.

    The tokenizer stops in the token after the last one it read: most often a
    string, quoted name or comment that is never closed.
    """
    after = read[-1].end + 1 if read else 0
    start = _BETWEEN_TOKENS.match(text, after).end()  # type: ignore[union-attr]
    where = _located(text, start)
    at = f"at line {where[0]}, column {where[1]}"
    opening = next(
        (o for o in sorted(_UNCLOSED, key=len, reverse=True) if text.startswith(o, start)), None
    )
    if opening is None:
        message = f"{text[start : start + 20]!r} {at} cannot be read as SQL"
    else:
        what, closing = _UNCLOSED[opening]
        message = f"{what} that starts {at} is never closed: end it with {closing}"
    return SQLError(f"the SQL does not parse: {message}", construct="syntax", position=where)


def _one_statement(text: str, tokens: Sequence[Token]) -> None:
    """Refuse text that is not one statement, ended by at most one semicolon.

    sqlglot reads ``;;`` as two empty statements and ``SELECT ...; SELECT
    ...`` as two; privframe releases one query per call, and an empty
    statement is a mistake to point at, not to skip.
    """
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if not statements[-1]:
                raise _statements_error(text, token, "';' ends an empty statement", "remove it")
            statements.append([])
        else:
            statements[-1].append(token)
    found = [s for s in statements if s]
    if not found:
        raise _statements_error(
            text,
            None,
            "there is no statement",
            "give exactly one SELECT, e.g. SELECT COUNT(*) FROM data",
        )
    if len(found) > 1:
        raise _statements_error(
            text,
            found[1][0],
            "a second statement starts",
            "give exactly one SELECT statement per call: run each query on its own",
        )


def _statements_error(text: str, token: Token | None, problem: str, hint: str) -> SQLError:
    where = _located(text, token.start) if token is not None else (1, 1)
    return SQLError(
        f"the SQL does not parse: {problem} at line {where[0]}, column {where[1]}: {hint}",
        construct="statements",
        position=where,
    )


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


def _syntax_error(
    text: str, tokens: Sequence[Token], err: sqlglot.errors.SqlglotError, names: Sequence[str]
) -> SQLError:
    """A parse error, located at the token to blame.

    sqlglot reports the token where parsing stopped, which is often after the
    real mistake: ``SELEC COUNT(*)`` stops at ``(`` (``SELEC`` read as a column
    and ``COUNT`` as its alias), ``FORM data`` at ``data``. So a word just
    before the stop that is not a known name but is close to a keyword is
    blamed first; otherwise the error points at the start of the stopping token
    (the dialect's own errors, :class:`~privframe.api.sql.dialect.MalformedError`,
    name their token and say what is wrong in words).
    """
    if not tokens:  # nothing to parse was refused by _one_statement
        return SQLError(f"the SQL does not parse: {err}", construct="syntax", position=(1, 1))
    stop, before, after = _failure(tokens, err)
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
    where = _located(text, tokens[stop].start)
    return SQLError(
        f"the SQL does not parse: {before} at line {where[0]}, column {where[1]}{after}",
        construct="syntax",
        position=where,
    )


def _failure(tokens: Sequence[Token], err: sqlglot.errors.SqlglotError) -> tuple[int, str, str]:
    """The index of the token to blame, and what to say before and after its position."""
    if isinstance(err, MalformedError):
        stop = next((i for i, t in enumerate(tokens) if t.start >= err.token.start), 0)
        return stop, err.problem, f": {err.hint}"
    detail = (getattr(err, "errors", None) or [{}])[0]
    line, col = detail.get("line") or 1, detail.get("col") or 1
    # sqlglot's (line, col) is the last character of the token it stopped at.
    stop = next(
        (i for i, t in enumerate(tokens) if (t.line, t.col) >= (line, col)), len(tokens) - 1
    )
    described = _RAW_TOKEN.sub(_token_words, str(detail.get("description") or ""))
    blamed = repr(tokens[stop].text)
    expected = _EXPECTED.fullmatch(described)
    unclosed = _unclosed(tokens)
    if expected is not None and expected[1] == ")" and unclosed is not None:
        return tokens.index(unclosed), "the '(' that starts", " is never closed: add ')'"
    if expected is not None:
        what = _EXPECTED_WORDS.get(expected[1]) or _expected(expected[1])
        return stop, f"{what} is expected before {blamed}", ""
    if described.startswith("Invalid expression / Unexpected token"):
        return stop, f"nothing of a SELECT can follow there: {blamed}", ""
    if not described or _INTERNAL.search(described):
        # sqlglot's own words would show its internals: say where, in plain words.
        return stop, blamed, " cannot be read there: see docs/sql.md for the SQL privframe reads"
    return stop, blamed, f": {described}"


# sqlglot's "Expecting )", "Expected table name but got <token>", "Expected END after CASE".
_EXPECTED = re.compile(r"Expect(?:ed|ing) (?:token )?(.+?)(?: but got .*)?", re.DOTALL)


def _expected(what: str) -> str:
    """What sqlglot expected, as a phrase: a token quoted (``')'``), words with an article."""
    if what[:1].islower():
        return f"a {what}"  # "table name", "type after '::'"
    return what if " " in what else repr(what)  # "END after CASE", ")"


# What sqlglot expected, in the user's words where its own name for it is internal.
_EXPECTED_WORDS = {"CTE to have alias": "a name for the WITH table (WITH name AS (...))"}

# Words of a sqlglot message that are about sqlglot, not about the SQL.
_INTERNAL = re.compile(r"<|Token|sqlglot|Required keyword|class |Expecting|Unexpected token")


def _unclosed(tokens: Sequence[Token]) -> Token | None:
    """The innermost ``(`` that no ``)`` closes, if any."""
    opened: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            opened.append(token)
        elif token.token_type == TokenType.R_PAREN and opened:
            opened.pop()
    return opened[-1] if opened else None


# A token as sqlglot's messages show it: <Token token_type: TokenType.VAR, text: x, ...>.
_RAW_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: .*?>")


def _token_words(match: re.Match[str]) -> str:
    """A token of a sqlglot message in words: its text, or the end of the query."""
    return "the end of the query" if match[1] == "SENTINEL" else repr(match[2])


def nesting_error(text: str) -> SQLError:
    """The refusal of a query nested too deeply to translate, at its deepest parenthesis.

    Example:
        >>> from privframe.api.sql.statement import nesting_error
        >>> nesting_error("SELECT COUNT(*) FROM data WHERE ((x > 1))").position
        (1, 34)
    """
    depth, deepest, where = 0, 0, (1, 1)
    for token in sqlglot.tokenize(text, read=Privframe):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth > deepest:
            deepest, where = depth, _located(text, token.start)
    return SQLError(
        f"the SQL is nested too deeply to translate (deepest at line {where[0]}, column "
        f"{where[1]}): write it with fewer nested parentheses, operators or functions",
        construct="nesting",
        position=where,
    )
