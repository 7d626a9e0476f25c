"""The causal-lm backend on generated llama / qwen2 / granite checkpoints (tiny widths): each
readout equal to a float64 reference computed here through transformers' model class and the
tokenizer's own ``apply_chat_template``; batch == one at a time under left and right padding on
mixed lengths; strict loading (missing and unexpected tensors, a tokenizer larger than the
embedding, no chat template, a model over the free memory); the parameter count from the config;
truncation of the source only."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local.errors import CheckpointError  # noqa: E402
from unieval_local.models.causal_lm.model import CausalLMModel, parameter_count, token_forms  # noqa: E402
from unieval_local.models.causal_lm.runner import CausalLMRunner, encode, readout, render  # noqa: E402
from unieval_local.models.checkpoints import ResolvedCheckpoint  # noqa: E402
from unieval_local.registry.evaluators import get_evaluator  # noqa: E402
from unieval_local.registry.tasks import get_aspect  # noqa: E402
from unieval_local.schema import UniEvalData  # noqa: E402
from unieval_local.text.chat import GEVAL, GRANITE_GROUNDEDNESS, ChatQuery  # noqa: E402

LAYOUTS = ("qwen2", "llama", "granite")
#: (layout, evaluator, task, aspect): a rating and a labels readout on every layout between them
CASES = [("qwen2", "g-eval", "summarization", "geval_coherence"), ("llama", "g-eval", "summarization", "geval_fluency"),
         ("granite", "granite-guardian-3.3-8b", "fact", "groundedness"),
         ("qwen2", "granite-guardian-3.3-8b", "fact", "groundedness")]


@pytest.fixture(scope="session")
def causal_ckpts(tmp_path_factory, shared_data) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("causal")
    return {layout: build_causal_lm_checkpoint(root / layout, layout=layout, data_dir=shared_data, seed=i)
            for i, layout in enumerate(LAYOUTS)}


_LOADED: dict = {}


def load(folder: Path, evaluator: str, dtype: str = "float32") -> CausalLMModel:
    key = (str(folder), evaluator, dtype)
    if key not in _LOADED:
        _LOADED[key] = CausalLMModel(ResolvedCheckpoint(evaluator, folder, "explicit"), get_evaluator(evaluator),
                                     "cpu", dtype)
    return _LOADED[key]


def examples() -> list[UniEvalData]:
    texts = [("The council approved the new park on Tuesday after a long debate about its cost.", "A park was approved."),
             ("Rain fell.", "It rained heavily across the whole region for three days, flooding two towns."),
             ("Shares of the firm rose five percent after it reported strong sales in Asia and Europe.", "Shares fell."),
             ("The team won.", "The team won.")]
    return [UniEvalData(source=s, target=t) for s, t in texts]


def prompts_of(task: str, aspect_name: str) -> list[str]:
    aspect = get_aspect(task, aspect_name)
    fmt = GEVAL if aspect.checkpoint == "g-eval" else GRANITE_GROUNDEDNESS
    return [fmt.render(aspect, ex, ex.target)[0] for ex in examples()]


def reference(folder: Path, prompt: str, forms: dict[str, tuple[int, ...]]) -> float:
    """A plain float64 computation: the folder's tokenizer.json (as a fast tokenizer: transformers 5's
    AutoTokenizer builds a model type's own class, whose pre-tokenizer may differ from the file) and its
    chat template, the model class in float64, the softmax at the last position, the readout's formula."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).double().eval()
    q = ChatQuery.decode(prompt)
    messages, documents = q.messages()
    if q.continue_final:
        text = tok.apply_chat_template(messages, tokenize=False, continue_final_message=True, **q.template)
    else:
        text = tok.apply_chat_template(messages, documents=documents, tokenize=False, add_generation_prompt=True,
                                       **q.template) + q.prefix
    ids = torch.tensor([tok(text, add_special_tokens=False).input_ids])
    with torch.no_grad():
        p = torch.softmax(model(input_ids=ids).logits[0, -1], dim=-1).numpy()
    if q.readout == "labels":
        a, b = (sum(p[i] for i in forms[w]) for w in q.words)
        return a / (a + b)
    mass = np.array([sum(p[i] for i in forms[str(k)]) for k in range(1, q.scale + 1)])
    mass /= mass.sum()
    return (float(np.dot(np.arange(1, q.scale + 1), mass)) - 1) / (q.scale - 1)


@pytest.mark.parametrize("layout,evaluator,task,aspect", CASES)
def test_readout_equals_a_float64_reference(causal_ckpts, layout, evaluator, task, aspect):
    folder = causal_ckpts[layout]
    model = load(folder, evaluator)
    prompts = prompts_of(task, aspect)
    values, n_tokens = CausalLMRunner(model, evaluator=get_evaluator(evaluator), fingerprint="x").score(
        prompts, max_length=4096)
    want = [reference(folder, p, model.forms) for p in prompts]
    np.testing.assert_allclose(values, want, atol=1e-5, rtol=0)
    assert np.ptp(values) > 1e-3  # the prompts are told apart: the comparison is not between constants
    assert list(n_tokens) == [len(encode(model, p)[0]) for p in prompts]


@pytest.mark.parametrize("padding", ["left", "right"])
def test_batch_equals_one_at_a_time_on_mixed_lengths(causal_ckpts, padding):
    model = load(causal_ckpts["qwen2"], "g-eval")
    runner = CausalLMRunner(model, evaluator=get_evaluator("g-eval"), fingerprint="x", padding=padding,
                            batch_tokens=10**6)
    prompts = prompts_of("summarization", "geval_relevance") + prompts_of("summarization", "geval_fluency")
    lengths = [len(encode(model, p)[0]) for p in prompts]
    assert len(set(lengths)) >= 4  # mixed lengths: padding is exercised
    together, _, dists = runner.evaluate(prompts, max_length=4096)
    alone = [runner.evaluate([p], max_length=4096)[0][0] for p in prompts]
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)
    shuffled = [prompts[i] for i in (5, 2, 7, 0, 1, 6, 3, 4)]
    np.testing.assert_allclose(runner.score(shuffled, max_length=4096)[0], together[[5, 2, 7, 0, 1, 6, 3, 4]],
                               atol=1e-5, rtol=0)
    assert sorted(dists[0]) == ["1", "2", "3", "4", "5"] and sorted(dists[4]) == ["1", "2", "3"]
    assert all(abs(sum(d.values()) - 1) < 1e-12 for d in dists)


def test_the_prompt_is_the_checkpoints_own_chat_template(causal_ckpts):
    from transformers import AutoTokenizer

    folder = causal_ckpts["granite"]
    model = load(folder, "granite-guardian-3.3-8b")
    prompt = prompts_of("fact", "groundedness")[0]
    tok = AutoTokenizer.from_pretrained(folder)
    want = tok.apply_chat_template([{"role": "assistant", "content": "A park was approved."}],
                                   documents=[{"doc_id": "0", "text": examples()[0].source}],
                                   guardian_config={"criteria_id": "groundedness"}, think=False, tokenize=False,
                                   add_generation_prompt=True) + "<score>"
    assert render(model, ChatQuery.decode(prompt)) == want
    assert "groundedness" in want and "<think>" not in want
    g = load(causal_ckpts["qwen2"], "g-eval")
    text = render(g, ChatQuery.decode(prompts_of("summarization", "geval_coherence")[0]))
    assert text.endswith("<think>\n\n</think>\n\nCoherence (1-5):")  # thinking off, the prefix last


def test_rating_readout_by_hand():
    class Model:
        forms = {"1": (0,), "2": (1, 2), "3": (3,)}

        def forms_of(self, w):
            return self.forms[w]

    probs = np.array([0.1, 0.05, 0.05, 0.2, 0.6])  # p(1) = .1, p(2) = .05 + .05, p(3) = .2 of .4
    q = ChatQuery((("user", "x"),), "Fluency (1-3):", "rating", scale=3)
    value, dist = readout(probs, q, Model())
    assert dist == pytest.approx({"1": 0.25, "2": 0.25, "3": 0.5})
    assert value == pytest.approx((1 * 0.25 + 2 * 0.25 + 3 * 0.5 - 1) / 2)
    labels = ChatQuery((("user", "x"),), "<score>", "labels", words=("1", "3"))
    assert readout(probs, labels, Model())[0] == pytest.approx(0.1 / 0.3)


def test_token_forms_sum_both_spellings(causal_ckpts):
    model = load(causal_ckpts["qwen2"], "g-eval")
    tok = model.tokenizer
    assert token_forms(tok, "yes") == (tok.encode("yes", add_special_tokens=False)[0],
                                       tok.encode(" yes", add_special_tokens=False)[0])
    assert token_forms(tok, "no") == tuple(tok.encode(" no", add_special_tokens=False))  # "no" alone is two tokens


@pytest.mark.parametrize("layout", LAYOUTS)
def test_parameter_count_from_the_config_is_exact(causal_ckpts, layout):
    model = load(causal_ckpts[layout], "g-eval")
    assert parameter_count(model.model.config) == sum(p.numel() for p in model.model.parameters())


def test_parameter_count_of_qwen2_0_5b_widths():
    from transformers import Qwen2Config

    config = Qwen2Config(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, tie_word_embeddings=True)
    assert parameter_count(config) == 494_032_768  # Qwen2-0.5B's published count


def test_truncation_cuts_the_source_and_keeps_the_answer_slot(causal_ckpts):
    model = load(causal_ckpts["qwen2"], "g-eval")
    aspect = get_aspect("summarization", "geval_consistency")
    ex = UniEvalData(source=" ".join(["The river rose after the storm and the bridge closed."] * 60), target="A summary.")
    prompt = GEVAL.render(aspect, ex, ex.target)[0]
    ids, full = encode(model, prompt, max_length=600)
    assert full > 600 and 590 <= len(ids) <= 600
    tail = encode(model, prompt)[0][-40:]
    assert ids[-40:] == tail  # the form and the prefix are whole: only the source lost its end


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / "unieval_manifest.json").unlink(missing_ok=True)
    return dst


@pytest.mark.parametrize("broken,needle", [("missing", "missing"), ("unexpected", "unexpected"),
                                           ("template", "chat template"), ("vocab", "embedding has"),
                                           ("bin", "safetensors")])
def test_strict_loading_names_what_is_wrong(causal_ckpts, tmp_path, broken, needle):
    from safetensors.torch import load_file, save_file

    folder = _copy(causal_ckpts["llama"], tmp_path / "broken")
    weights = folder / "model.safetensors"
    state = load_file(weights)
    if broken == "missing":
        del state["model.layers.1.mlp.up_proj.weight"]
    elif broken == "unexpected":
        state["model.layers.0.extra.weight"] = state["model.norm.weight"].clone()
    elif broken == "vocab":
        config = json.loads((folder / "config.json").read_text())
        config["vocab_size"] = rows = 900
        (folder / "config.json").write_text(json.dumps(config))
        state = {k: (v[:rows].clone() if v.shape[0] == 1000 else v) for k, v in state.items()}
    elif broken == "template":
        config = json.loads((folder / "tokenizer_config.json").read_text())
        del config["chat_template"]
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    if broken == "bin":
        import torch

        torch.save(state, folder / "pytorch_model.bin")
        weights.unlink()
    else:
        save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=needle):
        CausalLMModel(ResolvedCheckpoint("g-eval", folder, "explicit"), get_evaluator("g-eval"), "cpu", "float32")


def test_a_model_over_the_free_memory_is_refused_before_loading(causal_ckpts):
    with pytest.raises(CheckpointError, match=r"needs .* GiB in float32 .* bfloat16"):
        CausalLMModel(ResolvedCheckpoint("g-eval", causal_ckpts["qwen2"], "explicit"), get_evaluator("g-eval"),
                      "cpu", "float32", free=1000)


def test_bfloat16_scores_close_to_float32(causal_ckpts):
    prompts = prompts_of("summarization", "geval_coherence")
    spec = get_evaluator("g-eval")
    f32 = CausalLMRunner(load(causal_ckpts["qwen2"], "g-eval"), evaluator=spec, fingerprint="x").score(
        prompts, max_length=4096)[0]
    b16 = CausalLMRunner(load(causal_ckpts["qwen2"], "g-eval", "bfloat16"), evaluator=spec, fingerprint="x").score(
        prompts, max_length=4096)[0]
    np.testing.assert_allclose(b16, f32, atol=0.05)
    assert not np.array_equal(b16, f32)  # bfloat16 really ran


def test_auto_dtype_is_bfloat16_above_3b_parameters(causal_ckpts, tmp_path):
    """dtype ``auto`` (the default) reads the parameter count from config.json before any weight
    loads: a decoder above 3B runs in bfloat16 (signed, noted), the small one in float32; an
    explicit float32 is kept. The 30B-parameter config cannot load here: the memory check's
    refusal names the dtype the load was tried in."""
    import json
    import shutil

    from unieval_local import Scorer
    from unieval_local.engine import Engine

    big = tmp_path / "big"
    shutil.copytree(causal_ckpts["qwen2"], big)
    config = json.loads((big / "config.json").read_text())
    config["intermediate_size"] = 80_000_000
    (big / "config.json").write_text(json.dumps(config))
    (big / "unieval_manifest.json").unlink()  # its record of config.json no longer holds
    n = parameter_count(__import__("transformers").AutoConfig.from_pretrained(big))
    assert n > 3e9
    engine = Engine(model={"g-eval": str(big)}, device="cpu")
    with pytest.warns(UserWarning, match=r"g-eval: \d+\.\dB parameters: bfloat16 \(--dtype auto"):
        assert engine.dtype_for("g-eval") == "bfloat16"
    assert engine.config.dtype == "float32"  # the run's dtype; per checkpoint it may differ
    assert engine.signature("summarization", "geval_coherence").dtype == "bfloat16"
    assert engine.dtype_for("unieval-sum") == "float32"
    with pytest.warns(UserWarning, match="bfloat16 \\(--dtype auto"):
        with pytest.raises(CheckpointError, match=r"GiB in bfloat16"):
            Scorer(model={"g-eval": str(big)}, device="cpu").score(
                [{"source": "a b.", "target": "a."}], task="summarization", aspect="geval_coherence")
    with pytest.raises(CheckpointError, match=r"GiB in float32"):
        Scorer(model={"g-eval": str(big)}, device="cpu", dtype="float32").score(
            [{"source": "a b.", "target": "a."}], task="summarization", aspect="geval_coherence")
    small = Engine(model={"g-eval": str(causal_ckpts["qwen2"])}, device="cpu")
    assert small.dtype_for("g-eval") == "float32"
    assert small.signature("summarization", "geval_coherence").dtype == "float32"
    assert Engine(model={"g-eval": str(big)}, device="cpu", dtype="float32").dtype_for("g-eval") == "float32"


def test_prefix_reuse_equals_whole_prompts(causal_ckpts):
    """Summaries of one source under one aspect share the instruction and the source: their
    prefix runs once and the suffixes over its cache; the values equal the whole prompts'
    (to 1e-5 in float32), for both readouts and under tiny token budgets (many batches)."""
    sources = [ex.source for ex in examples()]
    targets = ["A park was approved.", "The council met on Tuesday and argued about money.", "Nothing happened.",
               "It rained."]
    for layout, evaluator, task, name in CASES[:3]:
        aspect = get_aspect(task, name)
        fmt = GEVAL if aspect.checkpoint == "g-eval" else GRANITE_GROUNDEDNESS
        prompts = [fmt.render(aspect, UniEvalData(source=s * 4, target=t), t)[0] for s in sources for t in targets]
        spec = get_evaluator(evaluator)
        model = load(causal_ckpts[layout], evaluator)
        reuse = CausalLMRunner(model, evaluator=spec, fingerprint="x", batch_tokens=300)
        whole = CausalLMRunner(model, evaluator=spec, fingerprint="x", prefix_reuse=False)
        ids = [encode(model, p)[0] for p in prompts]
        groups, alone = reuse.prefix_groups(ids)
        assert sorted([i for _, m in groups for i in m] + alone) == list(range(len(prompts)))
        if name == "geval_coherence":  # the source comes before the summary: one group per source
            assert len(groups) == len(sources) and not alone
            assert all(len(m) == len(targets) for _, m in groups)
        assert groups and all(k >= 128 and all(ids[i][:k] == ids[m[0]][:k] for i in m) for k, m in groups)
        a, _, da = reuse.evaluate(prompts, max_length=8192)
        b, _, db = whole.evaluate(prompts, max_length=8192)
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
        assert all(x.keys() == y.keys() and max(abs(x[w] - y[w]) for w in x) < 1e-5 for x, y in zip(da, db))
