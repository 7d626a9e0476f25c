"""Drop-in for the hosted UniEval metric: its argument names in Python (``evaluation_aspect=``,
``config=UniEvalConfig(...)`` or a dict), and ``score --output-format hosted``: one line per
request of at most 250 records in the hosted result schema, failed records kept as errors."""

import json
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from unieval_local import MAX_EXAMPLES_PER_REQUEST, Scorer, UniEvalConfig, score
from unieval_local.batch import ChunkResult, ResumeError, errors_path, run_batch, sidecar_path
from unieval_local.requests.score import RecordsRequest
from unieval_local.cli import EXIT_MODEL, EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, main
from unieval_local.records import Record
from unieval_local.registry.user_aspects import registry_with
from unieval_local.models.t5.runner import T5Runner

from conftest import FakeRunner, assert_same_shape, documented_shape, fake_factory

ROOT = Path(__file__).resolve().parents[1]

DATA = [
    {"target": "Peter and Elizabeth attend party city. Elizabeth rushed hospital.",
     "source": "Peter and Elizabeth took a taxi to attend the night party in the city. While in the party, "
               "Elizabeth collapsed and was rushed to the hospital.",
     "references": ["Elizabeth was hospitalized after attending a party with Peter."]},
    {"target": "A storm closed the coastal road on Monday. It opened again.",
     "source": "Heavy rain and wind hit the coast on Monday. Officials closed the coastal road until Tuesday.",
     "references": ["The coastal road was closed by Monday's storm."]},
    {"target": "The council approved the budget.",
     "source": "After a long debate the city council approved next year's budget on Thursday.",
     "references": ["The budget passed."]},
]


def by_prompt(prompt: str) -> float:
    """P(Yes) as a fixed function of the prompt text: every aspect and example differs."""
    return zlib.crc32(prompt.encode()) % 997 / 997


def values(result):
    return [e.value for e in result.examples]


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


# ----------------------------------------------------------------------------- Python: the hosted names
def test_evaluation_aspect_is_an_alias_of_aspect(fake_scorer):
    s, _ = fake_scorer(by_prompt)
    want = values(s.score(DATA, task="summarization", aspect="consistency"))
    assert want != values(s.score(DATA, aspect="coherence"))  # the aspect really changes the numbers
    assert values(s.score(DATA, task="summarization", evaluation_aspect="consistency")) == want
    assert values(s.score(DATA, evaluation_aspect="consistency")) == want
    both = s.score(DATA, aspect="consistency", evaluation_aspect="consistency")  # the same value twice is fine
    assert values(both) == want and both.signature.aspect == "consistency"
    assert both.overall.value == pytest.approx(float(np.mean(want)), abs=1e-12)


def test_nothing_named_keeps_the_defaults(fake_scorer):
    s, _ = fake_scorer(by_prompt)
    plain = s.score(DATA)
    assert values(plain) == values(s.score(DATA, task="summarization", aspect="coherence"))
    assert (plain.signature.task, plain.signature.aspect) == ("summarization", "coherence")
    # a task alone keeps the default aspect, as before
    assert values(s.score(DATA, task="summarization")) == values(plain)


def test_config_as_unieval_config_and_as_dict(fake_scorer):
    s, _ = fake_scorer(by_prompt)
    want = values(s.score(DATA, task="summarization", aspect="relevance"))
    cfg = UniEvalConfig(task="summarization", evaluation_aspect="relevance")
    got = s.score(DATA, config=cfg)
    assert values(got) == want and got.signature.aspect == "relevance"
    assert values(s.score(DATA, config={"task": "summarization", "evaluation_aspect": "relevance"})) == want
    assert values(s.score(DATA, config={"aspect": "relevance"})) == want  # UniEvalConfig's alias, default task
    assert values(s.score(DATA, config={"evaluation_aspect": "relevance"})) == want
    # explicit names that agree with the config are accepted
    assert values(s.score(DATA, config=cfg, task="summarization", evaluation_aspect="relevance")) == want
    assert values(s.score(DATA, config=cfg, aspect="relevance")) == want


def test_a_config_dict_knows_user_defined_aspects(fake_ckpt):
    cfg_file = ROOT / "configs" / "aspects.example.yaml"
    s = Scorer(model=fake_ckpt, aspects_config=cfg_file, runner_factory=fake_factory(FakeRunner(by_prompt)))
    want = values(s.score(DATA, task="summarization", aspect="brevity"))
    assert want != values(s.score(DATA, aspect="coherence"))
    got = s.score(DATA, config={"task": "summarization", "evaluation_aspect": "brevity"})
    assert values(got) == want and got.signature.aspect == "brevity"
    # the built-in registry alone does not know it: the dict is validated with the scorer's
    with pytest.raises(ValidationError, match="brevity"):
        UniEvalConfig(task="summarization", evaluation_aspect="brevity")
    with pytest.raises(ValidationError, match="brevity"):
        Scorer(model=fake_ckpt).score(DATA, config={"evaluation_aspect": "brevity"})


def test_conflicting_names_are_a_value_error_naming_both(fake_scorer):
    s, runner = fake_scorer(by_prompt)
    with pytest.raises(ValueError, match=r"aspect='coherence' and evaluation_aspect='fluency' differ"):
        s.score(DATA, aspect="coherence", evaluation_aspect="fluency")
    cfg = UniEvalConfig(task="summarization", evaluation_aspect="fluency")
    with pytest.raises(ValueError, match=r"task='dialogue' and config.task='summarization' differ"):
        s.score(DATA, task="dialogue", config=cfg)
    with pytest.raises(ValueError, match=r"aspect='coherence' and config.evaluation_aspect='fluency' differ"):
        s.score(DATA, aspect="coherence", config=cfg)
    with pytest.raises(ValueError, match=r"evaluation_aspect='relevance' and config.evaluation_aspect='fluency'"):
        s.score(DATA, evaluation_aspect="relevance", config={"task": "summarization", "aspect": "fluency"})
    with pytest.raises(ValueError, match=r"config\['aspect'\]='fluency' and config\['evaluation_aspect'\]="
                                         r"'coherence' differ"):
        s.score(DATA, config={"aspect": "fluency", "evaluation_aspect": "coherence"})
    with pytest.raises(ValueError, match=r"unknown key\(s\) 'aspect_name'"):
        s.score(DATA, config={"task": "summarization", "aspect_name": "fluency"})  # not silently coherence
    with pytest.raises(ValidationError, match="valid aspects"):
        s.score(DATA, config={"task": "summarization", "evaluation_aspect": "novelty"})
    with pytest.raises(ValueError, match="config must be a UniEvalConfig or a dict, got str"):
        s.score(DATA, config="summarization/fluency")
    assert runner.prompts == []  # nothing was scored


def test_module_score_takes_the_hosted_names(tiny_ckpt):
    want = values(score(DATA, model=str(tiny_ckpt), task="summarization", aspect="fluency"))
    assert all(0 < v < 1 for v in want)
    assert values(score(DATA, model=str(tiny_ckpt), task="summarization", evaluation_aspect="fluency")) == want
    cfg = UniEvalConfig(task="summarization", evaluation_aspect="fluency")
    assert values(score(DATA, model=str(tiny_ckpt), config=cfg)) == want
    assert values(score(DATA, model=str(tiny_ckpt), config={"task": "summarization", "aspect": "fluency"})) == want
    assert values(score(DATA, model=str(tiny_ckpt))) == values(score(DATA, model=str(tiny_ckpt), aspect="coherence"))
    with pytest.raises(ValueError, match=r"aspect='fluency' and evaluation_aspect='coherence' differ"):
        score(DATA, model=str(tiny_ckpt), aspect="fluency", evaluation_aspect="coherence")
    with pytest.raises(ValueError, match=r"aspect='coherence' and config.evaluation_aspect='fluency' differ"):
        score(DATA, model=str(tiny_ckpt), aspect="coherence", config=cfg)
    # the README's recipe for the hosted JSON exactly: the documented shape, our values
    hosted = json.loads(score(DATA, model=str(tiny_ckpt), config=cfg).model_dump_json(
        exclude={"signature", "run"}, exclude_none=True))
    assert_same_shape(hosted, documented_shape("hosted"))
    assert [e["value"] for e in hosted["examples"]] == want and hosted["overall"]["value"] == pytest.approx(
        sum(want) / len(want), abs=1e-12)


# ----------------------------------------------------------------------------- CLI: --output-format hosted
def short_records(n):
    return [{"id": f"r{i}", "target": f"Record {i} says {i % 7} things. It ends here."} for i in range(n)]


def score_args(ckpt, *extra):
    return ["--model", str(ckpt), "--aspect", "fluency", "--max-length", "48", "--no-progress", *extra]


def test_hosted_lines_are_requests_of_250_with_the_records_values(tmp_path, tiny_ckpt, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", short_records(251))
    hosted, records = tmp_path / "hosted.jsonl", tmp_path / "records.jsonl"
    assert main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted", "-o", str(hosted)]) == EXIT_OK
    assert "hosted: 2 requests answered (251 records)" in capsys.readouterr().err  # the summary, on stderr
    assert main(["score", str(src), *score_args(tiny_ckpt), "-o", str(records)]) == EXIT_OK
    lines = read(hosted)
    assert len(lines) == 2 and MAX_EXAMPLES_PER_REQUEST == 250
    assert [len(x["examples"]) for x in lines] == [250, 1]
    for line in lines:
        assert_same_shape(line, documented_shape("hosted"))  # the hosted metric's example, key by key and type
        assert set(line) == {"overall", "examples"} and set(line["overall"]) == {"value"}
        assert all(set(e) == {"value"} and isinstance(e["value"], float) for e in line["examples"])
        mean = float(np.mean([e["value"] for e in line["examples"]]))
        assert line["overall"]["value"] == pytest.approx(mean, rel=1e-12, abs=0)
    got = [e["value"] for x in lines for e in x["examples"]]
    want = [x["scores"]["fluency"] for x in read(records)]
    assert got == want  # the same requests through the same code: the same numbers
    assert lines[1]["overall"]["value"] == want[250]
    assert not sidecar_path(hosted).exists()  # a hosted output is not resumable
    # stdout (default, or -o -): the same lines
    assert main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted"]) == EXIT_OK
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == lines


def hosted_schema_validator(name: str = "hosted.schema.json"):
    """A validator of the hosted metric's result JSON Schema (tests/data/formats/hosted.schema.json),
    or of ``name`` there (``hosted_error.schema.json``: a refused request's line)."""
    import jsonschema

    from conftest import ROOT

    schema = json.loads((ROOT / "tests" / "data" / "formats" / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_a_request_with_a_failed_record_is_one_error_line_and_the_others_validate(tmp_path, tiny_ckpt, capsys):
    good = short_records(251)
    rows = list(good)
    rows[3] = {"id": "empty", "target": "   "}
    rows[10] = "{not json"
    rows[20] = {"id": "renamed", "summary": "A summary under another name."}
    rows[30] = {"id": "r0", "target": "A repeated id."}
    rows[250] = {"id": "last", "target": 42}  # alone in the second request
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "hosted.jsonl"
    assert main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted", "-o", str(out)]) \
        == EXIT_ROWS_FAILED
    err = capsys.readouterr().err
    assert ("hosted: 0 of 2 requests answered (0 records with a value); 2 refused (251 records, 5 of them cannot be "
            "scored") in err and "scored 246 of 251" not in err
    assert f"their error lines: {errors_path(out)})" in err
    assert read(out) == []  # the refused requests' lines are in the errors file, not the results
    first, second = read(errors_path(out))
    # never an example with value null: each request is answered whole, or by one error line
    assert set(first) == {"error"} and set(second) == {"error"}
    assert first["error"]["type"] == "InvalidRequest" and first["error"]["n_examples"] == 250
    assert "4 of 250 examples of this request cannot be scored" in first["error"]["message"]
    bad = {3: ("target", "the text under evaluation is empty or whitespace-only"),
           10: ("record", "line 11 of the file is not valid JSON"),
           20: ("target", ""),
           30: ("id", "duplicate id 'r0' (first at record 0)"),
           250: ("target", "Input should be a valid string")}
    named = {e["record"]: e for e in first["error"]["examples"] + second["error"]["examples"]}
    assert sorted(named) == sorted(bad)
    for i, (field, start) in bad.items():
        e = named[i]
        assert set(e) == {"index", "record", "key", "field", "message"} and e["field"] == field, e
        assert e["message"].startswith(start), e
        assert e["index"] == i % 250
    assert "did you mean 'target'?" in named[20]["message"] and named[30]["key"] == "r0"
    # without the bad records, both requests are answered and validate against the hosted schema
    clean = write_jsonl(tmp_path / "clean.jsonl", [r for i, r in enumerate(good) if i not in bad])
    ref = tmp_path / "ref.jsonl"
    assert main(["score", str(clean), *score_args(tiny_ckpt), "--output-format", "hosted", "-o", str(ref)]) == EXIT_OK
    validator = hosted_schema_validator()
    for line in read(ref):
        validator.validate(line)
    # the error lines are not results: they do not validate as one, and say so at the top; they
    # validate against the error schema (and a result does not)
    assert not validator.is_valid(first)
    errors = hosted_schema_validator("hosted_error.schema.json")
    errors.validate(first)
    errors.validate(second)
    assert not errors.is_valid(read(ref)[0])


def test_every_hosted_line_is_a_schema_valid_result_and_the_refused_go_to_the_errors_file(tmp_path, tiny_ckpt,
                                                                                           capsys):
    rows = short_records(600)
    rows[260] = {"id": "empty", "target": ""}
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "hosted.jsonl"
    assert main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted", "-o", str(out)]) \
        == EXIT_ROWS_FAILED  # the exit status of a run with a refused request, as before
    assert f"their error lines: {errors_path(out)})" in capsys.readouterr().err
    validator = hosted_schema_validator()
    lines = read(out)
    assert [len(x["examples"]) for x in lines] == [250, 100]  # requests 1 and 3; request 2 was refused
    for line in lines:
        validator.validate(line)  # a reader parsing every line as a UniEvalResult never meets an error line
    (refused,) = read(errors_path(out))
    assert refused["error"]["n_examples"] == 250
    assert refused["error"]["examples"] == [{"index": 10, "record": 260, "key": "empty", "field": "target",
                                             "message": refused["error"]["examples"][0]["message"]}]
    hosted_schema_validator("hosted_error.schema.json").validate(refused)
    # to stdout: the results on stdout, the error line on stderr
    assert main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted"]) == EXIT_ROWS_FAILED
    captured = capsys.readouterr()
    assert [json.loads(x) for x in captured.out.splitlines()] == lines
    assert json.dumps(refused, ensure_ascii=False) in captured.err.splitlines()
    assert "their error lines: stderr)" in captured.err
    # a run with no refused request leaves no errors file
    clean = tmp_path / "clean.jsonl"
    assert main(["score", str(write_jsonl(tmp_path / "c.jsonl", short_records(3))), *score_args(tiny_ckpt),
                 "--output-format", "hosted", "-o", str(clean)]) == EXIT_OK
    assert not errors_path(clean).exists()
    with pytest.raises(Exception):
        validator.validate({"overall": {"value": None}, "examples": [{"value": None}]})  # what we used to write


def test_a_non_finite_score_makes_its_request_an_error_line(tmp_path, fake_ckpt):
    rows = [{"id": i, "target": f"Summary {i}.", "source": "poison" if i == 1 else f"Document {i}."} for i in range(4)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "hosted.jsonl"
    runner = FakeRunner(lambda p: math.nan if "poison" in p else by_prompt(p))
    summary = run_batch(src, out, aspects=["coherence"], output_format="hosted",
                        settings=dict(model=fake_ckpt, runner_factory=fake_factory(runner)))
    assert summary.n_failed == 1 and summary.n_records == 4
    assert read(out) == []
    (line,) = read(errors_path(out))
    assert line["error"]["examples"] == [{"index": 1, "record": 1, "key": 1, "field": "value",
                                          "message": "the model gave non-finite logits for coherence"}]
    # an existing errors file is never appended to (as an existing output): refused before any load
    with pytest.raises(ResumeError, match=f"{errors_path(out)} already exists; remove it"):
        run_batch(src, out, aspects=["coherence"], output_format="hosted",
                  settings=dict(model=fake_ckpt, runner_factory=fake_factory(runner)))
    assert read(errors_path(out)) == [line]


def test_chunk_results_carry_the_reasons_through_to_dict(fake_ckpt):
    s = Scorer(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(by_prompt)))
    chunk = [Record(0, {"target": "A.", "source": "B."}), Record(1, {"target": "A."}), Record(2, None, "bad line")]
    res = s.scheduler.answer(RecordsRequest(chunk, "summarization", ["coherence"]))
    assert res.reasons[0] is None and res.reasons[1].startswith("source: ") and res.reasons[2] == "record: bad line"
    assert ChunkResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res


@pytest.mark.parametrize("extra, message", [
    (["--resume"], "does not take --resume; use --output-format records for batch runs"),
    (["--shard", "0/2"], "does not take --shard; use --output-format records for batch runs"),
    (["--engine", "ray"], "does not take --engine ray; use --output-format records for batch runs"),
    (["--evidence"], "does not take --evidence; use --output-format records for batch runs"),
    (["--aspect", "coherence"], "exactly one aspect per run (the hosted metric's evaluation_aspect), but 2 aspects "
                                "were given (fluency, coherence)"),
    (["--aspect", "all"], "but --aspect all resolves to {n} aspects ({names})"),
], ids=["resume", "shard", "ray", "evidence", "two-aspects", "all"])
def test_hosted_refuses_what_it_cannot_write(tmp_path, tiny_ckpt, capsys, extra, message):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A summary.", "source": "A document."}])
    out = tmp_path / "o.jsonl"
    rc = main(["score", str(src), *score_args(tiny_ckpt, *extra), "--output-format", "hosted", "-o", str(out)])
    assert rc == EXIT_USAGE
    err = capsys.readouterr().err
    # score_args names fluency; `all` (the task's own set) joins it: groups combine with named aspects
    names = registry_with(None).aspect_names("summarization", ["fluency", "all"])
    message = message.format(n=len(names), names=", ".join(names))
    assert err.startswith("unieval-local: error: --output-format hosted") and message in err, err
    assert not out.exists()


def test_hosted_needs_one_named_aspect(tmp_path, tiny_ckpt, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "A summary.", "source": "A document."}])
    base = ["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "--output-format", "hosted"]
    assert main(base) == EXIT_USAGE
    assert "but no --aspect was given; give one --aspect" in capsys.readouterr().err
    cfg = ROOT / "configs" / "aspects.example.yaml"  # all of summarization, user-defined aspects included
    assert main([*base, "--aspects-config", str(cfg), "--aspect", "all"]) == EXIT_USAGE
    names = registry_with(cfg).aspect_names("summarization", None)
    assert names[-2:] == ["brevity", "instruction_following"]  # the config's own aspects, after the built-in ones
    assert f"--aspect all resolves to {len(names)} aspects ({', '.join(names)})" in capsys.readouterr().err
    existing = tmp_path / "o.jsonl"
    existing.write_text('{"overall": {"value": 0.5}, "examples": [{"value": 0.5}]}\n')
    assert main([*base, "--aspect", "fluency", "-o", str(existing)]) == EXIT_USAGE
    assert "already exists; remove it or write to a new output" in capsys.readouterr().err
    assert read(existing) == [{"overall": {"value": 0.5}, "examples": [{"value": 0.5}]}]
    # the default format is unchanged: one line per record, no aspect needed (every one that can run)
    out = tmp_path / "records.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(out)]) == EXIT_OK
    (line,) = read(out)
    assert set(line) == {"index", "key", "scores", "aspect_mean", "language"}
    assert set(line["scores"]) == {"coherence", "consistency", "fluency"}


def test_a_stopped_run_keeps_the_finished_requests(tmp_path, tiny_ckpt, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", short_records(260))
    out = tmp_path / "hosted.jsonl"
    real = T5Runner._two_logits

    def broken(self, ids, batch, fast):  # the second request meets a CUDA-style failure
        if any("Record 255 " in self.t5.tokenizer.decode(ids[i]) for i in batch):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(self, ids, batch, fast)

    monkeypatch.setattr(T5Runner, "_two_logits", broken)
    rc = main(["score", str(src), *score_args(tiny_ckpt), "--output-format", "hosted", "-o", str(out)])
    assert rc == EXIT_MODEL
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"250 of 260 records written to {out} (the first 250 records of the input); "
                         "--output-format hosted does not resume: score the others in a new run, or use "
                         "--output-format records for batch runs"), last
    (line,) = read(out)  # the first request, whole
    assert len(line["examples"]) == 250 and all(isinstance(e["value"], float) for e in line["examples"])
