"""Greedy generation in the causal-lm backend (``CausalLMRunner.chat_prompt`` / ``generate``) on
generated stand-ins (float32, tiny widths): the ids equal a plain greedy loop written here (full
forward each step, no cache, no padding); the same ids alone, in one batch, in small batches and
across runs, on the plain llama and qwen2 stand-ins and on the one fitted to write claim lists
(``make_test_checkpoint.py --fit claims``); stop strings cut the text; ``max_new_tokens``; prompts
over the window; a tokenizer without a chat template refused; the fitted stand-in's lists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from fit_claims import claim_target, fit_summaries  # noqa: E402
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local.errors import CheckpointError  # noqa: E402
from unieval_local.models.base import Generation  # noqa: E402
from unieval_local.models.causal_lm.generate import eos_ids  # noqa: E402
from unieval_local.models.causal_lm.model import CausalLMModel  # noqa: E402
from unieval_local.models.causal_lm.runner import CausalLMRunner  # noqa: E402
from unieval_local.models.checkpoints import ResolvedCheckpoint  # noqa: E402
from unieval_local.registry.evaluators import get_evaluator  # noqa: E402
from unieval_local.text.claims import claims_messages, parse_claims  # noqa: E402
from unieval_local.text.sentences import DEFAULT_SPLITTER  # noqa: E402

TEXTS = ["Summarise: the council approved the park.", "Hi.",
         "The firm's shares rose five percent after strong sales in Asia and Europe, and the chief executive said "
         "the company would hire two hundred people in the coming year.", "Rain fell on the town for three days."]


@pytest.fixture(scope="session")
def gen_ckpts(tmp_path_factory, shared_data) -> dict[str, Path]:
    """The plain llama and qwen2 stand-ins and a qwen2 one fitted to write claim lists."""
    root = tmp_path_factory.mktemp("generation")
    out = {layout: build_causal_lm_checkpoint(root / layout, layout=layout, data_dir=shared_data, seed=i,
                                              evaluator="g-eval") for i, layout in enumerate(("llama", "qwen2"))}
    out["fitted"] = build_causal_lm_checkpoint(root / "fitted", layout="qwen2", data_dir=shared_data,
                                               evaluator="g-eval", fit="claims")
    return out


_RUNNERS: dict = {}


def runner(folder: Path, batch_tokens: int = 65536) -> CausalLMRunner:
    key = str(folder)
    if key not in _RUNNERS:
        ev = get_evaluator("g-eval")
        _RUNNERS[key] = CausalLMModel(ResolvedCheckpoint("g-eval", folder, "explicit"), ev, "cpu", "float32")
    return CausalLMRunner(_RUNNERS[key], evaluator=get_evaluator("g-eval"), fingerprint="t", batch_tokens=batch_tokens)


def prompts(r: CausalLMRunner) -> list[str]:
    return [r.chat_prompt([{"role": "user", "content": t}]) for t in TEXTS]


def plain_greedy(r: CausalLMRunner, prompt: str, n: int) -> list[int]:
    """The reference: one prompt, a full forward over prompt + ids so far at each step (no key/value
    cache, no padding), the argmax of the last position, until an end-of-sequence id or ``n`` ids."""
    import torch

    ids = r.model.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(n):
            logits = r.model.model(input_ids=torch.tensor([ids + new]), use_cache=False).logits
            new.append(int(logits[0, -1].argmax()))
            if new[-1] in eos_ids(r.model):
                break
    return new


@pytest.mark.parametrize("which", ["llama", "qwen2", "fitted"])
def test_ids_equal_a_plain_greedy_loop_alone_batched_and_across_runs(gen_ckpts, shared_data, which):
    r = runner(gen_ckpts[which])
    ps = prompts(r)
    if which == "fitted":
        ps += [r.chat_prompt(claims_messages(s)) for s in fit_summaries(shared_data)[:2]]
    n = 24
    batched = r.generate(ps, max_new_tokens=n)
    alone = [r.generate([p], max_new_tokens=n)[0] for p in ps]
    again = r.generate(ps[::-1], max_new_tokens=n)[::-1]
    small = runner(gen_ckpts[which], batch_tokens=2 * (max(len(r.model.tokenizer(p)["input_ids"]) for p in ps) + n))
    pairs = small.generate(ps, max_new_tokens=n)  # batches of two rows
    for k, p in enumerate(ps):
        want = plain_greedy(r, p, n)
        assert list(batched[k].token_ids) == want, k
        assert alone[k] == batched[k] == again[k] == pairs[k], k
    assert len({g.token_ids for g in batched}) == len(ps)  # the prompts' continuations differ


@pytest.mark.parametrize("n", [1, 7])
def test_max_new_tokens_gives_length(gen_ckpts, n):
    r = runner(gen_ckpts["llama"])
    out = r.generate(prompts(r), max_new_tokens=n)
    full = r.generate(prompts(r), max_new_tokens=20)
    for g, f in zip(out, full):
        assert g.finish == "length" and len(g.token_ids) == n
        assert g.token_ids == f.token_ids[:n]  # a shorter run is a prefix of a longer one
        assert g.text == r.model.tokenizer.decode(list(g.token_ids), skip_special_tokens=False)


def test_a_stop_string_cuts_the_text_and_ends_the_ids(gen_ckpts):
    r = runner(gen_ckpts["qwen2"])
    tok = r.model.tokenizer
    p = prompts(r)[0]
    full = r.generate([p], max_new_tokens=20)[0]
    assert full.finish == "length"
    stop = tok.decode(list(full.token_ids[5:7]))  # two tokens from the middle of the continuation
    start = full.text.find(stop)
    assert start > 0
    got = r.generate([p, prompts(r)[1]], max_new_tokens=20, stop=[stop, "never appears \u2603"])[0]
    assert got.finish == "stop"
    assert got.text == full.text[:start]
    k = len(got.token_ids)
    assert got.token_ids == full.token_ids[:k]
    assert stop in tok.decode(list(got.token_ids)) and stop not in tok.decode(list(got.token_ids[:-1]))


def test_the_fitted_stand_in_writes_claim_lists_ending_in_eos(gen_ckpts, shared_data):
    r = runner(gen_ckpts["fitted"])
    summaries = fit_summaries(shared_data)
    assert len(summaries) == 4
    out = r.generate([r.chat_prompt(claims_messages(s)) for s in summaries], max_new_tokens=200)
    eos = r.model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for s, g in zip(summaries, out):
        assert g.finish == "eos" and g.token_ids[-1] == eos
        assert g.text == r.model.tokenizer.decode(list(g.token_ids[:-1]))
        sentences = [x.strip() for x in DEFAULT_SPLITTER(s)]
        assert len(sentences) >= 2
        assert parse_claims(g.text) == sentences
        assert g.text == claim_target(s)
    # a stop string at the line end: the first claim line only
    first = r.generate([r.chat_prompt(claims_messages(summaries[0]))], max_new_tokens=200, stop=["\n"])[0]
    assert first.finish == "stop" and first.text == "- " + DEFAULT_SPLITTER(summaries[0])[0].strip()


def test_a_prompt_over_the_window_is_too_long_and_the_rest_run(gen_ckpts):
    r = runner(gen_ckpts["llama"])
    ps = prompts(r)
    n_long = len(r.model.tokenizer(ps[2], add_special_tokens=False)["input_ids"])
    window = n_long + 5  # the longest prompt + 6 new tokens does not fit; the others do
    out = r.generate(ps, max_new_tokens=6, max_length=window)
    assert out[2] == Generation("", (), "too_long")
    assert [g.finish for k, g in enumerate(out) if k != 2] == ["length"] * 3
    assert [out[k] for k in (0, 1, 3)] == r.generate([ps[k] for k in (0, 1, 3)], max_new_tokens=6)
    assert r.generate([ps[2]], max_new_tokens=5, max_length=window)[0].finish == "length"  # exactly fits
    assert r.evaluator.max_length == 4096  # the default window: the evaluator's
    assert r.generate([ps[2]], max_new_tokens=4097 - n_long)[0].finish == "too_long"


def test_duplicate_prompts_run_once_and_answer_each(gen_ckpts):
    r = runner(gen_ckpts["qwen2"])
    ps = prompts(r)
    out = r.generate([ps[1], ps[0], ps[1]], max_new_tokens=5)
    assert out[0] == out[2] == r.generate([ps[1]], max_new_tokens=5)[0] and out[0] != out[1]


def test_no_chat_template_is_refused(gen_ckpts, monkeypatch):
    r = runner(gen_ckpts["llama"])
    monkeypatch.setattr(r.model.tokenizer, "chat_template", None)
    with pytest.raises(CheckpointError, match="no chat template: not an instruct model"):
        r.chat_prompt([{"role": "user", "content": "Hi."}])


def test_chat_prompt_is_the_template_with_the_generation_prompt(gen_ckpts):
    r = runner(gen_ckpts["qwen2"])
    assert r.chat_prompt([{"role": "user", "content": "Hi."}]) == "<|im_start|>user\nHi.<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(ValueError, match="message 1: field 'content'"):
        r.chat_prompt([{"role": "user", "content": "Hi."}, {"role": "user"}])


@pytest.mark.parametrize("kwargs, match", [({"max_new_tokens": 0}, "max_new_tokens must be a positive"),
                                           ({"max_new_tokens": 3, "stop": [""]}, "stop string 0"),
                                           ({"max_new_tokens": 3, "stop": "x"}, "not one string"),
                                           ({"max_new_tokens": 3, "max_length": 0}, "max_length must be")])
def test_bad_arguments_are_named(gen_ckpts, kwargs, match):
    r = runner(gen_ckpts["llama"])
    with pytest.raises((ValueError, TypeError), match=match):
        r.generate(["Hi."], **kwargs)
    with pytest.raises(ValueError, match="prompt 1: a rendered prompt must be a non-empty string"):
        r.generate(["Hi.", ""], max_new_tokens=3)


def test_generation_refuses_an_unknown_finish():
    with pytest.raises(ValueError, match="finish must be one of eos, stop, length, too_long"):
        Generation("x", (1,), "done")
