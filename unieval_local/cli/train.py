"""``unieval-local train``: fine-tune a checker or a UniEval aspect on your labels, checked before and
after (:mod:`unieval_local.training`). Every key of the YAML config (``--config FILE``) is a flag
too, declared once in :class:`~unieval_local.training.config.TrainConfig`.

Exit status: 0 trained and written; 2 usage or input error (unreadable data, a bad label, too few
rows of a class, an existing output without --overwrite, a missing extra); 3 the base is not staged,
does not load, cannot be trained, or would not fit in memory; 4 writing the folder failed (nothing
half-written is left); 130/143 interrupted (rerun with --resume).
"""

from __future__ import annotations

import argparse
import sys

from .common import (
    EXIT_CHECKPOINT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_WRITE,
    HelpFormatter,
    add_short_help,
    examples,
    usage_error,
)

__all__ = ["SHORT_HELP", "add_parser", "run"]

DOCS = "docs/training.md, docs/exit-status.md"

#: The flags ``train --help`` shows (the others: ``--help-all``).
SHORT_HELP: dict[str, str | None] = {
    "--help": None, "--help-all": None, "data": None, "--config": None, "--base": None, "--aspect": None,
    "--output": None, "--dev": None, "--label-field": None, "--positive-label": None, "--max-steps": None,
    "--epochs": None, "--resume": None, "--overwrite": None,
}

#: How each key's value is shown in the help (others: the key in capitals).
_METAVARS = {"dev": "FILE", "test": "FILE", "base": "NAME[=DIR]", "aspect": "TASK/ASPECT", "output": "DIR",
             "positive_label": "VALUE", "label_threshold": "T", "aspects_config": "FILE", "early_stopping": "PATIENCE",
             "label_field": "FIELD", "target_field": "FIELD", "source_field": "FIELD",
             "replay": "SHARE", "forgetting": "FILE", "forgetting_field": "ASPECT=FIELD", "lora_rank": "R"}

#: The flags by help group, in order (DATA is the positional argument).
_GROUPS = {
    "input": ("data", "dev", "test", "dev_share", "label_field", "positive_label", "label_threshold", "target_field",
              "source_field"),
    "model": ("base", "aspect", "aspects_config", "max_length", "device", "dtype"),
    "training": ("seed", "epochs", "max_steps", "batch_size", "learning_rate", "optimizer", "schedule",
                 "warmup_ratio", "eval_steps", "early_stopping", "best_metric", "dropout", "shuffle", "bootstrap", "replay",
                 "forgetting", "forgetting_field"),
    "lora": ("lora", "lora_rank", "lora_alpha", "lora_dropout", "lora_targets"),
    "output": ("output", "resume", "overwrite"),
}


def add_parser(sub) -> None:
    """Add the ``train`` command to ``sub``; its flags come from :class:`~unieval_local.training.config.TrainConfig`."""
    from ..training.config import TrainConfig

    p = sub.add_parser(
        "train", add_help=False, formatter_class=HelpFormatter,
        help="fine-tune a checker or a UniEval aspect on your labelled records, checked before and after",
        description="Fine-tune a T5 Boolean-QA evaluator (unieval-sum/-dialog/-fact, minicheck) or a DeBERTa "
        "checker (factcg, mdeberta-nli) on labelled records (label 1 = the aspect holds / the claim is "
        "supported), with the prompts scoring uses, keeping the best dev checkpoint; write it as an evaluator "
        "folder (score it with --model NAME=OUTPUT) with the base's and the trained model's label figures "
        "(OUTPUT/training_report.json). Every key of --config FILE (YAML) is also a flag.",
        epilog=examples("unieval-local train claims.jsonl --base minicheck-flan-t5-large=~/home/minicheck-flan-t5-large "
                        "-o out/my-checker",
                        "unieval-local train rated.jsonl --base unieval-sum --aspect summarization/coherence "
                        "--label-field expert_coherence --label-threshold 4 -o out/my-coherence --max-steps 2000",
                        docs=DOCS))
    add_short_help(p, "Fine-tune an evaluator on your labelled records (DATA) and write it to --output, with the "
                   "label figures before and after. Every key of --config FILE is also a flag (--help-all).",
                   SHORT_HELP)
    groups = {name: p.add_argument_group(name) for name in _GROUPS}
    groups["input"].add_argument("--config", default=None, metavar="FILE",
                                 help="YAML file of these keys (flags override it)")
    for group, keys in _GROUPS.items():
        for key in keys:
            info = TrainConfig.help_of(key)
            default_text = "" if info["default"] is None or info["default"] is False else f" (default {info['default']})"
            if key == "data":
                groups[group].add_argument("data", nargs="?", default=None, metavar="DATA", help=info["help"])
                continue
            flags = [f"--{key.replace('_', '-')}"] + (["-o"] if key == "output" else [])
            if info["default"] is True:  # on by default: the flag turns it off (--no-shuffle)
                groups[group].add_argument(f"--no-{key.replace('_', '-')}", dest=key, action="store_false",
                                           default=None, help=info["help"])
            elif isinstance(info["default"], bool):
                groups[group].add_argument(*flags, dest=key, action="store_true", default=None, help=info["help"])
            else:
                groups[group].add_argument(*flags, dest=key, default=None, type=info["type"] or str,
                                           choices=info["choices"], metavar=_METAVARS.get(key),
                                           help=info["help"] + default_text)
    groups["output"].add_argument("--no-progress", action="store_true", help="no progress bar (log lines instead)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local train``: train, print the before/after table (stdout), exit as the module says."""
    from ..errors import CheckpointError, CheckpointNotFoundError, InputFileError, MissingExtraError
    from ..training import load_config, train
    from ..training.config import TrainConfig

    overrides = {k: getattr(args, k, None) for k in TrainConfig.keys()}
    try:
        config = load_config(args.config, overrides)
    except ValueError as exc:
        return usage_error(exc)
    try:
        result = train(config, progress=not args.no_progress and sys.stderr.isatty())
    except (CheckpointNotFoundError, CheckpointError) as exc:
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except (FileExistsError, ValueError, InputFileError, MissingExtraError) as exc:
        return usage_error(exc)
    except KeyboardInterrupt:
        print(f"unieval-local: interrupted; rerun the same command with --resume to continue from the last "
              f"checkpoint in {config.output}.work/", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        print(f"unieval-local: error: writing {config.output} failed ({exc}); nothing half-written is left",
              file=sys.stderr)
        return EXIT_WRITE
    if result.report is None:  # a rank > 0 of a multi-process run: rank 0 writes and reports
        return EXIT_OK
    print(result.table)
    print(f"unieval-local: wrote {result.output} (score with --model {result.report['evaluator']}={result.output}); "
          f"figures in {result.output}/training_report.json", file=sys.stderr)
    return EXIT_OK
