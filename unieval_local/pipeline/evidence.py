"""Evidence: the sentences and queries behind each score (issue: evidence and long inputs).

UniEval computes a score per summary sentence and then keeps only their mean;
here the per-sentence values, their character offsets, the window of a long
source that supported them, and whether any query lost its end to
``max_length`` are kept and returned on request.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .fold import Folded, on_scale
from .planning import Plan, TokenCounter
from ..registry.evaluators import format_of
from ..schema import Evidence, QueryEvidence, SentenceEvidence, Span, UniEvalData

__all__ = ["build_evidence", "truncated_field"]


def truncated_field(prompt: str, spans: Sequence[tuple[str, int, int]], counter: TokenCounter | None,
                    max_length: int, cut_field: str | None = None) -> str | None:
    """The field in which right truncation at ``max_length`` tokens cuts ``prompt`` (None
    without a token counter), or ``cut_field`` for a format whose backend cuts inside that field
    (:attr:`PromptFormat.cut_field <unieval_local.text.prompts.PromptFormat>`: the premise),
    unless the prompt without that field is still over ``max_length`` (the claim alone is too
    long: planning refuses it, but a prompt scored directly can be), or the prompt has no such
    field: then the last other field (the target), whose whole the backend could not keep."""
    if cut_field is not None:
        at = next(((a, b) for name, a, b in spans if name == cut_field), None)
        rest = [name for name, _, _ in spans if name != cut_field]
        if rest and (at is None or counter is not None
                     and counter.count([prompt[:at[0]] + prompt[at[1]:]])[0] > max_length):
            return rest[-1]
        return cut_field
    if counter is None:
        return None
    kept = counter.cut(prompt, max_length - 1)  # the last token is the EOS
    for name, start, end in spans:
        if kept < end:
            return name
    return spans[-1][0] if spans else None


def _distributions(plan: Plan, blocks, runner, max_length: int) -> dict[int, dict[str, float]]:
    """Prompt index -> its rating distribution, for the prompts of ``blocks`` (a rating
    aspect's), from ``runner`` (:meth:`Runner.distributions
    <unieval_local.models.base.Runner.distributions>`); empty when it gives none."""
    if runner is None:
        return {}
    wanted = [k for b in blocks if b is not None for k in b.indices]
    got = runner.distributions([plan.prompts[k] for k in wanted], max_length=max_length)
    return {k: d for k, d in zip(wanted, got or []) if d}


def build_evidence(plan: Plan, folded: Folded, p_yes: np.ndarray, n_tokens: np.ndarray,
                   examples: Sequence[UniEvalData | None], max_length: int,
                   counter: TokenCounter | None = None) -> dict[str, list[Evidence | None]]:
    """``{aspect: [Evidence or None per example]}`` for one plan and its scores."""
    out: dict[str, list[Evidence | None]] = {}
    for name, blocks in plan.blocks.items():
        aspect = plan.aspects[name]
        uses_refs = any(pf.field == "references" for pf in aspect.fields)
        dists = _distributions(plan, blocks, counter, max_length) if aspect.scale else {}
        rows: list[Evidence | None] = []
        for i, block in enumerate(blocks):
            units = folded.unit_values[name][i]
            if block is None or units is None:
                rows.append(None)
                continue
            queries = []
            for k in block.indices:
                q = plan.queries[k]
                n = int(n_tokens[k])
                cut = n > max_length
                queries.append(QueryEvidence(
                    value=on_scale(p_yes[k], aspect.scale) if aspect.scale else float(p_yes[k]),
                    distribution=dists.get(k),
                    sentence=q.unit if aspect.granularity == "sentence" else None,
                    reference=q.reference if uses_refs else None,
                    window=Span(field=q.field, start=q.window[0], end=q.window[1]) if q.window else None,
                    n_tokens=n if n >= 0 else None, truncated=cut, tokens_dropped=max(0, n - max_length),
                    truncated_field=truncated_field(plan.prompts[k], q.spans, counter, max_length,
                                                    format_of(aspect).cut_field) if cut else None,
                ))
            sentences = None
            if aspect.granularity == "sentence":
                target = examples[i].target
                best = folded.best_query[name][i]
                sentences = []
                for u, (a, b) in enumerate(block.unit_spans):
                    bq = plan.queries[best[u]] if best[u] is not None else None
                    window = Span(field=bq.field, start=bq.window[0], end=bq.window[1]) if bq and bq.window else None
                    sentences.append(SentenceEvidence(text=target[a:b], value=units[u], start=a, end=b, window=window))
            rows.append(Evidence(sentences=sentences, queries=queries, truncated=any(q.truncated for q in queries)))
        out[name] = rows
    return out
