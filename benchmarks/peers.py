"""Peer libraries for benchmarks, each in its own virtualenv.

Peers pin old stacks (OpenDP pins one polars release; Tumult pins pandas 1.5
and numpy 1.26), so they never share privframe's environment: each gets a
virtualenv under ``benchmarks/.venvs/<name>`` created on first use, and is
timed by running a snippet in that interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

VENVS = Path(__file__).resolve().parent / ".venvs"

PEERS = {
    "opendp": ["opendp==0.16.0"],
}


def peer_python(name: str) -> Path:
    """The interpreter of the peer's virtualenv, creating and filling it if needed."""
    root = VENVS / name
    python = root / "bin" / "python"
    marker = root / ".installed"
    if not marker.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PEERS[name]],
            check=True,
        )
        marker.write_text(" ".join(PEERS[name]))
    return python


def run_snippet(name: str, code: str, timeout: float = 1800) -> dict:
    """Run ``code`` in the peer's interpreter; it must print one JSON object last."""
    out = subprocess.run(
        [str(peer_python(name)), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    for peer in sys.argv[1:] or PEERS:
        print(peer, peer_python(peer))
