"""Issue 37, item 1: ``--aspect all`` and the default aspects mean the task's own set (its own
evaluator's: UniEval's four for summarization), the same on every machine whatever else is
staged; ``all+`` is every aspect whose evaluator is here; ``geval`` / ``seahorse`` are family
groups. The README's main job gives the same bytes with and without a G-Eval model staged, and
the sidecar and the Python result name the aspects ``aspect_mean`` averages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_causal_lm_checkpoint  # noqa: E402

from unieval_local.cli import main  # noqa: E402
from unieval_local.registry.tasks import DEFAULT_REGISTRY  # noqa: E402

OWN = ["coherence", "consistency", "fluency", "relevance"]
GEVAL = ["geval_coherence", "geval_consistency", "geval_relevance", "geval_fluency"]


@pytest.fixture(scope="module")
def geval_ckpt(tmp_path_factory, shared_data) -> Path:
    return build_causal_lm_checkpoint(tmp_path_factory.mktemp("llm") / "g-eval", layout="qwen2",
                                      data_dir=shared_data, seed=3, evaluator="g-eval")


@pytest.fixture
def home(tmp_path, tiny_ckpt, monkeypatch) -> Path:
    """``$UNIEVAL_LOCAL_HOME`` holding the unieval-sum stand-in only (a test links g-eval in)."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "unieval-sum").symlink_to(tiny_ckpt, target_is_directory=True)
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(folder))
    return folder


@pytest.fixture
def summeval_jsonl(tmp_path, summeval_records) -> Path:
    path = tmp_path / "summeval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in summeval_records[:3]))
    return path


def _main_job(src: Path, out: Path, *aspect_args: str) -> tuple[bytes, dict]:
    """The README's main job (``score ... --task summarization [--aspect ...]``): the output's
    bytes and its sidecar."""
    rc = main(["score", str(src), "--task", "summarization", *aspect_args, "--output", str(out), "--no-progress"])
    assert rc == 0
    return out.read_bytes(), json.loads(Path(str(out) + ".meta.json").read_text())


def test_registry_groups_are_the_tasks_own_sets():
    assert DEFAULT_REGISTRY.aspect_names("summarization", "all") == OWN
    assert DEFAULT_REGISTRY.aspect_names("summarization", None) == OWN
    assert DEFAULT_REGISTRY.aspect_names("dialogue", "all") == ["naturalness", "coherence", "engagingness",
                                                                "groundedness", "understandability"]
    assert DEFAULT_REGISTRY.aspect_names("data2text", None) == ["naturalness", "informativeness"]
    assert DEFAULT_REGISTRY.aspect_names("fact", "all") == ["consistency"]
    assert DEFAULT_REGISTRY.aspect_names("summarization", ["geval"]) == GEVAL
    assert DEFAULT_REGISTRY.aspect_names("summarization", ["all", "geval"]) == OWN + GEVAL
    assert len(DEFAULT_REGISTRY.aspect_names("summarization", "all+")) == 22  # 14 + the judges that reason (issue 44)
    assert DEFAULT_REGISTRY.optional_aspects("summarization", "all") == []
    judges = [f"{j}_{m}" for j in ("themis", "prometheus") for m in ("coherence", "consistency", "fluency", "relevance")]
    assert DEFAULT_REGISTRY.optional_aspects("summarization", ["all+", "geval"])[4:] == [
        "comprehensible", "repetition", "grammar", "attribution", "main_ideas", "conciseness", *judges]


def test_main_job_is_byte_identical_with_a_geval_model_staged(home, geval_ckpt, summeval_jsonl, tmp_path):
    before_all, meta_all = _main_job(summeval_jsonl, tmp_path / "a.jsonl", "--aspect", "all")
    before_default, _ = _main_job(summeval_jsonl, tmp_path / "d.jsonl")
    (home / "g-eval").symlink_to(geval_ckpt, target_is_directory=True)
    after_all, meta_all_staged = _main_job(summeval_jsonl, tmp_path / "a2.jsonl", "--aspect", "all")
    after_default, _ = _main_job(summeval_jsonl, tmp_path / "d2.jsonl")
    assert after_all == before_all and after_default == before_default
    lines = [json.loads(x) for x in after_all.splitlines()]
    assert all(list(x["scores"]) == OWN and "aspect_mean" in x for x in lines)
    assert meta_all["aspect_mean_of"] == meta_all_staged["aspect_mean_of"] == OWN
    # all+ adds what is staged: the four G-Eval aspects, and aspect_mean moves with them
    wide, meta_wide = _main_job(summeval_jsonl, tmp_path / "w.jsonl", "--aspect", "all+")
    wide_lines = [json.loads(x) for x in wide.splitlines()]
    assert all(list(x["scores"]) == OWN + GEVAL for x in wide_lines)
    assert meta_wide["aspect_mean_of"] == OWN + GEVAL
    assert [x["aspect_mean"] for x in wide_lines] != [x["aspect_mean"] for x in lines]
    # the family group: the four, as if named
    fam, meta_fam = _main_job(summeval_jsonl, tmp_path / "g.jsonl", "--aspect", "geval")
    assert all(list(json.loads(x)["scores"]) == GEVAL for x in fam.splitlines())
    assert meta_fam["aspect_mean_of"] == GEVAL


def test_all_plus_leaves_out_what_is_not_staged_with_one_warning(home, summeval_jsonl, tmp_path, capsys):
    wide, meta = _main_job(summeval_jsonl, tmp_path / "w.jsonl", "--aspect", "all+")
    assert all(list(json.loads(x)["scores"]) == OWN for x in wide.splitlines())
    assert meta["aspect_mean_of"] == OWN
    err = capsys.readouterr().err
    assert err.count("whose evaluators are not here") == 1 and "geval_coherence" in err


def test_python_result_names_what_aspect_mean_averages(home, geval_ckpt, summeval_records):
    from unieval_local import Scorer

    (home / "g-eval").symlink_to(geval_ckpt, target_is_directory=True)
    data = summeval_records[:2]
    default = Scorer(device="cpu").evaluate(data, task="summarization")
    assert default.aspects == OWN and default.mean_of == tuple(OWN)
    assert Scorer(device="cpu").evaluate(data, task="summarization", aspects="all").mean_of == tuple(OWN)
    wide = Scorer(device="cpu").evaluate(data, task="summarization", aspects="all+")
    assert wide.mean_of == tuple(OWN + GEVAL)
    assert "mean_of" not in default.model_dump()  # the JSON keeps its shape: ``aspects`` says it there


def test_all_does_not_drop_an_unstaged_aspect_of_the_own_set(tmp_path, geval_ckpt, summeval_jsonl, monkeypatch,
                                                             capsys):
    # only G-Eval staged, offline: ``all`` asks for unieval-sum and fails naming it, as a named aspect does
    folder = tmp_path / "only-geval"
    folder.mkdir()
    (folder / "g-eval").symlink_to(geval_ckpt, target_is_directory=True)
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", str(folder))
    rc = main(["score", str(summeval_jsonl), "--task", "summarization", "--aspect", "all", "--offline",
               "--output", str(tmp_path / "o.jsonl"), "--no-progress"])
    named = main(["score", str(summeval_jsonl), "--task", "summarization", "--aspect", "coherence", "--offline",
                  "--output", str(tmp_path / "n.jsonl"), "--no-progress"])
    assert rc == named != 0
    assert "unieval-sum" in capsys.readouterr().err


def test_meta_and_html_report_name_what_overall_averages(tmp_path, capsys):
    from unieval_local.analysis.html_report import build_report

    pytest.importorskip("jinja2")
    rng = [0.1, 0.5, 0.3, 0.9, 0.7, 0.2]
    out, human = tmp_path / "o.jsonl", tmp_path / "h.jsonl"
    out.write_text("".join(json.dumps({"index": i, "key": i, "doc_id": i // 3, "system_id": i % 3,
                                       "scores": {"coherence": v, "fluency": 1 - v}, "aspect_mean": 0.5}) + "\n"
                           for i, v in enumerate(rng)))
    human.write_text("".join(json.dumps({"id": i, "human": {"coherence": v, "fluency": v, "overall": v}}) + "\n"
                             for i, v in enumerate(rng)))
    assert main(["meta", str(out), "--human", str(human), "--bootstrap", "0", "--json", str(tmp_path / "m.json")]) == 0
    assert "overall: each record's aspect_mean, the mean of coherence, fluency" in capsys.readouterr().out
    assert json.loads((tmp_path / "m.json").read_text())["overall_mean_of"] == ["coherence", "fluency"]
    assert "is the mean of coherence, fluency." in build_report(out)
