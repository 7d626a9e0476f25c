"""Golden scores of the non-T5 built-in evaluators: the package's public API (``Scorer``, float32)
against float64 references that read the stored files directly, never transformers' config or
model objects (``tests/reference_deberta.py``, ``tests/reference_decoder.py``).

Evaluators: ``mdeberta-nli`` (fact/nli_support), ``factcg-deberta-large`` (fact/factcg),
``granite-guardian-3.3-8b`` (fact/groundedness) and ``g-eval`` (summarization geval_coherence,
geval_consistency, geval_relevance, geval_fluency) on a llama and a qwen2 stand-in. Each stand-in
is built once per session (:func:`build_golden_standins_other`); the Granite Guardian one carries
Granite-8B's multipliers and a transformers-4.x-style top-level ``rope_theta`` (as the hub's
config.json has them), so that the granite-only arithmetic and that config form are exercised.

Inputs: four SummEval records (``summeval_records``: two systems of the first document and one
of each of the two longest), each source cut to its first sentences (at least 60 words) so that
every document is ONE chunk for every evaluator (asserted with the package's own chunkers):
chunking and truncation are tested elsewhere and stay out of these numbers. Every example's
value must equal the reference's to 1e-5.

Folders built elsewhere: with ``UNIEVAL_TRAVEL_CKPTS=DIR`` the same tests also run on
``DIR/<name>`` for each name :func:`build_golden_standins_other` writes (CI builds them once with
the newest transformers and hands them to the other legs); without it those cases skip.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import (build_causal_lm_checkpoint, build_factcg_checkpoint,  # noqa: E402
                                  build_nli_checkpoint, write_test_manifest)
from reference_deberta import DebertaReference  # noqa: E402
from reference_decoder import DecoderReference  # noqa: E402

from unieval_local import Scorer  # noqa: E402
from unieval_local.registry.tasks import get_aspect  # noqa: E402
from unieval_local.schema import UniEvalData  # noqa: E402
from unieval_local.text.chat import GEVAL, GRANITE_GROUNDEDNESS, ChatQuery  # noqa: E402
from unieval_local.text.factcg import FACTCG  # noqa: E402
from unieval_local.text.prompts import NLI_PAIR  # noqa: E402
from unieval_local.text.sentences import DEFAULT_SPLITTER, MergeLetterless, field_spans  # noqa: E402

pytestmark = pytest.mark.golden

#: |package - reference| allowed per example
ATOL = 1e-5
#: the environment variable naming a folder of stand-ins built elsewhere
TRAVEL = "UNIEVAL_TRAVEL_CKPTS"
#: sub-folder names :func:`build_golden_standins_other` writes
NAMES = ("mdeberta-nli", "factcg-deberta-large", "granite-guardian-3.3-8b", "g-eval-llama", "g-eval-qwen2")
GEVAL_ASPECTS = ("geval_coherence", "geval_consistency", "geval_relevance", "geval_fluency")

#: Granite Guardian 3.3 8B's config.json values for what only granite has, and its RoPE theta in
#: the top-level form transformers 4.x writes (no ``rope_parameters``)
GRANITE_8B_KEYS = {"embedding_multiplier": 12.0, "attention_multiplier": 0.0078125, "residual_multiplier": 0.22,
                   "logits_scaling": 16.0, "rope_theta": 10_000_000.0}


def build_golden_standins_other(root: Path, *, data_dir: Path | None = None) -> dict[str, Path]:
    """Build every stand-in of these tests under ``root`` (sub-folders :data:`NAMES`), small and
    seeded; returns name -> folder. ``data_dir``: the shared data (default: the builders' own
    lookup, ``$UNIEVAL_SHARED_DATA`` or ``../shared/data``)."""
    root = Path(root)
    out = {
        "mdeberta-nli": build_nli_checkpoint(root / "mdeberta-nli", data_dir=data_dir, evaluator="mdeberta-nli",
                                             init_range=0.1, manifest=True),
        "factcg-deberta-large": build_factcg_checkpoint(root / "factcg-deberta-large", data_dir=data_dir, seed=1,
                                                        manifest=True),
        "g-eval-llama": build_causal_lm_checkpoint(root / "g-eval-llama", layout="llama", data_dir=data_dir, seed=5,
                                                   evaluator="g-eval"),
        "g-eval-qwen2": build_causal_lm_checkpoint(root / "g-eval-qwen2", layout="qwen2", data_dir=data_dir, seed=6,
                                                   evaluator="g-eval"),
    }
    granite = build_causal_lm_checkpoint(root / "granite-guardian-3.3-8b", layout="granite", data_dir=data_dir,
                                         seed=7, init_range=1.0, evaluator="granite-guardian-3.3-8b", manifest=False)
    config = json.loads((granite / "config.json").read_text(encoding="utf-8"))
    config.pop("rope_parameters", None)
    config.update(GRANITE_8B_KEYS)
    (granite / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_test_manifest(granite)
    out["granite-guardian-3.3-8b"] = granite
    return out


@pytest.fixture(scope="session", params=["built", "travel"])
def standins(request, tmp_path_factory, shared_data) -> dict[str, Path]:
    """name -> folder: built here once per session, or (``travel``) found in ``$UNIEVAL_TRAVEL_CKPTS``."""
    if request.param == "built":
        return build_golden_standins_other(tmp_path_factory.mktemp("golden-other"), data_dir=shared_data)
    folder = os.environ.get(TRAVEL)
    if not folder:
        pytest.skip(f"{TRAVEL} is not set: no stand-ins built elsewhere to check")
    found = {name: Path(folder) / name for name in NAMES}
    missing = [str(p) for p in found.values() if not (p / "config.json").is_file()]
    if missing:
        pytest.fail(f"{TRAVEL}={folder} lacks the stand-ins {missing} (build them with build_golden_standins_other)")
    return found


@pytest.fixture(scope="session")
def golden_records(summeval_records) -> list[dict]:
    """Four SummEval records (module docstring), each source cut after the first sentence that
    brings it to 60 words (the sources are tokenized text: sentences end with " . ")."""
    out = []
    for r in summeval_records[:4]:
        sentences, words = [], 0
        for s in r["source"].split(" . "):
            sentences.append(s)
            words += len(s.split())
            if words >= 60:
                break
        source = " . ".join(sentences).strip() + " ."
        out.append({"target": r["target"], "source": source, "references": r["references"][:1]})
    assert len({r["source"] for r in out}) == 3 and len({r["target"] for r in out}) == 4
    return out


@lru_cache(maxsize=None)
def deberta(folder: str) -> DebertaReference:
    return DebertaReference(Path(folder))


@lru_cache(maxsize=None)
def decoder(folder: str) -> DecoderReference:
    return DecoderReference(Path(folder))


def compare(name: str, got: list[float], want: list[float]) -> float:
    """Assert every example within :data:`ATOL`; the values must tell the examples apart (or the
    comparison would prove little); returns max |difference| (printed: ``pytest -s``)."""
    got_a, want_a = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert np.isfinite(got_a).all() and np.isfinite(want_a).all(), (got, want)
    diff = float(np.abs(got_a - want_a).max())
    print(f"\n{name}: max |package - reference| = {diff:.3g} over {len(got)} examples; values {np.round(want_a, 6)}")
    np.testing.assert_allclose(got_a, want_a, atol=ATOL, rtol=0, err_msg=name)
    assert len({round(v, 4) for v in want}) > 1, f"{name}: the stand-in gives every example the same value"
    return diff


def single_chunk(chunks, name: str) -> str:
    """The one chunk of a document (these tests keep every document to one)."""
    assert len(chunks) == 1, f"{name}: the document is {len(chunks)} chunks; these tests keep it to one"
    return chunks[0][2]


def test_mdeberta_nli_support(standins, golden_records):
    """fact/nli_support: per target sentence P(entailment) of (source, sentence), softmax over the
    three labels, label index read from config.json; mean over the target's sentences."""
    folder = standins["mdeberta-nli"]
    ref = deberta(str(folder))
    entail = ref.label_index("entailment")
    scorer = Scorer(model={"mdeberta-nli": str(folder)}, device="cpu", dtype="float32")
    got = [e.value for e in scorer.score(golden_records, task="fact", aspect="nli_support").examples]
    want = []
    for r in golden_records:
        premise = single_chunk(NLI_PAIR.chunks(r["source"], DEFAULT_SPLITTER, 500), "mdeberta-nli")
        assert premise == r["source"]
        # claims: Punkt's sentences, a piece without a letter or digit merged (every evaluator but UniEval's)
        sentences = [r["target"][a:b] for a, b in field_spans(r["target"], "sentence", MergeLetterless(DEFAULT_SPLITTER))]
        assert len(sentences) >= 1
        want.append(float(np.mean([ref.probabilities(ref.encode_pair(premise, s, 512))[entail].item()
                                   for s in sentences])))
    compare("mdeberta-nli fact/nli_support", got, want)


def test_factcg(standins, golden_records):
    """fact/factcg: P(output 1) (the second of two generic labels, LABEL_1, as FactCG's inference
    reads it) of ONE text: the document's sentences joined by newlines, then FactCG's instruction
    quoting the whole target, as [CLS] text [SEP]."""
    folder = standins["factcg-deberta-large"]
    ref = deberta(str(folder))
    assert sorted(ref.id2label.items()) == [(0, "LABEL_0"), (1, "LABEL_1")], ref.id2label
    supported = ref.label_index("LABEL_1")
    scorer = Scorer(model={"factcg-deberta-large": str(folder)}, device="cpu", dtype="float32")
    got = [e.value for e in scorer.score(golden_records, task="fact", aspect="factcg").examples]
    want = []
    for r in golden_records:
        document = "\n".join(DEFAULT_SPLITTER(r["source"])).replace(" \n ", "\n").strip()  # FactCG's one chunk
        assert single_chunk(FACTCG.chunks(r["source"], DEFAULT_SPLITTER, 550), "factcg") == document
        text = (f"{document}\n\nChoose your answer: based on the paragraph above can we conclude that "
                f"\"{r['target']}\"?\n\nOPTIONS:\n- Yes\n- No\nI think the answer is ")
        want.append(ref.probabilities(ref.encode_text(text, 2048))[supported].item())
    compare("factcg-deberta-large fact/factcg", got, want)


def refused_here(score) -> bool:
    """True on a transformers older than the causal-lm backend's floor, after checking that
    ``score()`` is refused there with the version it needs (what the oldest CI leg checks
    instead of scores); False where the backend runs."""
    from unieval_local.models.causal_lm.model import CAUSAL_LM_MIN_TRANSFORMERS
    from unieval_local.models.stored import transformers_version

    if transformers_version() >= CAUSAL_LM_MIN_TRANSFORMERS:
        return False
    with pytest.raises(Exception, match=r"causal-lm backend .*needs transformers>="):
        score()
    return True


def test_granite_guardian_groundedness(standins, golden_records):
    """fact/groundedness: the source as the template's document, the target as the assistant turn,
    guardian_config groundedness, think off, the generation prompt, then ``<score>``; the value is
    P(no) / (P(no) + P(yes)) at the next token (each word's forms with and without a space)."""
    folder = standins["granite-guardian-3.3-8b"]
    ref = decoder(str(folder))
    assert ref.kind == "granite"
    aspect = get_aspect("fact", "groundedness")
    scorer = Scorer(model={"granite-guardian-3.3-8b": str(folder)}, device="cpu", dtype="float32")
    if refused_here(lambda: scorer.score(golden_records, task="fact", aspect="groundedness")):
        return
    got = [e.value for e in scorer.score(golden_records, task="fact", aspect="groundedness").examples]
    want = []
    for r in golden_records:
        assert single_chunk(GRANITE_GROUNDEDNESS.chunks(r["source"], DEFAULT_SPLITTER, 500), "granite") == r["source"]
        prompt, _ = GRANITE_GROUNDEDNESS.render(aspect, UniEvalData(**r), r["target"])
        query = ChatQuery.decode(prompt)  # the prompt's parts; the chat is rendered here
        messages, documents = query.messages()
        assert documents == [{"doc_id": "0", "text": r["source"]}] and messages[-1]["content"] == r["target"]
        assert not query.continue_final and query.prefix == "<score>" and query.words == ("no", "yes")
        text = ref.render(messages, documents=documents, add_generation_prompt=True,
                          guardian_config={"criteria_id": "groundedness"}, think=False) + "<score>"
        want.append(ref.labels_readout(ref.encode(text), ("no", "yes")))
    compare("granite-guardian-3.3-8b fact/groundedness", got, want)


@pytest.mark.parametrize("layout", ["llama", "qwen2"])
def test_geval(standins, golden_records, layout):
    """summarization geval_*: G-Eval's form as the user turn, the answer prefilled with
    ``<Aspect> (1-K):`` (the final assistant message continued), thinking off; the value is the
    expected rating E = sum_k k p(k) over the digits 1..K renormalised (on the aspect's scale)."""
    folder = standins[f"g-eval-{layout}"]
    ref = decoder(str(folder))
    assert ref.kind == layout
    scorer = Scorer(model={"g-eval": str(folder)}, device="cpu", dtype="float32")
    if refused_here(lambda: scorer.score(golden_records, task="summarization", aspect=GEVAL_ASPECTS[0])):
        return
    for name in GEVAL_ASPECTS:
        aspect = get_aspect("summarization", name)
        k = aspect.scale
        got = [e.value for e in scorer.score(golden_records, task="summarization", aspect=name).examples]
        want = []
        for r in golden_records:
            prompt, _ = GEVAL.render(aspect, UniEvalData(**r), r["target"])
            query = ChatQuery.decode(prompt)
            messages, documents = query.messages()
            assert not documents and query.continue_final and query.readout == "rating" and query.scale == k
            assert messages[-1] == {"role": "assistant", "content": query.prefix}
            assert query.template == {"enable_thinking": False}
            text = ref.render(messages, continue_final=True, enable_thinking=False)
            ids = ref.encode(text)
            assert len(ids) < 4096  # g-eval's max_length: nothing is cut
            want.append(ref.geval_rating(ids, k)[0])
        compare(f"g-eval ({layout}) summarization/{name}", got, want)
