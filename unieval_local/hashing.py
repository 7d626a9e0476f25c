"""SHA-256 helpers: the one place files and texts are hashed (checkpoint and input
fingerprints, shard assignment, cache keys, custom-aspect hashes).

:func:`memo_sha256_file` remembers a file's SHA-256 across processes, in a small JSON file
(:func:`hash_memo_path`), keyed on the file's resolved path, size, ``st_mtime_ns``, ``st_ino``
and ``st_ctime_ns``: a checkpoint folder is hashed once per change, not at every start. SHA-256 costs
about 0.7 s per GB on this project's build machine (1 GiB file read from the page cache, one
core: 0.67-0.82 s, measured for issue 35), 2-3 s for UniEval's 3.1 GB weights, more where the
disk is slower than that.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from pathlib import Path

__all__ = ["HASH_MEMO_ENV", "hash_memo_path", "memo_sha256_file", "sha256_file", "sha256_text"]

#: Environment variable naming the persistent hash memo file (:func:`hash_memo_path`); ``off``
#: (or empty) keeps the memo in the process only.
HASH_MEMO_ENV = "UNIEVAL_LOCAL_HASH_MEMO"

#: At most this many files are remembered (entries of files that are gone are dropped first).
_MEMO_MAX_ENTRIES = 4096

_MEMO: dict[tuple[str, int, int, int, int], str] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_WARNED = False


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (about 0.7 s per GB: module docstring).

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


def hash_memo_path() -> Path | None:
    """Where :func:`memo_sha256_file` keeps its persistent memo.

    Returns:
        ``$UNIEVAL_LOCAL_HASH_MEMO`` when set (None when it is empty or ``off``: no persistent
        memo), else ``$XDG_CACHE_HOME/unieval-local/file_sha256.json`` (default
        ``~/.cache/unieval-local/file_sha256.json``: a per-user cache, as the Hugging Face cache
        is; ``$UNIEVAL_LOCAL_HOME`` is often a shared, read-only staging folder).
    """
    named = os.environ.get(HASH_MEMO_ENV)
    if named is not None:
        return None if named.strip().lower() in ("", "0", "off", "none") else Path(named).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "unieval-local" / "file_sha256.json"


def _memo_warn(path: Path, what: str, exc: BaseException) -> None:
    """One warning per process that the persistent memo cannot be used (the hashes are computed)."""
    global _MEMO_WARNED
    if _MEMO_WARNED:
        return
    _MEMO_WARNED = True
    from .errors import CacheUnusableWarning

    warnings.warn(CacheUnusableWarning(
        f"the file-hash memo {str(path)!r} cannot be {what} ({type(exc).__name__}: {exc}): checkpoint files are "
        f"hashed again instead (about 0.7 s per GB; the scores are the same). Fix: delete the file, make its folder "
        f"writable, or set {HASH_MEMO_ENV} to another file (or to 'off')"), stacklevel=4)


def _read_memo(path: Path) -> dict[str, dict]:
    """The memo's entries (``{resolved path: {"size", "mtime_ns", "inode", "ctime_ns", "sha256"}}``); {} when
    it is absent, or (after one warning) unreadable or not a memo."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data.get("files") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            raise ValueError("not a unieval-local file-hash memo")
        return entries
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _memo_warn(path, "read", exc)
        return {}


def _write_memo(path: Path, entries: dict[str, dict]) -> None:
    """Write the memo atomically (:func:`~unieval_local.atomic.replace_atomically`); a failure
    warns once and is otherwise ignored."""
    from .atomic import replace_atomically

    if len(entries) > _MEMO_MAX_ENTRIES:
        entries = {k: v for k, v in entries.items() if os.path.exists(k)}
        entries = dict(list(entries.items())[-_MEMO_MAX_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, json.dumps({"version": 1, "files": entries}, indent=0, sort_keys=True).encode())
    except OSError as exc:
        _memo_warn(path, "written", exc)


def memo_sha256_file(path: str | os.PathLike) -> str:
    """:func:`sha256_file` of ``path``, remembered by (resolved path, size, ``st_mtime_ns``,
    ``st_ino``, ``st_ctime_ns``) in the process and in a JSON file (:func:`hash_memo_path`), so that a file is
    hashed once per change, in any process. A file changed in any of those five is hashed again
    (a weight file replaced by another of the same size gets a new mtime, inode or ctime; a
    restored mtime does not restore the ctime, which no user-space call can set).

    The memo file is read, merged and written under a file lock (``<memo>.lock``), atomically: processes
    sharing one memo keep each other's entries. One that is corrupt, unreadable or unwritable gives ONE
    :class:`~unieval_local.errors.CacheUnusableWarning` per process and the hash is computed (a
    corrupt one is replaced at the next write). A digest is only stored when the file's stat is
    the same after hashing as before.

    Args:
        path: a file.

    Returns:
        Its hex SHA-256.

    Raises:
        OSError: ``path`` itself cannot be read (a failing memo is never raised).
    """
    path = Path(path)
    resolved = str(path.resolve())
    st = os.stat(resolved)
    # ctime too: no user-space call sets it, so a content change with a restored mtime is still seen
    key = (resolved, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    with _MEMO_LOCK:
        if key in _MEMO:
            return _MEMO[key]
    memo_file = hash_memo_path()
    stat = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "ctime_ns": st.st_ctime_ns}
    if memo_file is not None:
        with _MEMO_LOCK:
            entry = _read_memo(memo_file).get(resolved)
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and \
                all(entry.get(k) == v for k, v in stat.items()):
            with _MEMO_LOCK:
                _MEMO[key] = entry["sha256"]
            return entry["sha256"]
    digest = sha256_file(resolved)
    after = os.stat(resolved)
    if (after.st_size, after.st_mtime_ns, after.st_ino, after.st_ctime_ns) != key[1:]:
        return digest  # changed while hashed: remember nothing
    with _MEMO_LOCK:
        _MEMO[key] = digest
        if memo_file is not None:
            _merge_into_memo(memo_file, resolved, {**stat, "sha256": digest})
    return digest


def _merge_into_memo(path: Path, resolved: str, entry: dict) -> None:
    """Add ``entry`` for ``resolved`` to the memo file: read, merge and replace under an exclusive
    lock on ``<memo>.lock`` (``filelock``), so that processes sharing one memo never drop each
    other's entries (without it, 4 processes adding 5 entries each kept 6 to 17 of the 20). A lock
    that cannot be taken within 10 s, or a folder where no lock file can be made, warns once
    (:func:`_memo_warn`) and the entry is left out (it is hashed again next time)."""
    from filelock import FileLock, Timeout

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=10):
            entries = _read_memo(path)
            entries.pop(resolved, None)  # re-inserted last: the most recent survive the cap
            entries[resolved] = entry
            _write_memo(path, entries)
    except (OSError, Timeout) as exc:
        _memo_warn(path, "locked for writing", exc)
