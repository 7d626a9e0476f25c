"""Training speed on this machine: examples/s and peak memory of ``unieval-local train``'s loop per
base family and dtype, side by side in one run (these machines are shared and noisy: compare the
ratios; absolute times count only on a GPU).

Each (base, dtype) runs in a fresh process (its own peak resident memory, ``ru_maxrss``): a
stand-in checkpoint in the base's real layout (``make_test_checkpoint.py``; T5 v1.1 for the
MiniCheck format, DeBERTa-v3 for FactCG) at the widths given, trained for ``--steps`` steps of
``--batch-size`` synthetic claim/document records through :func:`unieval_local.models.train.trainer.fit`
(the real loss, collator and transformers' Trainer), after ``--warmup`` steps not timed.

    python scripts/bench_train.py                       # small widths, a minute or two on 2 cores
    python scripts/bench_train.py --lora --dtypes float32   # full vs LoRA (rank 8): trainable parameters, RSS
    python scripts/bench_train.py --d-model 1024 --layers 4 --d-ff 2816 --heads 16   # T5-large widths
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

BASES = {"t5 (minicheck)": ("minicheck-flan-t5-large", "fact/support"),
         "deberta (factcg)": ("factcg-deberta-large", "fact/factcg")}


def _one(args: argparse.Namespace) -> dict:
    """Run one (base, dtype) in this process and return its figures."""
    import resource

    import torch

    from make_test_checkpoint import build_factcg_checkpoint, build_test_checkpoint
    from unieval_local.models.checkpoints import resolve_checkpoint
    from unieval_local.models.train.readout import load_trainable
    from unieval_local.models.train.trainer import TrainItem, TrainSettings, fit
    from unieval_local.registry.evaluators import get_evaluator

    torch.set_num_threads(args.threads or torch.get_num_threads())
    name, _ = BASES[args.base]
    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    folder = work / name
    if name.startswith("minicheck"):
        build_test_checkpoint(folder, layout="v1.1", answers=("1", "0"), evaluator=name, d_model=args.d_model,
                              d_ff=args.d_ff, num_layers=args.layers, num_heads=args.heads, init_factor=1.0)
    else:
        build_factcg_checkpoint(folder, hidden_size=args.d_model, num_layers=args.layers, num_heads=args.heads)
    evaluator = get_evaluator(name)
    trainable = load_trainable(resolve_checkpoint(name, {name: str(folder)}), evaluator)
    n_params = sum(p.numel() for p in trainable.module.parameters())
    if args.lora:
        from unieval_local.models.train.lora import apply_lora

        apply_lora(trainable, rank=args.lora_rank)
    n_train = sum(p.numel() for p in trainable.module.parameters() if p.requires_grad)
    words = "The council met on Monday and approved the plan for the new road . " * (args.tokens // 14 + 1)
    prompt = words.split()[: args.tokens]
    ids = trainable.encode([" ".join(prompt)], 4096)[0]
    items = [TrainItem((tuple(ids),), (((0,),),), i % 2) for i in range(args.batch_size * (args.steps + args.warmup))]

    def run(steps: int) -> float:
        settings = TrainSettings(work_dir=str(work / f"ck{steps}"), max_steps=steps, batch_size=args.batch_size,
                                 learning_rate=1e-4, optimizer="adafactor" if name.startswith("minicheck") else "adamw",
                                 eval_steps=10**6, save_steps=10**6, progress=False, bf16=args.dtype == "bfloat16",
                                 shuffle=False)
        t = time.perf_counter()
        fit(trainable, items[: steps * args.batch_size], [], settings)
        return time.perf_counter() - t

    if args.warmup:
        run(args.warmup)
    seconds = run(args.steps)
    return {"trainable": n_train, "examples_per_s": args.steps * args.batch_size / seconds, "seconds": seconds,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "parameters": n_params,
            "tokens": len(ids)}


def _cpu_line() -> str:
    from unieval_local.models.cpu_precision import cpu_model

    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = cpu_model()
        have = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f" {f}" in text]
        flags = f"{model}; {' '.join(have)}"
    except OSError:
        flags = platform.processor()
    return f"{flags}; {os.cpu_count()} cores"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128, help="tokens per query")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--d-ff", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--bases", default=",".join(BASES))
    p.add_argument("--lora", action="store_true", help="add a LoRA row (adapters of --lora-rank) per base and dtype")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--base", help=argparse.SUPPRESS)
    p.add_argument("--dtype", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.base:  # a child: one configuration, its figures as JSON on the last line
        print(json.dumps(_one(args)))
        return
    print(f"cpu: {_cpu_line()}")
    print(f"widths: d_model {args.d_model}, d_ff {args.d_ff}, {args.layers} layers, {args.heads} heads; batch "
          f"{args.batch_size} x {args.tokens} tokens; {args.steps} timed steps after {args.warmup}")
    print(f"{'base':<18} {'dtype':<9} {'weights':<8} {'params':>8} {'trainable':>10} {'examples/s':>11} {'vs fp32':>8} "
          f"{'peak RSS GiB':>13}")
    child = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
             if k not in ("bases", "dtypes", "base", "dtype", "lora") and v is not None]
    for base in args.bases.split(","):
        fp32 = None
        for dtype, mode in [(d, m) for d in args.dtypes.split(",") for m in (["full", "lora"] if args.lora else ["full"])]:
            cmd = [sys.executable, __file__, *child, "--base", base, "--dtype", dtype] + (["--lora"] if mode == "lora"
                                                                                          else [])
            out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            if out.returncode != 0:
                print(f"{base:<18} {dtype:<9} {mode:<8} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            fp32 = r["examples_per_s"] if dtype == "float32" and mode == "full" else fp32
            ratio = f"{r['examples_per_s'] / fp32:.2f}x" if fp32 else "n/a"
            print(f"{base:<18} {dtype:<9} {mode:<8} {r['parameters'] / 1e6:>7.1f}M {r['trainable'] / 1e6:>9.2f}M "
                  f"{r['examples_per_s']:>11.2f} {ratio:>8} "
                  f"{r['peak_rss_gib']:>13.2f}")


if __name__ == "__main__":
    main()
