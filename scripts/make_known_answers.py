#!/usr/bin/env python
"""Regenerate ``unieval_local/data/known_answers.json``: published per-example scores of the
built-in evaluators, with exactly the inputs that re-score them (``unieval-local verify
--known-answers``; :mod:`unieval_local.models.known_answers`).

Deterministic: the same shared data give the same file, byte for byte. Every number is copied
from a published file or README (never computed here, no model runs):

- ``summeval-unieval`` (``unieval-sum``, summarization, 16 records x 4 aspects = 64 scores):
  UniEval's own predictions with the official ``MingZhong/unieval-sum`` weights on SummEval,
  ``../shared/data/summeval-unieval/summeval_unieval.jsonl`` (SOURCES.md section 9; MIT). The 4
  documents with the shortest articles (under UniEval's 1,024-token cut, so truncation plays no
  part), 4 systems each, the 16 systems M0..M23 each once. Inputs: ``src`` as source, the
  system's ``tgt`` as target, and ``ref`` as the one reference: it is the FIRST of SummEval's
  11 references (checked below against ``summeval/summeval_raw.json`` for all 100 documents),
  which is the one UniEval scored relevance against (the contract).
- ``unieval-readme`` (``unieval-sum``, 4 scores): UniEval's README example,
  ``../shared/data/unieval-readme-example.json`` (maszhongming/UniEval, MIT), printed there
  rounded to 6 places (a rounding error of at most 5e-7).
- ``sfres`` (``unieval-sum``, data2text, 6 records x 2 aspects), ``topical-chat``
  (``unieval-dialog``, 4 x 5), ``qags-cnndm`` (``unieval-fact``, 8 x 1): UniEval's published
  predictions, ``../shared/data/unieval-reproduce/predict/`` (maszhongming/UniEval commit
  d33e7b6cfebe97b2bafe435adbd818230d5a416a, ``reproduce/unieval_predict/``; MIT), evenly spaced
  rows of each file.
- ``minicheck-readme`` (``minicheck-flan-t5-large``, fact/support, 2 scores): the ``raw_prob``
  that MiniCheck's README prints for ``flan-t5-large`` (Liyan06/MiniCheck ``README.md``, commit
  020545c4bb8987789871bd6e309c8bbdedeb5720, "Usage"; code Apache-2.0, weights MIT).

Usage:
    python scripts/make_known_answers.py [--data DIR] [-o FILE]
    (DIR defaults to ../shared/data, FILE to unieval_local/data/known_answers.json)

Exit status: 0 written; 2 a shared data file is missing or not as described (one line says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import shared_data_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "unieval_local" / "data" / "known_answers.json"
SUMMARIZATION = ("coherence", "consistency", "fluency", "relevance")
UNIEVAL_ORIGIN = "maszhongming/UniEval, commit d33e7b6cfebe97b2bafe435adbd818230d5a416a"
UNIEVAL_LICENCE = "MIT (UniEval LICENSE, Copyright (c) 2022 Ming Zhong); the benchmark texts keep their own terms"
#: MiniCheck's README, "Usage" (Liyan06/MiniCheck README.md at the commit below): one document,
#: two claims, and the ``raw_prob`` it prints for ``MiniCheck(model_name='flan-t5-large')``.
MINICHECK_README = {
    "origin": "Liyan06/MiniCheck README.md, commit 020545c4bb8987789871bd6e309c8bbdedeb5720, section Usage: "
              "print(raw_prob) for MiniCheck(model_name='flan-t5-large')",
    "doc": "A group of students gather in the school library to study for their upcoming final exams.",
    "claims": ["The students are preparing for an examination.", "The students are on vacation."],
    "raw_prob": [0.9805923700332642, 0.007121330592781305],
}


def system_order(system_id: str) -> tuple[int, str]:
    """M0, M1, ... M23 in numeric order."""
    digits = system_id.lstrip("M")
    return (int(digits), system_id) if digits.isdigit() else (10**6, system_id)


def summeval_set(data: Path, n_docs: int = 4) -> dict:
    """The SummEval subset of UniEval's own predictions (module docstring)."""
    rows = [json.loads(line) for line in (data / "summeval-unieval" / "summeval_unieval.jsonl").open(encoding="utf-8")]
    raw = json.loads((data / "summeval" / "summeval_raw.json").read_text(encoding="utf-8"))
    not_first = [r["i"] for r in rows if raw[r["i"]]["refs"][0] != r["ref"]]
    if not_first:
        raise ValueError(f"summeval_unieval.jsonl: 'ref' is not SummEval's first reference for {not_first[:3]}")
    docs = sorted(rows, key=lambda r: (len(r["src"]), r["i"]))[:n_docs]
    systems = sorted(docs[0]["tgt"], key=system_order)
    per_doc = len(systems) // n_docs
    examples = []
    for k, doc in enumerate(docs):
        for system in systems[k * per_doc:(k + 1) * per_doc]:
            scores = doc["scores"][system]
            examples.append({"id": f"{doc['i']}/{system}",
                             "inputs": {"target": doc["tgt"][system], "source": doc["src"], "references": [doc["ref"]]},
                             "expected": {a: scores[f"unieval_{a}"] for a in SUMMARIZATION}})
    return {"name": "summeval-unieval", "evaluator": "unieval-sum", "task": "summarization",
            "aspects": list(SUMMARIZATION),
            "source": "UniEval's predictions with the official MingZhong/unieval-sum weights on SummEval: "
                      "zouharvi/subset2evaluate, branch tmp, commit d9fa82b4de033afe865619bc456f26454f293f26, "
                      "data_other/summeval_unieval.jsonl (fields src, tgt[system], ref = SummEval's first "
                      "reference, scores[system].unieval_<aspect>)",
            "licence": "MIT (subset2evaluate pyproject.toml); the texts are SummEval's (CNN/DailyMail, "
                       "Fabbri et al. 2021), whose own terms also apply",
            "note": f"the {n_docs} documents with the shortest articles, {per_doc} systems each (all 16 once)",
            "examples": examples}


def readme_set(data: Path) -> dict:
    """UniEval's README example (``unieval-readme-example.json``)."""
    ex = json.loads((data / "unieval-readme-example.json").read_text(encoding="utf-8"))
    expected = ex["expected_with_official_unieval_sum"]
    return {"name": "unieval-readme", "evaluator": "unieval-sum", "task": "summarization",
            "aspects": list(SUMMARIZATION), "source": ex["origin"], "licence": UNIEVAL_LICENCE,
            "note": "printed rounded to 6 places: a rounding error of at most 5e-7",
            "examples": [{"id": "readme", "inputs": {"target": ex["target"], "source": ex["source"],
                                                     "references": [ex["reference"]]},
                          "expected": {a: expected[a] for a in SUMMARIZATION}}]}


#: name -> (evaluator, task, aspects, predict file, rows taken, input fields: ours <- UniEval's)
REPRODUCE = {
    "sfres": ("unieval-sum", "data2text", ("naturalness", "informativeness"), "data2text/sfres_result.json", 6,
              {"target": "system_output", "references": "reference"}),
    "topical-chat": ("unieval-dialog", "dialogue",
                     ("naturalness", "coherence", "engagingness", "groundedness", "understandability"),
                     "dialogue/topical_chat_result.json", 4,
                     {"target": "system_output", "source": "source", "context": "context"}),
    "qags-cnndm": ("unieval-fact", "fact", ("consistency",), "fact/qags_cnndm_result.json", 8,
                   {"target": "system_output", "source": "source"}),
}


def reproduce_set(data: Path, name: str) -> dict:
    """Evenly spaced rows of one of UniEval's ``reproduce/unieval_predict`` files."""
    evaluator, task, aspects, path, n, fields = REPRODUCE[name]
    rows = json.loads((data / "unieval-reproduce" / "predict" / path).read_text(encoding="utf-8"))
    step = len(rows) // n
    examples = []
    for i in range(0, step * n, step):
        row = rows[i]
        inputs = {ours: ([row[theirs]] if ours == "references" else row[theirs]) for ours, theirs in fields.items()}
        examples.append({"id": f"{Path(path).stem.removesuffix('_result')}[{i}]", "inputs": inputs,
                         "expected": {a: row["predict_scores"][a] for a in aspects}})
    return {"name": name, "evaluator": evaluator, "task": task, "aspects": list(aspects),
            "source": f"UniEval's published predictions: {UNIEVAL_ORIGIN}, reproduce/unieval_predict/{path} "
                      f"(predict_scores), rows {step} apart",
            "licence": UNIEVAL_LICENCE, "examples": examples}


def minicheck_set() -> dict:
    """MiniCheck's README example (:data:`MINICHECK_README`)."""
    m = MINICHECK_README
    return {"name": "minicheck-readme", "evaluator": "minicheck-flan-t5-large", "task": "fact", "aspects": ["support"],
            "source": m["origin"], "licence": "MIT (MiniCheck-Flan-T5-Large weights; MiniCheck code Apache-2.0)",
            "examples": [{"id": f"claim_{k + 1}", "inputs": {"target": claim, "source": m["doc"]},
                          "expected": {"support": p}}
                         for k, (claim, p) in enumerate(zip(m["claims"], m["raw_prob"]))]}


def build(data: Path) -> dict:
    """The whole file's content."""
    sets = [summeval_set(data), readme_set(data), reproduce_set(data, "sfres"),
            reproduce_set(data, "topical-chat"), reproduce_set(data, "qags-cnndm"), minicheck_set()]
    return {"about": "Published per-example scores of the built-in evaluators' official weights, with the inputs "
                     "that re-score them: unieval-local verify --known-answers. Regenerate with "
                     "scripts/make_known_answers.py; each set names its source and licence.",
            "format": 1, "sets": sets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the shared data folder (default ../shared/data)")
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        content = build(args.data or shared_data_dir())
    except (OSError, ValueError, KeyError) as exc:
        print(f"make_known_answers: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    args.output.write_text(json.dumps(content, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n = sum(len(s["examples"]) * len(s["aspects"]) for s in content["sets"])
    print(f"{args.output}: {len(content['sets'])} sets, {n} scores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
