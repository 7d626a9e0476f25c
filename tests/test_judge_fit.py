"""Issue 44: judges that reason on real generation, on a llama stand-in fitted to write Themis's
rating prefix (``make_test_checkpoint.py --fit judge``, ``scripts/fit_judge.py``): every fitted
example is ``ok``, its rationale is the generated text, and its expected rating equals a plain
computation from the model's own next-token probabilities after rationale + forced prefix."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from fit_judge import fit_examples, rationale  # noqa: E402
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local.engine import Engine  # noqa: E402
from unieval_local.judges import judge_examples  # noqa: E402


@pytest.fixture(scope="module")
def themis_fitted(tmp_path_factory, shared_data) -> Path:
    """A llama stand-in for ``themis`` fitted with ``--fit judge`` (about 45 CPU seconds)."""
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("judgefit") / "themis", layout="llama",
                                      data_dir=shared_data, evaluator="themis", fit="judge")


def _plain_rating(folder: Path, text: str) -> float:
    """E = sum k p(k) over 1..5 renormalised, from a plain transformers forward pass over ``text``'s
    tokens: p(k) the next-token probability of the digit's tokens with and without a leading space."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(lm(input_ids=ids).logits[0, -1].double(), -1).numpy()
    mass = []
    for k in range(1, 6):
        forms = {i for i in (tok.convert_tokens_to_ids(str(k)), tok.convert_tokens_to_ids("\u0120" + str(k)))
                 if i is not None and i != tok.unk_token_id}
        mass.append(sum(probs[i] for i in forms))
    p = np.array(mass) / sum(mass)
    return float(np.dot(np.arange(1, 6), p))


def test_fitted_themis_stand_in_judges_ok_with_its_own_probabilities(themis_fitted, shared_data):
    runner = Engine(model={"themis": str(themis_fitted)}).runner("themis")
    examples = fit_examples(shared_data)
    run = judge_examples(runner, examples, aspect="themis_consistency")
    assert run.num_failed == 0
    assert [o.status for o in run.outcomes] == ["ok"] * len(examples)
    assert run.judge["evaluator"] == "themis"
    from unieval_local.registry.tasks import DEFAULT_REGISTRY

    aspect = DEFAULT_REGISTRY.get_aspect("summarization", "themis_consistency")
    fmt = runner.evaluator.prompt_format
    for ex, o in zip(examples, run.outcomes):
        query, _ = fmt.query(aspect, ex["source"], ex["target"])
        rendered = runner.render_prompt(query.encode()[0])
        g = runner.generate([rendered], max_new_tokens=fmt.max_new_tokens, stop=[fmt.stop])[0]
        assert g.finish == "stop"
        assert o.rationale == g.text == rationale("themis")
        expected = _plain_rating(themis_fitted, rendered + g.text + fmt.forced)
        assert o.rating == pytest.approx(expected, abs=1e-6)
        assert abs(o.rating - ex["ratings"]["consistency"]) < 0.05  # the memorised rating dominates
        assert sum(o.distribution.values()) == pytest.approx(1.0, abs=1e-12)
        assert 0.9 < o.valid_mass <= 1.0


@pytest.fixture(scope="module")
def themis_plain(tmp_path_factory, shared_data) -> Path:
    """The same llama stand-in for ``themis``, not fitted."""
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("judgeplain") / "themis", layout="llama",
                                      data_dir=shared_data, evaluator="themis")


CLAIMS = [{"source": "Peter and Elizabeth took a taxi to attend the night party in the city.",
           "target": "Peter and Elizabeth took a taxi to a party."},
          {"source": "Peter and Elizabeth took a taxi to attend the night party in the city.",
           "target": "Peter and Elizabeth took a bus home."}]


def test_plain_themis_stand_in_fails_every_example_and_names_them(themis_plain):
    """A random stand-in never writes ``Rating:``: each answer runs to max_new_tokens
    (``truncated``), all are counted, and Scorer.score refuses naming both examples."""
    from unieval_local.api import Scorer
    from unieval_local.errors import NonFiniteScoreError

    runner = Engine(model={"themis": str(themis_plain)}).runner("themis")
    run = judge_examples(runner, CLAIMS, aspect="themis_consistency")
    assert [o.status for o in run.outcomes] == ["truncated", "truncated"]
    assert run.num_failed == 2 and all(o.rating is None for o in run.outcomes)
    assert np.isnan(run.mean_valid_mass)
    with pytest.warns(UserWarning, match="2 of 2 judge answers have no rating .*2 truncated"):
        with pytest.raises(NonFiniteScoreError, match=r"no rating for examples \[0, 1\]"):
            Scorer(model={"themis": str(themis_plain)}).score(CLAIMS, task="summarization",
                                                              aspect="themis_consistency")
    # a batch run writes an error line per record that says the judge wrote no rating (not "non-finite logits")
    import json as _json

    from unieval_local.batch import run_batch

    src, out = themis_plain.parent / "claims.jsonl", themis_plain.parent / "claims.out.jsonl"
    src.write_text("".join(_json.dumps({"id": f"r{i}", **c}) + "\n" for i, c in enumerate(CLAIMS)))
    with pytest.warns(UserWarning, match="2 of 2 judge answers"):
        run_batch(src, out, task="summarization", aspects=["themis_consistency"],
                  settings={"model": {"themis": str(themis_plain)}}, progress=False)
    errors = [_json.loads(x)["error"] for x in out.read_text().splitlines()]
    assert [e["type"] for e in errors] == ["NonFiniteScore"] * 2
    assert all(e["message"].startswith("no rating for themis_consistency: the judge wrote none") for e in errors)
