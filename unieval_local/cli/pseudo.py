"""``unieval-local pseudo``: labelled pseudo data for ``train`` from unlabelled (source, reference) pairs
(:mod:`unieval_local.training.pseudo`; UniEval's recipe, Zhong et al. 2022, §3).

Exit status: 0 written; 2 usage or input error (unreadable data, a row without source or reference,
an unknown dimension, a missing extra, an existing output without --overwrite); 4 writing failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_WRITE, HelpFormatter, examples, usage_error

__all__ = ["add_parser", "run"]

HELP = "make labelled pseudo data (positives and rule-made negatives) for train from unlabelled pairs"


def add_parser(sub) -> None:
    """Add the ``pseudo`` command to ``sub``."""
    from ..training.pseudo import DIMENSIONS

    p = sub.add_parser(
        "pseudo", formatter_class=HelpFormatter, help=HELP,
        description="From (source, reference) pairs, write labelled JSONL rows (target, source, references, "
        "label) that train reads: each reference is a positive (label 1), with rule-made negatives (label 0) of "
        "one dimension, after UniEval's pseudo data (Zhong et al. 2022, section 3): fluency by inserting, "
        "deleting or shuffling a Poisson(5) span; coherence by a sentence of a BM25-retrieved other summary; "
        "relevance by a BM25-retrieved other summary; consistency by one entity, number, date or negation swap.",
        epilog=examples("unieval-local pseudo pairs.jsonl --dimension fluency -o fluency.jsonl",
                        "unieval-local pseudo pairs.jsonl --dimension coherence --negatives-per-positive 2 --seed 1 "
                        "-o coherence.jsonl", docs="docs/training-without-labels.md"))
    inp, gen, out = (p.add_argument_group(t) for t in ("input", "negatives", "output"))
    inp.add_argument("data", metavar="DATA", help="a .jsonl/.json/.csv/.tsv file of records with 'source' (or doc, "
                   "document) and 'references' (or reference, summary, target: the positive)")
    gen.add_argument("--dimension", required=True, choices=list(DIMENSIONS), help="the dimension of the negatives")
    out.add_argument("-o", "--output", required=True, metavar="FILE", help="the labelled JSONL to write")
    gen.add_argument("--negatives-per-positive", type=int, default=1, metavar="N",
                   help="negatives made per positive (default 1)")
    gen.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    inp.add_argument("--language", default=None, metavar="CODE",
                   help="the language of every row (default: a row's 'language' field, else detected)")
    out.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local pseudo``: write the rows, print the counts (stderr), exit as the module says."""
    from ..errors import InputFileError, MissingExtraError
    from ..records import read_records
    from ..training.pseudo import make_pseudo, pairs_from_rows

    out = Path(args.output)
    if out.exists() and not args.overwrite:
        return usage_error(FileExistsError(f"{out} exists (pass --overwrite to replace it)"))
    try:
        if not Path(args.data).exists():
            raise InputFileError(f"{args.data}: no such file")
        pairs = pairs_from_rows(read_records(args.data), args.data)
        result = make_pseudo(pairs, args.dimension, seed=args.seed,
                             negatives_per_positive=args.negatives_per_positive, language=args.language)
    except (InputFileError, ValueError, MissingExtraError) as exc:
        return usage_error(exc)
    try:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rows), encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        print(f"unieval-local: error: writing {out} failed ({exc})", file=sys.stderr)
        return EXIT_WRITE
    pos = sum(r["label"] for r in result.rows)
    skipped = "".join(f"; skipped {n} ({why})" for why, n in result.skipped.items())
    print(f"unieval-local: wrote {out}: {pos} positives, {len(result.rows) - pos} negatives{skipped}",
          file=sys.stderr)
    return EXIT_OK
