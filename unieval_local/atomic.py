"""Replacing a small file atomically: the one writer of sidecars, manifests, the file-hash memo
and staged inputs (a reader never sees a half-written file; a failure leaves the old one)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["replace_atomically"]


def replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (fsynced, then ``os.replace``),
    keeping ``path``'s permission bits when it exists.

    Raises:
        OSError: the temporary file cannot be written or renamed (``path`` is unchanged; the
            temporary file is removed).
    """
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
