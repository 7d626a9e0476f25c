#!/usr/bin/env python
"""Check CLI scores against a plain float64 computation of UniEval's score.

For every record of INPUT and every aspect in SCORES (the CLI's output JSONL),
recompute the score the plain way: the prompt from the contract's template, each
query alone (batch size 1), float64 weights, full-vocabulary softmax,
p[yes] / (p[yes] + p[no]), mean over Punkt sentences for consistency/fluency and
over references for relevance. Prints max |difference| per aspect; exits 1 when
any exceeds --tol (default 1e-5).

Usage:
    python scripts/check_parity.py INPUT.jsonl SCORES.jsonl --model DIR [--max-length 1024]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

TEMPLATES = {
    "coherence": "question: Is this a coherent summary to the document? </s> summary: {output} </s> document: {source}",
    "consistency": "question: Is this claim consistent with the document? </s> claim: {output} </s> document: {source}",
    "fluency": "question: Is this a fluent paragraph? </s> paragraph: {output}",
    "relevance": "question: Is this summary relevant to the reference? </s> summary: {output} </s> reference: {reference}",
}
SENTENCE_LEVEL = {"consistency", "fluency"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("scores")
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--tol", type=float, default=1e-5)
    args = parser.parse_args(argv)

    import torch
    from tqdm import tqdm
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from unieval_local.text.sentences import DEFAULT_SPLITTER

    import transformers

    transformers.logging.set_verbosity_error()  # its tie-weights advice is for configs that mean tied heads
    tok = AutoTokenizer.from_pretrained(args.model)
    model = T5ForConditionalGeneration.from_pretrained(args.model).double().eval()
    yes, no = tok("Yes").input_ids[0], tok("No").input_ids[0]
    memo: dict[str, float] = {}

    def p_yes(prompt: str) -> float:
        if prompt not in memo:
            enc = tok([prompt], max_length=args.max_length, truncation=True, return_tensors="pt")
            with torch.no_grad():
                logits = model(**enc, labels=tok(["No"], return_tensors="pt").input_ids[:, :1]).logits[0, 0]
            p = torch.softmax(logits, dim=-1)
            memo[prompt] = float(p[yes] / (p[yes] + p[no]))
        return memo[prompt]

    records = [json.loads(line) for line in open(args.input, encoding="utf-8") if line.strip()]
    scores = [json.loads(line) for line in open(args.scores, encoding="utf-8") if line.strip()]
    if len(records) != len(scores):
        print(f"{len(records)} records but {len(scores)} score lines", file=sys.stderr)
        return 1
    aspects = list(next(s["scores"] for s in scores if "scores" in s))
    diffs = {a: [] for a in aspects}
    for rec, got in tqdm(list(zip(records, scores)), desc="reference", unit="rec"):
        if "scores" not in got:
            continue
        for a in aspects:
            units = DEFAULT_SPLITTER(rec["target"]) if a in SENTENCE_LEVEL else [rec["target"]]
            refs = rec["references"] if a == "relevance" else [None]
            per_ref = [np.mean([p_yes(TEMPLATES[a].format(output=u, source=rec.get("source"), reference=r))
                                for u in units]) for r in refs]
            diffs[a].append(abs(float(np.mean(per_ref)) - got["scores"][a]))
    worst = 0.0
    print(f"{'aspect':<13}{'n':>6}  {'max |diff|':>11}  {'mean |diff|':>11}")
    for a, d in diffs.items():
        print(f"{a:<13}{len(d):>6}  {max(d):>11.3e}  {np.mean(d):>11.3e}")
        worst = max(worst, max(d))
    print(f"distinct queries recomputed: {len(memo)}; worst {worst:.3e} (tol {args.tol:g})")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    raise SystemExit(main())
