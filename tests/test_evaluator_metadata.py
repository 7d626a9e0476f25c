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


# --------------------------------------------------------------------------- licence, size, g-eval


def test_every_built_in_evaluator_states_its_licence_and_size():
    from unieval_local.registry.evaluators import EVALUATORS

    want = {"unieval-sum": ("not stated", 3.1), "minicheck-flan-t5-large": ("MIT", 3.1),
            "mdeberta-nli": ("MIT", 0.58), "hhem-2.1-open": ("Apache-2.0", 0.44),
            "factcg-deberta-large": ("MIT", 1.74), "seahorse-large-q4": ("CC-BY-4.0", 4.9),
            "granite-guardian-3.3-8b": ("Apache-2.0", 16.3)}
    for name, (licence, size) in want.items():
        assert (EVALUATORS[name].licence, EVALUATORS[name].size_gb) == (licence, size), name
    fetchable = [e for e in EVALUATORS.values() if e.hub_id]
    assert all(e.size_gb and e.size_gb > 0 and e.licence for e in fetchable)
    assert EVALUATORS["g-eval"].size_gb is None and EVALUATORS["g-eval"].hub_id is None


def _stub_folder(folder: Path) -> Path:
    """A hub repository's files as download sees them (it copies and hashes, never loads)."""
    folder.mkdir()
    for name, body in {"config.json": "{}", "model.safetensors": "x" * 1000, "tokenizer.json": "{}",
                       "tokenizer_config.json": "{}", "README.md": "card"}.items():
        (folder / name).write_text(body, encoding="utf-8")
    return folder


def test_download_prints_size_and_licence_before_fetching(tmp_path, monkeypatch, capsys):
    import unieval_local.models.download as dl
    from unieval_local.cli import main

    hub = FolderHub(_stub_folder(tmp_path / "repo"), "yaxili96/FactCG-DeBERTa-v3-Large")
    seen_before_listing = []
    listing = hub.list_files
    hub.list_files = lambda repo_id, revision: (seen_before_listing.append(capsys.readouterr().err),
                                                listing(repo_id, revision))[1]
    monkeypatch.setattr(dl, "HuggingFaceHubClient", lambda: hub)
    assert main(["download", "--checkpoint", "factcg-deberta-large", "--to", str(tmp_path / "home")]) == 0
    assert seen_before_listing[0].strip() == ("downloading factcg-deberta-large (yaxili96/FactCG-DeBERTa-v3-Large): "
                                              "about 1.74 GB, licence MIT")
    assert sorted(hub.fetched) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert (tmp_path / "home" / "factcg-deberta-large" / MANIFEST_NAME).is_file()


@pytest.mark.parametrize("argv", [["g-eval"], ["--checkpoint", "g-eval"], ["--checkpoint", "unieval-sum", "g-eval"]])
def test_download_g_eval_says_it_has_no_default_weights(tmp_path, monkeypatch, capsys, argv):
    import unieval_local.models.download as dl
    from unieval_local.cli import main

    monkeypatch.setattr(dl, "HuggingFaceHubClient", lambda: pytest.fail("nothing may be fetched"))
    assert main(["download", *argv, "--to", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err
    assert "g-eval has no default weights" in err
    assert "use --model g-eval=DIR with a local instruct model (Llama, Qwen2 or Granite layout)" in err
    assert not (tmp_path / "home").exists()


def test_download_checkpoint_refuses_g_eval_in_python(tmp_path):
    from unieval_local.errors import CheckpointError

    with pytest.raises(CheckpointError, match=r"g-eval has no default weights to download: use --model g-eval=DIR"):
        download_checkpoint("g-eval", tmp_path, client=FolderHub(tmp_path, "none"))


def test_download_list_shows_every_evaluator_with_licence_and_size(capsys):
    from unieval_local.cli import main
    from unieval_local.registry.evaluators import EVALUATORS

    assert main(["download", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["checkpoint", "hub", "id", "size", "licence", "languages"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == sorted(EVALUATORS)
    assert rows["granite-guardian-3.3-8b"].split()[1:5] == ["ibm-granite/granite-guardian-3.3-8b", "16.3", "GB",
                                                            "Apache-2.0"]
    assert "none: --model g-eval=DIR" in rows["g-eval"]
    assert rows["mdeberta-nli"].split()[-1].startswith("ar,bn,de,en")


@pytest.mark.parametrize("name,layout", [("factcg-deberta-large", "factcg"), ("granite-guardian-3.3-8b", "granite"),
                                         ("mdeberta-nli", "deberta-nli"), ("hhem-2.1-open", "hhem"),
                                         ("seahorse-large-q1", "mt5"), ("unieval-sum", "v1.1")])
def test_the_staging_help_names_the_right_stand_in_layout(name, layout):
    from unieval_local.models.checkpoints import _staging_help

    help_text = _staging_help(name)
    assert f"--layout {layout} --evaluator {name}" in help_text
