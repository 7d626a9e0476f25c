"""``unieval-local merge``: join shard outputs into one file, after checking coverage."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, EXIT_WRITE, HelpFormatter, examples, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``merge`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "merge",
        help="join shard outputs (--shard K/N runs) into one file",
        description="Join the outputs of --shard 0/N ... N-1/N runs into OUTPUT in input order, after "
        "checking that they come from the same run and input, that every shard is there once and "
        "complete, and that no key is missing or duplicated (across shards or within one). Prints the overall "
        "per aspect. OUTPUT is written atomically, holding OUTPUT.lock meanwhile. Exit 0, 2 when a check fails "
        "or another process is writing OUTPUT (nothing written), 4 when writing OUTPUT failed.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local merge scores.0.jsonl scores.1.jsonl scores.2.jsonl -o scores.jsonl",
                        "unieval-local merge shards/*.jsonl -o scores.jsonl --force",
                        docs="docs/batch.md (shards, SLURM job arrays), docs/exit-status.md"),
    )
    p.add_argument_group("input").add_argument("outputs", nargs="+", metavar="SHARD.jsonl",
                                               help="the shard outputs (score --shard K/N runs), all N of them")
    output = p.add_argument_group("output")
    output.add_argument("--output", "-o", required=True, help="the merged JSONL (not overwritten without --force)")
    output.add_argument("--force", action="store_true", help="overwrite an existing --output")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local merge``: join shard outputs after checking coverage
    (:func:`unieval_local.batch.merge_outputs`, which holds the output's lock and writes it
    atomically).

    Returns:
        0; 2 when a check fails, a shard cannot be read or another process holds the output's
        lock (nothing written); 4 when writing the output failed (it is unchanged).
    """
    from ..batch import MergeError, OutputWriteError, format_summary, merge_outputs
    from ..locks import OutputLockedError

    try:
        summary = merge_outputs(args.outputs, args.output, force=args.force)
    except OutputWriteError as exc:
        print(f"unieval-local: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    except (MergeError, OSError, OutputLockedError) as exc:
        return usage_error(exc)
    print(format_summary(summary), file=sys.stderr)
    print(f"merged {len(args.outputs)} shards into {args.output}", file=sys.stderr)
    return EXIT_OK
