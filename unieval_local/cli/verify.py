"""``unieval-local verify``: check staged checkpoints offline (files, hashes, identity, tensors), and
with ``--known-answers`` that they give the published scores."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .common import EXIT_OK, HelpFormatter, examples

if TYPE_CHECKING:
    from ..models.known_answers import KnownAnswerCheck, KnownAnswerSet

__all__ = ["add_parser", "known_answers_check", "machine_line", "run"]


def add_parser(sub) -> None:
    """Add the ``verify`` command to ``sub`` (argparse subparsers)."""
    from ..registry.evaluators import EVALUATORS

    p = sub.add_parser(
        "verify",
        help="check staged checkpoints offline",
        description="Check a checkpoint folder, or a home folder of them: files present, SHA-256 "
        "as in the manifest, config and tokenizer load, Yes/No tokens exist. With --known-answers, also "
        "score the published per-example scores shipped with the package for that evaluator (UniEval's "
        "own SummEval predictions and README example, rows of its published SF-RES, Topical-Chat and "
        "QAGS-CNNDM predictions, MiniCheck's README example) in float32 and compare: PASS when every "
        "score is within 1e-4 (the published scores came from unknown hardware and library versions; "
        "the 1e-5 float32 promise is against UniEval's code on the same machine). Evaluators with no "
        "published scores are listed as such. A line says whether this machine's CPU has bfloat16 matrix "
        "units (AMX), that is whether --dtype bfloat16 is fast here. Exit 0 if all pass, 1 if not. A folder "
        "that records no checksums (no unieval_manifest.json, not a Hugging Face cache snapshot) can pass: exit 0, "
        "its first line says 'no checksums compared'. A manifest that is not valid JSON fails (exit 1).",
        formatter_class=HelpFormatter,
        epilog=examples("unieval-local verify unieval-home",
                        "unieval-local verify unieval-home/minicheck-flan-t5-large --evaluator minicheck-flan-t5-large "
                        "--known-answers",
                        docs="docs/checkpoints.md"),
    )
    which = p.add_argument_group("checkpoints")
    which.add_argument("dir", help="a checkpoint folder or a folder holding several")
    which.add_argument("--evaluator", default=None, choices=list(EVALUATORS),
                    help="the evaluator whose answer words (and with --known-answers, published scores) to check "
                    "(default: the one the folder is named after, else unieval's Yes/No)")
    scores = p.add_argument_group("known answers")
    scores.add_argument("--known-answers", action="store_true",
                        help="also score the published examples of each folder's evaluator (--evaluator, else the "
                        "folder's recorded identity, else its name) and compare, tolerance 1e-4 (110 shipped scores "
                        "over four evaluators; the others are listed as having none)")
    scores.add_argument("--device", default="cpu",
                        help="device for --known-answers (default: cpu; float32 on any device)")
    p.set_defaults(run=run)


def known_answers_check(folder: str | os.PathLike, sets: Sequence[KnownAnswerSet] | None = None, *,
                        evaluator: str | None = None, device: str = "cpu",
                        dtype: str = "float32") -> KnownAnswerCheck:
    """Score the known answers of the evaluator in ``folder`` and compare them with the published ones.

    The evaluator is ``evaluator``, else the one the folder records
    (:func:`~unieval_local.models.checkpoints.read_identity`), else the folder's name
    (:func:`~unieval_local.models.known_answers.evaluator_of_folder`). Its sets are scored through the
    public path, :class:`unieval_local.Scorer` (``model={evaluator: folder}``, float32 unless ``dtype``
    says otherwise, offline, no score cache), one :meth:`~unieval_local.Scorer.evaluate` call per set.

    Args:
        folder: a checkpoint folder.
        sets: known-answer sets; None: the package's
            (:func:`~unieval_local.models.known_answers.load_known_answers`: UniEval's own SummEval
            predictions, zouharvi/subset2evaluate; UniEval's README example and published predictions,
            maszhongming/UniEval; MiniCheck's README example, Liyan06/MiniCheck). A test passes its
            own, computed with a reference implementation on a stand-in.
        evaluator: the evaluator the folder holds (``--evaluator``), or None to read it.
        device: where to score (``cpu``, ``cuda``, ``cuda:N``).
        dtype: ``float32`` (the command's, which the 1e-4 tolerance is for) or ``bfloat16`` (for the
            fidelity check of tests/test_real_weights_bf16.py, which compares ``max_diff`` with its
            own looser tolerance, docs/speed.md).

    Returns:
        :class:`~unieval_local.models.known_answers.KnownAnswerCheck`: per set the number of scores
        (examples x aspects, each in [0, 1]; engagingness in [0, n_sentences]) and the max
        |difference| from the published ones, the tolerance (1e-4), the signature line of the run,
        ``ok``; a checkpoint that does not load, or names another evaluator, fails with ``error``;
        an evaluator with no known answers checks nothing (``ok``, with a ``note``).

    Raises:
        OSError, ValueError: the package's known-answers file is unreadable (a broken install).
    """
    from ..api import Scorer
    from ..models.known_answers import check_known_answers, evaluator_of_folder, load_known_answers

    sets = load_known_answers() if sets is None else list(sets)
    name, _how = evaluator_of_folder(folder, evaluator)
    scorers: dict[str, Scorer] = {}

    def score(s: KnownAnswerSet):
        if "scorer" not in scorers:
            scorers["scorer"] = Scorer(model={s.evaluator: os.fspath(folder)}, device=device, dtype=dtype,
                                       offline=True, progress=False)
        result = scorers["scorer"].evaluate([dict(e) for e in s.examples], task=s.task, aspects=list(s.aspects))
        # the run's identity (checkpoint and fingerprint, settings, versions): task and aspect vary by set
        line = str(result.per_aspect[s.aspects[0]].signature)
        return [ex.scores for ex in result.examples], "|".join(
            f for f in line.split("|") if not f.startswith(("task:", "aspect:")))

    return check_known_answers(sets, name, score)


def _print_known_answers(reports, args: argparse.Namespace) -> bool:
    """Check and print the known answers of each folder that passed its checks; True when all pass."""
    from ..models.known_answers import TOLERANCE, TOLERANCE_WHY, evaluator_of_folder, load_known_answers, without_answers

    sets = load_known_answers()
    print(f"known answers: a score passes within {TOLERANCE:g} of the published one ({TOLERANCE_WHY})")
    ok = True
    for r in reports:
        name, how = evaluator_of_folder(r.folder, args.evaluator)
        print(f"known answers, {r.folder} ({name or 'no evaluator'}{', by ' + how if name else ''}; float32 on "
              f"{args.device}):")
        if not r.ok:
            print("  not checked: the checks above failed")
            ok = False
            continue
        t0 = time.perf_counter()
        check = known_answers_check(r.folder, sets, evaluator=args.evaluator, device=args.device)
        for s in check.sets:
            print(f"  {s.line()}")
        if check.signature:
            print(f"  signature: {check.signature}")
        print(f"  {check.verdict()}" + (f" [{time.perf_counter() - t0:.1f} s]" if check.sets else ""))
        ok = ok and check.ok
    staged = {evaluator_of_folder(r.folder, args.evaluator)[0] for r in reports}
    absent = [n for n in without_answers(sets) if n not in staged]
    if absent:  # one line: these were never asked for here
        print(f"{len(absent)} evaluators not staged here have no known answers either (no per-example scores of "
              f"their official weights are shipped; not checked): {', '.join(absent)}")
    return ok


def machine_line() -> str:
    """The line ``verify`` prints about this machine: whether its CPU has bfloat16 matrix units
    (:func:`~unieval_local.models.cpu_precision.cpu_bfloat16_units`), which decides whether
    ``--dtype bfloat16`` is fast or slow on it."""
    from ..models.cpu_precision import cpu_bfloat16_units

    units = cpu_bfloat16_units()
    verdict = ("so --dtype bfloat16 runs the T5 evaluators faster here (not the DeBERTa or decoder ones)"
               if units.matrix_units else "so --dtype bfloat16 is slower than float32 here")
    return f"this machine's CPU: {units.line()}; {verdict} (docs/speed.md, Precision)"


def run(args: argparse.Namespace) -> int:
    """``unieval-local verify``: print a report per checkpoint, then :func:`machine_line` (and with
    ``--known-answers`` the score check of each); exit 0 when all pass, else 1."""
    from ..models.verify import verify_checkpoint

    reports = verify_checkpoint(args.dir, args.evaluator)
    for r in reports:
        what = " (files, tokenizer, weights; known answers below)" if getattr(args, "known_answers", False) else ""
        print(f"{r.headline()}{what}")
        for m in r.messages:
            print(f"  {m}")
    ok = all(r.ok for r in reports)
    print(machine_line())
    if getattr(args, "known_answers", False):
        ok = _print_known_answers(reports, args) and ok
    return EXIT_OK if ok else 1
