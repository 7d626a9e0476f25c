#!/usr/bin/env python
"""Benchmark of the causal-lm backend (not in CI): examples/s and peak memory of G-Eval ratings on
a generated checkpoint of Qwen2-0.5B's widths (hidden 896, 24 layers, 14 heads, 2 key/value heads,
intermediate 4864; the locally trained 1,000-token tokenizer, so the embedding is small and the
parameter count is the 24 layers': 358M), float32 against bfloat16, beside MiniCheck-Flan-T5-Large's
widths (the T5 backend's generated checkpoint at d_model 1024, 24 layers, 16 heads, d_ff 2816) on
the same SummEval examples, in one run.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the process's peak resident set
(``ru_maxrss``), measured in a fresh subprocess per row (so rows do not inherit each other's peak).
Both rows use the runner's default prefix reuse (here every example has its own source, so none
is shared); ``scripts/bench_prefix_reuse.py`` measures reuse against whole prompts.

Usage:
    python scripts/bench_causal_lm.py [--examples 8] [--device cpu|cuda] [--rows qwen2-f32,qwen2-bf16,t5]
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

QWEN2_05B = dict(hidden_size=896, num_layers=24, num_heads=14, kv_heads=2, intermediate_size=4864)
MINICHECK_T5 = dict(d_model=1024, d_ff=2816, num_layers=24, num_heads=16)


def summeval(n: int) -> list[dict]:
    from make_test_checkpoint import shared_data_dir

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    out = []
    for doc_id in sorted(raw)[:n]:
        out.append({"source": raw[doc_id]["src"][:2500], "target": raw[doc_id]["refs"][0]})
    return out


def build(kind: str, folder: Path) -> Path:
    from make_test_checkpoint import build_causal_lm_checkpoint, build_test_checkpoint, shared_data_dir

    if (folder / "config.json").is_file():
        return folder
    if kind == "qwen2":
        return build_causal_lm_checkpoint(folder, layout="qwen2", data_dir=shared_data_dir(), init_range=0.02,
                                          **QWEN2_05B)
    return build_test_checkpoint(folder, data_dir=shared_data_dir(), layout="v1.1", weights="safetensors",
                                 answers=("1", "0"), **MINICHECK_T5)


def one_row(kind: str, folder: str, dtype: str, device: str, n: int) -> dict:
    """Score ``n`` examples once to warm up and once timed; examples/s and peak memory."""
    import torch

    from unieval_local import Scorer

    data = summeval(n)
    if kind == "qwen2":
        scorer = Scorer(model={"g-eval": folder}, device=device, dtype=dtype, max_length=4096)
        task, aspect = "summarization", "geval_consistency"
    else:
        scorer = Scorer(model={"minicheck-flan-t5-large": folder}, device=device, dtype=dtype)
        task, aspect = "fact", "support"
    scorer.score(data[:1], task=task, aspect=aspect)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = scorer.score(data, task=task, aspect=aspect)
    wall = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() if device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"row": f"{kind} {dtype}", "examples": n, "examples_per_s": n / wall, "peak_mib": peak / 2**20,
            "overall": result.overall.value}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", default="qwen2-float32,qwen2-bfloat16,t5-float32")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "bench_causal_lm"))
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)  # one row, in a subprocess
    args = parser.parse_args(argv)
    work = Path(args.work)
    if args.row:
        kind, dtype = args.row.split("-")
        print(json.dumps(one_row(kind, str(work / kind), dtype, args.device, args.examples)))
        return 0
    rows = []
    for spec in args.rows.split(","):
        kind = spec.split("-")[0]
        build(kind, work / kind)
        out = subprocess.run([sys.executable, __file__, "--row", spec, "--examples", str(args.examples),
                              "--device", args.device, "--work", str(work)], capture_output=True, text=True,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            return out.returncode
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # each row as it is measured
    print(f"| row ({args.device}) | examples | examples/s | peak MiB |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['row']} | {r['examples']} | {r['examples_per_s']:.2f} | {r['peak_mib']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
