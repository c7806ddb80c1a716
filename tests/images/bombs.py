"""Decompression bombs for the image tests: tiny files whose headers declare huge images."""

from __future__ import annotations

import io

from PIL import Image


def webp_declaring(side: int) -> bytes:
    """A 38-byte lossless webp whose header says side × side: it really decodes to that many pixels."""
    buf = io.BytesIO()
    Image.new("RGB", (1, 1), (10, 20, 30)).save(buf, "WEBP", lossless=True)
    body = bytearray(buf.getvalue())
    at = body.index(b"VP8L") + 9  # after the chunk header and the 0x2f signature: 14 bits w-1, 14 bits h-1
    bits = int.from_bytes(body[at : at + 4], "little") & ~((1 << 28) - 1)
    body[at : at + 4] = (bits | (side - 1) | ((side - 1) << 14)).to_bytes(4, "little")
    return bytes(body)
