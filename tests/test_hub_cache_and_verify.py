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

from conftest import ReposHub

from unieval_local.cli import EXIT_CHECKPOINT, EXIT_ROWS_FAILED, main
from unieval_local.errors import CheckpointError, CheckpointNotFoundError
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


# ----------------------------------------------------------------------------- verify
def test_verify_reads_a_home_staged_with_hhems_foundation(tmp_path, shared_data, capsys):
    """download stages flan-t5-base/ beside hhem-2.1-open/; verify failed it: "folder name 'flan-t5-base' is
    not a checkpoint name"."""
    from make_test_checkpoint import build_hhem_checkpoint

    from unieval_local.models.download import download_checkpoint

    src = build_hhem_checkpoint(tmp_path / "src" / "hhem-2.1-open", data_dir=shared_data, init_factor=0.3)
    hub = ReposHub({"vectara/hallucination_evaluation_model": src, "google/flan-t5-base": src.parent / "flan-t5-base"})
    download_checkpoint("hhem-2.1-open", tmp_path / "home", client=hub)
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["flan-t5-base", "hhem-2.1-open"]
    assert main(["verify", str(tmp_path / "home")]) == 0
    out = capsys.readouterr().out
    assert "not a checkpoint name" not in out
    assert (f"{tmp_path / 'home' / 'flan-t5-base'}: OK\n  ok   the foundation model of hhem-2.1-open "
            "(google/flan-t5-base: its tokenizer and T5 config), as `unieval-local download --checkpoint "
            "hhem-2.1-open` stages it beside hhem-2.1-open/\n") in out
    assert "  ok   tokenizer.json sha256 matches\n" in out and f"{tmp_path / 'home' / 'hhem-2.1-open'}: OK\n" in out


def test_verify_says_a_folder_holds_another_evaluators_checkpoint(tiny_ckpt, tmp_path, capsys):
    folder = shutil.copytree(tiny_ckpt, tmp_path / "home" / "unieval-sum")
    config = json.loads((folder / "config.json").read_text())
    config["unieval_local_evaluator"] = "unieval-dialog"
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["verify", str(tmp_path / "home")]) == EXIT_ROWS_FAILED  # passed without a word
    out = capsys.readouterr().out
    assert ("  FAIL folder 'unieval-sum' holds another evaluator's checkpoint: 'unieval-dialog' (its config.json) is "
            "unieval-dialog, not unieval-sum, so $UNIEVAL_LOCAL_HOME lookups of unieval-sum would get "
            "unieval-dialog's weights (refused when scoring); rename it to 'unieval-dialog', or stage unieval-sum "
            "there (unieval-local download --checkpoint unieval-sum)\n") in out


def test_verify_as_hhem_advises_what_fits_hhem(tiny_ckpt, capsys):
    assert main(["verify", str(tiny_ckpt), "--evaluator", "hhem-2.1-open"]) == EXIT_ROWS_FAILED
    out = capsys.readouterr().out
    assert "    unieval-local download --checkpoint hhem-2.1-open --to DIR\n" in out
    assert "--checkpoint unieval-sum" not in out  # was: download unieval-sum, for HHEM's missing foundation
    assert "make_test_checkpoint.py out/home/hhem-2.1-open --layout hhem --evaluator hhem-2.1-open" in out


def test_absent_evaluators_are_one_summary_line(tiny_ckpt, capsys, monkeypatch):
    import unieval_local.cli.verify as cli_verify
    from unieval_local.models.known_answers import KnownAnswerCheck
    from unieval_local.registry.evaluators import EVALUATORS

    monkeypatch.setattr(cli_verify, "known_answers_check", lambda folder, sets, **kw: KnownAnswerCheck("unieval-sum"))
    main(["verify", str(tiny_ckpt), "--known-answers"])
    out = capsys.readouterr().out.splitlines()
    absent = [n for n in EVALUATORS if n not in ("unieval-sum", "unieval-dialog", "unieval-fact",
                                                 "minicheck-flan-t5-large")]
    assert len(absent) == 13  # 11 + Themis and Prometheus 2 (issue 44)
    assert out[-1] == ("13 evaluators not staged here have no known answers either (no per-example scores of their "
                       f"official weights are shipped; not checked): {', '.join(absent)}")
    assert sum("hhem-2.1-open" in line for line in out) == 1  # one line, not one per absent evaluator


def test_nothing_compared_is_said_and_documented(tiny_ckpt, capsys):
    assert not (tiny_ckpt / "unieval_manifest.json").exists()
    assert main(["verify", str(tiny_ckpt)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"{tiny_ckpt}: OK, no checksums compared (no unieval_manifest.json, not a Hugging Face cache "
                     "snapshot): the files load and fit, but nothing says they are the published ones")
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert ("A folder that records no checksums (no unieval_manifest.json, not a Hugging Face cache snapshot) can "
            "pass: exit 0, its first line says 'no checksums compared'.") in helptext
    page = " ".join((Path(__file__).resolve().parents[1] / "docs" / "exit-status.md").read_text().split())
    assert "`verify`: a check failed, or a manifest that is not valid JSON; 0 also when no checksum was compared" in page


def test_a_manifest_that_is_not_json_is_said(tiny_ckpt, tmp_path, capsys):
    folder = shutil.copytree(tiny_ckpt, tmp_path / "unieval-sum")
    (folder / "unieval_manifest.json").write_text('{\n  "checkpoint": "unieval-sum",\n  "files": {oops\n')
    assert main(["verify", str(folder)]) == EXIT_ROWS_FAILED  # was: treated as absent, exit 0
    out = capsys.readouterr().out
    assert ("  FAIL unieval_manifest.json is not valid JSON (line 3): Expecting property name enclosed in double "
            "quotes; verify cannot compare checksums: stage the checkpoint again (unieval-local download), or, for "
            "weights of your own, delete unieval_manifest.json\n") in out
    assert "no unieval_manifest.json" not in out


# ----------------------------------------------------------------------------- --model path typos
def test_a_model_path_typo_gets_a_did_you_mean_and_no_hub_attempt(tiny_ckpt, tmp_path, monkeypatch, capsys):
    """``--model out/tk`` where out/tck exists was tried as the hub repository 'out/tk'."""
    import unieval_local.models.checkpoints as checkpoints

    shutil.copytree(tiny_ckpt, tmp_path / "out" / "tck")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checkpoints, "_from_hf_cache", lambda *a: pytest.fail("looked up as a hub id"))
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "a b.", "source": "a b c."}) + "\n")
    rc = main(["score", str(src), "--model", "out/tk", "--aspect", "consistency", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == EXIT_CHECKPOINT
    assert "checkpoint folder 'out/tk' does not exist; did you mean 'out/tck'?" in err
    with pytest.raises(CheckpointNotFoundError, match=r"^checkpoint folder 'out/zzzzz' does not exist; 'out' holds "
                                                      r"no folder of a close name$"):
        checkpoints.resolve_checkpoint("unieval-sum", "out/zzzzz")
    assert not checkpoints._looks_local("MingZhong/unieval-sum")  # no folder MingZhong/ here: a hub id


def test_a_link_to_nothing_in_a_folder_of_ones_own_says_to_restore_it_not_to_download(tmp_path, tiny_ckpt, capsys):
    """A generated or fine-tuned folder was never downloaded: the advice is to restore the file (issue 40's
    fresh-user trial read "download the checkpoint again: stage the folder again")."""
    import shutil

    from unieval_local.cli import main

    mine = tmp_path / "mine"
    shutil.copytree(tiny_ckpt, mine)
    (mine / "tokenizer.json").unlink(missing_ok=True)
    (mine / "tokenizer.json").symlink_to("/nonexistent-unieval")
    assert main(["verify", str(mine)]) == 1
    out = capsys.readouterr().out
    assert ("tokenizer.json is a link to a missing file /nonexistent-unieval; restore what the link points to, or "
            "replace the link with the file itself") in out
    assert "download" not in out.split("tokenizer.json is a link")[1].split("\n")[0]


def test_verify_of_a_folder_that_does_not_exist_offers_the_close_one(tmp_path, tiny_ckpt, capsys):
    import shutil

    from unieval_local.cli import main

    shutil.copytree(tiny_ckpt, tmp_path / "tck")
    assert main(["verify", str(tmp_path / "tk")]) == 1
    assert f"{tmp_path / 'tk'} does not exist; did you mean '{tmp_path / 'tck'}'?" in capsys.readouterr().out
