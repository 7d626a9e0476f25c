#!/usr/bin/env python
"""Throughput benchmark: UniEval's own code against this package's Scorer, float32 and bfloat16, side by side.

Same generated checkpoint, same real data (SummEval: the first 3 documents by id x all 16
systems, the four summarization aspects, first reference; ``--docs 100`` for the full set).

(u) UniEval's own code: with ``--unieval-repo DIR`` (a clone of github.com/maszhongming/UniEval;
    its ``utils.py`` needs ``pip install prettytable``), its ``SumEvaluator.evaluate(data,
    dims=[aspect])`` per aspect at its batch size 8, its ``UniEvaluator`` pointed at the checkpoint
    (``device="cpu"`` or ``--device``), and ``nltk.sent_tokenize`` replaced by the package's Punkt
    splitter with the same parameters (NLTK's punkt data is never downloaded here). Without
    ``--unieval-repo``: :class:`UniEvalLoop`, a re-implementation of the same loop (labelled so).
(e) ``unieval_local.Scorer``: one ``Scorer.score`` call per aspect, per dtype of ``--dtypes``
    (float32: UniEval's numbers; bfloat16: faster where the CPU has bfloat16 matrix units).

Each run is its own subprocess (peak memory is per process), model load excluded; the variants
alternate (rotated every repeat), ``--repeats`` times (default 3), and the table shows medians:
examples/s, the ratio to UniEval's code and to the package's float32, max |score difference|
against float32 and against UniEval's code, decisions at 0.5 that flip against float32, padded-
token efficiency and peak memory. The first line names the CPU and its bfloat16 matrix units. On
a GPU it also prints the encoder's useful TFLOP/s against the card's dense bf16 peak.

Usage:
    python scripts/make_test_checkpoint.py out/bench-ckpt --vocab-size 4000 --docs 100 \\
        --d-model 1024 --d-ff 4096 --layers 4 --heads 16 --model-vocab-size 32128 --init-factor 1.0
    git clone https://github.com/maszhongming/UniEval out/UniEval && pip install prettytable
    python scripts/benchmark.py --model out/bench-ckpt --unieval-repo out/UniEval [--docs 3] [--repeats 3]
        [--device cpu] [--dtypes float32,bfloat16] [--batch-tokens N] [--json-out runs.json]
    python scripts/benchmark.py --model out/bench-ckpt --planning   # chunk planning of long ASR-like sources
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_summeval import convert  # noqa: E402
from make_test_checkpoint import shared_data_dir  # noqa: E402

ASPECTS = ["coherence", "consistency", "fluency", "relevance"]
H200_BF16_PEAK_TFLOPS = 989.0  # dense bf16, H100/H200 SXM datasheet


# ----------------------------------------------------------------------------- (a) UniEval's loop
def unieval_add_question(aspect: str, output: list[str], src: list[str] | None = None,
                         ref: list[str] | None = None) -> list[str]:
    """UniEval ``utils.add_question`` for the summarization task (the four aspects)."""
    out = []
    for i in range(len(output)):
        if aspect == "fluency":
            out.append("question: Is this a fluent paragraph? </s> paragraph: " + output[i])
        elif aspect == "coherence":
            out.append("question: Is this a coherent summary to the document? </s> summary: " + output[i]
                       + " </s> document: " + src[i])
        elif aspect == "consistency":
            out.append("question: Is this claim consistent with the document? </s> claim: " + output[i]
                       + " </s> document: " + src[i])
        elif aspect == "relevance":
            out.append("question: Is this summary relevant to the reference? </s> summary: " + output[i]
                       + " </s> reference: " + ref[i])
    return out


class UniEvalLoop:
    """UniEval's ``UniEvaluator.score``: batches of 8 in input order, full softmax."""

    def __init__(self, model_dir: str, device: str, max_length: int = 1024, batch_size: int = 8):
        import torch
        import transformers
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        transformers.utils.logging.disable_progress_bar()
        self.torch = torch
        self.device, self.max_length, self.batch_size = device, max_length, batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).float().to(device).eval()
        self.softmax = torch.nn.Softmax(dim=1)
        self.pos_id = self.tokenizer("Yes").input_ids[0]
        self.neg_id = self.tokenizer("No").input_ids[0]
        self.queries = self.real_tokens = self.padded_tokens = 0

    def score(self, inputs: list[str]) -> list[float]:
        torch = self.torch
        tgts = ["No" for _ in range(len(inputs))]
        scores: list[float] = []
        for i in range(0, len(inputs), self.batch_size):
            src_list, tgt_list = inputs[i: i + self.batch_size], tgts[i: i + self.batch_size]
            with torch.no_grad():
                enc_src = self.tokenizer(src_list, max_length=self.max_length, truncation=True, padding=True,
                                         return_tensors="pt")
                enc_tgt = self.tokenizer(tgt_list, max_length=self.max_length, truncation=True, padding=True,
                                         return_tensors="pt")
                src_tokens = enc_src["input_ids"].to(self.device)
                src_mask = enc_src["attention_mask"].to(self.device)
                tgt_tokens = enc_tgt["input_ids"].to(self.device)[:, 0].unsqueeze(-1)
                output = self.model(input_ids=src_tokens, attention_mask=src_mask, labels=tgt_tokens)
                logits = output.logits.view(-1, self.model.config.vocab_size)
                pos = self.softmax(logits)[:, self.pos_id]
                neg = self.softmax(logits)[:, self.neg_id]
                scores += (pos / (pos + neg)).tolist()
            self.queries += len(src_list)
            self.real_tokens += int(src_mask.sum())
            self.padded_tokens += int(src_mask.numel())
        return scores

    def evaluate(self, records: list[dict], aspects: list[str]) -> dict[str, list[float]]:
        """UniEval ``SumEvaluator.evaluate`` minus the overall: per aspect, per record."""
        from unieval_local.text.sentences import DEFAULT_SPLITTER as sent_tokenize

        out: dict[str, list[float]] = {}
        for dim in aspects:
            if dim in ("consistency", "fluency"):
                src_list, output_list, n_sents = [], [], []
                for r in records:
                    sents = sent_tokenize(r["target"])
                    n_sents.append(len(sents))
                    for s in sents:
                        src_list.append(r["source"] if dim == "consistency" else "")
                        output_list.append(s)
                sent_score = self.score(unieval_add_question(dim, output_list, src_list))
                start, score = 0, []
                for n in n_sents:
                    score.append(sum(sent_score[start: start + n]) / n)
                    start += n
            else:
                score = self.score(unieval_add_question(
                    dim, [r["target"] for r in records], [r["source"] for r in records],
                    [r["references"][0] for r in records]))
            out[dim] = score
        return out


# ----------------------------------------------------------------------------- one variant
def unieval_own_code(repo: str, model: str, device: str):
    """UniEval's own ``SumEvaluator`` from a clone at ``repo``, its scorer on ``model`` (the class
    hard-codes the hub id ``MingZhong/unieval-sum``, so the instance is built around our folder),
    with ``nltk.sent_tokenize`` replaced by the package's Punkt splitter (same parameters; no
    NLTK data download)."""
    sys.path.insert(0, str(Path(repo).resolve()))
    import metric.evaluator as unieval_evaluator
    import metric.scorer as unieval_scorer
    from unieval_local.text.sentences import DEFAULT_SPLITTER

    unieval_evaluator.sent_tokenize = DEFAULT_SPLITTER
    evaluator = unieval_evaluator.SumEvaluator.__new__(unieval_evaluator.SumEvaluator)
    evaluator.scorer = unieval_scorer.UniEvaluator(model_name_or_path=model, device=device)
    evaluator.task, evaluator.dimensions = "summarization", list(ASPECTS)
    return evaluator


def run_unieval(args, records: list[dict]) -> tuple[dict, dict]:
    """(u): UniEval's own code per aspect (``--unieval-repo``), else :class:`UniEvalLoop`."""
    import contextlib
    import io

    if not args.unieval_repo:
        loop = UniEvalLoop(args.model, args.device)
        scores = loop.evaluate(records, ASPECTS)
        return scores, {"queries": loop.queries, "real_tokens": loop.real_tokens,
                        "padded_tokens": loop.padded_tokens}
    sys.path.insert(0, str(Path(args.unieval_repo).resolve()))
    from utils import convert_to_json  # UniEval's utils.py

    evaluator = args._unieval
    data = convert_to_json(output_list=[r["target"] for r in records], src_list=[r["source"] for r in records],
                           ref_list=[r["references"][0] for r in records])
    scores = {}
    for aspect in ASPECTS:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            scores[aspect] = [row[aspect] for row in evaluator.evaluate(data, dims=[aspect], overall=False)]
    return scores, {}


def run_variant(args) -> dict:
    """One timed run of ``args.variant`` (``unieval`` or a dtype) in this process; load excluded."""
    import torch

    records = [json.loads(line) for line in open(args.data, encoding="utf-8")]
    cuda = args.device.startswith("cuda")
    if args.variant == "unieval":
        if args.unieval_repo:
            args._unieval = unieval_own_code(args.unieval_repo, args.model, args.device)
        t0 = time.perf_counter()
        scores, stats = run_unieval(args, records)
        dtype = "float32"
    else:
        from unieval_local import Scorer

        dtype = args.variant
        scorer = Scorer(model={"unieval-sum": args.model}, device=args.device, dtype=dtype,
                        batch_tokens=args.batch_tokens)
        scorer.score(records[:1], task="summarization", aspect="fluency")  # load outside the timed region
        totals = {"queries": 0, "real_tokens": 0, "padded_tokens": 0}
        t0 = time.perf_counter()
        scores = {}
        for aspect in ASPECTS:
            scores[aspect] = [e.value for e in scorer.score(records, task="summarization", aspect=aspect).examples]
            st = scorer.engine.runner("unieval-sum").last_stats
            for key, name in (("queries", "distinct"), ("real_tokens", "real_tokens"), ("padded_tokens", "padded_tokens")):
                totals[key] += st[name]
        stats = totals
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"variant": args.variant, "dtype": dtype, "seconds": elapsed, "examples": len(records),
            "peak_bytes": peak, "scores": scores, "threads": torch.get_num_threads(), **stats}


def cpu_line() -> str:
    """The CPU's model and its bfloat16 matrix units (``/proc/cpuinfo`` flags), for the table's head."""
    from unieval_local.models.cpu_precision import cpu_bfloat16_units, cpu_model

    return f"{cpu_model()}; {cpu_bfloat16_units().line()}"


def flips(a: list[float], b: list[float], threshold: float = 0.5) -> int:
    """How many of the paired scores fall on different sides of ``threshold`` (>= is "yes")."""
    return sum((x >= threshold) != (y >= threshold) for x, y in zip(a, b))


# ----------------------------------------------------------------------------- driver
def encoder_flops(model_dir: str, real_tokens: int, mean_len: float) -> float:
    """Approximate useful FLOPs of the encoder: 2 x matmul params x tokens + attention."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    d, dff, layers = cfg["d_model"], cfg["d_ff"], cfg["num_layers"]
    inner = cfg["num_heads"] * cfg["d_kv"]
    per_token = layers * (2 * (4 * d * inner + 2 * d * dff) + 4 * mean_len * inner)
    return per_token * real_tokens


# ----------------------------------------------------------------------------- window planning
def windows_before(text, spans, counter, budget, overlap):
    """``planning.make_windows`` as it was before the linear planner (issue 18): a piece longer
    than the budget is cut by tokenizing the REST of it again after every part (``cut`` and
    ``count_plain`` on the remainder: quadratic in the piece's length). Kept here only to time
    it beside the new one."""
    pieces = []
    for (a, b), n in zip(spans, counter.count_plain([text[a:b] for a, b in spans])):
        while n > budget and b - a > 1:
            k = max(1, counter.cut(text[a:b], budget))
            pieces.append((a, a + k))
            a += k
            n = counter.count_plain([text[a:b]])[0]
        pieces.append((a, b))
    counts = counter.count_plain([text[a:b] for a, b in pieces])
    windows, i = [], 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and (j == i or total + counts[j] <= budget):
            total += counts[j]
            j += 1
        windows.append((pieces[i][0], pieces[j - 1][1]))
        if j >= len(pieces):
            break
        i = max(j - overlap, i + 1)
    return windows


def planning_benchmark(model_dir: str, sizes: list[int], old_up_to: int) -> None:
    """Chunk-mode windowing of a source without sentence punctuation (an ASR transcript), side
    by side in one run: ``planning.make_windows`` (one tokenization of the text, cut by token
    offsets) against :func:`windows_before` (the quadratic one it replaced), on the same text
    and tokenizer, after one warm-up call, for sources of ``sizes`` words (the old one only up
    to ``old_up_to`` words). Then the whole ``build_plan`` of one consistency query over the
    text (Punkt splitting included). Prints one line per size."""
    from unieval_local.models.checkpoints import resolve_checkpoint
    from unieval_local.registry.evaluators import EVALUATORS
    from unieval_local.pipeline.planning import build_plan, make_windows
    from unieval_local.models.t5.runner import T5Runner, load_t5_model
    from unieval_local.schema import UniEvalData
    from unieval_local.text.sentences import DEFAULT_SPLITTER, field_spans
    from unieval_local.registry.tasks import get_aspect

    t5 = load_t5_model(resolve_checkpoint("unieval-sum", model_dir), "cpu", "float32")
    counter = T5Runner(t5, evaluator=EVALUATORS["unieval-sum"], fingerprint="bench")
    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    words = " ".join(v["src"] for v in raw.values()).replace(" .", "").replace(" ,", "").split()
    aspect = get_aspect("summarization", "consistency")
    budget = 1000
    warm = " ".join(words[:3000])
    make_windows(warm, [(0, len(warm))], counter, budget, 1)
    windows_before(warm, [(0, len(warm))], counter, budget, 1)
    print(f"\nchunk windowing of a source without sentence punctuation ({budget}-token windows), model {model_dir}")
    print(f"{'words':>8}{'windows':>9}{'linear s':>10}{'before s':>10}{'ratio':>8}{'build_plan s':>14}")
    for n in sizes:
        text = " ".join((words * (n // len(words) + 1))[:n])
        spans = field_spans(text, "sentence", DEFAULT_SPLITTER)
        t0 = time.perf_counter()
        new = make_windows(text, spans, counter, budget, 1)
        t_new = time.perf_counter() - t0
        t_old = None
        if n <= old_up_to:
            t0 = time.perf_counter()
            old = windows_before(text, spans, counter, budget, 1)
            t_old = time.perf_counter() - t0
            assert abs(len(old) - len(new)) <= max(2, len(new) // 50), (len(old), len(new))
        t0 = time.perf_counter()
        build_plan([UniEvalData(target="The vault was empty.", source=text)], [aspect], DEFAULT_SPLITTER,
                   long_input="chunk", counter=counter, max_length=1024)
        t_plan = time.perf_counter() - t0
        before = f"{t_old:10.2f}" if t_old is not None else f"{'skipped':>10}"
        ratio = f"{t_old / t_new:7.1f}x" if t_old is not None else f"{'':>8}"
        print(f"{n:>8}{len(new):>9}{t_new:>10.2f}{before}{ratio}{t_plan:>14.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="generated checkpoint folder")
    parser.add_argument("--unieval-repo", default=None,
                        help="a clone of github.com/maszhongming/UniEval: time its own code (else a re-implementation)")
    parser.add_argument("--docs", type=int, default=3, help="SummEval documents (x 16 systems); 100 = all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="the package's dtypes to time, comma-separated")
    parser.add_argument("--dtype-b", default=None, choices=["float32", "bfloat16"],
                        help="(older spelling) time float32 and this dtype")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="the Scorer's padded-token budget (default: its own, 2048 on a CPU)")
    parser.add_argument("--json-out", default=None, help="also write all runs as JSON here")
    parser.add_argument("--planning", action="store_true",
                        help="instead: time chunk-mode planning of long unpunctuated sources (15k, 60k, 240k words) "
                        "with the linear planner beside the one it replaced")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.variant:  # child process
        Path(args.result).write_text(json.dumps(run_variant(args)))
        return 0
    if args.planning:
        planning_benchmark(args.model, [15_000, 60_000, 240_000], old_up_to=60_000)
        return 0
    dtypes = ["float32", args.dtype_b] if args.dtype_b else [d.strip() for d in args.dtypes.split(",") if d.strip()]
    dtypes = list(dict.fromkeys(["float32", *dtypes]))  # float32 is the reference of every ratio
    variants = ["unieval", *dtypes]

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    records = convert(raw, docs=args.docs)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
        for rep in range(args.repeats):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]  # rotated every repeat
            for variant in order:
                result = Path(tmp) / f"{variant}-{rep}.json"
                cmd = [sys.executable, __file__, "--model", args.model, "--device", args.device,
                       "--variant", variant, "--data", str(data), "--result", str(result)] \
                    + (["--unieval-repo", args.unieval_repo] if args.unieval_repo else []) \
                    + (["--batch-tokens", str(args.batch_tokens)] if args.batch_tokens else [])
                subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                run = json.loads(result.read_text())
                runs[variant].append(run)
                print(f"run {rep + 1}/{args.repeats} {variant:<9} {run['seconds']:8.2f} s", file=sys.stderr)
    print_table(args, records, runs, variants)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(runs))
    return 0


def print_table(args, records: list[dict], runs: dict[str, list[dict]], variants: list[str]) -> None:
    """The medians of ``runs`` as one table (module docstring), then GPU TFLOP/s on a GPU."""
    def med(variant, key):
        return statistics.median(r[key] for r in runs[variant])

    def flat(run):
        return [x for a in ASPECTS for x in run["scores"][a]]

    n_ex = len(records)
    ref32, refu = flat(runs["float32"][0]), flat(runs["unieval"][0])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    own = "UniEval's own code" if args.unieval_repo else "UniEval loop (re-implemented)"
    print(f"\nSummEval {args.docs} docs x 16 systems = {n_ex} examples x 4 aspects (one call per aspect), device "
          f"{args.device}, {runs['float32'][0]['threads']} threads, load {load:.1f}; {args.repeats} rotated runs, "
          f"medians; model {args.model}")
    print(f"cpu: {cpu_line()}")
    head = (f"{'variant':<34}{'seconds':>9}{'ex/s':>8}{'vs UniEval':>11}{'vs fp32':>9}{'max|d| fp32':>12}"
            f"{'max|d| UniEval':>15}{'flips':>7}{'pad eff':>9}{'peak MiB':>10}")
    print(head)
    for v in variants:
        label = f"(u) {own}, float32" if v == "unieval" else f"(e) unieval-local Scorer, {v}"
        secs = med(v, "seconds")
        mine = flat(runs[v][0])
        d32 = max(abs(x - y) for x, y in zip(mine, ref32))
        du = max(abs(x - y) for x, y in zip(mine, refu))
        eff = (f"{med(v, 'real_tokens') / med(v, 'padded_tokens'):9.3f}" if "real_tokens" in runs[v][0]
               else f"{'':>9}")
        print(f"{label:<34}{secs:>9.2f}{n_ex / secs:>8.2f}{med('unieval', 'seconds') / secs:>10.2f}x"
              f"{med('float32', 'seconds') / secs:>8.2f}x{d32:>12.2e}{du:>15.2e}{flips(mine, ref32):>7}{eff}"
              f"{med(v, 'peak_bytes') / 2**20:>10.0f}")
    if args.device.startswith("cuda"):
        for v in variants[1:]:
            mean_len = med(v, "real_tokens") / med(v, "queries")
            tflops = encoder_flops(args.model, med(v, "real_tokens"), mean_len) / med(v, "seconds") / 1e12
            print(f"(e) {v} encoder TFLOP/s (useful): {tflops:.1f} = {100 * tflops / H200_BF16_PEAK_TFLOPS:.1f}% "
                  f"of the dense bf16 peak ({H200_BF16_PEAK_TFLOPS:.0f})")


if __name__ == "__main__":
    raise SystemExit(main())
