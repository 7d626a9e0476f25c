"""The CLI end to end on real data with the generated checkpoint."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.cli import EXIT_CHECKPOINT, EXIT_ROWS_FAILED, EXIT_USAGE, main
from unieval_local.records import iter_records

ASPECTS = ["coherence", "consistency", "fluency", "relevance"]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def aspect_args():
    return [x for a in ASPECTS for x in ("--aspect", a)]


def test_score_summeval_all_aspects(tmp_path, tiny_ckpt, summeval_records, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", summeval_records)
    out = tmp_path / "out.jsonl"
    rc = main(["score", str(src), "--model", str(tiny_ckpt), *aspect_args(), "-o", str(out), "--no-progress"])
    assert rc == 0
    lines = read_jsonl(out)
    assert [x["index"] for x in lines] == list(range(48))
    assert [x["key"] for x in lines] == [r["id"] for r in summeval_records]
    assert [x["system_id"] for x in lines] == [r["system_id"] for r in summeval_records]
    assert [x["doc_id"] for x in lines] == [r["doc_id"] for r in summeval_records]
    api = Scorer(model=tiny_ckpt)
    for a in ASPECTS:
        want = [e.value for e in api.score(summeval_records, aspect=a).examples]
        got = [x["scores"][a] for x in lines]
        assert np.abs(np.array(got) - np.array(want)).max() < 1e-5  # other batches: float32 noise
    err = capsys.readouterr().err
    assert "scored 48 of 48 records (0 failed)" in err
    assert "per system" in err and "\nM23 " in err and err.index("\nM5 ") < err.index("\nM22 ") and "signature: unieval-local:" in err
    mean_coh = np.mean([x["scores"]["coherence"] for x in lines])
    row = next(line for line in err.splitlines() if line.startswith("coherence"))
    assert row.split() == ["coherence", "48", f"{mean_coh:.6f}"]


@pytest.mark.smoke
def test_bad_rows_get_error_records_and_the_rest_is_scored(tmp_path, tiny_ckpt, summeval_records):
    good = summeval_records[:6]
    src = tmp_path / "in.jsonl"
    lines = [json.dumps(good[0]), json.dumps({**good[1], "target": "  "}), "{not json",
             json.dumps(good[2]), json.dumps({"id": "x", "target": "only"}), "", json.dumps(good[3])]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    rc = main(["score", str(src), "--model", str(tiny_ckpt), *aspect_args(), "-o", str(out), "--no-progress"])
    assert rc == EXIT_ROWS_FAILED
    res = read_jsonl(out)
    assert [r["index"] for r in res] == [0, 1, 2, 3, 4, 5]
    assert [("error" in r) for r in res] == [False, True, True, False, True, False]
    assert res[2]["error"]["type"] == "InvalidJSON"
    assert "field 'target'" in res[1]["error"]["message"]
    assert res[4]["key"] == "x" and "needs 'source'" in res[4]["error"]["message"]
    assert "needs 'references'" in res[4]["error"]["message"]
    clean = tmp_path / "clean.jsonl"
    main(["score", str(write_jsonl(tmp_path / "c.jsonl", [good[0], good[2], good[3]])), "--model",
          str(tiny_ckpt), *aspect_args(), "-o", str(clean), "--no-progress"])
    ref = read_jsonl(clean)
    assert [r["scores"] for r in (res[0], res[3], res[5])] == [r["scores"] for r in ref]


def test_unieval_json_file_loads_as_is(tmp_path, tiny_ckpt, shared_data):
    path = shared_data / "unieval-reproduce" / "data" / "fact" / "qags_cnndm.json"
    records = list(iter_records(str(path)))
    assert len(records) == 235 and "system_output" in records[0].data
    out = tmp_path / "out.jsonl"
    rc = main(["score", str(path), "--model", str(tiny_ckpt), "--aspect", "consistency", "--max-length", "96",
               "-o", str(out), "--no-progress"])
    assert rc == 0
    res = read_jsonl(out)
    assert len(res) == 235 and res[0]["doc_id"] == records[0].data["doc_id"]
    assert all(0 < r["scores"]["consistency"] < 1 for r in res)


def test_more_than_250_records_are_split_into_requests(tmp_path, tiny_ckpt, summeval_records):
    recs = [{"id": f"r{i}", "target": summeval_records[i % 48]["target"]} for i in range(260)]
    out = tmp_path / "out.jsonl"
    rc = main(["score", str(write_jsonl(tmp_path / "in.jsonl", recs)), "--model", str(tiny_ckpt),
               "--aspect", "fluency", "--max-length", "64", "-o", str(out), "--no-progress"])
    assert rc == 0
    res = read_jsonl(out)
    assert len(res) == 260 and res[259]["key"] == "r259"
    # same target, same score across requests (to float32 batch noise)
    assert abs(res[259]["scores"]["fluency"] - res[259 - 48 * 5]["scores"]["fluency"]) < 1e-5


@pytest.mark.smoke
def test_exit_statuses(tmp_path, tiny_ckpt, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "t", "source": "s"}])
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "novelty"]) == EXIT_USAGE
    assert "valid aspects" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "missing.jsonl"), "--model", str(tiny_ckpt)]) == EXIT_USAGE
    with pytest.raises(SystemExit) as refused:  # argparse refuses it, naming the flag
        main(["score", str(src), "--model", str(tiny_ckpt), "--dtype", "float16"])
    assert refused.value.code == EXIT_USAGE
    assert "float16 is refused" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("\n")
    assert main(["score", str(tmp_path / "empty.jsonl"), "--model", str(tiny_ckpt)]) == EXIT_USAGE
    assert "holds no records" in capsys.readouterr().err
    assert main(["score", str(src), "--model", str(tiny_ckpt), "-o", str(tmp_path / "no" / "dir.jsonl")]) == EXIT_USAGE
    assert "cannot write the output" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("a,b\n")
    assert main(["score", str(tmp_path / "x.csv"), "--model", str(tiny_ckpt)]) == EXIT_USAGE
    import torch

    if not torch.cuda.is_available():
        assert main(["score", str(src), "--model", str(tiny_ckpt), "--device", "cuda"]) == EXIT_USAGE
        assert "no CUDA device" in capsys.readouterr().err
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    assert main(["score", str(src), "--offline"]) == EXIT_CHECKPOINT
    assert "unieval-local download" in capsys.readouterr().err


def test_console_script(tmp_path, tiny_ckpt, summeval_records):
    exe = shutil.which("unieval-local")
    assert exe, "the console script is not installed (pip install -e .)"
    src = write_jsonl(tmp_path / "in.jsonl", summeval_records[:3])
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([exe, "score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3
    assert "scored 3 of 3 records" in proc.stderr
    helptext = subprocess.run([exe, "score", "--help"], capture_output=True, text=True, timeout=120).stdout
    assert "--aspect" in helptext and "Exit status" in " ".join(helptext.split())
    full = subprocess.run([exe, "score", "--help-all"], capture_output=True, text=True, timeout=120).stdout
    assert "summarization: coherence, consistency, fluency," in " ".join(full.split())  # the whole --aspect help
