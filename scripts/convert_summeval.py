#!/usr/bin/env python
"""Convert SummEval (shared/data/summeval/summeval_raw.json) to unieval-local JSONL.

One record per (document, system): 100 documents x 16 systems = 1,600 lines::

    {"id": "<doc_id>/<system_id>", "doc_id": ..., "system_id": "M8",
     "source": <article>, "target": <summary>, "references": [<first reference>],
     "human": {"coherence": 1.67, "consistency": 3.0, "fluency": 4.67, "relevance": 2.33}}

The source is the PTB-tokenized article of ``summeval_raw.json`` (the same text
UniEval's ``summeval.json`` uses), the target the system summary, and the
references the FIRST (original CNN/DM) reference only, as UniEval does; pass
``--all-references`` for all 11. ``human`` holds the mean of the 3 expert
ratings (1-5), converted from strings to floats.

Usage:
    python scripts/convert_summeval.py OUT.jsonl [--all-references] [--docs N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import shared_data_dir  # noqa: E402

from unieval_local.records import write_jsonl  # noqa: E402


def convert(raw: dict, *, all_references: bool = False, docs: int | None = None) -> list[dict]:
    """Records from the parsed ``summeval_raw.json``, documents sorted by id, systems by id."""
    records = []
    for doc_id in sorted(raw)[:docs]:
        doc = raw[doc_id]
        refs = doc["refs"] if all_references else doc["refs"][:1]
        for system_id in sorted(doc["hypos"], key=lambda s: int(s.lstrip("M"))):
            hypo = doc["hypos"][system_id]
            records.append({
                "id": f"{doc_id}/{system_id}",
                "doc_id": doc_id,
                "system_id": system_id,
                "source": doc["src"],
                "target": hypo["hypo"],
                "references": list(refs),
                "human": {k: float(v) for k, v in hypo["scores"].items()},
            })
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="output .jsonl")
    parser.add_argument("--input", default=None, help="summeval_raw.json (default: shared data)")
    parser.add_argument("--all-references", action="store_true", help="keep all 11 references")
    parser.add_argument("--docs", type=int, default=None, help="only the first N documents by id")
    args = parser.parse_args(argv)
    src = Path(args.input) if args.input else shared_data_dir() / "summeval" / "summeval_raw.json"
    records = convert(json.loads(src.read_text()), all_references=args.all_references, docs=args.docs)
    write_jsonl(args.output, records)
    print(f"wrote {len(records)} records to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
