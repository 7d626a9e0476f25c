"""``unieval-local download``: stage checkpoints with a SHA-256 manifest for an offline machine."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_CHECKPOINT, EXIT_OK, EXIT_USAGE

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
    from ..registry.tasks import CHECKPOINTS, TASKS

    p = sub.add_parser(
        "download",
        help="stage checkpoints for an offline machine (run where the hub is reachable)",
        description="Fetch only the files a checkpoint needs (config, weights, tokenizer) into "
        "DIR/<checkpoint>/ with a SHA-256 manifest. Copy DIR to the offline machine and set "
        "UNIEVAL_LOCAL_HOME=DIR.",
    )
    p.add_argument("--task", choices=list(TASKS), help="stage the checkpoint of this task's own evaluator "
                   "(unieval-sum for summarization); its other evaluators' (MiniCheck, SEAHORSE ...) by --checkpoint")
    p.add_argument("--checkpoint", action="append", choices=list(CHECKPOINTS), help="checkpoint name, repeatable")
    p.add_argument("--to", required=True, help="folder to write into (use it as UNIEVAL_LOCAL_HOME)")
    p.add_argument("--revision", default=None, help="hub branch, tag or commit (default main)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``unieval-local download``: stage checkpoints with a manifest; exit 0, or 3 on failure."""
    from ..models.download import download_checkpoint
    from ..registry.tasks import get_task

    names = list(args.checkpoint or [])
    if args.task:
        names.append(get_task(args.task).checkpoint)  # the others: --checkpoint (SEAHORSE alone is ~30 GB)
    names = list(dict.fromkeys(names))
    if not names:
        print("unieval-local: error: give --task or --checkpoint", file=sys.stderr)
        return EXIT_USAGE
    for name in names:
        try:
            folder = download_checkpoint(name, args.to, revision=args.revision, progress=True)
        except Exception as exc:
            print(f"unieval-local: error: downloading {name} failed: {_download_problem(exc)}", file=sys.stderr)
            return EXIT_CHECKPOINT
        print(f"staged {name} in {folder}", file=sys.stderr)
    print(f"done; on the offline machine: export UNIEVAL_LOCAL_HOME={args.to}", file=sys.stderr)
    return EXIT_OK
