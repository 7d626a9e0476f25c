"""A batch run gives back each record as soon as its last query is scored (issue 28, item 1): its
output grows record by record, an interrupt (SIGINT, SIGTERM) keeps every record that was
complete with the exit status unchanged, ``--resume`` finishes it, and repeated runs with the same
settings write the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_batch import args, by_key, read, same_scores, small_records, write_jsonl
from unieval_local.batch import errors_path, run_batch
from unieval_local.cli import main

CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_keeps_every_complete_record_and_resume_finishes(tmp_path, tiny_ckpt, summeval_records,
                                                                           sig, status):
    rows = small_records(summeval_records, 600)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([*CLI, "score", str(src), *args(tiny_ckpt, "--batch-tokens", "256"), "-o", str(out)],
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = out.read_text().count("\n") if out.exists() else 0
        if seen >= 1:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    assert 1 <= seen < 250  # records come out one by one, not a 250-record pass at a time
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    kept = read(out)  # every line whole: nothing torn
    assert seen <= len(kept) < 600
    assert f"{len(kept)} of 600 records" in err
    assert main(["score", str(src), *args(tiny_ckpt, "--batch-tokens", "256"), "-o", str(out), "--resume"]) == 0
    final = read(out)
    assert len(final) == 600 and len({x["key"] for x in final}) == 600
    reference = tmp_path / "ref.jsonl"
    assert main(["score", str(src), *args(tiny_ckpt, "--batch-tokens", "256"), "-o", str(reference)]) == 0
    same_scores(by_key(final), by_key(read(reference)))


def test_repeated_runs_with_the_same_settings_are_byte_identical(tmp_path, tiny_ckpt, summeval_records):
    rows = small_records(summeval_records, 300)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}.jsonl"
        assert main(["score", str(src), *args(tiny_ckpt, "--batch-tokens", "512"), "-o", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    lines = [json.loads(x) for x in outs[0].decode().splitlines()]
    assert [x["index"] for x in lines] == list(range(300))  # in input order


@pytest.mark.parametrize("output_format", ["records", "hosted"])
def test_records_answered_at_once_never_end_the_run_early(tmp_path, tiny_ckpt, summeval_records, output_format):
    # the first 600 records are refused when they are planned (an empty target): every record in
    # flight is answered without a model query, and the run must go on to the rest
    rows = [{"id": f"bad{i}", "target": ""} for i in range(600)]
    rows += [dict(r, id=f"ok{i}") for i, r in enumerate(summeval_records[:12])]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    summary = run_batch(src, out, aspects=["fluency"], output_format=output_format,
                        settings={"model": str(tiny_ckpt), "max_length": 48}, progress=False)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert summary.n_records == 612
    if output_format == "hosted":  # requests of 250, 250 and 112 examples; each holds a refused one
        assert lines == []  # refused requests' error lines go to the errors file
        errors = [json.loads(x) for x in errors_path(out).read_text().splitlines()]
        assert [x["error"]["n_examples"] for x in errors] == [250, 250, 112]
    else:
        assert summary.n_failed == 600
        assert len(lines) == 612 and sum("scores" in x for x in lines) == 12
        assert {x["key"] for x in lines if "scores" in x} == {f"ok{i}" for i in range(12)}
