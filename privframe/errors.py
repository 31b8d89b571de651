"""The one exception hierarchy of privframe.

Every error privframe raises on purpose derives from :class:`PrivframeError`, so
callers can catch the library's refusals without catching programming bugs.
Messages name the offending parameter and say what to do instead; they never
carry private data values.

Example:
    >>> import privframe as pf
    >>> try:
    ...     pf.zCDP(-1.0)
    ... except pf.PrivframeError as err:
    ...     print(type(err).__name__)
    InvalidBudgetError
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterable, Sequence


class PrivframeError(Exception):
    """Base class of every error privframe raises deliberately."""


class InvalidArgumentError(PrivframeError, TypeError):
    """An argument has the wrong type (a string where a number belongs, and so on)."""


class InvalidValueError(PrivframeError, ValueError):
    """An argument or a data value is outside what the operation accepts (NaN, negative, huge)."""


class InvalidBudgetError(InvalidValueError):
    """A budget or privacy parameter is malformed (negative, NaN, inf)."""


class BudgetExceededError(PrivframeError):
    """A spend would take the accountant past its budget; nothing was spent or released."""


class CalibrationError(InvalidValueError):
    """A noise calibration was asked outside the range where its formula is proven."""


class LedgerError(PrivframeError):
    """A persisted ledger is missing, corrupted, foreign, or opened with a larger budget."""


class ServerError(PrivframeError):
    """A privframe server refused a request for a reason of its own, or could not be reached.

    Refusals that a local Session would give (a bad argument, a budget
    exceeded, ...) come back from a server as those errors; this one is for
    the rest: no valid token (401), a dataset not granted (404), a body too
    large (413), the server unreachable or failing. Nothing was charged.

    Attributes:
        status: the HTTP status, or None when no answer came.

    Example:
        >>> from privframe.errors import ServerError
        >>> ServerError("a valid bearer token is required", status=401).status
        401
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SQLError(InvalidValueError):
    """A SQL query privframe cannot release: a syntax error or an unsupported construct.

    Attributes:
        construct: the construct refused (e.g. ``"WINDOW"``, ``"the function LAG"``).
        position: (line, column) in the SQL text, when known.

    Example:
        >>> from privframe.errors import SQLError
        >>> SQLError("WINDOW is not supported", construct="WINDOW", position=(1, 30)).position
        (1, 30)
    """

    def __init__(
        self, message: str, *, construct: str = "", position: tuple[int, int] | None = None
    ) -> None:
        super().__init__(message)
        self.construct = construct
        self.position = position


class PrivframeWarning(UserWarning):
    """Base of every warning privframe gives, so one filter can select them all.

    Example:
        >>> import warnings
        >>> from privframe.errors import PrivframeWarning, SeededRandomnessWarning
        >>> issubclass(SeededRandomnessWarning, PrivframeWarning)
        True
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always", PrivframeWarning)
        ...     warnings.warn("seeded", SeededRandomnessWarning)
        >>> [w.category.__name__ for w in caught]
        ['SeededRandomnessWarning']
    """


class SeededRandomnessWarning(PrivframeWarning):
    """A release used a seeded (reproducible, non-secret) random stream.

    Seeded streams exist for tests and demos; their output is not private.
    """


class ExcessiveNoiseWarning(PrivframeWarning):
    """A release's noise is so large that its outputs are noise at any plausible data size.

    Given before anything is charged; turned into an error
    (``warnings.simplefilter("error", pf.ExcessiveNoiseWarning)``) it stops
    the release with nothing spent. See
    :data:`privframe.plan.planner.NOISE_FLOOR_RHO`.
    """


def _in_privframe(module: str) -> bool:
    return module == "privframe" or module.startswith("privframe.")


def warn_caller(message: str, category: type[Warning]) -> None:
    """Warn, attributed to the first frame outside privframe: the user's line that asked.

    Example:
        >>> import warnings
        >>> from privframe.errors import PrivframeWarning, warn_caller
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_caller("look", PrivframeWarning)
        >>> "privframe" in caught[0].filename  # this example runs as privframe.errors
        False
    """
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and _in_privframe(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# A header names each column once, in words; a row of data holds numbers, empty fields
# and repeated values (polars renames a repeated name ``name_duplicated_0``).
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_REPEATED = re.compile(r"_duplicated_\d+$")

NAMES_WITHHELD = (
    "the column names look like data values (one is a number, empty or repeated), as a "
    "CSV's first row does when the file has no header row, so they are not listed: they "
    "may be private values. If the file has no header row, add one: privframe reads the "
    "first row as the column names and treats them as public"
)
"""What an error says instead of the column names when :func:`names_look_like_data`."""


def names_look_like_data(names: Iterable[str]) -> bool:
    """Whether column names look like a row of data, as a CSV without a header row gives.

    A CSV's first row becomes the column names. Without a header row they are
    private values, and errors that list or suggest the columns would show
    them. The rule, from the names alone: they look like data when one of them
    is a number (``42``, ``-1.5``, ``3e8``), is empty, repeats another (polars
    renames a repeat ``name_duplicated_0``) or holds an unprintable character
    (a binary file read as text). A header of years (``2023``, ``2024``) is
    taken for data, which only means that errors do not list it; a first row
    of words only (``north,alice``) cannot be told from a header.

    Example:
        >>> from privframe.errors import names_look_like_data
        >>> names_look_like_data(["user_id", "amount"]), names_look_like_data(["17", "north"])
        (False, True)
    """
    return any(
        not name.strip()
        or not name.isprintable()
        or _NUMBER.fullmatch(name.strip())
        or _REPEATED.search(name)
        for name in names
    )


def columns_note(names: Sequence[str]) -> str:
    """The columns a "column not found" error lists, or why it does not list them.

    Example:
        >>> from privframe.errors import columns_note
        >>> columns_note(["user_id", "amount"])
        "columns: ['user_id', 'amount']"
        >>> columns_note(["1", "north"]).startswith("the column names look like data")
        True
    """
    if names_look_like_data(names):
        return NAMES_WITHHELD
    return f"columns: {list(names)}"
