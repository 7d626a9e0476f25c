"""Known answers: published per-example scores of the built-in evaluators' official weights, and
the comparison of a checkpoint's scores with them (``unieval-local verify --known-answers``).

The shipped answers are package data, ``unieval_local/data/known_answers.json``, written by
``scripts/make_known_answers.py`` from the shared evaluation data; every set names its source
and licence (UniEval's own SummEval predictions from zouharvi/subset2evaluate, UniEval's README
example and ``reproduce/unieval_predict`` files from maszhongming/UniEval, all MIT; MiniCheck's
README example, Liyan06/MiniCheck). The scoring itself is the caller's (the CLI scores through
:class:`unieval_local.Scorer`); this module loads the sets, says which evaluator a folder holds,
and compares scores with the answers, so that any list of :class:`KnownAnswerSet` (a test's own,
computed with a reference implementation) goes through the same check.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import UniEvalError

__all__ = ["KNOWN_ANSWERS_FILE", "TOLERANCE", "TOLERANCE_WHY", "KnownAnswerCheck", "KnownAnswerSet",
           "SetResult", "check_known_answers", "evaluator_of_folder", "load_known_answers", "without_answers"]

#: The package data file of the shipped answers (inside the package).
KNOWN_ANSWERS_FILE = "data/known_answers.json"

#: Largest |score - published score| that passes. Looser than the package's 1e-5 float32 parity.
TOLERANCE = 1e-4

#: Why :data:`TOLERANCE` is 1e-4 and not 1e-5 (printed by ``verify --known-answers``).
TOLERANCE_WHY = ("the published scores came from unknown hardware and library versions; the package's own "
                 "float32 promise of 1e-5 is against UniEval's code on the same machine")


@dataclass(frozen=True)
class KnownAnswerSet:
    """Published scores of one evaluator on fixed inputs.

    Attributes:
        name: the set's name (``summeval-unieval``, ``minicheck-readme`` ...).
        evaluator: the evaluator whose official weights gave the scores (``unieval-sum`` ...).
        task: the task the inputs are scored under (``summarization``, ``fact`` ...).
        aspects: the aspects scored, each with a published value for every example.
        examples: per example, the score input (a dict of the package's fields: ``target``,
            ``source``, ``references``, ``context`` as the aspects need).
        expected: per example (same order), aspect -> the published score (in [0, 1]; dialogue
            engagingness in [0, n_sentences]).
        ids: per example, where it comes from in its source (``<doc id>/<system>``, a row index).
        source: where the scores were published (repository, commit, path).
        licence: the licence the source states for them.
    """

    name: str
    evaluator: str
    task: str
    aspects: tuple[str, ...]
    examples: tuple[Mapping[str, object], ...]
    expected: tuple[Mapping[str, float], ...]
    ids: tuple[str, ...]
    source: str
    licence: str = "not stated"

    def __post_init__(self):
        if not (len(self.examples) == len(self.expected) == len(self.ids)) or not self.examples:
            raise ValueError(f"known answers {self.name!r}: examples, expected and ids must be non-empty and "
                             "of one length")
        bad = [(i, a) for i, e in enumerate(self.expected) for a in self.aspects
               if not isinstance(e.get(a), (int, float)) or not math.isfinite(e[a])]
        if bad:
            raise ValueError(f"known answers {self.name!r}: no finite published score for (example, aspect) {bad[:3]}")

    @property
    def n_scores(self) -> int:
        """Number of published scores: examples x aspects."""
        return len(self.examples) * len(self.aspects)


def load_known_answers(path: str | os.PathLike | None = None) -> list[KnownAnswerSet]:
    """The known-answer sets of a file, by default the ones the package ships.

    Args:
        path: a JSON file in the format ``scripts/make_known_answers.py`` writes
            (``{"sets": [{"name", "evaluator", "task", "aspects", "source", "licence",
            "examples": [{"id", "inputs", "expected"}]}]}``); None: the package's
            :data:`KNOWN_ANSWERS_FILE` (110 scores: 64 of UniEval's SummEval predictions, UniEval's
            README example, SF-RES, Topical-Chat and QAGS-CNNDM rows of UniEval's published
            predictions, MiniCheck's README example; sources and licences in the file).

    Returns:
        The sets, in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON of that format (the message names the set).
    """
    if path is None:
        text = resources.files("unieval_local").joinpath(KNOWN_ANSWERS_FILE).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
        return [KnownAnswerSet(name=s["name"], evaluator=s["evaluator"], task=s["task"], aspects=tuple(s["aspects"]),
                               examples=tuple(e["inputs"] for e in s["examples"]),
                               expected=tuple(e["expected"] for e in s["examples"]),
                               ids=tuple(str(e["id"]) for e in s["examples"]), source=s["source"],
                               licence=s.get("licence", "not stated"))
                for s in raw["sets"]]
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path or KNOWN_ANSWERS_FILE}: not a known-answers file ({type(exc).__name__}: {exc})") from None


def without_answers(sets: Sequence[KnownAnswerSet]) -> list[str]:
    """The built-in evaluators (:data:`~unieval_local.registry.evaluators.EVALUATORS`, registry order)
    that no set of ``sets`` covers: nothing published can be checked offline for them."""
    from ..registry.evaluators import EVALUATORS

    covered = {s.evaluator for s in sets}
    return [name for name in EVALUATORS if name not in covered]


def evaluator_of_folder(folder: str | os.PathLike, evaluator: str | None = None) -> tuple[str | None, str]:
    """Which evaluator checkpoint ``folder`` holds, for choosing its known answers.

    Args:
        folder: a checkpoint folder.
        evaluator: the evaluator the user named (``--evaluator``): it wins.

    Returns:
        ``(name, how)``: the evaluator's name and how it was found (``--evaluator``, ``recorded
        identity`` (:func:`~unieval_local.models.checkpoints.read_identity`: its download
        manifest, Hugging Face cache or ``config.json``), ``folder name``), or ``(None, why)``
        when nothing names a built-in evaluator.

    Raises:
        Nothing: an unreadable folder names no evaluator.
    """
    from ..registry.evaluators import EVALUATORS, evaluator_of_hub_id
    from .checkpoints import read_identity

    if evaluator:
        return evaluator, "--evaluator"
    identity = read_identity(folder)
    if identity.evaluator in EVALUATORS:
        return identity.evaluator, "recorded identity"
    if identity.hub_id is not None:
        named = evaluator_of_hub_id(identity.hub_id)
        if named is not None:
            return named.name, "recorded identity"
    name = Path(folder).name
    if name in EVALUATORS:
        return name, "folder name"
    return None, "the folder names no built-in evaluator (give --evaluator NAME)"


@dataclass(frozen=True)
class SetResult:
    """One set compared: ``n`` scores, the largest |difference|, and where it was."""

    name: str
    n: int
    max_diff: float
    worst: str

    def line(self) -> str:
        return f"{self.name}: {self.n} scores, max |difference| {self.max_diff:.2g} ({self.worst})"


@dataclass(frozen=True)
class KnownAnswerCheck:
    """The outcome of :func:`check_known_answers` for one checkpoint folder.

    Attributes:
        evaluator: the evaluator whose answers were checked (None: none known for the folder).
        sets: per set checked, its :class:`SetResult`.
        tolerance: the largest |difference| that passes.
        signature: the package's signature line of the run (the first set's), or None.
        error: why nothing could be scored (a checkpoint error), or None.
        note: why no answers were checked (no known answers for the evaluator), or None.
    """

    evaluator: str | None
    sets: tuple[SetResult, ...] = ()
    tolerance: float = TOLERANCE
    signature: str | None = None
    error: str | None = None
    note: str | None = None

    @property
    def n(self) -> int:
        """Scores compared, over all sets."""
        return sum(s.n for s in self.sets)

    @property
    def max_diff(self) -> float:
        """The largest |difference| over all sets (NaN when a score was not finite; 0 with none)."""
        return max((s.max_diff for s in self.sets), default=0.0, key=lambda d: math.inf if math.isnan(d) else d)

    @property
    def ok(self) -> bool:
        """Passed: no error, and every score within :attr:`tolerance` (True when none was checked)."""
        return self.error is None and not math.isnan(self.max_diff) and self.max_diff <= self.tolerance

    def verdict(self) -> str:
        """The one PASS / FAIL line (or why nothing was checked)."""
        tol = f"{self.tolerance:.0e}".replace("e-0", "e-")
        if self.error is not None:
            return f"FAIL: could not score the known answers: {self.error}"
        if not self.sets:
            return f"no known answers: {self.note or 'none published for ' + str(self.evaluator)}; nothing checked"
        if self.ok:
            return (f"PASS: max |difference| {self.max_diff:.2g} <= {tol} over {self.n} scores "
                    f"(tolerance {tol}: {TOLERANCE_WHY})")
        return (f"FAIL: max |difference| {self.max_diff:.2g} > {tol} over {self.n} scores: these weights "
                f"do not give the published scores (a stand-in, another fine-tune, or a damaged download)")


#: ``score(known_answer_set) -> (per example, aspect -> score; signature line)``: how a caller
#: scores a set's examples (the CLI: through :class:`unieval_local.Scorer`).
ScoreSet = Callable[[KnownAnswerSet], tuple[Sequence[Mapping[str, float]], str]]


def check_known_answers(sets: Sequence[KnownAnswerSet], evaluator: str | None, score: ScoreSet, *,
                        tolerance: float = TOLERANCE) -> KnownAnswerCheck:
    """Score the sets of ``evaluator`` with ``score`` and compare with their published answers.

    Args:
        sets: known-answer sets (:func:`load_known_answers`, or a test's own); those of other
            evaluators are left out.
        evaluator: the evaluator the checkpoint is (:func:`evaluator_of_folder`); None: nothing
            is checked.
        score: scores one set's examples on the checkpoint: returns per example (in order) a dict
            aspect -> score, and the run's signature line.
        tolerance: the largest |score - published| that passes (:data:`TOLERANCE`, 1e-4:
            :data:`TOLERANCE_WHY`).

    Returns:
        A :class:`KnownAnswerCheck`: per set the number of scores (examples x aspects) and the
        max |difference| with the example and aspect where it is; ``ok`` when all are within
        ``tolerance``. A :class:`~unieval_local.errors.UniEvalError` (a checkpoint that does not
        load, a model failure, a non-finite score) or ``ValueError`` from ``score`` is caught into
        ``error`` (the check fails); a non-finite score is a difference
        of NaN (fails).

    Raises:
        Whatever else ``score`` raises.
    """
    mine = [s for s in sets if s.evaluator == evaluator] if evaluator else []
    if not mine:
        note = None if evaluator else "the folder names no built-in evaluator (give --evaluator NAME)"
        return KnownAnswerCheck(evaluator, tolerance=tolerance, note=note)
    results, signature = [], None
    for s in mine:
        try:
            got, sig = score(s)
        except (UniEvalError, ValueError) as exc:
            return KnownAnswerCheck(evaluator, tuple(results), tolerance, signature, error=str(exc))
        signature = signature or sig
        worst, where = -1.0, ""
        for ident, want, have in zip(s.ids, s.expected, got, strict=True):
            for a in s.aspects:
                value = have.get(a)
                diff = abs(float(value) - want[a]) if value is not None and math.isfinite(value) else math.nan
                if math.isnan(diff) or diff > worst:
                    worst, where = diff, f"{ident} {a}: {value} vs published {want[a]}"
                if math.isnan(diff):
                    break
            if math.isnan(worst):
                break
        results.append(SetResult(s.name, s.n_scores, worst, where))
    return KnownAnswerCheck(evaluator, tuple(results), tolerance, signature)
