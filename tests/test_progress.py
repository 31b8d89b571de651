"""``pf.progress``: a bar in a terminal, log records otherwise, steps only, and three ways off."""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

import privframe as pf
import privframe.progress

LOGGER = "privframe.progress"


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal and keeps what was drawn."""

    def isatty(self) -> bool:
        return True

    def last_drawn(self) -> str:
        """The bar as it stands: the text after the last carriage return."""
        return self.getvalue().rsplit("\r", 1)[-1]


@pytest.fixture(autouse=True)
def automatic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts automatic, whatever the environment of the run says."""
    for name in ("PRIVFRAME_PROGRESS", "TQDM_DISABLE"):
        monkeypatch.delenv(name, raising=False)
    # tqdm sizes a bar from the terminal, or from COLUMNS when it cannot ask one.
    monkeypatch.setenv("COLUMNS", "100")
    # Off a terminal unless a test says otherwise, also under `pytest -s`.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    pf.progress.set_enabled(None)
    yield
    pf.progress.set_enabled(None)


def in_a_terminal(monkeypatch: pytest.MonkeyPatch) -> FakeTerminal:
    """Make stderr a fake terminal; called in the test itself, as pytest sets sys.stderr
    for its capture once the fixtures are set up."""
    fake = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", fake)
    return fake


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return lambda: [r.getMessage() for r in caplog.records if r.name == LOGGER]


def _run(label: str, total: int) -> None:
    with pf.progress.steps(label, total) as advance:
        for _ in range(total):
            advance()


class StopError(Exception):
    pass


def _stopped(label: str, total: int, done: int, error: BaseException) -> None:
    """Steps that raise ``error`` after ``done`` of ``total``."""
    with pf.progress.steps(label, total) as advance:
        for _ in range(done):
            advance()
        raise error


def test_pf_progress_is_the_module() -> None:
    assert pf.progress is privframe.progress
    assert pf.progress.__all__ == ["disabled", "set_enabled", "steps"]


# --------------------------------------------------------------------------- shown


def test_a_terminal_shows_a_bar_drawn_at_every_step_in_order(
    monkeypatch: pytest.MonkeyPatch, records: Callable[[], list[str]]
) -> None:
    terminal = in_a_terminal(monkeypatch)
    with pf.progress.steps("partitions", 4) as advance:
        assert re.match(r"partitions:\s+0%\|.*\| 0/4 ", terminal.last_drawn())
        for i in range(1, 5):
            advance()
            assert re.match(rf"partitions:\s+\d+%\|.*\| {i}/4 ", terminal.last_drawn())
    assert records() == []  # a bar, not log records


def test_the_bar_is_left_closed_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = in_a_terminal(monkeypatch)
    _run("partitions", 3)
    assert terminal.getvalue().endswith("\n")  # tqdm ends a bar it leaves with a new line
    assert "| 3/3 " in terminal.getvalue().rstrip("\n").rsplit("\r", 1)[-1]


def test_off_a_terminal_each_step_is_an_info_record_in_order(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    records: Callable[[], list[str]],
) -> None:
    with pf.progress.steps("partitions", 3) as advance:
        for i in range(1, 4):
            advance()
            assert records()[-1] == f"partitions: step {i} of 3"
    assert records() == [f"partitions: step {i} of 3" for i in (1, 2, 3)]
    assert {r.levelno for r in caplog.records if r.name == LOGGER} == {logging.INFO}
    assert capsys.readouterr().err == ""  # no bar off a terminal


@pytest.mark.parametrize("total", [0, 1])
def test_one_step_or_none_shows_nothing(
    total: int, monkeypatch: pytest.MonkeyPatch, records: Callable[[], list[str]]
) -> None:
    terminal = in_a_terminal(monkeypatch)
    with pf.progress.steps("partitions", total) as advance:
        advance()  # may still be called
    assert terminal.getvalue() == ""
    assert records() == []


# --------------------------------------------------------------------------- turned off


def _turned_off_by_set_enabled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    pf.progress.set_enabled(False)
    yield


def _turned_off_by_disabled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with pf.progress.disabled():
        yield


def _turned_off_by_the_environment(value: str) -> Callable[[pytest.MonkeyPatch], Iterator[None]]:
    def turned_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        monkeypatch.setenv("PRIVFRAME_PROGRESS", value)
        yield

    return turned_off


WAYS_OFF = {
    "set_enabled(False)": _turned_off_by_set_enabled,
    "disabled()": _turned_off_by_disabled,
    **{f"PRIVFRAME_PROGRESS={v}": _turned_off_by_the_environment(v) for v in ("0", "off", "FALSE")},
}


@pytest.mark.parametrize("way", WAYS_OFF.values(), ids=WAYS_OFF.keys())
@pytest.mark.parametrize("is_a_terminal", [True, False], ids=["terminal", "log"])
def test_nothing_is_shown_when_turned_off(
    way: Callable[[pytest.MonkeyPatch], Iterator[None]],
    is_a_terminal: bool,
    monkeypatch: pytest.MonkeyPatch,
    records: Callable[[], list[str]],
) -> None:
    stderr = FakeTerminal() if is_a_terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    for _ in way(monkeypatch):
        _run("partitions", 4)
    assert stderr.getvalue() == ""
    assert records() == []


def test_set_enabled_true_wins_over_the_environment_and_none_returns_to_it(
    monkeypatch: pytest.MonkeyPatch, records: Callable[[], list[str]]
) -> None:
    monkeypatch.setenv("PRIVFRAME_PROGRESS", "off")
    pf.progress.set_enabled(True)
    _run("on", 2)
    pf.progress.set_enabled(None)
    _run("automatic", 2)
    assert records() == ["on: step 1 of 2", "on: step 2 of 2"]


def test_disabled_wins_over_set_enabled_true_and_ends_with_its_block(
    records: Callable[[], list[str]],
) -> None:
    pf.progress.set_enabled(True)
    with pf.progress.disabled():
        _run("inside", 2)
    with pytest.raises(StopError), pf.progress.disabled():
        _stopped("raised inside", 2, 1, StopError())
    _run("after", 2)
    assert records() == ["after: step 1 of 2", "after: step 2 of 2"]


def test_disabled_holds_in_its_own_thread_only(records: Callable[[], list[str]]) -> None:
    with pf.progress.disabled():
        other = threading.Thread(target=_run, args=("other thread", 2))
        other.start()
        other.join()
        _run("this thread", 2)
    assert records() == ["other thread: step 1 of 2", "other thread: step 2 of 2"]


def test_tqdm_disable_turns_the_bar_into_log_records(
    monkeypatch: pytest.MonkeyPatch, records: Callable[[], list[str]]
) -> None:
    terminal = in_a_terminal(monkeypatch)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    _run("partitions", 2)
    assert terminal.getvalue() == ""
    assert records() == ["partitions: step 1 of 2", "partitions: step 2 of 2"]


# --------------------------------------------------------------------------- exceptions


def test_an_exception_closes_the_bar_and_propagates_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = in_a_terminal(monkeypatch)
    stop = StopError("inside the work")
    with pytest.raises(StopError) as caught:
        _stopped("partitions", 4, 2, stop)
    assert caught.value is stop
    assert caught.value.__context__ is None
    assert terminal.getvalue().endswith("\n")  # closed, left showing where it stopped
    assert "| 2/4 " in terminal.getvalue().rstrip("\n").rsplit("\r", 1)[-1]


def test_nested_bars_are_closed_by_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = in_a_terminal(monkeypatch)
    with pytest.raises(StopError), pf.progress.steps("queries", 2):
        _stopped("partitions", 3, 1, StopError())
    drawn = len(terminal.getvalue())
    _run("next", 2)
    # A bar drawn below an open one moves the cursor up ("\x1b[A"); with both closed,
    # the next bar takes the first line again.
    assert "\x1b[A" not in terminal.getvalue()[drawn:]


def test_an_exception_off_a_terminal_propagates_unchanged(
    records: Callable[[], list[str]],
) -> None:
    stop = StopError()
    with pytest.raises(StopError) as caught:
        _stopped("partitions", 3, 1, stop)
    assert caught.value is stop
    assert records() == ["partitions: step 1 of 3"]


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("label", "total", "error"),
    [
        (3, 4, pf.InvalidArgumentError),
        ("partitions", 4.0, pf.InvalidArgumentError),
        ("partitions", True, pf.InvalidArgumentError),
        ("partitions", -1, pf.InvalidValueError),
    ],
)
def test_wrong_steps_are_refused(label: object, total: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"progress\.steps"), pf.progress.steps(label, total):
        pass


def test_set_enabled_refuses_anything_but_true_false_or_none() -> None:
    with pytest.raises(pf.InvalidArgumentError, match=re.escape("True (on), False (off) or None")):
        pf.progress.set_enabled("off")
