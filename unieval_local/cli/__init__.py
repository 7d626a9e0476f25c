"""The ``unieval-local`` command line.

Commands: ``score`` (the batch pipeline: resume, shards, Ray), ``merge`` (join shard
outputs), ``download`` / ``verify`` (stage checkpoints for offline machines), ``tasks``
(the registry), ``meta`` / ``compare`` (agreement with human scores, paired test),
``report-html`` (a self-contained report), ``report`` (rating / summ / autoeval
report formats, see :mod:`unieval_local.reports`) and ``serve`` (the local HTTP service,
see :mod:`unieval_local.service`). Each command's ``--help`` gives its inputs.
One module per command (:data:`COMMANDS`), each with ``add_parser(sub)`` and ``run(args)``,
imported only when its command is chosen.

Exit status of ``unieval-local score``:
    0  every record was scored;
    1  some records failed: each has an error record in the output (with
       --output-format hosted, its request is one request-level error line
       naming every bad example and field), the others are scored;
    2  usage error, unreadable or empty input, no record scorable for the aspects
       (wrong field names), unwritable output, unavailable device, or another
       process is writing the same output (it holds OUT.lock: the message names
       its pid, host and start time) (nothing scored);
    3  checkpoint not found or not loadable, e.g. weights that do not match the
       config (nothing scored);
    4  writing the output or its sidecar failed (disk full, the file-size limit
       of ``ulimit -f``): the records written before are intact; rerun with --resume;
    5  the model failed while scoring (out of memory on a single query, a CUDA or
       cuBLAS error, the CPU allocator's "can't allocate memory"): the records
       written before are intact; rerun with --resume;
    130  interrupted (Ctrl-C): the records written before are intact; rerun with --resume;
    143  terminated by SIGTERM (a scheduler's preemption), also while the model
       is still loading: the same as 130.

A score cache (``--cache-dir``) that fails (damaged or foreign file, read-only, disk
full, folder not creatable) changes no exit status: the run goes on without it after
one ``unieval-local: warning:`` line, and its summary says the cache was disabled.
``report -o`` and ``merge -o`` hold the same output lock (exit 2 when another process
writes that output) and exit 4 when writing the output fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .common import (
    EXIT_CHECKPOINT,
    EXIT_INTERRUPTED,
    EXIT_MODEL,
    EXIT_OK,
    EXIT_ROWS_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WRITE,
    LogHandler,
    WarningLines,
    usage_error,
)

__all__ = ["COMMANDS", "EXIT_CHECKPOINT", "EXIT_INTERRUPTED", "EXIT_MODEL", "EXIT_OK", "EXIT_ROWS_FAILED",
           "EXIT_TERMINATED", "EXIT_USAGE", "EXIT_WRITE", "main"]

#: The commands, in ``--help`` order: name -> (its module in this package, the one line that
#: ``unieval-local --help`` shows; the module's own parser gives the same line, a test keeps them
#: equal). A module is imported only when its command is chosen, so ``--help`` and ``--version``
#: load no engine (no torch, numpy, pydantic, fastapi).
COMMANDS: dict[str, tuple[str, str]] = {
    "score": ("score", "score a .jsonl/.json/.csv/.tsv file of records, or line-aligned text files"),
    "merge": ("merge", "join shard outputs (--shard K/N runs) into one file"),
    "download": ("download", "stage checkpoints for an offline machine (run where the hub is reachable)"),
    "meta": ("meta", "correlation of scores with human judgements"),
    "compare": ("compare", "paired bootstrap test: are systems better than a baseline?"),
    "benchmark": ("benchmark", "balanced accuracy of the fact checkers on LLM-AggreFact or your own labelled claims"),
    "train": ("train", "fine-tune a checker or a UniEval aspect on your labelled records, checked before and after"),
    "pseudo": ("pseudo", "make labelled pseudo data (positives and rule-made negatives) for train from unlabelled pairs"),
    "report-html": ("report_html", "a self-contained HTML report of a score output"),
    "report": ("report", "rating / summ / autoeval reports from UniEval queries (no LLM)"),
    "serve": ("serve", "a local HTTP service answering the hosted evaluators' requests"),
    "tasks": ("tasks", "list tasks and aspects"),
    "calibration": ("calibration", "print the calibration card of the rating report's built-in cut points"),
    "verify": ("verify", "check staged checkpoints offline"),
}


def _command_module(name: str):
    """The module of command ``name`` (imported now)."""
    import importlib

    return importlib.import_module(f".{COMMANDS[name][0]}", __name__)


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The command named in ``argv``: its first word that is not an option (the top-level parser
    has only ``--help`` and ``--version``, which take no value), when it is a command; else None."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def _build_parser(only: str | None = "*") -> argparse.ArgumentParser:
    """The ``unieval-local`` parser.

    Args:
        only: ``"*"`` (default): every command's full parser (imports every command module);
            a command name: that command's full parser, and for the others the one-line entry
            of ``--help`` only; None: the one-line entries only (``--help``, ``--version``).
    """
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="unieval-local",
        description="UniEval-exact evaluation of generated text with local T5 checkpoints. "
        "Each command's --help gives its arguments and two examples.",
        epilog="Start with: unieval-local score --help. Documentation: docs/index.md; exit statuses: "
        "docs/exit-status.md; every flag: docs/reference/cli.md (the built site).",
    )
    parser.add_argument("--version", action="version", version=f"unieval-local {__version__}",
                        help="print the package version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, summary) in COMMANDS.items():
        if only in ("*", name):
            _command_module(name).add_parser(sub)
        else:
            sub.add_parser(name, help=summary, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``unieval-local`` console script.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status (module docstring). Errors that reach here become one line on stderr:
        another process holding the output's lock (:class:`~unieval_local.locks.OutputLockedError`)
        2, a missing optional extra 2, a closed stdout pipe 0, SIGTERM before any record was
        written (:class:`~unieval_local.errors.Terminated`, e.g. while the model loads) 143,
        Ctrl-C there 130. Library warnings are shown as one ``unieval-local: warning:`` line
        each (:class:`~unieval_local.cli.common.WarningLines`). Any other exception propagates (a bug: a traceback).
    """
    from ..errors import Terminated
    from ..locks import OutputLockedError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = _build_parser(_chosen_command(argv)).parse_args(argv)
    try:
        with LogHandler(), WarningLines():
            return args.run(args)
    except OutputLockedError as exc:  # another process writes the same -o (score, report, merge)
        return usage_error(exc)
    except ImportError as exc:  # MissingExtraError: an optional feature's libraries are not installed
        from ..extras import MissingExtraError

        if not isinstance(exc, MissingExtraError):
            raise
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `unieval-local meta ... | head`
        sys.stderr.close()
        return EXIT_OK
    except Terminated:  # SIGTERM before a run started writing (loading a model ...): not a Ctrl-C
        print("unieval-local: terminated (SIGTERM) before any record was written", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:  # before a run started writing (loading a model ...)
        print("unieval-local: interrupted before any record was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
