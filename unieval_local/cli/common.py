"""What the commands share: exit statuses, one-line errors, argparse types, the engine flags
derived from the settings declaration (:func:`add_engine_flags`, :func:`engine_settings`),
atomic text output, and the stderr routing of the library's logs and warnings."""

from __future__ import annotations

import contextlib

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from ..settings import cli_settings

__all__ = ["EXIT_CHECKPOINT", "EXIT_INTERRUPTED", "EXIT_MODEL", "EXIT_OK", "EXIT_ROWS_FAILED", "EXIT_TERMINATED",
           "EXIT_USAGE", "EXIT_WRITE", "HelpFormatter", "LogHandler", "ShortHelp", "WarningLines", "add_engine_flags",
           "add_positive_label_flag",
           "add_short_help", "check_writable", "examples", "format_short_help",
           "engine_settings", "given_settings", "non_negative", "read_outputs", "run_failure_status", "stop_on_signals", "aspect_pairs", "task_name",
           "usage_error", "usage_exit", "write_text"]

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_CHECKPOINT, EXIT_WRITE, EXIT_MODEL = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """A command's ``--help``: a one-paragraph description is wrapped to the terminal as argparse
    does; a text with line breaks (the epilog's examples, :func:`examples`) is kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


def examples(*commands: str, docs: str) -> str:
    """A command's epilog: its example command lines (each runs as written, from a folder holding
    the files it names; a test parses every one), then the documentation pages (``docs/*.md``) to read."""
    return "examples:\n" + "".join(f"  {c}\n" for c in commands) + f"\nmore: {docs}"


class ShortHelp(argparse._HelpAction):
    """``-h``/``--help`` of a command with many flags: :func:`format_short_help` (the common
    flags); ``--help-all`` is argparse's whole help (:func:`add_short_help`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(format_short_help(parser), sys.stdout)
        parser.exit()


def add_short_help(p: argparse.ArgumentParser, description: str, common: Mapping[str, str | None]) -> None:
    """Give ``p`` (made with ``add_help=False``) a short ``-h``/``--help`` and ``--help-all``.

    Args:
        p: the command's parser.
        description: the paragraph the short help shows instead of the parser's description.
        common: the flags (or a positional's dest) the short help shows, in their groups and
            order, each with a shorter help text or None for its own.
    """
    p.add_argument("-h", "--help", action=ShortHelp, help="show the common flags and exit")
    p.add_argument("--help-all", action="help", help="show every flag and exit")
    p._short_help = (description, dict(common))


def _short_key(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def format_short_help(parser: argparse.ArgumentParser) -> str:
    """The short help of a parser given :func:`add_short_help`: a usage of the common flags,
    the short description, the common flags in their groups, how many others there are and
    where to read them (``--help-all``, the CLI reference), then the examples (the epilog)."""
    import copy

    description, common = parser._short_help
    keys = dict(common)
    shown = [a for a in parser._actions if _short_key(a) in keys or any(f in keys for f in a.option_strings)]
    formatter = parser._get_formatter()
    formatter.add_usage(None, shown, [])
    formatter.add_text(description)
    for group in parser._action_groups:
        actions = []
        for action in group._group_actions:
            key = next((f for f in [*action.option_strings, action.dest] if f in keys), None)
            if key is None:
                continue
            if keys[key]:
                action = copy.copy(action)
                action.help = keys[key]
            actions.append(action)
        if actions:
            formatter.start_section(group.title)
            formatter.add_arguments(actions)
            formatter.end_section()
    hidden = [a for a in parser._actions if a not in shown and a.help != argparse.SUPPRESS]
    formatter.add_text(f"{len(hidden)} more flags ({', '.join(a.option_strings[0] for a in hidden[:6] if a.option_strings)}"
                       f" ...): --help-all lists every one; so does docs/reference/cli.md (the built site)")
    formatter.add_text(parser.epilog)
    return formatter.format_help()


def usage_exit(message: str):
    """Print a usage error and exit with status 2 (argparse's convention)."""
    print(f"unieval-local: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def usage_error(exc: BaseException) -> int:
    """Print ``exc`` as a one-line CLI error and return the usage exit status (2)."""
    print(f"unieval-local: error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def task_name(text: str) -> str:
    """``--task``: a task of the registry, with a did-you-mean for a near miss."""
    from ..registry.tasks import DEFAULT_REGISTRY
    from ..errors import UnknownTaskError

    try:
        return DEFAULT_REGISTRY.get_task(text).name
    except UnknownTaskError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def read_outputs(path: str) -> list[dict]:
    """Records of a ``score`` output; ValueError naming the file when it is not one."""
    from ..records import read_score_output

    return read_score_output(path, "compare")


def add_engine_flags(p: argparse.ArgumentParser, **defaults: Any) -> None:
    """Add a flag for every engine setting that has one (:func:`~unieval_local.settings.cli_settings`:
    name, help, type and choices from the declaration), and ``--no-progress``.

    Args:
        p: the command's parser.
        defaults: the command's own defaults where they differ from the declaration
            (``report``: ``long_input="chunk"``); shown in the help.

    Every flag's argparse default is None (unset), so :func:`engine_settings` can tell a given
    flag from a default and fill in the declared (or the command's) default once.
    """
    for s in cli_settings():
        help_text = s.help_text(defaults.get(s.name))
        if s.negative_flag:
            p.add_argument(s.negative_flag, dest=s.name, action="store_const", const=False, default=None,
                           help=help_text)
        elif s.kind is bool:
            p.add_argument(s.flag, dest=s.name, action="store_const", const=True, default=None, help=help_text)
        else:
            p.add_argument(s.flag, dest=s.name, action="append" if s.repeatable else "store", default=None,
                           type=None if s.repeatable else (s.cli_type or s.kind), choices=s.choices,
                           metavar=s.metavar, help=help_text)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(engine_defaults=dict(defaults))


def given_settings(args: argparse.Namespace) -> set[str]:
    """The engine settings whose flag was given on the command line."""
    return {s.name for s in cli_settings() if getattr(args, s.name, None) is not None}


def engine_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The engine settings of a command's flags: each given flag's value (``--model`` through the
    setting's ``from_cli``), else the command's default, else the declared one; ``progress`` off
    with ``--no-progress`` (else None: on a terminal).

    Raises:
        SystemExit: a malformed ``--model`` (exit 2, one line). Other values are checked where
            the engine is made (``ValueError`` naming the setting).
    """
    defaults: Mapping[str, Any] = getattr(args, "engine_defaults", {})
    out: dict[str, Any] = {}
    for s in cli_settings():
        value = getattr(args, s.name, None)
        if value is None:
            value = defaults.get(s.name, s.default)
        elif s.from_cli is not None:
            try:
                value = s.from_cli(value)
            except ValueError as exc:
                usage_exit(str(exc))
        out[s.name] = value
    out["progress"] = False if args.no_progress else None
    return out


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``: a regular file (or a new one) is replaced atomically through
    a uniquely named temporary file beside it (fsynced before the rename, so a crash leaves the
    old file or the new one, never a part); a link is followed; a device or pipe is written to.

    Raises:
        OSError: the write, fsync or rename failed (``path`` is unchanged, the temporary
            file removed).
    """
    import os
    from pathlib import Path

    from ..batch.output import replace_atomically

    real = os.path.realpath(path)
    if os.path.exists(real) and not os.path.isfile(real):  # /dev/stdout, a FIFO ...
        with open(real, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    replace_atomically(Path(real), text.encode("utf-8"))


def check_writable(path: str) -> None:
    """Raise ValueError when ``path`` cannot be written as a file (a folder, a missing or read-only folder)."""
    import os

    if os.path.isdir(path):
        raise ValueError(f"--output {path!r} is a folder; give a file name")
    path = os.path.realpath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        return  # a device or a pipe: written to as it is
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write --output {path!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write --output {path!r}: permission denied")


class LogHandler:
    """Routes the library's ``unieval_local`` log records (progress lines, warnings) to stderr
    as ``unieval-local: <message>``, for the duration of one command."""

    def __enter__(self):
        import logging

        self.logger = logging.getLogger("unieval_local")
        self.handler = logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter("unieval-local: %(message)s"))
        self.level = self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        return False


class WarningLines:
    """Shows the library's warnings (``warnings.warn`` in :mod:`unieval_local`, e.g. an unusable
    score cache, bfloat16 on CPU) as ONE line ``unieval-local: warning: <message>`` on stderr,
    for the duration of one command, instead of Python's ``file:line: Category: message``
    and source line. Other libraries' warnings keep the previous ``warnings.showwarning``.
    Python's warning filters still decide whether a warning is shown at all."""

    def __enter__(self):
        import os
        import warnings

        self.warnings = warnings
        self.previous = warnings.showwarning
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # unieval_local/

        def show(message, category, filename, lineno, file=None, line=None):
            ours = (os.path.abspath(str(filename)).startswith(package)
                    or getattr(category, "__module__", "").startswith("unieval_local"))
            if not ours:
                return self.previous(message, category, filename, lineno, file, line)
            text = " ".join(str(message).split())
            try:
                print(f"unieval-local: warning: {text}", file=file or sys.stderr)
            except (OSError, ValueError):
                pass  # stderr closed: warnings are not worth failing for

        warnings.showwarning = show
        return self

    def __exit__(self, *exc):
        self.warnings.showwarning = self.previous
        return False


@contextlib.contextmanager
def stop_on_signals():
    """Ctrl-C and SIGTERM (a scheduler's preemption) stop the run, keeping what was written:
    the handlers raise ``KeyboardInterrupt`` / :class:`~unieval_local.errors.Terminated`, also
    recorded with :func:`~unieval_local.batch.request_stop` in case the raise is lost in a
    ``__del__`` (whose "Exception ignored" traceback is kept quiet)."""
    import signal
    import threading

    from ..batch import request_stop
    from ..errors import Terminated

    def on_signal(signum, frame):
        exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        request_stop(exc)
        raise exc

    main_thread = threading.current_thread() is threading.main_thread()
    previous = ({n: signal.signal(n, on_signal) for n in (signal.SIGTERM, signal.SIGINT)} if main_thread else {})
    default_unraisable = sys.unraisablehook

    def quiet_stop(unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):  # request_stop has it (Terminated too)
            default_unraisable(unraisable)

    sys.unraisablehook = quiet_stop
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = default_unraisable


def aspect_pairs(values: list[list[str]]) -> list[tuple[str, str]]:
    """The pairs of ``--compare`` options (``meta`` and ``benchmark`` take the same forms): each
    ``A B`` or ``A,B``.

    Raises:
        SystemExit: exit 2 (usage) naming the option that is neither form.
    """
    pairs = []
    for given in values:
        parts = [p.strip() for v in given for p in v.split(",") if p.strip()]
        if len(parts) != 2:
            usage_exit(f"--compare takes two aspects, as A B or A,B (e.g. fact/support fact/hhem), got {' '.join(given)!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def run_failure_status(exc: BaseException) -> int | None:
    """The exit status of a batch run (``score``, ``benchmark``) that raised ``exc``, its message
    printed on stderr (docs/exit-status.md): 143 / 130 / 5 for a run interrupted by SIGTERM,
    Ctrl-C or a model error; 3 for a checkpoint that is missing or unusable; 4 for an output that
    cannot be written; 2 for a usage problem (resume, input, values, files). None: not a run
    failure (the caller re-raises)."""
    from ..errors import (CheckpointError, CheckpointNotFoundError, InputFileError, OutputWriteError, ResumeError,
                          RunInterrupted, Terminated)

    if isinstance(exc, RunInterrupted):
        print(f"unieval-local: {exc}", file=sys.stderr)
        if isinstance(exc.cause, Terminated):
            return EXIT_TERMINATED
        return EXIT_INTERRUPTED if isinstance(exc.cause, KeyboardInterrupt) else EXIT_MODEL
    if isinstance(exc, (CheckpointNotFoundError, CheckpointError)):
        print(f"unieval-local: error: {exc}", file=sys.stderr)
        return EXIT_CHECKPOINT
    if isinstance(exc, OutputWriteError):
        print(f"unieval-local: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    if isinstance(exc, (ResumeError, InputFileError, ValueError, OSError)):  # also unknown aspects, bad config
        return usage_error(exc)
    return None


def add_positive_label_flag(group) -> None:
    """``--positive-label VALUE``: the flag of every command that reads binary labels (``meta
    --labels``, ``benchmark``; ``train`` to come), read by
    :func:`unieval_local.analysis.labels.labels_from_values`."""
    group.add_argument("--positive-label", default=None, metavar="VALUE",
                       help="the label value that means 'supported' (e.g. entailment): values equal to it are 1, "
                       "any other value 0 (default: labels must be 1/0/true/false; other values are an error that "
                       "lists those seen)")
