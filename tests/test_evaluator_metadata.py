"""Checkpoint metadata of the evaluators (issue 30): a chat template kept in ``chat_template.jinja``
(fetched, fingerprinted, read by the causal-lm loader), each evaluator's licence and size printed by
``download`` before fetching, ``download g-eval`` refused with what to do instead, the chunk size
each prompt format declares, and the stand-in layout the offline-staging help names."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local.models.checkpoints import ResolvedCheckpoint, fingerprint_checkpoint  # noqa: E402
from unieval_local.models.download import download_checkpoint, select_checkpoint_files  # noqa: E402
from unieval_local.models.files import MANIFEST_NAME  # noqa: E402
from unieval_local.registry.evaluators import get_evaluator  # noqa: E402


class FolderHub:
    """Serves a local folder as the hub repository ``repo_id`` (never the network)."""

    def __init__(self, folder: Path, repo_id: str, sha: str = "b" * 40):
        self.folder, self.repo_id, self.sha, self.fetched = folder, repo_id, sha, []

    def list_files(self, repo_id, revision):
        assert repo_id == self.repo_id
        return self.sha, sorted(p.name for p in self.folder.iterdir() if p.is_file())

    def download(self, repo_id, filename, revision, local_dir):
        assert revision == self.sha
        self.fetched.append(filename)
        dest = Path(local_dir) / filename
        shutil.copyfile(self.folder / filename, dest)
        return dest


@pytest.fixture(scope="module")
def jinja_layout(tmp_path_factory, shared_data) -> tuple[Path, Path]:
    """A generated granite layout, and its copy with the chat template moved from
    tokenizer_config.json into chat_template.jinja (as the real Granite 3.3 repository keeps it)."""
    root = tmp_path_factory.mktemp("jinja")
    inline = build_causal_lm_checkpoint(root / "inline", layout="granite", data_dir=shared_data, manifest=False)
    moved = root / "moved"
    shutil.copytree(inline, moved)
    config = json.loads((moved / "tokenizer_config.json").read_text(encoding="utf-8"))
    (moved / "chat_template.jinja").write_text(config.pop("chat_template"), encoding="utf-8")
    (moved / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return inline, moved


def test_chat_template_jinja_is_fetched_when_the_repository_has_one():
    listing = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
               "README.md", "sub/chat_template.jinja"]
    assert select_checkpoint_files(listing) == ["config.json", "model.safetensors", "tokenizer.json",
                                                "tokenizer_config.json", "chat_template.jinja"]
    assert "chat_template.jinja" not in select_checkpoint_files([f for f in listing if f != "chat_template.jinja"])


def test_the_fingerprint_changes_with_the_chat_template_file(jinja_layout, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(jinja_layout[1], folder)
    before = fingerprint_checkpoint(folder, file_hash=lambda p: p.read_bytes().hex())
    (folder / "chat_template.jinja").write_text("{{ messages[0]['content'] }}", encoding="utf-8")
    after = fingerprint_checkpoint(folder, file_hash=lambda p: p.read_bytes().hex())
    assert before != after
    (folder / "README.md").write_text("not part of the model", encoding="utf-8")
    assert fingerprint_checkpoint(folder, file_hash=lambda p: p.read_bytes().hex()) == after


def test_a_staged_jinja_template_builds_the_same_prompt_as_an_inline_one(jinja_layout, tmp_path):
    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.causal_lm.runner import render
    from unieval_local.registry.tasks import get_aspect
    from unieval_local.schema import UniEvalData
    from unieval_local.text.chat import GRANITE_GROUNDEDNESS, ChatQuery

    inline, moved = jinja_layout
    name = "granite-guardian-3.3-8b"
    hub = FolderHub(moved, get_evaluator(name).hub_id)
    staged = download_checkpoint(name, tmp_path / "home", client=hub)
    assert "chat_template.jinja" in hub.fetched
    manifest = json.loads((staged / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert "chat_template.jinja" in manifest["files"]
    ex = UniEvalData(source="The council approved the park on Tuesday.", target="A park was approved.")
    query = ChatQuery.decode(GRANITE_GROUNDEDNESS.render(get_aspect("fact", "groundedness"), ex, ex.target)[0])
    spec = get_evaluator(name)
    models = [CausalLMModel(ResolvedCheckpoint(name, f, "explicit"), spec, "cpu", "float32") for f in (inline, staged)]
    assert models[1].tokenizer.chat_template == models[0].tokenizer.chat_template
    texts = [render(m, query) for m in models]
    assert texts[0] == texts[1] and "<score>" in texts[0]
