"""Progress of long work: a bar in a terminal, log events otherwise, and steps only.

A release over file partitions or on a cluster, and a long report, take
minutes. :func:`steps` shows how far along such work is, as users of polars,
Spark and dask expect: in a terminal (stderr is a TTY) a tqdm bar on stderr
(``partitions: 50%|█████     | 2/4 [...]``); anywhere else, as in a scheduled
job, one INFO record per step on the logger ``privframe.progress``
(``partitions: step 2 of 4``), which the job's logging configuration shows or
drops. That is tqdm's own automatic choice (``disable=None``: no bar off a
terminal), with log events instead of silence.

**Privacy rule: steps only.** The total and the steps must be public: a
partition count the user chose, a report's number of queries. Never pass a
count that depends on the data (rows, privacy units, observed keys, the
partitions that turned out non-empty): a bar or a log line is output too,
and a count read from it would be released without noise. The label is
fixed text in the code, never a data value.

A total of 1 or less shows nothing: one step says nothing about how far
along the work is, and a bar that jumps from 0 to done is only noise.
``advance`` may still be called.

Turning it off, in the order they win:

* :func:`disabled` turns it off inside its block (in the thread or task that
  runs the block): ``privframe report --no-progress`` runs in one.
* :func:`set_enabled`: ``False`` off, ``True`` on whatever the environment
  says, ``None`` automatic (the default).
* When automatic, the environment variable ``PRIVFRAME_PROGRESS=0`` (or
  ``off``, ``false``, any case) turns it off; it is read at each
  :func:`steps`, so a job's environment decides.
* ``TQDM_DISABLE`` (any non-empty value, tqdm's own switch) turns the bar off
  as it turns off tqdm's; the steps then go to the log as off a terminal.

Example:
    Off a terminal (stderr here is a buffer), each step is a log record:

    >>> import io, logging, sys
    >>> from contextlib import redirect_stderr
    >>> import privframe as pf
    >>> log = logging.getLogger("privframe.progress")
    >>> log.addHandler(shown := logging.StreamHandler(sys.stdout))
    >>> log.setLevel(logging.INFO)
    >>> with redirect_stderr(io.StringIO()), pf.progress.steps("partitions", 3) as advance:
    ...     for partition in range(3):
    ...         advance()  # after each partition's work
    partitions: step 1 of 3
    partitions: step 2 of 3
    partitions: step 3 of 3
    >>> with redirect_stderr(io.StringIO()), pf.progress.disabled():
    ...     with pf.progress.steps("partitions", 3) as advance:
    ...         advance()
    >>> log.removeHandler(shown)
    >>> log.setLevel(logging.NOTSET)
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TextIO

# tqdm ships no type information (its stubs are a separate package).
from tqdm import tqdm  # type: ignore[import-untyped]

from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = ["disabled", "set_enabled", "steps"]

_logger = logging.getLogger(__name__)
_VARIABLE = "PRIVFRAME_PROGRESS"
_OFF = frozenset({"0", "off", "false"})

# set_enabled's choice holds for the whole process; disabled() only in its own context.
_chosen: bool | None = None
_held_off: ContextVar[bool] = ContextVar("privframe_progress_held_off", default=False)


def set_enabled(enabled: bool | None) -> None:
    """Turn progress on (``True``), off (``False``) or back to automatic (``None``).

    Automatic, the default: a bar when stderr is a terminal, log events
    otherwise, nothing when ``PRIVFRAME_PROGRESS`` is ``0``, ``off`` or
    ``false``. ``True`` shows progress whatever that variable says (still a
    bar only in a terminal). Holds for the whole process, every thread.

    Raises:
        InvalidArgumentError: ``enabled`` is not True, False or None.

    Example:
        >>> import privframe as pf
        >>> pf.progress.set_enabled(False)  # nothing from here on
        >>> pf.progress.set_enabled(None)  # automatic again
    """
    global _chosen
    if enabled is not None and not isinstance(enabled, bool):
        raise InvalidArgumentError(
            "progress.set_enabled takes True (on), False (off) or None (automatic)"
        )
    _chosen = enabled


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Turn progress off inside the block, whatever :func:`set_enabled` chose.

    It holds in the thread (or asyncio task) that runs the block; other
    threads keep theirs.

    Example:
        >>> import privframe as pf
        >>> with pf.progress.disabled():
        ...     with pf.progress.steps("partitions", 4) as advance:
        ...         for partition in range(4):
        ...             advance()  # shows nothing
    """
    token = _held_off.set(True)
    try:
        yield
    finally:
        _held_off.reset(token)


@contextlib.contextmanager
def steps(label: str, total: int) -> Iterator[Callable[[], None]]:
    """Show the progress of ``total`` steps; call the ``advance`` it yields after each one.

    In a terminal, a tqdm bar on stderr (``label: i/n``), drawn at every
    step and closed when the block ends, also on an exception, which
    propagates unchanged: the outermost bar is left showing where the work
    got to and nested ones are cleared, as tqdm's ``leave=None`` does.
    Otherwise one INFO record per step on ``privframe.progress``
    (``label: step i of n``). Nothing when turned off or when ``total`` is 1
    or less (see the module docstring).

    ``label`` and ``total`` must be public: fixed text, and a count the user
    chose (partitions, queries), never one that depends on the data.

    Raises:
        InvalidArgumentError: ``label`` is not a string or ``total`` not a whole number.
        InvalidValueError: ``total`` is negative.

    Example:
        >>> import privframe as pf
        >>> with pf.progress.disabled(), pf.progress.steps("queries", 2) as advance:
        ...     for query in ("by_region", "months"):
        ...         advance()
    """
    if not isinstance(label, str) or isinstance(total, bool) or not isinstance(total, int):
        raise InvalidArgumentError(
            "progress.steps takes a label (str) and a total number of steps (int)"
        )
    if total < 0:
        raise InvalidValueError("progress.steps needs a total of 0 steps or more")
    stream = sys.stderr
    if total <= 1 or not _enabled():
        yield _nothing
    elif _is_terminal(stream) and not os.environ.get("TQDM_DISABLE"):
        # Steps are few and slow: draw every one (tqdm would skip those within 0.1 s).
        with tqdm(
            desc=label, total=total, file=stream, leave=None, mininterval=0, miniters=1
        ) as bar:
            yield lambda: bar.update()
    else:
        done = itertools.count(1)
        yield lambda: _logger.info("%s: step %d of %d", label, next(done), total)


def _enabled() -> bool:
    """Whether progress is on: :func:`disabled`, then :func:`set_enabled`, then the environment."""
    if _held_off.get():
        return False
    if _chosen is not None:
        return _chosen
    return os.environ.get(_VARIABLE, "").strip().lower() not in _OFF


def _is_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal (``sys.stderr`` may be None, or a buffer, or closed)."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _nothing() -> None:
    """The ``advance`` of progress that shows nothing."""
