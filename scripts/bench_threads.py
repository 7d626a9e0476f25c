"""CPU seconds per record by thread count on a loaded machine (issue 29, item 4).

Scores the same records (coherence and fluency, ``Scorer.score``, in a fresh process per run: model
load and a one-record warm-up not counted) under each variant, alternating the variants
``--rounds`` times, while ``--busy`` processes spin on the CPUs (the load of a shared box), and
prints, per variant: the median wall seconds, CPU seconds (``time.process_time`` of the scoring
process: all its threads) per record, the ratio to one thread, and the largest score difference from one
thread (batch composition is the same in every variant, so any difference comes from the thread
count alone)::

    python scripts/bench_threads.py [--records 24] [--busy 4] [--rounds 3] [--widths large|test]

Variants: ``default`` (no ``threads``: torch's one thread per CPU, with the OpenMP wait policy
``import unieval_local`` sets: PASSIVE), ``threads=1``, and ``before (torch first)``: torch
imported before unieval_local, so OpenMP keeps its own wait policy (threads spin at a barrier),
which is what every run did before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

__all__ = ["main"]


def busy(n: int) -> list[subprocess.Popen]:
    """``n`` processes that spin until killed (the other jobs of a shared machine)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


CHILD = r"""
import json, os, sys, time
if os.environ.get("BENCH_TORCH_FIRST"):
    import torch  # OpenMP starts before unieval_local could set its wait policy: torch's own default
from unieval_local import Scorer
model, path, threads = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(x) for x in open(path)]
s = Scorer(model=model, device="cpu", threads=int(threads) if threads else None)
s.score(rows[:1], task="summarization", aspect="fluency")  # load and warm up: not measured
import torch
cpu, wall = time.process_time(), time.perf_counter()
out = {a: [e.value for e in s.score(rows, task="summarization", aspect=a).examples] for a in ("coherence", "fluency")}
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                  "threads": torch.get_num_threads(), "scores": out}))
"""


def one_run(model: str, src: Path, threads: str | None, env_extra: dict) -> tuple[float, float, dict]:
    """Score ``src`` once in a fresh process (model load and a warm-up excluded); (wall seconds,
    CPU seconds of that process and its threads, {aspect: scores})."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env_extra}
    done = subprocess.run([sys.executable, "-c", CHILD, model, str(src), threads or ""], check=True, env=env,
                          capture_output=True, text=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return got["wall"], got["cpu"], {a: dict(enumerate(v)) for a, v in got["scores"].items()}


def main(argv: list[str] | None = None) -> None:
    """Print the table (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=24)
    p.add_argument("--busy", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--widths", choices=("large", "test"), default="large")
    p.add_argument("--model", default=None)
    a = p.parse_args(argv)
    from make_test_checkpoint import build_test_checkpoint, shared_data_dir

    cpus = len(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    model = a.model
    if model is None:
        model = str(tmp / "unieval-sum")
        extra = dict(d_model=1024, d_ff=2816, num_heads=16) if a.widths == "large" else {}
        build_test_checkpoint(Path(model), num_layers=2, layout="v1.1", **extra)
    from convert_summeval import convert

    rows = convert(json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text()))
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "target": r["target"], "source": r["source"]}) + "\n"
                           for i, r in enumerate(rows[:a.records])))
    variants = {"before (torch first)": (None, {"BENCH_TORCH_FIRST": "1"}), "threads=1": ("1", {}),
                "default": (None, {})}
    got: dict[str, list[tuple[float, float, dict]]] = {k: [] for k in variants}
    print(f"{cpus} CPUs, {a.busy} busy processes, {a.records} records x 2 aspects, {a.rounds} alternating rounds, "
          f"load {os.getloadavg()[0]:.1f} at start", flush=True)
    spinners = busy(a.busy)
    try:
        for _ in range(a.rounds):
            for name, (threads, env) in variants.items():
                got[name].append(one_run(model, src, threads, env))
                print(f"  {name}: {got[name][-1][0]:.1f} s wall, {got[name][-1][1]:.1f} s CPU", flush=True)
    finally:
        for s in spinners:
            s.kill()
    base_cpu = statistics.median(c for _, c, _ in got["threads=1"])
    base_scores = got["threads=1"][0][2]
    print(f"\n{'variant':24s} {'wall s':>8s} {'CPU s/rec':>10s} {'CPU vs 1':>9s} {'max |diff| vs 1':>16s}")
    for name, runs in got.items():
        wall = statistics.median(w for w, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        diff = max(abs(s[asp][k] - base_scores[asp][k]) for _, _, s in runs for asp in s for k in s[asp])
        print(f"{name:24s} {wall:8.1f} {cpu / a.records:10.3f} {cpu / base_cpu:9.2f} {diff:16.2e}")


if __name__ == "__main__":
    main()
