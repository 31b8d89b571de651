"""Headless Chromium for the tests of privframe's pages: the DOM after scripts ran, screenshots.

``chromium()`` finds the browser: a test skips without it locally and fails
without it under ``CI`` (``.ci/run`` installs it). Each run gets a fresh
profile directory, so no state passes from one test to the next.
``png_pixels`` decodes a screenshot into an RGB array (PNG's five row
filters, 8-bit RGB or RGBA, no imaging library), so a test can look for a
chart's colours where the chart should be.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

_FLAGS = (
    "--headless",
    "--disable-gpu",
    "--no-sandbox",  # the tests run as root in CI's container
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
_SCRIPT_TIME_MS = 20_000
"""Virtual time the page's scripts get (fetches included) before the DOM or pixels are taken."""


def chromium() -> str:
    """The browser's path; skips the test when it is missing, fails it under CI."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(
                "chromium is not installed: .ci/run installs it (apt-get install chromium); "
                "the headless browser tests must not be skipped in CI"
            )
        pytest.skip("chromium is not installed (apt-get install chromium); runs in CI")
    return found


def _run(*args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        command = [chromium(), *_FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode:
        # Not CalledProcessError: its message would quote the address, token and all.
        raise AssertionError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def rendered(url: str) -> str:
    """The page's DOM, serialised, once its scripts ran (and their fetches were answered)."""
    return _run(f"--virtual-time-budget={_SCRIPT_TIME_MS}", "--dump-dom", url)


def screenshot(url: str, path: Path, width: int, height: int) -> np.ndarray:
    """A ``width`` x ``height`` screenshot of the page once its scripts ran, as RGB pixels."""
    _run(
        f"--virtual-time-budget={_SCRIPT_TIME_MS}",
        f"--window-size={width},{height}",
        f"--screenshot={path}",
        url,
    )
    return png_pixels(path.read_bytes())


def png_pixels(png: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG as a (height, width, 3) uint8 array (alpha dropped).

    Each row is unfiltered as the PNG specification says (section 9: None,
    Sub, Up, Average, Paeth, each relative to the byte one pixel to the left
    and the one above).
    """
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    position, data = 8, []
    width = height = channels = 0
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        chunk = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError("png_pixels decodes 8-bit RGB or RGBA PNGs, not interlaced")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            data.append(chunk)
        position += 12 + length
    raw = zlib.decompress(b"".join(data))
    stride = width * channels
    rows = np.zeros((height + 1, stride), dtype=np.uint8)  # row 0: the zeros above the first
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, np.uint8, stride, start + 1)
        rows[y + 1] = _unfilter(kind, line, rows[y], channels)
    return rows[1:].reshape(height, width, channels)[:, :, :3]


def _unfilter(kind: int, line: np.ndarray, above: np.ndarray, bpp: int) -> np.ndarray:
    if kind == 0:
        return line
    if kind == 2:
        return line + above  # uint8 arithmetic wraps modulo 256, as the filters do
    if kind == 1:
        summed = np.cumsum(line.reshape(-1, bpp).astype(np.int64), axis=0) % 256
        return summed.astype(np.uint8).reshape(-1)
    # Average and Paeth depend on the byte just decoded: byte by byte.
    out = bytearray(line.tobytes())
    up = above.tobytes()
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            out[i] = (out[i] + (a + b) // 2) & 0xFF
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        predictor = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (out[i] + predictor) & 0xFF
    return np.frombuffer(bytes(out), np.uint8)
