#!/usr/bin/env python
"""bfloat16 against float32, evaluator by evaluator (issue 43, item 2; not in CI: minutes of CPU).

For every built-in evaluator family (:data:`unieval_local.registry.evaluators.EVALUATORS`: the
UniEval T5 ones, MiniCheck (T5 v1.1), SEAHORSE (mT5), mDeBERTa NLI and FactCG (DeBERTa-v3
classifiers), HHEM (a T5 encoder with a head), G-Eval (llama and qwen2 layouts) and Granite
Guardian (granite layout)) this builds a random stand-in with ``scripts/make_test_checkpoint.py``'s
builders, scores a fixed real-data slice (SummEval, the first ``--docs`` documents x 16 systems,
``scripts/convert_summeval.py``'s records) with one of its aspects through the public
:class:`unieval_local.Scorer`, once in float32 and once in bfloat16, and prints per evaluator:

* ``max |d|`` / ``mean |d|``: max and mean of |bf16 - fp32| over the examples;
* ``rho``: Spearman's rank correlation between the two runs' scores (``scipy.stats.spearmanr``);
  random weights bunch scores together, so ties and near-ties make this PESSIMISTIC for trained
  weights;
* ``flips``: examples whose 0.5-threshold decision (score >= 0.5) differs between the two runs,
  count and share;
* ``speed-up``: float32 seconds / bfloat16 seconds of the same ``Scorer.score`` call, timed
  ``--repeats`` times alternating fp32, bf16 after one untimed warm-up call each (model load
  excluded); the median ratio is printed (> 1: bfloat16 faster);
* ``fp32 range``: min..max of the float32 scores (a narrow or saturated range makes every column
  above less telling);
* ``batch |d|``: max |bf16 at ``--small-budget`` batch tokens - bf16 at ``--large-budget``|, the
  batch dependence of bfloat16 scores (the same inputs, only the padded-batch budget changes).

The DeBERTa stand-ins' initialisation is scaled with the width (:func:`deberta_std`); the T5 ones
scale by construction (T5's init is ``factor * d_model ** -0.5``), the decoders use std 0.02.
Random weights are not trained ones: activations, and so bfloat16's rounding, can be larger or
smaller than a trained model's, and scores bunch together, so ``rho`` and ``flips`` are pessimistic.

G-Eval ratings (1..K) are mapped to [0, 1] by ``(E - 1) / (K - 1)`` (the runner's own
normalisation) before any column, so the deviations and the 0.5 threshold read on one scale.

Usage:
    python scripts/bench_precision.py [--docs 2] [--repeats 1] [--width 512] [--layers 2]
        [--only unieval-sum,hhem-2.1-open] [--work out/bench-precision] [--json-out out/precision.json]

``--width`` is d_model / hidden size of every stand-in (512 by default, where matrix units
matter for the speed column; 64 makes a quick run whose deviation columns still read, but whose
speed column does not). Checkpoints are built once into ``--work`` and reused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

THRESHOLD = 0.5


def deviation(fp32, bf16, threshold: float = THRESHOLD) -> dict:
    """How far ``bf16`` scores are from ``fp32`` ones (same examples, same order).

    Args:
        fp32, bf16: 1-D sequences of finite scores of equal length >= 2, on [0, 1].
        threshold: the decision threshold: a score >= it is "yes".

    Returns:
        ``max_abs`` and ``mean_abs`` of |bf16 - fp32|; ``spearman``: Spearman's rho between the
        two (scipy.stats.spearmanr, average ranks for ties; NaN when either run is constant);
        ``flips``: the count of examples with ``(fp32 >= threshold) != (bf16 >= threshold)``;
        ``flip_share``: flips / n; ``n``.

    Raises:
        ValueError: lengths differ, fewer than 2 examples, or a non-finite score.
    """
    from scipy.stats import spearmanr

    a, b = np.asarray(fp32, dtype=np.float64), np.asarray(bf16, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"need two 1-D score arrays of one length >= 2, got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite")
    diff = np.abs(b - a)
    flips = int(np.count_nonzero((a >= threshold) != (b >= threshold)))
    constant = np.ptp(a) == 0 or np.ptp(b) == 0
    rho = float("nan") if constant else float(spearmanr(a, b).statistic)
    return {"n": int(a.size), "max_abs": float(diff.max()), "mean_abs": float(diff.mean()), "spearman": rho,
            "flips": flips, "flip_share": flips / a.size}


def to_unit(values, scale: int | None):
    """Scores on [0, 1]: G-Eval's rating E on 1..K as ``(E - 1) / (K - 1)``; others as they are
    (``scale`` None). Raises ValueError for a scale below 2."""
    v = np.asarray(values, dtype=np.float64)
    if scale is None:
        return v
    if scale < 2:
        raise ValueError(f"a rating scale needs K >= 2, got {scale}")
    return (v - 1) / (scale - 1)


@dataclass(frozen=True)
class Row:
    """One evaluator's stand-in: its name, backend, the aspect scored, and how to build it."""

    evaluator: str
    backend: str
    task: str
    aspect: str
    build: Callable[[Path, int, int], Path]
    label: str = ""


def deberta_std(width: int) -> float:
    """The DeBERTa stand-ins' initialisation std at ``width``: the builders' 0.3 (chosen at width 64
    to spread the probabilities) times sqrt(64 / width), so that activations keep their size as the
    width grows (0.3 at width 512 saturates every probability at 0 or 1)."""
    return 0.3 * (64 / width) ** 0.5


def _rows() -> list[Row]:
    import make_test_checkpoint as m

    data = m.shared_data_dir()

    def t5(name, **kw):
        return lambda out, w, n: m.build_test_checkpoint(out, data_dir=data, d_model=w, d_ff=2 * w, num_layers=n,
                                                         num_heads=8, evaluator=name, **kw)

    def lm(layout, evaluator=None):
        return lambda out, w, n: m.build_causal_lm_checkpoint(
            out, layout=layout, data_dir=data, hidden_size=w, num_layers=n, num_heads=8, kv_heads=2,
            intermediate_size=2 * w, evaluator=evaluator, init_range=0.02)

    return [
        Row("unieval-sum", "t5", "summarization", "coherence", t5("unieval-sum")),
        Row("unieval-dialog", "t5", "dialogue", "groundedness", t5("unieval-dialog", seed=1)),
        Row("unieval-fact", "t5", "fact", "consistency", t5("unieval-fact", seed=2)),
        Row("minicheck-flan-t5-large", "t5", "fact", "support",
            t5("minicheck-flan-t5-large", layout="v1.1", answers=("1", "0"), seed=3)),
        Row("seahorse-large-q4", "t5 (mT5)", "summarization", "attribution",
            lambda out, w, n: m.build_mt5_checkpoint(out, d_model=w, d_ff=2 * w, num_layers=n, num_heads=8,
                                                     evaluator="seahorse-large-q4")),
        Row("mdeberta-nli", "seq-classifier", "fact", "nli_support",
            lambda out, w, n: m.build_nli_checkpoint(out, data_dir=data, hidden_size=w, num_layers=n, num_heads=8,
                                                     evaluator="mdeberta-nli", init_range=deberta_std(w))),
        Row("factcg-deberta-large", "seq-classifier", "fact", "factcg",
            lambda out, w, n: m.build_factcg_checkpoint(out, data_dir=data, hidden_size=w, num_layers=n,
                                                        num_heads=8, init_range=deberta_std(w))),
        Row("hhem-2.1-open", "hhem", "fact", "hhem",
            lambda out, w, n: m.build_hhem_checkpoint(out, data_dir=data, d_model=w, d_ff=2 * w, num_layers=n,
                                                      num_heads=8)),
        Row("g-eval", "causal-lm", "summarization", "geval_consistency", lm("llama"), "llama"),
        Row("g-eval", "causal-lm", "summarization", "geval_consistency", lm("qwen2"), "qwen2"),
        Row("granite-guardian-3.3-8b", "causal-lm", "fact", "groundedness",
            lm("granite", "granite-guardian-3.3-8b"), "granite"),
    ]


def records(docs: int) -> list[dict]:
    """SummEval's first ``docs`` documents x 16 systems (convert_summeval.convert), with the
    dialogue fields filled from the same text: ``context`` (the fact) = the source document."""
    from convert_summeval import convert
    from make_test_checkpoint import shared_data_dir

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text(encoding="utf-8"))
    out = []
    for r in convert(raw, docs=docs):
        out.append({"source": r["source"], "target": r["target"], "references": r["references"],
                    "context": r["source"]})
    return out


def measure(row: Row, folder: Path, data: list[dict], *, repeats: int, small: int, large: int) -> dict:
    """Score ``data`` with ``row``'s aspect in float32 and bfloat16 (the columns of the module docstring)."""
    from unieval_local import Scorer
    from unieval_local.registry.tasks import get_aspect

    scale = get_aspect(row.task, row.aspect).scale if row.evaluator == "g-eval" else None  # G-Eval's 1..K
    model = {row.evaluator: str(folder)}

    def scorer(dtype, budget=None):
        return Scorer(model=model, device="cpu", dtype=dtype, batch_tokens=budget, max_length=4096
                      if row.backend == "causal-lm" else None)

    def run(s):
        return to_unit([e.value for e in s.score(data, task=row.task, aspect=row.aspect).examples], scale)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f32, b16 = scorer("float32"), scorer("bfloat16")
        v32, v16 = run(f32), run(b16)  # also the warm-up
        ratios = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(f32)
            t1 = time.perf_counter()
            run(b16)
            t2 = time.perf_counter()
            ratios.append((t1 - t0) / (t2 - t1))
        small_v = run(scorer("bfloat16", small))
        large_v = run(scorer("bfloat16", large))
    out = deviation(v32, v16)
    out.update(fp32_min=float(v32.min()), fp32_max=float(v32.max()),
               evaluator=row.evaluator + (f" ({row.label})" if row.label else ""), backend=row.backend,
               aspect=f"{row.task}/{row.aspect}", speedup=statistics.median(ratios) if ratios else float("nan"),
               fp32_s=t1 - t0 if ratios else float("nan"), batch_max_abs=float(np.abs(small_v - large_v).max()))
    return out


def machine_line() -> str:
    """``CPU model; bf16 flags; threads; load`` from /proc/cpuinfo, torch and os.getloadavg."""
    import os

    import torch

    from unieval_local.models.cpu_precision import cpu_model

    model, flags = cpu_model(), []
    try:
        text = Path("/proc/cpuinfo").read_text()
        line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
        flags = [f for f in ("amx_bf16", "amx_tile", "avx512_bf16") if f in line.split()]
    except OSError:
        pass
    return (f"{model}; flags {' '.join(flags) or 'no bf16 matrix units'}; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; load {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2, help="SummEval documents (x 16 systems)")
    parser.add_argument("--repeats", type=int, default=1, help="timed fp32/bf16 pairs after the warm-up")
    parser.add_argument("--width", type=int, default=512, help="d_model / hidden size of the stand-ins")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--small-budget", type=int, default=1024, help="batch tokens of the batch-dependence run")
    parser.add_argument("--large-budget", type=int, default=16384)
    parser.add_argument("--only", default=None, help="comma-separated evaluator names")
    parser.add_argument("--work", default="out/bench-precision", help="where the stand-ins are built")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    if args.docs < 1 or args.width < 8 or args.width % 8 or args.layers < 1 or args.repeats < 0:
        parser.error("--docs and --layers must be >= 1, --width a multiple of 8, --repeats >= 0")
    rows = _rows()
    if args.only:
        wanted = set(args.only.split(","))
        rows = [r for r in rows if r.evaluator in wanted]
        if not rows:
            parser.error(f"--only names no evaluator; built in: {', '.join(sorted({r.evaluator for r in _rows()}))}")
    data = records(args.docs)
    print(machine_line())
    print(f"{len(data)} SummEval examples; stand-ins at width {args.width}, {args.layers} layers; "
          f"batch |d|: bf16 at {args.small_budget} vs {args.large_budget} batch tokens")
    head = f"{'evaluator':32} {'backend':15} {'max |d|':>8} {'mean |d|':>8} {'rho':>6} {'flips':>9} " \
           f"{'speed-up':>8} {'batch |d|':>9}  fp32 range"
    print(head)
    results = []
    for row in rows:
        tag = row.evaluator + (f"-{row.label}" if row.label else "")
        folder = Path(args.work) / f"w{args.width}-l{args.layers}" / tag / row.evaluator
        if not (folder / "config.json").is_file():
            row.build(folder, args.width, args.layers)
        r = measure(row, folder, data, repeats=args.repeats, small=args.small_budget, large=args.large_budget)
        results.append(r)
        print(f"{r['evaluator']:32} {r['backend']:15} {r['max_abs']:8.1e} {r['mean_abs']:8.1e} {r['spearman']:6.3f} "
              f"{r['flips']:3d} ({r['flip_share']:4.0%}) {r['speedup']:7.2f}x {r['batch_max_abs']:9.1e}  "
              f"{r['fp32_min']:.2g}..{r['fp32_max']:.2g}", flush=True)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps({"machine": machine_line(), "args": vars(args), "rows": results},
                                                  indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
