"""``unieval-local benchmark`` (issue 36, parts 2-4): LLM-AggreFact beside its board, and your own
labelled data, on stand-in checkpoints.

The data is SYNTHETIC, written here in LLM-AggreFact's real format (fields ``dataset``, ``doc``,
``claim``, ``label``; the eleven dataset names; ``dev`` and ``test`` files): invented short
documents and claims, never a copy of the gated benchmark. The stand-ins (MiniCheck-Flan-T5,
HHEM-2.1-Open, mDeBERTa NLI) are built by ``scripts/make_test_checkpoint.py``'s builders; their
numbers mean nothing, the pipeline is real. The figures printed must equal
:func:`~unieval_local.analysis.labels.label_report` run directly on the scores files written.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_test_checkpoint import build_hhem_checkpoint, build_nli_checkpoint, build_test_checkpoint  # noqa: E402

from unieval_local.analysis.labels import label_report  # noqa: E402
from unieval_local.batch.benchmark import aggrefact_splits, board  # noqa: E402
from unieval_local.cli import main  # noqa: E402

from conftest import REAL_HOME  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
DATASETS = [d["name"] for d in board()["datasets"]]
STAGED = ("fact/support", "fact/hhem", "fact/nli_support")

_PLACES = ["Arden", "Bexley", "Corran", "Dunmore", "Elsby", "Farrow", "Glenholm"]
_THINGS = ["library", "bridge", "market", "museum", "school", "harbour", "station"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def synthetic_rows(split: str, per_dataset: int = 4) -> list[dict]:
    """Invented rows for every dataset: half the claims supported (label 1), half not (0)."""
    rows = []
    for d, name in enumerate(DATASETS):
        for i in range(per_dataset):
            k = d * per_dataset + i + (100 if split == "dev" else 0)
            place, thing, day = _PLACES[k % 7], _THINGS[(k // 7) % 7], _DAYS[(k * 3) % 7]
            doc = (f"The new {thing} in {place} opened on {day} after two years of work. "
                   f"The council said it cost {10 + k % 50} million pounds. Residents welcomed the {thing}.")
            label = i % 2 if name != "Wice" else (i + 1) % 2
            claim = (f"The {thing} in {place} opened on {day}." if label else
                     f"The {thing} in {place} opened on {_DAYS[(k * 3 + 2) % 7]} and cost nothing.")
            rows.append({"dataset": name, "doc": doc, "claim": claim, "label": label,
                         "contamination_identifier": f"synthetic-{split}-{k}"})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="session")
def standins(tmp_path_factory, shared_data) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bench-ckpts")
    return {
        "minicheck-flan-t5-large": build_test_checkpoint(root / "minicheck-flan-t5-large", data_dir=shared_data,
                                                         layout="v1.1", answers=("1", "0"),
                                                         evaluator="minicheck-flan-t5-large"),
        "hhem-2.1-open": build_hhem_checkpoint(root / "hhem-2.1-open", data_dir=shared_data),
        "mdeberta-nli": build_nli_checkpoint(root / "mdeberta-nli", data_dir=shared_data, evaluator="mdeberta-nli"),
    }


def models(standins) -> list[str]:
    return [x for name, folder in standins.items() for x in ("--model", f"{name}={folder}")]


def expected_report(out: Path, aspects, *, dev: bool, **kw):
    """label_report run directly on the scores files the command wrote."""
    def load(split):
        inputs = [json.loads(x) for x in (out / f"{split}.input.jsonl").read_text().splitlines()]
        scores = {x["index"]: x["scores"] for x in map(json.loads, (out / f"{split}.scores.jsonl").read_text().splitlines())}
        return inputs, scores

    def split_data(split, rows):
        _, scores = load(split)
        preds = {a: np.array([scores[i][a.split("/")[1]] for i in range(len(rows))]) for a in aspects}
        return preds, np.array([r["label"] for r in rows]), [r["dataset"] for r in rows]

    test = split_data("test", synthetic_rows("test"))
    return label_report(test[0], test[1], groups=test[2], dev=split_data("dev", synthetic_rows("dev")) if dev else None,
                        **kw)


# ----------------------------------------------------------------------------- end to end
def test_llm_aggrefact_end_to_end_prints_the_board_table_and_equals_label_report(tmp_path, standins, capsys):
    data = tmp_path / "LLM-AggreFact" / "data"
    write_jsonl(data / "dev-00000-of-00001.jsonl", synthetic_rows("dev"))
    write_jsonl(data / "test-00000-of-00001.jsonl", synthetic_rows("test"))
    out, js = tmp_path / "out", tmp_path / "figures.json"
    status = main(["benchmark", "llm-aggrefact", str(data.parent), "-o", str(out), "--json", str(js),
                   "--bootstrap", "200", "--no-progress", *models(standins)])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    table = printed.out
    assert "tuned thresholds: the dev split" in table
    for name in DATASETS:
        assert table.count(f"\n{name} ") == 3, name  # one row per aspect
    assert table.count("\nmean ") == 3
    assert "fact/support (minicheck-flan-t5-large; board: MiniCheck-Flan-T5-L)" in table
    assert "fact/hhem (hhem-2.1-open; board: HHEM-2.1-open)" in table
    assert "fact/nli_support (mdeberta-nli; board: not on the board)" in table
    mc = table.split("fact/support (")[1].split("\n\n")[0]
    mean_row = next(x for x in mc.splitlines() if x.startswith("mean "))
    assert mean_row.split()[-2] == "75.0"  # the board's mean beside ours
    assert "95% bootstrap interval of the mean: BAcc@0.5" in mc
    for aspect, evaluator in (("fact/factcg", "factcg-deberta-large"), ("fact/groundedness", "granite-guardian-3.3-8b"),
                              ("fact/consistency", "unieval-fact")):
        line = next(x for x in table.splitlines() if x.startswith(f"skipped: {aspect}:"))
        assert "not staged" in line and evaluator in line and "--model" in line
    assert "download --checkpoint factcg-deberta-large" in table
    # every figure equals label_report on the written scores
    got = json.loads(js.read_text())
    want = expected_report(out, STAGED, dev=True, bootstrap=200).to_json()
    assert got["report"] == json.loads(json.dumps(want))
    assert got["report"]["group_names"] == DATASETS
    rows = got["board"]["rows"]
    assert rows["fact/nli_support"] is None and rows["fact/support"]["average"] == 75.0
    diff = got["board"]["differences"]["fact/support"]
    mean = got["report"]["mean"]["fact/support"]["balanced_accuracy"]
    assert diff["mean"] == pytest.approx(100 * mean - 75.0, abs=1e-3)
    m = got["report"]["groups"]["fact/hhem"]["Reveal"]
    assert f"{100 * m['balanced_accuracy']:.1f}" in next(x for x in table.split("fact/hhem (")[1].splitlines()
                                                         if x.startswith("Reveal "))


def test_csv_without_dev_tunes_by_k_fold_and_says_so(tmp_path, standins, capsys):
    data = write_csv(tmp_path / "test.csv", synthetic_rows("test"))
    out, js = tmp_path / "out", tmp_path / "f.json"
    status = main(["benchmark", "llm-aggrefact", str(data), "-o", str(out), "--json", str(js), "--aspect", "fact/hhem",
                   "--aspect", "support", "--bootstrap", "0", "--folds", "3", "--no-progress", *models(standins)])
    table = capsys.readouterr().out
    assert status == 0
    assert "tuned thresholds: 3-fold cross-validation on the test split (no dev split)" in table
    got = json.loads(js.read_text())
    assert {m["tuning"] for m in got["report"]["groups"]["fact/hhem"].values()} == {"3-fold cross-validation"}
    assert {"test.input.jsonl", "test.scores.jsonl", "test.scores.jsonl.meta.json"} <= {p.name for p in out.iterdir()}
    assert not any(p.name.startswith("dev") for p in out.iterdir())
    want = expected_report(out, ("fact/hhem", "fact/support"), dev=False, bootstrap=0, folds=3).to_json()
    assert got["report"] == json.loads(json.dumps(want))


def test_parquet_is_read_with_pyarrow(tmp_path, standins, capsys):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (the 'parquet' extra): parquet not read")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(synthetic_rows("test")), tmp_path / "test-00000-of-00001.parquet")
    status = main(["benchmark", "llm-aggrefact", str(tmp_path), "-o", str(tmp_path / "out"), "--aspect", "hhem",
                   "--bootstrap", "0", "--no-progress", *models(standins)])
    assert status == 0 and "Reveal" in capsys.readouterr().out


def test_parquet_without_pyarrow_is_refused_naming_the_extra(tmp_path, standins, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "test-00000-of-00001.parquet").write_bytes(b"PAR1 never read")
    status = main(["benchmark", "llm-aggrefact", str(tmp_path), "-o", str(tmp_path / "out"), "--no-progress",
                   *models(standins)])
    assert status == 2
    assert "pip install 'unieval-local[parquet]'" in capsys.readouterr().err


def test_the_split_comes_from_the_file_name_prefix(tmp_path):
    write_jsonl(tmp_path / "data" / "dev-00000-of-00001.jsonl", synthetic_rows("dev"))
    write_csv(tmp_path / "data" / "test-00000-of-00001.csv", synthetic_rows("test"))
    (tmp_path / "README.md").write_text("not data")
    found = aggrefact_splits(tmp_path)
    assert {k: [p.name for p in v] for k, v in found.items()} == {"dev": ["dev-00000-of-00001.jsonl"],
                                                                  "test": ["test-00000-of-00001.csv"]}
    assert list(aggrefact_splits(tmp_path / "data" / "test-00000-of-00001.csv")) == ["test"]
    write_jsonl(tmp_path / "data" / "train.jsonl", synthetic_rows("dev"))
    with pytest.raises(ValueError, match="must start with 'dev' or 'test'"):
        aggrefact_splits(tmp_path)
    only_dev = tmp_path / "only-dev"
    write_jsonl(only_dev / "dev.jsonl", synthetic_rows("dev"))
    with pytest.raises(ValueError, match="no test file"):
        aggrefact_splits(only_dev)


def test_no_staged_evaluator_exits_3_naming_each(tmp_path, capsys):
    write_jsonl(tmp_path / "test.jsonl", synthetic_rows("test"))
    status = main(["benchmark", "llm-aggrefact", str(tmp_path / "test.jsonl"), "-o", str(tmp_path / "out"),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert status == 3 and "fact/support: not staged" in err and "fact/groundedness" in err


def test_labelled_data_with_groups_and_a_paired_comparison(tmp_path, standins, capsys):
    rows = [{"target": r["claim"], "source": r["doc"], "gold": bool(r["label"]), "meta": {"domain": r["dataset"][:4]}}
            for r in synthetic_rows("test")]
    src = write_jsonl(tmp_path / "mine.jsonl", rows)
    status = main(["benchmark", "labelled", str(src), "--label-field", "gold", "--group-by", "meta.domain",
                   "-o", str(tmp_path / "out"), "--aspect", "support", "--aspect", "hhem", "--compare",
                   "support,hhem", "--bootstrap", "100", "--no-progress", *models(standins)])
    table = capsys.readouterr().out
    assert status == 0
    assert "fact/support: tuned by 5-fold cross-validation" in table and "paired comparisons" in table
    assert "mean (" in table and "Aggr" in table


# ----------------------------------------------------------------------------- resume after a kill
def test_a_killed_run_resumes_to_the_same_figures(tmp_path, standins):
    rows = []
    for r in range(15):  # 660 rows: enough to stop it half-way
        rows += [{**x, "claim": f"{x['claim']} ({r})"} for x in synthetic_rows("test")]
    data = write_jsonl(tmp_path / "test.jsonl", rows)
    mc = ["--model", f"minicheck-flan-t5-large={standins['minicheck-flan-t5-large']}", "--aspect", "support",
          "--batch-tokens", "256", "--bootstrap", "50", "--no-progress"]
    out = tmp_path / "out"
    scores = out / "test.scores.jsonl"
    proc = subprocess.Popen([*CLI, "benchmark", "llm-aggrefact", str(data), "-o", str(out), *mc],
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline, seen = time.monotonic() + 180, 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = scores.read_text().count("\n") if scores.exists() else 0
        if seen >= 1:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    kept = scores.read_text().count("\n")
    assert 1 <= kept < len(rows)
    assert main(["benchmark", "llm-aggrefact", str(data), "-o", str(out), *mc]) == 2  # exists: --resume needed
    assert main(["benchmark", "llm-aggrefact", str(data), "-o", str(out), "--json", str(tmp_path / "a.json"),
                 "--resume", *mc]) == 0
    assert main(["benchmark", "llm-aggrefact", str(data), "-o", str(tmp_path / "ref"), "--json",
                 str(tmp_path / "b.json"), *mc]) == 0
    a, b = (json.loads((tmp_path / n).read_text())["report"] for n in ("a.json", "b.json"))
    for g in DATASETS + ["mean"]:
        ma = a["mean"]["fact/support"] if g == "mean" else a["groups"]["fact/support"][g]
        mb = b["mean"]["fact/support"] if g == "mean" else b["groups"]["fact/support"][g]
        for f in ("n", "balanced_accuracy", "tuned_balanced_accuracy", "roc_auc"):
            assert ma[f] == pytest.approx(mb[f], abs=1e-6), (g, f)


# ----------------------------------------------------------------------------- real weights
@pytest.mark.real_weights
@pytest.mark.parametrize("aspect, board_mean", [("fact/support", 75.0), ("fact/factcg", 75.6)])
def test_real_weights_reproduce_the_board_mean(tmp_path, monkeypatch, aspect, board_mean):
    """MiniCheck-Flan-T5-L's 75.0 and FactCG-DeBERTa-L's 75.6 (the board's means) within 0.5 points,
    with the official weights in ``UNIEVAL_LOCAL_HOME`` and LLM-AggreFact in ``LLM_AGGREFACT_DIR``."""
    from unieval_local.batch.benchmark import run_benchmark
    from unieval_local.registry.tasks import DEFAULT_REGISTRY

    data = os.environ.get("LLM_AGGREFACT_DIR")
    evaluator = DEFAULT_REGISTRY.get_aspect(*aspect.split("/")).checkpoint
    if not REAL_HOME or not (Path(REAL_HOME) / evaluator / "config.json").is_file():
        pytest.skip(f"{evaluator}'s official weights are not staged in UNIEVAL_LOCAL_HOME")
    if not data or not Path(data).exists():
        pytest.skip("LLM-AggreFact is not staged: set LLM_AGGREFACT_DIR to its files (gated on the hub)")
    monkeypatch.setenv("UNIEVAL_LOCAL_HOME", REAL_HOME)
    splits = {"test": aggrefact_splits(data)["test"]}
    res = run_benchmark(splits, tmp_path / "out", kind="llm-aggrefact", aspects=[aspect], bootstrap=0,
                        progress=False)
    mean = 100 * res.report.mean[aspect].balanced_accuracy
    assert not math.isnan(mean) and abs(mean - board_mean) <= 0.5, res.table()


# ----------------------------------------------------------------------------- what a newcomer tripped on
def test_compare_with_an_unstaged_aspect_is_refused_before_scoring(tmp_path, standins, capsys):
    write_jsonl(tmp_path / "test.jsonl", synthetic_rows("test"))
    out = tmp_path / "out"
    status = main(["benchmark", "llm-aggrefact", str(tmp_path / "test.jsonl"), "-o", str(out), "--aspect", "support",
                   "--aspect", "factcg", "--compare", "support", "factcg", "--no-progress", *models(standins)])
    err = capsys.readouterr().err
    assert status == 2 and "cannot compare fact/factcg: not staged" in err, err
    assert not (out / "test.scores.jsonl").exists()  # nothing was scored


def test_the_staged_input_keeps_labels_for_meta_and_both_compare_forms_agree(tmp_path, standins, capsys):
    from unieval_local.cli import main as cli

    src = write_jsonl(tmp_path / "test.jsonl", synthetic_rows("test"))
    out, js = tmp_path / "out", tmp_path / "b.json"
    assert main(["benchmark", "llm-aggrefact", str(src), "-o", str(out), "--json", str(js), "--aspect", "support",
                 "--aspect", "hhem", "--compare", "support,hhem", "--bootstrap", "50", "--no-progress",
                 *models(standins)]) == 0
    staged = [json.loads(line) for line in (out / "test.input.jsonl").read_text().splitlines()]
    assert [r["label"] for r in staged] == [int(r["label"]) for r in synthetic_rows("test")]
    assert {r["dataset"] for r in staged} == {r["dataset"] for r in synthetic_rows("test")}
    capsys.readouterr()
    mj = tmp_path / "m.json"
    assert cli(["meta", str(out / "test.scores.jsonl"), "--human", str(out / "test.input.jsonl"), "--labels",
                "--group-by", "dataset", "--compare", "fact/support,fact/hhem", "--bootstrap", "50",
                "--json", str(mj)]) == 0
    bench, meta = json.loads(js.read_text())["report"], json.loads(mj.read_text())
    meta = meta.get("report", meta)
    for aspect in ("support", "hhem"):  # the score output names aspects without their task
        assert bench["groups"][f"fact/{aspect}"] == meta["groups"][aspect]


def test_a_row_without_its_document_names_the_accepted_fields(tmp_path, standins, capsys):
    rows = [{"claim": "A is B.", "doc": "A is B.", "label": 1}, {"claim": "C is D.", "text": "C is D.", "label": 0}]
    src = write_jsonl(tmp_path / "mine.jsonl", rows)
    status = main(["benchmark", "labelled", str(src), "-o", str(tmp_path / "out"), "--aspect", "hhem", "--no-progress",
                   *models(standins)])
    err = capsys.readouterr().err
    assert status != 0 and "row 1: no document field (source, doc, document, premise; name yours with " \
                           "--source-field)" in err, err


# ----------------------------------------------------------------------------- issue 40: no silent wrong number
def test_the_board_table_says_which_datasets_its_mean_covers_and_names_rows_left_out(tmp_path, standins, capsys):
    rows = [r for r in synthetic_rows("test") if r["dataset"] in ("AggreFact-CNN", "Reveal")]
    rows += [{**r, "dataset": "MyOwnVeryLongDatasetName"} for r in synthetic_rows("test")[:4]]
    rows[1] = {**rows[1], "claim": ""}  # an empty claim: an error record, left out
    src = write_jsonl(tmp_path / "test.jsonl", rows)
    out, js = tmp_path / "out", tmp_path / "f.json"
    assert main(["benchmark", "llm-aggrefact", str(src), "-o", str(out), "--aspect", "support", "--bootstrap", "0",
                 "--json", str(js), "--no-progress", *models(standins)]) == 0
    table = capsys.readouterr().out
    got = json.loads(js.read_text())
    groups, mean = got["report"]["groups"]["fact/support"], got["report"]["mean"]["fact/support"]
    assert groups["AggreFact-CNN"]["n"] == 3 and groups["MyOwnVeryLongDatasetName"]["n"] == 4
    want = (groups["AggreFact-CNN"]["balanced_accuracy"] + groups["Reveal"]["balanced_accuracy"]) / 2
    assert mean["balanced_accuracy"] == pytest.approx(want, abs=1e-12)  # the dataset off the board not in it
    pub = board()["models"]["MiniCheck-Flan-T5-L"]["scores"]
    same = round((pub["AggreFact-CNN"] + pub["Reveal"]) / 2, 4)
    assert ("the mean is over 2 of the board's 11 datasets: AggreFact-CNN, Reveal; the board's figure beside it is "
            f"its mean over the same 2 datasets, {same:.1f} (its 11-dataset average: 75.0)") in table
    assert "not on the board, shown but left out of the mean: MyOwnVeryLongDatasetName" in table
    assert any(x.startswith("MyOwnVeryLongDatasetName ") for x in table.splitlines())
    mean_row = next(x for x in table.splitlines() if x.startswith("mean (2 of 11)"))
    assert mean_row.split()[-2:] == [f"{same:.1f}", f"{100 * mean['balanced_accuracy'] - same:+.1f}"]
    diffs = got["board"]["differences"]["fact/support"]
    assert diffs["mean_over"] == ["AggreFact-CNN", "Reveal"]
    assert diffs["mean"] == pytest.approx(100 * mean["balanced_accuracy"] - same, abs=1e-3)
    assert (f"left out 1 test row (row 1, 0-based, of {out / 'test.input.jsonl'}): an aspect could not score it "
            f"(error records in {out / 'test.scores.jsonl'})") in table
    assert got["rows_left_out"] == {"test": 1} and got["rows_left_out_indices"] == {"test": [1]}


def test_string_labels_missing_fields_and_saved_datasets_say_what_to_do(tmp_path, standins, capsys):
    words = {1: "entailment", 0: "not_entailment"}
    rows = [{"claim": r["claim"], "doc": r["doc"], "gold": words[r["label"]]} for r in synthetic_rows("test")[:8]]
    src = write_jsonl(tmp_path / "mine.jsonl", rows)
    base = ["-o", str(tmp_path / "out"), "--aspect", "hhem", "--bootstrap", "0", "--no-progress", *models(standins)]
    assert main(["benchmark", "labelled", str(src), "--label-field", "gold", *base]) == 2
    assert (f"{src}: row 0: gold: 'not_entailment' is not a label (0/1/true/false); the labels hold ['entailment', "
            "'not_entailment'] (2 distinct values): name the value that means supported with --positive-label VALUE"
            ) in capsys.readouterr().err
    js = tmp_path / "f.json"
    assert main(["benchmark", "labelled", str(src), "--label-field", "gold", "--positive-label", "entailment",
                 "--json", str(js), *base]) == 0
    capsys.readouterr()
    m = json.loads(js.read_text())["report"]["groups"]["fact/hhem"]["all"]
    assert (m["n_supported"], m["n_unsupported"]) == (4, 4)
    staged = [json.loads(x)["label"] for x in (tmp_path / "out" / "test.input.jsonl").read_text().splitlines()]
    assert staged == [int(r["gold"] == "entailment") for r in rows]

    assert main(["benchmark", "labelled", str(src), *base]) == 2
    assert "row 0: no label field 'label' (name yours with --label-field)" in capsys.readouterr().err
    assert main(["benchmark", "labelled", str(src), "--label-field", "gold", "--group-by", "domain", *base]) == 2
    assert "row 0: no group field 'domain' (name yours with --group-by)" in capsys.readouterr().err
    agg = write_jsonl(tmp_path / "agg" / "test.jsonl", [{k: v for k, v in r.items() if k != "dataset"}
                                                        for r in synthetic_rows("test")])
    assert main(["benchmark", "llm-aggrefact", str(agg), *base]) == 2
    assert ("row 0: no group field 'dataset' (an LLM-AggreFact row has the fields dataset, doc, claim and label: is "
            "this a copy of it?)") in capsys.readouterr().err

    saved = tmp_path / "saved"  # what datasets' DatasetDict.save_to_disk writes
    for split in ("dev", "test"):
        (saved / split).mkdir(parents=True)
        for name in ("data-00000-of-00001.arrow", "dataset_info.json", "state.json"):
            (saved / split / name).write_text("{}")
    (saved / "dataset_dict.json").write_text('{"splits": ["dev", "test"]}')
    for cmd in (["llm-aggrefact"], ["labelled"]):
        assert main(["benchmark", *cmd, str(saved), *base]) == 2
        err = capsys.readouterr().err
        assert f"{saved}: a Hugging Face `datasets` save_to_disk folder" in err, err
        assert (f"load_from_disk('{saved}'); [d[s].to_parquet(f'OUT/{{s}}.parquet') for s in d]" in err)


def test_benchmark_writes_the_html_page_of_meta_labels(tmp_path, standins, capsys):
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    src = write_jsonl(tmp_path / "test.jsonl", synthetic_rows("test"))
    html = tmp_path / "page.html"
    assert main(["benchmark", "llm-aggrefact", str(src), "-o", str(tmp_path / "out"), "--aspect", "support",
                 "--aspect", "hhem", "--bootstrap", "0", "--html", str(html), "--no-progress", *models(standins)]) == 0
    page = html.read_text()
    assert "<title>unieval-local labels: test.jsonl</title>" in page and str(tmp_path) not in page
    assert page.count("<svg") == 1 and "ROC curves" in page and "Made by unieval-local benchmark llm-aggrefact" in page
    assert "<h3>fact/support (tuned by 5-fold cross-validation)</h3>" in page and "mean (11 groups)" in page
    capsys.readouterr()
    assert main(["benchmark", "llm-aggrefact", str(src), "-o", str(tmp_path / "out2"), "--html",
                 str(tmp_path / "no" / "p.html"), "--no-progress", *models(standins)]) == 2
    assert "--html" in capsys.readouterr().err and not (tmp_path / "out2").exists()  # refused before scoring
