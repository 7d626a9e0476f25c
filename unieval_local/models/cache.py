"""An opt-in persistent score cache: re-running an evaluation costs only what changed.

One SQLite file (``<cache_dir>/scores.sqlite``, WAL mode, safe for several
processes writing at once) maps a query key to its P(Yes). The key is a SHA-256
over everything that can change a score:

- the checkpoint's CONTENT fingerprint (SHA-256 of config, weights and
  tokenizer files; not its path; a manifest's digest only while the file is the one
  verified, else hashed through the persistent memo keyed on path, size, mtime_ns and
  inode, :func:`~unieval_local.hashing.memo_sha256_file`), so that a 3 GB checkpoint is
  hashed once and replaced weights never get the old weights' scores;
- the prompt, and :meth:`~unieval_local.config.RunConfig.query_context` of the
  run: ``max_length``, dtype, device type, the forward path,
  :data:`~unieval_local.config.ENGINE_VERSION`, and the torch, transformers,
  tokenizers and sentencepiece versions.

Only finite scores are stored. bfloat16 scores are never cached: they depend on
which prompts share a batch (the :class:`~unieval_local.Scorer` skips the cache then).

A cache that fails (a damaged or foreign file, a read-only file or folder, a full disk, a
folder that cannot be created) never stops a run: it is disabled after one
:class:`CacheUnusableWarning` naming the file, the reason and the fix, and the run goes on
without it, with the same scores (:class:`ScoreCache`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..config import RunConfig
from ..errors import CacheUnusableWarning
from ..hashing import sha256_text
from ..registry.evaluators import Evaluator
from .base import Runner

__all__ = ["CachedRunner", "ScoreCache"]


def _is_probability(v) -> bool:
    """A stored P(Yes): a finite real in [0, 1] (what :meth:`ScoreCache.put_many` stores)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0


def _is_count(n) -> bool:
    """A stored token count: None or a non-negative integer."""
    return n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0)


class ScoreCache:
    """A SQLite-backed map from query key to P(Yes), shared by processes.

    Any failure of the cache (at open, at read or at write: a folder that cannot be created,
    a damaged database, a file that is not a database, a read-only file or folder, a full
    disk) disables it for the rest of this object's life, after ONE
    :class:`CacheUnusableWarning` (a ``RuntimeWarning``) naming the file, the reason and the
    fix: lookups then find nothing and stores are dropped, so every query is scored by the
    model and the scores are the same as without a cache. Nothing is raised.

    Args:
        cache_dir: folder for ``scores.sqlite`` (created if missing).

    Attributes:
        folder, path: the folder and the database file.
        disabled: None while the cache works; else why it was disabled (e.g.
            ``"database disk image is malformed"``).
    """

    def __init__(self, cache_dir: str | os.PathLike):
        self.folder = Path(cache_dir).expanduser()
        self.path = self.folder / "scores.sqlite"
        self.disabled: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.folder.exists() and not self.folder.is_dir():
            self._disable(f"{str(self.folder)!r} is a file, not a folder", "pass a folder as --cache-dir (cache_dir=)")
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._disable(f"cannot create its folder {str(self.folder)!r}: {exc.strerror or exc}",
                          "pass another --cache-dir (cache_dir=)")
            return
        if not self.path.exists() and not os.access(self.folder, os.W_OK):
            self._disable(f"its folder {str(self.folder)!r} is not writable",
                          "make the folder writable, or pass another --cache-dir (cache_dir=)")
            return
        try:
            self._db = sqlite3.connect(self.path, timeout=120, check_same_thread=False, isolation_level=None)
            self._setup()  # damage elsewhere in the file shows at the first read or write that meets it
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)

    @property
    def usable(self) -> bool:
        """Whether the cache still works (False once a failure disabled it)."""
        return self.disabled is None

    def _fix(self, exc: BaseException) -> str:
        text = str(exc).lower()
        if "readonly" in text or "read-only" in text or "permission" in text:
            return "make it and its folder writable, move it, or pass another --cache-dir (cache_dir=)"
        if "full" in text or getattr(exc, "errno", None) == 28:
            return "free space, move or delete that file, or pass another --cache-dir (cache_dir=)"
        return "move or delete that file, or pass another --cache-dir (cache_dir=)"

    def _fail(self, exc: BaseException) -> None:
        """Disable the cache after ``exc`` (an ``sqlite3.Error`` or ``OSError``)."""
        reason = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
        self._disable(reason, self._fix(exc))

    def _disable(self, reason: str, fix: str) -> None:
        """Close the database, remember ``reason`` and warn once (later failures are silent)."""
        if self.disabled is not None:
            return
        self.disabled = " ".join(reason.split())  # one line
        self._close_db()
        warnings.warn(f"score cache {self.path} is unusable ({self.disabled}); scoring without it: {fix}",
                      CacheUnusableWarning, stacklevel=4)

    def _setup(self, attempts: int = 200) -> None:
        """Switch to WAL and create the tables; retried while another process holds the lock
        (the journal-mode switch can fail with "database is locked" without waiting).

        Raises:
            sqlite3.Error: the database cannot be set up (the caller disables the cache).
        """
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
        """``key -> (value, n_tokens)`` for those ``keys`` that are present.

        Args:
            keys: query keys (:meth:`CachedRunner.key`), repeats allowed.

        Returns:
            The keys found; ``{}`` when the cache is disabled, or when this read fails (which
            disables it: nothing read by a failing lookup is used), or when a value read is not
            a probability in [0, 1] or a token count not a non-negative integer (damage SQLite
            itself does not notice: the cache is disabled the same way). Never raises.
        """
        found: dict[str, tuple[float, int | None]] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            if self._db is None:
                return {}
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    for k, v, n in self._db.execute(f"SELECT key, value, n_tokens FROM scores WHERE key IN ({marks})",
                                                    chunk):
                        found[k] = (v, n)
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)
                return {}
            bad = next(((k, v) for k, (v, n) in found.items() if not _is_probability(v) or not _is_count(n)), None)
        if bad is not None:  # only finite probabilities are ever stored: anything else is damage
            self._disable(f"a stored score is not a probability in [0, 1] ({bad[1]!r}): the file is damaged",
                          "move or delete that file, or pass another --cache-dir (cache_dir=)")
            return {}
        return found

    def put_many(self, items: dict[str, float | tuple[float, int | None]]) -> None:
        """Store finite values, with their prompt's token count when given (one transaction).

        Args:
            items: key -> value, or key -> ``(value, n_tokens)``; non-finite values are skipped.

        A failing write (read-only file, full disk, damaged database) is rolled back and
        disables the cache (one warning); nothing is raised, and nothing is stored when the
        cache is disabled.
        """
        rows = []
        for k, v in items.items():
            value, n = v if isinstance(v, tuple) else (v, None)
            if np.isfinite(value):
                rows.append((k, float(value), None if n is None else int(n)))
        if not rows:
            return
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany("INSERT OR REPLACE INTO scores (key, value, n_tokens) VALUES (?, ?, ?)",
                                         rows)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)

    def __len__(self) -> int:
        """Scores stored (0 when the cache is disabled, or when counting fails, which disables it)."""
        with self._lock:
            if self._db is None:
                return 0
            try:
                return self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)
                return 0

    def close(self) -> None:
        """Close the database (WAL checkpointed by SQLite when this is its last connection);
        the cache then finds nothing and stores nothing, as a disabled one, without a warning.
        Never raises."""
        with self._lock:
            self._close_db()

    def _close_db(self) -> None:
        """Drop the connection and close it (a failing close is ignored)."""
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass


class CachedRunner(Runner):
    """A :class:`~unieval_local.engine.Runner` that answers cached prompts from a
    :class:`ScoreCache` and scores the rest with ``inner``, storing them.

    Args:
        inner: the runner that scores cache misses.
        cache: the :class:`ScoreCache`.
        config: the run's :class:`~unieval_local.config.RunConfig`; its ``query_context()``,
            ``inner.fingerprint`` (the checkpoint's content) and the evaluator's spec
            (prompt format, answer words) enter every key.
        evaluator: the checkpoint's :class:`~unieval_local.registry.evaluators.Evaluator`.

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
        self.forward = inner.forward
        self.tokenizer_class = inner.tokenizer_class  # signed (never keyed: the files are in the fingerprint)
        self.tokenizer_doubt = inner.tokenizer_doubt
        context = {**config.query_context(), **evaluator.key(), "checkpoint": inner.fingerprint}
        context["fast_forward"] = inner.forward == "fast"  # the forward that runs, not the one asked for
        self._context = json.dumps(context, sort_keys=True)
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

    def chat_prompt(self, messages):
        """The inner runner's (generation is never cached)."""
        return self.inner.chat_prompt(messages)

    def generate(self, prompts: Sequence[str], **kwargs):
        """The inner runner's (generation is never cached)."""
        return self.inner.generate(prompts, **kwargs)

    def distributions(self, prompts: Sequence[str], *, max_length: int) -> list[dict[str, float]] | None:
        """The inner runner's readout distributions (the cache keeps values only)."""
        return self.inner.distributions(prompts, max_length=max_length)

    def cut(self, text: str, n_tokens: int) -> int:
        """The inner runner's cut."""
        return self.inner.cut(text, n_tokens)

    def cut_points(self, text: str, n_tokens: int) -> list[int]:
        """The inner runner's cut points."""
        return self.inner.cut_points(text, n_tokens)

    @property
    def batch_tokens(self) -> int | None:
        """The inner runner's padded-token budget per forward batch (None if it has none)."""
        return self.inner.batch_tokens

    @property
    def max_cells(self) -> int | None:
        """The inner runner's attention budget per forward batch (None if it has none)."""
        return self.inner.max_cells

    def lookup(self, prompts: Sequence[str], *, max_length: int) -> dict[str, tuple[float, int]]:
        """The cached ``(p_yes, n_tokens)`` of those of ``prompts`` the cache holds (counted as
        hits; n_tokens -1 where the cache did not keep it), so a scheduler answers them without
        putting them in a micro-batch."""
        keys = {p: self.key(p, max_length) for p in dict.fromkeys(prompts)}
        found = self.cache.get_many(list(keys.values()))
        out = {p: (float(found[k][0]), -1 if found[k][1] is None else int(found[k][1]))
               for p, k in keys.items() if k in found}
        self.hits += len(out)
        return out

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
