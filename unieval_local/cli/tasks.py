"""``unieval-local tasks``: the registry as a table (tasks, aspects, fields, checkpoints)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, HelpFormatter, examples, usage_error

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``tasks`` command to ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "tasks",
        help="list tasks and aspects",
        description="Print every task and aspect: the fields it needs, granularity, range and checkpoint.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local tasks", "unieval-local tasks --aspects-config configs/aspects.example.yaml",
                        docs="docs/concepts.md (task, aspect, fields), docs/evaluators.md"),
    )
    p.add_argument_group("aspects").add_argument("--aspects-config", default=None, metavar="FILE", help="include user-defined aspects")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local tasks``: print the registry as a table; exit 0 (2 on a bad config)."""
    from ..registry.tasks import DEFAULT_REGISTRY

    registry = DEFAULT_REGISTRY
    if args.aspects_config:
        from ..registry.user_aspects import load_aspects_config

        try:
            registry = DEFAULT_REGISTRY.with_aspects(load_aspects_config(args.aspects_config, DEFAULT_REGISTRY))
        except ValueError as exc:
            return usage_error(exc)
    rows = [("task", "aspect", "needs", "granularity", "range", "checkpoint")]
    for task in registry.tasks.values():
        for a in task.aspects.values():
            gran = ("share of supported claims" if a.decompose else "whole target" if a.granularity == "output"
                    else f"{a.reduction} over sentences")
            if "references" in a.required_fields:
                gran += ", mean over references"
            rows.append((task.name, a.name, ", ".join(a.required_fields), gran, a.value_range, a.checkpoint))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return EXIT_OK
