"""fact/claims: decompose, then verify (issue 44, item 3).

The sentences unit end to end on a MiniCheck stand-in (its share, verdicts and evidence sentences
equal a plain computation from fact/support scored through Scorer); the generated unit through a
fake generator (a runner with chat_prompt/generate returning fixed generations); a generation that
is not a claim list, or hits max_new_tokens, is a problem of that example only; the claim checker
must be a fact checker aspect; both settings are signed."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from make_test_checkpoint import build_causal_lm_checkpoint, build_test_checkpoint

from unieval_local import Scorer, claims
from unieval_local.batch import run_batch
from unieval_local.cli import main
from unieval_local.engine import Engine, Job
from unieval_local.errors import InvalidExampleError
from unieval_local.text.sentences import DEFAULT_SPLITTER

SOURCE = ("The city council met on Tuesday. It approved a new park by the river. The park will have a lake and two "
          "playgrounds. Construction starts in May and ends next year.")
RECORDS = [
    {"source": SOURCE, "target": "The council approved a park by the river. Construction starts in May."},
    {"source": SOURCE, "target": "The council met on Tuesday. The park will have a pool. It opens in June. "
                                 "Two playgrounds are planned."},
]


@pytest.fixture(scope="module")
def minicheck(tmp_path_factory, shared_data) -> Path:
    folder = tmp_path_factory.mktemp("claims-mc") / "minicheck-flan-t5-large"
    return build_test_checkpoint(folder, data_dir=shared_data, layout="v1.1", answers=("1", "0"),
                                 evaluator="minicheck-flan-t5-large")


@pytest.fixture(scope="module")
def support(minicheck):
    """fact/support of (document, claim) scored through Scorer: the plain computation. The pairs of a
    claim list are scored in ONE call, as fact/claims scores them (float32 batches of other prompts
    move the last digits, ~1e-7; a fresh Scorer each time: a scheduler remembers prompts it scored)."""
    memo: dict = {}

    def prepare(claim_lists):
        scorer = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu")
        pairs = [(doc, c) for rec, found in zip(RECORDS, claim_lists) for c in found
                 for doc in [rec["source"], *DEFAULT_SPLITTER(rec["source"])]]
        got = scorer.score([{"source": d, "target": c} for d, c in pairs], task="fact", aspect="support")
        memo.clear()
        memo.update(zip(pairs, (e.value for e in got.examples)))

    def value(document: str, claim: str) -> float:
        return memo[document, claim]
    value.prepare = prepare
    return value


def _plain(support, source: str, found: list[str], threshold: float = 0.5):
    """share, verdicts, values and argmax source sentences, computed plainly."""
    values = [support(source, c) for c in found]
    sentences = DEFAULT_SPLITTER(source)
    best = [max(sentences, key=lambda s: support(s, c)) for c in found]  # max keeps the first of ties
    return (float(np.mean([v >= threshold for v in values])), ["supported" if v >= threshold else "unsupported"
                                                             for v in values], values, best)


def _check(result, support, claim_lists, threshold=0.5):
    support.prepare(claim_lists)
    for ex, rec, found in zip(result.examples, RECORDS, claim_lists):
        share, verdicts, values, best = _plain(support, rec["source"], found, threshold)
        assert ex.value == pytest.approx(share, abs=1e-9)
        got = ex.evidence.claims
        assert [c.claim for c in got] == found
        assert [c.value for c in got] == pytest.approx(values, abs=1e-9)
        assert [c.verdict for c in got] == verdicts
        assert [c.evidence_sentence for c in got] == best


def test_sentences_unit_equals_a_plain_computation_from_minicheck(minicheck, support, monkeypatch):
    scorer = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu")
    with pytest.warns(UserWarning, match="no instruct model staged.*sentences are the claims"):
        result = scorer.score(RECORDS, task="fact", aspect="claims", evidence=True)
    sentence_lists = [DEFAULT_SPLITTER(r["target"]) for r in RECORDS]
    assert [len(s) for s in sentence_lists] == [2, 4]
    _check(result, support, sentence_lists)
    for ex in result.examples:
        assert (ex.evidence.unit, ex.evidence.generator) == ("sentences", None)
        assert ex.evidence.queries  # the checker's chunks of each claim against the whole source
    # the verdicts at another threshold (the median claim value): a mix of both, the share follows them
    values = sorted(c.value for ex in result.examples for c in ex.evidence.claims)
    mid = (values[2] + values[3]) / 2
    monkeypatch.setattr(claims, "THRESHOLD", mid)
    again = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu", generator="none").score(
        RECORDS, task="fact", aspect="claims", evidence=True)
    _check(again, support, sentence_lists, threshold=mid)
    assert {c.verdict for ex in again.examples for c in ex.evidence.claims} == {"supported", "unsupported"}


def Gen(text: str, token_ids: tuple = (), finish: str = "eos"):
    """A :class:`~unieval_local.models.base.Generation` (the real one: its ``finish`` is checked)."""
    from unieval_local.models.base import Generation

    return Generation(text, tuple(token_ids), finish)


class FakeGenerator:
    """A generator runner: chat_prompt renders the messages plainly; generate answers each prompt
    with the fixed generation of the first key of ``answers`` found in it."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def chat_prompt(self, messages):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
        self.calls.append((list(prompts), max_new_tokens, tuple(stop)))
        return [next(g for key, g in self.answers.items() if key in p) for p in prompts]


GENERATED = {RECORDS[0]["target"]: Gen("- The council approved a park.\n- The park is by the river.\n"
                                       "- Construction starts in May."),
             RECORDS[1]["target"]: Gen("- The council met on Tuesday.\n- The park will have a pool.")}


def _factory(generator):
    """Real T5 runners for the checkers, ``generator`` for the g-eval evaluator (a generator's)."""
    from unieval_local.models.backends import backend_factory

    def factory(checkpoint, fingerprint, evaluator):
        if evaluator.name == "g-eval":
            return generator
        return backend_factory(evaluator.backend)(checkpoint, fingerprint, evaluator, device="cpu", dtype="float32",
                                                  batch_tokens=2048, attention_mib=1024, fast_forward=True,
                                                  progress=False)
    return factory


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory, shared_data) -> Path:
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("gen") / "g-eval", layout="llama",
                                      data_dir=shared_data, evaluator="g-eval")


def test_generated_unit_checks_each_generated_claim(minicheck, support, gen_dir):
    fake = FakeGenerator(GENERATED)
    scorer = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu",
                    generator=f"tiny={gen_dir}", runner_factory=_factory(fake))
    result = scorer.score(RECORDS, task="fact", aspect="claims", evidence=True)
    lists = [["The council approved a park.", "The park is by the river.", "Construction starts in May."],
             ["The council met on Tuesday.", "The park will have a pool."]]
    _check(result, support, lists)
    assert [(ex.evidence.unit, ex.evidence.generator) for ex in result.examples] == [("generated", "tiny")] * 2
    # ONE batched generation for both examples, with the FActScore-style prompt of each summary
    assert len(fake.calls) == 1
    prompts, max_new, stop = fake.calls[0]
    assert len(prompts) == 2 and all(r["target"] in p for r, p in zip(RECORDS, prompts))
    assert (max_new, stop) == (claims.MAX_NEW_TOKENS, claims.STOP)
    assert "independent facts" in prompts[0] and "atomic fact" in prompts[0]


def test_the_staged_g_eval_model_is_the_default_generator(minicheck, gen_dir, support):
    fake = FakeGenerator(GENERATED)
    scorer = Scorer(model={"minicheck-flan-t5-large": str(minicheck), "g-eval": str(gen_dir)}, device="cpu",
                    runner_factory=_factory(fake))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no instruct model staged" note
        result = scorer.score(RECORDS[:1], task="fact", aspect="claims", evidence=True)
    assert result.examples[0].evidence.unit == "generated" and result.examples[0].evidence.generator == "g-eval"
    assert [c.claim for c in result.examples[0].evidence.claims] == ["The council approved a park.",
                                                                   "The park is by the river.",
                                                                   "Construction starts in May."]
    sig = scorer.signature("fact", "claims")
    assert sig.generator == f"g-eval#{scorer.engine.fingerprint('g-eval')[:12]}"


@pytest.mark.parametrize("bad, message", [
    (Gen("The council approved a park, and it is by the river."), "did not write a claim list"),
    (Gen("- The council approved", finish="length"), f"hit max_new_tokens \\({claims.MAX_NEW_TOKENS}\\)"),
])
def test_a_generation_that_is_no_claim_list_fails_that_example_only(minicheck, support, gen_dir, tmp_path, bad,
                                                                    message):
    fake = FakeGenerator({**GENERATED, RECORDS[1]["target"]: bad})
    settings = dict(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu", generator=f"tiny={gen_dir}",
                    runner_factory=_factory(fake))
    engine = Engine(**settings)
    results, _ = engine.run({"j": Job((engine.registry.get_aspect("fact", "claims"),),
                                      [engine_example(r) for r in RECORDS])})
    values, problems = results["j"].values["claims"], results["j"].problems
    first = ["The council approved a park.", "The park is by the river.", "Construction starts in May."]
    support.prepare([first, []])
    assert values[0] == pytest.approx(_plain(support, SOURCE, first)[0], abs=1e-9)
    assert np.isnan(values[1])
    assert [(p.index, p.field, p.aspect) for p in problems] == [(1, "target", "claims")]
    assert __import__("re").search(message, problems[0].message)
    # a batch run: an error line for that record, the other scored
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", **r}) + "\n" for i, r in enumerate(RECORDS)))
    out = tmp_path / "out.jsonl"
    run_batch(src, out, task="fact", aspects=["claims"], settings=settings, progress=False)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["scores"]["claims"] == pytest.approx(values[0], abs=1e-9)
    assert lines[1]["error"]["type"] == "InvalidExample"
    assert __import__("re").search(message, lines[1]["error"]["message"])
    # Scorer (a request fails whole on a bad example): the error names the example and the field
    with pytest.raises(InvalidExampleError, match=r"example 1.*target") as err:
        Scorer(**settings).score(RECORDS, task="fact", aspect="claims")
    assert [p.index for p in err.value.problems] == [1]


def engine_example(record):
    from unieval_local.schema import UniEvalData

    return UniEvalData(**record)


def test_a_non_fact_claim_checker_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(ValueError, match="claim_checker 'summarization/coherence' is not a fact checker aspect.*"
                                         "fact/support"):
        Scorer(claim_checker="summarization/coherence")
    with pytest.raises(ValueError, match="claim_checker must be TASK/ASPECT"):
        Scorer(claim_checker="support")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(RECORDS[0]) + "\n")
    assert main(["score", str(src), "--task", "fact", "--aspect", "claims", "--claim-checker",
                 "dialogue/naturalness", "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "claim_checker 'dialogue/naturalness' is not a fact checker aspect" in capsys.readouterr().err
    with pytest.raises(ValueError, match="generator must be NAME=DIR"):
        Scorer(generator="tiny")


def test_both_settings_are_signed_and_choose_the_checker(minicheck, gen_dir, tmp_path):
    base = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu")
    sig = base.signature("fact", "claims")
    assert (sig.claim_checker, sig.generator, sig.evaluator) == ("fact/support", "sentences", "minicheck-flan-t5-large")
    assert "|checker:fact/support|gen:sentences|" in str(sig)
    assert base.signature("fact", "support").claim_checker is None  # other aspects' signatures unchanged
    assert "checker:" not in str(base.signature("fact", "support"))
    from unieval_local.models.checkpoints import fingerprint_checkpoint

    gen = Scorer(model={"minicheck-flan-t5-large": str(minicheck)}, device="cpu", generator=f"tiny={gen_dir}")
    assert gen.signature("fact", "claims").generator == f"tiny#{fingerprint_checkpoint(gen_dir)[:12]}"
    assert gen.config.generator == "tiny" and base.config.generator is None  # a name, never the path
    other = Engine(model={"minicheck-flan-t5-large": str(minicheck)}, claim_checker="fact/factcg")
    assert other.registry.get_aspect("fact", "claims").checkpoint == "factcg-deberta-large"
    assert other.config.claim_checker == "fact/factcg" and other.config != base.config
    # the tasks listing names it
    assert main(["tasks"]) == 0


def test_only_a_run_with_fact_claims_carries_its_settings_in_the_run_identity(minicheck, tmp_path):
    """A batch run of another aspect records no ``claim_checker`` / ``generator`` in its sidecar's run
    identity (so runs made before these settings existed still resume); a fact/claims run does."""
    from unieval_local.batch import run_batch, sidecar_path

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", **r}) + "\n" for i, r in enumerate(RECORDS)))
    seen = {}
    for aspect in ("support", "claims"):
        out = tmp_path / f"{aspect}.jsonl"
        run_batch(src, out, task="fact", aspects=[aspect], settings={"model": {"minicheck-flan-t5-large": str(minicheck)}, "generator": "none"},
                  progress=False)
        run = json.loads(sidecar_path(out).read_text())["run"]
        seen[aspect] = ({"claim_checker", "generator"} & set(run["config"]),
                        {"claim_checker", "generator"} & set(run["signature"]))
    assert seen["support"] == (set(), set())
    assert seen["claims"] == ({"claim_checker", "generator"}, {"claim_checker", "generator"})


def test_the_cli_needs_only_the_claim_checker_s_checkpoint(tmp_path, shared_data, capsys):
    """``--claim-checker fact/nli_support`` with only mdeberta-nli staged: the command line resolves
    fact/claims to the NLI evaluator (not MiniCheck) before it loads anything, and scores; its values
    equal Scorer's with the same settings."""
    from make_test_checkpoint import build_nli_checkpoint

    nli = build_nli_checkpoint(tmp_path / "mdeberta-nli", data_dir=shared_data)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", **r}) + "\n" for i, r in enumerate(RECORDS)))
    assert main(["score", str(src), "--task", "fact", "--aspect", "claims", "--claim-checker", "fact/nli_support",
                 "--model", f"mdeberta-nli={nli}", "--generator", "none", "-o", str(out), "--no-progress"]) == 0
    got = [json.loads(x)["scores"]["claims"] for x in out.read_text().splitlines()]
    want = Scorer(model={"mdeberta-nli": str(nli)}, claim_checker="fact/nli_support", generator="none").score(
        RECORDS, task="fact", aspect="claims")
    assert got == pytest.approx([e.value for e in want.examples], abs=1e-9)
