"""Reasons in the seed formats (issue 44, item 4): with a generator staged, the rating report's
explanations (seeds 000 and 001) and the autoeval report's accuracy reasons and rubric reasoning
(seed 003) are the generator's text, ONE batched generation per report, the record's language
named in the prompt; without one they are the templates, marked; a failed generation keeps its
template, marked and counted; compat's result carries the mark only with a generator."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest

from conftest import FakeRunner
from make_test_checkpoint import build_causal_lm_checkpoint

from unieval_local import Scorer
from unieval_local.compat import SummarizationEvaluator
from unieval_local.reports import make_report
from unieval_local.reports.base import Reasons
from unieval_local.reports.reasons import MAX_NEW_TOKENS, STOP, reason_fields, reasons_note, slug_note, write_reasons
from unieval_local.text.reasons import read_reason, reason_messages

SOURCE = "Alpha rose sharply today. Beta fell after the report. Gamma stayed flat all week."
RECORD = {"id": "a", "source": SOURCE, "target": "Alpha rose. Beta fell."}
THIRDS = {m: [0.3333, 0.6667] for m in ("coherence", "consistency", "relevance", "fluency")}
RATING_PATHS = ["summary.global_explanation", "summary.coherence.explanation", "summary.consistency.explanation",
                "summary.relevance.explanation", "summary.fluency.explanation"]


@dataclass(frozen=True)
class Gen:
    text: str
    token_ids: tuple = ()
    finish: str = "eos"


KEY_POINTS = Gen("Here they are:\n- Alpha rose sharply.\n- Gamma stayed flat.\n- Beta fell.")
CLAIMS = Gen("- Alpha rose.\n- Beta fell after a report.\n- Delta is new.")


def _default_answer(p):
    if "key points of the following text" in p:
        return KEY_POINTS
    if "breakdown the following summary" in p:
        return CLAIMS
    return Gen("Reason for " + re.search(r"Claim: (.*)", p).group(1))


class FakeGenerator:
    """chat_prompt renders plainly; generate answers each prompt with ``answer(prompt)`` (default:
    a text naming the prompt's claim line), recording each call."""

    def __init__(self, answer=None):
        self.answer = answer or _default_answer
        self.calls = []

    def chat_prompt(self, messages):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
        self.calls.append((list(prompts), max_new_tokens, tuple(stop)))
        return [self.answer(p) for p in prompts]


@pytest.fixture
def gen_folder(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def _scorer(fake_ckpt, generator=None, gen_folder=None, real_factory=None):
    unieval = FakeRunner(default=0.8)

    def factory(checkpoint, fingerprint, evaluator):
        if evaluator.name == "g-eval":
            return real_factory(checkpoint, fingerprint, evaluator) if real_factory else generator
        unieval.fingerprint, unieval.evaluator = fingerprint, evaluator
        return unieval
    kw = {"generator": f"tiny={gen_folder}"} if gen_folder is not None else {}
    scorer = Scorer(model=fake_ckpt, runner_factory=factory, **kw)
    scorer.fake = unieval
    return scorer


def _rating(scorer, records=(RECORD,), **options):
    with pytest.warns(UserWarning):
        return make_report(list(records), "rating", engine=scorer.engine, options={"cut_points": THIRDS, **options})


def _at(report, path):
    node = report.model_dump(mode="python")
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def test_rating_explanations_are_the_generators_text_in_one_call(fake_ckpt, gen_folder):
    plain = _rating(_scorer(fake_ckpt)).reports[0]
    fake = FakeGenerator()
    got = _rating(_scorer(fake_ckpt, fake, gen_folder), [RECORD, {**RECORD, "id": "b"}]).reports
    assert len(fake.calls) == 2  # the key points of both records, then their reasons: one batched call each
    assert ["key points of the following text" in p for p in fake.calls[0][0]] == [True, True]
    prompts, n, stop = fake.calls[1]
    assert len(prompts) == 10 and n == MAX_NEW_TOKENS and stop == STOP
    templates = {p: _at(plain.report, p) for p in RATING_PATHS}
    for row in got:
        assert row.reasons.source == "generated" and row.reasons.generator == "tiny" and row.reasons.failed == {}
        assert row.reasons.fields == {p: "generated" for p in RATING_PATHS}
        s = row.report.summary
        assert s.global_explanation == "Reason for the summary overall"
        for m in ("coherence", "consistency", "relevance", "fluency"):
            assert s.metrics[m].explanation == f"Reason for the summary's {m}"
            assert s.metrics[m].score == plain.report.summary.metrics[m].score  # the verdict is not the model's
        assert (s.relevancy_rating, s.avg_score, s.possible_issues) == (
            plain.report.summary.relevancy_rating, plain.report.summary.avg_score, plain.report.summary.possible_issues)
    # each prompt is reason_messages(claim, verdict, template) of its field, in English, rendered by chat_prompt
    c = plain.report.summary.coherence
    want = FakeGenerator().chat_prompt(reason_messages("the summary's coherence", f"{c.score} of 3",
                                                       templates["summary.coherence.explanation"], "en"))
    assert prompts[1] == want and "in English" in want and c.explanation in want


def test_no_generator_keeps_the_templates_marked(fake_ckpt):
    row = _rating(_scorer(fake_ckpt)).reports[0]
    assert row.reasons.source == "template" and row.reasons.generator is None and row.reasons.failed == {}
    assert row.reasons.fields == {p: "template" for p in RATING_PATHS}
    assert [p for p, *_ in reason_fields("rating", row.report)] == RATING_PATHS


def test_failed_generations_keep_their_template_marked_and_counted(fake_ckpt, gen_folder):
    plain = _rating(_scorer(fake_ckpt)).reports[0]
    outcomes = {"the summary's coherence": Gen("half a sent", finish="length"),
                "the summary's fluency": Gen("", finish="too_long"), "the summary overall": Gen("  \n ")}

    def answer(p):
        if "Claim: " not in p:  # the key points
            return _default_answer(p)
        claim = re.search(r"Claim: (.*)", p).group(1)
        return outcomes.get(claim, Gen(f"Fine: {claim}"))
    out = _rating(_scorer(fake_ckpt, FakeGenerator(answer), gen_folder))
    row = out.reports[0]
    assert row.reasons.source == "mixed"
    assert row.reasons.failed == {"summary.coherence.explanation": "length", "summary.fluency.explanation": "too_long",
                                  "summary.global_explanation": "empty"}
    for path in row.reasons.failed:
        assert row.reasons.fields[path] == "template" and _at(row.report, path) == _at(plain.report, path)
    assert row.reasons.fields["summary.relevance.explanation"] == "generated"
    assert row.report.summary.relevance.explanation == "Fine: the summary's relevance"
    assert any(n.startswith("3 of 5 reasons kept their template") and "empty: 1, length: 1, too_long: 1" in n
               for n in out.notes)


def test_the_records_language_is_named_in_the_prompt(fake_ckpt, gen_folder):
    fake = FakeGenerator()
    scorer = _scorer(fake_ckpt, fake, gen_folder)
    rows = _rating(scorer).reports
    for lang, name in (("zh", "Chinese"), ("id", "Indonesian")):
        fake.calls.clear()
        again, _ = write_reasons([rows[0].model_copy(update={"language": lang})], "rating", scorer.engine)
        prompts = fake.calls[0][0]
        assert len(prompts) == 5 and all(f"in {name}." in p for p in prompts) and not any("English" in p for p in prompts)
        assert again[0].reasons.source == "generated"


def test_autoeval_points_and_rubrics_are_the_generators_text(fake_ckpt, gen_folder):
    rec = {"source": SOURCE, "target": "Alpha rose. Beta fell.", "instructions": ["Use short sentences."]}
    plain = make_report([rec], "autoeval", engine=_scorer(fake_ckpt).engine).reports[0]
    fake = FakeGenerator()
    row = make_report([rec], "autoeval", engine=_scorer(fake_ckpt, fake, gen_folder).engine).reports[0]
    assert len(fake.calls) == 1 and len(fake.calls[0][0]) == 3  # two points, one rubric (autoeval: no key points)
    points, old = row.report.accuracy.decomposition, plain.report.accuracy.decomposition
    assert [p.point for p in points] == [p.point for p in old] == ["Alpha rose.", "Beta fell."]
    assert [p.accuracy for p in points] == ["Reason for Alpha rose.", "Reason for Beta fell."]
    assert [p.is_accurate for p in points] == [p.is_accurate for p in old]
    rubric = row.report.adherence.rubrics[0]
    assert rubric.reasoning == f"Reason for {rubric.question}" and rubric.is_addressed == \
        plain.report.adherence.rubrics[0].is_addressed
    assert row.report.completeness == plain.report.completeness  # quotes of the texts, not reasons: unchanged
    assert row.reasons.fields == {"accuracy.decomposition.0.accuracy": "generated",
                                  "accuracy.decomposition.1.accuracy": "generated",
                                  "adherence.rubrics.0.reasoning": "generated"}
    verdict = "supported by the source" if old[0].is_accurate else "not supported by the source"
    assert fake.calls[0][0][0] == fake.chat_prompt(reason_messages("Alpha rose.", verdict, old[0].accuracy))
    assert plain.reasons.source == "template"


def test_compat_result_carries_the_mark_only_with_a_generator(fake_ckpt, gen_folder):
    data = {"input": SOURCE, "summary": "Alpha rose. Beta fell."}
    cfg = {"cut_points": THIRDS}
    with pytest.warns(UserWarning):
        bare = asyncio.run(SummarizationEvaluator(engine=_scorer(fake_ckpt).engine, config=cfg).evaluate(data))
    assert list(bare) == ["summary"]  # the evaluator's exact shape
    with pytest.warns(UserWarning):
        ev = SummarizationEvaluator(engine=_scorer(fake_ckpt, FakeGenerator(), gen_folder).engine, config=cfg)
        got = asyncio.run(ev.evaluate(data))
    assert list(got) == ["summary", "reasons"] and got["reasons"]["generator"] == "tiny"
    assert got["reasons"]["source"] == "generated"
    assert got["summary"]["coherence"]["explanation"] == "Reason for the summary's coherence"


def test_model_slug_maps_to_the_staged_generator_or_is_noted_ignored(fake_ckpt, gen_folder):
    engine = _scorer(fake_ckpt, FakeGenerator(), gen_folder).engine
    assert slug_note(None, engine) is None
    assert slug_note("tiny", engine) == ("model_slug 'tiny': the texts (claims, key points, reasons) are written by "
                                         "the staged local generator tiny; the scores come from the local checkpoints")
    assert "model_slug 'gpt-4o' is ignored" in slug_note("gpt-4o", engine) and "local generator tiny" in \
        slug_note("gpt-4o", engine)
    assert "templates (no generator staged)" in slug_note("gpt-4o", _scorer(fake_ckpt).engine)


def test_read_reason_and_messages():
    assert read_reason(" A  b\n c ") == "A b c" and read_reason("\n") is None
    msg = reason_messages("X.", "supported", "the passage", "zh")[0]["content"]
    assert msg.endswith("Claim: X.\nVerdict: supported\nEvidence: the passage") and "in Chinese." in msg
    with pytest.raises(ValueError, match="claim"):
        reason_messages(" ", "v", "e")


def test_a_real_stand_in_writes_or_falls_back_as_its_generations_say(fake_ckpt, tmp_path, shared_data):
    """The random llama stand-in through the real causal-LM runner: each field is the plain
    generation of its prompt (same runner, same call), or its template where that failed."""
    from unieval_local.models.backends import backend_factory

    folder = build_causal_lm_checkpoint(tmp_path / "g-eval", layout="llama", data_dir=shared_data, evaluator="g-eval")
    made = {}

    def real(checkpoint, fingerprint, evaluator):
        made["r"] = backend_factory("causal-lm")(checkpoint, fingerprint, evaluator, device="cpu", dtype="float32",
                                                 batch_tokens=4096, attention_mib=1024, fast_forward=True,
                                                 progress=False)
        return made["r"]
    plain = _rating(_scorer(fake_ckpt), enabled_metrics=["coherence"]).reports[0]
    row = _rating(_scorer(fake_ckpt, gen_folder=folder, real_factory=real), enabled_metrics=["coherence"]).reports[0]
    fields = reason_fields("rating", plain.report)
    r = made["r"]
    direct = r.generate([r.chat_prompt(reason_messages(c, v, t)) for _, c, v, t in fields],
                        max_new_tokens=MAX_NEW_TOKENS, stop=STOP)
    for (path, *_), g in zip(fields, direct):
        text = read_reason(g.text) if g.finish not in ("length", "too_long") else None
        if text is None:
            assert row.reasons.fields[path] == "template" and _at(row.report, path) == _at(plain.report, path)
        else:
            assert row.reasons.fields[path] == "generated" and _at(row.report, path) == text
    assert row.reasons.generator == "tiny"


def test_rating_key_points_are_the_generators_capped_at_n(fake_ckpt, gen_folder):
    scorer = _scorer(fake_ckpt, FakeGenerator(), gen_folder)
    out = _rating(scorer, [{**RECORD, "n_key_points": 2}], details=True)
    row = out.reports[0]
    points = [k["key_point"] for k in row.report.details.key_points]
    assert points == ["Alpha rose sharply.", "Gamma stayed flat."]  # parse_claims of the answer, the first n
    assert all(k["start"] is None for k in row.report.details.key_points)  # not source sentences: no offsets
    assert "the key points were written by the local generator tiny" in row.notes
    coverage = [p for p in scorer.fake.prompts if "Alpha rose sharply." in p or "Gamma stayed flat." in p]
    assert len(coverage) == 2  # the coverage queries check the generated key points
    plain = _rating(_scorer(fake_ckpt), [{**RECORD, "n_key_points": 2}], details=True).reports[0]
    assert [k["start"] is not None for k in plain.report.details.key_points] == [True, True]  # LexRank sentences


def test_summ_claims_and_key_points_are_the_generators_or_today_s_with_a_note(fake_ckpt, gen_folder):
    rec = {**RECORD, "n_key_points": 2, "max_n_claims": 2}
    fake = FakeGenerator()
    row = make_report([rec], "summ", engine=_scorer(fake_ckpt, fake, gen_folder).engine).reports[0]
    assert len(fake.calls) == 1 and len(fake.calls[0][0]) == 2  # key points and claims: ONE call
    assert "in English" in fake.calls[0][0][0] and "at most 2 key points" in fake.calls[0][0][0]
    assert [c.claim for c in row.report.claims] == ["Alpha rose.", "Beta fell after a report."]  # capped at 2
    assert [k["key_point"] for k in row.report.key_points] == ["Alpha rose sharply.", "Gamma stayed flat."]
    assert row.report.key_point_source == "generated" and row.report.n_sentences == 2
    assert row.notes == ["the key points were written by the local generator tiny",
                         "the claims were written by the local generator tiny"]
    failing = FakeGenerator(lambda p: Gen("- cut", finish="length") if "key points" in p else Gen("no list"))
    row = make_report([rec], "summ", engine=_scorer(fake_ckpt, failing, gen_folder).engine).reports[0]
    plain = make_report([rec], "summ", engine=_scorer(fake_ckpt).engine).reports[0]
    assert row.report.key_points == plain.report.key_points and row.report.key_point_source == "extracted"
    assert [c.claim for c in row.report.claims] == [c.claim for c in plain.report.claims] == ["Alpha rose.",
                                                                                               "Beta fell."]
    assert row.notes == ["the key points were not generated (length: the generator tiny failed); the source's "
                         "LexRank sentences are used instead",
                         "the claims were not generated (not_a_list: the generator tiny failed); the summary's "
                         "sentences are used instead"]


def test_key_point_prompts_name_the_records_language(fake_ckpt, gen_folder):
    from unieval_local.reports.generated_points import write_points
    from unieval_local.reports.records import parse_records

    fake = FakeGenerator()
    engine = _scorer(fake_ckpt, fake, gen_folder).engine
    records = [{**RECORD, "language": "zh", "n_key_points": 3}, {**RECORD, "language": "id", "n_key_points": 3}]
    parsed, _ = parse_records(records)
    written = write_points(engine, parsed, records, None, claims=True)
    prompts = fake.calls[0][0]
    assert len(prompts) == 4 and all("in Chinese." in p for p in prompts[:2])
    assert all("in Indonesian." in p for p in prompts[2:])
    assert written.key_points == {0: ["Alpha rose sharply.", "Gamma stayed flat.", "Beta fell."]} | {
        1: ["Alpha rose sharply.", "Gamma stayed flat.", "Beta fell."]}


def test_a_custom_run_model_slug_maps_to_the_generator_or_is_noted_ignored(fake_ckpt, gen_folder):
    body = {"model_slug": "tiny", "evaluations": [{"metrics": [{"metric": "summ"}], "data": [
        {"input": SOURCE, "output": "Alpha rose. Beta fell."}]}]}
    out = make_report(body, "summ", engine=_scorer(fake_ckpt, FakeGenerator(), gen_folder).engine, warn=False)
    assert slug_note("tiny", _scorer(fake_ckpt, FakeGenerator(), gen_folder).engine) in out.notes
    out = make_report({**body, "model_slug": "gpt-4o"}, "summ", engine=_scorer(fake_ckpt).engine, warn=False)
    assert [n for n in out.notes if n.startswith("model_slug")] == [
        "model_slug 'gpt-4o' is ignored: no hosted model is called; the scores come from the local checkpoints and "
        "the texts (claims, key points, reasons) from templates (no generator staged)"]


def test_reasons_note_for_answers_without_room():
    assert reasons_note(None) is None
    assert reasons_note(Reasons(source="template", fields={"a": "template"})) is None
    assert reasons_note(Reasons(source="generated", generator="g", fields={"x.y": "generated"})) == \
        "the reasons were written by the local generator g: 1 of 1 fields (x.y)"
