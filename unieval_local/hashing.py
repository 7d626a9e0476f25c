"""SHA-256 helpers: the one place files and texts are hashed (checkpoint and input
fingerprints, shard assignment, cache keys, custom-aspect hashes)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["sha256_file", "sha256_text"]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(Path(path), "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
