"""The Boolean-QA queries reports derive: a report's own question as an aspect
(:func:`derived_aspect`, :func:`support_aspect`), derived examples of many records in one flat
list with the way back (:class:`Flat`), claims (summary sentences checked against the source:
:class:`Claims`) and key-point coverage (:class:`Coverage`), and planning problems as row errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ExampleProblem
from ..registry.tasks import Aspect, PromptField
from ..schema import Evidence, UniEvalData
from ..wire.shapes import ClaimWindow, RowError
from .records import ReportRecord

__all__ = ["Claims", "Coverage", "Flat", "best_query_window", "derived_aspect", "key_point_json",
           "probability_name", "problems_to_errors", "relatedness_truncation_notes", "short", "summary_sentence_spans",
           "support_aspect"]


def derived_aspect(name: str, question: str, fields: Sequence[tuple[str, str]], checkpoint: str, *,
                   chunk_field: str | None = None, window_reduction: Literal["max", "mean"] = "mean") -> Aspect:
    """A report's own Boolean-QA question as an output-level :class:`Aspect`
    (the prompt is built exactly like UniEval's: ``question: ... </s> <label>: <value> ...``)."""
    return Aspect(task="report", name=name, question=question,
                  fields=tuple(PromptField(label, f) for label, f in fields), granularity="output",
                  checkpoint=checkpoint, chunk_field=chunk_field, window_reduction=window_reduction)


def support_aspect(consistency: Aspect, name: str = "support") -> Aspect:
    """The consistency question asked of one claim against one document, at output level
    (the claim is not split further): key-point coverage (claim = key point,
    document = summary) and autoeval's support check (claim = transcript
    sentence, document = one summary sentence)."""
    return derived_aspect(name, consistency.question, [(pf.label, pf.field) for pf in consistency.fields],
                          consistency.checkpoint, chunk_field="source", window_reduction="max")


@dataclass
class Flat:
    """Derived examples from many records in one flat list, with the way back.

    ``add(i, example)`` appends and returns the position; ``by_record[i]`` lists
    record ``i``'s positions in order.
    """

    examples: list[UniEvalData] = field(default_factory=list)
    by_record: dict[int, list[int]] = field(default_factory=dict)

    def add(self, record: int, example: UniEvalData) -> int:
        """Append ``example`` for record ``record``; return its position."""
        self.examples.append(example)
        self.by_record.setdefault(record, []).append(len(self.examples) - 1)
        return len(self.examples) - 1

    def of(self, record: int) -> list[int]:
        """Record ``record``'s positions, in the order added."""
        return self.by_record.get(record, [])

    def positions(self) -> dict[int, int]:
        """Position -> record index, for mapping planning problems back to records."""
        return {k: i for i, ks in self.by_record.items() for k in ks}


def summary_sentence_spans(text: str, splitter) -> list[tuple[int, int]]:
    """The summary's sentences as the reports see them: each line (a bullet, a
    ``Section: value`` line) on its own, split further by ``splitter`` (Punkt),
    list markers left out. Character spans into ``text``."""
    from ..text.keypoints import source_sentence_spans

    return source_sentence_spans(text, splitter, strip_bullets=True)


@dataclass
class Claims:
    """Claim queries for several records: each summary sentence against the source.

    The query is the task's consistency question at output level, one claim at a
    time (the same prompt UniEval builds for one sentence); a long source is read in
    windows and the best window kept (max).
    """

    flat: Flat = field(default_factory=Flat)
    sentences: dict[int, list[str]] = field(default_factory=dict)

    def plan(self, i: int, rec: ReportRecord, splitter, max_n_claims: int, skip=None,
             spans: Sequence[tuple[int, int]] | None = None, generated: list[str] | None = None) -> RowError | None:
        """Add record ``i``'s first ``max_n_claims`` sentences (``spans`` into the target,
        default :func:`summary_sentence_spans`; those ``skip(start, end)`` does not
        exclude), or its first ``max_n_claims`` ``generated`` claims (a local model's:
        :mod:`~unieval_local.reports.generated_points`); ``sentences[i]`` keeps all the
        sentences. An error when there is none."""
        spans = summary_sentence_spans(rec.target, splitter) if spans is None else spans
        self.sentences[i] = [rec.target[a:b] for a, b in spans if skip is None or not skip(a, b)]
        if not self.sentences[i]:
            return RowError(field="target", message="the summary has no sentence to check")
        for claim in (generated or self.sentences[i])[:max_n_claims]:
            self.flat.add(i, UniEvalData(target=claim, source=rec.source))
        return None

    def read(self, i: int, result, source: str, name: str = "claim") -> list[tuple[str, float, ClaimWindow | None]]:
        """Record ``i``'s claims: ``(text, P(Yes), best source window or None)``."""
        out = []
        for k in self.flat.of(i):
            ev = result.evidence[name][k] if result.evidence else None
            out.append((self.flat.examples[k].target, float(result.values[name][k]), best_query_window(ev, source)))
        return out


def best_query_window(ev: Evidence | None, source: str) -> ClaimWindow | None:
    """The source window of the highest-scoring query of ``ev``, when the source was
    read in windows; None when it was read whole."""
    if ev is None:
        return None
    windowed = [q for q in ev.queries if q.window is not None]
    if not windowed:
        return None
    w = max(windowed, key=lambda q: q.value).window
    return ClaimWindow(start=w.start, end=w.end, text=source[w.start:w.end])


def short(text: str, n: int = 160) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def problems_to_errors(problems: Sequence[ExampleProblem], positions: Mapping[int, int],
                       errors: dict[int, RowError]) -> None:
    """Turn planning problems of derived examples into row errors of their records.

    ``positions`` maps a derived example's position to its record index.
    """
    for p in problems:
        rec = positions.get(p.index)
        if rec is not None and rec not in errors:
            errors[rec] = RowError(field=p.field, message=p.message)


@dataclass
class Coverage:
    """Key-point coverage queries for several records (claim = key point, document = summary)."""

    flat: Flat = field(default_factory=Flat)
    key_points: dict[int, list] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)

    def plan(self, i: int, rec: ReportRecord, n_default: int | None, splitter,
             generated: list[str] | None = None) -> RowError | None:
        """Add record ``i``'s key points (given; else ``generated`` by a local model,
        :mod:`~unieval_local.reports.generated_points`; else extracted from its source); an
        error if none. Asking for more key points than the source has candidate sentences adds
        a note (``notes[i]``) and checks all of them."""
        from ..text.keypoints import KeyPoint, extract_key_points

        if rec.key_points:
            points = [KeyPoint(t) for t in rec.key_points]
        elif generated:
            points = [KeyPoint(t) for t in generated]
        else:
            n = rec.n_key_points if rec.n_key_points is not None else n_default
            points = extract_key_points(rec.source or "", n, splitter=splitter)
            if n is not None and 0 < len(points) < n:
                self.notes.setdefault(i, []).append(
                    f"n_key_points is {n}, but the source has only {len(points)} candidate sentence(s) "
                    f"(sentences with at least 3 content words, or 2 with a number or date), "
                    f"so {len(points)} key point(s) are checked")
        if not points:
            return RowError(field="source", message="no key point: the source has no sentence "
                            "(give 'key_points' or a longer source)")
        self.key_points[i] = points
        for kp in points:
            self.flat.add(i, UniEvalData(target=kp.text, source=rec.target))
        return None

    def values(self, i: int, result, name: str = "key_point_coverage") -> list[float]:
        """Record ``i``'s coverage probability per key point, in key-point order."""
        return [float(result.values[name][k]) for k in self.flat.of(i)]


def key_point_json(kp, value: float, threshold: float) -> dict[str, Any]:
    """One key point with its coverage probability and verdict, for the reports' JSON."""
    return {"key_point": kp.text, "score": value, "covered": bool(value >= threshold),
            "start": kp.start, "end": kp.end}


def probability_name(cons) -> str:
    """How the probability of the consistency checker ``cons`` (an aspect) is named in
    reasons: ``P(Yes)`` for the Boolean-QA checkers (UniEval, MiniCheck), ``P(<label>)`` for a
    classifier (mdeberta-nli and HHEM: ``P(entailment)``, ``P(consistent)``)."""
    from ..registry.evaluators import get_evaluator

    spec = get_evaluator(cons.checkpoint)
    return f"P({spec.label})" if spec.backend != "t5" and spec.label else "P(Yes)"


def relatedness_truncation_notes(record: int, questions: Sequence[Mapping[str, Any]], related: Mapping[int, Flat],
                                 results: Mapping[str, Any]) -> list[str]:
    """One note per completeness question of ``record`` whose relatedness queries (its relatedness
    question, made from the section's instruction or topic, then a transcript sentence) were
    longer than max_length and lost their end, from their evidence: how many of the record's
    queries of that question, and the most tokens one lost (a 3,000-word instruction cuts every
    one of them: each then reads little or nothing of its sentence).

    Args:
        record: the record's index in the request. questions: its plan's questions (``question``,
            ``k``). related: question number -> its :class:`Flat` of relatedness examples.
        results: the first stage's job results (``related_<k>``, with evidence).
    """
    notes = []
    for q in questions:
        res = results.get(f"related_{q['k']}")
        per_example = next(iter(res.evidence.values()), None) if res is not None and res.evidence else None
        if not per_example or q["k"] not in related:
            continue
        evs = [per_example[p] for p in related[q["k"]].of(record) if p < len(per_example)]
        cut = [c for ev in evs if ev is not None and ev.truncated for c in ev.queries if c.truncated]
        if cut:
            notes.append(f"{len(cut)} of the {len(evs)} relatedness queries of the completeness question "
                         f"'{short(q['question'], 80)}' were longer than max_length and lost their end (up to "
                         f"{max(c.tokens_dropped or 0 for c in cut)} tokens each): the transcript sentences' "
                         "relatedness to it was read from cut queries; a shorter instruction or topic is read whole")
    return notes
