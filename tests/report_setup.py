"""Report specs in tests: written into a folder beside their data and run as the CLI runs them."""

from __future__ import annotations

from pathlib import Path

from privframe.api.cli import main


def spec_file(folder: Path, text: str) -> Path:
    """``text`` written as ``folder/spec.toml``, whose relative paths are ``folder``'s."""
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def run_report(folder: Path, text: str, *args: str) -> int:
    """``privframe report`` of ``text`` into ``folder/out``: its exit code."""
    return main(["report", str(spec_file(folder, text)), "--out", str(folder / "out"), *args])
