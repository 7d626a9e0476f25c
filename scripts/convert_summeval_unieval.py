#!/usr/bin/env python
"""Convert UniEval's own SummEval predictions (official ``unieval-sum`` weights) to our files.

``../shared/data/summeval-unieval/summeval_unieval.jsonl`` (SOURCES.md section 9) holds, for
each of the 100 SummEval documents, the article, the reference, the 16 systems' summaries, the
expert ratings and the official ``MingZhong/unieval-sum`` model's P(Yes) per aspect. This
script writes two files into DIR:

- ``DIR/records.jsonl``: one score-input record per (document, system), 1,600 lines::

      {"id": "<doc_id>/<system_id>", "doc_id", "system_id", "target": <summary>,
       "source": <article>, "references": [<reference>],
       "human": {"coherence", "consistency", "fluency", "relevance", "overall"}}

  (the expert means, 1-5; ``overall`` their mean, as the file gives it). The texts are the
  file's, which are UniEval's tokenized SummEval (``team 's``).
- ``DIR/scores.jsonl``: a score output in the package's own format, one line per record in
  the same order, ``{"index", "key", "doc_id", "system_id", "scores": {"coherence",
  "consistency", "fluency", "relevance"}, "aspect_mean"}``, whose scores are the file's
  official predictions (``unieval_*``; ``aspect_mean`` is its ``unieval_overall``). **No model
  was run**: the sidecar ``DIR/scores.jsonl.meta.json`` says so (``origin``), and its signature
  carries ``origin:imported``.

Then ``unieval-local meta DIR/scores.jsonl --human DIR/records.jsonl`` prints UniEval's
published summary-level table (Spearman coherence 0.5752, consistency 0.4456, fluency 0.4492,
relevance 0.4257) and ``unieval-local report-html DIR/scores.jsonl --input DIR/records.jsonl``
shows the official model's real score distributions.

Usage:
    python scripts/convert_summeval_unieval.py [FILE] -o DIR
    (FILE defaults to ../shared/data/summeval-unieval/summeval_unieval.jsonl)

Exit status: 0 written; 2 the file is missing or not in that format (one line says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import shared_data_dir  # noqa: E402

from unieval_local import __version__  # noqa: E402
from unieval_local.hashing import sha256_file  # noqa: E402
from unieval_local.records import write_jsonl  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
#: Where the file comes from (SOURCES.md section 9).
ORIGIN = ("zouharvi/subset2evaluate, branch tmp, commit d9fa82b4de033afe865619bc456f26454f293f26, "
          "data_other/summeval_unieval.jsonl")


def system_order(system_id: str) -> tuple[int, str]:
    """M0, M1, ... M23 in numeric order."""
    digits = system_id.lstrip("M")
    return (int(digits), system_id) if digits.isdigit() else (10**6, system_id)


def convert(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(records, score lines)`` from the parsed JSONL rows of the file, documents in id
    order, systems in numeric order.

    Raises:
        ValueError: a row lacks ``i``, ``src``, ``ref``, ``tgt`` or ``scores``, or a system lacks
            one of the human or unieval scores (the message names the document and system).
    """
    records, lines = [], []
    for row in sorted(rows, key=lambda r: str(r.get("i"))):
        missing = [k for k in ("i", "src", "ref", "tgt", "scores") if k not in row]
        if missing:
            raise ValueError(f"a row lacks {', '.join(missing)}: not UniEval's SummEval prediction file")
        doc = row["i"]
        for system in sorted(row["tgt"], key=system_order):
            s = row["scores"].get(system) or {}
            need = [f"human_{a}" for a in (*ASPECTS, "overall")] + [f"unieval_{a}" for a in (*ASPECTS, "overall")]
            lacks = [k for k in need if not isinstance(s.get(k), (int, float))]
            if lacks:
                raise ValueError(f"document {doc}, system {system} lacks {', '.join(lacks)}")
            key = f"{doc}/{system}"
            records.append({"id": key, "doc_id": doc, "system_id": system, "target": row["tgt"][system],
                            "source": row["src"], "references": [row["ref"]],
                            "human": {a: float(s[f"human_{a}"]) for a in (*ASPECTS, "overall")}})
            lines.append({"index": len(lines), "key": key, "doc_id": doc, "system_id": system,
                          "scores": {a: float(s[f"unieval_{a}"]) for a in ASPECTS},
                          "aspect_mean": float(s["unieval_overall"])})
    return records, lines


def sidecar(source: Path, records_path: Path, n: int) -> dict:
    """The sidecar of the imported score output: where the scores come from (``origin``), and
    a signature that says so (``origin: imported``), so that ``report-html`` and readers of the
    file never take it for a run of this package."""
    signature = {
        "package": __version__, "task": "summarization", "aspect": "+".join(ASPECTS), "checkpoint":
        "MingZhong/unieval-sum", "revision": None, "fingerprint": None, "max_length": 1024,
        "evaluator": "unieval-sum", "identity": "verified", "splitter": "nltk-punkt-english (UniEval's own run)",
        "reference_reduction": "mean", "long_input": "truncate", "window_overlap": 1, "dtype": "unknown",
        "device": "unknown", "fast_forward": False, "torch": "unknown", "transformers": "unknown",
        "origin": "imported"}
    return {
        "origin": {"kind": "imported predictions", "model_run": False,
                   "what": "the official MingZhong/unieval-sum model's P(Yes) on SummEval, computed by UniEval's "
                           "code (its predictions as published), converted by scripts/convert_summeval_unieval.py; "
                           "no model was run here",
                   "source": ORIGIN, "file": str(source), "sha256": sha256_file(source)},
        "run": {"signature": signature},
        "input": {"path": str(records_path.resolve()), "sha256": sha256_file(records_path)},
        "shard": None,
        "progress": {"records_seen": n, "records_in_shard": n, "written": n, "complete": True},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default=None,
                        help="summeval_unieval.jsonl (default: ../shared/data/summeval-unieval/)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write records.jsonl and "
                        "scores.jsonl (+ its .meta.json) into")
    args = parser.parse_args(argv)
    source = Path(args.input) if args.input else shared_data_dir() / "summeval-unieval" / "summeval_unieval.jsonl"
    try:
        rows = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()]
        records, lines = convert(rows)
    except (OSError, ValueError) as exc:
        print(f"error: {source}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output)
    write_jsonl(out / "records.jsonl", records)
    write_jsonl(out / "scores.jsonl", lines)
    meta = sidecar(source, out / "records.jsonl", len(lines))
    (out / "scores.jsonl.meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(records)} records to {out / 'records.jsonl'} and their official unieval-sum scores to "
          f"{out / 'scores.jsonl'} (imported: no model was run)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
