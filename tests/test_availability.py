"""Issue 29: ``all+`` aspects are those whose evaluators are here (one short note for the rest;
the default is the task's own set since issue 37, tests/test_stable_aspects.py),
an aspect or record routed to a missing evaluator fails alone, errors raised from the caller's
frame in Python names, empty calls, and what a call did (RunInfo)."""

from __future__ import annotations

import json
import traceback
import warnings

import pytest

from conftest import FakeRunner, fake_factory

SUM = [{"target": "The cat sat on the mat.", "source": "The cat sat on the mat. It was warm there.",
        "references": ["A cat sat on a mat."]},
       {"target": "A dog ran in the park.", "source": "The dog ran in the park. Then it slept.",
        "references": ["The dog ran."]}]
OWN = ["coherence", "consistency", "fluency", "relevance"]
SEAHORSE = ["comprehensible", "repetition", "grammar", "attribution", "main_ideas", "conciseness"]


def _scorer(folder, runner=None, **kw):
    from unieval_local import Scorer

    runner = runner or FakeRunner(lambda p: (len(p) % 97) / 97)
    return Scorer(model=folder, runner_factory=fake_factory(runner), **kw), runner


def test_evaluate_all_plus_scores_the_available_ones_with_one_warning(official_shape_ckpt):
    # official_shape_ckpt names unieval-sum (a t5 model): SEAHORSE's six mT5 evaluators are not here
    scorer, _ = _scorer(official_shape_ckpt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = scorer.evaluate(SUM, task="summarization", aspects="all+")
    left = [w for w in caught if "left out" in str(w.message)]
    assert len(left) == 1 and left[0].category is UserWarning
    text = str(left[0].message)
    assert text.startswith("left out ") and "aspects whose evaluators are not here: " + ", ".join(SEAHORSE) in text
    assert "(seahorse-large-q1..q6" in text and "model={'seahorse-large-q1': DIR" in text and "--model" not in text
    assert left[0].filename == __file__  # the caller's line
    assert result.aspects == OWN
    named = scorer.evaluate(SUM, task="summarization", aspects=OWN)  # the same numbers as naming them
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default (issue 37): the task's own set, no note
        default = scorer.evaluate(SUM, task="summarization")
    assert default.aspects == OWN and [e.scores for e in default.examples] == [e.scores for e in named.examples]
    assert [e.scores for e in result.examples] == [e.scores for e in named.examples]


def test_named_unavailable_aspect_raises_in_python_names_from_the_callers_frame(official_shape_ckpt):
    from unieval_local.errors import CheckpointError

    scorer, _ = _scorer(official_shape_ckpt)
    with pytest.raises(CheckpointError) as info:
        scorer.evaluate(SUM, task="summarization", aspects=["coherence", "grammar"])
    message = str(info.value)
    assert "seahorse-large-q3" in message and "--model" not in message
    assert "give the folder of seahorse-large-q3" in message
    files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(info.value.__traceback__)]
    assert not any(f.endswith(("scheduler.py", "engine.py", "checkpoints.py")) for f in files), files
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_not_found_speaks_python(tmp_path):
    from unieval_local import Scorer
    from unieval_local.errors import CheckpointNotFoundError

    with pytest.raises(CheckpointNotFoundError) as info:
        Scorer(device="cpu").evaluate(SUM, task="summarization", aspects=["coherence"])
    message = str(info.value)
    assert "--model" not in message and "model='DIR/unieval-sum'" in message
    frames = [f.f_code.co_name for f, _ in traceback.walk_tb(info.value.__traceback__)]
    assert frames == ["test_not_found_speaks_python", "evaluate"]  # the call, and evaluate's own frame


def test_evaluate_of_no_examples_is_an_empty_result_and_score_still_refuses(fake_scorer):
    from unieval_local.errors import InvalidExampleError

    scorer, runner = fake_scorer()
    result = scorer.evaluate([], task="summarization", aspects=["coherence", "fluency"])
    assert (result.examples, result.per_aspect, result.aspects) == ([], {}, ["coherence", "fluency"])
    assert result.run.forward_passes == 0 and result.run.distinct_queries == 0 and runner.prompts == []
    with pytest.raises(InvalidExampleError, match="holds no examples"):
        scorer.score([], task="summarization", aspect="coherence")


def test_run_info_counts_forward_passes_and_distinct_queries(fake_scorer):
    scorer, runner = fake_scorer(answer=lambda p: 0.25)
    result = scorer.evaluate(SUM + SUM[:1], task="summarization", aspects=["coherence", "fluency"])
    run = result.run
    assert run.forward_passes == len(runner.calls) >= 1
    assert run.distinct_queries == len(set(runner.prompts)) == len(runner.prompts)  # the repeat scored once
    assert 0 < run.wall_s and 0 < run.cpu_s
    assert result.per_aspect["coherence"].run == run
    again = scorer.score(SUM, task="summarization", aspect="coherence")  # all remembered: nothing runs
    assert again.run.forward_passes == 0 and again.run.distinct_queries == 0
    assert "run" not in again.model_dump(exclude_none=True, exclude={"run"})


def test_available_aspects_keeps_named_ones_and_all_when_none_is_here(official_shape_ckpt, tmp_path):
    from unieval_local.engine import Engine
    from unieval_local.requests.score import available_aspects, unavailable_aspects

    engine = Engine(model=official_shape_ckpt, runner_factory=fake_factory(FakeRunner()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no note when aspects are named
        assert available_aspects(engine, "summarization", ["grammar"]) == ["grammar"]
        assert available_aspects(engine, "summarization", "all") == OWN  # the own set: nothing to leave out
    with pytest.warns(UserWarning, match="left out [0-9]+ aspects"):
        assert available_aspects(engine, "summarization", "all+") == OWN
    absent = unavailable_aspects(engine.registry, "fact", engine.registry.aspect_names("fact", "all+"), engine.model)
    named = {a: e for a, (e, _) in absent.items()}
    assert {"support": "minicheck-flan-t5-large", "sentence_support": "minicheck-flan-t5-large",  # names unieval-sum
            "nli_support": "mdeberta-nli", "hhem": "hhem-2.1-open"}.items() <= named.items()
    assert "consistency" not in named  # the task's own evaluator (unieval-fact) is never left out
    assert {why for _, why in absent.values()} == {"the folder given holds another model"}
    missing = Engine(model={"unieval-sum": str(official_shape_ckpt)}, offline=True)
    assert unavailable_aspects(missing.registry, "fact", ["support"], missing.model) == {
        "support": ("minicheck-flan-t5-large", "not found offline")}


def test_cli_score_prints_one_line_for_the_missing_evaluators(tmp_path, tiny_ckpt, capsys):
    from unieval_local.cli import main

    # tiny_ckpt is a t5 folder: SEAHORSE's mT5 evaluators cannot use it
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in SUM))
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--aspect", "all+", "-o", str(out),
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if "seahorse" in x]
    assert len(lines) == 1 and lines[0].startswith("unieval-local: warning: left out "), err
    assert ", ".join(SEAHORSE) in lines[0] and "(seahorse-large-q1..q6" in lines[0] and "--model NAME=DIR" in lines[0]
    assert "skipped aspect" not in err  # not one line per aspect
    assert list(json.loads(out.read_text().splitlines()[0])["scores"]) == OWN


def test_report_record_routed_to_a_missing_checker_is_an_error_row(official_shape_ckpt):
    from unieval_local.engine import Engine
    from unieval_local.reports import make_report

    engine = Engine(model=official_shape_ckpt, runner_factory=fake_factory(FakeRunner(default=0.8)),
                    long_input="chunk")
    records = [{"id": "en", "target": "The cat sat on the mat.", "source": "The cat sat on the mat. It was warm."},
               {"id": "zh", "target": "猫坐在垫子上。", "source": "猫坐在垫子上。那里很暖和。天气很好。"}]
    out = make_report(records, "autoeval", engine=engine, warn=False)
    assert (out.n_records, out.n_reported, out.n_errors) == (2, 1, 1)
    en, zh = out.reports
    assert en.error is None and en.report is not None
    assert zh.error.field == "language" and "mdeberta-nli is not here" in zh.error.message
    assert "Chinese (zh)" in zh.error.message


def test_existing_output_and_plain_text_stdin_exit_2_before_any_checkpoint_lookup(tmp_path, capsys, monkeypatch):
    import io
    import time

    from unieval_local.cli import main

    missing = str(tmp_path / "no-such-checkpoint")  # a lookup would exit 3
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(SUM[0]) + "\n")
    out = tmp_path / "o.jsonl"
    out.write_text('{"index": 0}\n')
    t0 = time.perf_counter()
    assert main(["score", str(src), "--model", missing, "-o", str(out), "--no-progress"]) == 2
    assert time.perf_counter() - t0 < 1.0
    assert f"{out} already exists; pass --resume to continue it, or remove it" in capsys.readouterr().err

    class Lines(io.BytesIO):
        read = 0

        def __next__(self):
            Lines.read += 1
            return super().__next__()

    class Stdin:
        buffer = Lines(b"just some text\n" * 10_000)

    monkeypatch.setattr("sys.stdin", Stdin())
    assert main(["score", "-", "--model", missing, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "stdin is not JSONL records (one JSON object per line): line 1 of stdin is not valid JSON" in err
    assert 0 < Lines.read < 10  # peeked, not read to its end


def test_the_left_out_line_gives_each_reason_its_evaluators_and_stages_only_what_can_be_downloaded():
    from unieval_local.requests.score import left_out_message

    absent = {f"q{n}": (f"seahorse-large-q{n}", "the folder given holds another model") for n in range(1, 4)}
    absent["geval_coherence"] = ("g-eval", "no default weights: name a local folder for it")
    line = left_out_message(absent, cli=True)
    assert ("(seahorse-large-q1..q3: the folder given holds another model; g-eval: no default weights: name a "
            "local folder for it; `unieval-local download --checkpoint seahorse-large-q1 ... --to DIR`") in line
    only = left_out_message({"geval_coherence": absent["geval_coherence"]}, cli=False)
    assert "download" not in only and "model={'g-eval': DIR, ...}" in only


def test_the_unverified_warning_says_what_the_folder_holds_and_offers_no_download_for_g_eval(tmp_path):
    from unieval_local.models.checkpoints import read_identity, unverified_message

    folder = tmp_path / "gen"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "unieval_manifest.json").write_text('{"checkpoint": "gen", "hub_id": null, "files": {}}')
    said = unverified_message("g-eval", folder, read_identity(folder))
    assert "its unieval_manifest.json names no hub repository" in said and "download" not in said
    (folder / "unieval_manifest.json").unlink()
    said = unverified_message("unieval-sum", folder, read_identity(folder))
    assert "no unieval_manifest.json from `unieval-local download`" in said
    assert "`unieval-local download --checkpoint unieval-sum`" in said
