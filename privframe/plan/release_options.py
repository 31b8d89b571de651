"""A release's options as one immutable value, passed along by every front end.

``query.release(rho, with_error=True, label="monthly")``, ``sess.sql(text,
rho=..., total=True)``, a report's query table and a request on the wire all
end in one :class:`ReleaseOptions`: the builder and SQL make it from their
keywords, reports from their spec, the server from the wire form
(:mod:`privframe.api.wire.request`), and the release pipeline reads it.

A new option is a field of :class:`ReleaseOptions` (with its check in
``__post_init__``) and its line in :class:`ReleaseKeywords`, the same names
typed for ``**keywords``: the release calls' signatures, their refusals of
an unknown keyword (which list every option) and the wire form follow from
the fields (:data:`takes_release_options`; ``tests/api/test_release_options.py``
checks that the two declarations agree).

Example:
    >>> from privframe.plan.release_options import ReleaseOptions
    >>> options = ReleaseOptions(with_error=True, label="monthly")
    >>> options.label, options.post
    ('monthly', PostProcessing(clamp=True, intervals=False, total=False))
    >>> options.given()
    ('with_error', 'label')
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ParamSpec, TypedDict, TypeVar

from privframe._arguments import spread_keywords
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import Number
from privframe.plan.ir import Plan
from privframe.plan.postprocess import PostProcessing
from privframe.plan.split import Balance

__all__ = ["ReleaseKeywords", "ReleaseOptions", "takes_release_options"]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class ReleaseOptions:
    """How one release is run, apart from its budget ``rho``; every field has a default.

    The fields are the keywords of :meth:`Query.release
    <privframe.api.query.Query.release>`, documented there: ``with_error``,
    ``weights``, ``label``, ``delta``, ``clamp``, ``intervals`` and ``total``.
    A mapping of ``weights`` is kept as a read-only copy, so the caller's dict
    can change afterwards without changing the options.
    Built from a call's keywords, a value of the wrong type is refused here,
    before anything is planned; what depends on the query (a ``total`` needs a
    ``group_by``, a ``delta`` a private group choice) is checked by
    :meth:`post_for` and the planner.

    Example:
        >>> from privframe.plan.release_options import ReleaseOptions
        >>> ReleaseOptions(total=True).post.total
        True
        >>> try:
        ...     ReleaseOptions(clamp="yes")
        ... except TypeError as err:
        ...     print(err)
        clamp must be True or False, not a value of type str
    """

    with_error: bool = False
    weights: Mapping[str, float] | Balance | None = None
    label: str = ""
    delta: Number | None = None
    clamp: bool = True
    intervals: bool = False
    total: bool = False

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            # A bool option given 1 or "yes" would pass as truthy; say so instead. The
            # message names the type only: a value may have been read from the data.
            if isinstance(field.default, bool) and not isinstance(value, bool):
                raise InvalidArgumentError(
                    f"{field.name} must be True or False, not a value of type "
                    f"{type(value).__name__}"
                )
        if not isinstance(self.label, str):
            raise InvalidArgumentError(
                f"label must be a str, not a value of type {type(self.label).__name__}"
            )
        if isinstance(self.weights, Mapping):
            # A read-only copy: the caller's dict, changed after request(), must not change
            # a request already made (nor its plan or ledger label).
            object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    @property
    def post(self) -> PostProcessing:
        """The post-processing the options ask for (clamp, intervals, total)."""
        return PostProcessing(self.clamp, self.intervals, self.total)

    @property
    def computes_errors(self) -> bool:
        """Whether the release computes error columns: asked, or needed for intervals."""
        return self.with_error or self.intervals

    def post_for(self, plan: Plan) -> PostProcessing:
        """The post-processing, refused if it does not fit ``plan`` (a total needs groups).

        Example:
            >>> from privframe.plan.ir import Plan
            >>> from privframe.plan.release_options import ReleaseOptions
            >>> ReleaseOptions(total=True).post_for(Plan(group_by=("r",))).total
            True
        """
        if self.total and not plan.group_by:
            raise InvalidValueError(
                "total=True adds a row for all groups together, and this query has no "
                "group_by: its one row is the total already"
            )
        return self.post

    def given(self) -> tuple[str, ...]:
        """The names of the options that differ from their defaults, in field order."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default)

    @classmethod
    def parameters(cls) -> tuple[inspect.Parameter, ...]:
        """The fields as keyword-only parameters, with their defaults and types.

        Example:
            >>> from privframe.plan.release_options import ReleaseOptions
            >>> [(p.name, p.default) for p in ReleaseOptions.parameters()][:3]
            [('with_error', False), ('weights', None), ('label', '')]
        """
        return tuple(
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
            )
            for f in dataclasses.fields(cls)
        )


class ReleaseKeywords(TypedDict, total=False):
    """The fields of :class:`ReleaseOptions`, for typing a release call's ``**keywords``."""

    with_error: bool
    weights: Mapping[str, float] | Balance | None
    label: str
    delta: Number | None
    clamp: bool
    intervals: bool
    total: bool


def takes_release_options(func: Callable[P, R]) -> Callable[P, R]:
    """Show ``func``'s ``**keywords`` as the :class:`ReleaseOptions` fields, one by one.

    Put under :func:`~privframe._arguments.hinted`, so that a keyword that is
    no option is refused with the list of every option (``help`` and
    ``inspect.signature`` show them too).

    Example:
        >>> import inspect
        >>> from privframe.plan.release_options import takes_release_options
        >>> @takes_release_options
        ... def release(rho: float, **keywords: object) -> None: ...
        >>> list(inspect.signature(release).parameters)[:3]
        ['rho', 'with_error', 'weights']
    """
    return spread_keywords(ReleaseOptions.parameters())(func)
