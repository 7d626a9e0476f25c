"""A newcomer's first hour: what cost time on a fresh clone, each fixed where it arises."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unieval_local.cli import EXIT_CHECKPOINT, EXIT_OK, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_without_aspect_every_aspect_that_can_run_is_scored(tmp_path, tiny_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", [{"id": "a", "target": "The cat sat. It purred.", "source": "A cat sat on a mat."},
                                        {"id": "b", "target": "A dog ran.", "source": "The dog ran home."}])
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(out)]) == EXIT_OK
    lines = read(out)
    assert list(lines[0]["scores"]) == ["coherence", "consistency", "fluency"]  # relevance needs references
    err = capsys.readouterr().err
    assert ("skipped aspect relevance (no --aspect: every aspect that can run): needs 'references'; no record has it"
            in err)
    one = tmp_path / "one.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "fluency", "--no-progress",
                 "-o", str(one)]) == EXIT_OK
    assert [x["scores"]["fluency"] for x in read(one)] == pytest.approx([x["scores"]["fluency"] for x in lines],
                                                                          abs=1e-5)


def test_the_nothing_to_score_hint_proposes_only_aspects_that_can_run(tmp_path, fake_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": " ", "source": "A document."}, {"target": "", "references": ["r"]}])
    assert main(["score", str(src), "--aspect", "coherence", "--model", str(fake_ckpt), "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no record of" in err and "These aspects can run" not in err  # every target is empty: nothing runs
    src2 = write(tmp_path / "in2.jsonl", [{"target": "A summary.", "references": ["A reference."]}])
    assert main(["score", str(src2), "--aspect", "coherence", "--model", str(fake_ckpt), "--no-progress"]) \
        == EXIT_USAGE
    assert "These aspects can run on these records: --aspect fluency --aspect relevance." in capsys.readouterr().err


def test_an_aspect_typo_fails_before_torch_is_imported(tmp_path):
    src = write(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    code = ("import sys; from unieval_local.cli import main; "
            f"rc = main(['score', {str(src)!r}, '--aspect', 'coherance']); "
            "print(rc, 'torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["2", "False"], run.stdout + run.stderr
    assert "did you mean 'coherence'?" in run.stderr


@pytest.mark.parametrize("argv, message", [
    (["--batch-tokens", "0"], "argument --batch-tokens: must be an integer >= 1, got '0'"),
    (["--attention-mib", "-1"], "argument --attention-mib: must be a number > 0, got '-1'"),
    (["--max-length", "4"], "argument --max-length: must be an integer >= 8, got '4'"),
    (["--threads", "0"], "argument --threads: must be an integer >= 1, got '0'"),
    (["--dtype", "float16"], "argument --dtype: float16 is refused: T5 activations overflow to NaN"),
])
def test_range_errors_name_the_flag(argv, message, tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": "A."}])
    with pytest.raises(SystemExit) as info:
        main(["score", str(src), *argv])
    assert info.value.code == EXIT_USAGE and message in capsys.readouterr().err


def test_dtype_help_no_longer_lists_float16(capsys):
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    out = capsys.readouterr().out
    assert "--dtype {float32,bfloat16}" in out and "{float32,bfloat16,float16}" not in out


def test_threads_are_set_when_the_model_loads(tmp_path, tiny_ckpt):
    src = write(tmp_path / "in.jsonl", [{"target": "A cat sat.", "source": "A cat sat on a mat."}])
    code = ("import torch; from unieval_local.cli import main; "
            f"rc = main(['score', {str(src)!r}, '--aspect', 'fluency', '--model', {str(tiny_ckpt)!r}, "
            "'--threads', '1', '--no-progress', '-o', '/dev/null']); print(rc, torch.get_num_threads())")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.stdout.split()[-2:] == ["0", "1"], run.stdout + run.stderr


def test_download_without_network_says_so_in_plain_words(tmp_path, capsys, monkeypatch):
    from unieval_local import checkpoints

    class NoNetwork:
        def list_files(self, repo_id, revision):
            import socket

            try:
                raise socket.gaierror(-2, "Name or service not known")
            except OSError as exc:
                raise ConnectionError("cannot connect") from exc

    monkeypatch.setattr(checkpoints, "HuggingFaceHubClient", NoNetwork)
    assert main(["download", "--checkpoint", "unieval-sum", "--to", str(tmp_path / "home")]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert "this machine cannot reach the Hugging Face hub (huggingface.co)" in err
    assert not (tmp_path / "home" / "unieval-sum").exists()


def test_the_not_found_error_mentions_a_generated_checkpoint(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    assert main(["score", str(src), "--aspect", "coherence", "--no-progress"]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert "python scripts/make_test_checkpoint.py out/tck --layout v1.1" in err


def test_make_test_checkpoint_works_without_the_shared_data(tmp_path):
    env = {**os.environ, "UNIEVAL_SHARED_DATA": str(tmp_path / "absent"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "tck"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_test_checkpoint.py"), str(out),
                          "--layout", "v1.1", "--evaluator", "unieval-sum"], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "config.json").read_text())["unieval_local_evaluator"] == "unieval-sum"
    from unieval_local.checkpoints import verify_checkpoint

    report = verify_checkpoint(out)[0]
    assert report.ok and any("identity: 'unieval-sum' (its config.json) is unieval-sum" in m for m in report.messages)


def test_one_query_count_labelled_in_the_cli_and_the_html_report(tmp_path, tiny_ckpt, capsys):
    long = "The committee met again. " * 400
    src = write(tmp_path / "in.jsonl", [{"id": "a", "target": "The committee met.", "source": long},
                                        {"id": "b", "target": "The committee met.", "source": long}])
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "coherence", "--evidence",
                 "--no-progress", "-o", str(out)]) == EXIT_OK
    err = capsys.readouterr().err
    assert "queries: 1 distinct (each scored once), 1 of them cut by max_length" in err  # two records, one prompt
    meta = json.loads((tmp_path / "o.jsonl.meta.json").read_text())
    assert meta["stats"]["n_queries"] == 1 and meta["stats"]["n_truncated"] == 1
    from unieval_local.html_report import build_report

    html = build_report(out, input=src)
    assert "1 of 1 distinct queries (the run&#39;s count" in html or "1 of 1 distinct queries (the run's count" in html
    (tmp_path / "o.jsonl.meta.json").unlink()
    html = build_report(out, input=src)
    assert "2 of 2 queries, counted per example and aspect" in html
