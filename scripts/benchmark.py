#!/usr/bin/env python
"""Throughput benchmark: UniEval's own scoring loop (a) against our engine (b), side by side.

Same generated checkpoint, same real data (SummEval: the first 3 documents by id
x all 16 systems, four aspects, first reference; ``--docs 100`` for the full set).

(a) is a faithful re-implementation of UniEval's ``scorer.py`` / ``evaluator.py``:
    one pass per aspect, prompts in input order, fixed batches of 8, padding to
    the batch's longest, float32, ``labels=[No]``, full-vocabulary softmax,
    p[yes]/(p[yes]+p[no]); every duplicate prompt is scored again.
(b) is ``unieval_local.Scorer``: one flat plan over all aspects, each distinct
    prompt once, length-sorted token-budget batches, the single-step
    cross-attention shortcut, only the Yes/No logits.

Each variant runs in its own subprocess (peak memory is per process), the two
alternate, ``--repeats`` times (default 3), and the table shows medians:
examples/s, queries/s (queries the variant ran), padded-token efficiency
(real / padded tokens), peak memory, the ratio (b)/(a) and the max |score
difference|. On a GPU it also prints achieved TFLOP/s against the bf16 peak.

Usage:
    python scripts/make_test_checkpoint.py out/bench-ckpt --vocab-size 4000 --docs 100 \\
        --d-model 1024 --d-ff 4096 --layers 4 --heads 16 --model-vocab-size 32128 --init-factor 1.0
    python scripts/benchmark.py --model out/bench-ckpt [--docs 3] [--repeats 3] [--device cpu]
        [--dtype-b float32|bfloat16] [--batch-tokens 8192]
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
def run_variant(args) -> dict:
    import torch

    records = [json.loads(line) for line in open(args.data, encoding="utf-8")]
    cuda = args.device.startswith("cuda")
    if args.variant == "unieval":
        engine = UniEvalLoop(args.model, args.device)
        t0 = time.perf_counter()
        scores = engine.evaluate(records, ASPECTS)
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        stats = {"queries": engine.queries, "real_tokens": engine.real_tokens,
                 "padded_tokens": engine.padded_tokens}
        dtype = "float32"
    else:
        from unieval_local.engine import Engine, jobs_by_checkpoint
        from unieval_local.registry.tasks import get_aspect
        from unieval_local.pipeline.validate import validate_examples

        engine = Engine(model=args.model, device=args.device, dtype=args.dtype_b, batch_tokens=args.batch_tokens)
        engine.runner("unieval-sum")  # load outside the timed region, as (a) does
        t0 = time.perf_counter()
        aspects = [get_aspect("summarization", a) for a in ASPECTS]
        examples, problems = validate_examples(records, aspects)
        assert not problems, problems
        results, _ = engine.run(jobs_by_checkpoint(aspects, examples), strict=True)
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        scores = {a: v.tolist() for r in results.values() for a, v in r.values.items()}
        st = engine.runner("unieval-sum").last_stats
        stats = {"queries": st["distinct"], "real_tokens": st["real_tokens"], "padded_tokens": st["padded_tokens"],
                 "planned_queries": st["queries"]}
        dtype = args.dtype_b
    peak = (torch.cuda.max_memory_allocated() if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"variant": args.variant, "dtype": dtype, "seconds": elapsed, "examples": len(records),
            "peak_bytes": peak, "scores": scores, **stats}


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
    parser.add_argument("--docs", type=int, default=3, help="SummEval documents (x 16 systems); 100 = all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype-b", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--json-out", default=None, help="also write all runs as JSON here")
    parser.add_argument("--planning", action="store_true",
                        help="instead: time chunk-mode planning of long unpunctuated sources (15k, 60k, 240k words) "
                        "with the linear planner beside the one it replaced")
    parser.add_argument("--variant", choices=["unieval", "engine"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.variant:  # child process
        Path(args.result).write_text(json.dumps(run_variant(args)))
        return 0
    if args.planning:
        planning_benchmark(args.model, [15_000, 60_000, 240_000], old_up_to=60_000)
        return 0

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    records = convert(raw, docs=args.docs)
    runs: dict[str, list[dict]] = {"unieval": [], "engine": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
        for rep in range(args.repeats):
            for variant in ("unieval", "engine") if rep % 2 == 0 else ("engine", "unieval"):
                result = Path(tmp) / f"{variant}-{rep}.json"
                cmd = [sys.executable, __file__, "--model", args.model, "--device", args.device,
                       "--dtype-b", args.dtype_b, "--batch-tokens", str(args.batch_tokens),
                       "--variant", variant, "--data", str(data), "--result", str(result)]
                subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                run = json.loads(result.read_text())
                runs[variant].append(run)
                print(f"run {rep + 1}/{args.repeats} {variant:<8} {run['seconds']:8.2f} s", file=sys.stderr)

    def med(variant, key):
        return statistics.median(r[key] for r in runs[variant])

    n_ex = len(records)
    diffs = []
    for a in ASPECTS:
        for ra, rb in zip(runs["unieval"], runs["engine"]):
            diffs += [abs(x - y) for x, y in zip(ra["scores"][a], rb["scores"][a])]
    rows = []
    for v, label in (("unieval", "(a) UniEval loop, float32"), ("engine", f"(b) unieval-local, {args.dtype_b}")):
        secs = med(v, "seconds")
        rows.append((label, secs, n_ex / secs, med(v, "queries") / secs, med(v, "queries"),
                     med(v, "real_tokens") / med(v, "padded_tokens"), med(v, "peak_bytes") / 2**20))
    print(f"\nSummEval {args.docs} docs x 16 systems = {n_ex} examples, 4 aspects, device {args.device}, "
          f"{args.repeats} alternating runs, medians; model {args.model}")
    print(f"{'variant':<30}{'seconds':>9}{'ex/s':>8}{'queries/s':>11}{'queries':>9}{'pad eff':>9}{'peak MiB':>10}")
    for label, secs, exs, qs, nq, eff, mib in rows:
        print(f"{label:<30}{secs:>9.2f}{exs:>8.2f}{qs:>11.2f}{nq:>9.0f}{eff:>9.3f}{mib:>10.0f}")
    ratio = rows[0][1] / rows[1][1]
    print(f"throughput ratio (b)/(a): {ratio:.2f}x; max |score difference| (b) vs (a): {max(diffs):.2e}")
    if args.device.startswith("cuda"):
        mean_len = med("engine", "real_tokens") / med("engine", "queries")
        for v, label in (("unieval", "(a)"), ("engine", "(b)")):
            mean_len_v = med(v, "real_tokens") / med(v, "queries")
            tflops = encoder_flops(args.model, med(v, "real_tokens"), mean_len_v) / med(v, "seconds") / 1e12
            print(f"{label} encoder TFLOP/s (useful): {tflops:.1f} = {100 * tflops / H200_BF16_PEAK_TFLOPS:.1f}% "
                  f"of the bf16 dense peak ({H200_BF16_PEAK_TFLOPS:.0f})")
        del mean_len
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
