"""One settings declaration (Scorer's signature, the CLI flags, report --attention-mib) and the
Scheduler: many requests, one engine pass per stage, bad requests failing alone."""

from __future__ import annotations

import inspect
import json

import pytest

from unieval_local import Scorer
from unieval_local.cli import _build_parser, main
from unieval_local.engine import Engine
from unieval_local.errors import InvalidExampleError
from unieval_local.reports.rating import RatingConfig, RatingRequest
from unieval_local.reports.summ import SummOptions, SummRequest
from unieval_local.requests.score import ScoreRequest
from unieval_local.requests.scheduler import RequestPolicy, Scheduler
from unieval_local.settings import SETTINGS, EngineSettings, cli_settings

from conftest import FakeRunner, fake_factory


def test_scorer_signature_is_the_settings_declaration():
    params = list(inspect.signature(Scorer.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [s.name for s in SETTINGS]
    assert [p.default for p in params] == [s.default for s in SETTINGS]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY or p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
               for p in params)
    # the dataclass has the same fields and defaults, in order
    fields = EngineSettings.__dataclass_fields__
    assert list(fields) == [s.name for s in SETTINGS]
    assert [fields[s.name].default for s in SETTINGS] == [s.default for s in SETTINGS]


@pytest.mark.parametrize("command", ["score", "report"])
def test_every_flagged_setting_is_a_flag_of_score_and_report(command):
    parser = _build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    flags = {opt for a in sub._actions for opt in a.option_strings}
    assert {s.flag or s.negative_flag for s in cli_settings()} <= flags


def test_report_long_input_defaults_to_chunk_and_score_to_the_declaration():
    parser = _build_parser()
    from unieval_local.cli.common import engine_settings

    rep = engine_settings(parser.parse_args(["report", "x.jsonl", "--format", "summ"]))
    sc = engine_settings(parser.parse_args(["score", "x.jsonl"]))
    assert rep["long_input"] == "chunk" and sc["long_input"] == "truncate"
    assert {k: v for k, v in sc.items() if k != "progress"} == {s.name: s.default for s in cli_settings()}


def test_report_attention_mib_reaches_the_engine(monkeypatch, fake_ckpt, tmp_path):
    import unieval_local.engine as engine_module

    real, seen = engine_module.Engine, []

    def make(settings=None, **overrides):
        engine = real(settings, **overrides, runner_factory=fake_factory(FakeRunner(default=0.8)))
        seen.append(engine.settings)
        return engine

    monkeypatch.setattr(engine_module, "Engine", make)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "Alpha rose.", "source": "Alpha rose today. Beta fell."}) + "\n")
    out = tmp_path / "out.json"
    assert main(["report", str(src), "--format", "summ", "--model", str(fake_ckpt), "--attention-mib", "7",
                 "--batch-tokens", "300", "--no-progress", "-o", str(out)]) == 0
    assert len(seen) == 1
    assert (seen[0].attention_mib, seen[0].batch_tokens, seen[0].long_input) == (7.0, 300, "chunk")
    assert json.loads(out.read_text())["n_reported"] == 1


EXAMPLES = [{"target": f"Summary {i} is short.", "source": f"Document {i} is longer than its summary."}
            for i in range(8)]
SUMM_RECORD = {"target": "Alpha rose. Beta fell.", "source": "Alpha rose today. Beta fell later. Gamma stayed."}


def _requests():
    score = [ScoreRequest([ex], "summarization", ["coherence"]) for ex in EXAMPLES]
    score[3] = ScoreRequest([EXAMPLES[0]], "summarization", ["coherence"])  # the prompt of request 0 again
    score[5] = ScoreRequest([{"target": "", "source": "A document."}], "summarization", ["coherence"])
    reports = [SummRequest([SUMM_RECORD], SummOptions()), RatingRequest([SUMM_RECORD], RatingConfig())]
    return score, reports


def test_requests_run_together_share_prompts_and_fail_alone(fake_ckpt):
    runner = FakeRunner(lambda prompt: (len(prompt) % 97) / 97)
    scheduler = Scheduler(Engine(model=fake_ckpt, runner_factory=fake_factory(runner), long_input="chunk"))
    score, reports = _requests()
    futures = scheduler.run(score + reports)
    scored = [p for call in runner.calls for p in call]
    assert len(scored) == len(set(scored))  # the prompt requests 0 and 3 share, once over every micro-batch
    # the empty target fails its own request alone; the other nine are answered
    with pytest.raises(InvalidExampleError, match="target"):
        futures[5].result()
    answers = [f.result() for i, f in enumerate(futures) if i != 5]
    assert len(answers) == 9
    assert answers[0].values["coherence"][0] == answers[3].values["coherence"][0]
    # each answer equals the same request run on its own
    for i, r in enumerate(_requests()[0]):
        if i == 5:
            continue
        alone = Scheduler(Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(runner.answer)),
                                 long_input="chunk")).answer(r)
        assert alone.values["coherence"].tolist() == futures[i].result().values["coherence"].tolist()
    summ_alone = Scheduler(Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(runner.answer)),
                                  long_input="chunk")).answer(_requests()[1][0])
    assert summ_alone.rows == futures[8].result().rows


def test_the_request_policy_splits_inputs(fake_ckpt):
    assert RequestPolicy(3).split(list(range(7))) == [(0, [0, 1, 2]), (3, [3, 4, 5]), (6, [6])]
    with pytest.raises(ValueError, match="positive integer"):
        RequestPolicy(0)
