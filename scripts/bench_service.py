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


# ----------------------------------------------------------------------------- slow connections (issue 28 item 6)
SLOW_HEAD = b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # half a head, no key
BENCH_KEY = "bench-key-7d41"


class _SlowClients:
    """``n`` connections that each send half a request head and nothing more, reopened when the
    server closes them, from one thread (a selector), until :meth:`stop` closes them all.

    Attributes:
        opened: connections opened in all. closed_by_server: ones the server closed (EOF, 408, reset).
        refused: connects that failed (refused, timed out).
    """

    def __init__(self, port: int, n: int):
        self.port, self.n = port, n
        self.opened = self.closed_by_server = self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def start(self) -> "_SlowClients":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _open(self, sel) -> None:
        import selectors

        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(SLOW_HEAD)
        except OSError:
            self.refused += 1
            return
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        self.opened += 1

    def _run(self) -> None:
        import selectors

        sel = selectors.DefaultSelector()
        try:
            for _ in range(self.n):
                if self._stop.is_set():
                    return
                self._open(sel)
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.2):
                    try:
                        data = key.fileobj.recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data and not data.startswith(b"HTTP/"):
                        continue
                    sel.unregister(key.fileobj)  # EOF, a 408 (EOF follows) or a reset: the server closed it
                    key.fileobj.close()
                    self.closed_by_server += 1
                    self._open(sel)
                while len(sel.get_map()) < self.n and not self._stop.is_set():  # refused ones: try again
                    before = self.refused
                    self._open(sel)
                    if self.refused > before:
                        break
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()
            sel.close()


def _keyed_load(url: str, recs: list[dict], clients: int) -> dict[str, float]:
    """As :func:`load`, with the Bearer key: `clients` threads send 4-example requests until the
    records are used up; examples/s and p50 / p99 latency (s)."""
    import requests

    work: queue.Queue = queue.Queue()
    for at in range(0, len(recs), 4):
        work.put([{"target": r["target"], "source": r["source"]} for r in recs[at:at + 4]])
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        with requests.Session() as s:
            s.headers["Authorization"] = f"Bearer {BENCH_KEY}"
            while True:
                try:
                    data = work.get_nowait()
                except queue.Empty:
                    return
                started = time.perf_counter()
                try:
                    r = s.post(url + "/v1/unieval", timeout=600,
                               json={"config": {"task": "summarization", "evaluation_aspect": "consistency"},
                                     "data": data})
                    r.raise_for_status()
                except requests.RequestException as exc:
                    with lock:
                        errors.append(type(exc).__name__)
                    continue
                with lock:
                    latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    lat = np.array(latencies or [float("nan")])
    return {"throughput": 4 * len(latencies) / wall, "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)), "requests": len(latencies), "errors": len(errors)}


def _connection_log_lines(text: str) -> list[str]:
    """The server log's lines about connections, accept errors or tracebacks (not access lines)."""
    words = ("connection", "accept", "open files", "traceback", "invalid http")
    return [line for line in text.splitlines() if '" ' not in line and any(w in line.lower() for w in words)]


def slow_connections(model: str, recs: list[dict], tmp: Path, engine_flags: list[str], n_slow: int = 1000,
                     clients: int = 8, hold_s: float = 60) -> dict:
    """8 keyed clients' answers with and without ``n_slow`` slow connections held open.

    One ``unieval-local serve`` (with a key, default connection settings plus ``engine_flags``,
    which may carry serve flags such as ``--max-connections``) answers ``clients`` keyed clients
    sending 4-example ``/v1/unieval`` requests over ``recs``, first alone, then while ``n_slow``
    connections each hold half a request head (no key), reopened whenever the server closes
    them, for ``hold_s`` seconds (the keyed load runs inside that window; all slow connections
    are closed at its end). This process's soft file limit is raised to its hard limit first.

    Returns:
        ``{"baseline": {...}, "slow": {...}}`` (examples/s ``throughput``, ``p50`` / ``p99``
        latency in s, ``requests``, ``errors``), ``health_s`` (one ``/health`` during the hold),
        the slow clients' ``slow_opened`` / ``slow_closed_by_server`` / ``slow_refused`` counts,
        ``log_lines`` (server log lines about connections during the hold), ``tracebacks``,
        ``exit_status`` (after SIGTERM) and ``hold_s``.
    """
    import resource

    import requests

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp / f"slow-serve-{port}.log"
    (tmp / "bench-key").write_text(BENCH_KEY + "\n")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(CLI + ["serve", "--model", model, "--port", str(port), "--api-key-file",
                                       str(tmp / "bench-key"), *engine_flags],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the service did not come up: {log_path.read_text()[-2000:]}")
            time.sleep(0.3)
        _keyed_load(url, recs[:8], 2)  # warm-up
        baseline = _keyed_load(url, recs, clients)
        mark = len(log_path.read_text(errors="replace"))
        slow = _SlowClients(port, n_slow).start()
        started = time.monotonic()
        while slow.opened < n_slow and time.monotonic() - started < min(30.0, hold_s):
            time.sleep(0.1)
        asked = time.perf_counter()
        try:
            health_ok = requests.get(url + "/health", timeout=60).status_code == 200
        except requests.RequestException:
            health_ok = False
        health_s = time.perf_counter() - asked if health_ok else float("nan")
        under = _keyed_load(url, recs, clients)
        time.sleep(max(0.0, hold_s - (time.monotonic() - started)))
        slow.stop()
        time.sleep(1.0)
        lines = _connection_log_lines(log_path.read_text(errors="replace")[mark:])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = log_path.read_text(errors="replace")
    return {"baseline": baseline, "slow": under, "health_s": health_s, "n_slow": n_slow,
            "slow_opened": slow.opened, "slow_closed_by_server": slow.closed_by_server,
            "slow_refused": slow.refused, "log_lines": len(lines), "tracebacks": text.count("Traceback"),
            "exit_status": proc.returncode, "hold_s": hold_s, "log_excerpt": lines[:5]}


def slow_connections_main(argv: list[str] | None = None) -> dict:
    """Run :func:`slow_connections` alone and print its numbers (until the main table takes it):

        python -c 'import sys; sys.path.insert(0, "scripts"); import bench_service as b; \\
            b.slow_connections_main(sys.argv[1:])' --records 32 --widths test --hold-s 20
    """
    p = argparse.ArgumentParser(description="keyed clients with and without slow connections held open")
    p.add_argument("--records", type=int, default=128)
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--widths", choices=("large", "test"), default="large")
    p.add_argument("--n-slow", type=int, default=1000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--hold-s", type=float, default=60)
    p.add_argument("--serve-flag", action="append", default=[], help="an extra serve flag (repeat; e.g. "
                                                                      "--serve-flag=--max-connections=200)")
    args = p.parse_args(argv)
    recs = records(args.records)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model = args.model
        if model is None:
            from make_test_checkpoint import build_test_checkpoint

            widths = dict(d_model=1024, d_ff=2816, num_heads=16) if args.widths == "large" else {}
            model = str(build_test_checkpoint(tmp / "unieval-sum", num_layers=2, layout="v1.1", **widths))
        flags = ["--device", args.device, "--dtype", args.dtype, *[f for flag in args.serve_flag
                                                                   for f in flag.split("=", 1)]]
        result = slow_connections(model, recs, tmp, flags, n_slow=args.n_slow, clients=args.clients,
                                  hold_s=args.hold_s)
    print(json.dumps(result, indent=1))
    return result
