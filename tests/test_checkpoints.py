"""Checkpoint resolution order, staging with a faked hub client, and offline verification."""

import json
import shutil
from pathlib import Path

import pytest

from unieval_local import CheckpointNotFoundError
from unieval_local.models import checkpoints as ck
from unieval_local.models import download as dl
from unieval_local.models.checkpoints import MANIFEST_NAME, resolve_checkpoint, sha256_file
from unieval_local.models.download import download_checkpoint, select_checkpoint_files
from unieval_local.models.verify import verify_checkpoint
from unieval_local.cli import main

HUB_LISTING = [
    "config.json", "pytorch_model.bin", "model.safetensors", "spiece.model", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "generation_config.json", "README.md",
    "optimizer.pt", "training_args.bin", "checkpoint-500/pytorch_model.bin", "checkpoint-500/config.json",
]


class FakeHub:
    """Serves the files of a local checkpoint folder as if it were a hub repository."""

    def __init__(self, folder: Path, listing=None, sha="a" * 40):
        # the real files of the folder, plus leftovers that must not be fetched
        listing = listing or [f for f in HUB_LISTING if f != "special_tokens_map.json"]
        self.folder, self.listing, self.sha, self.fetched = folder, listing, sha, []

    def list_files(self, repo_id, revision):
        assert repo_id == "MingZhong/unieval-sum"
        return self.sha, list(self.listing)

    def download(self, repo_id, filename, revision, local_dir):
        assert revision == self.sha
        self.fetched.append(filename)
        dest = Path(local_dir) / filename
        src = self.folder / filename
        if src.is_file():
            shutil.copyfile(src, dest)
        else:
            dest.write_bytes(b"pickled weights we must never take")
        return dest


@pytest.mark.smoke
def test_select_files_prefers_safetensors_and_skips_leftovers():
    assert select_checkpoint_files(HUB_LISTING) == [
        "config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "generation_config.json"]
    pickled = [f for f in HUB_LISTING if f != "model.safetensors"]
    assert "pytorch_model.bin" in select_checkpoint_files(pickled)
    with pytest.raises(ck.CheckpointError, match="no model.safetensors or pytorch_model.bin"):
        select_checkpoint_files(["config.json", "spiece.model", "checkpoint-1/model.safetensors"])


@pytest.mark.smoke
def test_download_writes_manifest_and_verify_passes(tmp_path, tiny_ckpt, capsys):
    hub = FakeHub(tiny_ckpt)
    folder = download_checkpoint("unieval-sum", tmp_path / "home", client=hub)
    assert folder == tmp_path / "home" / "unieval-sum"
    assert "pytorch_model.bin" not in hub.fetched and "optimizer.pt" not in hub.fetched
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    assert manifest["revision"] == "a" * 40 and manifest["hub_id"] == "MingZhong/unieval-sum"
    assert manifest["files"]["model.safetensors"]["sha256"] == sha256_file(tiny_ckpt / "model.safetensors")
    reports = verify_checkpoint(tmp_path / "home")
    assert [r.ok for r in reports] == [True], reports[0].messages
    assert main(["verify", str(tmp_path / "home")]) == 0
    assert "Yes/No token ids" in capsys.readouterr().out

    with open(folder / "model.safetensors", "r+b") as fh:  # corrupt one byte
        fh.seek(100)
        b = fh.read(1)
        fh.seek(100)
        fh.write(bytes([b[0] ^ 1]))
    report = verify_checkpoint(folder)[0]
    assert not report.ok and any("model.safetensors checksum differs" in m for m in report.messages)
    assert main(["verify", str(folder)]) == 1


@pytest.mark.smoke
def test_resolution_order(tmp_path, tiny_ckpt, monkeypatch):
    # 1. explicit folder wins over everything
    got = resolve_checkpoint("unieval-sum", tiny_ckpt)
    assert got.origin == "explicit" and got.path == tiny_ckpt
    # a mapping from checkpoint name to folder
    assert resolve_checkpoint("unieval-sum", {"unieval-sum": str(tiny_ckpt)}).path == tiny_ckpt
    # 2. UNIEVAL_LOCAL_HOME/<name>
    home = tmp_path / "home"
    download_checkpoint("unieval-sum", home, client=FakeHub(tiny_ckpt))
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(home))
    got = resolve_checkpoint("unieval-sum")
    assert got.origin == "home" and got.revision == "a" * 40 and got.hub_id == "MingZhong/unieval-sum"
    # 3. the HF cache, when no home is set
    monkeypatch.delenv("UNIEVAL_LOCAL_HOME")
    cache = tmp_path / "hf"
    snap = cache / "models--MingZhong--unieval-sum" / "snapshots" / ("b" * 40)
    shutil.copytree(tiny_ckpt, snap)
    (cache / "models--MingZhong--unieval-sum" / "refs").mkdir()
    (cache / "models--MingZhong--unieval-sum" / "refs" / "main").write_text("b" * 40)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    got = resolve_checkpoint("unieval-sum")
    assert got.origin == "hf-cache" and got.revision == "b" * 40


@pytest.mark.smoke
def test_offline_error_says_where_it_looked_and_how_to_stage(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path / "nohome"))
    called = []
    monkeypatch.setattr(dl, "fetch_to_hf_cache", lambda *a, **k: called.append(a))
    with pytest.raises(CheckpointNotFoundError) as info:
        resolve_checkpoint("unieval-sum")
    msg = str(info.value)
    assert "UNIEVAL_LOCAL_HOME/unieval-sum" in msg and "Hugging Face cache" in msg
    assert "offline mode is set" in msg and "unieval-local download --checkpoint unieval-sum --to DIR" in msg
    assert called == []  # offline: the hub is never asked
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        resolve_checkpoint("unieval-sum", str(tmp_path / "missing"))


def test_online_fetches_missing_checkpoint_into_cache(tmp_path, tiny_ckpt, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(dl, "fetch_to_hf_cache", lambda hub_id, revision=None: tiny_ckpt)
    got = resolve_checkpoint("unieval-sum")
    assert got.origin == "hub" and got.path == tiny_ckpt
    # but --offline / offline=True stops it
    with pytest.raises(CheckpointNotFoundError, match="offline mode"):
        resolve_checkpoint("unieval-sum", offline=True)


def test_download_cli_uses_the_task_checkpoints(tmp_path, tiny_ckpt, monkeypatch):
    hub = FakeHub(tiny_ckpt)
    real = dl.download_checkpoint
    monkeypatch.setattr(dl, "download_checkpoint", lambda name, to, **kw: real(name, to, client=hub, revision=kw.get("revision")))
    assert main(["download", "--task", "summarization", "--to", str(tmp_path / "h")]) == 0
    assert (tmp_path / "h" / "unieval-sum" / MANIFEST_NAME).is_file()
    assert verify_checkpoint(tmp_path / "h")[0].ok


def test_verify_without_manifest_warns_and_checks_the_rest(tiny_ckpt, tmp_path):
    report = verify_checkpoint(tiny_ckpt)[0]
    assert report.ok
    assert any(m.startswith("WARN no unieval_manifest.json") for m in report.messages)
    assert any("Yes/No token ids" in m for m in report.messages)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not verify_checkpoint(empty)[0].ok


@pytest.mark.smoke
def test_folder_without_tokenizer_is_a_clear_error(tiny_ckpt, tmp_path):
    folder = tmp_path / "notok"
    folder.mkdir()
    shutil.copyfile(tiny_ckpt / "config.json", folder / "config.json")
    with pytest.raises(ck.CheckpointError, match="has no tokenizer"):
        resolve_checkpoint("unieval-sum", folder)
