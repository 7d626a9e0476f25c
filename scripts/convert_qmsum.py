#!/usr/bin/env python
"""Convert QMSum meetings (shared/data/qmsum/test.jsonl) to unieval-local JSONL.

One record per meeting (35 in the test split)::

    {"id": "qmsum-test-<i>", "doc_id": "qmsum-test-<i>", "source": "<Speaker>: <text>\\n...",
     "target": <the whole-meeting summary>, "query": "Summarize the whole meeting.",
     "instructions": [<query>],
     "section_definitions": [{"name": <topic>, "instruction": "Summarize the discussion of <topic>",
                              "topic": <topic>}, ...]}

``target`` is the reference answer to the general query (``general_query_list[0].answer``);
``source`` is the whole transcript, one ``Speaker: text`` line per turn (thousands of
tokens: use ``--long-input chunk``). ``instructions`` (the general query) and
``section_definitions`` (one free-text section per annotated topic, ``topic_list``) feed
``unieval-local report --format autoeval``. QMSum is MIT (transcripts: AMI/ICSI CC BY 4.0,
parliamentary records).

Usage:
    python scripts/convert_qmsum.py OUT.jsonl [--meetings N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_checkpoint import shared_data_dir  # noqa: E402

from unieval_local.records import write_jsonl  # noqa: E402


def convert(rows: list[dict]) -> list[dict]:
    """Records from parsed QMSum meetings, in file order."""
    out = []
    for i, row in enumerate(rows):
        general = row["general_query_list"][0]
        source = "\n".join(f"{t['speaker']}: {t['content']}" for t in row["meeting_transcripts"])
        out.append({"id": f"qmsum-test-{i}", "doc_id": f"qmsum-test-{i}", "source": source,
                    "target": general["answer"], "query": general["query"],
                    "instructions": [general["query"]],
                    "section_definitions": [{"name": t["topic"], "instruction": f"Summarize the discussion of {t['topic']}",
                                             "topic": t["topic"]} for t in row.get("topic_list", [])]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("--input", default=None, help="QMSum test.jsonl (default: shared data)")
    parser.add_argument("--meetings", type=int, default=None, help="only the first N meetings")
    args = parser.parse_args(argv)
    src = Path(args.input) if args.input else shared_data_dir() / "qmsum" / "test.jsonl"
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = convert(rows[: args.meetings])
    write_jsonl(args.output, records)
    print(f"wrote {len(records)} meetings to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
