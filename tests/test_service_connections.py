"""Connections as users meet them (issue 28, items 6 and 9): the real server (``unieval-local serve``
in its own process under a low file limit, the generated checkpoint) and raw sockets that send
half a request head, trickle a body, idle, or send garbage; the start-up checks of the key; the
access log's query strings; loopback spellings.

Timeouts are short here (``--header-timeout-s 2``) so that every test takes seconds."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

requests = pytest.importorskip("requests")
pytest.importorskip("fastapi")
resource = pytest.importorskip("resource")

from unieval_local.cli.serve import api_key, is_loopback  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEY = "conn-key-41c7"
AUTH = {"Authorization": f"Bearer {KEY}"}
HEADER_S = 2.0    # --header-timeout-s
BODY_S = 2.0      # --body-timeout-s
RATE = 1000       # --min-body-rate (bytes/s)
KEEP_ALIVE_S = 1.0
FILES = (128, 256)  # the server's file limit (soft, hard): the soft one is raised to 256 at start
FLAGS = ("--header-timeout-s", str(HEADER_S), "--body-timeout-s", str(BODY_S), "--min-body-rate", str(RATE),
         "--keep-alive-s", str(KEEP_ALIVE_S), "--max-wait-ms", "0")
PARTIAL_HEAD = b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
SERVE = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())", "serve"]
BODY = {"config": {"task": "summarization", "evaluation_aspect": "fluency"},
        "data": [{"target": "The council approved a park. It opens in May.",
                  "source": "The city council approved the new park on Monday. Construction starts in May."}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``unieval-local serve`` in a subprocess under the file limit ``files`` (soft, hard),
    stdout and stderr to one log file (the pattern of tests/test_service.py's ``Server``)."""

    def __init__(self, ckpt: Path, tmp: Path, *flags: str, files: tuple[int, int] = FILES):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"serve-{self.port}.log"
        (tmp / f"key-{self.port}").write_text(KEY + "\n")
        cmd = [*SERVE, "--model", str(ckpt), "--port", str(self.port), "--api-key-file", str(tmp / f"key-{self.port}"),
               *flags]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT, cwd=ROOT,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1"},
                                     preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, files))

    def wait_ready(self, timeout: float = 180) -> "Serve":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"serve exited {self.proc.returncode}: {self.log()}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        pytest.fail(f"serve not healthy after {timeout} s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def post(self, path: str, body: dict, timeout: float = 30, **kw):
        return requests.post(self.url + path, json=body, headers=AUTH, timeout=timeout, **kw)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module", autouse=True)
def _room_for_sockets():
    """This process opens a few hundred sockets: make sure its own soft file limit allows them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024 and (hard == resource.RLIM_INFINITY or hard >= 1024):
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def server(tiny_ckpt, tmp_path_factory):
    s = Serve(tiny_ckpt, tmp_path_factory.mktemp("connections"), *FLAGS).wait_ready()
    assert s.post("/v1/unieval", BODY, timeout=60).status_code == 200  # warm: the first pass imports and compiles
    yield s
    s.stop()


def open_partial_heads(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that each sent half a request head, with no key."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(PARTIAL_HEAD)
        socks.append(s)
    return socks


def wait_closed(sock: socket.socket, until: float) -> tuple[float | None, bytes]:
    """(the monotonic time the server closed ``sock``, or None if still open at ``until``; what it sent)."""
    got = b""
    while (left := until - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            break
        except ConnectionResetError:
            return time.monotonic(), got
        if not chunk:
            return time.monotonic(), got
        got += chunk
    return None, got


def read_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length body, read from a keep-alive connection."""
    data = b""
    sock.settimeout(10)
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(4096)
    return head


def about_connections(log: str) -> list[str]:
    """The log lines about connections, accept errors or tracebacks (not the access lines)."""
    words = ("connection", "accept", "open files", "traceback", "invalid http", "error")
    return [line for line in log.splitlines() if '" ' not in line and any(w in line.lower() for w in words)]


# ----------------------------------------------------------------------------- the real server
def test_the_soft_file_limit_is_raised_to_the_hard_limit_at_start(server):
    if not hasattr(resource, "prlimit"):
        pytest.skip("reading another process's file limit needs resource.prlimit (Linux)")
    assert resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE) == (FILES[1], FILES[1])


def test_incomplete_heads_beyond_the_file_limit_leave_room_for_a_keyed_client(server):
    mark = len(server.log())
    started = time.monotonic()
    held = open_partial_heads(server.port, FILES[1] + 44)  # more than the server's file limit
    try:
        asked = time.monotonic()
        assert requests.get(f"{server.url}/health", timeout=3 * HEADER_S).status_code == 200
        assert time.monotonic() - asked < HEADER_S + 1, "/health waited more than one header timeout"
        r = server.post("/v1/unieval", BODY, timeout=30)
        assert r.status_code == 200 and len(r.json()["examples"]) == 1
        assert time.monotonic() - asked < 2 * HEADER_S + 1, "the keyed client waited more than one header timeout"
        # every held connection is closed by the server: the last ones accepted, a header timeout after
        until = started + 3 * HEADER_S + 3
        closed = [wait_closed(s, until) for s in held]
        assert all(t is not None for t, _ in closed), f"{sum(t is None for t, _ in closed)} still open"
        assert all(got in (b"", ) or got.startswith(b"HTTP/1.1 408 ") for _, got in closed)
    finally:
        for s in held:
            s.close()
    time.sleep(1)  # the watchdog's report line
    lines = about_connections(server.log()[mark:])
    assert len(lines) < 10, lines
    assert not any("Traceback" in line or "open files" in line for line in lines), lines
    assert requests.get(f"{server.url}/health", timeout=5).status_code == 200


def test_a_body_trickled_a_byte_a_second_is_cut_off(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(PARTIAL_HEAD + f"Authorization: Bearer {KEY}\r\nContent-Length: 1000\r\n\r\n".encode())
        started, got = time.monotonic(), b""
        closed = None
        while closed is None and time.monotonic() - started < 8:
            closed, got = wait_closed(s, time.monotonic() + 1)
            if closed is None:
                try:
                    s.sendall(b" ")
                except OSError:  # reset while we wrote: closed
                    closed = time.monotonic()
    assert closed is not None, "a body sent a byte a second was still being read after 8 s"
    assert BODY_S - 0.5 <= closed - started <= BODY_S + 2.5
    assert not got.startswith(b"HTTP/1.1 200")


def test_a_body_sent_faster_than_the_minimum_rate_is_answered_after_the_body_timeout(server):
    body = json.dumps({**BODY, "data": BODY["data"] * 2, "pad": " " * 4000}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v1/unieval HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        started, step = time.monotonic(), 2 * RATE // 10  # 2 x --min-body-rate, in tenths of a second
        for i in range(0, len(body), step):
            s.sendall(body[i:i + step])
            time.sleep(0.1)
        assert time.monotonic() - started > BODY_S  # longer than the body timeout alone
        head = read_response(s)
    assert head.startswith(b"HTTP/1.1 200"), head


def test_idle_keep_alive_closes_after_keep_alive_s_and_a_slow_next_head_after_the_header_timeout(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(s).startswith(b"HTTP/1.1 200")
        idle = time.monotonic()
        closed, got = wait_closed(s, idle + KEEP_ALIVE_S + 3)
    assert closed is not None and KEEP_ALIVE_S - 0.3 <= closed - idle <= KEEP_ALIVE_S + 1.5 and got == b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(s).startswith(b"HTTP/1.1 200")
        idle = time.monotonic()
        s.sendall(b"GET /hea")  # one byte stops uvicorn's keep-alive timer; the header timeout still runs
        closed, got = wait_closed(s, idle + HEADER_S + 4)
    assert closed is not None and HEADER_S - 0.3 <= closed - idle <= HEADER_S + 1.5
    assert got.startswith(b"HTTP/1.1 408 ")


def test_query_strings_never_reach_the_access_log(server):
    assert requests.get(f"{server.url}/health?api_key=QS-SECRET-1", timeout=10).status_code == 200
    assert server.post("/v1/unieval?api_key=QS-SECRET-2&debug=1", BODY).status_code == 200
    time.sleep(0.2)
    log = server.log()
    assert '"GET /health HTTP/1.1" 200' in log and '"POST /v1/unieval HTTP/1.1" 200' in log
    assert "QS-SECRET" not in log and "?api_key" not in log and KEY not in log


def test_garbage_requests_give_one_warning_a_minute_not_one_each(server):
    mark = len(server.log())
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 400")
    time.sleep(0.2)
    assert server.log()[mark:].count("Invalid HTTP request received.") == 1


def test_after_all_that_sigterm_still_drains_and_exits_0(server):
    assert server.stop() == 0, server.log()
    assert "every accepted request was answered" in server.log() and "Traceback" not in server.log()


def test_out_of_descriptors_below_the_cap_accept_errors_are_one_line_and_clients_still_get_in(tiny_ckpt, tmp_path):
    if not hasattr(resource, "prlimit"):
        pytest.skip("lowering a running server's file limit needs resource.prlimit (Linux)")
    s = Serve(tiny_ckpt, tmp_path, *FLAGS).wait_ready()
    held: list[socket.socket] = []
    try:
        # something else took the descriptors: the limit drops to 40 above what the server has open
        in_use = len(os.listdir(f"/proc/{s.proc.pid}/fd"))
        resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (in_use + 40, FILES[1]))
        mark = len(s.log())
        held = open_partial_heads(s.port, 100)
        time.sleep(0.5)
        asked = time.monotonic()
        assert requests.get(f"{s.url}/health", timeout=4 * HEADER_S).status_code == 200
        assert time.monotonic() - asked < 2 * HEADER_S + 1
        for sock in held:
            wait_closed(sock, asked + 3 * HEADER_S)
        time.sleep(1)
        lines = about_connections(s.log()[mark:])
        assert 1 <= sum("accept() calls failed" in line for line in lines) <= 2, lines
        assert len(lines) < 10 and not any("Traceback" in line for line in lines), lines
    finally:
        for sock in held:
            sock.close()
        assert s.stop() == 0, s.log()


# ----------------------------------------------------------------------------- start-up checks
@pytest.mark.parametrize("flags, env, file_text, says", [
    (["--api-key", ""], None, None, "--api-key is blank"),
    (["--api-key", " k3y"], None, None, "whitespace"),
    (["--api-key", "k3y\t"], None, None, "whitespace"),
    ([], "", None, "UNIEVAL_LOCAL_API_KEY is blank"),
    ([], " k3y ", None, "whitespace"),
    ([], None, "k3y \n", "whitespace"),
    ([], None, " k3y\n", "whitespace"),
    ([], None, "   \n", "is blank"),
    ([], None, "\n", "is empty"),
])
def test_a_blank_or_padded_key_is_refused_at_start(tmp_path, monkeypatch, capsys, flags, env, file_text, says):
    from unieval_local.cli import main

    monkeypatch.delenv("UNIEVAL_LOCAL_API_KEY", raising=False)
    if env is not None:
        monkeypatch.setenv("UNIEVAL_LOCAL_API_KEY", env)
    if file_text is not None:
        (tmp_path / "key").write_text(file_text)
        flags = flags + ["--api-key-file", str(tmp_path / "key")]
    with socket.socket() as busy:  # were the key accepted, serve would stop at the busy port, not start
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(SystemExit) as exit_:
            main(["serve", "--port", str(busy.getsockname()[1]), *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


@pytest.mark.parametrize("text, key", [("k3y\n", "k3y"), ("k3y\r\n", "k3y"), ("k3y", "k3y")])
def test_a_key_file_loses_one_trailing_newline(tmp_path, monkeypatch, text, key):
    monkeypatch.delenv("UNIEVAL_LOCAL_API_KEY", raising=False)
    (tmp_path / "key").write_bytes(text.encode())
    assert api_key(argparse.Namespace(api_key=None, api_key_file=str(tmp_path / "key"))) == key


@pytest.mark.parametrize("flags, says", [
    (["--max-connections", "1000"], "does not fit under the file limit"),
    (["--header-timeout-s", "0"], "--header-timeout-s must be > 0"),
    (["--min-body-rate", "-1"], "--min-body-rate must be >= 0"),
    (["--engine", "ray", "--header-timeout-s", "3"], "--header-timeout-s: for --engine local only"),
])
def test_connection_flags_out_of_range_exit_2_before_loading(tiny_ckpt, flags, says):
    proc = subprocess.run([*SERVE, "--model", str(tiny_ckpt), "--port", str(free_port()), *flags],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, FILES))
    assert proc.returncode == 2 and says in proc.stderr and "loading" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.1", True), ("127.0.1", True), ("127.255.255.254", True), ("0x7f.1", True),
    ("2130706433", True), ("::1", True), ("[::1]", True), ("0:0:0:0:0:0:0:1", True), ("::ffff:127.0.0.1", True),
    ("localhost", True), ("LocalHost", True), ("localhost.", True),
    ("0.0.0.0", False), ("::", False), ("[::]", False), ("10.0.0.1", False), ("128.0.0.1", False),
    ("192.168.1.1", False), ("example.com", False), ("localhost.example.com", False), ("127.0.0.1 x", False),
    (" 127.0.0.1", False), ("", False), ("[127.0.0.1", False),
])
def test_every_spelling_of_loopback_counts_as_loopback(host, loopback):
    assert is_loopback(host) is loopback
