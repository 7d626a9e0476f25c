"""No silent wrong number, turn 6 (issue 40, item 5): the identity word says what was checked.

``verified``: the folder's files were compared with a record of the evaluator's hub files (a
download manifest with the hub id and checksums, an HF cache snapshot of content-named blobs);
``named``: only the folder's own label names the evaluator (``config.json``'s
``unieval_local_evaluator``, as ``make_test_checkpoint.py --evaluator`` writes it); ``unverified``:
nothing does. The signature shows ``identity:named``; the rating report accepts a named
``unieval-sum`` of the official shape as calibrated, with a note saying on what word."""

import json
import shutil
import warnings
from pathlib import Path

from make_test_checkpoint import write_test_manifest
from unieval_local import Scorer
from unieval_local.models.checkpoints import EVALUATOR_KEY, check_identity, named_by, read_identity
from unieval_local.models.manifest import git_blob_sha1, manifest_entries, write_manifest
from unieval_local.models.verify import verify_checkpoint
from unieval_local.registry.evaluators import EVALUATORS
from unieval_local.reports import make_report

from conftest import FakeRunner, fake_factory

SUM = EVALUATORS["unieval-sum"]
REC = {"target": "Alpha rose.", "source": "Alpha rose sharply today.", "references": ["Alpha rose."]}


def stand_in(src: Path, dst: Path, **config) -> Path:
    """``src`` copied as make_test_checkpoint.py writes a stand-in: ``config`` added to its
    config.json, then its test manifest (checksums, no hub id: :func:`write_test_manifest`)."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    write_test_manifest(dst)
    return dst


def staged(src: Path, dst: Path, hub_id: str = "MingZhong/unieval-sum") -> Path:
    """``src`` copied with a manifest as ``unieval-local download`` writes it (hub id, revision,
    each file's SHA-256)."""
    shutil.copytree(src, dst)
    write_manifest(dst, manifest_entries(dst), checkpoint=dst.name, hub_id=hub_id, revision="c" * 40)
    return dst


def test_a_stand_in_named_by_evaluator_is_named_even_with_its_test_manifest(fake_ckpt, tmp_path):
    folder = stand_in(fake_ckpt, tmp_path / "unieval-sum", **{EVALUATOR_KEY: "unieval-sum"})
    manifest = json.loads((folder / "unieval_manifest.json").read_text())
    # what the test manifest records: checksums of the folder's own files, no hub id nor revision
    assert (manifest["hub_id"], manifest["revision"], sorted(manifest["files"])) == \
        (None, None, ["config.json", "tokenizer.json"])
    status, identity = check_identity(folder, SUM)
    assert status == "named"
    assert named_by(identity) == ('identity named by config.json ("unieval_local_evaluator": "unieval-sum"), '
                                  "not verified against a download manifest")
    # config.json's _name_or_path naming a built-in hub id is a label too
    saved = stand_in(fake_ckpt, tmp_path / "saved", _name_or_path="MingZhong/unieval-sum")
    status, identity = check_identity(saved, SUM)
    assert status == "named"
    assert named_by(identity) == ("identity named by config.json (_name_or_path 'MingZhong/unieval-sum'), "
                                  "not verified against a download manifest")


def test_a_download_manifest_with_checksums_is_verified_and_one_without_files_is_named(fake_ckpt, tmp_path):
    folder = staged(fake_ckpt, tmp_path / "unieval-sum")
    assert check_identity(folder, SUM)[0] == "verified"
    bare = tmp_path / "bare"
    shutil.copytree(fake_ckpt, bare)
    (bare / "unieval_manifest.json").write_text(json.dumps({"hub_id": "MingZhong/unieval-sum", "files": {}}))
    status, identity = check_identity(bare, SUM)
    assert status == "named"
    assert named_by(identity) == ("identity named by its download manifest (hub_id 'MingZhong/unieval-sum'), "
                                  "which lists no file checksums, so its files were not verified against it")


def test_an_hf_cache_snapshot_is_verified_only_with_its_blob_links(fake_ckpt, tmp_path):
    repo = tmp_path / "hub" / "models--MingZhong--unieval-sum"
    copied = repo / "snapshots" / ("b" * 40)
    shutil.copytree(fake_ckpt, copied)
    assert check_identity(copied, SUM)[0] == "named"  # only its path names it
    linked = repo / "snapshots" / ("d" * 40)
    linked.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for p in sorted(fake_ckpt.iterdir()):
        etag = git_blob_sha1(p)
        shutil.copyfile(p, repo / "blobs" / etag)
        (linked / p.name).symlink_to(Path("../../blobs") / etag)
    assert check_identity(linked, SUM)[0] == "verified"


def test_the_signature_shows_named_and_verified_adds_nothing(fake_ckpt, tmp_path):
    named = stand_in(fake_ckpt, tmp_path / "named", **{EVALUATOR_KEY: "unieval-sum"})
    verified = staged(fake_ckpt, tmp_path / "unieval-sum")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a named folder is used without a warning
        sig = Scorer(model=named, runner_factory=fake_factory(FakeRunner())).signature("summarization", "coherence")
    assert sig.identity == "named" and "|identity:named|" in str(sig)
    sig = Scorer(model=verified, runner_factory=fake_factory(FakeRunner())).signature("summarization", "coherence")
    assert sig.identity == "verified" and "identity:" not in str(sig)


def test_verify_says_what_names_a_named_folder(fake_ckpt, tmp_path):
    folder = stand_in(fake_ckpt, tmp_path / "unieval-sum", **{EVALUATOR_KEY: "unieval-sum"})
    messages = verify_checkpoint(folder)[0].messages
    assert any(m.endswith("identity: 'unieval-sum' (its config.json) is unieval-sum (identity named by config.json "
                          '("unieval_local_evaluator": "unieval-sum"), not verified against a download manifest; '
                          "scores made with it sign identity:named)") for m in messages), messages


def test_rating_accepts_a_named_unieval_sum_of_the_official_shape_with_a_note(official_shape_ckpt, tmp_path):
    assert read_identity(official_shape_ckpt).source == "config"
    engine = Scorer(model=official_shape_ckpt, runner_factory=fake_factory(FakeRunner(default=0.7))).engine
    out = make_report([REC], "rating", engine=engine, options={"details": True}, warn=False)
    assert out.settings.checkpoints["unieval-sum"].identity == "named"
    assert out.notes == [
        "the calibration card's ratings of coherence, consistency, relevance, fluency are taken as calibrated for "
        f"checkpoint unieval-sum ({official_shape_ckpt}) on its own label: identity named by config.json "
        '("unieval_local_evaluator": "unieval-sum"), not verified against a download manifest; they hold only if '
        "it holds the official unieval-sum weights (settings.checkpoints.unieval-sum.identity: named; "
        "`unieval-local download --checkpoint unieval-sum` stages a copy that verifies)"]
    assert all(d.calibrated for d in out.reports[0].report.details.metrics.values())
    # the same folder staged as download stages it: verified, no note
    verified = staged(official_shape_ckpt, tmp_path / "unieval-sum")
    engine = Scorer(model=verified, runner_factory=fake_factory(FakeRunner(default=0.7))).engine
    out = make_report([REC], "rating", engine=engine, options={"details": True}, warn=False)
    assert out.settings.checkpoints["unieval-sum"].identity == "verified" and out.notes == []
    assert all(d.calibrated for d in out.reports[0].report.details.metrics.values())
