"""Wrong arguments to a public call, refused with what to pass instead.

Plain Python answers ``query.release(epsilon=1)`` or ``pf.sum("amount")`` with
a bare TypeError about the signature. :func:`hinted` checks a call's arguments
against the signature before the function runs and raises
:class:`~privframe.errors.InvalidArgumentError` (a PrivframeError and a
TypeError) that names the call, the argument at fault, what the call takes,
and a hint written for that argument. Messages hold argument names only,
never the values passed, which may come from the data.

Example:
    >>> from privframe._arguments import RHO_HINTS, hinted
    >>> @hinted(**RHO_HINTS)
    ... def spend(rho: float) -> float:
    ...     return rho
    >>> spend(rho=0.5)
    0.5
    >>> try:
    ...     spend(epsilon=1.0)
    ... except TypeError as err:
    ...     print(str(err).split(". ")[0])
    spend() got an argument it does not take: 'epsilon'
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import ParamSpec, TypeVar

from privframe.errors import InvalidArgumentError

__all__ = ["BUDGET_HINTS", "RELEASE_HINTS", "RHO_HINTS", "hinted", "spread_keywords"]

P = ParamSpec("P")
R = TypeVar("R")

_EPSILON = (
    "a zCDP session's release spends a zCDP rho, not epsilon: pass rho=..., e.g. rho=0.1. To "
    "spend epsilon, open the Session with budget=pf.PureDP(epsilon=...) or "
    "budget=pf.ApproxDP(epsilon=..., delta=...); pf.zCDP.from_approx_dp(epsilon, delta).rho "
    "converts one (epsilon, delta) target to rho"
)
RHO_HINTS: Mapping[str, str] = {
    "rho": (
        "pass rho=...: the zCDP budget to spend (release) or to plan for (explain), e.g. "
        "rho=0.1; sess.remaining shows what is left"
    ),
    "epsilon": _EPSILON,
    "eps": _EPSILON,
}
"""The hints of a call that takes a zCDP ``rho``: for a missing ``rho`` and a given ``epsilon``."""

RELEASE_HINTS: Mapping[str, str] = {
    "eps": ("pass epsilon=... in a pure-DP or (epsilon, delta) session, or rho=... in a zCDP one"),
    "budget": (
        "a release takes its own share: rho=... in a zCDP session, epsilon=... (and delta=...) "
        "in a pure-DP or (epsilon, delta) one"
    ),
}
"""The hints of a release call, which takes ``rho`` or ``epsilon`` by its session's budget."""

_ONE_BUDGET = (
    "the budget is one argument: budget=pf.zCDP(rho=...), budget=pf.ApproxDP(epsilon=..., "
    "delta=...) or budget=pf.GDP(mu=...)"
)
BUDGET_HINTS: Mapping[str, str] = {
    "budget": (
        "pass budget=...: the total privacy budget of this data, e.g. budget=pf.zCDP(rho=1.0)"
    ),
    **dict.fromkeys(("rho", "epsilon", "eps", "delta", "mu"), _ONE_BUDGET),
}
"""The hints of a call that takes a whole ``budget``: for a missing one, or one given in pieces."""

_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD
_NAMED = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def hinted(hint: str = "", **by_name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Refuse a call with wrong arguments as an InvalidArgumentError that says what to pass.

    The decorated function keeps its signature (for type checkers, ``help``
    and ``inspect``); a call that does not bind to it is refused before the
    function runs.

    Args:
        hint: added to the message of any argument error of this call.
        **by_name: per argument name, a hint shown when that argument is
            missing or, for a name the call does not take (``epsilon`` for a
            call that takes ``rho``), when it is passed.

    Example:
        >>> from privframe._arguments import hinted
        >>> @hinted(hint="use .alias(...)")
        ... def agg(*aggregates: str) -> tuple[str, ...]:
        ...     return aggregates
        >>> try:
        ...     agg(total="count")
        ... except TypeError as err:
        ...     print(err)
        agg() got an argument it does not take: 'total'. use .alias(...). agg() takes: *aggregates.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                signature.bind(*args, **kwargs)
            except TypeError as err:
                problem = str(err)
            else:
                return func(*args, **kwargs)
            # Raised outside the except block: the TypeError is not chained to it.
            raise InvalidArgumentError(
                _message(func, signature, args, kwargs, problem, hint, by_name)
            )

        return checked

    return decorate


def spread_keywords(
    parameters: Sequence[inspect.Parameter],
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Show a function's ``**keywords`` as the keyword-only ``parameters`` it takes.

    A call whose options come from one value (its fields) takes them as
    ``**keywords``, typed for checkers with a TypedDict; this gives the
    function the signature a user reads, with each option by name and default,
    so that :func:`hinted` above it refuses any other keyword and lists them
    all, and ``help`` and ``inspect.signature`` show them.

    Example:
        >>> import inspect
        >>> from privframe._arguments import hinted, spread_keywords
        >>> shown = [inspect.Parameter("label", inspect.Parameter.KEYWORD_ONLY, default="")]
        >>> @hinted()
        ... @spread_keywords(shown)
        ... def release(rho: float, **keywords: str) -> dict[str, str]:
        ...     return keywords
        >>> release(0.5, label="n")
        {'label': 'n'}
        >>> try:
        ...     release(0.5, lable="n")
        ... except TypeError as err:
        ...     print(str(err).split(". ", 1)[1])
        did you mean label=...? release() takes: rho, label=.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(func)
        kept = [p for p in signature.parameters.values() if p.kind is not _VAR_KEYWORD]
        if len(kept) == len(signature.parameters):
            raise TypeError(f"{func.__qualname__} has no **keywords to spread")
        func.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*kept, *parameters]
        )
        return func

    return decorate


def _message(
    func: Callable[..., object],
    signature: inspect.Signature,
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    problem: str,
    hint: str,
    by_name: Mapping[str, str],
) -> str:
    """What was wrong with the call, the hints that apply, and what the call takes."""
    call = _caller(func, args)
    params = signature.parameters
    named = {n: p for n, p in params.items() if p.kind in _NAMED}
    any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keywords = [n for n, p in named.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY]
    unknown = [] if any_keyword else [k for k in kwargs if k not in keywords]
    missing = _missing(signature, args, {k: v for k, v in kwargs.items() if k not in unknown})
    sentences = []
    if unknown:
        listed = ", ".join(repr(k) for k in unknown)
        sentences.append(f"{call} got an argument it does not take: {listed}")
        for name in unknown:
            close = difflib.get_close_matches(name, keywords, n=1)
            if name in by_name:
                sentences.append(by_name[name])
            elif close:
                sentences.append(f"did you mean {close[0]}=...?")
    if missing:
        listed = ", ".join(repr(m) for m in missing)
        plural = "s" if len(missing) > 1 else ""
        sentences.append(f"{call} is missing the argument{plural} {listed}")
        # A hint for a wrong name (epsilon) already says what to pass in its place.
        if not any(name in by_name for name in unknown):
            sentences.extend(by_name[m] for m in missing if m in by_name)
    if not unknown and not missing:
        # Too many positional arguments, or one given twice: Python's words name no value.
        sentences.append(f"{call}: {problem}")
    if hint:
        sentences.append(hint)
    sentences.append(f"{call} takes: {_accepted(params)}")
    return " ".join(s if s.endswith(("?", ".")) else f"{s}." for s in sentences)


def _caller(func: Callable[..., object], args: tuple[object, ...]) -> str:
    """How a message names the call, as the user wrote it.

    ``Session()``, not ``Session.__init__()``; and a method a class inherits
    from a shared base by the caller's class (``RemoteSession.sql()``, not
    ``SQLEntry.sql()``).
    """
    owner, _, name = func.__qualname__.rpartition(".")
    if args and owner in {base.__qualname__ for base in type(args[0]).__mro__[1:]}:
        owner = type(args[0]).__qualname__
    if name == "__init__":
        return f"{owner}()"
    return f"{owner}.{name}()" if owner else f"{name}()"


def _missing(
    signature: inspect.Signature, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> list[str]:
    """The required parameters that neither ``args`` nor ``kwargs`` supply."""
    try:
        given = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return []
    return [
        name
        for name, p in signature.parameters.items()
        if p.kind in _NAMED and p.default is inspect.Parameter.empty and name not in given
    ]


def _accepted(params: Mapping[str, inspect.Parameter]) -> str:
    """The parameters as a user passes them: ``rho, with_error=, *aggregates``."""
    shown = []
    for name, p in params.items():
        if name in ("self", "cls"):
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            shown.append(f"*{name}")
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            shown.append(f"**{name}")
        elif p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.KEYWORD_ONLY:
            shown.append(name)
        else:
            shown.append(f"{name}=")
    return ", ".join(shown) or "no arguments"
