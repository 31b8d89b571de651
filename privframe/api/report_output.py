"""What a report writes: a file per output table and report.html, put in place all at once.

A run writes into a new folder beside its output folder (:func:`staging_folder`)
and, once every file is written, puts that folder in place of the output
(:func:`publish`), so an output folder never mixes files of two runs. A
folder a report wrote holds a marker file; a later run may replace only such
a folder (or a new or empty one).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import polars as pl
    >>> from privframe.api.report_output import publish, staging_folder, write_csv
    >>> out = Path(tempfile.mkdtemp()) / "out"
    >>> staging = staging_folder(out)
    >>> write_csv(pl.DataFrame({"n": [3]}), staging / "n.csv", seeded=False)
    >>> publish(staging, out, "<!DOCTYPE html>...", seeded=False, note="a test")
    >>> sorted(p.name for p in out.iterdir())
    ['.privframe-report', 'n.csv', 'report.html']
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import polars as pl

from privframe._html import paragraph, text
from privframe.api._frames import as_polars
from privframe.api.html import result_html
from privframe.api.report_spec import FORMATS, SpecError

__all__ = [
    "NOT_PRIVATE",
    "marginals_html",
    "publish",
    "staging_folder",
    "synthetic_html",
    "write_csv",
    "write_table",
]

NOT_PRIVATE = (
    "NOT PRIVATE: this report's noise is seeded ([report] seed with --allow-seeded-noise), so "
    "its results are reproducible and NOT differentially private; seeds are for tests only"
)
"""The first line of every output of a seeded report: stdout, each CSV and report.html."""

_MARKER = ".privframe-report"
"""The file that marks a folder as a report's output, which a later run may replace whole."""


def write_csv(result: pl.DataFrame | pd.DataFrame, target: Path, *, seeded: bool) -> None:
    """Write ``result``; a seeded report's CSV starts with a ``# NOT PRIVATE`` comment line.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import polars as pl
        >>> from privframe.api.report_output import write_csv
        >>> target = Path(tempfile.mkdtemp()) / "n.csv"
        >>> write_csv(pl.DataFrame({"n": [3]}), target, seeded=True)
        >>> target.read_text().splitlines()[0].startswith("# NOT PRIVATE")
        True
    """
    with target.open("w", encoding="utf-8", newline="") as handle:
        if seeded:
            handle.write(f"# {NOT_PRIVATE}\n")
        if isinstance(result, pl.DataFrame):
            result.write_csv(handle)
        else:
            result.to_csv(handle, index=False)


def write_table(result: pl.DataFrame | pd.DataFrame, target: Path, *, seeded: bool) -> None:
    """Write ``result`` as CSV or parquet, by ``target``'s suffix; seeded output says NOT PRIVATE.

    A seeded CSV starts with the ``# NOT PRIVATE`` line (:func:`write_csv`); a
    seeded parquet file carries it in its key-value metadata, under ``privframe``.

    Raises:
        SpecError: ``target`` is not a ``.csv`` or ``.parquet`` path.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import polars as pl
        >>> from privframe.api.report_output import write_table
        >>> target = Path(tempfile.mkdtemp()) / "t.parquet"
        >>> write_table(pl.DataFrame({"n": [3]}), target, seeded=True)
        >>> pl.read_parquet_metadata(target)["privframe"].startswith("NOT PRIVATE")
        True
    """
    suffix = target.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise SpecError(
            f"{str(target)!r}: a table is written as {' or '.join(f'.{f}' for f in FORMATS)}"
        )
    if suffix == "csv":
        write_csv(result, target, seeded=seeded)
        return
    metadata = {"privframe": NOT_PRIVATE} if seeded else None
    as_polars(result).write_parquet(target, metadata=metadata)


def marginals_html(
    index: int,
    name: str,
    summary: str,
    explained: str,
    tables: Sequence[tuple[Sequence[str], str, pl.DataFrame | pd.DataFrame]],
) -> str:
    """The page's section of a ``[[marginals]]`` entry: each table with its file, then the plan.

    ``summary`` is its cost and ledger label, ``explained`` what it measured
    (``Session.explain_marginals``); ``tables`` holds each table's columns,
    file name and released frame.

    Example:
        >>> import polars as pl
        >>> from privframe.api.report_output import marginals_html
        >>> frame = pl.DataFrame({"sex": ["f"], "count": [3.0]})
        >>> page = marginals_html(1, "m", "cost rho = 0.1", "plan", [(["sex"], "m-1.csv", frame)])
        >>> '<a href="m-1.csv">m-1.csv</a>' in page
        True
    """
    parts = [
        f"<h3>{text(', '.join(columns))}</h3>" + _link("noisy counts", file) + result_html(frame)
        for columns, file, frame in tables
    ]
    return _section(
        index,
        name,
        summary
        + "; count is the consistent, non-negative estimate, count_std the noise std of the "
        "cell's measurement, and count_ci95_low/high its 95% interval (clipped at 0)",
        "".join(parts),
        explained,
    )


def synthetic_html(index: int, name: str, summary: str, explained: str, file: str) -> str:
    """The page's section of a ``[[synthetic]]`` entry: a link to its file, and the plan.

    Example:
        >>> from privframe.api.report_output import synthetic_html
        >>> page = synthetic_html(1, "people", "100 rows by MST", "plan", "people.csv")
        >>> '<a href="people.csv">people.csv</a>' in page
        True
    """
    link = _link("the synthetic table", file)
    note = paragraph(
        "Synthetic rows are sampled from a model of noisy marginals: they are not real people, "
        "and they keep only what those marginals measured.",
        "pf-meta",
    )
    return _section(index, name, summary, link + note, explained)


def _link(what: str, file: str) -> str:
    """A line naming ``what`` is in ``file``, linked (the file sits beside report.html)."""
    return f'<p>{text(what)}: <a href="{text(file)}">{text(file)}</a></p>'


def _section(index: int, name: str, summary: str, body: str, explained: str) -> str:
    return (
        f'<section id="table-{index}"><h2>{text(name)}</h2>'
        + paragraph(summary, "pf-meta")
        + body
        + f"<details><summary>what it measured, and its noise</summary><pre>{text(explained)}"
        "</pre></details></section>"
    )


def staging_folder(out: Path) -> Path:
    """A new, empty folder beside ``out`` for this run's outputs; ``out`` must be replaceable.

    Raises:
        SpecError: ``out`` is a file, or a folder holding files no report
            wrote, or the folder beside it cannot be created.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from privframe.api.report_output import staging_folder
        >>> out = Path(tempfile.mkdtemp()) / "out"
        >>> staging_folder(out).name.endswith(".partial")
        True
    """
    if out.exists():
        if not out.is_dir():
            raise SpecError(f"the output {str(out)!r} is a file; give a folder with --out")
        try:
            names = [p.name for p in out.iterdir()]
        except OSError as err:
            raise SpecError(f"cannot read the output folder {str(out)!r}: {err}") from None
        if names and _MARKER not in names:
            raise SpecError(
                f"the output folder {str(out)!r} holds files that no privframe report "
                "wrote; a report replaces its output folder whole, so give a new or "
                "empty folder with --out"
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as err:
        raise SpecError(f"cannot create the output folder beside {str(out)!r}: {err}") from None


def publish(staging: Path, out: Path, page: str, *, seeded: bool, note: str) -> None:
    """Write ``report.html`` and the marker (holding ``note``) into ``staging``; put it at ``out``.

    A seeded report's page starts with a ``NOT PRIVATE`` HTML comment. See
    the module's example.
    """
    # An HTML comment may precede the doctype (the page stays in standards mode).
    first = f"<!-- {NOT_PRIVATE} -->\n" if seeded else ""
    (staging / "report.html").write_text(first + page, encoding="utf-8")
    (staging / _MARKER).write_text(f"{note}\n", encoding="utf-8")
    _replace(out, staging)


def _replace(out: Path, staging: Path) -> None:
    """Put ``staging`` where ``out`` is: an earlier run's folder is moved aside, then removed."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        out.rename(old / out.name)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
