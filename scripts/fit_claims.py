"""Briefly fit a causal-lm stand-in to write claim lists (``make_test_checkpoint.py --fit claims``).

A random-weight decoder never writes a parseable list, so the generation and claim tests run on
a stand-in fitted here: a plain, seeded AdamW loop (torch only; no trainer library: a few hundred
full-batch steps on a handful of examples) that teaches it, for a few short SummEval summaries
(``summeval/summeval_test_100.json``'s machine summaries: the shortest with two sentences or
more), to answer ``chat_prompt(claims_messages(summary))`` with the summary's sentences
(the package's default splitter) as ``"- "`` lines followed by the end-of-sequence token. The
loss sits on the answer tokens only. This is memorisation, not a skill: greedy generation on the
fitted summaries writes their lists; on other text it writes whatever it writes.

The weights file is rewritten with the same tensor names (the manifest too); ``config.json`` gets
``"unieval_local_fit": "claims"``. Seeded, deterministic on one machine; well under two CPU
minutes on two cores at the test widths.
"""

from __future__ import annotations

import json
from pathlib import Path

#: default number of fitted summaries, optimiser steps and learning rate
N_SUMMARIES, STEPS, LR = 4, 300, 3e-3


def fit_summaries(data_dir: Path, n: int = N_SUMMARIES) -> list[str]:
    """The ``n`` shortest distinct SummEval machine summaries of two sentences or more (ties by
    text), from ``data_dir/summeval/summeval_test_100.json``.

    Raises:
        SystemExit: the file is not there.
    """
    from unieval_local.text.sentences import DEFAULT_SPLITTER

    path = Path(data_dir) / "summeval" / "summeval_test_100.json"
    if not path.is_file():
        raise SystemExit(f"error: --fit claims needs {path} (set UNIEVAL_SHARED_DATA or --data-dir)")
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    seen = sorted({s.strip() for r in rows for s in r["row"]["machine_summaries"] if s.strip()},
                  key=lambda s: (len(s), s))
    return [s for s in seen if len(DEFAULT_SPLITTER(s)) >= 2][:n]


def claim_target(summary: str) -> str:
    """The answer the stand-in learns for ``summary``: its sentences as ``"- "`` lines."""
    from unieval_local.text.sentences import DEFAULT_SPLITTER

    return "\n".join("- " + s.strip() for s in DEFAULT_SPLITTER(summary))


def fit_claims(folder: str | Path, *, data_dir: str | Path, n_summaries: int = N_SUMMARIES, steps: int = STEPS,
               lr: float = LR, seed: int = 0) -> list[str]:
    """Fit the stand-in in ``folder`` (built by ``build_causal_lm_checkpoint``) in place.

    Returns:
        The fitted summaries.
    """
    from unieval_local.text.claims import claims_messages

    summaries = fit_summaries(Path(data_dir), n_summaries)

    def rows(runner, tok):
        eos = tok.eos_token_id
        return [(tok(runner.chat_prompt(claims_messages(s)), add_special_tokens=False)["input_ids"],
                 tok(claim_target(s), add_special_tokens=False)["input_ids"] + [eos]) for s in summaries]

    fit_rows(folder, rows, evaluator="g-eval", tag="claims", steps=steps, lr=lr, seed=seed)
    return summaries


def fit_rows(folder: str | Path, build, *, evaluator: str, tag: str, steps: int, lr: float, seed: int = 0) -> None:
    """The fitting loop shared by ``--fit claims`` and ``--fit judge`` (``scripts/fit_judge.py``):
    load the stand-in in ``folder`` as ``evaluator`` (float32, CPU), build its training rows with
    ``build(runner, tokenizer) -> [(prompt_ids, answer_ids)]``, then ``steps`` full-batch AdamW
    steps (``lr``, no weight decay, ``torch.manual_seed(seed)``) on the cross-entropy of the answer
    tokens only (right padding), and rewrite ``model.safetensors`` under the same tensor names and
    ``config.json`` with ``"unieval_local_fit": tag``.
    """
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.causal_lm.runner import CausalLMRunner
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator

    folder = Path(folder)
    spec = get_evaluator(evaluator)
    model = CausalLMModel(ResolvedCheckpoint(evaluator, folder, "explicit"), spec, "cpu", "float32")
    runner = CausalLMRunner(model, evaluator=spec, fingerprint="fit")
    rows = build(runner, model.tokenizer)
    width = max(len(p) + len(a) for p, a in rows)
    input_ids = torch.full((len(rows), width), model.pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, (p, a) in enumerate(rows):  # right padding: positions 0.. are the real tokens
        input_ids[k, :len(p) + len(a)] = torch.tensor(p + a)
        labels[k, len(p):len(p) + len(a)] = torch.tensor(a)
        mask[k, :len(p) + len(a)] = 1
    torch.manual_seed(seed)
    lm = model.model.train()
    optimiser = torch.optim.AdamW(lm.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = lm(input_ids=input_ids, attention_mask=mask, labels=labels, use_cache=False).loss
        loss.backward()
        optimiser.step()
    lm.eval()
    weights = folder / "model.safetensors"
    with safe_open(str(weights), framework="pt") as f:
        names = list(f.keys())
    state = lm.state_dict()
    save_file({n: state[n].detach().contiguous().clone() for n in names}, str(weights), metadata={"format": "pt"})
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["unieval_local_fit"] = tag
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
