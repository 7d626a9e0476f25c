"""Chunks in tokens (issue 37, item 2): a self-chunking evaluator's document chunks are sized in
words (MiniCheck 500, FactCG 550, mdeberta-nli 300, Granite Guardian 500), its limit is in
tokens. Every chunk's prompt (the format's fixed part and the claim included) must fit the
evaluator's ``max_length`` in its own tokenizer's tokens: a chunk that would not is cut at
sentence boundaries (a sentence longer than the window at words) before scoring, so the model
never truncates one; a chunk that fits is the format's own (MiniCheck's reference chunks).

Per backend, on a QMSum meeting and on text whose words tokenize into many pieces (Indonesian
with long numbers: the stand-in tokenizers are trained on English), prompts are counted with the
runner's own tokenizer, independently of the planner's counting.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint, build_factcg_checkpoint, build_nli_checkpoint  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.pipeline.jobs import Job  # noqa: E402
from unieval_local.registry.evaluators import get_evaluator  # noqa: E402
from unieval_local.schema import UniEvalData  # noqa: E402
from unieval_local.text.prompts import split_pair  # noqa: E402
from unieval_local.text.sentences import reference_splitter  # noqa: E402

from conftest import build_test_checkpoint  # noqa: E402

#: Indonesian meeting sentences with long numbers: many tokens per word for the stand-ins
_SENTENCES = [
    "Andi: Selamat pagi semua, hari ini kita membahas anggaran pemasaran tahun 2025 sebesar Rp1.250.000.000,00.",
    "Budi: Saya mengusulkan anggaran dinaikkan sepuluh persen karena penjualan daring bertumbuh pesat sekali.",
    "Citra: Setuju, tetapi nomor rekening 8472910365482019 dan 5520193847561203 harus diperiksa ulang.",
    "Andi: Baik, laporan keuangan triwulan ketiga menunjukkan kenaikan 17,35 persen dibandingkan tahun lalu.",
]
MANY_PIECES = " ".join(_SENTENCES * 40)
#: a run of long numbers, words of ~20 pieces each: 500 of them are over Granite Guardian's 8,192 tokens
DIGITS = " ".join(f"{(k * 7919) % 10 ** 9:09d}{(k * 104729) % 10 ** 9:09d}." if k % 25 == 24 else
                  f"{(k * 7919) % 10 ** 9:09d}{(k * 104729) % 10 ** 9:09d}" for k in range(1200))
CLAIM = "Rapat membahas anggaran pemasaran tahun depan. Tim sepakat menaikkan anggaran sepuluh persen."


@pytest.fixture(scope="module")
def meeting(shared_data) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from convert_qmsum import convert

    rows = [json.loads(x) for x in (shared_data / "qmsum" / "test.jsonl").read_text().splitlines()[:1]]
    rec = convert(rows)[0]
    return {"target": rec["target"][:300], "source": rec["source"]}


def prompt_tokens(name: str, runner, prompts: list[str]) -> list[int]:
    """Tokens of each prompt as the runner's model reads it, from its tokenizer directly."""
    backend = get_evaluator(name).backend
    if backend == "t5":
        return [len(x) for x in runner.t5.tokenizer(prompts).input_ids]
    if backend == "seq-classifier" and name == "mdeberta-nli":
        return [len(runner.model.tokenizer(*split_pair(p)).input_ids) for p in prompts]
    if backend == "seq-classifier":
        return [len(x) for x in runner.model.tokenizer(prompts).input_ids]
    from unieval_local.models.causal_lm.runner import encode

    return [encode(runner.model, p)[1] for p in prompts]


def planned(scorer: Scorer, name: str, aspect: str, record: dict, language: str):
    """The plan of one record for ``fact/<aspect>`` (no scoring) and the checkpoint's runner."""
    engine = scorer.engine
    a = engine.registry.get_aspect("fact", aspect)
    job = Job((a,), (UniEvalData(**record),), language=language)
    return engine.plan({"j": job})["j"].plan, engine.runner(name)


def check_fits(scorer, name, aspect, record, language):
    """Every prompt fits; the chunks cover the document in order; returns (plan, runner, counts)."""
    plan, runner = planned(scorer, name, aspect, record, language)
    limit = scorer.engine.max_length(name)
    counts = prompt_tokens(name, runner, plan.prompts)
    assert max(counts) <= limit, f"{name}: {sum(n > limit for n in counts)} of {len(counts)} prompts over {limit}"
    windows = sorted({q.window for q in plan.queries})
    assert all(a < b for a, b in windows) and all(w1[1] <= w2[0] for w1, w2 in zip(windows, windows[1:]))
    return plan, runner, counts


def own_chunks(scorer, name, record, language):
    fmt = get_evaluator(name).prompt_format
    engine = scorer.engine
    split = reference_splitter(engine.splitter_for(language, name))  # a document is split as the reference does
    return fmt.chunks(record["source"], split, engine._chunk_words(get_evaluator(name)))


@pytest.fixture(scope="module")
def minicheck_ckpt(tmp_path_factory, shared_data) -> Path:
    folder = tmp_path_factory.mktemp("cit-mc") / "minicheck-flan-t5-large"
    return build_test_checkpoint(folder, data_dir=shared_data, layout="v1.1", answers=("1", "0"))


def test_minicheck_chunks_fit_its_2048_tokens_and_stay_the_reference_where_they_fit(minicheck_ckpt, meeting):
    name = "minicheck-flan-t5-large"
    s = Scorer(model={name: str(minicheck_ckpt)}, device="cpu")
    # a QMSum meeting: every 500-word chunk already fits: exactly MiniCheck's chunks
    plan, _, _ = check_fits(s, name, "support", meeting, "en")
    assert [p.split("</s>")[0][len("predict: "):] for p in plan.prompts] == \
        [t for _, _, t in own_chunks(s, name, meeting, "en")]
    # many pieces per word: 500 words are over 2,048 tokens; cut, and read whole
    record = {"target": CLAIM, "source": MANY_PIECES}
    words = own_chunks(s, name, record, "en")
    plan, runner, counts = check_fits(s, name, "support", record, "en")
    assert len(plan.prompts) > len(words)
    shown = [p.split("</s>")[0][len("predict: "):] for p in plan.prompts]
    assert " ".join(shown).split() == MANY_PIECES.split()
    r = s.score([{**record, "language": "en"}], task="fact", aspect="support", evidence=True)
    assert not any(q.truncated for q in r.examples[0].evidence.queries)


@pytest.fixture(scope="module")
def nli_ckpt(tmp_path_factory, shared_data) -> Path:
    return build_nli_checkpoint(tmp_path_factory.mktemp("cit-nli") / "mdeberta-nli", data_dir=shared_data,
                                evaluator="mdeberta-nli", init_range=0.1)


@pytest.mark.parametrize("language", ["en", "id"])
def test_mdeberta_nli_chunks_fit_its_512_tokens(nli_ckpt, meeting, language):
    """The issue's case: mdeberta-nli's word-sized chunks against its 512-token window, on a
    meeting and on Indonesian; scored end to end, no query is truncated."""
    name = "mdeberta-nli"
    s = Scorer(model={name: str(nli_ckpt)}, device="cpu")
    for record in (meeting, {"target": CLAIM, "source": MANY_PIECES}):
        record = {**record, "language": language}
        plan, runner, counts = check_fits(s, name, "nli_support", record, language)
        premises = [split_pair(p)[0] for p in plan.prompts]
        for text in set(premises):  # a premise is sentences of the document, whitespace aside
            assert "".join(text.split()) in "".join(record["source"].split())
    r = s.score([{"target": CLAIM, "source": MANY_PIECES, "language": language}], task="fact",
                aspect="nli_support", evidence=True)
    queries = r.examples[0].evidence.queries
    assert queries and not any(q.truncated for q in queries) and max(q.n_tokens for q in queries) <= 512


@pytest.fixture(scope="module")
def factcg_ckpt(tmp_path_factory, shared_data) -> Path:
    return build_factcg_checkpoint(tmp_path_factory.mktemp("cit-fcg") / "factcg-deberta-large", data_dir=shared_data)


def test_factcg_chunks_fit_its_2048_tokens(factcg_ckpt, meeting):
    name = "factcg-deberta-large"
    s = Scorer(model={name: str(factcg_ckpt)}, device="cpu")
    plan, _, _ = check_fits(s, name, "factcg", meeting, "en")
    assert len(plan.prompts) == len(own_chunks(s, name, meeting, "en"))  # 550 words fit: its own chunks
    record = {"target": CLAIM, "source": MANY_PIECES}
    plan, _, _ = check_fits(s, name, "factcg", record, "en")
    assert len(plan.prompts) > len(own_chunks(s, name, record, "en"))


@pytest.fixture(scope="module")
def granite_ckpt(tmp_path_factory, shared_data) -> Path:
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("cit-gg") / "granite-guardian-3.3-8b", layout="granite",
                                      data_dir=shared_data, evaluator="granite-guardian-3.3-8b")


def test_granite_guardian_chunks_fit_its_8192_tokens(granite_ckpt, meeting):
    """Words of ~20 pieces each (long numbers): 500 of them are over 8,192 tokens."""
    from unieval_local.models.causal_lm.model import CAUSAL_LM_MIN_TRANSFORMERS
    from unieval_local.models.stored import transformers_version

    if transformers_version() < CAUSAL_LM_MIN_TRANSFORMERS:
        pytest.skip("the causal-lm backend needs a newer transformers")
    name = "granite-guardian-3.3-8b"
    s = Scorer(model={name: str(granite_ckpt)}, device="cpu")
    plan, _, _ = check_fits(s, name, "groundedness", meeting, "en")
    assert len(plan.prompts) == len(own_chunks(s, name, meeting, "en"))
    record = {"target": CLAIM, "source": DIGITS}
    plan, _, _ = check_fits(s, name, "groundedness", record, "en")
    assert len(plan.prompts) > len(own_chunks(s, name, record, "en"))
