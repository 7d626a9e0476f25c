#!/usr/bin/env python
"""Benchmark the HTTP service against offline scoring, side by side in one run (prints a table).

The same SummEval records (summarization / consistency) are scored
  (a) offline by ``unieval-local score`` (throughput from two runs, N and 4 records, so process
      start-up and the model load cancel out),
  (b) through ``unieval-local serve`` by 1, 8 and 32 concurrent clients sending 4-example requests
      (``POST /v1/unieval``; clients take the next request from a shared queue),
  (c) through the service with batching off (``--max-wait-ms 0``: one query per engine pass), 32 clients.
Throughput is examples/s; latency is per request (p50 / p99, seconds). Ratios: each row over (a),
and 32 clients batched over (c). The issue's targets on a 2-core CPU with a generated checkpoint of
T5-large widths: 32 clients >= 0.8x offline and >= 3x batching off.

Usage:
    python scripts/bench_service.py [--records 128] [--model DIR] [--device cpu] [--dtype float32]

Without ``--model`` a checkpoint of T5-large widths (d_model 1024, d_ff 2816, 16 heads, 2 layers;
random weights, real tokenizer) is generated in a temporary folder. On a GPU, pass the official
checkpoint (``--model ckpts/unieval-sum``) and ``--device cuda``; absolute numbers count only there.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]


def records(n: int) -> list[dict]:
    from convert_summeval import convert
    from make_test_checkpoint import shared_data_dir

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    out = [{"id": r["id"], "target": r["target"], "source": r["source"]} for r in convert(raw)]
    return out[:n]


def offline(model: str, recs: list[dict], tmp: Path, engine_flags: list[str]) -> float:
    """Examples/s of `unieval-local score` (N minus 4 records over the time difference)."""
    def run(rs: list[dict]) -> float:
        src = tmp / f"in-{len(rs)}.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rs))
        started = time.perf_counter()
        subprocess.run(CLI + ["score", str(src), "--model", model, "--aspect", "consistency", "--no-progress",
                              "-o", str(tmp / f"out-{len(rs)}.jsonl"), *engine_flags],
                       check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        return time.perf_counter() - started

    small = run(recs[:4])
    full = run(recs)
    return (len(recs) - 4) / max(1e-9, full - small)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    def __init__(self, model: str, wait_ms: float, engine_flags: list[str]):
        import requests

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(CLI + ["serve", "--model", model, "--port", str(self.port), "--max-wait-ms",
                                            str(wait_ms), "--log-level", "warning", *engine_flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1"})
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError("the service did not come up")

    def passes(self) -> float:
        import requests

        text = requests.get(self.url + "/metrics", timeout=10).text
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("unieval_local_engine_passes_total "))

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def load(service: Service, recs: list[dict], clients: int) -> dict[str, float]:
    """`clients` threads send 4-example requests until the records are used up."""
    import requests

    work: queue.Queue = queue.Queue()
    for at in range(0, len(recs), 4):
        work.put([{"target": r["target"], "source": r["source"]} for r in recs[at:at + 4]])
    latencies: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        with requests.Session() as s:
            while True:
                try:
                    data = work.get_nowait()
                except queue.Empty:
                    return
                started = time.perf_counter()
                r = s.post(service.url + "/v1/unieval", timeout=600,
                           json={"config": {"task": "summarization", "evaluation_aspect": "consistency"},
                                 "data": data})
                r.raise_for_status()
                with lock:
                    latencies.append(time.perf_counter() - started)

    passes = service.passes()
    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    lat = np.array(latencies)
    return {"throughput": len(recs) / wall, "p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
            "requests": len(lat), "passes": service.passes() - passes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=128)
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--widths", choices=("large", "test"), default="large",
                   help="generated checkpoint: T5-large widths (default) or the tests' small one (d_model 64), "
                        "where per-pass overhead, not compute, dominates")
    args = p.parse_args()
    engine_flags = ["--device", args.device, "--dtype", args.dtype]
    recs = records(args.records)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model = args.model
        if model is None:
            from make_test_checkpoint import build_test_checkpoint

            widths = dict(d_model=1024, d_ff=2816, num_heads=16) if args.widths == "large" else {}
            model = str(build_test_checkpoint(tmp / "unieval-sum", num_layers=2, layout="v1.1", **widths))
        rows = [("offline `unieval-local score`", {"throughput": offline(model, recs, tmp, engine_flags)})]
        for wait_ms, clients_list, label in ((10, (1, 8, 32), "service, {} client(s)"),
                                             (0, (32,), "service, batching off, {} clients")):
            service = Service(model, wait_ms, engine_flags)
            try:
                load(service, recs[:8], 2)  # warm-up
                for clients in clients_list:
                    rows.append((label.format(clients), load(service, recs, clients)))
            finally:
                service.close()
    base = rows[0][1]["throughput"]
    off = rows[-1][1]["throughput"]
    print(f"\n{len(recs)} SummEval records, summarization/consistency, device {args.device}, dtype {args.dtype}, "
          f"model {args.model or f'generated ({args.widths} widths, 2 layers)'}\n")
    print(f"| {'run':38} | examples/s | x offline | x batching off | p50 s | p99 s | requests | passes |")
    print(f"|{'-' * 40}|-----------:|----------:|---------------:|------:|------:|---------:|-------:|")
    for name, r in rows:
        lat = (f"{r['p50']:5.2f} | {r['p99']:5.2f} | {r['requests']:8d} | {int(r['passes']):6d}"
               if "p50" in r else "    - |     - |        - |      -")
        print(f"| {name:38} | {r['throughput']:10.2f} | {r['throughput'] / base:9.2f} | "
              f"{r['throughput'] / off:14.2f} | {lat} |")


if __name__ == "__main__":
    main()
