"""Every setting and library version that can change a score reaches the signature, the
batch run identity (resume/merge) and the score cache key, from the one RunConfig."""

import json
import re
import shutil
import warnings

import pytest

from unieval_local import Scorer
from unieval_local import config as config_mod
from unieval_local.batch import ResumeError, run_batch
from unieval_local.config import RunConfig

from conftest import FakeRunner, fake_factory

LONG = " ".join(f"Sentence number {i} says something about topic {i % 7}." for i in range(400))


def fixed():
    """A fake runner whose P(Yes) is a fixed function of the prompt text (``seen``: what it scored)."""
    runner = FakeRunner(lambda p: (hash(p) % 1000) / 1000)
    runner.seen = runner.prompts
    return runner


def fixed_factory():
    return fake_factory(fixed())


def test_signature_carries_overlap_versions_and_fingerprint(fake_ckpt, tmp_path):
    a = Scorer(model=fake_ckpt, runner_factory=fixed_factory(), long_input="chunk", window_overlap=1)
    b = Scorer(model=fake_ckpt, runner_factory=fixed_factory(), long_input="chunk", window_overlap=2)
    sa, sb = a.signature("summarization", "consistency"), b.signature("summarization", "consistency")
    assert "|overlap:1|" in str(sa) and "|overlap:2|" in str(sb) and sa != sb
    assert f"split:nltk-punkt-english@nltk-{config_mod.library_versions()['nltk']}" in str(sa)
    assert f"|tokenizers:{config_mod.library_versions()['tokenizers']}" in str(sa)
    # two folders claiming the same name but holding other bytes differ by their fingerprint
    other = tmp_path / "other" / "unieval-sum"
    shutil.copytree(fake_ckpt, other)
    (other / "config.json").write_text('{"d_model": 8}')
    so = Scorer(model=other, runner_factory=fixed_factory(), long_input="chunk").signature(
        "summarization", "consistency")
    assert sa.fingerprint and so.fingerprint and sa.fingerprint != so.fingerprint
    assert f"#{sa.fingerprint}|" in str(sa) and len(sa.fingerprint) == 12
    # the same content in another folder has the same fingerprint
    same = tmp_path / "same" / "unieval-sum"
    shutil.copytree(fake_ckpt, same)
    assert Scorer(model=same, runner_factory=fixed_factory()).signature(
        "summarization", "coherence").fingerprint == sa.fingerprint
    assert "ff:off" in str(Scorer(model=fake_ckpt, runner_factory=fixed_factory(), fast_forward=False)
                           .signature("summarization", "coherence"))


def test_a_different_nltk_changes_signature_and_refuses_resume(fake_ckpt, tmp_path, monkeypatch):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "target": f"Text {i}. More text.", "source": "Doc."}) + "\n"
                           for i in range(5)))
    out = tmp_path / "out.jsonl"
    kw = dict(model=fake_ckpt, runner_factory=fixed_factory())
    run_batch(src, out, aspects=["consistency"], settings=kw, progress=False)
    before = Scorer(**kw).signature("summarization", "consistency")
    installed = config_mod.library_versions()["nltk"]
    monkeypatch.setattr(config_mod, "_VERSIONS", {**config_mod.library_versions(), "nltk": "3.9.1"})
    after = Scorer(**kw).signature("summarization", "consistency")
    assert before != after and "nltk-3.9.1" in str(after)
    with pytest.raises(ResumeError, match=re.escape(f"config.versions.nltk: {installed!r} -> '3.9.1'")):
        run_batch(src, out, aspects=["consistency"], settings=kw, resume=True, progress=False)


def test_resume_with_another_window_overlap_is_refused(fake_ckpt, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "target": "A claim.", "source": LONG}) + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"

    kw = dict(model=fake_ckpt, runner_factory=fixed_factory(), long_input="chunk", max_length=200)
    run_batch(src, out, aspects=["consistency"], settings={**kw, "window_overlap": 1}, progress=False)
    with pytest.raises(ResumeError, match=r"window_overlap: 1 -> 2"):
        run_batch(src, out, aspects=["consistency"], settings={**kw, "window_overlap": 2}, resume=True,
                  progress=False)
    # the same settings resume fine
    run_batch(src, out, aspects=["consistency"], settings={**kw, "window_overlap": 1}, resume=True,
              progress=False)


def test_cache_key_changes_with_the_query_context_and_skips_bfloat16(fake_ckpt, tmp_path, monkeypatch):
    data = [{"target": "One. Two.", "source": "doc"}]
    inner = fixed()
    Scorer(model=fake_ckpt, runner_factory=fake_factory(inner), cache_dir=tmp_path / "c").score(data, aspect="consistency")
    assert len(inner.seen) == 2
    inner = fixed()
    Scorer(model=fake_ckpt, runner_factory=fake_factory(inner), cache_dir=tmp_path / "c").score(data, aspect="consistency")
    assert inner.seen == []  # all hits
    monkeypatch.setattr(config_mod, "_VERSIONS", {**config_mod.library_versions(), "tokenizers": "0.0.1"})
    inner = fixed()
    Scorer(model=fake_ckpt, runner_factory=fake_factory(inner), cache_dir=tmp_path / "c").score(data, aspect="consistency")
    assert len(inner.seen) == 2  # another tokenizers version: nothing reused
    with pytest.warns(RuntimeWarning, match="score cache is not used with bfloat16"):
        s = Scorer(model=fake_ckpt, runner_factory=fixed_factory(), cache_dir=tmp_path / "c", dtype="bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.score(data, aspect="consistency")
    assert isinstance(s.runner("unieval-sum"), FakeRunner)  # not wrapped in the cache


def test_run_config_validates_and_derives():
    c = RunConfig(device="cuda:1")
    assert c.device == "cuda" and c.max_length is None and c.max_length_for(1024) == 1024
    assert RunConfig(max_length=300).max_length_for(2048) == 300
    assert set(c.query_context()) >= {"engine", "dtype", "device", "fast_forward", "torch", "transformers", "tokenizers"}
    assert "long_input" not in c.query_context()  # it changes prompts, not a prompt's score
    for bad, match in [(dict(max_length=4), "max_length"), (dict(window_overlap=-1), "window_overlap"),
                       (dict(long_input="x"), "long_input"), (dict(dtype="float16"), "float16"),
                       (dict(reference_reduction="median"), "reference_reduction")]:
        with pytest.raises(ValueError, match=match):
            RunConfig(**bad)


def test_generated_checkpoints_do_not_record_how_they_were_loaded(tiny_ckpt, v11_ckpts):
    """transformers writes from_pretrained options into tokenizer_config.json
    (local_files_only: true under HF_HUB_OFFLINE=1, false otherwise), which made the
    fingerprint of a generated checkpoint depend on the build's environment."""
    for folder in (tiny_ckpt, *v11_ckpts.values()):
        config = json.loads((folder / "tokenizer_config.json").read_text())
        assert not {"local_files_only", "cache_dir", "token", "revision", "_commit_hash"} & set(config), folder
        assert config["tokenizer_class"] == "T5Tokenizer" and config["extra_ids"] == 100
