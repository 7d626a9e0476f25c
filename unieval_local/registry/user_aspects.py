"""User-defined aspects from a YAML file (``--aspects-config`` / ``Scorer(aspects_config=...)``).

The UniEval paper (Sec. 5.4, "transfer to unseen dimensions") shows the
Boolean-QA evaluators answer new questions zero-shot. A config adds such
questions to an existing task; they run through the same validation and engine
as the built-ins. Format (see ``configs/aspects.example.yaml``)::

    aspects:
      - task: summarization          # an existing task
        name: brevity                # new aspect name (letters, digits, _ and -)
        question: Is this a concise summary of the document?
        fields:                      # prompt order; must include the target
          - {label: summary, field: target}
          - {label: document, field: source}
        granularity: output          # output (default) | sentence
        reduction: mean              # mean (default) | sum | min, over sentences
        evaluator: unieval-sum       # optional; default: the task's. A built-in evaluator
                                     # (unieval-sum, unieval-dialog, unieval-fact,
                                     # minicheck-flan-t5-large) or a hub id of a UniEval-format
                                     # model; ``checkpoint:`` is the older name of this key
        chunk_field: source          # optional; the long field long_input="chunk" windows
                                     # (default: the last non-target field)
        window_reduction: mean       # optional; max | mean over windows
        chunk_unit: sentence         # optional; sentence | line (dialogue turns)

``field`` is any field of the example: ``target``, ``source``, ``context``,
``references`` (one query per reference) or an extra one such as ``instruction``.
The prompt is ``question: <question> </s> <label>: <value> </s> ...``.

Each evaluator's prompt format declares what it can express
(:class:`~unieval_local.text.prompts.Capabilities`), and an aspect asking for more is refused
here, naming the aspect and what the format supports. UniEval's Boolean-QA format takes a
question and any labelled fields; MiniCheck's (``predict: <document chunk></s><claim>``)
takes no question and no labels, exactly the fields ``target`` (the claim) and ``source``
(the document, which it chunks itself: no ``chunk_field`` / ``window_reduction`` /
``chunk_unit``), at granularity ``output`` or ``sentence``::

      - task: summarization
        name: summary_support        # each summary sentence checked by MiniCheck
        evaluator: minicheck-flan-t5-large
        granularity: sentence        # fields default to the format's: source, target
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import AspectsConfigError
from .evaluators import EVALUATORS, HUB_ID, get_evaluator
from ..text.prompts import aspect_problems
from .tasks import GROUP_NAMES, Aspect, PromptField, Registry

__all__ = ["load_aspects_config", "registry_with"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")


class _FieldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str | None = Field(default=None, min_length=1)
    field: str

    @field_validator("field")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"field must be an identifier such as 'source' or 'instruction', got {v!r}")
        return v


class _AspectSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    name: str
    question: str | None = Field(default=None, min_length=1)
    fields: list[_FieldSpec] | None = Field(default=None, min_length=1)
    granularity: Literal["output", "sentence"] = "output"
    reduction: Literal["mean", "sum", "min"] = "mean"
    checkpoint: str | None = None
    evaluator: str | None = None
    description: str = ""
    chunk_field: str | None = None
    window_reduction: Literal["max", "mean"] | None = None
    chunk_unit: Literal["sentence", "line"] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v) or v in GROUP_NAMES:
            raise ValueError("name must start with a letter and hold letters, digits, _ or - (not a group name: "
                             f"{', '.join(GROUP_NAMES)}), got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_evaluator(self) -> "_AspectSpec":
        if self.checkpoint is not None and self.evaluator is not None and self.checkpoint != self.evaluator:
            raise ValueError(f"evaluator {self.evaluator!r} and checkpoint {self.checkpoint!r} differ; "
                             "give one (evaluator is the current name)")
        return self

    @model_validator(mode="after")
    def _has_target(self) -> "_AspectSpec":
        if self.fields is not None and not any(f.field == "target" for f in self.fields):
            raise ValueError("fields must include the text under evaluation: {label: ..., field: target}")
        return self


class _ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    aspects: list[_AspectSpec] = Field(min_length=1)


def _line_map(text: str) -> dict[tuple, int]:
    """Map each key path of a YAML document to its 1-based line."""
    import yaml

    lines: dict[tuple, int] = {}

    def walk(node, path):
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                lines[path + (k.value,)] = k.start_mark.line + 1
                walk(v, path + (k.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, path + (i,))

    root = yaml.compose(text)
    if root is not None:
        walk(root, ())
    return lines


def load_aspects_config(path: str | os.PathLike, registry: Registry) -> list[Aspect]:
    """Read a YAML aspects config and return its aspects.

    Args:
        path: the YAML file.
        registry: the registry the aspects join (tasks must exist in it).

    Returns:
        The aspects, in file order.

    Raises:
        AspectsConfigError: unreadable YAML, unknown key, bad value, missing
            question, unknown task, or a name that already exists; each message
            names the file, the key path (e.g. ``aspects[0].granularity``) and its line.
    """
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as exc:
        raise AspectsConfigError(f"cannot read aspects config {str(path)!r}: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise AspectsConfigError(f"{where}: not valid YAML: {problem}") from exc
    if data is None:
        raise AspectsConfigError(f"{path}: the file is empty; it needs an 'aspects:' list "
                                 "(see configs/aspects.example.yaml)")
    lines = _line_map(text)
    try:
        spec = _ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            key = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
            line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), 1)
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            if err["type"] == "missing":
                msg = "missing required key"
            problems.append(f"{path}:{line}: {key or 'file'}: {msg}")
        raise AspectsConfigError("invalid aspects config:\n  " + "\n  ".join(problems)) from None
    aspects = []
    for i, a in enumerate(spec.aspects):
        where = f"{path}:{lines.get(('aspects', i), '?')}: aspects[{i}]"
        if a.task not in registry.tasks:
            raise AspectsConfigError(f"{where}.task: unknown task {a.task!r}; valid tasks: {', '.join(registry.tasks)}")
        if a.name in registry.tasks[a.task].aspects or any(b.task == a.task and b.name == a.name for b in aspects):
            raise AspectsConfigError(f"{where}.name: aspect {a.name!r} already exists for task {a.task!r}")
        key = "evaluator" if a.evaluator is not None else "checkpoint"
        chosen = a.evaluator or a.checkpoint
        if chosen is not None and chosen not in EVALUATORS and not HUB_ID.match(chosen):
            raise AspectsConfigError(
                f"{path}:{lines.get(('aspects', i, key), '?')}: aspects[{i}].{key}: unknown evaluator "
                f"{chosen!r}; use one of {', '.join(EVALUATORS)} or a hub id 'owner/name'")
        evaluator = get_evaluator(chosen or registry.tasks[a.task].checkpoint)
        fmt = evaluator.prompt_format
        cap = fmt.capabilities
        specs = a.fields if a.fields is not None else (
            [_FieldSpec(field=f) for f in cap.fields] if cap.fields is not None else None)
        labels = {f.field: f.label for f in specs} if specs is not None else {}
        problems = aspect_problems(fmt, question=a.question, labels=labels, granularity=a.granularity,
                                   chunk_field=a.chunk_field, window_reduction=a.window_reduction,
                                   chunk_unit=a.chunk_unit)
        if specs is None:
            problems.insert(0, ("fields", "missing required key (the labelled fields of the prompt, one of them "
                                "the target)"))
        if problems:
            raise AspectsConfigError("\n".join(
                f"{path}:{lines.get(('aspects', i, k), lines.get(('aspects', i), '?'))}: aspects[{i}].{k}: "
                f"{msg} (aspect {a.name!r}, evaluator {evaluator.name})" for k, msg in problems))
        fields = [f.field for f in specs]
        if cap.chunk_settings:
            chunk_field = a.chunk_field or next((f for f in reversed(fields) if f != "target"), None)
            if chunk_field is not None and (chunk_field == "target" or chunk_field not in fields):
                raise AspectsConfigError(f"{where}.chunk_field: must be one of the aspect's non-target fields "
                                         f"{[f for f in fields if f != 'target']}, got {chunk_field!r}")
            window_reduction, chunk_unit = a.window_reduction or "mean", a.chunk_unit or "sentence"
        else:  # the format chunks its document itself, max over chunks
            chunk_field, window_reduction, chunk_unit = cap.document_field, "max", "sentence"
        aspects.append(Aspect(
            task=a.task, name=a.name, question=a.question or f"({fmt.name}: {cap.shape})",
            fields=tuple(PromptField(f.label or "", f.field) for f in specs),
            granularity=a.granularity, reduction=a.reduction,
            checkpoint=chosen or registry.tasks[a.task].checkpoint,
            description=a.description or f"user-defined ({path.name})",
            chunk_field=chunk_field, window_reduction=window_reduction, chunk_unit=chunk_unit,
        ))
    return aspects


def registry_with(aspects_config: str | os.PathLike | None) -> Registry:
    """The built-in registry, with the aspects of ``aspects_config`` (a YAML file) when given:
    the registry an :class:`~unieval_local.engine.Engine` with that setting holds (so a batch
    run checks its task and aspects before it makes the engine).

    Raises:
        AspectsConfigError: an invalid aspects config (a ValueError).
    """
    from .tasks import DEFAULT_REGISTRY

    if aspects_config is None:
        return DEFAULT_REGISTRY
    return DEFAULT_REGISTRY.with_aspects(load_aspects_config(aspects_config, DEFAULT_REGISTRY))
