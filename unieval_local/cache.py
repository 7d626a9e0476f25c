"""An opt-in persistent score cache: re-running an evaluation costs only what changed.

One SQLite file (``<cache_dir>/scores.sqlite``, WAL mode, safe for several
processes writing at once) maps a query key to its P(Yes). The key is a SHA-256
over everything that can change a score:

- the checkpoint's CONTENT fingerprint (SHA-256 of config, weights and
  tokenizer files; not its path), memoised per (file, size, mtime) so that a
  3 GB checkpoint is hashed once;
- the prompt, and :meth:`~unieval_local.config.RunConfig.query_context` of the
  run: ``max_length``, dtype, device type, the forward path,
  :data:`~unieval_local.config.ENGINE_VERSION`, and the torch, transformers,
  tokenizers and sentencepiece versions.

Only finite scores are stored. bfloat16 scores are never cached: they depend on
which prompts share a batch (the :class:`~unieval_local.Scorer` skips the cache then).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .checkpoints import fingerprint_checkpoint
from .hashing import sha256_file, sha256_text
from .config import ENGINE_VERSION, RunConfig  # noqa: F401  (ENGINE_VERSION re-exported)
from .engine import Runner
from .evaluators import Evaluator
from .errors import UniEvalError


class CacheError(ValueError, UniEvalError):
    """The cache folder cannot be created, opened or written."""


class ScoreCache:
    """A SQLite-backed map from query key to P(Yes), shared by processes.

    Args:
        cache_dir: folder for ``scores.sqlite`` (created if missing).

    Raises:
        CacheError: the folder or database cannot be created or written (a ``ValueError``).
    """

    def __init__(self, cache_dir: str | os.PathLike):
        self.folder = Path(cache_dir).expanduser()
        self.path = self.folder / "scores.sqlite"
        self._lock = threading.Lock()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=120, check_same_thread=False, isolation_level=None)
            self._setup()
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot use cache folder {str(self.folder)!r}: {type(exc).__name__}: {exc}") from exc

    def _setup(self, attempts: int = 200) -> None:
        """Switch to WAL and create the tables; retried while another process holds the lock
        (the journal-mode switch can fail with "database is locked" without waiting)."""
        import random
        import time

        for attempt in range(attempts):
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value REAL NOT NULL, n_tokens INTEGER)")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT, size INTEGER, mtime_ns INTEGER, sha256 TEXT,"
                    " PRIMARY KEY (path, size, mtime_ns))")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 + random.random() * 0.1)

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[float, int | None]]:
        """``key -> (value, n_tokens)`` for those ``keys`` that are present."""
        found: dict[str, tuple[float, int | None]] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                for k, v, n in self._db.execute(f"SELECT key, value, n_tokens FROM scores WHERE key IN ({marks})", chunk):
                    found[k] = (v, n)
        return found

    def put_many(self, items: dict[str, float | tuple[float, int | None]]) -> None:
        """Store finite values, with their prompt's token count when given (one transaction)."""
        rows = []
        for k, v in items.items():
            value, n = v if isinstance(v, tuple) else (v, None)
            if np.isfinite(value):
                rows.append((k, float(value), None if n is None else int(n)))
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO scores (key, value, n_tokens) VALUES (?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]

    def file_sha256(self, path: Path) -> str:
        """SHA-256 of a file, memoised on (resolved path, size, mtime)."""
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        with self._lock:
            row = self._db.execute(
                "SELECT sha256 FROM file_hashes WHERE path=? AND size=? AND mtime_ns=?", key).fetchone()
        if row:
            return row[0]
        digest = sha256_file(path)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?)", (*key, digest))
        return digest

    def fingerprint(self, folder: str | os.PathLike) -> str:
        """Content fingerprint of a checkpoint folder (config, weights, tokenizer files),
        with each file's hash memoised in the database."""
        return fingerprint_checkpoint(folder, file_hash=self.file_sha256)


class CachedRunner(Runner):
    """A :class:`~unieval_local.engine.Runner` that answers cached prompts from a
    :class:`ScoreCache` and scores the rest with ``inner``, storing them.

    Args:
        inner: the runner that scores cache misses.
        cache: the :class:`ScoreCache`.
        config: the run's :class:`~unieval_local.config.RunConfig`; its ``query_context()``,
            ``inner.fingerprint`` (the checkpoint's content) and the evaluator's spec
            (prompt format, answer words) enter every key.
        evaluator: the checkpoint's :class:`~unieval_local.evaluators.Evaluator`.

    Raises:
        ValueError: ``config.dtype`` is bfloat16 (such scores are not reproducible per prompt).
    """

    def __init__(self, inner: Runner, cache: ScoreCache, config: RunConfig, evaluator: Evaluator):
        if config.dtype == "bfloat16":
            raise ValueError("bfloat16 scores depend on batch composition and are never cached")
        self.inner = inner
        self.cache = cache
        self.config = config
        self.name = inner.name
        self.fingerprint = inner.fingerprint
        self._context = json.dumps({**config.query_context(), **evaluator.key(), "checkpoint": inner.fingerprint},
                                   sort_keys=True)
        self.hits = self.misses = 0

    def key(self, prompt: str, max_length: int) -> str:
        """The cache key of one query (``max_length`` is the call's, normally the config's)."""
        return sha256_text(f"{self._context}\0{max_length}\0{prompt}")

    def count(self, texts: Sequence[str]) -> list[int]:
        """The inner runner's token count (cached scores do not change token arithmetic)."""
        return self.inner.count(texts)

    def count_plain(self, texts: Sequence[str]) -> list[int]:
        """The inner runner's token count without special tokens."""
        return self.inner.count_plain(texts)

    def cut(self, text: str, n_tokens: int) -> int:
        """The inner runner's cut."""
        return self.inner.cut(text, n_tokens)

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p_yes, n_tokens)`` as the inner runner gives them; cached prompts are not run."""
        keys = [self.key(p, max_length) for p in prompts]
        found = self.cache.get_many(keys)
        todo = list(dict.fromkeys(p for p, k in zip(prompts, keys) if k not in found))
        self.hits += len(set(keys) & found.keys())
        self.misses += len(todo)
        if todo:
            values, counts = self.inner.score(todo, max_length=max_length, on_batch=on_batch)
            new = {self.key(p, max_length): (float(v), int(n)) for p, v, n in zip(todo, values, counts)}
            self.cache.put_many(new)
            found.update(new)
        return (np.array([found[k][0] for k in keys], dtype=np.float64),
                np.array([-1 if found[k][1] is None else found[k][1] for k in keys], dtype=np.int64))
