"""``unieval-local verify``: check staged checkpoints offline (files, hashes, identity, tensors)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, HelpFormatter, examples

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``verify`` command to ``sub`` (argparse subparsers)."""
    from ..registry.evaluators import EVALUATORS

    p = sub.add_parser(
        "verify",
        help="check staged checkpoints offline",
        description="Check a checkpoint folder, or a home folder of them: files present, SHA-256 "
        "as in the manifest, config and tokenizer load, Yes/No tokens exist. Exit 0 if all pass, 1 if not.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local verify unieval-home",
                        "unieval-local verify unieval-home/minicheck-flan-t5-large --evaluator minicheck-flan-t5-large",
                        docs="docs/checkpoints.md"),
    )
    which = p.add_argument_group("checkpoints")
    which.add_argument("dir", help="a checkpoint folder or a folder holding several")
    which.add_argument("--evaluator", default=None, choices=list(EVALUATORS),
                    help="the evaluator whose answer words to check (default: the one the folder is named after, "
                    "else unieval's Yes/No)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local verify``: print a report per checkpoint; exit 0 when all pass, else 1."""
    from ..models.verify import verify_checkpoint

    reports = verify_checkpoint(args.dir, args.evaluator)
    for r in reports:
        print(f"{r.folder}: {'OK' if r.ok else 'FAILED'}")
        for m in r.messages:
            print(f"  {m}")
    return EXIT_OK if all(r.ok for r in reports) else 1
