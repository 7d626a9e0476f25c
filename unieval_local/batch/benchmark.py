"""Labelled benchmarks: score claims against their documents with the fact checkers, then measure
how well each tells supported (label 1) from unsupported (0) claims (the CLI's ``benchmark``).

Two inputs, one pipeline (:func:`run_benchmark`):

- **LLM-AggreFact** (Tang et al., EMNLP 2024; ``lytang/LLM-AggreFact``, gated, CC BY-ND 4.0,
  evaluation only: never shipped nor downloaded here): a staged copy, its parquet / CSV / JSONL
  files as saved from the hub or a folder of them (:func:`aggrefact_splits`); fields ``dataset``,
  ``doc``, ``claim``, ``label``; the split from each file name's prefix (``dev*`` / ``test*``).
  The table has the board's eleven datasets and their unweighted mean, with the published row of
  each evaluator beside ours (``unieval_local/data/llm_aggrefact_board.json``, made by
  ``scripts/make_aggrefact_board.py`` from the board's own site repository).
- **Your own labelled data**: any records file with a claim (``target``/``claim``), a document
  (``source``/``doc``) and a label, grouped by a field of your choice, with an optional dev file.

Each split is written once as a plain JSONL of ``target``/``source`` records in the output folder
(``<split>.input.jsonl``) and scored by :func:`~unieval_local.batch.run.run_batch` into
``<split>.scores.jsonl`` (``<split>.<task>.scores.jsonl`` for an aspect of another task than
``fact``), so a run writes each record as it is scored and ``resume=True`` continues it. Each
aspect reads its document in its evaluator's own chunks (MiniCheck's 500 words, FactCG's 550 ...).
The figures are :func:`~unieval_local.analysis.labels.label_report`'s: balanced accuracy at 0.5,
at a threshold tuned on the dev split (else by k-fold cross-validation on test folds never scored
with it), ROC AUC, bootstrap intervals and paired comparisons. A rating aspect (G-Eval, 1..K) is
rescaled to [0, 1] as ``(E - 1) / (K - 1)``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.labels import LabelReport, label_report, labels_from_values, plural
from ..errors import InputFileError, MissingExtraError
from ..records import read_records
from ..registry.user_aspects import registry_with
from ..settings import EngineSettings
from .output import read_output, replace_atomically
from .run import run_batch

__all__ = ["DEFAULT_ASPECTS", "BenchmarkResult", "Split", "aggrefact_splits", "board", "labelled_splits",
           "read_split", "run_benchmark", "scores_path"]

#: The fact checkers scored when no aspect is named, board order first.
DEFAULT_ASPECTS = ("fact/support", "fact/factcg", "fact/hhem", "fact/nli_support", "fact/groundedness",
                   "fact/consistency")
#: Field names read as the claim and as the document, first found wins (``target_field`` /
#: ``source_field`` name another).
TARGET_FIELDS = ("target", "claim", "system_output", "summary", "hypothesis")
SOURCE_FIELDS = ("source", "doc", "document", "premise")
_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv")


@dataclass(frozen=True)
class Split:
    """One split's rows: claims and documents (``records``: ``{target, source}`` each), labels and groups."""

    name: str
    files: tuple[str, ...]
    records: list[dict]
    labels: np.ndarray
    groups: list[str] | None


def board() -> dict[str, Any]:
    """The LLM-AggreFact board's figures (package data; ``scripts/make_aggrefact_board.py``)."""
    text = resources.files("unieval_local").joinpath("data/llm_aggrefact_board.json").read_text(encoding="utf-8")
    return json.loads(text)


# ----------------------------------------------------------------------------- reading
def _read_parquet(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError(f"reading {path.name} (parquet) needs pyarrow, not installed here: install the "
                                "'parquet' extra: pip install 'unieval-local[parquet]' (from a clone: pip install "
                                "'.[parquet]'), or save the split as CSV or JSONL") from None
    return pq.read_table(path).to_pylist()


def _field(value: Mapping, name: str) -> Any:
    """``value[name]``, a dotted name reading nested objects (``scores.consistency``); KeyError if absent."""
    for part in name.split(".") if name not in value else [name]:
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(name)
        value = value[part]
    return value


#: The CLI flag that names each field of ``benchmark labelled`` (named in missing-field errors).
FIELD_FLAGS = {"target": "--target-field", "source": "--source-field", "label": "--label-field", "group": "--group-by"}
#: What a missing-field error says for ``benchmark llm-aggrefact``, whose fields are fixed.
AGGREFACT_FIELDS = "an LLM-AggreFact row has the fields dataset, doc, claim and label: is this a copy of it?"


def _saved_dataset(path: Path) -> InputFileError | None:
    """The error for a ``datasets`` ``save_to_disk`` folder (arrow files beside ``state.json`` /
    ``dataset_info.json``), which is not read here, saying how to convert it; None otherwise."""
    if not path.is_dir():
        return None
    marks = [p for p in path.rglob("*") if p.name in ("state.json", "dataset_info.json", "dataset_dict.json")
             or p.suffix == ".arrow"]
    if not marks:
        return None
    return InputFileError(
        f"{path}: a Hugging Face `datasets` save_to_disk folder ({marks[0].relative_to(path)} ...), which is not read "
        "here: write its splits as parquet (or JSONL) files named after the split, then give that folder: python -c "
        f"\"from datasets import load_from_disk; d = load_from_disk('{path}'); [d[s].to_parquet(f'OUT/{{s}}.parquet') "
        "for s in d]\" (one split saved alone: load_from_disk(...).to_parquet('OUT/test.parquet'); to_json(..., "
        "lines=True) writes JSONL)")


def read_split(name: str, files: Sequence[str | os.PathLike], *, label_field: str = "label",
               group_field: str | None = None, target_field: str | None = None,
               source_field: str | None = None, positive_label: str | None = None,
               field_hint: str | None = None) -> Split:
    """Read a split's rows from ``files`` (parquet, ``.jsonl``, ``.json``, ``.csv``, ``.tsv``), in order.

    Labels are read by :func:`~unieval_local.analysis.labels.labels_from_values`: 1/0/true/false,
    or with ``positive_label`` any values (equal to it: 1, else 0). A missing field's error names
    the flag that names it (:data:`FIELD_FLAGS`), or says ``field_hint`` instead (the fixed fields
    of LLM-AggreFact, :data:`AGGREFACT_FIELDS`).

    Raises:
        InputFileError: an unreadable file, a ``datasets`` save_to_disk folder (saying how to convert
            it), a row without its claim, document, label or group (the message names the file, the
            row, the field and its flag), a label not 0/1/true/false without ``positive_label`` (listing
            the values seen and naming --positive-label).
        MissingExtraError: a parquet file without pyarrow (names ``pip install 'unieval-local[parquet]'``).
    """
    records, raw, where, groups = [], [], [], []
    for f in files:
        path = Path(f)
        saved = _saved_dataset(path)
        if saved is not None:
            raise saved
        rows = _read_parquet(path) if path.suffix == ".parquet" else read_records(str(path))
        for i, row in enumerate(rows):
            here = f"{path}: row {i}"
            if not isinstance(row, Mapping):
                raise InputFileError(f"{here}: not an object of fields")
            t_name = target_field or next((k for k in TARGET_FIELDS if k in row), TARGET_FIELDS[0])
            s_name = source_field or next((k for k in SOURCE_FIELDS if k in row), SOURCE_FIELDS[0])
            try:
                target, source, label = _field(row, t_name), _field(row, s_name), _field(row, label_field)
                group = None if group_field is None else _field(row, group_field)
            except KeyError as exc:
                what = _missing(exc.args[0], t_name, s_name, label_field, target_field, source_field, field_hint)
                raise InputFileError(f"{here}: {what} (fields: {', '.join(map(str, row))})") from None
            raw.append(label)
            where.append(f"{here}: {label_field}")
            # the label (and group) kept beside them: `meta --labels --human <split>.input.jsonl` reads them
            record = {"target": target, "source": source, "label": None}
            if group_field is not None:
                record[group_field] = group
            records.append(record)
            groups.append(str(group))
    if not records:
        raise InputFileError(f"the {name} split ({', '.join(map(str, files))}) holds no rows")
    try:
        labels = labels_from_values(raw, where, positive_label=positive_label, option="--positive-label")
    except ValueError as exc:
        raise InputFileError(str(exc)) from None
    for record, y in zip(records, labels):
        record["label"] = int(y)
    return Split(name, tuple(str(f) for f in files), records, labels, None if group_field is None else groups)


def _missing(missing: str, t_name: str, s_name: str, label_field: str, target_field: str | None,
             source_field: str | None, hint: str | None) -> str:
    """What a row lacks, and the flag that names that field (or ``hint`` where the fields are fixed)."""
    if missing == t_name and not target_field:
        what, role = f"no claim field ({', '.join(TARGET_FIELDS)}; ", "target"
    elif missing == s_name and not source_field:
        what, role = f"no document field ({', '.join(SOURCE_FIELDS)}; ", "source"
    else:
        role = next(r for r, n in (("target", t_name), ("source", s_name), ("label", label_field), ("group", missing))
                    if n == missing)
        noun = {"target": "claim", "source": "document"}.get(role, role)
        what = f"no {noun} field {missing!r} ("
    return f"{what}{hint})" if hint else f"{what}name yours with {FIELD_FLAGS[role]})"


def aggrefact_splits(data: str | os.PathLike) -> dict[str, list[Path]]:
    """The files of a staged LLM-AggreFact copy by split: ``{"dev": [...], "test": [...]}`` (dev may be absent).

    ``data`` is one file or a folder searched recursively for parquet / JSONL / JSON / CSV / TSV
    files (hidden folders and this package's own outputs, ``*.input.jsonl`` / ``*.scores.jsonl``,
    left out); a file's split is its name's prefix, ``dev`` or ``test`` (the hub's
    ``data/dev-00000-of-00001.parquet`` and ``data/test-...``).

    Raises:
        InputFileError: nothing there, a ``datasets`` save_to_disk folder (saying how to write it as
            parquet), a data file named otherwise, or no test file.
    """
    root = Path(data)
    if not root.exists():
        raise InputFileError(f"{root}: no such file or folder (stage LLM-AggreFact first: docs/which-checker.md)")
    saved = _saved_dataset(root)
    if saved is not None:
        raise saved
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in _SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not p.name.endswith((".input.jsonl", ".scores.jsonl")) and ".meta" not in p.suffixes)
    out: dict[str, list[Path]] = {}
    for p in files:
        split = next((s for s in ("dev", "test") if p.name.lower().startswith(s)), None)
        if split is None:
            raise InputFileError(f"{p}: the split comes from the file name, which must start with 'dev' or 'test'")
        out.setdefault(split, []).append(p)
    if "test" not in out:
        raise InputFileError(f"{root}: no test file (test*.parquet, test*.jsonl, test*.csv ...)")
    return out


def labelled_splits(test: str | os.PathLike, dev: str | os.PathLike | None = None) -> dict[str, list[Path]]:
    """``{"test": [test], "dev": [dev]}`` of your own labelled files (dev optional)."""
    return {"test": [Path(test)], **({"dev": [Path(dev)]} if dev is not None else {})}


# ----------------------------------------------------------------------------- aspects
def _qualified(aspect: str) -> tuple[str, str]:
    task, _, name = aspect.rpartition("/")
    return task or "fact", name


def choose_aspects(aspects: Sequence[str] | None, settings: EngineSettings
                   ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The ``(task, aspect)`` pairs to score (given as ``task/aspect``, a bare name meaning ``fact/``;
    default :data:`DEFAULT_ASPECTS`) and those skipped, ``task/aspect -> why and how to stage it``.

    Raises:
        UnknownTaskError, UnknownAspectError: a name not in the registry (with the valid ones).
    """
    from ..requests.score import evaluator_unavailable
    from ..registry.evaluators import get_evaluator

    registry = registry_with(settings.aspects_config)
    chosen, skipped, why_of = [], {}, {}
    for text in dict.fromkeys(aspects or DEFAULT_ASPECTS):
        task, name = _qualified(text)
        evaluator = registry.get_aspect(task, name).checkpoint
        if evaluator not in why_of:
            why_of[evaluator] = evaluator_unavailable(evaluator, settings.model)
        why = why_of[evaluator]
        if why is None:
            chosen.append((task, name))
            continue
        hub = get_evaluator(evaluator).hub_id
        how = (f"`unieval-local download --checkpoint {evaluator} --to DIR` stages it, --model {evaluator}=DIR "
               "gives one" if hub else f"--model {evaluator}=DIR names a local model folder")
        skipped[f"{task}/{name}"] = f"not staged: {evaluator} {why} ({how})"
    return chosen, skipped


def scores_path(out_dir: str | os.PathLike, split: str, task: str = "fact") -> Path:
    """Where a split's scores of ``task``'s aspects go: ``<split>.scores.jsonl`` (``fact``), else
    ``<split>.<task>.scores.jsonl``."""
    return Path(out_dir) / (f"{split}.scores.jsonl" if task == "fact" else f"{split}.{task}.scores.jsonl")


def _stage_input(split: Split, out_dir: Path) -> Path:
    """``<split>.input.jsonl``: the claims and documents as records, rewritten only when they changed
    (so ``--resume`` finds the same input fingerprint)."""
    path = out_dir / f"{split.name}.input.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in split.records)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        replace_atomically(path, text.encode("utf-8"))
    return path


def _read_scores(path: Path, pairs: list[tuple[str, str]], scales: dict[str, int | None], n: int
                 ) -> tuple[dict[str, np.ndarray], set[int]]:
    """``{task/aspect: (n,) scores}`` from an output (NaN where missing) and the rows that failed."""
    out = {f"{t}/{a}": np.full(n, math.nan) for t, a in pairs}
    failed: set[int] = set()
    for line in read_output(path)[0]:
        i = line.get("index")
        if not isinstance(i, int) or not 0 <= i < n:
            continue
        if "error" in line or not isinstance(line.get("scores"), dict):
            failed.add(i)
            continue
        for t, a in pairs:
            v = line["scores"].get(a)
            k = scales[f"{t}/{a}"]
            out[f"{t}/{a}"][i] = math.nan if v is None else (v - 1) / (k - 1) if k else v
    return out, failed


# ----------------------------------------------------------------------------- the run
@dataclass(frozen=True)
class BenchmarkResult:
    """:func:`run_benchmark`'s answer: the label report, what was scored and skipped, and for
    LLM-AggreFact the board's published rows (``published[aspect]``: ``{"model", "scores":
    {dataset: percent}, "average"}``, or None: not on the board); ``signatures``: evaluator -> the
    signature line of the test split's run over the aspects it scored, each with its own settings."""

    kind: str
    report: LabelReport
    evaluators: dict[str, str]
    skipped: dict[str, str]
    tuning: str
    files: dict[str, list[str]]
    left_out: dict[str, int]
    published: dict[str, dict | None] = field(default_factory=dict)
    board_source: dict | None = None
    #: ``{split: [row, ...]}``: the 0-based rows of each split left out (an aspect could not score them).
    left_out_rows: dict[str, list[int]] = field(default_factory=dict)
    #: ``{evaluator: signature}`` of the test split's run (one per evaluator).
    signatures: dict[str, str] = field(default_factory=dict)
    #: ``(predictions, labels, groups)`` of the test rows the report was computed from (the HTML page's curves).
    test_data: tuple | None = field(default=None, repr=False, compare=False)

    def board_mean(self, aspect: str) -> tuple[list[str], float | None]:
        """The board datasets our mean of ``aspect`` covers, and the board's figure over the same
        datasets (percent): its published average when all eleven are covered, else the unweighted
        mean of its published per-dataset figures over those (None: not on the board)."""
        names = [d["name"] for d in board()["datasets"]]
        ours = self.report.metrics[aspect]
        covered = [g for g in names if g in ours and not math.isnan(ours[g].balanced_accuracy)]
        pub = self.published.get(aspect)
        if not pub or not covered:
            return covered, None
        if len(covered) == len(names):
            return covered, pub["average"]
        return covered, round(float(np.mean([pub["scores"][g] for g in covered])), 4)

    def to_json(self) -> dict[str, Any]:
        """Every figure: the label report's, the board's rows and the differences (percent points;
        ``mean``: ours minus the board's figure over the same datasets, ``mean_over``: those datasets)."""
        diffs = {a: _differences(self, a) for a in self.report.aspects if self.published.get(a)}
        return {"benchmark": self.kind, "tuning": self.tuning, "evaluators": self.evaluators,
                "skipped": self.skipped, "files": self.files, "rows_left_out": self.left_out,
                "rows_left_out_indices": self.left_out_rows,
                "report": self.report.to_json(), "board": {"source": self.board_source, "rows": self.published,
                                                           "differences": diffs} if self.board_source else None,
                "signatures": self.signatures}

    def table(self) -> str:
        """The board's table (LLM-AggreFact) or the label report's (your own data), then what was
        skipped and the rows left out (counted and named)."""
        text = _board_table(self) if self.kind == "llm-aggrefact" else self.report.table()
        lines = [f"tuned thresholds: {self.tuning}", text]
        lines += [f"skipped: {a}: {why}" for a, why in self.skipped.items()]
        for s, n in self.left_out.items():
            if n:
                rows = self.left_out_rows.get(s, [])
                named = ", ".join(map(str, rows[:20])) + (f" and {len(rows) - 20} more" if len(rows) > 20 else "")
                scored = self.files.get(s, [])
                staged = Path(scored[0]).with_name(f"{s}.input.jsonl") if scored else f"{s}.input.jsonl"
                lines.append(f"left out {plural(n, s + ' row')} ({'row' if n == 1 else 'rows'} {named}, 0-based, of "
                             f"{staged}): an aspect could not score {'it' if n == 1 else 'them'} (error records in "
                             f"{', '.join(scored)})")
        return "\n".join(lines)


def _differences(res: BenchmarkResult, aspect: str) -> dict[str, Any]:
    """Ours (fixed threshold, percent) minus the board's, per dataset and ``mean`` (against the
    board's figure over the same datasets, :meth:`BenchmarkResult.board_mean`), and ``mean_over``."""
    pub, ours = res.published[aspect], res.report.metrics[aspect]
    out: dict[str, Any] = {g: round(100 * ours[g].balanced_accuracy - pub["scores"][g], 4)
                           if g in ours and not math.isnan(ours[g].balanced_accuracy) else None for g in pub["scores"]}
    covered, board_figure = res.board_mean(aspect)
    m = res.report.mean[aspect].balanced_accuracy
    out["mean"] = None if math.isnan(m) or board_figure is None else round(100 * m - board_figure, 4)
    out["mean_over"] = covered
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _board_table(res: BenchmarkResult) -> str:
    """Per aspect: one row per board dataset (then any other group, shown but outside the mean) and
    the mean; fixed (0.5) and tuned balanced accuracy in percent, the tuned threshold, the board's
    figure and ours minus it; then which datasets the mean covers and the board's figure over them."""
    names = [d["name"] for d in board()["datasets"]]
    extra = [g for g in res.report.groups if g not in names]
    groups = names + extra
    gw = 1 + max(16, *(len(g) for g in groups))
    lines = []
    for a in res.report.aspects:
        pub = res.published.get(a)
        covered, board_figure = res.board_mean(a)
        lines += ["", f"{a} ({res.evaluators[a]}; board: {pub['model'] if pub else 'not on the board'})",
                  f"{'dataset':<{gw}}{'n':>7}{'BAcc@0.5':>10}{'tuned':>8}{'t':>6}{'board':>8}{'diff':>7}"]
        rows = [(g, res.report.metrics[a].get(g), pub["scores"].get(g) if pub else None) for g in groups]
        rows.append((f"mean ({len(covered)} of {len(names)})", res.report.mean[a], board_figure))
        for g, m, b in rows:
            if m is None:
                lines.append(f"{g:<{gw}}{0:>7}{'-':>10}{'-':>8}{'':>6}{'-' if b is None else f'{b:.1f}':>8}{'-':>7}")
                continue
            t = "" if math.isnan(m.tuned_threshold) else f"{m.tuned_threshold:.2f}"
            diff = "-" if b is None or math.isnan(m.balanced_accuracy) else f"{100 * m.balanced_accuracy - b:+.1f}"
            lines.append(f"{g:<{gw}}{m.n:>7}{_pct(m.balanced_accuracy):>10}{_pct(m.tuned_balanced_accuracy):>8}{t:>6}"
                         f"{'-' if b is None else f'{b:.1f}':>8}{diff:>7}")
        if len(covered) == len(names):
            cover = f"the mean is over the board's {len(names)} datasets"
        else:
            cover = (f"the mean is over {len(covered)} of the board's {len(names)} datasets: "
                     f"{', '.join(covered) or 'none'}")
        if pub and board_figure is not None:
            cover += (f"; the board's figure beside it is its average, {board_figure:.1f}" if len(covered) == len(names)
                      else f"; the board's figure beside it is its mean over the same "
                      f"{plural(len(covered), 'dataset')}, {board_figure:.1f} (its {len(names)}-dataset average: "
                      f"{pub['average']:.1f})")
        lines.append(cover)
        if extra:
            lines.append(f"not on the board, shown but left out of the mean: {', '.join(extra)}")
        iv = res.report.mean[a].intervals
        if iv:
            lines.append("95% bootstrap interval of the mean: " + ", ".join(
                f"{label} {_pct(iv[f][0])} to {_pct(iv[f][1])}"
                for label, f in (("BAcc@0.5", "balanced_accuracy"), ("tuned", "tuned_balanced_accuracy"))))
        notes = [f"{g}: {x}" for g, m in res.report.metrics[a].items() for x in m.notes]
        notes += [f"mean: {x}" for x in res.report.mean[a].notes]
        lines += [f"note: {x}" for x in notes]
    if res.report.comparisons:
        lines += ["", res.report.table().split("\n\npaired comparisons", 1)[-1].split("\n\nnotes:", 1)[0]
                  .join(["paired comparisons", ""])]
    return "\n".join(lines)


def _published(aspects: Sequence[str], evaluators: Mapping[str, str]) -> tuple[dict[str, dict | None], dict]:
    """The board's row of each aspect that runs its evaluator's own protocol (None otherwise)."""
    data = board()
    out = {}
    for a in aspects:
        entry = data["evaluators"].get(evaluators[a])
        model = entry["board_model"] if entry and entry["aspect"] == a else None
        out[a] = None if model is None else {"model": model, **{k: data["models"][model][k]
                                                                for k in ("scores", "average")}}
    return out, data["source"]


def run_benchmark(splits: Mapping[str, Sequence[str | os.PathLike]], output: str | os.PathLike, *,
                  kind: str = "labelled", aspects: Sequence[str] | None = None,
                  settings: Mapping[str, Any] | EngineSettings | None = None, resume: bool = False,
                  label_field: str = "label", group_field: str | None = None, target_field: str | None = None,
                  source_field: str | None = None, positive_label: str | None = None, threshold: float = 0.5,
                  folds: int = 5, bootstrap: int = 1000, seed: int = 0, compare: Sequence[tuple[str, str]] = (),
                  progress: bool | None = None) -> BenchmarkResult:
    """Score every split's claims with each aspect and measure them against the labels.

    Args:
        splits: ``{"test": files, "dev": files}`` (:func:`aggrefact_splits`, :func:`labelled_splits`);
            dev optional: without it thresholds are tuned by ``folds``-fold cross-validation on test.
        output: the output folder (created): ``<split>.input.jsonl`` and ``<split>.scores.jsonl`` per split.
        kind: ``"llm-aggrefact"`` (fields ``claim``/``doc``/``label``, groups by ``dataset``, the
            board's rows beside ours) or ``"labelled"``.
        aspects: ``task/aspect`` names (default :data:`DEFAULT_ASPECTS`); an aspect whose evaluator
            is not here offline is skipped and named in ``skipped`` (never downloaded).
        settings: the engine's keyword arguments (model, device, dtype ...), as for ``run_batch``.
        resume: continue the scores files of an interrupted run (``run_batch``'s ``resume``).
        label_field, group_field, target_field, source_field: the fields (dotted names read nested
            objects); the claim and document default to the first of :data:`TARGET_FIELDS` /
            :data:`SOURCE_FIELDS` present.
        positive_label: the label value meaning "supported" (any other value is 0); None: labels must
            be 1/0/true/false (:func:`~unieval_local.analysis.labels.labels_from_values`).
        threshold, folds, bootstrap, seed, compare: :func:`~unieval_local.analysis.labels.label_report`'s
            (``compare``: pairs of ``task/aspect`` names).

    Returns:
        A :class:`BenchmarkResult`. Rows some aspect could not score (error records) are left out
        of every aspect's figures, counted in ``left_out`` and named in ``left_out_rows``. For
        LLM-AggreFact a dataset not on the board is reported but left out of the mean (which is
        then comparable with the board's figure over the same datasets).

    Raises:
        InputFileError, MissingExtraError: unreadable data (:func:`read_split`).
        CheckpointNotFoundError: no aspect's evaluator is here (the message lists why for each).
        ResumeError, RunInterrupted, OutputWriteError, CheckpointError: as ``run_batch``.
        ValueError: unknown aspects, bad settings or comparisons.
    """
    from ..errors import CheckpointNotFoundError

    hint = None
    if kind == "llm-aggrefact":
        label_field, group_field = "label", "dataset"
        target_field, source_field = target_field or "claim", source_field or "doc"
        hint = AGGREFACT_FIELDS
    settings = settings if isinstance(settings, EngineSettings) else EngineSettings.of(settings or {})
    pairs, skipped = choose_aspects(aspects, settings)
    if not pairs:
        raise CheckpointNotFoundError("no aspect's evaluator is staged here: "
                                      + "; ".join(f"{a}: {why}" for a, why in skipped.items()))
    scored = {f"{t}/{a}" for t, a in pairs}
    for pair in compare:  # before any scoring: hours of it on LLM-AggreFact
        for name in ("/".join(_qualified(x)) for x in pair):
            if name not in scored:
                why = skipped.get(name) or "not among the aspects scored (--aspect)"
                raise ValueError(f"cannot compare {name}: {why}")
    registry = registry_with(settings.aspects_config)
    names = [f"{t}/{a}" for t, a in pairs]
    evaluators = {f"{t}/{a}": registry.get_aspect(t, a).checkpoint for t, a in pairs}
    scales = {f"{t}/{a}": registry.get_aspect(t, a).scale for t, a in pairs}
    out_dir = Path(output)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_task: dict[str, list[str]] = {}
    for t, a in pairs:
        by_task.setdefault(t, []).append(a)
    data, files, left_out, left_out_rows, signatures = {}, {}, {}, {}, {}
    for split in ("test", "dev"):
        if not splits.get(split):
            continue
        rows = read_split(split, splits[split], label_field=label_field, group_field=group_field,
                          target_field=target_field, source_field=source_field, positive_label=positive_label,
                          field_hint=hint)
        staged = _stage_input(rows, out_dir)
        preds, failed = {}, set()
        for task, task_aspects in by_task.items():
            path = scores_path(out_dir, split, task)
            summary = run_batch(staged, path, task=task, aspects=task_aspects, settings=settings, resume=resume,
                                progress=progress)
            if split == "test":  # the figures' run; a dev split is scored with the same settings
                signatures.update(summary.signatures)
            got, bad = _read_scores(path, [(task, a) for a in task_aspects], scales, len(rows.records))
            preds.update(got)
            failed |= bad | {i for v in got.values() for i in np.flatnonzero(np.isnan(v))}
            files.setdefault(split, []).append(str(path))
        keep = np.setdiff1d(np.arange(len(rows.records)), sorted(failed))
        left_out[split] = len(failed)
        left_out_rows[split] = sorted(failed)
        data[split] = ({a: preds[a][keep] for a in names}, rows.labels[keep],
                       None if rows.groups is None else [rows.groups[i] for i in keep])
    dev = data.get("dev")
    on_board = {d["name"] for d in board()["datasets"]}
    outside = ({g: "not on the board" for g in data["test"][2] or () if g not in on_board}
               if kind == "llm-aggrefact" else None)
    report = label_report(data["test"][0], data["test"][1], groups=data["test"][2], dev=dev, threshold=threshold,
                          folds=folds, bootstrap=bootstrap, seed=seed,
                          compare=[tuple("/".join(_qualified(x)) for x in p) for p in compare],
                          left_out_of_mean=outside)
    tuning = ("the dev split" if dev is not None else
              f"{folds}-fold cross-validation on the test split (no dev split), each fold scored with the threshold "
              "tuned on the others")
    published, source = _published(names, evaluators) if kind == "llm-aggrefact" else ({}, None)
    return BenchmarkResult(kind, report, evaluators, skipped, tuning, files, left_out, published, source,
                           left_out_rows, signatures, data["test"])
