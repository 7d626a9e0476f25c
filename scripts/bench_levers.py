"""Other CPU levers on the T5 path, side by side against float32 eager (issue 43, item 3).

Scores a SummEval slice (``convert(raw, docs=N)``: N documents x 16 systems) on the four
summarization aspects (one ``Scorer.score`` per aspect, as users call it) under each variant,
all in one process, and prints per variant: seconds of the timed pass, examples/s (records x
aspects / s), the ratio to float32 eager, max |score - float32 score| over every example value,
and how many 0.5-threshold decisions flip against float32::

    python scripts/bench_levers.py --model /tmp/b43/ckpt [--docs 1] [--only int8,compile,bucket,budget,threads]
        [--rounds 2] [--json-out levers.json]

The checkpoint is a generated T5-large-width stand-in (``make_test_checkpoint.py DIR --vocab-size 4000
--docs 100 --d-model 1024 --d-ff 4096 --layers 4 --heads 16 --model-vocab-size 32128 --init-factor 1.0``).
Each variant gets its own :class:`~unieval_local.models.t5.runner.T5Model` (through ``runner_factory``,
so the process-wide model cache is not touched) and runs the package's own exact forward
(``T5Model._fast_two_logits``). Variants:

* ``float32`` / ``bfloat16``: eager, the baseline and the shipped fast dtype;
* ``int8 dyn``: torchao's ``quantize_(model, Int8DynamicActivationInt8WeightConfig())`` (``pip install
  torchao``; not a dependency of the package) on every linear layer the fast path calls as a module
  (not the cross-attention k/v, whose weights it reads as matrices, nor the LM head, whose two rows it reads), eager;
* ``compile ...``: ``torch.compile`` of the fast forward with ``torch._inductor.config.freezing = True``,
  ``dynamic=True`` (one graph for every length), or static shapes with widths padded up to a multiple of
  ``--bucket`` tokens (padding is masked: same values); the first pass (compilation included) and a
  second, steady pass are both timed: compile seconds = first - steady; graphs = dynamo's unique
  graphs; with ``--rounds R``, R steady passes alternate with an eager model of the same dtype, and
  their median ratio is printed (the fair comparison on a shared box);
* ``batch_tokens N`` (``--budgets``) and ``threads 1``: the engine's budget and thread settings.

Eager variants get a one-record warm-up (not timed). The machine line gives the CPU model, its
bfloat16/AMX cpuinfo flags, torch's thread count and the load average; the box is shared, so compare
ratios within one run, not seconds across runs.

Raises:
    SystemExit: no checkpoint folder, or no SummEval data (``$UNIEVAL_SHARED_DATA``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from convert_summeval import convert  # noqa: E402
from make_test_checkpoint import shared_data_dir  # noqa: E402

__all__ = ["main", "machine_line"]

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "amx_int8", "avx512_vnni")


def machine_line() -> str:
    """``cpu: MODEL | flags: ... | threads: N | load: a b c`` from /proc/cpuinfo, torch and os.getloadavg."""
    import torch

    from unieval_local.models.cpu_precision import cpu_model

    model, flags = cpu_model(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    have = " ".join(f for f in FLAGS if f in flags) or "none"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"cpu: {model} | flags: {have} | torch {torch.__version__}, capability "
            f"{torch.backends.cpu.get_cpu_capability()} | threads: {torch.get_num_threads()} | load: {load}")


def int8_filter(module, fqn: str) -> bool:
    """Which linear layers int8 quantization takes: every ``nn.Linear`` but the LM head and the
    decoder's cross-attention k/v (the fast path reads those weights as plain matrices)."""
    import torch

    return (isinstance(module, torch.nn.Linear) and not fqn.endswith("lm_head")
            and not (".EncDecAttention.k" in fqn or ".EncDecAttention.v" in fqn))


def make_model(folder: str, dtype: str, lever: str, bucket: int):
    """A fresh ``T5Model`` of ``folder`` with ``lever`` applied: ``eager``, ``int8``,
    ``compile-dynamic`` or ``compile-bucket``."""
    import torch

    from unieval_local.models.t5.runner import T5Model

    from unieval_local.engine import Engine

    ckpt = Engine(model=folder, device="cpu").checkpoint("unieval-sum")
    t5 = T5Model(ckpt, "cpu", dtype)
    if lever == "int8":
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        quantize_(t5.model, Int8DynamicActivationInt8WeightConfig(), filter_fn=int8_filter)
    elif lever.startswith("compile"):
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True
        torch._dynamo.config.cache_size_limit = 64
        plain = t5._fast_two_logits
        if lever == "compile-dynamic":
            t5._fast_two_logits = torch.compile(plain, dynamic=True)
        else:
            compiled = torch.compile(plain, dynamic=False)

            def bucketed(input_ids, mask, rows):
                width = input_ids.shape[1]
                extra = -width % bucket
                if extra:
                    input_ids = torch.nn.functional.pad(input_ids, (0, extra), value=t5.pad_id)
                    mask = torch.nn.functional.pad(mask, (0, extra), value=0)
                return compiled(input_ids, mask, rows)

            t5._fast_two_logits = bucketed
    return t5


def run_pass(folder: str, t5, records: list[dict], batch_tokens: int, threads: int | None) -> tuple[float, list]:
    """Seconds and example values (aspect-major) of one ``Scorer.score`` per aspect over ``records``."""
    from unieval_local import Scorer
    from unieval_local.models.t5.runner import T5Runner

    def factory(ckpt, fingerprint, evaluator):
        return T5Runner(t5, evaluator=evaluator, fingerprint=fingerprint, batch_tokens=batch_tokens)

    scorer = Scorer(model=folder, device="cpu", runner_factory=factory, threads=threads)
    values: list[float] = []
    t0 = time.perf_counter()
    for aspect in ASPECTS:
        result = scorer.score(records, task="summarization", aspect=aspect)
        values += [float(e.value) for e in result.examples]
    return time.perf_counter() - t0, values


def variants(only: set[str], budgets: list[int], bucket: int) -> list[dict]:
    """The variants to run: name, dtype, lever, batch_tokens, threads."""
    out = [dict(name="float32 eager", dtype="float32", lever="eager", tokens=2048, threads=2),
           dict(name="bfloat16 eager", dtype="bfloat16", lever="eager", tokens=2048, threads=2)]
    if "int8" in only:
        out.append(dict(name="int8 dyn (torchao), eager", dtype="float32", lever="int8", tokens=2048, threads=2))
    if "compile" in only:
        for dtype in ("float32", "bfloat16"):
            out.append(dict(name=f"compile {dtype} dynamic", dtype=dtype, lever="compile-dynamic", tokens=2048,
                            threads=2))
    if "bucket" in only:
        out.append(dict(name=f"compile bfloat16 bucket {bucket}", dtype="bfloat16", lever="compile-bucket",
                        tokens=2048, threads=2))
    if "budget" in only:
        for dtype in ("float32", "bfloat16"):
            for n in budgets:
                if n != 2048:
                    out.append(dict(name=f"{dtype} batch_tokens {n}", dtype=dtype, lever="eager", tokens=n,
                                    threads=2))
    if "threads" in only:
        out.append(dict(name="float32 threads 1", dtype="float32", lever="eager", tokens=2048, threads=1))
        out.append(dict(name="bfloat16 threads 1", dtype="bfloat16", lever="eager", tokens=2048, threads=1))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the variants and print the table (see the module docstring); 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="/tmp/b43/ckpt", help="T5 checkpoint folder (a generated stand-in)")
    parser.add_argument("--docs", type=int, default=1, help="SummEval documents (16 records each)")
    parser.add_argument("--only", default="int8,compile,bucket,budget,threads",
                        help="levers to run, comma-separated (float32 and bfloat16 eager always run)")
    parser.add_argument("--budgets", default="2048,4096,8192,16384", help="batch_tokens values")
    parser.add_argument("--bucket", type=int, default=64, help="width multiple of the static compile variant")
    parser.add_argument("--rounds", type=int, default=0,
                        help="compile variants: alternate this many steady passes with eager (same dtype)")
    parser.add_argument("--json-out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if not (Path(args.model) / "config.json").is_file():
        raise SystemExit(f"no checkpoint at {args.model}: build one with make_test_checkpoint.py (see the docstring)")
    import warnings

    import torch

    warnings.filterwarnings("ignore", category=UserWarning)  # the stand-in's "unverified identity" notes
    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    records = convert(raw, docs=args.docs)
    only = set(args.only.split(","))
    machine = machine_line()
    print(machine, flush=True)
    rows, base = [], None
    for v in variants(only, [int(x) for x in args.budgets.split(",")], args.bucket):
        torch.set_num_threads(v["threads"])
        t0 = time.perf_counter()
        t5 = make_model(args.model, v["dtype"], v["lever"], args.bucket)
        load = time.perf_counter() - t0
        graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        compile_s = vs_eager = None
        if v["lever"].startswith("compile"):
            first, _ = run_pass(args.model, t5, records, v["tokens"], v["threads"])
            seconds, values = run_pass(args.model, t5, records, v["tokens"], v["threads"])
            compile_s = first - seconds
            if args.rounds:  # alternate steady passes with an eager model of the same dtype: the fair ratio
                eager = make_model(args.model, v["dtype"], "eager", args.bucket)
                run_pass(args.model, eager, records[:1], v["tokens"], v["threads"])
                pairs = [(run_pass(args.model, eager, records, v["tokens"], v["threads"])[0],
                          run_pass(args.model, t5, records, v["tokens"], v["threads"])[0]) for _ in range(args.rounds)]
                vs_eager = statistics.median(e / c for e, c in pairs)
                del eager
        else:
            run_pass(args.model, t5, records[:1], v["tokens"], v["threads"])  # warm-up
            seconds, values = run_pass(args.model, t5, records, v["tokens"], v["threads"])
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0
        if base is None:
            base = (seconds, values)
        diff = max(abs(a - b) for a, b in zip(values, base[1]))
        flips = sum((a > 0.5) != (b > 0.5) for a, b in zip(values, base[1]))
        row = dict(variant=v["name"], seconds=seconds, examples_per_s=len(values) / seconds,
                   ratio=base[0] / seconds, max_abs_diff=diff, flips=flips, n=len(values), load_s=load,
                   compile_s=compile_s, vs_eager_same_dtype=vs_eager,
                   graphs=graphs if v["lever"].startswith("compile") else None,
                   load_avg=os.getloadavg()[0])
        rows.append(row)
        print(f"  {row['variant']:<34} {seconds:7.1f} s  {row['examples_per_s']:5.2f} ex/s  "
              f"{row['ratio']:5.2f}x  max|d| {diff:.1e}  flips {flips}/{len(values)}"
              + (f"  compile {compile_s:.0f} s, {graphs} graphs" if compile_s is not None else "")
              + (f", {vs_eager:.2f}x its eager dtype (alternating)" if vs_eager is not None else ""), flush=True)
        del t5
    torch.set_num_threads(2)
    print()
    print(machine)
    print(f"SummEval {args.docs} document(s) x 16 systems x {len(ASPECTS)} aspects = {len(base[1])} example values")
    print(f"{'variant':<34} {'seconds':>8} {'ex/s':>6} {'vs fp32':>8} {'max|diff|':>10} {'flips':>6} "
          f"{'compile s':>9} {'graphs':>6} {'vs eager':>8} {'load':>5}")
    for r in rows:
        print(f"{r['variant']:<34} {r['seconds']:8.1f} {r['examples_per_s']:6.2f} {r['ratio']:7.2f}x "
              f"{r['max_abs_diff']:10.1e} {r['flips']:6d} "
              f"{'' if r['compile_s'] is None else format(r['compile_s'], '.0f'):>9} "
              f"{'' if r['graphs'] is None else r['graphs']:>6} "
              f"{'' if r['vs_eager_same_dtype'] is None else format(r['vs_eager_same_dtype'], '.2f') + 'x':>8} "
              f"{r['load_avg']:5.1f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"machine": machine, "docs": args.docs, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
