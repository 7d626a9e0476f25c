"""Checkpoint folders and ``unieval-local verify`` (issue 40, turn 6: no silent wrong number).

A Hugging Face cache snapshot whose blob was deleted is named by its file, not the blob, and refused as
a checkpoint error (verify: exit 1; score: exit 3, the checkpoint status); verify reads a home staged by
``download`` (HHEM's foundation ``flan-t5-base/`` beside it), says when a folder holds another evaluator's
checkpoint, advises what fits the named evaluator, says when nothing was compared, and says when a
manifest is not JSON; identity words say what was checked; a ``--model`` path typo gets a did-you-mean.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from unieval_local.cli import EXIT_CHECKPOINT, EXIT_ROWS_FAILED, main
from unieval_local.errors import CheckpointError
from unieval_local.models.manifest import git_blob_sha1

SNAP_REV = "a" * 40


def make_snapshot(src: Path, cache: Path, repo: str = "models--MingZhong--unieval-sum") -> Path:
    """``src``'s files as an HF cache snapshot: each file a relative link into ``../../blobs/<etag>``."""
    snap, blobs = cache / repo / "snapshots" / SNAP_REV, cache / repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir(exist_ok=True)
    for p in sorted(src.iterdir()):
        if p.name == "unieval_manifest.json":
            continue
        etag = hashlib.sha256(p.read_bytes()).hexdigest() if p.suffix in (".safetensors", ".model") \
            else git_blob_sha1(p)
        shutil.copyfile(p, blobs / etag)
        (snap / p.name).symlink_to(Path("../../blobs") / etag)
    return snap


@pytest.fixture
def broken_snapshot(tiny_ckpt, tmp_path) -> tuple[Path, str]:
    """A snapshot of the stand-in whose tokenizer.json blob was deleted; (snapshot, the link's target)."""
    snap = make_snapshot(tiny_ckpt, tmp_path / "hub")
    target = (snap / "tokenizer.json").readlink()
    (snap / "tokenizer.json").resolve().unlink()
    return snap, str(target)


def test_verify_names_the_file_of_a_deleted_blob(broken_snapshot, capsys):
    snap, target = broken_snapshot
    assert main(["verify", str(snap)]) == EXIT_ROWS_FAILED  # was a FileNotFoundError traceback
    out = capsys.readouterr().out
    assert (f"  FAIL checkpoint folder {str(snap)!r}: tokenizer.json is a link to a missing blob {target}; "
            "download the checkpoint again: unieval-local download --checkpoint unieval-sum --to DIR "
            "(or huggingface-cli download MingZhong/unieval-sum to refill the Hugging Face cache)\n") in out
    assert target.startswith("../../blobs/") and len(target) == len("../../blobs/") + 40


def test_score_on_a_deleted_blob_is_a_checkpoint_error(broken_snapshot, tmp_path, capsys):
    snap, target = broken_snapshot
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "a b.", "source": "a b c."}) + "\n")
    rc = main(["score", str(src), "--model", str(snap), "--aspect", "consistency", "-o", str(tmp_path / "o.jsonl"),
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == EXIT_CHECKPOINT == 3, err  # was 2, the usage status, naming the blob's path
    assert f"tokenizer.json is a link to a missing blob {target}" in err
    assert "/blobs/" + target.rsplit("/", 1)[1] not in err.replace(target, "")  # the blob only as the link says it


def test_the_loading_code_raises_it_for_every_entry_point(broken_snapshot):
    """resolve_checkpoint (score, serve, the Python API) raises the CheckpointError itself."""
    from unieval_local.models.checkpoints import resolve_checkpoint

    snap, target = broken_snapshot
    with pytest.raises(CheckpointError, match=rf"tokenizer\.json is a link to a missing blob {target}; download"):
        resolve_checkpoint("unieval-sum", str(snap))
