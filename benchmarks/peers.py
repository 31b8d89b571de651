"""Peer libraries for benchmarks, each in its own virtualenv.

Peers pin old stacks (OpenDP pins one polars release; Tumult pins pandas 1.5
and numpy 1.26 and needs pyspark), so they never share privframe's
environment: each gets a virtualenv under ``benchmarks/.venvs/<name>`` created
on first use, and is timed by running a snippet in that interpreter.

Requirements are version ranges, not pins, so that a fresh machine installs
the newest compatible patch release. The installed requirement list is kept
in ``.installed`` inside the virtualenv; when ``PEERS`` changes, the next use
rebuilds that virtualenv.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

VENVS = Path(__file__).resolve().parent / ".venvs"

PEERS: dict[str, list[str]] = {
    # The polars extra brings the polars release OpenDP's plugin was built against.
    "opendp": ["opendp[polars]>=0.16,<0.17", "pyarrow"],
    # OpenDP's MST and AIM synthesizers (opendp.extras.mbi) post-process with
    # Private-PGM: the mbi extra brings the mbi release OpenDP pins and its jax.
    # Kept apart from "opendp" so that the light peer does not carry jax. mbi's
    # synthetic_data builds a pandas frame, which neither package requires.
    "opendp_synth": ["opendp[mbi]>=0.16,<0.17", "pandas"],
    # PipelineDP's local backend is pure Python over python-dp; pandas/pyarrow read the data.
    "pipelinedp": ["pipeline-dp>=0.3,<0.4", "pandas", "pyarrow"],
    # Tumult Analytics runs on Spark local (pyspark comes with it; Java 17 is needed).
    "tumult": ["tmlt.analytics>=0.21,<0.22", "pyarrow"],
    # Google's accountants (RDP, PLD, mechanism calibration); numpy/scipy/attrs only.
    "dp_accounting": ["dp-accounting>=0.6,<0.7"],
    # Opacus' accountants (RDP, PRV, get_noise_multiplier) are numpy/scipy code, but
    # opacus/__init__.py and opacus/accountants/accountant.py import torch, so the
    # accountants cannot be imported without it. Rather than load their modules by
    # file path and rewrite the glue around them (PRVAccountant's domain and error
    # bounds live in that glue), the venv gets the real package with a torch that
    # is light: torch 2.13.0's CPU build lies on this project's machines in pip's
    # find-links folder, and the pin makes pip take it (a 192 MB wheel, about 1 GB
    # installed) instead of PyPI's CUDA build (several GB). On a machine without
    # that file, set PRIVFRAME_TORCH_INDEX to a CPU-only torch index (see PIP_ARGS).
    "opacus": ["opacus>=1.6,<1.7", "torch==2.13.0"],
}

# Extra pip arguments per peer. PRIVFRAME_TORCH_INDEX adds a torch wheel index
# for Opacus only when set: an index that cannot be reached costs pip about 5 s
# of retries per requirement, so none is named by default.
PIP_ARGS: dict[str, list[str]] = {
    "opacus": (
        ["--extra-index-url", os.environ["PRIVFRAME_TORCH_INDEX"]]
        if os.environ.get("PRIVFRAME_TORCH_INDEX")
        else []
    ),
}

# Seconds each peer's first-use install took in this process (compare.py reports them).
INSTALL_SECONDS: dict[str, float] = {}


class PeerError(RuntimeError):
    """A peer could not be installed or its snippet failed; the message says why."""


def is_installed(name: str) -> bool:
    """Whether the peer's virtualenv holds the current ``PEERS`` requirements."""
    marker = VENVS / name / ".installed"
    return name in PEERS and marker.exists() and marker.read_text() == _wanted(name)


def _wanted(name: str) -> str:
    """The marker text for the peer: its requirements, then any extra pip arguments."""
    return " ".join([*PEERS[name], *PIP_ARGS.get(name, [])])


def peer_python(name: str) -> Path:
    """The interpreter of the peer's virtualenv, creating and filling it if needed."""
    if name not in PEERS:
        raise PeerError(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
    root = VENVS / name
    python = root / "bin" / "python"
    marker = root / ".installed"
    wanted = _wanted(name)
    if not marker.exists() or marker.read_text() != wanted:
        t0 = time.perf_counter()
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        out = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *PIP_ARGS.get(name, []),
                *PEERS[name],
            ],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise PeerError(f"pip install failed: {_last_line(out.stderr)}")
        # Written last, so an interrupted install is retried on the next use.
        marker.write_text(wanted)
        INSTALL_SECONDS[name] = time.perf_counter() - t0
    return python


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def run_snippet(name: str, code: str, args: list[str] | None = None, timeout: float = 1800) -> dict:
    """Run ``code`` in the peer's interpreter; it must print one JSON object last.

    ``args`` become the snippet's ``sys.argv[1:]``. Raises ``PeerError`` with
    the snippet's last stderr line when it fails or times out, so that callers
    can print the reason instead of a traceback.
    """
    return run_python(peer_python(name), code, args, timeout)


def run_python(
    python: Path | str, code: str, args: list[str] | None = None, timeout: float = 1800
) -> dict:
    """Run ``code`` in the interpreter ``python`` (see ``run_snippet``).

    Separate from ``run_snippet`` so that privframe's own variants run in the
    current interpreter through the same error handling.
    """
    cmd = [str(python), "-c", code, *(args or [])]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise PeerError(f"timed out after {timeout:.0f} s") from exc
    if out.returncode != 0:
        raise PeerError(f"exit {out.returncode}: {_last_line(out.stderr)}")
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise PeerError(f"no JSON result: {_last_line(out.stdout + out.stderr)}") from exc


if __name__ == "__main__":
    for peer in sys.argv[1:] or PEERS:
        python = peer_python(peer)
        took = INSTALL_SECONDS.get(peer)
        print(peer, python, f"(installed in {took:.0f} s)" if took is not None else "")


def add_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """The ``--peers`` and ``--skip-missing`` options every comparison script takes."""
    parser.add_argument(
        "--peers",
        default=",".join(names),
        help="comma-separated peers to run (default: all); empty for none",
    )
    parser.add_argument(
        "--skip-missing",
        action="store_true",
        help="skip peers whose virtualenv is not installed yet instead of installing them",
    )
