"""Issue 40 (outputs): ``score -o X.csv``, ``to_pandas``, and the ``report`` command's words."""

import csv
import io
import json
import sys

import pytest

from unieval_local.cli import EXIT_ROWS_FAILED, EXIT_USAGE, main

RECORDS = [
    {"id": "a", "source": "The cat sat on the mat. It was warm.", "target": "The cat sat, \"quoted\".",
     "system_id": "s1"},
    {"id": "b", "target": ""},  # an error record
    {"id": "c,d", "source": "Doc.", "target": "Fine.", "system_id": "s2"},
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def score(*args):
    return main(["score", *map(str, args), "--no-progress", "--device", "cpu"])


# ----------------------------------------------------------------------------- CSV output
def test_a_csv_output_holds_the_jsonl_lines_row_for_row(tmp_path, tiny_ckpt):
    src = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    aspects = ["--aspect", "coherence", "--aspect", "fluency"]
    assert score(src, "--model", tiny_ckpt, *aspects, "-o", tmp_path / "out.jsonl") == EXIT_ROWS_FAILED
    assert score(src, "--model", tiny_ckpt, *aspects, "-o", tmp_path / "out.csv") == EXIT_ROWS_FAILED
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    rows = read_csv(tmp_path / "out.csv")
    assert rows[0] == ["index", "key", "system_id", "coherence", "fluency", "aspect_mean", "language", "error", "notes"]
    assert len(rows) == 4
    for line, row in zip(lines, rows[1:]):
        assert row[:3] == [str(line["index"]), line["key"], line.get("system_id", "")]
        if "error" in line:
            assert row[3:7] == ["", "", "", ""]
            assert row[7] == f"InvalidExample: {line['error']['message']}"
        else:  # floats written by repr: the same numbers, bit for bit
            assert [float(x) for x in row[3:6]] == [line["scores"]["coherence"], line["scores"]["fluency"],
                                                    line["aspect_mean"]]
            assert row[6:] == [line["language"], "", ""]
    assert rows[3][1] == "c,d"  # a comma in a key is quoted, not a new column
    assert (tmp_path / "out.csv.meta.json").is_file()  # the signature and counters, as for JSONL


def test_a_csv_output_with_evidence_holds_each_lines_evidence_as_json(tmp_path, tiny_ckpt):
    src = write_jsonl(tmp_path / "in.jsonl", RECORDS[:1])
    for out in ("out.jsonl", "out.csv"):
        assert score(src, "--model", tiny_ckpt, "--aspect", "coherence", "--evidence", "-o", tmp_path / out) == 0
    line = json.loads((tmp_path / "out.jsonl").read_text())
    header, row = read_csv(tmp_path / "out.csv")
    assert header == ["index", "key", "system_id", "coherence", "language", "error", "notes", "evidence"]
    assert json.loads(row[-1]) == line["evidence"]


@pytest.mark.parametrize("flags, message", [
    (["--resume"], "--resume continues a JSONL output, not {out} (a .csv output does not resume: write .jsonl for "
                   "--resume)"),
    (["--shard", "0/2"], "--shard writes a part for merge, which joins JSONL outputs, not {out}: write each shard "
                         "to a .jsonl file"),
    (["--output-format", "hosted"], "--output-format hosted writes JSON lines, not CSV: give an output that does "
                                    "not end in .csv, not {out}"),
])
def test_a_csv_output_refuses_what_it_cannot_do(tmp_path, fake_ckpt, capsys, flags, message):
    src = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    out = tmp_path / "out.CSV"  # the suffix in any case
    assert score(src, "--model", fake_ckpt, "--aspect", "coherence", *flags, "-o", out) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"unieval-local: error: {message.format(out=out)}"
    assert not out.exists()


def test_an_existing_csv_output_is_not_appended_to(tmp_path, fake_ckpt, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    out = tmp_path / "out.csv"
    out.write_text("index,key\n")
    assert score(src, "--model", fake_ckpt, "--aspect", "coherence", "-o", out) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (f"unieval-local: error: {out} already exists; remove it or write to a "
                                               "new output (a .csv output does not resume: write .jsonl for --resume)")
    assert out.read_text() == "index,key\n"


def test_csv_rows_quote_newlines_and_write_nested_values_as_json():
    from unieval_local.batch.output import csv_columns, csv_rows

    cols = csv_columns(["coherence"], fields={"target": 1, "doc_id": 1})
    assert cols == ["index", "key", "doc_id", "coherence", "language", "error", "notes"]
    text = csv_rows([{"index": 0, "key": ["x", 1], "doc_id": "d\n2", "scores": {"coherence": 0.1}},
                     {"index": 1, "key": 7, "error": {"type": "InvalidJSON", "message": "line 2: bad"}}],
                    cols, header=True)
    assert list(csv.reader(io.StringIO(text))) == [
        cols, ["0", '["x", 1]', "d\n2", "0.1", "", "", ""], ["1", "7", "", "", "", "InvalidJSON: line 2: bad", ""]]


# ----------------------------------------------------------------------------- to_pandas
def test_to_pandas_has_one_row_per_example_and_a_column_per_aspect(fake_scorer):
    pd = pytest.importorskip("pandas")
    scorer, _ = fake_scorer(table={"coherent": 0.8, "fluent": 0.3})
    data = [{"target": "One.", "source": "Doc one."}, {"target": "Two.", "source": "Doc two."}]
    res = scorer.evaluate(data, aspects=["coherence", "fluency"])
    frame = res.to_pandas()
    assert list(frame.columns) == ["coherence", "fluency", "aspect_mean", "language"]
    assert frame.shape == (2, 4) and list(frame.index) == [0, 1]
    for a in ("coherence", "fluency"):
        assert frame[a].tolist() == [e.scores[a] for e in res.examples]
        assert frame[a].mean() == pytest.approx(res.per_aspect[a].overall.value, abs=1e-12)
    assert frame["aspect_mean"].tolist() == [e.aspect_mean for e in res.examples]
    one = scorer.score(data, aspect="coherence")
    assert one.to_pandas().equals(pd.DataFrame({"coherence": [e.value for e in one.examples]}))


def test_to_pandas_without_pandas_names_the_extra(fake_scorer, monkeypatch):
    from unieval_local.errors import MissingExtraError

    scorer, _ = fake_scorer()
    res = scorer.evaluate([{"target": "One.", "source": "Doc."}], aspects=["coherence"])
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    want = ("results as a DataFrame (to_pandas) needs pandas, not installed here: install the 'pandas' extra: "
            "pip install 'unieval-local[pandas]' (from a clone: pip install '.[pandas]')")
    for result in (res, res.per_aspect["coherence"]):
        with pytest.raises(MissingExtraError) as info:
            result.to_pandas()
        assert str(info.value) == want and isinstance(info.value, ImportError)


def test_the_pandas_extra_is_declared_and_in_all():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["pandas"] == ["pandas>=2.1"]
    assert "pandas" in extras["all"][0].split("[")[1].rstrip("]").split(",")


# ----------------------------------------------------------------------------- report's words
def report(path, fmt, ckpt, *extra):
    return main(["report", str(path), "--format", fmt, "--model", str(ckpt), "--device", "cpu",
                 "--long-input", "truncate", *map(str, extra)])


def test_report_counts_in_the_singular_and_no_evidence_flag_it_lacks(tmp_path, tiny_ckpt, capsys):
    long_doc = "The cat sat on the mat. It was warm. " * 500
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "input": long_doc, "output": "The cat sat."},
                                               {"id": "b", "input": "x", "output": ""}])
    assert report(src, "autoeval", tiny_ckpt, "-o", tmp_path / "r.json") == EXIT_ROWS_FAILED
    err = capsys.readouterr().err
    assert "autoeval: 1 of 2 records reported, 1 error; 1 distinct query; " in err
    warning = next(x for x in err.splitlines() if x.startswith("warning:"))
    assert warning == ("warning: 1 of 1 distinct queries were longer than max_length (unieval-sum 1024 tokens) and "
                       "lost their end; the cut fell in: input (1); --long-input chunk reads long fields whole in "
                       "windows (--long-input fit keeps their beginning)")
    assert "--evidence" not in err


@pytest.mark.parametrize("fmt, target, source", [("summ", "output", "input"), ("rating", "summary", "input"),
                                                  ("autoeval", "summary", "transcript")])
def test_report_names_missing_fields_in_the_words_of_the_file(tmp_path, tiny_ckpt, capsys, fmt, target, source):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "input": "Doc.", "output": "Fine."},
                                               {"id": "b", "input": "The document."},  # no summary
                                               {"id": "c", "target": "Fine."}])  # our words: ours
    assert report(src, fmt, tiny_ckpt, "-o", tmp_path / "r.json") == EXIT_ROWS_FAILED
    err = capsys.readouterr().err
    assert f"  record 1 (b): {target}: the summary is missing\n" in err
    rows = json.loads((tmp_path / "r.json").read_text())["reports"]
    assert rows[1]["error"] == {"field": target, "message": "the summary is missing"}
    if fmt != "autoeval":  # autoeval reads a record without a source (accuracy N/A)
        assert f"  record 2 (c): source: the {fmt} report" in err and f"needs 'source' as a" in err
    src2 = write_jsonl(tmp_path / "in2.jsonl", [{"id": "d", target: "Fine."}])
    if fmt != "autoeval":
        assert report(src2, fmt, tiny_ckpt, "-o", tmp_path / "r2.json") == EXIT_ROWS_FAILED
        row = json.loads((tmp_path / "r2.json").read_text())["reports"][0]
        assert row["error"]["field"] == source and f"needs '{source}' as a non-empty string; it is missing" in \
            row["error"]["message"]


def test_record_names_follow_the_format_only_for_records_in_other_words():
    from unieval_local.fields import record_names

    assert record_names({"output": "S."}, "summ") == {"target": "output", "source": "input"}
    assert record_names({"summary": "S."}, "autoeval") == {"target": "summary", "source": "transcript"}
    assert record_names({"summary": "S.", "source": "D."}, "rating") == {"target": "summary"}
    assert record_names({"target": "S."}, "summ") == {}
    assert record_names({"input": "D."}, None) == {"source": "input"}


def test_nothing_scorable_in_one_record_says_record_in_the_singular(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "summary": "A summary.", "document": "A document."}])
    assert score(src, "--model", tmp_path / "no-such-checkpoint", "--aspect", "coherence") == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"no record of {src} can be scored for coherence (1 record): the record has fields document, id, " \
           "summary; coherence needs target, source." in err


def test_the_failure_summary_counts_one_more_reason_in_the_singular():
    from unieval_local.batch.summary import BatchSummary, format_summary

    s = BatchSummary(aspects=["coherence"], n_records=6, n_failed=6,
                     failures=[(f"reason {i}", [f"k{i}"]) for i in range(6)])
    assert "  ... and 1 more reason (1 record)" in format_summary(s).splitlines()


def test_record_names_leave_a_did_you_mean_field_in_our_words():
    from unieval_local.fields import record_names

    assert record_names({"output": "S.", "document": "D."}, "summ") == {"target": "output"}


def test_an_interrupted_csv_run_keeps_whole_rows_and_says_it_does_not_resume(tmp_path, tiny_ckpt, summeval_records):
    import os
    import signal
    import subprocess
    import time

    from test_batch import args, small_records

    src = write_jsonl(tmp_path / "in.jsonl", small_records(summeval_records, 600))
    out = tmp_path / "out.csv"
    cli = [sys.executable, "-c", "import sys; from unieval_local.cli import main; sys.exit(main())"]
    proc = subprocess.Popen([*cli, "score", str(src), *args(tiny_ckpt, "--batch-tokens", "256"), "-o", str(out)],
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 2:  # the header and a row
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    rows = read_csv(out)
    assert rows[0] == ["index", "key", "system_id", "fluency", "language", "error", "notes"]
    n = len(rows) - 1
    assert 1 <= n < 600 and all(len(r) == 7 and 0 <= float(r[3]) <= 1 for r in rows[1:])  # every row whole
    assert err.strip().splitlines()[-1] == (
        f"unieval-local: interrupted: {n} of 600 records written to {out}; a .csv output does not resume: write "
        ".jsonl for --resume (its index column says which records it holds)"), err
    assert json.loads((tmp_path / "out.csv.meta.json").read_text())["progress"]["written"] == n


def test_a_csv_row_says_in_notes_why_an_aspect_cell_is_empty(tmp_path, tiny_ckpt):
    """The fresh-user trial of issue 40: the JSONL line's notes ("relevance skipped: no references")
    were lost in the CSV row, leaving an empty relevance cell unexplained."""
    import csv

    from unieval_local.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "A cat sat.", "source": "A cat sat on a mat.", "references": ["A cat."]}) + "\n"
                   + json.dumps({"target": "A dog ran.", "source": "A dog ran home."}) + "\n")
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--no-progress", "-o", str(tmp_path / "o.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "o.csv").open(encoding="utf-8")))
    assert rows[0]["notes"] == "" and rows[0]["relevance"] != ""
    assert rows[1]["notes"] == "relevance skipped: no references" and rows[1]["relevance"] == ""
