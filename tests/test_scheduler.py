"""The scheduler's micro-batches (issue 28, items 1-5): each request answered as soon as its last
query is scored, fairness between a large request and small ones, cost before admission,
cancellation, and failures kept to the requests that cause them. A fake runner (values from the
prompt's text, tokens = words) makes every expected value exact."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FakeRunner, fake_factory
from unieval_local.engine import Engine, Job
from unieval_local.errors import CheckpointError, InvalidExampleError, ModelRuntimeError
from unieval_local.pipeline.validate import validate_examples
from unieval_local.registry.tasks import DEFAULT_REGISTRY
from unieval_local.requests.score import ScoreRequest
from unieval_local.requests.scheduler import Scheduler

SOURCE = "The council approved the park. Work starts in May. The park has a lake."


def value(prompt: str) -> float:
    return (sum(map(ord, prompt)) % 89) / 89


def examples(n: int, tag: str = "S") -> list[dict]:
    return [{"target": f"Summary {tag}{i} is short. It has {i % 3} more parts.", "source": SOURCE,
             "references": ["The park was approved."]} for i in range(n)]


def make(fake_ckpt, runner=None, batch_tokens: int = 240, **kw) -> tuple[Scheduler, FakeRunner]:
    runner = runner or FakeRunner(value)
    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(runner), batch_tokens=batch_tokens)
    return Scheduler(engine, **kw), runner


def one_shot(fake_ckpt, exs, aspects) -> dict[str, np.ndarray]:
    """The same examples through Engine.run: every prompt in one list (the reference)."""
    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(value)))
    resolved = [DEFAULT_REGISTRY.get_aspect("summarization", a) for a in aspects]
    parsed, problems = validate_examples(exs, resolved)
    assert not problems
    results, _ = engine.run({"j": Job(tuple(resolved), parsed)})
    return results["j"].values


def test_each_request_is_answered_when_its_last_query_is_scored_and_equals_one_shot(fake_ckpt):
    scheduler, runner = make(fake_ckpt)
    big = ScoreRequest(examples(60, "B"), "summarization", ["coherence", "consistency"])
    small = ScoreRequest(examples(1, "s"), "summarization", ["coherence"])
    f_big = scheduler.submit(big)
    scheduler.step()  # the large request alone: it leads the first micro-batch
    f_small = scheduler.submit(small)
    scheduler.step()  # the small one arrived: it is smaller, it leads, and it is answered
    assert f_small.done() and not f_big.done()
    steps = 2
    while not f_big.done():
        scheduler.step()
        steps += 1
    assert steps > 3  # the large one took several micro-batches
    want = one_shot(fake_ckpt, examples(60, "B"), ["coherence", "consistency"])
    got = f_big.result().values
    assert all(np.array_equal(got[a], want[a]) for a in want)
    assert f_small.result().values["coherence"].tolist() == one_shot(fake_ckpt, examples(1, "s"),
                                                                      ["coherence"])["coherence"].tolist()
    # every micro-batch is one batch of the token budget (rows x longest prompt, in words + 1)
    for call in runner.calls:
        assert len(call) == 1 or len(call) * max(len(p.split()) + 1 for p in call) <= 240


def test_a_large_request_never_leads_twice_while_a_smaller_one_waits_and_is_not_starved(fake_ckpt):
    scheduler, _ = make(fake_ckpt, ageing=4.0)
    f_big = scheduler.submit(ScoreRequest(examples(80, "B"), "summarization", ["consistency"]))
    waited = []
    for k in range(400):
        f = scheduler.submit(ScoreRequest(examples(1, f"k{k}"), "summarization", ["fluency"]))
        start = scheduler.batches
        while not f.done():
            scheduler.step()
        waited.append(scheduler.batches - start)
        if f_big.done():
            break
    assert f_big.done(), "a stream of small requests starved the large one"
    assert max(waited) <= 2  # at most the large one's micro-batch, then its own


def test_the_cost_is_the_queries_before_deduplication_windows_and_references_included(fake_ckpt):
    scheduler, _ = make(fake_ckpt)
    refs = {"target": "The park was approved.", "references": [f"Reference {i} says so." for i in range(600)]}
    assert scheduler.prepare(ScoreRequest([refs], "summarization", ["relevance"])).cost == 600
    two = ScoreRequest(examples(2) + examples(2), "summarization", ["consistency"])  # repeats count twice
    assert scheduler.prepare(two).cost == 4 * 2
    engine = Engine(model=fake_ckpt, runner_factory=fake_factory(FakeRunner(value)), long_input="chunk",
                    max_length=40)
    long = {"target": "The park was approved.", "source": " ".join(["The council met again today."] * 60)}
    chunked = Scheduler(engine).prepare(ScoreRequest([long], "summarization", ["coherence"]))
    assert chunked.cost == len(chunked.planned["unieval-sum"].plan.prompts) > 5  # one query per window


def test_a_cancelled_request_drops_its_queries_but_not_those_a_live_one_shares(fake_ckpt):
    scheduler, runner = make(fake_ckpt)
    shared = examples(1, "shared")
    gone = scheduler.submit(ScoreRequest(shared + examples(30, "gone"), "summarization", ["coherence"]))
    live = scheduler.submit(ScoreRequest(shared + examples(2, "live"), "summarization", ["coherence"]))
    assert gone.cancel()
    while not live.done():
        scheduler.step()
    seen = " ".join(p for call in runner.calls for p in call)
    assert "Summary gone" not in seen and "Summary shared0" in seen
    assert scheduler.queued_queries() == 0 and scheduler.pending() == 0


def test_a_request_the_model_fails_on_fails_alone(fake_ckpt):
    class Poisoned(FakeRunner):
        def score(self, prompts, *, max_length, on_batch=None):
            if any("POISON" in p for p in prompts):
                raise ModelRuntimeError("the model failed on a batch")
            return super().score(prompts, max_length=max_length, on_batch=on_batch)

    scheduler, runner = make(fake_ckpt, Poisoned(value), batch_tokens=4000)
    good = [ScoreRequest(examples(3, f"g{i}"), "summarization", ["coherence"]) for i in range(5)]
    bad = ScoreRequest([{"target": "POISON here.", "source": SOURCE}], "summarization", ["coherence"])
    futures = scheduler.run(good[:2] + [bad] + good[2:])
    with pytest.raises(ModelRuntimeError):
        futures[2].result()
    for f, i in zip(futures[:2] + futures[3:], range(5)):
        assert f.result().values["coherence"].tolist() == one_shot(fake_ckpt, examples(3, f"g{i}"),
                                                                    ["coherence"])["coherence"].tolist()


def test_a_checkpoint_that_does_not_load_fails_only_the_requests_that_need_it(fake_ckpt, tmp_path):
    runner = FakeRunner(value)

    def factory(checkpoint, fingerprint, evaluator):
        if evaluator.name == "unieval-fact":
            raise CheckpointError(f"{checkpoint.path} is damaged: model.safetensors is truncated")
        return fake_factory(runner)(checkpoint, fingerprint, evaluator)

    engine = Engine(model={"unieval-sum": str(fake_ckpt), "unieval-fact": str(fake_ckpt)}, runner_factory=factory)
    scheduler = Scheduler(engine)
    fact = ScoreRequest([{"target": "The park has a lake.", "source": SOURCE}], "fact", ["consistency"])
    summ = [ScoreRequest(examples(2, f"x{i}"), "summarization", ["coherence"]) for i in range(3)]
    futures = scheduler.run([summ[0], fact, summ[1], summ[2]])
    with pytest.raises(CheckpointError, match="damaged"):
        futures[1].result()
    assert [len(f.result().values["coherence"]) for f in (futures[0], futures[2], futures[3])] == [2, 2, 2]


def test_the_same_submissions_give_the_same_micro_batches(fake_ckpt):
    calls = []
    for _ in range(2):
        scheduler, runner = make(fake_ckpt)
        scheduler.run([ScoreRequest(examples(7, f"r{i}"), "summarization", ["coherence", "fluency"])
                       for i in range(6)])
        calls.append(runner.calls)
    assert calls[0] == calls[1] and len(calls[0]) > 3


def test_a_bad_request_fails_alone_and_an_empty_one_is_answered(fake_ckpt):
    scheduler, _ = make(fake_ckpt)
    bad = ScoreRequest([{"target": "", "source": SOURCE}], "summarization", ["coherence"])
    ok = ScoreRequest(examples(2), "summarization", ["coherence"])
    futures = scheduler.run([bad, ok])
    with pytest.raises(InvalidExampleError, match="target"):
        futures[0].result()
    assert len(futures[1].result().values["coherence"]) == 2


def test_a_small_requests_micro_batch_is_not_filled_with_a_large_ones_queries(fake_ckpt):
    scheduler, runner = make(fake_ckpt, batch_tokens=400)
    big = scheduler.submit(ScoreRequest(examples(60, "B"), "summarization", ["consistency"]))
    scheduler.step()
    small = scheduler.submit(ScoreRequest(examples(1, "s"), "summarization", ["coherence"]))
    scheduler.step()
    assert small.done() and not big.done()
    assert all("Summary s0" in p for p in runner.calls[-1])  # its batch held its own query alone


def test_micro_batches_are_cut_to_the_target_step_duration(fake_ckpt):
    import time as clock

    class Slow(FakeRunner):  # 2 ms per prompt word: the model's pace is measured, not told
        def score(self, prompts, *, max_length, on_batch=None):
            clock.sleep(0.002 * sum(len(p.split()) + 1 for p in prompts))
            return super().score(prompts, max_length=max_length, on_batch=on_batch)

    sizes = {}
    for target in (None, 0.05):
        scheduler, runner = make(fake_ckpt, Slow(value), batch_tokens=400, step_seconds=target)
        scheduler.run([ScoreRequest(examples(12, "t"), "summarization", ["coherence"])])
        sizes[target] = [sum(len(p.split()) + 1 for p in call) for call in runner.calls]
    assert max(sizes[None]) > 200  # full batches of the token budget
    assert max(sizes[0.05][1:]) <= 0.05 / 0.002 * 1.5  # about 25 words' worth once the pace is known
