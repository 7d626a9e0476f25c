"""Issue 44: generation on a real small instruct model (skipped without one).

Stage one (e.g. ``Qwen/Qwen2.5-0.5B-Instruct``, Apache-2.0, about 1 GB) as the ``g-eval`` folder of
``$UNIEVAL_LOCAL_HOME`` (``$UNIEVAL_LOCAL_HOME/g-eval/config.json``), or name its folder with
``UNIEVAL_INSTRUCT_MODEL``; then ``python -m pytest -q -m real_weights tests/test_generation_real.py -s``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from fit_claims import fit_summaries  # noqa: E402

from unieval_local.text.claims import claims_messages, parse_claims  # noqa: E402


@pytest.fixture(scope="module")
def instruct_runner():
    """A float32 CPU runner over the staged instruct model; skips where none is staged."""
    folder = os.environ.get("UNIEVAL_INSTRUCT_MODEL") or (
        str(Path(os.environ["UNIEVAL_LOCAL_HOME"]) / "g-eval") if os.environ.get("UNIEVAL_LOCAL_HOME") else "")
    if not folder or not (Path(folder) / "config.json").is_file():
        pytest.skip("no instruct model staged (UNIEVAL_INSTRUCT_MODEL or $UNIEVAL_LOCAL_HOME/g-eval)")
    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.causal_lm.runner import CausalLMRunner
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator

    evaluator = get_evaluator("g-eval")
    model = CausalLMModel(ResolvedCheckpoint("g-eval", Path(folder), "explicit"), evaluator, "cpu", "float32")
    return CausalLMRunner(model, evaluator=evaluator, fingerprint="real")


@pytest.mark.real_weights
def test_alone_vs_batched_flips_only_at_near_ties(instruct_runner, shared_data):
    """Greedy ids of each claims prompt alone vs in one left-padded batch: the share that differ is
    printed; where they differ, the first differing step is a near-tie (top-2 probabilities within
    1e-3 in the alone run's own forward pass), the only way padding numerics can flip an argmax."""
    import torch

    r = instruct_runner
    prompts = [r.chat_prompt(claims_messages(s)) for s in fit_summaries(shared_data, 4)]
    alone = [r.generate([p], max_new_tokens=48)[0] for p in prompts]
    batched = r.generate(prompts, max_new_tokens=48)
    flips = [k for k, (a, b) in enumerate(zip(alone, batched)) if a.token_ids != b.token_ids]
    print(f"alone vs batched: {len(flips)} of {len(prompts)} prompts differ ({len(flips) / len(prompts):.2f})")
    tok, lm = r.model.tokenizer, r.model.model
    for k in flips:
        a, b = alone[k].token_ids, batched[k].token_ids
        step = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        ids = tok(prompts[k], add_special_tokens=False)["input_ids"] + list(a[:step])
        with torch.no_grad():
            probs = torch.softmax(lm(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
        top = torch.topk(probs, 2).values
        assert float(top[0] - top[1]) < 1e-3, (k, step)


@pytest.mark.real_weights
def test_claim_list_parsed_for_a_summeval_summary(instruct_runner, shared_data):
    """The FActScore-style claims prompt on a SummEval summary gives a parseable ``- `` list."""
    s = fit_summaries(shared_data, 1)[0]
    g = instruct_runner.generate([instruct_runner.chat_prompt(claims_messages(s))], max_new_tokens=256)[0]
    claims = parse_claims(g.text)
    print(repr(g.text))
    assert g.finish in ("eos", "stop") and claims, g.text
    assert all(c.strip() for c in claims)
