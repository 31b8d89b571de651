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


class SeededRandomnessWarning(UserWarning):
    """A release used a seeded (reproducible, non-secret) random stream.

    Seeded streams exist for tests and demos; their output is not private.
    """
