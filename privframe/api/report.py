"""Scripted reports: a TOML spec of queries, checked as a whole, then released to files and HTML.

A report runs in two phases. :func:`prepare` reads the spec, opens the
session on the data and its ledger, builds every query and explains it at
its ρ: a spec that does not validate or a query that does not plan raises
:class:`SpecError`, and a report whose total cost does not fit what the
ledger has left raises :class:`~privframe.errors.BudgetExceededError`, both
before anything is spent. :meth:`Report.run` then releases the queries in
order, writing ``<out>/<name>.csv`` after each, and ``<out>/report.html`` at
the end; if a release fails midway it raises :class:`ReportError`, which
names exactly the queries charged to the ledger. A spec may also hold
``[[marginals]]`` and ``[[synthetic]]`` entries, each one call of
``Session.marginals`` or ``Session.synthesize``, checked and counted in the
budget with the queries and charged in its own ledger entry before them.
``docs/reports.md`` describes the spec format; ``privframe report`` is the
command line.

This module is the door: the spec is read in :mod:`~privframe.api.report_spec`,
run in :mod:`~privframe.api.report_run` and written in
:mod:`~privframe.api.report_output`; here are the command's exit codes.

Example:
    >>> from privframe.api.report import ExitCode, load_spec, prepare
    >>> int(ExitCode.INVALID), callable(load_spec), callable(prepare)
    (2, True, True)
"""

from __future__ import annotations

import enum

from privframe.api.report_output import NOT_PRIVATE
from privframe.api.report_run import Planned, Report, ReportError, describe_error, prepare
from privframe.api.report_spec import QuerySpec, ReportSpec, SpecError, load_spec

__all__ = [
    "NOT_PRIVATE",
    "ExitCode",
    "Planned",
    "QuerySpec",
    "Report",
    "ReportError",
    "ReportSpec",
    "SpecError",
    "describe_error",
    "load_spec",
    "prepare",
]


class ExitCode(enum.IntEnum):
    """The exit status of ``privframe report``: what a scheduler can rely on.

    Example:
        >>> from privframe.api.report import ExitCode
        >>> int(ExitCode.OVER_BUDGET), ExitCode.OVER_BUDGET.meaning.split(": ")[1]
        (3, 'nothing was spent')
    """

    OK = 0
    UNEXPECTED = 1
    INVALID = 2
    OVER_BUDGET = 3
    FAILED_MIDWAY = 4

    @property
    def meaning(self) -> str:
        """What this status tells, for ``--help`` and the docs."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "the report ran: every entry was released and written, with report.html",
    ExitCode.UNEXPECTED: "an unexpected error before any release: nothing was spent",
    ExitCode.INVALID: ("the spec is invalid, or a query does not parse or plan: nothing was spent"),
    ExitCode.OVER_BUDGET: (
        "the report does not fit the budget left in the ledger: nothing was spent"
    ),
    ExitCode.FAILED_MIDWAY: (
        "the run failed or was interrupted after the checks: while computing (nothing was "
        "charged), while releasing (the message names each entry charged) or while writing "
        "after the charge (every entry was charged); the message says which (each ledger "
        "entry is labelled <title>/<entry name>)"
    ),
}
