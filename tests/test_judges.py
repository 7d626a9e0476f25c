"""Judges that reason (issue 44, items 2 and 5): Themis's and Prometheus 2's formats, generated
rationale, forced rating prefix, the rating read after it. A fake runner (render_prompt, generate,
distributions returning fixed values) checks the arithmetic, the exact prompt texts (the model
cards' templates filled by hand here), the failure statuses and ``num_failed``; a random llama
stand-in checks the read on a real model and the engine path (its ``generate`` replaced by a fixed
one: the causal-lm runner's own generation is another part of issue 44)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from unieval_local.judges import judge_examples
from unieval_local.models.judging import judge_prompts
from unieval_local.registry.evaluators import get_evaluator
from unieval_local.registry.tasks import get_aspect
from unieval_local.text.chat import ChatQuery
from unieval_local.text.judges import PROMETHEUS_SYSTEM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
SOURCE = "The council approved the new park on Tuesday after a long debate about its cost."
TARGET = "A park was approved."


def Gen(text: str, token_ids: tuple = (), finish: str = "stop"):
    """A :class:`~unieval_local.models.base.Generation` (the real one: its ``finish`` is checked)."""
    from unieval_local.models.base import Generation

    return Generation(text, tuple(token_ids), finish)


class FakeRunner:
    """Renders a query as ``<BOS>`` + its parts (plain) or ``[S]system[U]user[A]`` + prefix (chat);
    generates from ``answers`` (target text -> Gen); reads ``masses`` (target -> rating masses).
    Records what it was asked."""

    fingerprint = "fake"

    def __init__(self, answers: dict[str, Gen], masses: dict[str, dict[str, float]]):
        self.answers, self.masses = answers, masses
        self.generated: list[tuple[str, int, list[str]]] = []
        self.read: list[str] = []

    @staticmethod
    def text_of(prompt: str) -> str:
        q = ChatQuery.decode(prompt)
        if q.plain:
            return "<BOS>" + "".join(t for _, t in q.parts) + q.prefix
        system = "".join(t for r, t in q.parts if r == "system")
        user = "".join(t for r, t in q.parts if r == "user")
        return f"[S]{system}[U]{user}[A]" + q.prefix

    def fit_prompt(self, prompt: str, *, max_length: int) -> str:
        return prompt

    def render_prompt(self, prompt: str) -> str:
        return self.text_of(prompt)

    def _target(self, text: str) -> str:
        return next(t for t in self.answers if t in text)

    def generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
        out = []
        for p in prompts:
            self.generated.append((p, max_new_tokens, list(stop)))
            out.append(self.answers[self._target(p)])
        return out

    def distributions(self, prompts, *, max_length):
        self.read += prompts
        return [dict(self.masses[self._target(self.text_of(p))]) for p in prompts]


MASSES = {"1": 0.05, "2": 0.1, "3": 0.2, "4": 0.3, "5": 0.15}  # sum 0.8


def test_expected_rating_and_valid_mass_are_the_hand_computation():
    runner = FakeRunner({TARGET: Gen("The summary is short.\n")}, {TARGET: MASSES})
    run = judge_examples(runner, [{"source": SOURCE, "target": TARGET}], aspect="themis_coherence")
    o = run.outcomes[0]
    # p = mass / 0.8 = .0625, .125, .25, .375, .1875; E = .0625 + .25 + .75 + 1.5 + .9375 = 3.5
    assert o.status == "ok" and o.rating == pytest.approx(3.5, abs=1e-12)
    assert o.distribution == pytest.approx({"1": 0.0625, "2": 0.125, "3": 0.25, "4": 0.375, "5": 0.1875}, abs=1e-12)
    assert o.valid_mass == pytest.approx(0.8, abs=1e-12) and run.mean_valid_mass == pytest.approx(0.8, abs=1e-12)
    assert o.value == pytest.approx((3.5 - 1) / 4, abs=1e-12) and run.num_failed == 0
    assert o.rationale == "The summary is short.\n"
    assert run.judge == {"evaluator": "themis", "format": "themis", "fingerprint": "fake",
                         "source": "https://github.com/PKU-ONELab/Themis/blob/main/eval.py"}


def test_themis_prompt_is_its_eval_py_template_filled_by_hand_with_the_forced_prefix_after_the_rationale():
    runner = FakeRunner({TARGET: Gen("The summary is coherent but thin.\n")}, {TARGET: MASSES})
    judge_examples(runner, [{"source": SOURCE, "target": TARGET}], aspect="themis_fluency")
    # eval.py's PROMPT (github.com/PKU-ONELab/Themis), filled by hand: task, criterion, descriptions
    prompt = ("###Instruction###\n"
              "Please act as an impartial and helpful evaluator for natural language generation (NLG), and the "
              "audience is an expert in the field.\n"
              "Your task is to evaluate the quality of Summarization strictly based on the given evaluation "
              "criterion.\n"
              "Begin the evaluation by providing your analysis concisely and accurately, and then on the next line, "
              "start with \"Rating:\" followed by your rating on a Likert scale from 1 to 5 (higher means better).\n"
              "You MUST keep to the strict boundaries of the evaluation criterion and focus solely on the issues and "
              "errors involved; otherwise, you will be penalized.\n"
              "Make sure you read and understand these instructions, as well as the following evaluation criterion "
              "and example content, carefully.\n\n"
              "###Evaluation Criterion###\n"
              "Fluency: Measure the quality of individual sentences of the summary: they should be free of "
              "formatting problems, capitalization errors and ungrammatical constructions that make them hard to "
              "read.\n\n"
              "###Example###\nArticle:\n" + SOURCE + "\n\nSummary:\n" + TARGET + "\n\n###Your Evaluation###\n")
    (generated, budget, stop), = runner.generated
    assert generated == "<BOS>" + prompt  # plain: no chat template, as eval.py sends it
    assert budget == 2048 and stop == ["Rating:"]          # eval.py's max_new_tokens; its "Rating:" line
    read, = runner.read
    assert runner.text_of(read) == "<BOS>" + prompt + "The summary is coherent but thin.\n" + "Rating: "
    q = ChatQuery.decode(read)
    assert q.readout == "rating-mass" and q.cut is None and q.scale == 5


def test_prometheus_prompt_is_its_absolute_template_filled_by_hand_with_the_forced_prefix():
    runner = FakeRunner({TARGET: Gen("Feedback: The summary is supported. ")}, {TARGET: MASSES})
    judge_examples(runner, [{"source": SOURCE, "target": TARGET}], aspect="prometheus_consistency")
    user = ("###Task Description:\n"
            "An instruction (might include an Input inside it), a response to evaluate, and a score rubric "
            "representing a evaluation criteria are given.\n"
            "1. Write a detailed feedback that assess the quality of the response strictly based on the given "
            "score rubric, not evaluating in general.\n"
            "2. After writing a feedback, write a score that is an integer between 1 and 5. You should refer to "
            "the score rubric.\n"
            "3. The output format should look as follows: \"(write a feedback for criteria) [RESULT] (an integer "
            "number between 1 and 5)\"\n"
            "4. Please do not generate any other opening, closing, and explanations.\n\n"
            "###The instruction to evaluate:\nSummarize the following article.\n\n" + SOURCE + "\n\n"
            "###Response to evaluate:\n" + TARGET + "\n\n"
            "###Score Rubrics:\n[Does the summary state only facts that the article supports?]\n"
            "Score 1: Most statements of the summary are contradicted by or absent from the article.\n"
            "Score 2: Several statements of the summary are unsupported or contradicted.\n"
            "Score 3: The summary is mostly supported, with one clear unsupported or contradicted statement.\n"
            "Score 4: The summary is supported by the article apart from a minor imprecision.\n"
            "Score 5: Every statement of the summary is supported by the article.\n\n"
            "###Feedback: ")
    (generated, budget, stop), = runner.generated
    assert generated == f"[S]{PROMETHEUS_SYSTEM}[U]{user}[A]"
    assert budget == 1024 and stop == ["[RESULT]"]
    read, = runner.read
    assert runner.text_of(read) == f"[S]{PROMETHEUS_SYSTEM}[U]{user}[A]Feedback: The summary is supported. [RESULT] "
    assert ChatQuery.decode(read).messages()[0][0] == {"role": "system", "content": PROMETHEUS_SYSTEM}


@pytest.mark.parametrize("key", ["coherence", "consistency", "fluency", "relevance"])
def test_every_judge_aspect_is_its_template_with_its_own_criterion(key):
    """Each of the eight aspects: the user text is the source's template filled with that aspect's
    criterion (Themis) or rubric (Prometheus) and the two texts, by str.format here."""
    from unieval_local.text.judges import (PROMETHEUS, PROMETHEUS_PROMPT, THEMIS, THEMIS_CRITERIA, THEMIS_PROMPT,
                                           prometheus_rubric)

    runner = FakeRunner({TARGET: Gen("x")}, {TARGET: MASSES})
    themis, _ = THEMIS.query(get_aspect("summarization", f"themis_{key}"), SOURCE, TARGET)
    assert runner.text_of(themis.encode()[0]) == "<BOS>" + THEMIS_PROMPT.format(
        task="Summarization", aspect=THEMIS_CRITERIA[key], source_des="Article", source=SOURCE,
        target_des="Summary", target=TARGET)
    prometheus, _ = PROMETHEUS.query(get_aspect("summarization", f"prometheus_{key}"), SOURCE, TARGET)
    user = PROMETHEUS_PROMPT.format(instruction="Summarize the following article.\n\n" + SOURCE, response=TARGET,
                                    rubric=prometheus_rubric(key))
    assert runner.text_of(prometheus.encode()[0]) == f"[S]{PROMETHEUS_SYSTEM}[U]{user}[A]"
    assert prometheus_rubric(key).count("\nScore ") == 5 and THEMIS_CRITERIA[key].startswith(key.capitalize() + ": ")


def test_failed_generations_are_counted_reported_and_never_scored():
    answers = {"Park approved.": Gen("Fine. "), "A long rambling text": Gen("It goes on and on", finish="length"),
               "No rating here.": Gen("Score: 4", finish="eos"), "Too long.": Gen("", finish="too_long"),
               "Silent.": Gen("Hm. ")}
    masses = {"Park approved.": MASSES, "Silent.": {str(k): 0.0 for k in range(1, 6)},
              **{t: {"3": 1.0} for t in answers if t not in ("Park approved.", "Silent.")}}
    runner = FakeRunner(answers, masses)
    run = judge_examples(runner, [{"source": SOURCE, "target": t} for t in answers], aspect="prometheus_coherence")
    assert [o.status for o in run.outcomes] == ["ok", "truncated", "no_rating_prefix", "too_long", "no_rating_mass"]
    assert run.num_failed == 4
    assert run.outcomes[0].rating == pytest.approx(3.5, abs=1e-12)
    assert all(o.rating is None and np.isnan(o.value) and o.distribution == {} for o in run.outcomes[1:])
    assert run.outcomes[1].rationale == "It goes on and on" and run.outcomes[2].rationale == "Score: 4"
    # only the generations that stopped at the rating prefix were read; their masses averaged (0.8 and 0)
    assert [runner.text_of(p).split("###Response to evaluate:\n")[1].split("\n")[0] for p in runner.read] == \
        ["Park approved.", "Silent."]
    assert run.mean_valid_mass == pytest.approx(0.4, abs=1e-12)


def test_mean_valid_mass_over_examples_and_identical_prompts_judged_once():
    answers = {"First.": Gen("a "), "Second.": Gen("b ")}
    masses = {"First.": {"5": 0.9}, "Second.": {"1": 0.2, "2": 0.2}}
    runner = FakeRunner(answers, masses)
    data = [{"source": SOURCE, "target": "First."}, {"source": SOURCE, "target": "Second."},
            {"source": SOURCE, "system_output": "First."}]
    run = judge_examples(runner, data, aspect="themis_relevance")
    assert len(runner.generated) == 2 and len(runner.read) == 2
    assert [o.rating for o in run.outcomes] == pytest.approx([5.0, 1.5, 5.0], abs=1e-12)
    assert run.mean_valid_mass == pytest.approx((0.9 + 0.4 + 0.9) / 3, abs=1e-12)


def test_bad_input_names_the_example_and_field():
    runner = FakeRunner({}, {})
    with pytest.raises(ValueError, match=r"example 1: field 'source' is missing"):
        judge_examples(runner, [{"source": "s", "target": "t"}, {"target": "t"}], aspect="themis_coherence")
    with pytest.raises(ValueError, match=r"example 0: field 'target' is int"):
        judge_examples(runner, [{"source": "s", "target": 3}], aspect="themis_coherence")
    with pytest.raises(ValueError, match="not a judge that reasons"):
        judge_examples(runner, [{"source": "s", "target": "t"}], aspect="geval_coherence")
    g = ChatQuery((("user", "x"),), "A:", "rating").encode()[0]
    with pytest.raises(ValueError, match="not a judge query"):
        judge_prompts(runner, [g], max_length=100)


def test_tasks_lists_the_judge_aspects_with_their_evaluators():
    out = subprocess.run([*CLI, "tasks"], capture_output=True, text=True, check=True).stdout
    rows = {line.split()[1]: line.split()[-1] for line in out.splitlines() if line.startswith("summarization ")}
    for key in ("coherence", "consistency", "fluency", "relevance"):
        assert rows[f"themis_{key}"] == "themis"
        assert rows[f"prometheus_{key}"] == "prometheus-7b-v2.0"
    assert get_evaluator("themis").hub_id == "PKU-ONELab/Themis"
    assert get_evaluator("prometheus-7b-v2.0").model_types[0] == "mistral"


def test_mistral_parameter_count_is_exact():
    """Prometheus 2 is a Mistral: the memory check's count equals the model's own on a tiny config."""
    from transformers import MistralConfig, MistralForCausalLM

    from unieval_local.models.causal_lm.model import LAYOUTS, parameter_count

    config = MistralConfig(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2)
    assert "mistral" in LAYOUTS
    assert parameter_count(config) == sum(p.numel() for p in MistralForCausalLM(config).parameters())


# --------------------------------------------------------------------------- a real stand-in


@pytest.fixture(scope="module")
def llama(tmp_path_factory, shared_data) -> dict[str, Path]:
    """One random llama stand-in per judge (each folder records its evaluator), the same weights."""
    root = tmp_path_factory.mktemp("llm")
    return {name: build_causal_lm_checkpoint(root / name, layout="llama", data_dir=shared_data, seed=5,
                                             evaluator=name) for name in ("themis", "prometheus-7b-v2.0")}


RATIONALE = "The summary is short. "


def _fixed_generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
    return [Gen(RATIONALE) for _ in prompts]


@pytest.mark.parametrize("aspect,evaluator", [("themis_coherence", "themis"),
                                              ("prometheus_coherence", "prometheus-7b-v2.0")])
def test_the_read_on_a_real_stand_in_is_the_models_own_probabilities(llama, monkeypatch, aspect, evaluator):
    """Generation fixed; the read is the softmax at the position after rationale + forced prefix,
    each digit's single-token forms summed; the engine's score is the same expected rating."""
    from unieval_local import Scorer
    from unieval_local.models.causal_lm.runner import CausalLMRunner, _ids

    monkeypatch.setattr(CausalLMRunner, "generate", _fixed_generate, raising=False)
    scorer = Scorer(model={evaluator: str(llama[evaluator])}, device="cpu")
    runner = scorer.engine.runner(evaluator)
    data = [{"source": SOURCE, "target": TARGET}, {"source": SOURCE, "target": "Shares fell."}]
    run = judge_examples(runner, data, aspect=aspect)
    fmt = get_evaluator(evaluator).prompt_format
    for ex, o in zip(data, run.outcomes):
        query, _ = fmt.query(get_aspect("summarization", aspect), ex["source"], ex["target"])
        text = runner.render_prompt(query.encode()[0]) + RATIONALE + fmt.forced
        probs = runner.probabilities([_ids(runner.model, text)])[0]
        mass = np.array([probs[list(runner.model.forms_of(str(k)))].sum() for k in range(1, 6)])
        assert o.status == "ok"
        # float32 forward: alone here, batched (left-padded) in the judge's read: equal to ~1e-7 relative
        assert o.valid_mass == pytest.approx(mass.sum(), rel=1e-6)
        assert o.rating == pytest.approx(float(np.dot(np.arange(1, 6), mass / mass.sum())), rel=1e-6)
    if evaluator == "themis":  # plain: BOS and the raw prompt, no chat template
        assert text.startswith(runner.model.tokenizer.bos_token or "###") and "<|start_header_id|>" not in text
    else:
        assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" + PROMETHEUS_SYSTEM)
    result = scorer.evaluate(data, task="summarization", aspects=[aspect])  # the engine path: the same ratings
    assert [e.scores[aspect] for e in result.examples] == pytest.approx([o.rating for o in run.outcomes], rel=1e-9)


def test_a_failed_generation_is_never_scored_by_the_engine(llama, monkeypatch):
    """Through Scorer: a rationale that hit max_new_tokens gets no score: a warning counts it by
    status and the request fails naming the example (never a silent score); judge_examples
    reports that example's status and scores the other as the engine would."""
    from unieval_local import NonFiniteScoreError, Scorer
    from unieval_local.models.causal_lm.runner import CausalLMRunner

    def generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
        return [Gen("Rambling on", finish="length") if "Shares fell." in p else Gen(RATIONALE) for p in prompts]

    monkeypatch.setattr(CausalLMRunner, "generate", generate, raising=False)
    scorer = Scorer(model={"themis": str(llama["themis"])}, device="cpu")
    data = [{"source": SOURCE, "target": TARGET}, {"source": SOURCE, "target": "Shares fell."}]
    with pytest.warns(UserWarning, match=r"1 of 2 judge answers have no rating and are not scored \(NaN\): "
                                         r"1 truncated"), \
            pytest.raises(NonFiniteScoreError, match=r"no rating for examples \[1\]: the judge of themis_coherence"):
        scorer.evaluate(data, task="summarization", aspects=["themis_coherence"])
    run = judge_examples(scorer.engine.runner("themis"), data, aspect="themis_coherence")
    assert [o.status for o in run.outcomes] == ["ok", "truncated"] and run.num_failed == 1
    alone = scorer.evaluate(data[:1], task="summarization", aspects=["themis_coherence"])
    assert alone.examples[0].scores["themis_coherence"] == pytest.approx(run.outcomes[0].rating, rel=1e-9)


def test_a_long_source_is_cut_to_the_window_before_generation(llama, monkeypatch):
    """As scoring cuts it: the source loses its end until the rendered prompt fits max_length; the
    read continues that same cut prompt (rationale + forced prefix after it)."""
    from unieval_local import Scorer
    from unieval_local.models.causal_lm.runner import CausalLMRunner, _ids

    seen: list[str] = []

    def generate(self, prompts, *, max_new_tokens, stop=(), max_length=None):
        seen.extend(prompts)
        return [Gen(RATIONALE) for _ in prompts]

    monkeypatch.setattr(CausalLMRunner, "generate", generate, raising=False)
    runner = Scorer(model={"themis": str(llama["themis"])}, device="cpu").engine.runner("themis")
    long_source = " ".join([SOURCE] * 40)
    whole = runner.count([judge_query("themis_coherence", long_source)])[0]
    run = judge_examples(runner, [{"source": long_source, "target": TARGET}], aspect="themis_coherence",
                         max_length=whole - 100)
    text, = seen
    assert len(_ids(runner.model, text)) <= whole - 100
    kept = text.split("Article:\n", 1)[1].split("\n\nSummary:\n", 1)[0]
    assert 0 < len(kept) < len(long_source) and long_source.startswith(kept)
    assert run.outcomes[0].status == "ok" and runner.render_prompt(runner.fit_prompt(
        judge_query("themis_coherence", long_source), max_length=whole - 100)) == text


def judge_query(aspect: str, source: str, target: str = TARGET) -> str:
    fmt = get_evaluator(get_aspect("summarization", aspect).checkpoint).prompt_format
    return fmt.query(get_aspect("summarization", aspect), source, target)[0].encode()[0]
