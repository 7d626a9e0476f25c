"""Argument problems of `report` exit 2 before any checkpoint lookup or model load (issue 29,
item 5): checked in a subprocess where the model folder does not exist, and torch must not have
been imported when the command returns."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = ("import sys; from unieval_local.cli import main; rc = main(sys.argv[1:]); "
        "print(rc, 'torch' in sys.modules)")


def run(args):
    done = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=120,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    return done.stdout.split()[-2:], done.stderr


@pytest.mark.parametrize("case", ["missing input", "empty input", "output folder missing"])
def test_report_argument_problems_exit_2_before_the_engine(tmp_path, case):
    src = tmp_path / "in.json"
    src.write_text(json.dumps([{"id": "a", "summary": "A park opens.", "source": "The park opens in May."}]))
    out = tmp_path / "out.json"
    if case == "missing input":
        src = tmp_path / "absent.json"
    elif case == "empty input":
        src.write_text("[]")
    else:
        out = tmp_path / "no" / "such" / "out.json"
    got, err = run(["report", str(src), "--format", "rating", "--model", str(tmp_path / "nope"), "-o", str(out)])
    assert got == ["2", "False"], err
    assert "unieval-local: error:" in err and "nope" not in err  # the argument, not the missing checkpoint


def test_meta_refuses_an_unwritable_json_output_before_the_bootstrap(tmp_path, capsys):
    from unieval_local.cli import main

    pred = tmp_path / "p.jsonl"
    pred.write_text("".join(json.dumps({"id": i, "scores": {"coherence": i / 10}, "human": {"coherence": i % 3}}) + "\n"
                            for i in range(8)))
    assert main(["meta", str(pred), "--json", str(tmp_path / "no" / "such" / "m.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot write --json" in err and "Traceback" not in err
