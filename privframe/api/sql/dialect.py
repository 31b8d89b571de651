"""The SQL privframe reads: sqlglot's dialect plus the spellings of other private SQL engines.

A :class:`sqlglot.dialects.Dialect` subclass (sqlglot's own extension points:
``Parser.FUNCTIONS``, ``Parser.FUNCTION_PARSERS`` and two parser hooks), so
nothing is rewritten in the text and every error keeps its position:

* BigQuery/ZetaSQL's differential privacy clause, ``SELECT WITH
  DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, ...)``, and its older
  ``WITH ANONYMIZATION OPTIONS(...)``: a :class:`PrivacyClause` in the
  SELECT's ``hint`` slot (read by :mod:`~privframe.api.sql.options`).
* Bounds in the call: ``ANON_SUM(x CLAMPED BETWEEN 0 AND 10)``,
  ``SUM(x, contribution_bounds_per_group => (0, 10))``,
  ``VAR_POP(x, contribution_bounds_per_row => (0, 10))`` and ``SUM(x, 0,
  10)`` (SmartNoise): the argument wrapped in :class:`Clamped`. The ``ANON_``
  functions become the plain aggregate (``ANON_AVG`` is ``AVG``).
* ``VAR`` and ``STD`` (MySQL, SmartNoise) are ``VARIANCE`` and ``STDDEV``.
* SmartNoise's (T-SQL's) ``SELECT TOP n``: a LIMIT marked ``top``; TOP and
  LIMIT together are refused.

And it is strict where sqlglot is lenient, so that malformed text is a syntax
error (:class:`MalformedError`) instead of a query that runs and is charged:
an empty item in a comma-separated list (``SELECT , COUNT(*)``, ``SUM(x,)``,
``GROUP BY a,``, ``FROM data,``), a clause with nothing after it (``GROUP
BY``, ``ORDER BY``, ``WHERE``), empty parentheses or ``IN ()``, ``COUNT()``,
two select items without a comma between them (``SELECT region
COUNT(*)``) and two strings without one (``IN ('n' 's')``, which sqlglot
joins). Every function call keeps the name it was written with
(``STRING_AGG``, which sqlglot calls ``GROUP_CONCAT``) and its position.

References: ZetaSQL, docs/query-syntax.md (Differential privacy clause) and
docs/aggregate-dp-functions.md; BigQuery, "Differentially private aggregate
functions"; SmartNoise SQL, docs "SQL reference" (TOP, SUM bounds).

Example:
    >>> import sqlglot
    >>> from privframe.api.sql.dialect import Privframe
    >>> text = "SELECT ANON_SUM(x CLAMPED BETWEEN 0 AND 5) FROM t"
    >>> sqlglot.parse_one(text, read=Privframe).expressions[0].sql()
    'SUM(CLAMPED(x, 0, 5))'
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar

from sqlglot import exp, parser
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

PRIVACY_CLAUSES = ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION")
"""The words after ``SELECT WITH`` that start a differential privacy clause."""

BOUNDS_ARGUMENTS = ("contribution_bounds_per_group", "contribution_bounds_per_row")
"""BigQuery's named bounds arguments: per group (SUM, AVG, COUNT) and per row (VAR_POP, ...)."""

ORIGINAL_NAME = "privframe_name"
"""The meta key of the function name a node was written with (``ANON_SUM``)."""


class Clamped(exp.Expression, exp.Func):
    """An aggregate's argument with the bounds written in its call.

    ``this`` is the argument, ``lower`` and ``upper`` the bounds as written;
    ``meta[ORIGINAL_NAME]`` says how (``CLAMPED BETWEEN``,
    ``contribution_bounds_per_group``, ``contribution_bounds_per_row`` or
    ``bounds in the call``).
    """

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "lower": True, "upper": True}


class PrivacyClause(exp.Hint):
    """``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)``: ``this`` is the clause's word, then the options.

    Each option is an ``exp.EQ`` of its name (a column node) and its value. A
    hint (``exp.Hint``) to sqlglot, as it takes a hint's place after SELECT.
    """

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False}


class MalformedError(ParseError):
    """Text that sqlglot's lenient grammar would read, but that is no well-formed SQL.

    A ParseError, so that the parser's backtracking treats it as any syntax
    error; it carries what is wrong, what to write instead and the token to
    blame (a function call's own refusal is moved to the call's name).
    """

    def __init__(self, problem: str, hint: str, token: Token, call: bool = False) -> None:
        super().__init__(f"{problem}: {hint}")
        self.problem = problem
        self.hint = hint
        self.token = token
        self.call = call  # about a function call: the call's parser puts it at the name


class DialectRefusalError(ParseError):
    """A construct of another dialect that parses into nothing privframe can run.

    A ParseError, so that whoever parses sees a syntax error; it carries the
    construct's name, the privframe way to say it and the token to blame.
    """

    def __init__(self, construct: str, hint: str, token: Token) -> None:
        super().__init__(f"{construct}: {hint}")
        self.construct = construct
        self.hint = hint
        self.token = token


# The clauses sqlglot builds even with nothing after their keyword, and what to write there.
_CLAUSES: dict[type[exp.Expr], tuple[str, str]] = {
    exp.Where: ("WHERE", "give a condition, e.g. WHERE age >= 18"),
    exp.Having: ("HAVING", "give a condition on released values, e.g. HAVING COUNT(*) > 10"),
    exp.Order: ("ORDER BY", "give the outputs to sort by, e.g. ORDER BY n DESC"),
    exp.Limit: ("LIMIT", "give the number of rows, e.g. LIMIT 10"),
    exp.Offset: ("OFFSET", "give the number of rows to skip, e.g. OFFSET 10"),
}

# Clause keywords: after AS, one of them is a missing alias, not an alias.
_CLAUSE_WORDS = (
    TokenType.FROM,
    TokenType.WHERE,
    TokenType.GROUP_BY,
    TokenType.ORDER_BY,
    TokenType.HAVING,
    TokenType.LIMIT,
    TokenType.OFFSET,
    TokenType.JOIN,
    TokenType.ON,
    TokenType.USING,
    TokenType.UNION,
    TokenType.SELECT,
)

# Nodes of operators (``+``, ``AND``, ``NOT``, ``BETWEEN ... AND``): with an operand missing,
# the operator just read is the one to blame.
_OPERATORS = (exp.Binary, exp.Unary, exp.Between)

# Tokens that start an expression and never a clause: after a complete select item, one of
# them means a comma is missing.
_ITEM_STARTS = (
    TokenType.VAR,
    TokenType.IDENTIFIER,
    TokenType.NUMBER,
    TokenType.STRING,
    TokenType.L_PAREN,
    TokenType.STAR,
    TokenType.CASE,
    TokenType.NULL,
    TokenType.TRUE,
    TokenType.FALSE,
)


def _written(node: exp.Expr, name: str) -> exp.Expr:
    node.meta[ORIGINAL_NAME] = name
    return node


def _bounds_given(rest: Sequence[exp.Expr]) -> tuple[exp.Expr, exp.Expr, str] | None:
    """(lower, upper, how) of the arguments after the value, or None if none are bounds."""
    if len(rest) == 2 and not any(isinstance(a, exp.Kwarg) for a in rest):
        return rest[0], rest[1], "bounds in the call"
    if len(rest) == 1 and isinstance(rest[0], exp.Kwarg):
        name, value = rest[0].this.name.casefold(), rest[0].expression
        pair = isinstance(value, exp.Tuple) and len(value.expressions) == 2
        if name in BOUNDS_ARGUMENTS and pair:
            return value.expressions[0], value.expressions[1], name
    return None


def _bounded_builder(
    name: str, make: Callable[..., exp.Expr], quantile: bool = False
) -> Callable[[list[Any]], exp.Expr]:
    """A FUNCTIONS builder: ``name(x[, q][, bounds])`` into ``make(this=x[, expression=q])``.

    Extra arguments that are not bounds give an ``exp.Anonymous`` of
    ``name``, which the aggregate translation refuses with the accepted forms.
    """

    def build(args: list[Any]) -> exp.Expr:
        value, rest = (args[0] if args else None), list(args[1:])
        extra: dict[str, Any] = {}
        if quantile and rest:
            extra["expression"] = rest.pop(0)
        if not rest:
            return _written(make(this=value, **extra), name)
        given = _bounds_given(rest)
        if given is None or value is None:
            return _written(exp.Anonymous(this=name, expressions=args), name)
        lower, upper, how = given
        clamped = _written(Clamped(this=value, lower=lower, upper=upper), how)
        return _written(make(this=clamped, **extra), name)

    return build


def _count(**args: Any) -> exp.Count:
    return exp.Count(big_int=True, **args)


# SQL name -> the sqlglot node it makes, and whether a quantile comes second.
_BOUNDED: dict[str, tuple[Callable[..., exp.Expr], bool]] = {
    "COUNT": (_count, False),
    "SUM": (exp.Sum, False),
    "AVG": (exp.Avg, False),
    "VARIANCE": (exp.Variance, False),
    "VAR_SAMP": (exp.Variance, False),
    "VAR": (exp.Variance, False),
    "VAR_POP": (exp.VariancePop, False),
    "STDDEV": (exp.Stddev, False),
    "STDEV": (exp.Stddev, False),
    "STD": (exp.Stddev, False),
    "STDDEV_SAMP": (exp.StddevSamp, False),
    "STDDEV_POP": (exp.StddevPop, False),
    "PERCENTILE_CONT": (exp.PercentileCont, True),
    "APPROX_QUANTILES": (exp.ApproxQuantiles, True),
    "MIN": (exp.Min, False),  # the 0 quantile (privframe.api.sql.calls)
    "MAX": (exp.Max, False),  # the 1 quantile
}

# ZetaSQL's ANON_ functions: the plain aggregate they become, and whether a quantile comes second.
_ANON: dict[str, tuple[Callable[..., exp.Expr], bool]] = {
    **{
        f"ANON_{name}": _BOUNDED[name]
        for name in ("COUNT", "SUM", "AVG", "VAR_POP", "STDDEV_POP", "PERCENTILE_CONT")
    },
    "ANON_QUANTILES": (exp.ApproxQuantiles, True),
}

BOUNDED_FUNCTIONS = tuple(_BOUNDED)
"""The aggregates that take bounds in the call, ``SUM(x, 0, 10)``."""


def _anon_parser(name: str) -> Callable[[parser.Parser], exp.Expr]:
    make, quantile = _ANON[name]
    return lambda p: p.parse_clamped(name, make, quantile)  # type: ignore[attr-defined]


class Privframe(Dialect):
    """sqlglot's default dialect plus BigQuery/ZetaSQL DP syntax and SmartNoise's TOP.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.dialect import Privframe
        >>> sqlglot.parse_one("SELECT TOP 2 a FROM t", read=Privframe).args["limit"].sql()
        'LIMIT 2'
    """

    class Parser(parser.Parser):
        """The default parser with the hooks above."""

        FUNCTIONS: ClassVar[dict[str, Callable[..., Any]]] = {
            **parser.Parser.FUNCTIONS,
            **{n: _bounded_builder(n, make, q) for n, (make, q) in _BOUNDED.items()},
        }
        FUNCTION_PARSERS: ClassVar[dict[str, Callable[..., Any]]] = {
            **parser.Parser.FUNCTION_PARSERS,
            **{name: _anon_parser(name) for name in _ANON},
        }

        def parse_clamped(
            self, name: str, make: Callable[..., exp.Expr], quantile: bool
        ) -> exp.Expr:
            """``ANON_F(x [, q] [CLAMPED BETWEEN lower AND upper])``, after its ``(``."""
            this: exp.Expr | None = (
                exp.Star() if self._match(TokenType.STAR) else self._parse_assignment()
            )
            extra = {}
            if quantile:
                if not self._match(TokenType.COMMA):
                    raise MalformedError(
                        f"{name} takes a second argument",
                        f"give it after a comma: {name}(x, ... CLAMPED BETWEEN lower AND upper)",
                        self._curr or self._prev,
                    )
                extra["expression"] = self._parse_bitwise()
            if self._curr is not None and self._curr.token_type == TokenType.COMMA:
                raise DialectRefusalError(
                    f"{name} with more arguments",
                    f"{name}(x, ...) with bounds or an epsilon as arguments is Google's "
                    "PostgreSQL anon extension, which spends an epsilon per aggregate; "
                    "privframe spends one budget per query (rho=, or SELECT WITH "
                    "DIFFERENTIAL_PRIVACY OPTIONS(epsilon=..., delta=...)): write "
                    f"{name}(x CLAMPED BETWEEN lower AND upper) or "
                    f"{name.removeprefix('ANON_')}(x, lower, upper)",
                    self._curr,
                )
            if self._match_text_seq("CLAMPED", "BETWEEN"):
                lower = self._parse_bitwise()
                if not self._match(TokenType.AND):
                    raise MalformedError(
                        "CLAMPED BETWEEN's AND is missing",
                        "write CLAMPED BETWEEN lower AND upper",
                        self._curr or self._prev,
                    )
                upper = self._parse_bitwise()
                this = _written(
                    self.expression(Clamped(this=this, lower=lower, upper=upper)),
                    "CLAMPED BETWEEN",
                )
            return _written(self.expression(make(this=this, **extra)), name)

        def _parse_csv(
            self, parse_method: Callable[[], Any], sep: TokenType = TokenType.COMMA
        ) -> list[Any]:
            """A comma-separated list, refusing an empty item (``a, , b``, ``a,``)."""
            item = parse_method()
            items = [] if item is None else [item]
            while self._match(sep):
                separator = self._prev
                if item is None:
                    raise MalformedError(
                        f"nothing comes before {separator.text!r}",
                        "write the item before it, or remove it",
                        separator,
                    )
                if isinstance(item, exp.Expr):
                    self._add_comments(item)
                item = parse_method()
                if item is None:
                    raise MalformedError(
                        f"nothing follows {separator.text!r}",
                        "write the next item after it, or remove it (no list ends with "
                        f"{separator.text!r})",
                        separator,
                    )
                items.append(item)
            return items

        def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
            """The select list; empty, or with an item right after another (no comma), refused."""
            projections, exclude = super()._parse_projections()
            if not projections:
                raise MalformedError(
                    "the select list is empty",
                    "list what to release, e.g. SELECT COUNT(*) FROM data",
                    self._curr or self._prev,
                )
            curr = self._curr
            if projections and curr is not None and curr.token_type in _ITEM_STARTS:
                blamed = curr
                last = projections[-1]
                # ``region COUNT(*)``: COUNT was read as region's alias; the comma goes before it.
                if (
                    curr.token_type == TokenType.L_PAREN
                    and isinstance(last, exp.Alias)
                    and last.args["alias"].meta.get("start") == self._prev.start
                ):
                    blamed = self._prev
                raise MalformedError(
                    f"{blamed.text!r} follows a select item without a comma",
                    "a comma is expected between select items (or FROM after the last one)",
                    blamed,
                )
            return projections, exclude

        def _parse_from(
            self, joins: bool = False, skip_from_token: bool = False, consume_pipe: bool = False
        ) -> exp.From | None:
            """FROM; with no table after it, the error says so (sqlglot shows a raw token)."""
            keyword = self._curr
            try:
                return super()._parse_from(joins, skip_from_token, consume_pipe)
            except MalformedError:
                raise
            except ParseError as err:
                described = (err.errors or [{}])[0].get("description") or ""
                if not (
                    described.startswith("Expected table name")
                    and keyword is not None
                    and keyword.token_type == TokenType.FROM
                    and self._prev is keyword
                ):
                    raise
            raise MalformedError(
                "a table name is missing after FROM",
                "name the table to read, e.g. FROM data",
                keyword,
            )

        def _parse_join(self, *args: Any, **kwargs: Any) -> exp.Join | None:
            """A join; ``FROM data,`` (a comma and no table) is refused, not read as no join."""
            comma = self._curr if self._match(TokenType.COMMA, advance=False) else None
            join = super()._parse_join(*args, **kwargs)
            if join is None and comma is not None:
                raise MalformedError(
                    "a table name is missing after ','",
                    "name the table, or remove the comma",
                    comma,
                )
            return join

        def _parse_group(self, skip_group_by_token: bool = False) -> exp.Group | None:
            """GROUP BY; with nothing after it, refused (sqlglot reads it as no grouping)."""
            keyword = self._prev if skip_group_by_token else self._curr
            group = super()._parse_group(skip_group_by_token)
            parts = ("expressions", "grouping_sets", "cube", "rollup", "totals")
            if (
                group is not None
                and keyword is not None
                and not any(group.args.get(part) for part in parts)
                and group.args.get("all") is not True
            ):
                raise MalformedError(
                    "GROUP BY has nothing after it",
                    "give the columns to group by, or remove GROUP BY",
                    keyword,
                )
            return group

        def _parse_alias(self, this: exp.Expr | None, explicit: bool = False) -> exp.Expr | None:
            """An item's alias; AS with no name after it is refused (see :meth:`_named`)."""
            keyword, after = self._curr, self._next
            return self._named(keyword, after, super()._parse_alias(this, explicit))

        def _parse_table_alias(
            self, alias_tokens: Collection[TokenType] | None = None
        ) -> exp.TableAlias | None:
            """A table's alias; AS with no name after it is refused (see :meth:`_named`)."""
            keyword, after = self._curr, self._next
            return self._named(keyword, after, super()._parse_table_alias(alias_tokens))

        def _named(self, keyword: Token | None, after: Token | None, result: Any) -> Any:
            """``result``, unless ``keyword`` was an AS followed by no name or by a clause word.

            sqlglot skips ``FROM data AS`` and reads ``COUNT(*) AS FROM data`` as
            the alias FROM.
            """
            if keyword is None or keyword.token_type != TokenType.ALIAS:
                return result
            if after is None or self._prev is keyword or after.token_type in _CLAUSE_WORDS:
                raise MalformedError(
                    "AS has no name after it",
                    "write the name after AS (in double quotes to use a keyword as a name)",
                    keyword,
                )
            return result

        def _parse_paren(self) -> exp.Expr | None:
            """A parenthesized expression or tuple; ``()`` is refused."""
            start = self._curr
            result = super()._parse_paren()
            if isinstance(result, exp.Tuple) and not result.expressions and start is not None:
                raise MalformedError(
                    "the parentheses are empty", "write an expression inside them", start
                )
            return result

        def _parse_primary(self) -> exp.Expr | None:
            """A literal, name or parenthesized expression; two strings in a row are refused.

            sqlglot joins adjacent strings into CONCAT, so ``IN ('n' 's')``, a
            missing comma, would be reported as an unsupported CONCAT.
            """
            curr, after = self._curr, self._next
            if (
                curr is not None
                and after is not None
                and curr.token_type == TokenType.STRING
                and after.token_type == TokenType.STRING
            ):
                raise MalformedError(
                    "a string follows another without a comma",
                    "a comma is expected between a list's items (adjacent strings are not "
                    "joined: for one string, write it in one pair of quotes)",
                    after,
                )
            return super()._parse_primary()

        def _parse_between(self, this: exp.Expr | None) -> exp.Between:
            """``x BETWEEN [SYMMETRIC] low AND high``, after BETWEEN; each part is required.

            sqlglot reads ``BETWEEN 1 3`` as if the AND were there and blames
            the ``3`` of ``BETWEEN AND 3``; here a missing part is named, at
            the token where it is missing.
            """
            if isinstance(this, exp.Is | exp.NullSafeEQ | exp.NullSafeNEQ):
                this = exp.Paren(this=this)  # as sqlglot: BETWEEN may become comparisons
            symmetric = None
            if self._match_text_seq("SYMMETRIC"):
                symmetric = True
            elif self._match_text_seq("ASYMMETRIC"):
                symmetric = False
            hint = "write BETWEEN lower AND upper, e.g. BETWEEN 18 AND 65"
            low = self._parse_bitwise()
            if low is None:
                raise MalformedError(
                    "BETWEEN's lower bound is missing", hint, self._curr or self._prev
                )
            if not self._match(TokenType.AND):
                raise MalformedError("BETWEEN's AND is missing", hint, self._curr or self._prev)
            high = self._parse_bitwise()
            if high is None:
                raise MalformedError("BETWEEN's upper bound is missing", hint, self._prev)
            return self.expression(exp.Between(this=this, low=low, high=high, symmetric=symmetric))

        def _parse_function_call(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
            """A function call, which keeps the name it was written with and its position.

            sqlglot names a node by its canonical function (``STRING_AGG`` is
            ``GROUP_CONCAT``) and locates only some: the name as written goes in
            ``meta[ORIGINAL_NAME]``, and the name's token is the call's position.
            """
            token = self._curr
            try:
                result = super()._parse_function_call(*args, **kwargs)
            except MalformedError as err:
                if not err.call or token is None:
                    raise
                raise MalformedError(err.problem, err.hint, token) from None
            call = result
            while isinstance(call, exp.Window | exp.WithinGroup | exp.Filter):
                call = call.this
            if isinstance(call, exp.Func) and token is not None:
                call.meta.setdefault(ORIGINAL_NAME, token.text.upper())
                if "line" not in call.meta:
                    call.update_positions(token)
                if isinstance(call, exp.Count) and call.this is None:
                    raise MalformedError(
                        f"{token.text}() has no argument",
                        "COUNT(*) counts rows; COUNT(x) counts the rows where x is not NULL",
                        token,
                    )
            return result

        def validate_expression(self, expression: Any, args: list[Any] | None = None) -> Any:
            """The parser's check, with located messages; no argument count for bounds.

            ``SUM(x, 0, 10)`` has three arguments where ``exp.Sum`` takes one;
            the builder above has already folded them into :class:`Clamped`.
            A clause with nothing after its keyword, ``IN ()`` and a function
            with arguments it does not take are refused in words, at their
            keyword (a function's own name is filled in by the call).
            """
            if isinstance(expression.args.get("this"), Clamped):
                args = None
            kind = type(expression)
            problems = expression.error_messages(args)
            if kind in _CLAUSES and problems:
                keyword, hint = _CLAUSES[kind]
                raise MalformedError(
                    f"{keyword} has nothing after it", f"{hint}, or remove {keyword}", self._prev
                )
            if problems and isinstance(expression, exp.If):
                raise MalformedError(
                    "a WHEN of CASE is incomplete",
                    "write CASE WHEN condition THEN value [ELSE value] END",
                    self._prev,
                )
            if problems and isinstance(expression, _OPERATORS):
                raise MalformedError(
                    f"{self._prev.text!r} has no operand after it",
                    "complete the expression, or remove the operator",
                    self._prev,
                )
            if isinstance(expression, exp.In) and not any(
                expression.args.get(part) for part in ("expressions", "query", "unnest", "field")
            ):
                raise MalformedError(
                    "IN () lists no values", "list one or more, e.g. IN ('a', 'b')", self._prev
                )
            if problems and isinstance(expression, exp.Func):
                name = expression.meta.get(ORIGINAL_NAME) or expression.sql_name()
                too_many = any("greater than the maximum" in p for p in problems)
                raise MalformedError(
                    f"{name} is given {'too many arguments' if too_many else 'too few arguments'}",
                    "see the functions and their arguments in docs/sql.md",
                    self._prev,
                    call=True,
                )
            if problems:  # sqlglot's words name its classes ("Required keyword ... <class")
                raise MalformedError(
                    f"{self._prev.text!r} is incomplete",
                    "something it needs is missing after it: complete it, or remove it",
                    self._prev,
                )
            return super().validate_expression(expression, args)

        def expression(
            self, instance: Any, token: Token | None = None, comments: list[str] | None = None
        ) -> Any:
            """A node; ``SELECT DISTINCT``'s is located at its keyword (sqlglot leaves it bare)."""
            previous = self._prev
            if (
                token is None
                and isinstance(instance, exp.Distinct)
                and previous is not None
                and previous.token_type == TokenType.DISTINCT
            ):
                token = previous
            return super().expression(instance, token, comments)

        def _parse_hint(self) -> exp.Hint | None:
            """After SELECT: ZetaSQL's ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)``, else a hint."""
            word = self._next.text.upper() if self._next else ""
            if not (self._curr and self._curr.token_type == TokenType.WITH):
                return super()._parse_hint()
            if word not in PRIVACY_CLAUSES:
                return super()._parse_hint()
            start = self._curr
            self._advance(2)
            options = (
                self._parse_wrapped_csv(self._parse_assignment)
                if self._match_text_seq("OPTIONS")
                else []
            )
            clause = PrivacyClause(this=word, expressions=options)
            clause.meta.update(line=start.line, col=start.col, start=start.start, end=start.end)
            return clause

        def _parse_limit(
            self,
            this: exp.Expr | None = None,
            top: bool = False,
            skip_limit_token: bool = False,
        ) -> exp.Expr | None:
            """SmartNoise's ``SELECT TOP n`` (TOP is no keyword here, so ``top`` stays a name)."""
            curr, after = self._curr, self._next
            if (
                top
                and curr is not None
                and after is not None
                and curr.token_type == TokenType.VAR
                and curr.text.upper() == "TOP"
                and after.token_type in (TokenType.NUMBER, TokenType.L_PAREN)
            ):
                self._advance()
                return super()._parse_limit(this, top=True, skip_limit_token=True)
            return super()._parse_limit(this, top=top, skip_limit_token=skip_limit_token)

        def _parse_query_modifiers(self, this: Any) -> Any:
            """The modifiers; a LIMIT after TOP is refused (sqlglot would stop at it)."""
            this = super()._parse_query_modifiers(this)
            limit = this.args.get("limit") if isinstance(this, exp.Select) else None
            curr = self._curr
            if (
                limit is not None
                and limit.meta.get("top")
                and curr is not None
                and curr.token_type in (TokenType.LIMIT, TokenType.FETCH)
            ):
                raise DialectRefusalError(
                    f"SELECT TOP {limit.expression.sql()} together with {curr.text.upper()}",
                    "TOP n (SmartNoise, T-SQL) is LIMIT n: write one of them",
                    curr,
                )
            return this
