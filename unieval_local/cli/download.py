"""``unieval-local download``: stage checkpoints with a SHA-256 manifest for an offline machine."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_CHECKPOINT, EXIT_OK, EXIT_USAGE, HelpFormatter, examples

__all__ = ["add_parser", "run"]

_OFFLINE = ("OfflineModeIsEnabled",)
_NO_NETWORK = ("ConnectError", "ConnectionError", "ConnectTimeout", "NameResolutionError", "MaxRetryError",
               "gaierror", "TimeoutError", "ReadTimeout", "ConnectTimeoutError", "NewConnectionError")


def _download_problem(exc: BaseException) -> str:
    """Why a download failed, in plain words for the two common causes (offline mode is set;
    the hub cannot be reached), else the error's type and message."""
    seen, e = [], exc
    while e is not None and len(seen) < 10:
        seen.append(type(e).__name__)
        e = e.__cause__ or e.__context__
    if any(n in _OFFLINE for n in seen):
        return ("offline mode is set (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1), and download needs the network: "
                "unset it on a machine that reaches the Hugging Face hub")
    if any(n in _NO_NETWORK for n in seen):
        return ("this machine cannot reach the Hugging Face hub (huggingface.co): no network, or the hub is blocked. "
                "Run `unieval-local download` on a machine that reaches it, then copy the folder here and set "
                "UNIEVAL_LOCAL_HOME to it")
    return f"{type(exc).__name__}: {exc}"


def add_parser(sub) -> None:
    """Add the ``download`` command to ``sub`` (argparse subparsers)."""
    from ..registry.evaluators import EVALUATORS
    from ..registry.tasks import TASKS

    p = sub.add_parser(
        "download",
        help="stage checkpoints for an offline machine (run where the hub is reachable)",
        description="Fetch only the files a checkpoint needs (config, weights, tokenizer) into "
        "DIR/<checkpoint>/ with a SHA-256 manifest. Copy DIR to the offline machine and set "
        "UNIEVAL_LOCAL_HOME=DIR.",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local download --task summarization --to unieval-home",
                        "unieval-local download --checkpoint unieval-fact --checkpoint minicheck-flan-t5-large "
                        "--to unieval-home --revision main",
                        docs="docs/checkpoints.md (air-gapped machines, verifying, your own checkpoint)"),
    )
    which = p.add_argument_group("checkpoints", "by --task, --checkpoint or CHECKPOINT names; --list shows them")
    which.add_argument("--task", choices=list(TASKS), help="stage the checkpoint of this task's own evaluator "
                       "(unieval-sum for summarization); its other evaluators' (MiniCheck, SEAHORSE ...) by --checkpoint")
    which.add_argument("--checkpoint", action="append", choices=list(EVALUATORS), help="checkpoint name, repeatable")
    output = p.add_argument_group("output")
    output.add_argument("--to", default=None, help="folder to write into (use it as UNIEVAL_LOCAL_HOME); "
                        "required unless --list")
    which.add_argument("--revision", default=None, help="hub branch, tag or commit (default main)")
    which.add_argument("names", nargs="*", metavar="CHECKPOINT", default=[],
                       help="checkpoint names, as --checkpoint (g-eval has no default weights: --model g-eval=DIR)")
    which.add_argument("--list", action="store_true", help="list every built-in checkpoint (hub id, size, licence, "
                       "languages) and fetch nothing; each one's size and licence are also printed before it is fetched")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local download``: stage checkpoints with a manifest; exit 0, 2 on a usage error (no
    name, an unknown one, no --to, an evaluator without default weights: g-eval), or 3 on failure."""
    from ..models.download import NO_DEFAULT_WEIGHTS, download_checkpoint
    from ..registry.evaluators import EVALUATORS
    from ..registry.tasks import get_task

    if args.list:
        return _list_checkpoints()
    names = [*args.names, *(args.checkpoint or [])]
    if args.task:
        names.append(get_task(args.task).checkpoint)  # the others: --checkpoint (SEAHORSE alone is ~30 GB)
    names = list(dict.fromkeys(names))
    if not names:
        print("unieval-local: error: give --task or --checkpoint (--list shows them)", file=sys.stderr)
        return EXIT_USAGE
    unknown = [n for n in names if n not in EVALUATORS]
    if unknown:
        print(f"unieval-local: error: unknown checkpoint {unknown[0]!r}; known: {', '.join(EVALUATORS)}",
              file=sys.stderr)
        return EXIT_USAGE
    unfetchable = [n for n in names if EVALUATORS[n].hub_id is None]
    if unfetchable:
        print(f"unieval-local: error: {NO_DEFAULT_WEIGHTS.format(name=unfetchable[0])}", file=sys.stderr)
        return EXIT_USAGE
    if not args.to:
        print("unieval-local: error: give --to DIR (the folder to stage into)", file=sys.stderr)
        return EXIT_USAGE
    for name in names:
        try:
            folder = download_checkpoint(name, args.to, revision=args.revision, progress=True,
                                         announce=lambda line: print(f"downloading {line}", file=sys.stderr))
        except Exception as exc:
            print(f"unieval-local: error: downloading {name} failed: {_download_problem(exc)}", file=sys.stderr)
            return EXIT_CHECKPOINT
        print(f"staged {name} in {folder}", file=sys.stderr)
    print(f"done; on the offline machine: export UNIEVAL_LOCAL_HOME={args.to}", file=sys.stderr)
    return EXIT_OK


def _list_checkpoints() -> int:
    """``download --list``: one row per built-in evaluator (hub id, size, licence, languages); exit 0."""
    from ..registry.evaluators import EVALUATORS

    rows = [("checkpoint", "hub id", "size", "licence", "languages")]
    for e in EVALUATORS.values():
        size = f"{e.size_gb:g} GB" if e.size_gb is not None else "-"
        rows.append((e.name, e.hub_id or "none: --model g-eval=DIR", size,
                     e.licence, ",".join(e.languages) if e.languages else "not declared"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return EXIT_OK
