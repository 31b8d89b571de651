"""browser_setup.png_pixels: a PNG written with each of the five row filters decodes exactly."""

from __future__ import annotations

import struct
import zlib

import numpy as np
from browser_setup import png_pixels


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _png(image: np.ndarray) -> bytes:
    """``image`` (height, width, 4) as a PNG whose row y uses filter y mod 5."""
    height, width, channels = image.shape
    raw, above = b"", [0] * (width * channels)
    for y in range(height):
        row = [int(v) for v in image[y].reshape(-1)]
        kind = y % 5
        filtered = []
        for i, value in enumerate(row):
            a = row[i - channels] if i >= channels else 0
            b, c = above[i], above[i - channels] if i >= channels else 0
            predicted = (0, a, b, (a + b) // 2, _paeth(a, b, c))[kind]
            filtered.append((value - predicted) % 256)
        raw += bytes([kind, *filtered])
        above = row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_every_row_filter_decodes_to_the_pixels_written() -> None:
    image = np.random.default_rng(1).integers(0, 256, (20, 13, 4), dtype=np.uint8)
    assert (png_pixels(_png(image)) == image[:, :, :3]).all()
