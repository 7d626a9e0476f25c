"""The engine on a generated checkpoint equals a plain float64 computation of UniEval's score.

The reference (conftest.Reference) builds nothing with our code: prompts are written
here from the contract's templates, and each query is scored alone, in input order,
with float64 weights and a full-vocabulary softmax. Tolerance: 1e-5.

The aspect tests run on every generated layout (conftest.LAYOUTS): original T5 (tied,
rescaled head, safetensors) and the official UniEval layout, T5 v1.1 (gated-GELU,
untied head, no rescale) from ``pytorch_model.bin`` and from safetensors, each with our
fast forward and with the model's own forward.
"""

import random

import numpy as np
import pytest

from unieval_local import Scorer, score
from unieval_local.models.t5.runner import load_t5_model
from unieval_local.models.batching import plan_batches
from unieval_local.text.sentences import DEFAULT_SPLITTER

from conftest import LAYOUTS

TOL = 1e-5

pytestmark = pytest.mark.parity


def reference_scores(reference, records, aspect, max_length=1024, reduce_refs=np.mean):
    out = []
    for r in records:
        tgt, src = r["target"], r.get("source")
        if aspect == "coherence":
            vals = [reference(f"question: Is this a coherent summary to the document? </s> summary: {tgt} </s> document: {src}", max_length)]
        elif aspect == "consistency":
            vals = [np.mean([reference(f"question: Is this claim consistent with the document? </s> claim: {s} </s> document: {src}", max_length)
                             for s in DEFAULT_SPLITTER(tgt)])]
        elif aspect == "fluency":
            vals = [np.mean([reference(f"question: Is this a fluent paragraph? </s> paragraph: {s}", max_length)
                             for s in DEFAULT_SPLITTER(tgt)])]
        else:
            vals = [reduce_refs([reference(f"question: Is this summary relevant to the reference? </s> summary: {tgt} </s> reference: {ref}", max_length)
                                 for ref in r["references"]])]
        out.append(float(vals[0]))
    return np.array(out)


@pytest.fixture(scope="module")
def scorer(tiny_ckpt):
    return Scorer(model=tiny_ckpt, device="cpu")


#: (layout, aspect) -> the reference's scores of the first 12 records (4 systems of each of the
#: 3 documents, the two long ones truncated: the float64 reference scores each query alone).
_REFERENCE_SCORES: dict = {}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "plain"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("aspect", ["coherence", "consistency", "fluency", "relevance"])
def test_each_aspect_equals_reference(layout_ckpts, references, summeval_records, aspect, layout, fast):
    records = summeval_records[:12]
    s = Scorer(model=layout_ckpts[layout], device="cpu", fast_forward=fast)
    got = np.array([e.value for e in s.score(records, task="summarization", aspect=aspect).examples])
    if (layout, aspect) not in _REFERENCE_SCORES:  # the float64 reference once for fast and plain
        _REFERENCE_SCORES[layout, aspect] = reference_scores(references[layout], records, aspect)
    want = _REFERENCE_SCORES[layout, aspect]
    assert np.abs(got - want).max() < TOL
    assert got.std() > 1e-3  # the generated checkpoint tells examples apart


def test_v11_layout_is_untied_and_unscaled(v11_ckpts):
    """The official layout loads as it is stored: its own LM head, no d_model^-0.5 rescale."""
    import json

    import torch

    for weights, folder in v11_ckpts.items():
        assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is False
        runner = load_t5_model(Scorer(model=folder).checkpoint("unieval-sum"), "cpu", "float32")
        model = runner.model
        assert model.config.feed_forward_proj == "gated-gelu" and not runner._scale_decoder_outputs
        assert not torch.equal(model.get_output_embeddings().weight, model.get_input_embeddings().weight)
    bin_names = set(torch.load(v11_ckpts["bin"] / "pytorch_model.bin", weights_only=True))
    assert {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"} <= bin_names


def test_inputs_are_long_enough_to_be_truncated(scorer, summeval_records):
    runner = scorer.runner("unieval-sum").t5
    prompts = [f"question: Is this a coherent summary to the document? </s> summary: {r['target']} </s> document: {r['source']}"
               for r in summeval_records[:24]]
    full = runner.tokenizer(prompts).input_ids
    assert sum(len(x) > 1024 for x in full) >= 5
    cut = runner.tokenize(prompts, 1024)
    assert all(len(x) <= 1024 and x[-1] == 1 for x in cut)


def test_short_max_length_matches_reference(tiny_ckpt, reference, summeval_records):
    records = summeval_records[24:32]
    s = Scorer(model=tiny_ckpt, device="cpu", max_length=64)
    got = np.array([e.value for e in s.score(records, aspect="coherence").examples])
    assert np.abs(got - reference_scores(reference, records, "coherence", max_length=64)).max() < TOL


def test_readme_example_and_several_references(scorer, reference, shared_data):
    import json

    ex = json.loads((shared_data / "unieval-readme-example.json").read_text())
    rec = {"target": ex["target"], "source": ex["source"], "references": [ex["reference"], "Peter took a taxi.", "A party."]}
    for aspect in ["coherence", "consistency", "fluency", "relevance"]:
        got = scorer.score([rec], aspect=aspect).examples[0].value
        assert abs(got - reference_scores(reference, [rec], aspect)[0]) < TOL
    mx = Scorer(model=scorer.model, reference_reduction="max").score([rec], aspect="relevance").examples[0].value
    assert abs(mx - reference_scores(reference, [rec], "relevance", reduce_refs=np.max)[0]) < TOL


def test_yes_and_no_are_single_distinct_pieces(scorer):
    runner = scorer.runner("unieval-sum")
    tok = runner.t5.tokenizer
    assert runner.evaluator.answers == ("Yes", "No")
    assert tok.convert_ids_to_tokens(tok("Yes").input_ids) == ["▁Yes", "</s>"]
    assert tok.convert_ids_to_tokens(tok("No").input_ids) == ["▁No", "</s>"]
    assert runner.answer_ids == (tok("Yes").input_ids[0], tok("No").input_ids[0])
    assert runner.answer_ids[0] != runner.answer_ids[1] and runner.t5.start_id == 0


def test_separator_is_the_eos_token(scorer):
    runner = scorer.runner("unieval-sum").t5
    ids = runner.tokenize(["question: Is this a fluent paragraph? </s> paragraph: Hi.</s>x"], 1024)[0]
    assert ids.count(1) == 3 and ids[-1] == 1
    assert runner.tokenizer.eos_token_id == 1


@pytest.fixture(scope="module")
def consistency_base(scorer, summeval_records):
    """Consistency of the first 20 records at the default batch budget."""
    return np.array([e.value for e in scorer.score(summeval_records[:20], aspect="consistency").examples])


@pytest.mark.parametrize("batch_tokens", [1, 700, 3000, 10**6])
def test_batch_size_does_not_change_scores(tiny_ckpt, consistency_base, summeval_records, batch_tokens):
    records = summeval_records[:20]
    base = consistency_base
    other = Scorer(model=tiny_ckpt, batch_tokens=batch_tokens)
    got = np.array([e.value for e in other.score(records, aspect="consistency").examples])
    assert np.abs(got - base).max() < TOL


def test_order_and_duplicates_do_not_change_scores(scorer, summeval_records):
    records = summeval_records[:16]
    base = [e.value for e in scorer.score(records, aspect="fluency").examples]
    perm = list(range(16))
    random.Random(1).shuffle(perm)
    shuffled = [e.value for e in scorer.score([records[i] for i in perm] + records[:3], aspect="fluency").examples]
    assert np.abs(np.array(shuffled[:16]) - np.array([base[i] for i in perm])).max() < TOL
    assert np.abs(np.array(shuffled[16:]) - np.array(base[:3])).max() < TOL


def test_plan_batches_respects_the_budget():
    lengths = [5, 100, 30, 30, 7, 64, 1, 200]
    batches = plan_batches(lengths, 128)
    assert sorted(i for b in batches for i in b) == list(range(8))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 128
    assert batches[0] == [7] and batches[1] == [1]  # longest first; 200 > budget goes alone
    assert plan_batches([3, 3, 3], 1) == [[0], [1], [2]]


def test_loaded_models_are_cached(tiny_ckpt, scorer):
    r1 = load_t5_model(scorer.checkpoint("unieval-sum"), "cpu", "float32", scorer.engine.fingerprint("unieval-sum"))
    # one model per (folder, content fingerprint, device, dtype) per process
    assert r1 is scorer.runner("unieval-sum").t5
    a = score([{"target": "A b. C d.", "source": "Doc."}], aspect="coherence", model=tiny_ckpt, device="cpu")
    b = score([{"target": "A b. C d.", "source": "Doc."}], aspect="coherence", model=tiny_ckpt, device="cpu")
    assert a.examples[0].value == b.examples[0].value
    # the checkpoint signs by its evaluator and content, never by a path of this machine
    assert a.signature.checkpoint == "unieval-sum" and str(tiny_ckpt) not in str(a.signature)
    assert a.signature.dtype == "float32"
    assert a.overall.value == a.examples[0].value
