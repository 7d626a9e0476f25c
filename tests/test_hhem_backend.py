"""HHEM-2.1-Open natively (issue 22): a generated checkpoint in its real layout (HHEMv2 config,
``t5.``-prefixed T5ForTokenClassification tensors, no tokenizer; its foundation flan-t5-base beside
it) loaded by the real code; fact/hhem equals a plain float64 reference written here from its
published algorithm (the prompt template, the foundation's tokenizer, ``softmax(logits[:, 0, :])[:, 1]``
of the token-classification head); strict loading refuses a checkpoint without its head or its
foundation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ReposHub

from make_test_checkpoint import HHEM_PROMPT, build_hhem_checkpoint

from unieval_local import Scorer
from unieval_local.errors import CheckpointError, CheckpointNotFoundError


@pytest.fixture(scope="module")
def hhem_ckpt(tmp_path_factory, shared_data):
    return build_hhem_checkpoint(tmp_path_factory.mktemp("hhem") / "hhem-2.1-open", data_dir=shared_data,
                                 init_factor=0.3)


@pytest.fixture(scope="module")
def qags(shared_data):
    rows = json.loads((shared_data / "unieval-reproduce" / "data" / "fact" / "qags_cnndm.json").read_text())
    return [{"target": r["system_output"], "source": r["source"]} for r in rows[:5]]


def hhem_reference(folder, pairs):
    """HHEM's predict(): prompt.format(text1=premise, text2=hypothesis), the foundation's tokenizer,
    T5ForTokenClassification, softmax over logits[:, 0, :], the probability of class 1 (float64)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, T5Config, T5ForTokenClassification

    base = folder.parent / "flan-t5-base"
    tok = AutoTokenizer.from_pretrained(base)
    config = T5Config(**{k: v for k, v in json.loads((base / "config.json").read_text()).items()
                         if k not in ("architectures", "model_type")})
    config.num_labels = 2
    model = T5ForTokenClassification(config)
    state = {k[len("t5."):]: v for k, v in load_file(str(folder / "model.safetensors")).items()}
    model.load_state_dict(state)
    model = model.double().eval()
    out = []
    for premise, hypothesis in pairs:
        enc = tok([HHEM_PROMPT.format(text1=premise, text2=hypothesis)], return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[:, 0, :]
        out.append(torch.softmax(logits, dim=-1)[0, 1].item())
    return out


def test_hhem_equals_a_float64_reference_of_its_published_algorithm(hhem_ckpt, qags):
    scorer = Scorer(model={"hhem-2.1-open": str(hhem_ckpt)}, device="cpu", max_length=8192)
    examples = qags + [{"target": "The man was arrested.", "source": qags[1]["source"]}]
    got = [e.value for e in scorer.score(examples, task="fact", aspect="hhem").examples]
    want = hhem_reference(hhem_ckpt, [(e["source"], e["target"]) for e in examples])
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    assert len({round(v, 4) for v in got}) > 3  # the generated weights tell the examples apart
    batched = Scorer(model={"hhem-2.1-open": str(hhem_ckpt)}, device="cpu", max_length=8192, batch_tokens=100000)
    again = [e.value for e in batched.score(examples[::-1], task="fact", aspect="hhem").examples][::-1]
    np.testing.assert_allclose(again, got, atol=1e-6, rtol=0)


def test_hhem_long_source_chunk_mode_takes_the_max_over_windows(hhem_ckpt, qags):
    ex = {"target": qags[0]["target"], "source": qags[0]["source"]}
    chunked = Scorer(model={"hhem-2.1-open": str(hhem_ckpt)}, device="cpu", max_length=256, long_input="chunk")
    res = chunked.score([ex], task="fact", aspect="hhem", evidence=True)
    windows = res.examples[0].evidence.queries
    assert len(windows) >= 2
    assert res.examples[0].value == pytest.approx(max(q.value for q in windows), abs=1e-12)


def test_strict_loading_refuses_no_head_and_no_foundation(tmp_path, shared_data):
    headless = build_hhem_checkpoint(tmp_path / "a" / "hhem-2.1-open", data_dir=shared_data, head=False)
    with pytest.raises(CheckpointError, match="classification head is missing"):
        Scorer(model={"hhem-2.1-open": str(headless)}, device="cpu").score(
            [{"target": "A.", "source": "B."}], task="fact", aspect="hhem")
    lonely = build_hhem_checkpoint(tmp_path / "b" / "hhem-2.1-open", data_dir=shared_data)
    shutil.rmtree(lonely.parent / "flan-t5-base")
    with pytest.raises(CheckpointNotFoundError, match="foundation google/flan-t5-base"):
        Scorer(model={"hhem-2.1-open": str(lonely)}, device="cpu", offline=True).score(
            [{"target": "A.", "source": "B."}], task="fact", aspect="hhem")


def test_cli_scores_qags_with_hhem_and_verify_knows_it(tmp_path, hhem_ckpt, qags, capsys):
    src = tmp_path / "qags.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in qags))
    cli = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
    ok = subprocess.run(cli + ["score", str(src), "--task", "fact", "--aspect", "hhem", "--no-progress",
                               "--max-length", "8192", "--model", f"hhem-2.1-open={hhem_ckpt}"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    got = [json.loads(x)["scores"]["hhem"] for x in ok.stdout.splitlines()]
    np.testing.assert_allclose(got, hhem_reference(hhem_ckpt, [(e["source"], e["target"]) for e in qags]),
                               atol=1e-5, rtol=0)
    from unieval_local.cli import main  # verify in this process: exit status and message

    capsys.readouterr()
    assert main(["verify", str(hhem_ckpt), "--evaluator", "hhem-2.1-open"]) == 0
    assert "classification head included" in "".join(capsys.readouterr())


def test_download_stages_hhem_with_its_foundation_and_the_staged_home_scores(tmp_path, hhem_ckpt, qags, monkeypatch):
    from unieval_local.models.download import download_checkpoint

    hub = ReposHub({"vectara/hallucination_evaluation_model": hhem_ckpt,
                      "google/flan-t5-base": hhem_ckpt.parent / "flan-t5-base"})
    folder = download_checkpoint("hhem-2.1-open", tmp_path / "home", client=hub)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "unieval_manifest.json"]
    assert (tmp_path / "home" / "flan-t5-base" / "spiece.model").is_file()
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(tmp_path / "home"))
    staged = Scorer(device="cpu", max_length=8192).score(qags[:2], task="fact", aspect="hhem")
    direct = Scorer(model={"hhem-2.1-open": str(hhem_ckpt)}, device="cpu", max_length=8192).score(
        qags[:2], task="fact", aspect="hhem")
    assert [e.value for e in staged.examples] == [e.value for e in direct.examples]


@pytest.mark.real_weights
def test_real_hhem_equals_its_published_algorithm(qags):
    """Ready for a user who stages the real weights (`unieval-local download --checkpoint hhem-2.1-open`
    into $UNIEVAL_LOCAL_HOME, which stages flan-t5-base beside it); skipped here."""
    from conftest import REAL_HOME
    from pathlib import Path

    folder = Path(REAL_HOME or "/nonexistent") / "hhem-2.1-open"
    if not (folder / "config.json").is_file() or not (folder.parent / "flan-t5-base" / "config.json").is_file():
        pytest.skip("hhem-2.1-open (and flan-t5-base beside it) not staged in UNIEVAL_LOCAL_HOME")
    scorer = Scorer(model={"hhem-2.1-open": str(folder)}, device="cpu", max_length=8192)
    got = [e.value for e in scorer.score(qags, task="fact", aspect="hhem").examples]
    np.testing.assert_allclose(got, hhem_reference(folder, [(e["source"], e["target"]) for e in qags]),
                               atol=1e-5, rtol=0)
    pair = scorer.score([{"source": "The capital of France is Paris.", "target": "The capital of France is Berlin."},
                         {"source": "The capital of France is Paris.", "target": "Paris is in France."}],
                        task="fact", aspect="hhem")
    assert pair.examples[0].value < 0.5 < pair.examples[1].value


def test_a_long_prompt_loses_the_premise_end_not_the_hypothesis_and_the_foundation_is_fingerprinted(
        hhem_ckpt, qags, tmp_path, shared_data):
    from make_test_checkpoint import build_test_checkpoint

    from unieval_local.engine import Engine

    scorer = Scorer(model={"hhem-2.1-open": str(hhem_ckpt)}, device="cpu", max_length=128)
    ex = {"target": "The claim at the very end.", "source": qags[0]["source"]}
    with pytest.warns(UserWarning, match=r"the cut fell in: source \(1\)"):
        scorer.score([ex], task="fact", aspect="hhem")
    model = scorer.runner("hhem-2.1-open").model
    prompt = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: " + ex["source"] + \
             "\n\nHypothesis: " + ex["target"]
    (ids,) = model.encode([prompt], 128)
    tail = model.tokenizer("\n\nHypothesis: " + ex["target"])["input_ids"]
    assert len(ids) == 128 and ids[-len(tail):] == tail
    # another foundation (another tokenizer) beside the same weights: another fingerprint
    other = tmp_path / "other" / "hhem-2.1-open"
    shutil.copytree(hhem_ckpt, other)
    build_test_checkpoint(other.parent / "flan-t5-base", data_dir=shared_data, vocab_size=1500, layout="v1.1",
                          weights="safetensors")
    assert Engine(model={"hhem-2.1-open": str(other)}).fingerprint("hhem-2.1-open") != \
        Engine(model={"hhem-2.1-open": str(hhem_ckpt)}).fingerprint("hhem-2.1-open")
