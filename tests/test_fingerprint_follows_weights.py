"""The content fingerprint follows the weights, not the manifest (issue 35, item 4).

A weight file replaced by another of the same size, its manifest kept (a re-run fine-tune
written over the old one), must change the checkpoint's fingerprint, so that the score cache
never answers the old weights' scores. A manifest's SHA-256 is trusted only while the file has
the size, mtime and inode recorded when it was hashed (download, verify, make_test_checkpoint);
otherwise the file is hashed, once per change, remembered in a persistent memo.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import unieval_local.hashing as hashing
from unieval_local import Scorer
from unieval_local.models.checkpoints import fingerprint_checkpoint
from unieval_local.models.files import MANIFEST_NAME

from make_test_checkpoint import build_test_checkpoint

RECORD = {"target": "The council approved the new budget on Monday.",
          "source": "On Monday the city council approved the budget for next year after a long debate."}
WEIGHTS = "model.safetensors"


@pytest.fixture(autouse=True)
def _own_memo(tmp_path, monkeypatch):
    """A persistent hash memo of this test's own, and an empty in-process memo."""
    monkeypatch.setenv("UNIEVAL_LOCAL_HASH_MEMO", str(tmp_path / "memo" / "file_sha256.json"))
    memo = getattr(hashing, "_MEMO", None)
    if memo is not None:
        monkeypatch.setattr(hashing, "_MEMO", {})


@pytest.fixture(scope="module")
def two_stand_ins(tmp_path_factory, shared_data) -> tuple[Path, Path]:
    """Two stand-ins of the same shapes and tokenizer, other seeds (so other weights, same sizes)."""
    root = tmp_path_factory.mktemp("two")
    a = build_test_checkpoint(root / "a" / "unieval-sum", data_dir=shared_data, seed=0, manifest=True)
    b = build_test_checkpoint(root / "b" / "unieval-sum", data_dir=shared_data, seed=1, manifest=True)
    assert (a / WEIGHTS).stat().st_size == (b / WEIGHTS).stat().st_size
    assert (a / WEIGHTS).read_bytes() != (b / WEIGHTS).read_bytes()
    return a, b


def count_hashes(monkeypatch) -> list[str]:
    """Every file :func:`unieval_local.hashing.sha256_file` reads from now on, by name."""
    calls: list[str] = []
    real = hashing.sha256_file

    def counting(path, *args, **kwargs):
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(hashing, "sha256_file", counting)
    return calls


def score_once(folder: Path, cache_dir: Path | None) -> tuple[float, str, int]:
    """(score, signature fingerprint, score-cache hits) of :data:`RECORD` with a new Scorer."""
    s = Scorer(model=folder, cache_dir=cache_dir, device="cpu")
    result = s.score([RECORD], aspect="consistency")
    hits, _ = s.engine.cache_counts()
    return result.examples[0].value, result.signature.fingerprint, hits


def write_over(src: Path, dst: Path, how: str) -> None:
    """``in-place``: rewrite ``dst``'s bytes (same inode); ``renamed``: a new file renamed over it."""
    if how == "in-place":
        shutil.copyfile(src, dst)
    else:
        shutil.copyfile(src, dst.with_name(dst.name + ".tmp"))
        os.replace(dst.with_name(dst.name + ".tmp"), dst)


@pytest.mark.parametrize("how", ["in-place", "renamed"])
def test_replaced_weights_of_same_size_change_fingerprint_and_miss_the_cache(tmp_path, two_stand_ins, how):
    a, b = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "run" / "unieval-sum", copy_function=shutil.copy2)
    from make_test_checkpoint import write_test_manifest

    write_test_manifest(folder)  # the fine-tune as first written: its manifest vouches for its files
    cache = tmp_path / "cache"
    old_score, old_fp, _ = score_once(folder, cache)
    assert score_once(folder, cache)[2] == 1  # the cache answers for unchanged weights
    manifest_before = (folder / MANIFEST_NAME).read_bytes()

    write_over(b / WEIGHTS, folder / WEIGHTS, how)  # the re-run fine-tune, written over the old one
    assert (folder / MANIFEST_NAME).read_bytes() == manifest_before
    new_score, new_fp, hits = score_once(folder, cache)
    fresh_score, fresh_fp, _ = score_once(b, None)

    assert new_fp != old_fp, "same fingerprint for other weights"
    assert new_fp == fresh_fp
    assert hits == 0, "the score cache answered for the old weights"
    assert abs(fresh_score - old_score) > 1e-3  # the two stand-ins do score apart
    # the process-wide model memo (load_t5_model) is keyed on the content fingerprint too: the new
    # Scorer is never handed the model loaded from the old file
    assert new_score == pytest.approx(fresh_score, abs=1e-6), (old_score, new_score, fresh_score)


def test_persistent_memo_answers_across_processes(tmp_path, two_stand_ins, monkeypatch):
    a, _ = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "copied" / "unieval-sum")  # new inodes and mtimes: no stat trusted
    calls = count_hashes(monkeypatch)
    first = fingerprint_checkpoint(folder)
    assert WEIGHTS in calls  # nothing vouches for the copied files: hashed
    memo_file = Path(os.environ["UNIEVAL_LOCAL_HASH_MEMO"])
    assert memo_file.is_file() and str((folder / WEIGHTS).resolve()) in json.loads(memo_file.read_text())["files"]

    monkeypatch.setattr(hashing, "_MEMO", {})  # a new process: only the file remembers
    calls.clear()
    assert fingerprint_checkpoint(folder) == first
    assert calls == [], f"hashed again: {calls}"

    # an old manifest (no stat fields): trusted for nothing, hashed once, then remembered
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    for entry in manifest["files"].values():
        entry.pop("mtime_ns", None), entry.pop("inode", None)
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    monkeypatch.setattr(hashing, "_MEMO", {})
    assert fingerprint_checkpoint(folder) == first and calls == []

    # replaced by a file of the same size AND the same mtime (rsync -t): the inode tells
    st = (folder / WEIGHTS).stat()
    data = bytearray((folder / WEIGHTS).read_bytes())
    data[-1] ^= 0xFF
    tmp = folder / "weights.tmp"
    tmp.write_bytes(bytes(data))
    os.replace(tmp, folder / WEIGHTS)
    os.utime(folder / WEIGHTS, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (folder / WEIGHTS).stat().st_ino != st.st_ino
    assert fingerprint_checkpoint(folder) != first and calls == [WEIGHTS]


def test_a_corrupt_or_unwritable_memo_warns_once_and_recomputes(tmp_path, two_stand_ins, monkeypatch):
    a, _ = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "copied" / "unieval-sum")
    expected = fingerprint_checkpoint(folder, file_hash=hashing.sha256_file)
    memo_file = Path(os.environ["UNIEVAL_LOCAL_HASH_MEMO"])
    memo_file.parent.mkdir(parents=True)
    memo_file.write_text("{not json")
    monkeypatch.setattr(hashing, "_MEMO_WARNED", False)
    with pytest.warns(RuntimeWarning, match="file-hash memo") as caught:
        assert fingerprint_checkpoint(folder) == expected
        monkeypatch.setattr(hashing, "_MEMO", {})
        assert fingerprint_checkpoint(folder) == expected
    assert len([w for w in caught if "file-hash memo" in str(w.message)]) == 1
    assert "sha256" in memo_file.read_text()  # repaired at the next write

    monkeypatch.setenv("UNIEVAL_LOCAL_HASH_MEMO", str(tmp_path / "a-file" / "memo.json"))
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setattr(hashing, "_MEMO", {})
    monkeypatch.setattr(hashing, "_MEMO_WARNED", False)
    with pytest.warns(RuntimeWarning, match="file-hash memo"):
        assert fingerprint_checkpoint(folder) == expected


def test_verify_records_the_stat_and_a_touch_rehashes_once(tmp_path, two_stand_ins, monkeypatch):
    from unieval_local.models.verify import verify_checkpoint

    a, _ = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "staged" / "unieval-sum")  # copied: the recorded stat is not theirs
    memo_off = "off"
    monkeypatch.setenv("UNIEVAL_LOCAL_HASH_MEMO", memo_off)  # only the manifest may spare a hash here
    calls = count_hashes(monkeypatch)
    before = fingerprint_checkpoint(folder)
    assert WEIGHTS in calls

    (report,) = verify_checkpoint(folder)
    assert report.ok, report.messages
    entry = json.loads((folder / MANIFEST_NAME).read_text())["files"][WEIGHTS]
    st = (folder / WEIGHTS).stat()
    assert (entry["size"], entry["mtime_ns"], entry["inode"]) == (st.st_size, st.st_mtime_ns, st.st_ino)

    monkeypatch.setattr(hashing, "_MEMO", {})
    calls.clear()
    assert fingerprint_checkpoint(folder) == before and calls == []  # the verified stat vouches

    os.utime(folder / WEIGHTS, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touch: same bytes
    assert fingerprint_checkpoint(folder) == before
    assert calls == [WEIGHTS], calls  # one re-hash, of the touched file only


def test_verify_on_a_read_only_folder_passes_without_recording(tmp_path, two_stand_ins, monkeypatch):
    import unieval_local.models.manifest as manifest_module
    from unieval_local.models.verify import verify_checkpoint

    a, _ = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "ro" / "unieval-sum")
    manifest = (folder / MANIFEST_NAME).read_bytes()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):  # root writes anywhere: the write fails as it would for a user

            def refuse(path, data):
                raise PermissionError(13, "Permission denied", str(path.parent))

            monkeypatch.setattr(manifest_module, "_write_json_atomic", refuse)
        (report,) = verify_checkpoint(folder)
    finally:
        folder.chmod(0o755)
    assert report.ok, report.messages
    assert (folder / MANIFEST_NAME).read_bytes() == manifest
    assert any("not recorded" in m and "PermissionError" in m for m in report.messages), report.messages


def test_new_content_with_the_old_mtime_restored_still_changes_the_fingerprint(tmp_path, two_stand_ins):
    """Size, mtime and inode all as recorded (new bytes written in place, the mtime set back): the
    ctime, which no user-space call sets, tells the file changed; scoring warns that the weights
    are not those of the manifest."""
    import warnings

    a, b = two_stand_ins
    folder = shutil.copytree(a, tmp_path / "forged" / "unieval-sum", copy_function=shutil.copy2)
    from make_test_checkpoint import write_test_manifest

    write_test_manifest(folder)
    old_fp = fingerprint_checkpoint(folder)
    before = (folder / WEIGHTS).stat()
    with open(folder / WEIGHTS, "r+b") as fh:  # same inode, same size
        fh.write((b / WEIGHTS).read_bytes())
    os.utime(folder / WEIGHTS, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = (folder / WEIGHTS).stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new_fp = fingerprint_checkpoint(folder)
    assert new_fp != old_fp and new_fp == fingerprint_checkpoint(b)
    assert any(f"{WEIGHTS} differs from the SHA-256 its {MANIFEST_NAME} records" in str(w.message)
               and "delete its unieval_manifest.json" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]


_MEMO_WRITER = """
import sys, time
from pathlib import Path
from unieval_local.hashing import memo_sha256_file
start, files = float(sys.argv[1]), sys.argv[2:]
while time.time() < start:  # all four begin together
    time.sleep(0.001)
for f in files:
    memo_sha256_file(Path(f))
"""


def test_four_processes_on_one_memo_lose_no_entry(tmp_path):
    """Issue 40: four processes adding 5 entries each to one memo file kept 17 of 20 (each read the
    memo, added its entry and replaced the file: a write between another's read and write was lost).
    The read-merge-write now runs under a file lock: all 20 entries are there."""
    import subprocess
    import sys
    import time

    memo_file = tmp_path / "memo" / "file_sha256.json"
    groups = []
    for p in range(4):
        files = []
        for i in range(5):
            f = tmp_path / "files" / f"p{p}-{i}.bin"
            f.parent.mkdir(exist_ok=True)
            f.write_bytes(f"{p}-{i}".encode() * 1000)
            files.append(str(f))
        groups.append(files)
    env = {**os.environ, "UNIEVAL_LOCAL_HASH_MEMO": str(memo_file),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", _MEMO_WRITER, str(start), *files], env=env) for files in groups]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    entries = json.loads(memo_file.read_text())["files"]
    expected = {str(Path(f).resolve()): hashing.sha256_file(f) for files in groups for f in files}
    assert {k: v["sha256"] for k, v in entries.items()} == expected
