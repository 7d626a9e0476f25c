#!/usr/bin/env python
"""Benchmark the HTTP service, side by side in one run (prints one table per scenario, with ratios).

Scenarios (``--scenarios``, default all):

* ``throughput``: the same SummEval records (summarization / consistency) scored offline by
  ``unieval-local score`` (examples/s from two runs, N and 4 records, so start-up and the model
  load cancel out) and through ``serve`` by 1, 8 and 32 concurrent clients of 4-example
  ``/v1/unieval`` requests; beside them, 32 clients on the pass-level scheduler of
  ``--baseline-rev`` (a git worktree of that commit, run from its own code). Targets: 32 clients
  >= 0.9x offline, p50 <= 0.5x the pass-level scheduler's.
* ``hol`` (head-of-line): the p99 latency of 1-example requests alone, and while one 250-example
  request and one 6,000-reference request run (on this scheduler and on the baseline's). Target: <= 3x.
* ``slow``: 8 keyed clients with and without 1,000 connections holding half a request head
  (:func:`slow_connections`). Targets: answers within 2x, no error, fewer than 10 log lines.
* ``health``: ``/health`` latency (polled every 20 ms) while a 1.5 MB body is parsed and
  scored. Target: <= 100 ms.
* ``memory``: the server's resident memory once ready, after 10,000 requests and after 1,000
  custom runs (bounded: the figure goes in the README).
* ``retry``: a 429's Retry-After against the real wait, at three moments after the query mix
  turns slower mid-run (:func:`retry_after`). Target: within 0.5-2x.

Usage:
    python scripts/bench_service.py [--scenarios throughput,hol] [--records 128] [--widths large|test]
                                    [--model DIR] [--device cpu] [--dtype float32] [--baseline-rev REV]

Without ``--model`` a checkpoint is generated: T5-large widths (d_model 1024, d_ff 2816, 16 heads, 2
layers; random weights, real tokenizer) for ``throughput`` and ``hol``, the tests' small one for
``slow``, ``health`` and ``memory`` (``--widths test`` uses the small one everywhere). On a GPU,
pass the official checkpoint (``--model ckpts/unieval-sum``) and ``--device cuda``; absolute numbers
count only there. Give CPU seconds, threads and load beside any wall time you quote.
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
#: the code of another checkout (a worktree), not this one's editable install
BASELINE_CLI = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
                "sys.path.insert(0, {root!r}); from unieval_local.cli import main; sys.exit(main())")
ASPECT = {"task": "summarization", "evaluation_aspect": "consistency"}


def records(n: int) -> list[dict]:
    from convert_summeval import convert
    from make_test_checkpoint import shared_data_dir

    raw = json.loads((shared_data_dir() / "summeval" / "summeval_raw.json").read_text())
    out = [{"id": r["id"], "target": r["target"], "source": r["source"], "references": r.get("references") or []}
           for r in convert(raw)]
    return out[:n]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline(model: str, recs: list[dict], tmp: Path, engine_flags: list[str]) -> dict[str, float]:
    """Examples/s of `unieval-local score` (N minus 4 records over the time difference), and the
    CPU seconds per record of the same difference."""
    def run(rs: list[dict]) -> tuple[float, float]:
        src = tmp / f"in-{len(rs)}.jsonl"
        src.write_text("".join(json.dumps({"id": r["id"], "target": r["target"], "source": r["source"]}) + "\n"
                               for r in rs))
        before = os.times()
        started = time.perf_counter()
        subprocess.run(CLI + ["score", str(src), "--model", model, "--aspect", "consistency", "--no-progress",
                              "-o", str(tmp / f"out-{len(rs)}-{time.time_ns()}.jsonl"), *engine_flags],
                       check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        after = os.times()
        return time.perf_counter() - started, (after.children_user + after.children_system
                                               - before.children_user - before.children_system)

    small, small_cpu = run(recs[:4])
    full, full_cpu = run(recs)
    n = len(recs) - 4
    return {"throughput": n / max(1e-9, full - small), "cpu_per_record": (full_cpu - small_cpu) / n}


class Server:
    """``unieval-local serve`` in a subprocess (this checkout, or the one at ``root``), with a key."""

    def __init__(self, model: str, tmp: Path, flags: list[str], root: Path | None = None):
        import requests

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (tmp / "bench-key").write_text(BENCH_KEY + "\n")
        cli = CLI if root is None else [sys.executable, "-c", BASELINE_CLI.format(root=str(root))]
        self.log = tmp / f"serve-{self.port}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cli + ["serve", "--model", model, "--port", str(self.port), "--log-level",
                                                "warning", "--api-key-file", str(tmp / "bench-key"), *flags],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {BENCH_KEY}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError("the service did not come up")

    def post(self, path: str, body: dict, session=None, timeout: float = 3600):
        r = (session or self.session).post(self.url + path, json=body, timeout=timeout)
        r.raise_for_status()
        return r

    def rss_mb(self) -> float:
        """The server process's resident memory (VmRSS), MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def latencies(samples: list[float]) -> dict[str, float]:
    lat = np.array(samples or [float("nan")])
    return {"p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)), "requests": len(samples)}


def load(server: Server, recs: list[dict], clients: int) -> dict[str, float]:
    """`clients` threads send 4-example /v1/unieval requests until the records are used up."""
    import requests

    work: queue.Queue = queue.Queue()
    for at in range(0, len(recs), 4):
        work.put([{"target": r["target"], "source": r["source"]} for r in recs[at:at + 4]])
    samples: list[float] = []
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
                server.post("/v1/unieval", {"config": ASPECT, "data": data}, s)
                with lock:
                    samples.append(time.perf_counter() - started)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"throughput": len(recs) / (time.perf_counter() - started), **latencies(samples)}


WARM_UP = [{"target": "The council met on Monday.", "source": "The council met on Monday. It approved a park."}]


def warm_up(server: Server) -> None:
    """One request of text no benchmark uses (the service remembers scored queries: a load must
    not meet its own queries again)."""
    server.post("/v1/unieval", {"config": ASPECT, "data": WARM_UP})


def worktree(rev: str, tmp: Path) -> Path:
    """A git worktree of ``rev`` (the pass-level scheduler's commit) in ``tmp``."""
    path = tmp / f"baseline-{rev[:10]}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev], check=True,
                   capture_output=True)
    return path


def drop_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], capture_output=True)


def generated(tmp: Path, widths: str) -> str:
    from make_test_checkpoint import build_test_checkpoint

    folder = tmp / f"ckpt-{widths}" / "unieval-sum"
    if not folder.exists():
        extra = dict(d_model=1024, d_ff=2816, num_heads=16) if widths == "large" else {}
        build_test_checkpoint(folder, num_layers=2, layout="v1.1", **extra)
    return str(folder)


# ----------------------------------------------------------------------------- scenarios
def server_cpu_s(server: Server) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(model: str, recs: list[dict], tmp: Path, flags: list[str], clients: int, root: Path | None) -> dict:
    """One load on a fresh server (none has scored these queries before), with its CPU seconds per example."""
    server = Server(model, tmp, flags, root=root)
    try:
        warm_up(server)
        before = server_cpu_s(server)
        row = load(server, recs, clients)
        row["cpu_per_record"] = (server_cpu_s(server) - before) / len(recs)
    finally:
        server.close()
    return row


def throughput(model: str, recs: list[dict], tmp: Path, flags: list[str], baseline: Path | None,
               repeats: int = 2) -> list[tuple]:
    """Offline, the service (1, 8, 32 clients) and the pass-level scheduler (32 clients); the
    offline, 32-client and baseline runs repeated ``repeats`` times, interleaved (a shared machine's
    speed drifts: the ratios are of the medians, each pair measured close in time)."""
    rows = [(f"service, {c} client(s)", served(model, recs, tmp, flags, c, None)) for c in (1, 8)]
    reps: dict[str, list[dict]] = {"offline": [], "service": [], "baseline": []}
    for _ in range(repeats):
        reps["offline"].append(offline(model, recs, tmp, flags))
        reps["service"].append(served(model, recs, tmp, flags, 32, None))
        if baseline is not None:
            reps["baseline"].append(served(model, recs, tmp, flags, 32, baseline))

    def median(runs: list[dict]) -> dict:
        return {k: float(np.median([r[k] for r in runs])) for k in runs[0]} if runs else {}

    off = median(reps["offline"])
    rows = [("offline `unieval-local score`", off)] + rows + [("service, 32 clients", median(reps["service"]))]
    if baseline is not None:
        rows.append(("pass-level scheduler (baseline), 32 clients", median(reps["baseline"])))
    print(f"\n### throughput: {len(recs)} SummEval records, {ASPECT['task']}/{ASPECT['evaluation_aspect']}, "
          f"4-example requests (medians of {repeats} interleaved runs for offline, 32 clients and the baseline)\n")
    print("| run | examples/s | x offline | CPU s / example | p50 s | p99 s | requests |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        lat = f"{r['p50']:.2f} | {r['p99']:.2f} | {int(r['requests'])}" if "p50" in r else "- | - | -"
        print(f"| {name} | {r['throughput']:.2f} | {r['throughput'] / off['throughput']:.2f} | "
              f"{r['cpu_per_record']:.2f} | {lat} |")
    for name, runs in reps.items():
        if runs:
            print(f"{name} runs, examples/s: " + ", ".join(f"{r['throughput']:.2f}" for r in runs))
    if baseline is not None:
        new, old = median(reps["service"]), median(reps["baseline"])
        print(f"\np50 of 32 clients, micro-batches over the pass-level scheduler: {new['p50'] / old['p50']:.2f}x "
              f"(target <= 0.5); throughput {new['throughput'] / old['throughput']:.2f}x")
    return rows


def head_of_line(model: str, recs: list[dict], tmp: Path, flags: list[str], baseline: Path | None) -> list[tuple]:
    """p99 of 1-example requests alone and while a 250-example and a 6,000-reference request run."""
    smalls = ([{"target": r["target"], "source": r["source"]} for r in recs[:20]],  # alone, then loaded:
              [{"target": r["target"], "source": r["source"]} for r in recs[20:40]])  # no query met twice
    big = {"config": ASPECT, "data": [{"target": r["target"], "source": r["source"]}
                                      for r in (recs * (250 // max(1, len(recs)) + 1))[:250]]}
    refs = [r for rec in recs for r in rec["references"]] or [recs[0]["target"]]
    many = {"config": {"task": "summarization", "evaluation_aspect": "relevance"},
            "data": [{"target": recs[0]["target"], "references": (refs * (6000 // len(refs) + 1))[:6000]}]}
    rows = []
    for label, root in (("micro-batches", None), ("pass-level (baseline)", baseline)):
        if label != "micro-batches" and root is None:
            continue
        server = Server(model, tmp, flags, root=root)
        try:
            def one_by_one(small: list[dict]) -> list[float]:
                out = []
                for ex in small:
                    started = time.perf_counter()
                    server.post("/v1/unieval", {"config": {"task": "summarization", "evaluation_aspect": "coherence"},
                                                "data": [ex]})
                    out.append(time.perf_counter() - started)
                return out

            warm_up(server)
            alone = latencies(one_by_one(smalls[0]))
            threads = [threading.Thread(target=server.post, args=("/v1/unieval", body)) for body in (big, many)]
            for t in threads:
                t.start()
            time.sleep(1.0)  # both admitted and running
            loaded = latencies(one_by_one(smalls[1]))
            for t in threads:
                t.join()
            rows.append((label, alone, loaded))
        finally:
            server.close()
    print("\n### head-of-line: 1-example requests alone, and while a 250-example and a 6,000-reference request run\n")
    print("| scheduler | p50 alone s | p99 alone s | p50 loaded s | p99 loaded s | p99 loaded / alone |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, alone, loaded in rows:
        print(f"| {label} | {alone['p50']:.3f} | {alone['p99']:.3f} | {loaded['p50']:.3f} | {loaded['p99']:.3f} | "
              f"{loaded['p99'] / alone['p99']:.2f} |")
    return rows


def retry_after(model: str, recs: list[dict], tmp: Path, flags: list[str], queue_cap: int = 512) -> list[dict]:
    """Retry-After against the real wait when the query mix gets slower mid-run (issue 40).

    A fast mix (consistency of each summary against the first sentence of its source) runs for 4 s;
    then the mix turns slow (the same summaries against their whole source, four times over: the
    same cost per request, several times the tokens). At 0.5 s, 3 s and 8 s after the change the
    queue (``--max-queued-queries``) is filled with bursts of slow requests until one gets 429; its
    Retry-After is set against the real wait: the seconds from that 429 until the same request,
    retried every 50 ms, is admitted (one not back within 0.5 s was admitted). Target: each ratio
    within 0.5-2x."""
    import requests

    def bodies(slow: bool) -> list[dict]:
        out = []
        for at in range(0, len(recs) - 7, 8):
            data = [{"target": r["target"],
                     "source": " ".join([r["source"]] * 4) if slow else r["source"].split(". ")[0] + "."}
                    for r in recs[at:at + 8]]
            out.append({"config": ASPECT, "data": data})
        return out

    fast, slow = bodies(False), bodies(True)
    server = Server(model, tmp, flags + ["--max-request-queries", str(queue_cap // 4), "--max-queued-queries",
                                         str(queue_cap)])
    rows: list[dict] = []
    stop = threading.Event()
    sent = [0]

    def keep_sending(mix: list[dict]) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {BENCH_KEY}"
        while not stop.is_set():
            sent[0] += 1
            session.post(server.url + "/v1/unieval", json=mix[sent[0] % len(mix)], timeout=3600)

    def post(body: dict):
        return server.session.post(server.url + "/v1/unieval", json=body, timeout=3600)

    try:
        warm_up(server)
        loaders = [threading.Thread(target=keep_sending, args=(fast,), daemon=True) for _ in range(2)]
        for t in loaders:
            t.start()
        time.sleep(4.0)
        stop.set()
        for t in loaders:
            t.join()
        changed = time.monotonic()  # the mix turns slow here
        stop.clear()
        loaders = [threading.Thread(target=keep_sending, args=(slow,), daemon=True) for _ in range(2)]
        for t in loaders:
            t.start()
        for after in (0.5, 3.0, 8.0):
            time.sleep(max(0.0, changed + after - time.monotonic()))
            fillers, n, said, refused = [], 0, None, None
            answers: list = []  # (arrival, response) of every filler
            # fill the queue with bursts of slow requests until one is refused: a 429 comes back once
            # the request is prepared (under load, later than 0.5 s: a fixed wait per request read slow
            # refusals as admissions and never stopped; one request at a time, the queue drained as fast)
            for _burst in range(8):
                for _ in range(48):
                    n += 1

                    def fill(b=slow[n % len(slow)]):
                        r = post(b)
                        answers.append((time.monotonic(), r))
                    t = threading.Thread(target=fill, daemon=True)
                    t.start()
                    fillers.append(t)
                deadline = time.monotonic() + 20
                while said is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                    refusals = [(at, r) for at, r in list(answers) if r.status_code == 429]
                    if refusals:
                        refused, said = refusals[0][0], int(refusals[0][1].headers["Retry-After"])
                if said is not None:
                    break
            if said is None:
                raise RuntimeError(f"no 429 after {n} slow requests: the queue never filled")
            while True:  # the same request, retried every 50 ms, until it is admitted
                got = []
                asked = time.monotonic()
                t = threading.Thread(target=lambda b=slow[n % len(slow)], g=got: g.append(post(b)), daemon=True)
                t.start()
                t.join(0.5)
                if not (got and got[0].status_code == 429):
                    fillers.append(t)
                    break
                time.sleep(0.05)
            waited = asked - refused
            rows.append({"after_s": after, "retry_after": said, "wait_s": waited, "ratio": said / waited})
            for t in fillers:
                t.join()
        stop.set()
        for t in loaders:
            t.join()
    finally:
        stop.set()
        server.close()
    print("\n### Retry-After against the real wait, after the query mix turns slow (issue 40; target 0.5-2x)\n")
    print("| probe, s after the change | Retry-After s | real wait s | ratio |\n|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['after_s']:.1f} | {r['retry_after']} | {r['wait_s']:.2f} | {r['ratio']:.2f} |")
    return rows


def health(model: str, recs: list[dict], tmp: Path, flags: list[str]) -> dict:
    """/health latency, polled every 20 ms, while a 1.5 MB /v1/unieval body is parsed and scored."""
    import requests

    text = " ".join(r["source"] for r in recs)
    data = [{"target": recs[i % len(recs)]["target"], "source": (text * 3)[:6000]} for i in range(250)]
    body = {"config": {"task": "summarization", "evaluation_aspect": "fluency"}, "data": data}
    size = len(json.dumps(body))
    server = Server(model, tmp, flags)
    try:
        idle = []
        for _ in range(20):
            started = time.perf_counter()
            requests.get(server.url + "/health", timeout=10)
            idle.append(time.perf_counter() - started)
        busy, done = [], threading.Event()
        t = threading.Thread(target=lambda: (server.post("/v1/unieval", body), done.set()))
        t.start()
        while not done.is_set():
            started = time.perf_counter()
            requests.get(server.url + "/health", timeout=10)
            busy.append(time.perf_counter() - started)
            time.sleep(0.02)
        t.join()
    finally:
        server.close()
    out = {"body_mb": size / 2**20, "idle_max_ms": 1000 * max(idle), "busy_p50_ms": 1000 * float(np.median(busy)),
           "busy_max_ms": 1000 * max(busy), "polls": len(busy)}
    print(f"\n### /health while a {out['body_mb']:.2f} MB body is parsed and scored\n")
    print("| idle max ms | busy p50 ms | busy max ms | polls |\n|---:|---:|---:|---:|")
    print(f"| {out['idle_max_ms']:.1f} | {out['busy_p50_ms']:.1f} | {out['busy_max_ms']:.1f} | {out['polls']} |")
    return out


def memory(model: str, recs: list[dict], tmp: Path, flags: list[str], n_requests: int = 10000,
           n_runs: int = 1000) -> dict:
    """The server's RSS once ready, after ``n_requests`` requests and after ``n_runs`` custom runs."""
    import requests
    from concurrent.futures import ThreadPoolExecutor

    server = Server(model, tmp, flags)
    out = {}
    try:
        out["ready_mb"] = server.rss_mb()
        bodies = [{"config": {"task": "summarization", "evaluation_aspect": "fluency"},
                   "data": [{"target": recs[i % len(recs)]["target"]}]} for i in range(n_requests)]

        def send(body, path="/v1/unieval"):
            with requests.Session() as s:
                s.headers["Authorization"] = f"Bearer {BENCH_KEY}"
                server.post(path, body, s)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(send, bodies))
        out["after_requests_mb"] = server.rss_mb()
        runs = [({"threshold": 50, "is_blocking": True, "evaluations": [{"metrics": [{"metric": "summ"}], "data": [
            {"input": recs[i % len(recs)]["source"][:600], "output": recs[i % len(recs)]["target"]}]}]}, "/runs/custom")
                for i in range(n_runs)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda a: send(*a), runs))
        out["after_runs_mb"] = server.rss_mb()
    finally:
        server.close()
    print(f"\n### memory (RSS of the server): ready, after {n_requests} requests, after {n_runs} custom runs\n")
    print("| ready MiB | after requests MiB | after custom runs MiB |\n|---:|---:|---:|")
    print(f"| {out['ready_mb']:.0f} | {out['after_requests_mb']:.0f} | {out['after_runs_mb']:.0f} |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="throughput,hol,slow,health,memory,retry")
    p.add_argument("--records", type=int, default=128)
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--widths", choices=("large", "test"), default="large")
    p.add_argument("--baseline-rev", default="dee60b7",
                   help="the commit of the pass-level scheduler to run beside ('' for none)")
    p.add_argument("--hold-s", type=float, default=60, help="slow connections held this long")
    args = p.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    flags = ["--device", args.device, "--dtype", args.dtype]
    recs = records(args.records)
    load_avg = os.getloadavg()
    print(f"device {args.device}, dtype {args.dtype}, {os.cpu_count()} CPUs, load {load_avg[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        big = args.model or generated(tmp, args.widths)
        small = args.model or generated(tmp, "test")
        baseline = worktree(args.baseline_rev, tmp) if args.baseline_rev and {"throughput", "hol"} & set(scenarios) \
            else None
        try:
            if "throughput" in scenarios:
                throughput(big, recs, tmp, flags, baseline)
            if "hol" in scenarios:
                head_of_line(big, recs, tmp, flags, baseline)
            if "slow" in scenarios:
                r = slow_connections(small, recs, tmp, flags, hold_s=args.hold_s)
                print(f"\n### {r['n_slow']} slow connections (held {r['hold_s']:.0f} s) while 8 keyed clients run\n")
                print("| run | examples/s | p50 s | p99 s | errors |\n|---|---:|---:|---:|---:|")
                for name in ("baseline", "slow"):
                    x = r[name]
                    print(f"| {'alone' if name == 'baseline' else 'with slow connections'} | {x['throughput']:.2f} | "
                          f"{x['p50']:.2f} | {x['p99']:.2f} | {x['errors']} |")
                print(f"\np99 ratio {r['slow']['p99'] / r['baseline']['p99']:.2f}x; /health during the hold "
                      f"{r['health_s']:.2f} s; {r['slow_closed_by_server']} slow connections closed by the server; "
                      f"{r['log_lines']} log lines about them; {r['tracebacks']} tracebacks; exit {r['exit_status']}")
            if "health" in scenarios:
                health(small, recs, tmp, flags)
            if "retry" in scenarios:
                retry_after(small, recs, tmp, flags)
            if "memory" in scenarios:
                memory(small, recs, tmp, flags)
        finally:
            if baseline is not None:
                drop_worktree(baseline)
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


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
        _keyed_load(url, [{"id": "w", **WARM_UP[0]}] * 4, 1)  # warm-up, on text no load uses
        baseline = _keyed_load(url, recs[0::2], clients)  # the service remembers scored queries: the two
        # loads take alternate records, so neither meets the other's
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
        under = _keyed_load(url, recs[1::2], clients)
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



if __name__ == "__main__":
    main()
