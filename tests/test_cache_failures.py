"""A score cache that fails never stops a run: damaged file, not a database, read-only, full
disk. Each run goes on WITHOUT the cache after one warning naming the file, the reason and the
fix, with the same scores as without a cache (Python API and CLI)."""

from __future__ import annotations

import gc
import json
import os
import random
import warnings
from pathlib import Path

import pytest

from unieval_local import Scorer
from unieval_local.models.cache import CacheUnusableWarning, ScoreCache
from unieval_local.cli import main

from conftest import FakeRunner, fake_factory

DATA = [{"target": f"Sentence number {i}. Another one {i % 5}.", "source": "The document."} for i in range(40)]
MORE = [{"target": f"A brand new claim {i}.", "source": "The document."} for i in range(300)]


def value(prompt: str) -> float:  # a deterministic fake score per prompt
    return (sum(map(ord, prompt)) % 997) / 997


def scorer(ckpt, cache_dir=None):
    inner = FakeRunner(value)
    return Scorer(model=ckpt, runner_factory=fake_factory(inner), cache_dir=cache_dir), inner


def scores(s, data):
    return [e.value for e in s.score(data, aspect="consistency").examples]


def populate(ckpt, cache_dir: Path, data=DATA, padding: int = 0) -> None:
    """A real cache holding ``data``'s queries (and ``padding`` unrelated rows), closed (WAL merged)."""
    s, _ = scorer(ckpt, cache_dir)
    scores(s, data)
    if padding:
        s.engine.cache.put_many({f"pad-{i:06d}": i / padding for i in range(padding)})
    s.engine.cache.close()
    del s
    gc.collect()
    assert (cache_dir / "scores.sqlite").is_file() and not (cache_dir / "scores.sqlite-wal").exists()


def damage(path: Path) -> None:
    """Random bytes over the middle of the file: every page but the header page and the last tenth."""
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 20 * page, len(data)  # a real, many-page cache
    rng = random.Random(1234)
    end = int(len(data) * 0.9)
    data[page:end] = bytes(rng.randrange(256) for _ in range(end - page))
    path.write_bytes(bytes(data))


def only_cache_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheUnusableWarning)]


def query_only_after_setup(monkeypatch):
    """SIMULATED read-only file (we run as root, who ignores file permissions): after the cache
    opens, ``PRAGMA query_only`` makes every write fail with sqlite's own "attempt to write a
    readonly database", as a read-only file does; reads still work."""
    real = ScoreCache._setup

    def setup(self, *a, **kw):
        real(self, *a, **kw)
        self._db.execute("PRAGMA query_only=ON")

    monkeypatch.setattr(ScoreCache, "_setup", setup)


def page_limit_after_setup(monkeypatch):
    """SIMULATED full disk: ``PRAGMA max_page_count`` at the file's current size makes the first
    write that needs a new page fail with sqlite's own SQLITE_FULL "database or disk is full"."""
    real = ScoreCache._setup

    def setup(self, *a, **kw):
        real(self, *a, **kw)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count={pages}")

    monkeypatch.setattr(ScoreCache, "_setup", setup)


def break_cache(kind: str, ckpt, cache_dir: Path, monkeypatch) -> str:
    """Make ``cache_dir`` fail in the way ``kind`` names; returns the reason the warning must give."""
    db = cache_dir / "scores.sqlite"
    if kind == "damaged":
        populate(ckpt, cache_dir, padding=4000)
        damage(db)
        return "database disk image is malformed"
    if kind == "not-a-database":
        cache_dir.mkdir(parents=True)
        db.write_text("this is a text file, not an SQLite database\n" * 200)
        return "file is not a database"
    if kind == "read-only-simulated":
        populate(ckpt, cache_dir)
        query_only_after_setup(monkeypatch)
        return "attempt to write a readonly database"
    if kind == "full-disk-simulated":
        populate(ckpt, cache_dir)
        page_limit_after_setup(monkeypatch)
        return "database or disk is full"
    raise AssertionError(kind)


KINDS = ["damaged", "not-a-database", "read-only-simulated", "full-disk-simulated"]


@pytest.mark.parametrize("kind", KINDS)
def test_python_api_scores_without_a_failing_cache_and_warns_once(kind, fake_ckpt, tmp_path, monkeypatch):
    expected = scores(scorer(fake_ckpt)[0], DATA + MORE)  # no cache at all
    cache_dir = tmp_path / "cache"
    reason = break_cache(kind, fake_ckpt, cache_dir, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s, inner = scorer(fake_ckpt, cache_dir)
        known = scores(s, DATA)  # all in the cache (read before any write)
        first = scores(s, DATA + MORE)  # new queries: their write fails where writes fail
        again = scores(s, DATA + MORE)  # a disabled cache does not warn again
    assert known == expected[:len(DATA)] and first == expected and again == expected
    messages = only_cache_warnings(caught)
    assert len(messages) == 1, messages
    assert messages[0] == (f"score cache {cache_dir / 'scores.sqlite'} is unusable ({reason}); scoring without it: "
                           + ("make it and its folder writable, move it, or pass another --cache-dir (cache_dir=)"
                              if "readonly" in reason else
                              "free space, move or delete that file, or pass another --cache-dir (cache_dir=)"
                              if "full" in reason else "move or delete that file, or pass another --cache-dir "
                              "(cache_dir=)"))
    assert s.engine.cache.disabled == reason
    if kind in ("read-only-simulated", "full-disk-simulated"):  # reads worked until the first failing write
        assert s.cache_stats()["hits"] > 0
    assert len(inner.prompts) >= len(MORE)  # the new queries were scored by the model


READ_ONLY_CHECK = """
import json, sys, warnings
sys.path.insert(0, sys.argv[3])
from conftest import FakeRunner, fake_factory
from test_cache_failures import DATA, MORE, value
from unieval_local import Scorer
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    s = Scorer(model=sys.argv[1], runner_factory=fake_factory(FakeRunner(value)), cache_dir=sys.argv[2])
    got = [e.value for e in s.score(DATA + MORE, aspect="consistency").examples]
print(json.dumps({"scores": got, "warnings": [str(w.message) for w in caught
                                               if w.category.__name__ == "CacheUnusableWarning"]}))
"""


def test_python_api_read_only_cache_by_chmod(fake_ckpt, tmp_path):
    """A REAL read-only cache (chmod 444 file, 555 folder). Root ignores permissions, so as root
    the check runs in a child process as user nobody (setpriv); without setpriv it is skipped."""
    import shutil
    import subprocess
    import sys
    import tempfile

    as_nobody = os.geteuid() == 0
    if as_nobody and not shutil.which("setpriv"):
        pytest.skip("running as root (permissions are ignored) and setpriv is not there to drop them")
    base = Path(tempfile.mkdtemp(prefix="ro-cache-")) if as_nobody else tmp_path
    try:
        base.chmod(0o755)
        ckpt = base / "ckpt" / "unieval-sum"
        shutil.copytree(fake_ckpt, ckpt)
        cache_dir = base / "cache"
        populate(ckpt, cache_dir)
        expected = scores(scorer(ckpt)[0], DATA + MORE)
        (cache_dir / "scores.sqlite").chmod(0o444)
        cache_dir.chmod(0o555)
        tests = str(Path(__file__).parent)
        cmd = [sys.executable, "-c", READ_ONLY_CHECK, str(ckpt), str(cache_dir), tests]
        if as_nobody:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
                                   "UNIEVAL_LOCAL_HASH_MEMO": "off"})  # the score cache alone is under test
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout.splitlines()[-1])
        assert result["scores"] == expected
        assert len(result["warnings"]) == 1, result["warnings"]
        assert result["warnings"][0].startswith(f"score cache {cache_dir / 'scores.sqlite'} is unusable (attempt "
                                                "to write a readonly database); scoring without it: make it")
    finally:
        if (base / "cache").exists():
            (base / "cache").chmod(0o755)
        if as_nobody:
            shutil.rmtree(base, ignore_errors=True)


def test_a_working_cache_does_not_warn(fake_ckpt, tmp_path):
    populate(fake_ckpt, tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheUnusableWarning)
        s, inner = scorer(fake_ckpt, tmp_path / "cache")
        scores(s, DATA)
    assert inner.prompts == [] and s.engine.cache.disabled is None


# ----------------------------------------------------------------------------- the CLI
def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli_args(ckpt, src, out, *extra):
    return ["score", str(src), "--model", str(ckpt), "--aspect", "consistency", "--max-length", "64",
            "--no-progress", "-o", str(out), *extra]


@pytest.mark.parametrize("kind", KINDS)
def test_cli_exits_0_with_one_warning_line_and_the_same_output(kind, tiny_ckpt, tmp_path, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", **r} for i, r in enumerate(DATA[:12] + MORE[:200])])
    ref = tmp_path / "ref.jsonl"
    assert main(cli_args(tiny_ckpt, src, ref)) == 0  # no cache
    cache_dir = tmp_path / "cache"
    if kind == "damaged":
        cache_dir.mkdir()
        c = ScoreCache(cache_dir)
        c.put_many({f"pad-{i:06d}": i / 4000 for i in range(4000)})
        c.close()
    if kind in ("damaged", "read-only-simulated", "full-disk-simulated"):  # a real cache of half the records
        half = write_jsonl(tmp_path / "half.jsonl", [{"id": f"r{i}", **r} for i, r in enumerate(DATA[:12])])
        assert main(cli_args(tiny_ckpt, half, tmp_path / "half.out.jsonl", "--cache-dir", str(cache_dir))) == 0
        gc.collect()
    if kind == "damaged":
        assert not (cache_dir / "scores.sqlite-wal").exists()  # closed: every page is in the file
        damage(cache_dir / "scores.sqlite")
        reason = "database disk image is malformed"
    elif kind == "not-a-database":
        cache_dir.mkdir()
        (cache_dir / "scores.sqlite").write_text("not a database\n" * 300)
        reason = "file is not a database"
    elif kind == "read-only-simulated":
        query_only_after_setup(monkeypatch)
        reason = "attempt to write a readonly database"
    else:
        page_limit_after_setup(monkeypatch)
        reason = "database or disk is full"
    capsys.readouterr()
    out = tmp_path / "out.jsonl"
    assert main(cli_args(tiny_ckpt, src, out, "--cache-dir", str(cache_dir))) == 0
    err = capsys.readouterr().err
    warned = [x for x in err.splitlines() if "warning" in x]
    assert len(warned) == 1, err
    assert warned[0].startswith(f"unieval-local: warning: score cache {cache_dir / 'scores.sqlite'} is unusable "
                                f"({reason}); scoring without it: "), warned
    assert "Traceback" not in err and "sqlite3." not in err
    assert f"; disabled ({cache_dir / 'scores.sqlite'}: {reason}): scored without it" in err
    if kind in ("damaged", "not-a-database"):  # nothing reused: byte for byte the run without a cache
        assert out.read_text() == ref.read_text()
    else:  # reads worked until the first write failed: reused values carry float32 batch noise (README)
        got, want = [json.loads(x) for x in out.read_text().splitlines()], [json.loads(x) for x in
                                                                             ref.read_text().splitlines()]
        assert [x["key"] for x in got] == [x["key"] for x in want]
        assert max(abs(a["scores"]["consistency"] - b["scores"]["consistency"]) for a, b in zip(got, want)) < 1e-6
        assert "score cache: 0 queries reused" not in err  # the cache did answer some before it failed


def test_cli_report_says_the_cache_was_disabled(tiny_ckpt, tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"summary": "A claim. Another claim.", "input": "A document."}])
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "scores.sqlite").write_text("not a database\n" * 300)
    rc = main(["report", "--format", "summ", str(src), "--model", str(tiny_ckpt), "--no-progress",
               "--cache-dir", str(cache_dir), "-o", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc in (0, 1), err
    assert len([x for x in err.splitlines() if x.startswith("unieval-local: warning: score cache")]) == 1, err
    assert f"disabled ({cache_dir / 'scores.sqlite'}: file is not a database): scored without it" in err


@pytest.mark.parametrize("stored", [-1.1885954387096992e148, 1.5, "garbage"])  # (NaN reads back the same way)
def test_a_stored_value_that_is_no_probability_disables_the_cache(stored, tmp_path, fake_ckpt):
    """Damage SQLite does not see (an overwritten REAL): the value must never become a score."""
    import sqlite3

    cache = tmp_path / "cache"
    populate(fake_ckpt, cache)
    db = sqlite3.connect(cache / "scores.sqlite")
    key = db.execute("SELECT key FROM scores LIMIT 1").fetchone()[0]
    db.execute("UPDATE scores SET value = ? WHERE key = ?", (stored, key))
    db.commit()
    db.close()
    clean, _ = scorer(fake_ckpt)
    want = scores(clean, DATA)
    s, inner = scorer(fake_ckpt, cache)
    with pytest.warns(CacheUnusableWarning, match=r"a stored score is not a probability in \[0, 1\].*the file is "
                                                  r"damaged"):
        got = scores(s, DATA)
    assert got == want and all(0 <= v <= 1 for v in got)
    assert s.engine.cache.disabled and inner.prompts  # every query scored by the model
