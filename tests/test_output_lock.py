"""One writer per output (OUT.lock, flock), resume's repair of duplicate records left by a
double run, merge refusing duplicates within a shard, and two exit statuses: a file-size
limit mid-run (4, as a full disk) and SIGTERM while the model loads (143)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from unieval_local.batch import merge_outputs, sidecar_path
from unieval_local.cli import EXIT_TERMINATED, EXIT_USAGE, EXIT_WRITE, main
from unieval_local.locks import OutputLockedError, lock_path_for, output_lock

EXE = shutil.which("unieval-local")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def rows(summeval_records, n: int) -> list[dict]:
    words = " ".join(r["target"] for r in summeval_records).split()
    return [{"id": f"r{i}", "target": " ".join(words[i % 500:i % 500 + 4 + i % 9]) + "."} for i in range(n)]


def score_args(ckpt, src, out, *extra) -> list[str]:
    return ["score", str(src), "--model", str(ckpt), "--aspect", "fluency", "--max-length", "48", "--no-progress",
            "-o", str(out), *extra]


def holder_of(lock: Path, timeout: float = 240) -> dict:
    """What the lock's holder wrote, once it has (waits for a starting process)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            text = lock.read_text()
            if text.strip():
                return json.loads(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"{lock} was never written")


# ----------------------------------------------------------------------------- one writer per output
def test_a_second_score_run_on_the_same_output_is_refused_naming_the_first(tmp_path, tiny_ckpt, summeval_records):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 3000))  # slow enough to be caught running
    out = tmp_path / "out.jsonl"
    first = subprocess.Popen([EXE, *score_args(tiny_ckpt, src, out)], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        holder = holder_of(lock_path_for(out))
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()
        t0 = time.time()
        second = subprocess.run([EXE, *score_args(tiny_ckpt, src, out)], env=ENV, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == EXIT_USAGE, second.stderr
        assert time.time() - t0 < 60  # refused at once (no model load, no waiting)
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert lines[0] == (f"unieval-local: error: {out} is being written by another process (pid {first.pid} on "
                            f"host {socket.gethostname()} since {holder['since']}, unieval-local score; lock "
                            f"{lock_path_for(out)}); wait for it to end or stop it, or write to another output")
        # --resume is refused the same way (it would read a file still being written)
        again = subprocess.run([EXE, *score_args(tiny_ckpt, src, out, "--resume")], env=ENV, capture_output=True,
                               text=True, timeout=120)
        assert again.returncode == EXIT_USAGE and f"pid {first.pid}" in again.stderr
        assert first.poll() is None, "the first run ended before the check"
    finally:
        first.send_signal(signal.SIGTERM)
        err = first.communicate(timeout=120)[1]
    assert first.returncode == EXIT_TERMINATED, err
    assert not lock_path_for(out).exists()  # removed at the end of the run, also after SIGTERM
    keys = [x["key"] for x in read(out)] if out.exists() else []
    assert keys == [f"r{i}" for i in range(len(keys))]  # one writer: every record once, in order


def test_report_and_merge_outputs_are_locked_too(tmp_path, tiny_ckpt, summeval_records):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 20))
    shards = [tmp_path / f"s{k}.jsonl" for k in range(2)]
    for k, shard in enumerate(shards):
        assert main(score_args(tiny_ckpt, src, shard, "--shard", f"{k}/2")) == 0
    report_in = write_jsonl(tmp_path / "r.jsonl", [{"summary": "A claim.", "input": "A document."}])
    merged, report = tmp_path / "all.jsonl", tmp_path / "report.json"
    for target, argv in ((merged, ["merge", *map(str, shards), "-o", str(merged)]),
                         (report, ["report", "--format", "summ", str(report_in), "--model", str(tiny_ckpt),
                                   "--no-progress", "-o", str(report)])):
        with output_lock(target) as held:  # this test process is the other writer
            assert held == lock_path_for(target)
            proc = subprocess.run([EXE, *argv], env=ENV, capture_output=True, text=True, timeout=300)
            assert proc.returncode == EXIT_USAGE, proc.stderr
            assert f"is being written by another process (pid {os.getpid()} on host {socket.gethostname()}" \
                in proc.stderr
            assert not target.exists()  # nothing written
        assert not lock_path_for(target).exists()
        proc = subprocess.run([EXE, *argv], env=ENV, capture_output=True, text=True, timeout=300)
        assert proc.returncode in ((0, 1) if target == report else (0,)), proc.stderr  # 1: a report error row
        assert target.exists() and not lock_path_for(target).exists()
    with output_lock(merged), pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
        merge_outputs(shards, merged, force=True)  # the Python API is refused too


def test_a_lock_left_by_a_killed_process_does_not_block(tmp_path, tiny_ckpt, summeval_records):
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(f"""
        import time
        from unieval_local.locks import output_lock
        with output_lock({str(out)!r}):
            print("locked", flush=True)
            time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    assert child.stdout.readline().strip() == "locked"
    assert holder_of(lock_path_for(out))["pid"] == child.pid
    with pytest.raises(OutputLockedError, match=f"pid {child.pid}"):
        with output_lock(out):
            pass
    child.send_signal(signal.SIGKILL)  # a preempted job: no cleanup ran
    child.wait()
    assert lock_path_for(out).exists()  # the stale file is still there ...
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 10))
    assert main(score_args(tiny_ckpt, src, out)) == 0  # ... but the kernel released its lock
    assert len(read(out)) == 10 and not lock_path_for(out).exists()


def test_the_lock_follows_the_file_when_the_previous_holder_removed_it(tmp_path, monkeypatch):
    """Between our open() and our flock() the previous holder may unlink the lock file (end of its
    run) and a third process create a new one: we must then lock the file the path names now."""
    import fcntl

    out = tmp_path / "out.jsonl"
    lock = lock_path_for(out)
    real_flock = fcntl.flock
    calls = []

    def flock(fd, op):
        if not calls:  # the first attempt: the file we opened is unlinked and replaced meanwhile
            os.unlink(lock)
            lock.write_text("")
        calls.append(os.fstat(fd).st_ino)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    with output_lock(out):
        assert len(calls) == 2 and calls[1] == lock.stat().st_ino  # retried on the new file, and holds it
        monkeypatch.setattr(fcntl, "flock", real_flock)
        probe = subprocess.run([sys.executable, "-c", f"from unieval_local.locks import output_lock\n"
                                f"with output_lock({str(out)!r}): pass"], capture_output=True, text=True, env=ENV)
        assert probe.returncode != 0 and "OutputLockedError" in probe.stderr
    assert not lock.exists()


@pytest.mark.smoke
def test_streams_take_no_lock(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 3))
    assert main(score_args(tiny_ckpt, src, "/dev/null")) == 0
    assert main(score_args(tiny_ckpt, src, "-")) == 0
    assert not Path("/dev/null.lock").exists() and not Path("-.lock").exists()
    with output_lock(None) as a, output_lock("-") as b, output_lock("/dev/null") as c:
        assert (a, b, c) == (None, None, None)


# ----------------------------------------------------------------------------- duplicates left by a double run
def test_resume_repairs_interleaved_duplicates_of_a_double_run(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 600))  # requests of 250, 250, 100
    ref = tmp_path / "ref.jsonl"
    assert main(score_args(tiny_ckpt, src, ref)) == 0
    lines = ref.read_text().splitlines(keepends=True)

    def spoiled(chunk):  # the later copies carry other values: the repair must keep the first
        out = []
        for line in chunk:
            rec = json.loads(line)
            rec["scores"]["fluency"] = -1.0
            out.append(json.dumps(rec) + "\n")
        return out

    # two runs on one OUT before the lock: A and B each wrote requests 1 and 2, interleaved; A's
    # third request never came (killed), and B stopped in the middle of its second
    out = tmp_path / "out.jsonl"
    out.write_text("".join(lines[:250] + spoiled(lines[:250]) + lines[250:500] + spoiled(lines[250:400])))
    shutil.copy(sidecar_path(ref), sidecar_path(out))
    capsys.readouterr()
    assert main(score_args(tiny_ckpt, src, out, "--resume")) == 0
    err = capsys.readouterr().err
    assert err.count("duplicate record line(s)") == 1 and "dropped 400 duplicate record line(s)" in err, err
    got = read(out)
    assert [x["index"] for x in got] == list(range(600))  # each record once, in input order
    want = {x["key"]: x for x in read(ref)}
    assert all(abs(x["scores"]["fluency"] - want[x["key"]]["scores"]["fluency"]) < 1e-5 for x in got)
    assert "".join(out.read_text().splitlines(keepends=True)[:500]) == "".join(lines[:500])  # kept byte for byte
    assert json.loads(sidecar_path(out).read_text())["progress"]["written"] == 600


def test_merge_refuses_duplicates_within_one_shard_until_it_is_resumed(tmp_path, tiny_ckpt, summeval_records,
                                                                       capsys):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 40))
    shards = [tmp_path / f"s{k}.jsonl" for k in range(2)]
    for k, shard in enumerate(shards):
        assert main(score_args(tiny_ckpt, src, shard, "--shard", f"{k}/2")) == 0
    with shards[0].open("a") as fh:  # a double run of shard 0
        fh.write("".join(shards[0].read_text().splitlines(keepends=True)[:5]))
    merged = tmp_path / "all.jsonl"
    capsys.readouterr()
    assert main(["merge", *map(str, shards), "-o", str(merged)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"is twice in {shards[0]} (two runs wrote it at once: rerun that shard with --resume" in err, err
    assert not merged.exists() and not lock_path_for(merged).exists()
    assert main(score_args(tiny_ckpt, src, shards[0], "--shard", "0/2", "--resume")) == 0
    assert main(["merge", *map(str, shards), "-o", str(merged)]) == 0
    assert [x["index"] for x in read(merged)] == list(range(40))


# ----------------------------------------------------------------------------- exit statuses
def run_capped(argv, limit: int) -> subprocess.CompletedProcess:
    """``unieval-local ARGV`` with a file-size limit of ``limit`` bytes (RLIMIT_FSIZE, ``ulimit -f``):
    a write past it fails with EFBIG (Python ignores SIGXFSZ)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([EXE, *argv], env=ENV, capture_output=True, text=True, timeout=300, preexec_fn=cap)


def test_a_file_size_limit_mid_run_exits_4_with_the_resume_advice(tmp_path, tiny_ckpt, summeval_records):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 750))  # 3 requests of 250
    out = tmp_path / "out.jsonl"
    ref = tmp_path / "ref.jsonl"
    assert main(score_args(tiny_ckpt, src, ref)) == 0
    sizes = [len("".join(ref.read_text().splitlines(keepends=True)[:k]).encode()) for k in (500, 750)]
    limit = sizes[1] - 2000  # requests 1 and 2 fit; request 3 fails near its end (before: exit 2, a bare OSError)
    assert limit > sizes[0]
    proc = run_capped(score_args(tiny_ckpt, src, out), limit)
    assert proc.returncode == EXIT_WRITE, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"unieval-local: error: writing {out} failed: File too large; the records written before are "
                    "intact; raise the file-size limit (ulimit -f) or write to another file system and rerun with "
                    "--resume"), proc.stderr
    assert "Traceback" not in proc.stderr and not lock_path_for(out).exists()
    assert sizes[0] <= out.stat().st_size <= limit
    assert main(score_args(tiny_ckpt, src, out, "--resume")) == 0  # the torn line repaired, the rest scored
    got = read(out)
    assert [x["index"] for x in got] == list(range(750))
    want = {x["key"]: x["scores"]["fluency"] for x in read(ref)}
    assert all(abs(x["scores"]["fluency"] - want[x["key"]]) < 1e-5 for x in got)


def test_a_failed_sidecar_write_exits_4_too(tmp_path, tiny_ckpt, summeval_records):
    src = write_jsonl(tmp_path / "in.jsonl", rows(summeval_records, 5))
    out = tmp_path / "out.jsonl"
    proc = run_capped(score_args(tiny_ckpt, src, out), 1000)  # the sidecar (about 2 kB) does not fit
    assert proc.returncode == EXIT_WRITE, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"unieval-local: error: writing {sidecar_path(out)} failed: File too large; the records written before "
        "are intact; raise the file-size limit (ulimit -f)"), proc.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left
    assert main(score_args(tiny_ckpt, src, out, "--resume")) == 0
    assert len(read(out)) == 5


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a SIGTERM handler installed (bit 15 of SigCgt in /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see the handler installed")
def test_sigterm_while_the_model_loads_exits_143(tmp_path, tiny_ckpt):
    """Deterministic: SIGTERM is sent as soon as `score` installs its handler (seen in /proc),
    which is before torch is imported and the model loaded, so before any record."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "target": "A fine sentence."}])
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([EXE, *score_args(tiny_ckpt, src, out)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _catches_sigterm(proc.pid):
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before SIGTERM"
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == EXIT_TERMINATED, err
    assert err.strip().splitlines()[-1] == "unieval-local: terminated (SIGTERM) before any record was written"
    assert not out.exists() or out.read_text() == ""
    with output_lock(out):  # not held any more (the file itself may stay if SIGTERM hit the locking)
        pass
