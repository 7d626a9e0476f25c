#!/usr/bin/env python
"""Measure prefix key/value reuse for the causal-lm backend before building it (issue 30: "prompts
that share a long prefix may reuse its key/value cache: measure it before keeping it").

The case where prompts share a long prefix: one SummEval document and its 16 systems' summaries,
one G-Eval aspect. The G-Eval prompt puts the criteria and the source before the summary, so the
16 prompts of a document share every token up to the summary (the instruction, the article);
G-Eval's four aspects share nothing beyond the template's first tokens (each aspect's criteria
come first), so only summaries of one source gain.

Two ways to read the same 16 x D ratings through
:class:`~unieval_local.models.causal_lm.runner.CausalLMRunner`, on a generated checkpoint
(Qwen2-0.5B's widths, fewer layers by default so that a CPU run ends in minutes; the ratio depends
on token counts, not on depth), in one process, interleaved (A, B, A, B ...; medians):

* whole prompts (``prefix_reuse=False``): each prompt whole, left-padded length-sorted batches.
* prefix reuse (the default): the prompts grouped by shared prefix
  (:meth:`~unieval_local.models.causal_lm.runner.CausalLMRunner.prefix_groups`), each prefix run
  once, the suffixes in batches over its key/value cache.

Printed: prompt and prefix tokens, forward tokens, seconds per run, examples/s, the ratio, and the
largest difference between the two ways' ratings (they must agree to 1e-5 in float32).

Usage:
    python scripts/bench_prefix_reuse.py [--docs 4] [--layers 6] [--device cpu] [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def prompts(n_docs: int) -> list[list[str]]:
    """Per document, its summaries' G-Eval consistency prompts (the registry's own rendering)."""
    from make_test_checkpoint import shared_data_dir

    from unieval_local.registry.tasks import get_aspect
    from unieval_local.schema import UniEvalData
    from unieval_local.text.chat import GEVAL

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    aspect = get_aspect("summarization", "geval_consistency")
    out = []
    for doc_id in sorted(raw)[:n_docs]:
        src = raw[doc_id]["src"]
        out.append([GEVAL.render(aspect, UniEvalData(source=src, target=h["hypo"]), h["hypo"])[0]
                    for _, h in sorted(raw[doc_id]["hypos"].items())])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=4)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the device's (CPU 2048, GPU 8192)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "bench_prefix_reuse"))
    args = parser.parse_args(argv)

    from make_test_checkpoint import build_causal_lm_checkpoint, shared_data_dir

    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.causal_lm.runner import CausalLMRunner, encode
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator
    from unieval_local.settings import BATCH_TOKENS

    folder = Path(args.work) / f"qwen2-{args.layers}"
    if not (folder / "config.json").is_file():
        build_causal_lm_checkpoint(folder, layout="qwen2", data_dir=shared_data_dir(), init_range=0.02,
                                   hidden_size=896, num_layers=args.layers, num_heads=14, kv_heads=2,
                                   intermediate_size=4864)
    spec = get_evaluator("g-eval")
    model = CausalLMModel(ResolvedCheckpoint("g-eval", folder, "explicit"), spec, args.device, args.dtype)
    batch_tokens = args.batch_tokens or BATCH_TOKENS["gpu" if args.device.startswith("cuda") else "cpu"]
    ways = {"full": CausalLMRunner(model, evaluator=spec, fingerprint="bench", batch_tokens=batch_tokens,
                                   prefix_reuse=False),
            "reuse": CausalLMRunner(model, evaluator=spec, fingerprint="bench", batch_tokens=batch_tokens)}
    flat = [p for g in prompts(args.docs) for p in g]
    n = len(flat)
    ids = [encode(model, p)[0] for p in flat]
    groups, alone = ways["reuse"].prefix_groups(ids)
    for runner in ways.values():  # warm up
        runner.evaluate(flat[:2], max_length=8192)
    times: dict[str, list[float]] = {"full": [], "reuse": []}
    got = {}
    for _ in range(args.rounds):
        for name, runner in ways.items():
            t = time.perf_counter()
            got[name] = runner.evaluate(flat, max_length=8192)[0]
            times[name].append(time.perf_counter() - t)
    tokens = sum(len(r) for r in ids)
    through = tokens - sum(k * (len(m) - 1) for k, m in groups)
    f, r = statistics.median(times["full"]), statistics.median(times["reuse"])
    diff = float(np.abs(got["full"] - got["reuse"]).max())
    print(f"{args.docs} documents x 16 summaries = {n} prompts, {tokens} tokens ({tokens / n:.0f} per prompt); "
          f"{len(groups)} groups, {len(alone)} alone, shared prefixes "
          f"{', '.join(str(k) for k, _ in groups)} tokens: {through} tokens through the model with reuse "
          f"({through / tokens:.2f} of them)")
    print(f"| way ({args.device}, {args.dtype}, {args.layers} layers, batch_tokens {batch_tokens}) "
          f"| s per run | examples/s |\n|---|---|---|")
    print(f"| whole prompts (prefix_reuse=False) | {f:.2f} | {n / f:.2f} |")
    print(f"| shared prefix once (prefix_reuse=True, the default) | {r:.2f} | {n / r:.2f} |")
    print(f"speed-up {f / r:.2f}x; largest difference {diff:.2e} on [0, 1] ({diff * 4:.2e} on the 1-5 scale)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
