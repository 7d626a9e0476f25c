#!/usr/bin/env python
"""Benchmark of greedy generation in the causal-lm backend (not in CI): generated tokens/s and peak
memory of ``CausalLMRunner.generate`` at a few batch sizes, on generated stand-ins: the llama and
qwen2 test stand-ins (``make_test_checkpoint.py``'s widths: hidden 32, 2 layers) and a qwen2 of
wider make (hidden 512, 8 layers, 8 heads, 2 key/value heads, intermediate 1408: 26M parameters
with the 1,000-token tokenizer), ``init_range`` 0.02.

Prompts: ``chat_prompt(claims_messages(summary))`` for the first SummEval machine summaries
(``summeval_test_100.json``), run in chunks of the batch size (the runner's token budget set high
so that a chunk is one batch), ``max_new_tokens`` new tokens each (random weights rarely end
early; the rate counts the tokens actually generated). One warm-up chunk, then the timed pass.

Peak memory: on CPU the process's peak resident set (``ru_maxrss``), each row measured in a fresh
subprocess (rows do not inherit each other's peak); on CUDA ``torch.cuda.max_memory_allocated``.
CUDA rows only where a GPU is present (``--device auto``, the default, adds them).

Usage:
    python scripts/bench_generate.py [--prompts 16] [--new-tokens 64] [--batch-sizes 1,4,16]
        [--models llama,qwen2,qwen2-wide] [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

WIDE = dict(hidden_size=512, num_layers=8, num_heads=8, kv_heads=2, intermediate_size=1408, init_range=0.02)
MODELS = {"llama": ("llama", {}), "qwen2": ("qwen2", {}), "qwen2-wide": ("qwen2", WIDE)}


def build(name: str, folder: Path) -> Path:
    from make_test_checkpoint import build_causal_lm_checkpoint, shared_data_dir

    if (folder / "config.json").is_file():
        return folder
    layout, widths = MODELS[name]
    return build_causal_lm_checkpoint(folder, layout=layout, data_dir=shared_data_dir(), evaluator="g-eval", **widths)


def machine_line() -> str:
    """The CPU model, torch's threads and versions, and the GPU when there is one."""
    import torch
    import transformers

    from unieval_local.models.cpu_precision import cpu_bfloat16_units, cpu_model

    model = cpu_model()
    gpu = f"; GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "; no GPU"
    return (f"machine: {model} ({os.cpu_count()} cores, torch threads {torch.get_num_threads()}); "
            f"{cpu_bfloat16_units().line()}{gpu}; torch {torch.__version__}, transformers {transformers.__version__}")


def one_row(name: str, folder: str, device: str, batch: int, n: int, new_tokens: int) -> dict:
    """Generate for ``n`` prompts in chunks of ``batch`` (after one warm-up chunk): tokens/s, peak memory."""
    import torch

    from fit_claims import fit_summaries
    from make_test_checkpoint import shared_data_dir
    from unieval_local.models.causal_lm.model import CausalLMModel
    from unieval_local.models.causal_lm.runner import CausalLMRunner
    from unieval_local.models.checkpoints import ResolvedCheckpoint
    from unieval_local.registry.evaluators import get_evaluator
    from unieval_local.text.claims import claims_messages

    ev = get_evaluator("g-eval")
    model = CausalLMModel(ResolvedCheckpoint("g-eval", Path(folder), "explicit"), ev, device, "float32")
    runner = CausalLMRunner(model, evaluator=ev, fingerprint="bench", batch_tokens=10**9)
    prompts = [runner.chat_prompt(claims_messages(s)) for s in fit_summaries(shared_data_dir(), n)]
    runner.generate(prompts[:batch], max_new_tokens=new_tokens, progress=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    made = 0
    for k in range(0, len(prompts), batch):
        made += sum(len(g.token_ids) for g in runner.generate(prompts[k:k + batch], max_new_tokens=new_tokens,
                                                              progress=False))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() if device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"model": name, "device": device, "batch": batch, "prompts": len(prompts), "tokens": made,
            "seconds": wall, "tokens_per_s": made / wall, "peak_mib": peak / 2**20,
            "parameters": model.parameters}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch-sizes", default="1,4,16")
    parser.add_argument("--models", default="llama,qwen2,qwen2-wide")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "bench_generate"))
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)  # one row, in a subprocess
    args = parser.parse_args(argv)
    work = Path(args.work)
    if args.row:
        name, device, batch = args.row.split(":")
        print(json.dumps(one_row(name, str(work / name), device, int(batch), args.prompts, args.new_tokens)))
        return 0
    import torch

    devices = ["cpu", "cuda"] if args.device == "auto" and torch.cuda.is_available() else \
        ["cpu" if args.device == "auto" else args.device]
    rows = []
    for name in args.models.split(","):
        build(name, work / name)
        for device in devices:
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                out = subprocess.run([sys.executable, __file__, "--row", f"{name}:{device}:{batch}", "--prompts",
                                      str(args.prompts), "--new-tokens", str(args.new_tokens), "--work", str(work)],
                                     capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                if out.returncode:
                    print(out.stderr[-2000:], file=sys.stderr)
                    return out.returncode
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(machine_line())
    print(f"{args.prompts} claim prompts, up to {args.new_tokens} new tokens each, float32, greedy")
    print("| model (parameters) | device | batch | tokens | tokens/s | peak MiB |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} ({r['parameters'] / 1e6:.2f}M) | {r['device']} | {r['batch']} | {r['tokens']} | "
              f"{r['tokens_per_s']:.0f} | {r['peak_mib']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
