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
        main(["score", "--help-all"])  # --dtype is among the flags --help-all lists
    out = capsys.readouterr().out
    assert "--dtype {auto,float32,bfloat16}" in out and ",float16}" not in out


def test_threads_are_set_when_the_model_loads(tmp_path, tiny_ckpt):
    src = write(tmp_path / "in.jsonl", [{"target": "A cat sat.", "source": "A cat sat on a mat."}])
    code = ("import torch; from unieval_local.cli import main; "
            f"rc = main(['score', {str(src)!r}, '--aspect', 'fluency', '--model', {str(tiny_ckpt)!r}, "
            "'--threads', '1', '--no-progress', '-o', '/dev/null']); print(rc, torch.get_num_threads())")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.stdout.split()[-2:] == ["0", "1"], run.stdout + run.stderr
    assert "|device:cpu|threads:1|" in run.stderr  # signed


def test_threads_are_signed_but_never_keyed_and_a_resume_may_change_them(tmp_path, tiny_ckpt):
    from unieval_local import Scorer
    from unieval_local.batch import run_batch

    rec = [{"target": "A cat sat. It slept.", "source": "A cat sat on a mat."}]
    one = Scorer(model=str(tiny_ckpt), device="cpu", threads=1, cache_dir=str(tmp_path / "cache"))
    first = one.score(rec, task="summarization", aspect="consistency")
    sig = str(one.signature("summarization", "consistency"))
    assert "|threads:1|" in sig and "|tok:" in sig  # a cached runner says what it wraps
    two = Scorer(model=str(tiny_ckpt), device="cpu", threads=2, cache_dir=str(tmp_path / "cache"))
    again = two.score(rec, task="summarization", aspect="consistency")
    assert again.examples[0].value == first.examples[0].value  # answered from the cache: not keyed by threads
    assert "|threads:2|" in str(two.signature("summarization", "consistency"))
    src = write(tmp_path / "in.jsonl", [{"id": i, "target": f"A cat sat {i} times.", "source": "A mat."}
                                        for i in range(6)])
    out = tmp_path / "o.jsonl"
    run_batch(src, out, aspects=["fluency"], settings={"model": str(tiny_ckpt), "threads": 1}, progress=False)
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:3]))  # as if stopped after 3 records
    resumed = run_batch(src, out, aspects=["fluency"], settings={"model": str(tiny_ckpt), "threads": 2},
                        resume=True, progress=False)
    assert resumed.n_skipped == 3 and len(out.read_text().splitlines()) == 6


def test_download_without_network_says_so_in_plain_words(tmp_path, capsys, monkeypatch):
    from unieval_local.models import download

    class NoNetwork:
        def list_files(self, repo_id, revision):
            import socket

            try:
                raise socket.gaierror(-2, "Name or service not known")
            except OSError as exc:
                raise ConnectionError("cannot connect") from exc

    monkeypatch.setattr(download, "HuggingFaceHubClient", NoNetwork)
    assert main(["download", "--checkpoint", "unieval-sum", "--to", str(tmp_path / "home")]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert "this machine cannot reach the Hugging Face hub (huggingface.co)" in err
    assert not (tmp_path / "home" / "unieval-sum").exists()


def test_the_not_found_error_mentions_a_generated_checkpoint(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": "A.", "source": "B."}])
    assert main(["score", str(src), "--aspect", "coherence", "--no-progress"]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert "python scripts/make_test_checkpoint.py out/home/unieval-sum --layout v1.1 --evaluator unieval-sum" in err


def test_make_test_checkpoint_works_without_the_shared_data(tmp_path):
    env = {**os.environ, "UNIEVAL_SHARED_DATA": str(tmp_path / "absent"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "tck"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_test_checkpoint.py"), str(out),
                          "--layout", "v1.1", "--evaluator", "unieval-sum"], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "config.json").read_text())["unieval_local_evaluator"] == "unieval-sum"
    from unieval_local.models.verify import verify_checkpoint

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
    from unieval_local.analysis.html_report import build_report

    html = build_report(out, input=src)
    assert "1 of 1 distinct queries (the run&#39;s count" in html or "1 of 1 distinct queries (the run's count" in html
    (tmp_path / "o.jsonl.meta.json").unlink()
    html = build_report(out, input=src)
    assert "2 of 2 queries, counted per example and aspect" in html


# ----------------------------------------------------------------------------- a fresh-user trial's findings
def test_resume_and_merge_compare_checkpoint_content_not_how_its_path_is_spelled(tmp_path, tiny_ckpt, monkeypatch):
    import shutil

    rows = [{"id": f"r{i}", "target": f"Claim {i} holds.", "source": "A document."} for i in range(6)]
    src = write(tmp_path / "in.jsonl", rows)
    copy = tmp_path / "elsewhere" / "unieval-sum"
    shutil.copytree(tiny_ckpt, copy)
    out = tmp_path / "o.jsonl"
    base = ["score", str(src), "--aspect", "fluency", "--no-progress", "-o", str(out)]
    assert main([*base, "--model", str(tiny_ckpt)]) == EXIT_OK
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:3]) + "\n")  # a run that stopped after 3 records
    monkeypatch.chdir(tiny_ckpt.parent)
    assert main([*base, "--model", "unieval-sum", "--resume"]) == EXIT_OK  # relative spelling, same content
    assert main([*base[:-2], "-o", str(tmp_path / "c.jsonl"), "--model", str(copy)]) == EXIT_OK
    resumed = [json.loads(x)["scores"]["fluency"] for x in out.read_text().splitlines()]
    copied = [json.loads(x)["scores"]["fluency"] for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert resumed == pytest.approx(copied, abs=1e-5)  # float32: other batches, the same checkpoint
    shards = []
    for k, model in ((0, str(tiny_ckpt)), (1, str(copy))):  # shards made from two copies merge
        shards.append(tmp_path / f"s{k}.jsonl")
        assert main(["score", str(src), "--aspect", "fluency", "--no-progress", "--shard", f"{k}/2", "--model", model,
                     "-o", str(shards[-1])]) in (EXIT_OK,)
    assert main(["merge", *map(str, shards), "-o", str(tmp_path / "m.jsonl")]) == EXIT_OK


def test_a_list_id_is_an_error_record_and_report_rows_keep_the_id_type(tmp_path, fake_ckpt, tiny_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", [{"id": [1], "target": "A b.", "source": "C d."},
                                        {"id": 1, "target": "A b.", "source": "C d."},
                                        {"id": "1", "target": "A b.", "source": "C d."}])
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress",
                 "-o", str(out)]) == 1
    lines = read(out)
    assert lines[0]["error"]["type"] == "InvalidId" and lines[0]["key"] == 0
    assert [x["key"] for x in lines[1:]] == [1, "1"] and all("scores" in x for x in lines[1:])
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report
    from conftest import FakeRunner, fake_factory

    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner()))
    rep = make_report([{"id": 1, "target": "A b.", "source": "A b c."}, {"id": "1", "target": "A b.",
                                                                      "source": "A b c."}], "summ", engine=engine,
                      warn=False)
    assert [r.id for r in rep.reports] == [1, "1"] and rep.n_errors == 0
    assert json.loads(rep.model_dump_json())["reports"][0]["id"] == 1


def test_merge_names_a_shard_given_twice_once(tmp_path, tiny_ckpt, capsys):
    rows = [{"id": f"r{i}", "target": f"Claim {i}.", "source": "Doc."} for i in range(8)]
    src = write(tmp_path / "in.jsonl", rows)
    for k in (0, 1):
        assert main(["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress",
                     "--shard", f"{k}/2", "-o", str(tmp_path / f"s{k}.jsonl")]) == EXIT_OK
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s0.jsonl"), str(tmp_path / "s1.jsonl"), str(tmp_path / "s0.jsonl"),
                 "-o", str(tmp_path / "m.jsonl")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "shard(s) given more than once: 0/2" in err and "is twice in" not in err


def test_a_damaged_middle_line_on_resume_names_its_line(tmp_path, tiny_ckpt, capsys):
    rows = [{"id": f"r{i}", "target": f"Claim {i}.", "source": "Doc."} for i in range(4)]
    src = write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o.jsonl"
    args = ["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress", "-o", str(out)]
    assert main(args) == EXIT_OK
    lines = out.read_text().splitlines()
    out.write_text(lines[0] + "\n" + lines[1] + lines[2] + "\n" + lines[3] + "\n")  # two lines glued into one
    capsys.readouterr()
    assert main([*args, "--resume"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is damaged: line 2 is not one JSON record" in err and "not an unieval-local output" not in err


def test_without_aspect_a_record_lacking_references_keeps_its_other_scores(tmp_path, tiny_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", [{"id": "a", "target": "A b.", "source": "C d.", "references": ["A."]},
                                        {"id": "b", "target": "E f.", "source": "G h."}])
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(out)]) == EXIT_OK
    lines = read(out)  # issue 40: the default set is --aspect all; relevance is skipped per record, with a note
    assert [sorted(x["scores"]) for x in lines] == [["coherence", "consistency", "fluency", "relevance"],
                                                    ["coherence", "consistency", "fluency"]]
    assert "notes" not in lines[0] and lines[1]["notes"] == ["relevance skipped: no references"]
    assert "skipped aspect" not in capsys.readouterr().err


def test_ray_flags_without_the_ray_engine_warn(tmp_path, tiny_ckpt, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": "A b.", "source": "C d."}])
    assert main(["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress",
                 "--ray-actors", "2", "-o", str(tmp_path / "o.jsonl")]) == EXIT_OK
    assert "--ray-actors apply to --engine ray (ignored with --engine local)" in capsys.readouterr().err


def test_progress_lines_show_fractions_of_a_few_records(caplog):
    import logging

    from unieval_local.progress import LogLines

    lines = LogLines("records", 1, every=0)
    with caplog.at_level(logging.INFO, logger="unieval_local"):
        lines.set(0.57)
    assert "records 0.6/1 (57%)" in caplog.text


def test_task_typos_get_a_did_you_mean(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", [{"target": "A."}])
    with pytest.raises(SystemExit):
        main(["score", str(src), "--task", "summarisation"])
    assert "did you mean 'summarization'?" in capsys.readouterr().err


def test_a_line_that_is_not_utf8_is_an_error_record(tmp_path, tiny_ckpt):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"target": "A b.", "source": "C."}\n{"target": "caf\xe9", "source": "x"}\n'
                    b'{"target": "D e.", "source": "F."}\n')
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--aspect", "coherence", "--model", str(tiny_ckpt), "--no-progress",
                 "-o", str(out)]) == 1
    lines = read(out)
    assert "scores" in lines[0] and "scores" in lines[2]
    assert lines[1]["error"]["type"] == "InvalidText" and "line 2 of the file is not UTF-8" in lines[1]["error"]["message"]


def test_an_unverified_checkpoint_is_in_the_report_notes_and_verify_says_how_it_checked(tmp_path, fake_ckpt, tiny_ckpt,
                                                                                         capsys):
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report
    from conftest import FakeRunner, fake_factory
    from unieval_local.models.verify import verify_checkpoint
    import shutil

    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner()))
    out = make_report([{"target": "A b.", "source": "A b c."}], "summ", engine=engine, warn=False)
    assert any("was used unchecked" in n and "identity is unverified" in n for n in out.notes)
    odd = tmp_path / "my-model"
    shutil.copytree(tiny_ckpt, odd)
    msgs = verify_checkpoint(odd)[0].messages
    assert any("is checked as unieval-sum, its identity unchecked" in m for m in msgs)
    assert any("its folder name 'my-model' is none; give --evaluator NAME" in m for m in msgs)


def test_a_report_notes_only_the_unverified_checkpoints_it_used(fake_ckpt):
    """An engine that holds another checkpoint (a served one: unieval-sum beside a G-Eval judge, here
    mdeberta-nli beside unieval-sum) notes only those the report's queries went to (issue 40)."""
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report
    from conftest import FakeRunner, fake_factory

    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner()))
    engine.runner("mdeberta-nli")  # loaded, unverified, never asked by the summ report
    assert engine.checkpoint_identities()["mdeberta-nli"]["identity"] == "unverified"
    out = make_report([{"target": "A b.", "source": "A b c."}], "summ", engine=engine, warn=False)
    unchecked = [n for n in out.notes if "was used unchecked" in n]
    assert len(unchecked) == 1 and unchecked[0].startswith("checkpoint unieval-sum "), out.notes
