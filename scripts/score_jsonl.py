#!/usr/bin/env python
"""Thin wrapper for GPU job scripts: ``unieval-local score`` with batch-friendly defaults.

Same arguments as ``unieval-local score`` (see ``unieval-local score --help``); adds
``--resume`` automatically when the output already exists, so a preempted job that
is requeued simply continues. Everything else (the pipeline, resume checks, shards,
the Ray engine) is the package's one ``score`` pipeline.

Usage (e.g. in a SLURM script):
    python scripts/score_jsonl.py INPUT.jsonl --output OUT.jsonl --task summarization --aspect all \\
        [--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT] [--engine ray --ray-actors 4 --gpus-per-actor 1]
"""

from __future__ import annotations

import sys
from pathlib import Path

from unieval_local.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = None
    for i, arg in enumerate(argv):
        if arg in ("--output", "-o") and i + 1 < len(argv):
            out = argv[i + 1]
        elif arg.startswith("--output="):
            out = arg.split("=", 1)[1]
    if out and Path(out).exists() and Path(out).stat().st_size > 0 and "--resume" not in argv:
        argv.append("--resume")
    return cli_main(["score", *argv])  # off a terminal (a SLURM log) progress is a line every 30 s


if __name__ == "__main__":
    raise SystemExit(main())
