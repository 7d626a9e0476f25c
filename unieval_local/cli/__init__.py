"""The ``unieval-local`` command line.

Commands: ``score`` (the batch pipeline: resume, shards, Ray), ``merge`` (join shard
outputs), ``download`` / ``verify`` (stage checkpoints for offline machines), ``tasks``
(the registry), ``meta`` / ``compare`` (agreement with human scores, paired test),
``report-html`` (a self-contained report), ``report`` (rating / summ / autoeval
report formats, see :mod:`unieval_local.reports`) and ``serve`` (the local HTTP service,
see :mod:`unieval_local.service`). Each command's ``--help`` gives its inputs.
One module per command (:data:`COMMANDS`), each with ``add_parser(sub)`` and ``run(args)``.

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

from . import calibration, compare, download, merge, meta, report, report_html, score, serve, tasks, verify
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

#: The command modules, in ``--help`` order.
COMMANDS = (score, merge, download, meta, compare, report_html, report, serve, tasks, calibration, verify)


def _build_parser() -> argparse.ArgumentParser:
    """The ``unieval-local`` parser: one subcommand per module of :data:`COMMANDS`."""
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="unieval-local",
        description="UniEval-exact evaluation of generated text with local T5 checkpoints.",
    )
    parser.add_argument("--version", action="version", version=f"unieval-local {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
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

    args = _build_parser().parse_args(argv)
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
