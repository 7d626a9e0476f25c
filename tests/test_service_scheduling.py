"""The service's scheduling as clients meet it (issue 28, items 1-5): a real server on a loopback
port, real HTTP clients and raw sockets. A small request is answered while a large one runs;
requests are admitted by their cost in model queries (413 over the request limit, 429 with
Retry-After over the queue); a request that timed out or whose client went away has its queued
work dropped; a checkpoint that does not load fails only the requests that need it."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

requests = pytest.importorskip("requests")
pytest.importorskip("fastapi")

from test_service import AUTH, KEY, SOURCE, Server, examples, unieval  # noqa: E402
from unieval_local import Scorer  # noqa: E402

RELEVANCE = {"task": "summarization", "evaluation_aspect": "relevance"}


def many_references(n: int) -> dict:
    """One example whose relevance is n model queries (one per reference)."""
    return unieval(RELEVANCE, [{"target": "The council approved a park.",
                                "references": [f"Reference {k}: the council approved the park." for k in range(n)]}])


def queued(server: Server) -> float:
    return server.metric("unieval_local_queue_queries")


def test_a_small_request_is_answered_while_a_large_one_runs(tiny_ckpt, tmp_path, summeval_records):
    s = Server(tiny_ckpt, tmp_path, "--batch-tokens", "256").wait_ready()
    try:
        large: dict = {}

        def send_large():
            started = time.monotonic()
            large["r"] = s.post("/v1/unieval", many_references(6000), timeout=600)
            large["done"] = time.monotonic() - started

        t = threading.Thread(target=send_large)
        t.start()
        time.sleep(1.0)  # the large request is admitted and running
        assert t.is_alive() and queued(s) > 0
        data = examples(summeval_records, 1)
        started = time.monotonic()
        small = s.post("/v1/unieval", unieval({}, data))
        small_s = time.monotonic() - started
        assert small.status_code == 200 and t.is_alive(), "the small request waited for the large one"
        t.join()
        assert large["r"].status_code == 200 and len(large["r"].json()["examples"]) == 1
        assert small_s < large["done"] / 3
        want = Scorer(model=str(tiny_ckpt), device="cpu").score(data, task="summarization", aspect="coherence")
        np.testing.assert_allclose(small.json()["examples"][0]["value"], want.examples[0].value, atol=1e-5, rtol=0)
    finally:
        assert s.stop() == 0


def test_requests_are_admitted_by_their_cost_in_model_queries(tiny_ckpt, tmp_path, summeval_records):
    s = Server(tiny_ckpt, tmp_path, "--max-request-queries", "50", "--max-queued-queries", "60",
               "--max-wait-ms", "1500").wait_ready()
    try:
        too_many = s.post("/v1/unieval", unieval({}, examples(summeval_records, 1) * 251))
        assert too_many.status_code == 422  # the hosted metric's 250-example limit is checked first
        costly = s.post("/v1/unieval", many_references(60))
        assert costly.status_code == 413, costly.text
        error = costly.json()["error"]
        assert error["type"] == "RequestTooCostly" and "60" in error["message"] and "50" in error["message"]
        first: dict = {}
        t = threading.Thread(target=lambda: first.update(r=s.post("/v1/unieval", many_references(40))))
        t.start()
        time.sleep(0.5)  # admitted: 40 of the 60 queued queries, waiting in the idle window
        second = s.post("/v1/unieval", many_references(40))
        t.join()
        assert second.status_code == 429 and second.json()["error"]["type"] == "QueueFull"
        assert int(second.headers["Retry-After"]) >= 1
        assert first["r"].status_code == 200
        assert s.post("/v1/unieval", many_references(40)).status_code == 200  # room again once answered
    finally:
        assert s.stop() == 0


def test_a_request_that_times_out_or_whose_client_leaves_has_its_work_dropped(tiny_ckpt, tmp_path):
    s = Server(tiny_ckpt, tmp_path, "--request-timeout-s", "1", "--batch-tokens", "64").wait_ready()
    try:
        before = s.metric("unieval_local_model_queries_total")
        r = s.post("/v1/unieval", many_references(8000))
        assert r.status_code == 504 and r.json()["error"]["type"] == "Timeout"
        deadline = time.monotonic() + 10
        while queued(s) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert queued(s) == 0
        time.sleep(1.0)
        scored = s.metric("unieval_local_model_queries_total") - before
        assert scored < 6000  # dropped, not scored to the end
        assert s.metric("unieval_local_model_queries_total") - before == scored  # and nothing more since
        # a client that goes away: its request is dropped too
        body = json.dumps(many_references(8000)).encode()
        with socket.create_connection(("127.0.0.1", s.port)) as raw:
            raw.sendall(b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            deadline = time.monotonic() + 10
            while not queued(s) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert queued(s) > 0
        deadline = time.monotonic() + 10
        while queued(s) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert queued(s) == 0
        assert s.post("/v1/unieval", unieval({}, [{"target": "A park.", "source": SOURCE}])).status_code == 200
    finally:
        assert s.stop() == 0


def test_a_checkpoint_that_does_not_load_fails_only_the_requests_that_need_it(tiny_ckpt, tmp_path, summeval_records):
    home = tmp_path / "home"
    shutil.copytree(tiny_ckpt, home / "unieval-fact")  # loaded on first use, and damaged
    weights = home / "unieval-fact" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    s = Server(Path(f"unieval-sum={tiny_ckpt}"), tmp_path, "--max-wait-ms", "500",
               env={"UNIEVAL_LOCAL_HOME": str(home)}).wait_ready()
    try:
        good = [examples(summeval_records, 2, start=2 * i) for i in range(6)]
        fact = unieval({"task": "fact", "evaluation_aspect": "consistency"}, [{"target": "A park.", "source": SOURCE}])
        with ThreadPoolExecutor(7) as pool:
            futures = [pool.submit(s.post, "/v1/unieval", unieval({}, d)) for d in good]
            bad = pool.submit(s.post, "/v1/unieval", fact)
            answers = [f.result() for f in futures]
            bad = bad.result()
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "CheckpointUnavailable", bad.text
        assert str(tmp_path) not in bad.text  # the server's paths stay in its log
        scorer = Scorer(model=str(tiny_ckpt), device="cpu")
        for r, data in zip(answers, good):
            assert r.status_code == 200, r.text
            want = scorer.score(data, task="summarization", aspect="coherence")
            np.testing.assert_allclose([e["value"] for e in r.json()["examples"]], [e.value for e in want.examples],
                                       atol=1e-5, rtol=0)
    finally:
        assert s.stop() == 0
