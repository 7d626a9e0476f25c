"""Offline batch runs: kill and resume, torn lines, mismatches, write errors, shards and merge,
bad rows, and the Ray engine (same output as the local engine)."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from unieval_local import batch as batch_mod
from unieval_local.batch import MergeError, ResumeError, merge_outputs, run_batch, shard_of, sidecar_path
from unieval_local.cli import EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_WRITE, main

EXE = shutil.which("unieval-local")


def small_records(summeval_records, n):
    words = " ".join(r["target"] for r in summeval_records).split()
    out = []
    for i in range(n):
        start = (i * 7) % (len(words) - 12)
        out.append({"id": f"r{i}", "target": " ".join(words[start:start + 4 + i % 9]) + ".", "system_id": f"S{i % 3}"})
    return out


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def args(ckpt, *extra):
    return ["--model", str(ckpt), "--aspect", "fluency", "--max-length", "48", "--no-progress", *extra]


def by_key(lines):
    return {x["key"]: x for x in lines}


def same_scores(a, b, tol=1e-5):  # float32 batch-composition noise; the contract tolerance
    assert set(a) == set(b)
    for k in a:
        if "scores" in a[k]:
            assert abs(a[k]["scores"]["fluency"] - b[k]["scores"]["fluency"]) < tol, k
        else:
            assert a[k]["error"] == b[k]["error"]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, tiny_ckpt, summeval_records):
    tmp = tmp_path_factory.mktemp("ref")
    src = write_jsonl(tmp / "in.jsonl", small_records(summeval_records, 2000))
    out = tmp / "ref.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == 0
    return src, read(out)


def test_sigkill_midway_then_resume_gives_every_record_once(tmp_path, tiny_ckpt, reference_run):
    src, ref = reference_run
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([EXE, "score", str(src), *args(tiny_ckpt), "-o", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 500:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = out.read_text().count("\n")
    assert 500 <= partial < 2000
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == EXIT_USAGE  # exists: needs --resume
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out), "--resume"]) == 0
    lines = read(out)
    assert len(lines) == 2000 and len({x["key"] for x in lines}) == 2000
    same_scores(by_key(lines), by_key(ref))
    meta = json.loads(sidecar_path(out).read_text())
    assert meta["progress"]["complete"] and meta["progress"]["written"] == 2000


def test_torn_last_line_is_repaired_on_resume(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", small_records(summeval_records, 30))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == 0
    full = read(out)
    data = out.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) - 1) + 25  # keep 25 bytes of the last line: torn
    out.write_bytes(data[:cut])
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out), "--resume"]) == 0
    assert "repaired a torn last line" in capsys.readouterr().err
    same_scores(by_key(read(out)), by_key(full))
    assert len(read(out)) == 30


def test_resume_refuses_another_run_or_changed_input(tmp_path, tiny_ckpt, summeval_records, capsys):
    rows = small_records(summeval_records, 20)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == 0
    before = out.read_bytes()
    assert main(["score", str(src), *args(tiny_ckpt, "--max-length", "40"), "-o", str(out), "--resume"]) == EXIT_USAGE
    assert "refusing to resume" in capsys.readouterr().err
    write_jsonl(src, rows + [{"id": "new", "target": "A new one."}])
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out), "--resume"]) == EXIT_USAGE
    assert "input file changed" in capsys.readouterr().err
    assert out.read_bytes() == before  # nothing touched


def test_disk_full_keeps_earlier_results_and_resume_finishes(tmp_path, tiny_ckpt, summeval_records, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", small_records(summeval_records, 600))
    out = tmp_path / "out.jsonl"
    real = batch_mod.OutputWriter.write
    calls = []

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def flaky(self, lines):
        calls.append(len(lines))
        if len(calls) == 251:  # each record is written as soon as it is scored: the 251st fails
            self._fh = FullDisk(self._fh)
        return real(self, lines)

    monkeypatch.setattr(batch_mod.OutputWriter, "write", flaky)
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == EXIT_WRITE
    assert "No space left on device" in capsys.readouterr().err
    assert len(read(out)) == 250  # the first request is intact
    monkeypatch.setattr(batch_mod.OutputWriter, "write", real)
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out), "--resume"]) == 0
    assert sorted(x["index"] for x in read(out)) == list(range(600))


def test_shards_merge_to_the_unsharded_run(tmp_path, tiny_ckpt, summeval_records, capsys):
    rows = small_records(summeval_records, 120)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    full = tmp_path / "full.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(full)]) == 0
    shards = []
    for k in range(3):
        shards.append(tmp_path / f"s{k}.jsonl")
        assert main(["score", str(src), *args(tiny_ckpt), "--shard", f"{k}/3", "-o", str(shards[-1])]) == 0
        assert all(shard_of(x["key"], 3) == k for x in read(shards[-1]))
    assert sum(len(read(p)) for p in shards) == 120
    merged = tmp_path / "all.jsonl"
    assert main(["merge", *map(str, shards), "-o", str(merged)]) == 0
    assert "scored 120 of 120" in capsys.readouterr().err
    assert [x["index"] for x in read(merged)] == list(range(120))
    same_scores(by_key(read(merged)), by_key(read(full)))
    with pytest.raises(MergeError, match="missing shard"):
        merge_outputs(shards[:2], tmp_path / "x.jsonl")
    with pytest.raises(MergeError, match="given more than once"):
        merge_outputs([shards[0], shards[0], shards[1], shards[2]], tmp_path / "x.jsonl")
    assert main(["merge", str(shards[0]), str(full), "-o", str(tmp_path / "x.jsonl")]) == EXIT_USAGE
    assert not (tmp_path / "x.jsonl").exists()


BAD_ROWS = [
    ("{not json", "InvalidJSON", "not valid JSON"),
    ('"a string"', "InvalidExample", "must be an object"),
    ('{"id": "m"}', "InvalidExample", "field 'target'"),
    ('{"id": "e", "target": "   ", "source": "s"}', "InvalidExample", "empty or whitespace-only"),
    ('{"id": "t", "target": 5}', "InvalidExample", "valid string"),
    ('{"id": "s", "target": "Fine."}', "InvalidExample", "needs 'source'"),
]


def test_each_bad_row_gets_its_error_record_and_the_rest_is_scored(tmp_path, tiny_ckpt):
    good = '{"id": "g%d", "target": "A fine sentence %d.", "source": "A source."}'
    lines = []
    for i, (row, _, _) in enumerate(BAD_ROWS):
        lines += [good % (i, i), row]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    rc = main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--aspect", "coherence",
               "--no-progress", "-o", str(out)])
    assert rc == EXIT_ROWS_FAILED
    res = read(out)
    assert len(res) == 2 * len(BAD_ROWS)
    for i, (_, kind, message) in enumerate(BAD_ROWS):
        assert "scores" in res[2 * i] and res[2 * i]["key"] == f"g{i}"
        err = res[2 * i + 1]["error"]
        assert err["type"] == kind and message in err["message"], err


def test_run_batch_from_python(tmp_path, tiny_ckpt, summeval_records):
    src = write_jsonl(tmp_path / "in.jsonl", summeval_records[:6])
    summary = run_batch(src, tmp_path / "o.jsonl", task="summarization", aspects="all",
                        settings={"model": str(tiny_ckpt)}, progress=False)
    assert summary.n_records == 6 and summary.n_failed == 0 and set(summary.means) == {
        "coherence", "consistency", "fluency", "relevance"}
    with pytest.raises(ResumeError, match="already exists"):
        run_batch(src, tmp_path / "o.jsonl", settings={"model": str(tiny_ckpt)}, progress=False)


@pytest.mark.ray
def test_ray_engine_equals_local_engine_including_kill_and_resume(tmp_path, tiny_ckpt, summeval_records):
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[test,ray]'")
    rows = small_records(summeval_records, 1500)  # 6 requests: the kill lands while results stream back
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    local, viaray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(local)]) == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_DEDUP_LOGS": "0"}
    cmd = [EXE, "score", str(src), *args(tiny_ckpt), "-o", str(viaray), "--engine", "ray", "--ray-actors", "1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if viaray.exists() and viaray.read_text().count("\n") >= 250:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the Ray run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 250 <= viaray.read_text().count("\n") < 1500
    subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], capture_output=True, timeout=120)
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = read(viaray)
    assert len(lines) == 1500 and len({x["key"] for x in lines}) == 1500
    same_scores(by_key(lines), by_key(read(local)))


def test_duplicate_ids_get_error_records_and_resume_stays_exact(tmp_path, tiny_ckpt, summeval_records):
    rows = small_records(summeval_records, 300)
    rows[280]["id"] = rows[10]["id"]  # a repeated id
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == EXIT_ROWS_FAILED
    full = read(out)
    assert len(full) == 300 and full[280]["error"]["type"] == "DuplicateKey" and "first at record 10" in full[280]["error"]["message"]
    data = out.read_bytes()  # as if killed after the first request
    out.write_bytes(b"".join(data.splitlines(keepends=True)[:250]))
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out), "--resume"]) == EXIT_ROWS_FAILED
    again = read(out)
    assert sorted(x["index"] for x in again) == list(range(300))
    for k in (0, 1):
        shard = tmp_path / f"d{k}.jsonl"
        main(["score", str(src), *args(tiny_ckpt), "--shard", f"{k}/2", "-o", str(shard)])
    assert main(["merge", str(tmp_path / "d0.jsonl"), str(tmp_path / "d1.jsonl"), "-o", str(tmp_path / "m.jsonl")]) == 0
    assert main(["merge", str(tmp_path / "d0.jsonl"), str(tmp_path / "d1.jsonl"), "-o", str(tmp_path / "m.jsonl")]) == EXIT_USAGE
    assert len(read(tmp_path / "m.jsonl")) == 300


def test_resume_refusal_names_the_setting_that_differs(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", small_records(summeval_records, 10))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", str(src), *args(tiny_ckpt, "--max-length", "40"), "-o", str(out), "--resume"]) == EXIT_USAGE
    assert "max_length: 48 -> 40" in capsys.readouterr().err
    summary = run_batch(src, tmp_path / "one.jsonl", aspects="fluency", settings={"model": str(tiny_ckpt)},
                        progress=False)
    assert summary.aspects == ["fluency"]


@pytest.mark.ray
def test_a_ray_run_loads_the_model_once_per_actor_and_never_in_the_driver(tmp_path, tiny_ckpt, summeval_records):
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[test,ray]'")
    from unieval_local.models.t5 import runner as runner_mod

    ckpt = tmp_path / "copy" / "unieval-sum"  # a folder no other test has loaded in this process
    shutil.copytree(tiny_ckpt, ckpt)
    rows = small_records(summeval_records, 1600)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    summary = run_batch(src, tmp_path / "ray.jsonl", aspects=["fluency"], settings={"model": str(ckpt), "max_length": 48},
                        engine="ray", engine_options={"actors": 2}, progress=False)
    assert summary.n_records == 1600 and summary.n_failed == 0
    assert summary.stats.model_loads == 2  # 7 requests on one pipeline: one model load in each of the 2 actors
    assert not [k for k in runner_mod._MODELS if k[0] == str(ckpt.resolve())]  # the driver loaded none
    local = run_batch(src, tmp_path / "local.jsonl", aspects=["fluency"],
                      settings={"model": str(ckpt), "max_length": 48}, progress=False)
    assert local.stats.model_loads == 1
    same_scores(by_key(read(tmp_path / "ray.jsonl")), by_key(read(tmp_path / "local.jsonl")))


def test_one_signature_per_run_and_the_sidecar_says_what_ran(tmp_path, fake_ckpt):
    """Issue 29: the signature printed, the sidecar's and the HTML report's are one string (the
    languages the records were read in, not lang:auto), while --resume still compares the run
    identity; the sidecar's run_info counts the micro-batches and distinct queries that ran."""
    from conftest import FakeRunner, fake_factory
    from unieval_local.analysis.html_report import build_report

    runner = FakeRunner(lambda p: (len(p) % 89) / 89)
    settings = dict(model=fake_ckpt, runner_factory=fake_factory(runner))
    rows = [{"id": i, "target": f"The cat number {i} sat.", "source": "The cat sat on the mat."} for i in range(7)]
    rows.append(dict(rows[0], id="again"))  # its queries repeat record 0's: scored once
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o.jsonl"
    summary = run_batch(src, out, aspects=["coherence", "fluency"], settings=settings, progress=False)
    meta = json.loads(sidecar_path(out).read_text())
    assert summary.signature == meta["signature"] and "|lang:en|" in meta["signature"]
    assert "lang:auto" not in meta["signature"]
    assert meta["signature"] in build_report(out)  # the HTML report shows the one the run printed
    info = meta["run_info"]
    assert info["forward_passes"] == len(runner.calls) >= 1 and summary.run_info == info
    assert info["distinct_queries"] == len(set(runner.prompts)) == len(runner.prompts) == 14  # 7 records x 2
    assert info["wall_s"] > 0 and info["cpu_s"] > 0
    more = write_jsonl(tmp_path / "more.jsonl", rows + [{"id": 99, "target": "A dog.", "source": "A dog ran."}])
    shutil.copy(out, tmp_path / "m.jsonl")
    shutil.copy(sidecar_path(out), sidecar_path(tmp_path / "m.jsonl"))
    with pytest.raises(ResumeError, match="input file changed"):  # the identity is compared, not the signature
        run_batch(more, tmp_path / "m.jsonl", aspects=["coherence", "fluency"], settings=settings, resume=True,
                  progress=False)
    again = run_batch(src, out, aspects=["coherence", "fluency"], settings=settings, resume=True, progress=False)
    assert again.signature == meta["signature"] and again.run_info["forward_passes"] == 0
