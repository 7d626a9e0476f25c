"""Reading input records robustly: text that is not valid Unicode (a lone UTF-16 surrogate,
which json.loads accepts) becomes an error record naming the field and the position, a BOM is
accepted, only \\n ends a JSONL line (a bare CR inside a string stays in the record), and two
more input forms: line-aligned text files (--targets/--sources/...) and CSV/TSV."""

import csv
import json

import pytest

from unieval_local import InvalidExampleError, UniEvalData
from unieval_local import batch as batch_mod
from unieval_local.batch import OutputWriter, run_batch, sidecar_path
from unieval_local.cli import EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, main
from unieval_local.records import AlignedInput, InputFileError, input_fingerprint, iter_records, read_records

from conftest import FakeRunner, fake_factory

BOM = b"\xef\xbb\xbf"
CUT = "Cut inside an emoji \ud83d here."  # what JavaScript leaves when it cuts "...emoji 😀 here."


def by_prompt(prompt: str) -> float:
    """P(Yes) as a fixed function of the prompt text."""
    import zlib

    return zlib.crc32(prompt.encode("utf-8")) % 997 / 997


def write_jsonl(path, rows):
    """JSON lines as json.dumps writes them (ASCII: a surrogate becomes the escape \\ud83d)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read(path):
    return [json.loads(x) for x in path.read_bytes().decode("utf-8").splitlines()]


@pytest.fixture
def score(monkeypatch, fake_ckpt):
    """``score(*argv) -> exit status``: ``unieval-local score`` through main() with the fake runner
    (run_batch's Engine gets a runner factory; P(Yes) is a fixed function of the prompt)."""
    import unieval_local.batch.run as batch_run

    real = batch_run.Engine
    runner = FakeRunner(by_prompt)
    monkeypatch.setattr(batch_run, "Engine", lambda settings: real(settings.replace(runner_factory=fake_factory(runner))))

    def run(*argv):
        return main(["score", *argv, "--model", str(fake_ckpt), "--no-progress"])
    return run


SUMMARIES = [
    {"target": "The council approved the new budget on Tuesday.",
     "source": "On Tuesday the city council voted to approve the budget for next year.",
     "references": ["The city council approved next year's budget."]},
    {"target": "Heavy rain closed the coastal road.",
     "source": "Heavy rain and wind hit the coast. Officials closed the coastal road until morning.",
     "references": ["Rain closed the coast road.", "The coastal road was shut by the storm."]},
    {"target": "A new library opens downtown next month.",
     "source": "The city will open a new public library downtown next month, officials said.",
     "references": ["A downtown library opens next month."]},
]
ASPECTS = ["--aspect", "coherence", "--aspect", "relevance", "--aspect", "fluency"]
FLUENCY = ["--aspect", "fluency"]


# ----------------------------------------------------------------------------- lone surrogates
def test_a_lone_surrogate_in_a_target_is_an_error_record_and_the_others_are_scored(tmp_path, tiny_ckpt, capsys):
    rows = [{"id": "a", "target": "The council approved the budget."}, {"id": "b", "target": CUT},
            {"id": "c", "target": "Heavy rain closed the coastal road."}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    assert "\\ud83d" in src.read_text()  # the escape json.loads accepts
    out = tmp_path / "out.jsonl"
    common = ["--model", str(tiny_ckpt), "--aspect", "fluency", "--max-length", "48", "--no-progress"]
    assert main(["score", str(src), *common, "-o", str(out)]) == EXIT_ROWS_FAILED
    res = read(out)
    assert [r["index"] for r in res] == [0, 1, 2] and [r["key"] for r in res] == ["a", "b", "c"]
    assert "scores" in res[0] and "scores" in res[2] and "scores" not in res[1]
    err = res[1]["error"]
    assert err["type"] == "InvalidText"
    assert err["message"] == ("line 2 of the file: field 'target' holds a lone UTF-16 surrogate U+D83D at "
                              "character 20: not valid Unicode (a string cut inside an emoji?); fix the text")
    assert CUT[20] == "\ud83d"
    clean = tmp_path / "clean.jsonl"
    assert main(["score", str(write_jsonl(tmp_path / "c.jsonl", [rows[0], rows[2]])), *common, "-o", str(clean)]) == 0
    ref = read(clean)
    assert abs(res[0]["scores"]["fluency"] - ref[0]["scores"]["fluency"]) < 1e-6
    assert abs(res[2]["scores"]["fluency"] - ref[1]["scores"]["fluency"]) < 1e-6
    assert "scored 2 of 3 records (1 failed)" in capsys.readouterr().err


def test_a_lone_surrogate_in_an_id_gives_an_error_record_with_an_escaped_key(tmp_path, score):
    rows = [{"id": "a", "target": "Fine."}, {"id": "b\ud83d", "target": "Also fine."}, {"id": "c", "target": "Ok."}]
    out = tmp_path / "out.jsonl"
    assert score(str(write_jsonl(tmp_path / "in.jsonl", rows)), *FLUENCY, "-o", str(out)) == EXIT_ROWS_FAILED
    res = read(out)  # valid UTF-8 throughout
    assert [r["key"] for r in res] == ["a", "b\\ud83d", "c"]  # the id with the 6-character escape
    assert len(res[1]["key"]) == 7
    assert "field 'id' holds a lone UTF-16 surrogate U+D83D at character 1" in res[1]["error"]["message"]
    assert "scores" in res[0] and "scores" in res[2]


def test_a_lone_surrogate_in_a_reference_names_it(tmp_path, score):
    rows = [dict(SUMMARIES[0]), {**SUMMARIES[1], "references": ["Rain closed the road.", "\udc00 shut."]},
            dict(SUMMARIES[2])]
    out = tmp_path / "out.jsonl"
    assert score(str(write_jsonl(tmp_path / "in.jsonl", rows)), "--aspect", "relevance", "-o", str(out)) \
        == EXIT_ROWS_FAILED
    res = read(out)
    assert "scores" in res[0] and "scores" in res[2]
    assert res[1]["error"]["type"] == "InvalidText"
    assert "field 'references[1]' holds a lone UTF-16 surrogate U+DC00 at character 0" in res[1]["error"]["message"]


@pytest.mark.smoke
def test_resume_of_a_run_with_a_surrogate_record_completes(tmp_path, score):
    rows = [{"id": f"r{i}", "target": f"Sentence number {i} is here."} for i in range(5)]
    rows[2] = {"id": "r2", "target": CUT}
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert score(str(src), *FLUENCY, "-o", str(out)) == EXIT_ROWS_FAILED
    full = out.read_bytes()
    out.write_bytes(b"".join(full.splitlines(keepends=True)[:1]))  # as if killed after the first record
    assert score(str(src), *FLUENCY, "-o", str(out), "--resume") == EXIT_ROWS_FAILED
    assert out.read_bytes() == full
    assert json.loads(sidecar_path(out).read_text())["progress"]["complete"] is True


def test_an_input_of_only_unreadable_records_exits_2_saying_why(tmp_path, score, capsys):
    assert score(str(write_jsonl(tmp_path / "in.jsonl", [{"target": CUT}])), *FLUENCY) == EXIT_USAGE
    assert ("1 of the 1 records could not be read (first: record 0: line 1 of the file: field 'target' holds a "
            "lone UTF-16 surrogate U+D83D at character 20") in capsys.readouterr().err


def test_the_python_api_raises_invalid_example_naming_the_field(fake_scorer):
    scorer, runner = fake_scorer()
    with pytest.raises(InvalidExampleError) as info:
        scorer.score([{"target": "ab\ud83d"}], aspect="fluency")
    assert info.value.problems[0].field == "target"
    assert "field 'target': a lone UTF-16 surrogate U+D83D at character 2 is not valid Unicode" in str(info.value)
    with pytest.raises(InvalidExampleError, match=r"references\[0\]"):
        scorer.score([{"target": "Fine.", "source": "S.", "references": ["x\udfff"]}], aspect="relevance")
    with pytest.raises(InvalidExampleError, match="field 'source'"):
        scorer.score([UniEvalData(target="Fine.", source="\ud800")], aspect="coherence")
    assert runner.prompts == []  # refused before any scoring


def test_the_output_writer_cannot_fail_on_a_surrogate(tmp_path):
    out = tmp_path / "o.jsonl"
    w = OutputWriter(out)
    w.write([{"key": "a\ud83d", "scores": {"fluency": 0.5}}, {"key": "é"}])
    w.close()
    assert [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] == [
        {"key": "a\ud83d", "scores": {"fluency": 0.5}}, {"key": "é"}]


def test_every_reader_turns_surrogates_into_error_records(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"target": "ok"}, {"t\ud83dx": 1}])
    recs = list(iter_records(str(src)))
    assert recs[0].error is None and "the field name 't\\ud83dx' holds" in recs[1].error
    with pytest.raises(InputFileError, match="record 1: line 2 of the file: the field name"):
        read_records(src)  # meta and other readers get a clear error, not a UnicodeEncodeError
    lst = tmp_path / "in.json"
    lst.write_text(json.dumps([{"target": "ok"}, {"target": "x", "meta": {"note": ["\udbff"]}}]))
    assert "field 'meta.note[0]' holds" in list(iter_records(str(lst)))[1].error


# ----------------------------------------------------------------------------- BOM and CR
def test_a_utf8_bom_is_accepted_in_jsonl_and_json(tmp_path, score):
    jl = tmp_path / "bom.jsonl"
    jl.write_bytes(BOM + b"".join(json.dumps(r).encode() + b"\r\n" for r in SUMMARIES[:2]))  # CRLF too
    js = tmp_path / "bom.json"
    js.write_bytes(BOM + json.dumps(SUMMARIES[:2]).encode())
    plain = write_jsonl(tmp_path / "plain.jsonl", SUMMARIES[:2])
    outs = {}
    for name, path in (("jl", jl), ("js", js), ("plain", plain)):
        outs[name] = tmp_path / f"{name}.out.jsonl"
        assert score(str(path), *ASPECTS, "-o", str(outs[name])) == EXIT_OK
    want = read(outs["plain"])
    assert len(want) == 2 and read(outs["jl"]) == want and read(outs["js"]) == want


def test_a_bare_cr_inside_a_string_keeps_one_record(tmp_path, score):
    src = tmp_path / "cr.jsonl"
    src.write_bytes(b'{"id": "cr", "target": "First line.\rSecond line."}\n'
                    b'{"id": "tab", "target": "A raw\ttab."}\n{not json\n')
    recs = list(iter_records(str(src)))
    assert len(recs) == 3
    assert recs[0].key == "cr" and recs[0].data["target"] == "First line.\rSecond line."
    assert recs[1].data["target"] == "A raw\ttab."  # a raw control character: strict=False
    assert recs[2].error.startswith("line 3 of the file is not valid JSON")  # line numbers count \n only
    out, ref = tmp_path / "out.jsonl", tmp_path / "ref.jsonl"
    assert score(str(src), *FLUENCY, "-o", str(out)) == EXIT_ROWS_FAILED
    escaped = write_jsonl(tmp_path / "esc.jsonl", [{"id": "cr", "target": "First line.\rSecond line."},
                                                   {"id": "tab", "target": "A raw\ttab."}])
    assert score(str(escaped), *FLUENCY, "-o", str(ref)) == EXIT_OK
    assert read(out)[:2] == read(ref)


# ----------------------------------------------------------------------------- line-aligned files
def write_lines(path, texts, end="\n"):
    path.write_bytes("".join(t + end for t in texts).encode("utf-8"))
    return path


def test_aligned_text_files_score_as_the_equivalent_jsonl(tmp_path, score):
    t = write_lines(tmp_path / "t.txt", [r["target"] for r in SUMMARIES])
    s = write_lines(tmp_path / "s.txt", [r["source"] for r in SUMMARIES], end="\r\n")  # CRLF works
    r1 = write_lines(tmp_path / "r1.txt", [r["references"][0] for r in SUMMARIES])
    out = tmp_path / "aligned.jsonl"
    assert score("--targets", str(t), "--sources", str(s), "--references", str(r1), *ASPECTS, "-o", str(out)) == 0
    one_ref = [{**r, "references": r["references"][:1]} for r in SUMMARIES]
    ref = tmp_path / "ref.jsonl"
    assert score(str(write_jsonl(tmp_path / "in.jsonl", one_ref)), *ASPECTS, "-o", str(ref)) == 0
    assert read(out) == read(ref) and len(read(out)) == 3 and read(out)[1]["key"] == 1
    meta = json.loads(sidecar_path(out).read_text())["input"]
    assert [f["role"] for f in meta["files"]] == ["targets", "sources", "references"]
    assert meta["sha256"] == input_fingerprint(AlignedInput(str(t), str(s), (str(r1),)))["sha256"]


def test_aligned_files_take_several_references_and_blank_lines_are_empty_examples(tmp_path, score):
    t = write_lines(tmp_path / "t.txt", [SUMMARIES[0]["target"], "", SUMMARIES[2]["target"]])
    s = write_lines(tmp_path / "s.txt", [r["source"] for r in SUMMARIES])
    r1 = write_lines(tmp_path / "r1.txt", [r["references"][0] for r in SUMMARIES])
    r2 = write_lines(tmp_path / "r2.txt", ["One more reference."] * 3)
    out = tmp_path / "aligned.jsonl"
    assert score("--targets", str(t), "--sources", str(s), "--references", str(r1), "--references", str(r2),
                 "--aspect", "relevance", "-o", str(out)) == EXIT_ROWS_FAILED
    res = read(out)
    assert "empty or whitespace-only" in res[1]["error"]["message"] and res[1]["error"]["type"] == "InvalidExample"
    rows = [{**r, "references": [r["references"][0], "One more reference."]} for r in SUMMARIES]
    ref = tmp_path / "ref.jsonl"
    assert score(str(write_jsonl(tmp_path / "in.jsonl", [rows[0], rows[2]])), "--aspect", "relevance",
                 "-o", str(ref)) == 0
    assert [x["scores"] for x in (res[0], res[2])] == [x["scores"] for x in read(ref)]


def test_aligned_files_of_different_lengths_exit_2_naming_them(tmp_path, score, capsys):
    t = write_lines(tmp_path / "t.txt", ["a.", "b.", "c."])
    s = write_lines(tmp_path / "s.txt", ["x.", "y."])
    out = tmp_path / "out.jsonl"
    assert score("--targets", str(t), "--sources", str(s), "-o", str(out)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--targets {t} has 3 lines" in err and f"--sources {s} has 2 lines" in err
    assert not out.exists()
    assert score(str(write_jsonl(tmp_path / "i.jsonl", SUMMARIES)), "--targets", str(t)) == EXIT_USAGE
    assert "not both" in capsys.readouterr().err
    assert score("--sources", str(s)) == EXIT_USAGE
    assert "give INPUT" in capsys.readouterr().err


def test_resume_refuses_after_an_aligned_file_changed(tmp_path, score, capsys):
    t = write_lines(tmp_path / "t.txt", [r["target"] for r in SUMMARIES])
    s = write_lines(tmp_path / "s.txt", [r["source"] for r in SUMMARIES])
    out = tmp_path / "out.jsonl"
    flags = ["--targets", str(t), "--sources", str(s), "--aspect", "coherence", "-o", str(out)]
    assert score(*flags) == 0
    before = out.read_bytes()
    assert score(*flags, "--resume") == 0 and out.read_bytes() == before  # unchanged: nothing to do
    write_lines(s, [r["source"] for r in SUMMARIES][:2] + ["Another source."])
    capsys.readouterr()
    assert score(*flags, "--resume") == EXIT_USAGE
    assert f"refusing to resume {out}: the input file --sources {s} changed" in capsys.readouterr().err
    assert out.read_bytes() == before


# ----------------------------------------------------------------------------- CSV and TSV
@pytest.mark.smoke
def test_csv_and_tsv_score_as_the_equivalent_jsonl(tmp_path, score):
    rows = [dict(r, id=f"d{i}") for i, r in enumerate(SUMMARIES)]
    rows[0]["target"] = "The council approved\r\nthe new budget, on Tuesday."  # a quoted multi-line cell
    outs = {}
    for ext, delim in (("csv", ","), ("tsv", "\t")):
        path = tmp_path / f"in.{ext}"
        with open(path, "w", encoding="utf-8-sig", newline="") as fh:  # with a BOM, as Excel writes
            w = csv.writer(fh, delimiter=delim)
            w.writerow(["id", "target", "source", "references", "notes"])
            for r in rows:
                refs = r["references"][0] if len(r["references"]) == 1 else json.dumps(r["references"])
                w.writerow([r["id"], r["target"], r["source"], refs, ""])  # an empty cell: a missing field
        outs[ext] = tmp_path / f"{ext}.out.jsonl"
        assert score(str(path), *ASPECTS, "-o", str(outs[ext])) == 0
    ref = tmp_path / "ref.jsonl"
    assert score(str(write_jsonl(tmp_path / "in.jsonl", rows)), *ASPECTS, "-o", str(ref)) == 0
    want = read(ref)
    assert read(outs["csv"]) == want and read(outs["tsv"]) == want and [x["key"] for x in want] == ["d0", "d1", "d2"]
    recs = list(iter_records(str(tmp_path / "in.csv")))
    assert recs[1].data["references"] == SUMMARIES[1]["references"] and "notes" not in recs[1].data


def test_a_csv_row_that_cannot_be_parsed_is_an_error_record(tmp_path, score):
    path = tmp_path / "in.csv"
    path.write_text('id,target\n1,A fine sentence.\n2,"quoted" then text\n3,Another fine one.\n'
                    '4,too,many,cells\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert score(str(path), *FLUENCY, "-o", str(out)) == EXIT_ROWS_FAILED
    res = read(out)
    assert [("scores" in r) for r in res] == [True, False, True, False]
    assert res[1]["error"]["type"] == "InvalidCSV" and res[1]["error"]["message"].startswith("line 3 of the file")
    assert "it has 4 cells, the header row 2" in res[3]["error"]["message"]
    tsv = tmp_path / "in.tsv"
    tsv.write_text('id\ttarget\n1\tFine.\n2\t"quoted" then text\n', encoding="utf-8")
    assert score(str(tsv), *FLUENCY, "-o", str(tmp_path / "tsv.out.jsonl")) == EXIT_ROWS_FAILED
    assert read(tmp_path / "tsv.out.jsonl")[1]["error"]["type"] == "InvalidCSV"
    dup = tmp_path / "dup.csv"
    dup.write_text("target,target\na,b\n")
    with pytest.raises(InputFileError, match="names 'target' more than once"):
        list(iter_records(str(dup)))


@pytest.mark.smoke
def test_run_batch_takes_an_aligned_input_from_python(tmp_path, fake_ckpt):
    t = write_lines(tmp_path / "t.txt", [r["target"] for r in SUMMARIES])
    summary = run_batch(AlignedInput(t), tmp_path / "o.jsonl", aspects=["fluency"], progress=False,
                        settings={"model": str(fake_ckpt), "runner_factory": fake_factory(FakeRunner(by_prompt))})
    assert summary.n_records == 3 and summary.n_failed == 0
