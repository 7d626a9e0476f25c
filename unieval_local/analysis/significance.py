"""Paired comparison of systems: the paired bootstrap test (Koehn 2004; sacrebleu's paired
bootstrap for BLEU) of whether B's mean score is above A's on the same examples.
:func:`paired_bootstrap` compares two outputs joined by key, :func:`compare_outputs` several
outputs against a baseline output, :func:`compare_systems` the systems of one output against a
baseline system (paired on doc id)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Comparison", "ComparisonSet", "compare_outputs", "compare_systems", "format_comparison",
           "format_comparison_set", "paired_bootstrap"]


@dataclass
class Comparison:
    """B against A on the same examples, per aspect.

    Attributes:
        rows: ``{aspect: (mean_a, mean_b, delta, ci_low, ci_high, p)}``: the means over the
            ``n`` paired examples, ``delta = mean_b - mean_a``, the 95% percentile-bootstrap
            interval of ``delta`` and the one-sided p-value of "B is not better" (NaN when
            ``n_boot == 0``), in A's aspect order.
        n: paired examples; n_boot: resamples; n_a, n_b: scored examples of A and of B.
    """

    rows: dict[str, tuple[float, float, float, float, float, float]]
    n: int
    n_boot: int
    n_a: int = 0
    n_b: int = 0


def _paired(a: dict[str, dict], b: dict[str, dict], *, n_boot: int, seed: int, label: str, unit: str) -> Comparison:
    """The paired bootstrap of :func:`paired_bootstrap` on ``{join key: scores}`` maps.

    ``label`` and ``unit`` name the two sides and the join key in error messages
    ("{label} have no scored {unit} in common").
    """
    keys = [k for k in a if k in b]
    if not keys:
        raise ValueError(f"{label} have no scored {unit} in common")
    aspects = [asp for asp in next(iter(a.values())) if all(asp in a[k] and asp in b[k] for k in keys)]
    if not aspects:
        raise ValueError(f"{label} have no aspect in common")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), (n_boot, len(keys)))  # (n_boot, n) example numbers
    step = max(1, 4_000_000 // len(keys))  # resamples per block: bounds memory to ~4M values
    rows = {}
    for asp in aspects:
        va = np.array([a[k][asp] for k in keys], dtype=np.float64)
        vb = np.array([b[k][asp] for k in keys], dtype=np.float64)
        diff = vb - va
        boot = np.concatenate([diff[picks[i:i + step]].mean(axis=1) for i in range(0, n_boot, step)]) \
            if n_boot else np.empty(0)
        lo, hi = np.quantile(boot, [0.025, 0.975]) if n_boot else (math.nan, math.nan)
        p = (1 + int((boot <= 0).sum())) / (1 + n_boot) if n_boot else math.nan
        rows[asp] = (float(va.mean()), float(vb.mean()), float(diff.mean()), float(lo), float(hi), p)
    return Comparison(rows, len(keys), n_boot, len(a), len(b))


def paired_bootstrap(a_lines: Sequence[dict], b_lines: Sequence[dict], *, n_boot: int = 1000, seed: int = 0) -> Comparison:
    """Is B better than A? Paired bootstrap over the examples both scored (joined by key).

    Paired bootstrap resampling (Koehn 2004, "Statistical significance tests for machine
    translation evaluation"; sacrebleu's paired bootstrap): draw the ``n`` paired examples
    with replacement ``n_boot`` times (``numpy.random.default_rng(seed)``, one
    ``(n_boot, n)`` draw), take the mean of ``score_B - score_A`` per resample (vectorised),
    and report the 2.5% / 97.5% quantiles of those means as the 95% interval of the delta and
    ``p = (1 + #{resamples with mean_b - mean_a <= 0}) / (1 + n_boot)``, the one-sided
    p-value of "B's mean is not above A's" (in (0, 1]; add-one as in Davison & Hinkley 1997).

    Args:
        a_lines, b_lines: ``score`` output records (``key``, ``scores``); records without
            ``scores`` (errors) are skipped.
        n_boot: resamples, >= 0 (0: NaN interval and p).
        seed: the resampling seed (same seed and ``n``, same resamples).

    Returns:
        A :class:`Comparison` over the keys in both (in A's order) and the aspects both have.

    Raises:
        ValueError: no common keys, no common aspects, or ``n_boot < 0``.
    """
    a = {json.dumps(x["key"]): x["scores"] for x in a_lines if "scores" in x}
    b = {json.dumps(x["key"]): x["scores"] for x in b_lines if "scores" in x}
    return _paired(a, b, n_boot=n_boot, seed=seed, label="the two outputs", unit="key")


@dataclass
class ComparisonSet:
    """Several systems against one baseline, each a :class:`Comparison` (A = the baseline, B = the system).

    Attributes:
        baseline: the baseline's name (its file, or its ``system_id``).
        paired_on: ``"key"`` (outputs joined by record key) or ``"doc_id"`` (systems of one output).
        comparisons: ``[(system name, Comparison)]`` in input order.
        n_boot, seed: the bootstrap's resamples and seed (every comparison uses the same seed).
    """

    baseline: str
    paired_on: str
    comparisons: list[tuple[str, Comparison]]
    n_boot: int
    seed: int

    @property
    def n_tests(self) -> int:
        """The number of (system, aspect) p-values: what a multiple-comparison correction would divide by."""
        return sum(len(c.rows) for _, c in self.comparisons)


def compare_outputs(baseline: Sequence[dict], others: Sequence[tuple[str, Sequence[dict]]], *,
                    baseline_name: str = "baseline", n_boot: int = 1000, seed: int = 0) -> ComparisonSet:
    """Each of several score outputs against a baseline output, joined by key.

    Each comparison is :func:`paired_bootstrap` ``(baseline, other)`` with the same ``seed``
    (Koehn 2004), so its numbers equal a two-output comparison of the pair.

    Args:
        baseline: the baseline's output records (``key``, ``scores``).
        others: ``[(name, records)]``, one or more.
        baseline_name: the baseline's name in the table.
        n_boot, seed: as :func:`paired_bootstrap`.

    Returns:
        A :class:`ComparisonSet` with ``paired_on="key"``.

    Raises:
        ValueError: no other output; an output with no scored key or aspect in common with
            the baseline (the message names it).
    """
    if not others:
        raise ValueError("nothing to compare: give at least one output besides the baseline")
    a = {json.dumps(x["key"]): x["scores"] for x in baseline if "scores" in x}
    if not a:
        raise ValueError(f"{baseline_name} has no scored record")
    comps = []
    for name, lines in others:
        b = {json.dumps(x["key"]): x["scores"] for x in lines if "scores" in x}
        comps.append((name, _paired(a, b, n_boot=n_boot, seed=seed, label=f"{baseline_name} and {name}",
                                    unit="key")))
    return ComparisonSet(baseline_name, "key", comps, n_boot, seed)


def compare_systems(lines: Sequence[dict], baseline: str | None, *, n_boot: int = 1000, seed: int = 0,
                    source: str = "the output") -> ComparisonSet:
    """Every system of ONE score output against a baseline system, paired on ``doc_id``.

    Scored records are grouped by ``str(system_id)``; within a system each ``doc_id`` must
    occur once. Each other system is compared with the baseline by the paired bootstrap of
    :func:`paired_bootstrap` over the doc ids both scored (Koehn 2004), every comparison
    with the same ``seed``. The p-values are per test, not corrected for multiple
    comparisons (``ComparisonSet.n_tests`` of them).

    Args:
        lines: score output records with ``system_id``, ``doc_id`` and ``scores``; records
            without ``scores`` (errors) are skipped.
        baseline: the baseline's ``system_id`` (compared as a string); None raises, listing the systems.
        n_boot, seed: as :func:`paired_bootstrap`.
        source: the output's name in messages (e.g. its path).

    Returns:
        A :class:`ComparisonSet` with ``paired_on="doc_id"``, systems in order of first appearance.

    Raises:
        ValueError: a scored record without ``system_id`` or ``doc_id``; a ``doc_id`` twice in
            one system; no baseline given, or one that is not a system (the systems are listed);
            only one system; a system with no doc id or aspect in common with the baseline.
    """
    groups: dict[str, dict[str, dict]] = {}
    for i, x in enumerate(lines):
        if "scores" not in x:
            continue
        if x.get("system_id") is None:
            raise ValueError(f"{source}: record {i} has no system_id; comparing the systems of one output needs "
                             "system_id and doc_id on each record (or give two outputs to compare them by key)")
        if x.get("doc_id") is None:
            raise ValueError(f"{source}: record {i} has no doc_id; the systems of one output are paired on doc_id")
        system, doc = str(x["system_id"]), json.dumps(x["doc_id"])
        group = groups.setdefault(system, {})
        if doc in group:
            raise ValueError(f"{source}: system {system!r} has doc_id {x['doc_id']!r} twice (record {i}); "
                             "systems are paired on doc_id, one record per document")
        group[doc] = x["scores"]
    if not groups:
        raise ValueError(f"{source} has no scored record")
    names = ", ".join(groups)
    if baseline is None:
        raise ValueError(f"name the baseline system with --baseline; the systems of {source} are: {names}")
    if str(baseline) not in groups:
        raise ValueError(f"unknown baseline {baseline!r}; the systems of {source} are: {names}")
    baseline = str(baseline)
    if len(groups) < 2:
        raise ValueError(f"{source} has only one system ({baseline}); nothing to compare")
    comps = [(s, _paired(groups[baseline], g, n_boot=n_boot, seed=seed, label=f"systems {baseline!r} and {s!r}",
                         unit="doc_id")) for s, g in groups.items() if s != baseline]
    return ComparisonSet(baseline, "doc_id", comps, n_boot, seed)


def format_comparison_set(cs: ComparisonSet) -> str:
    """A plain-text table of :class:`ComparisonSet`: one row per (system, aspect).

    Columns: system, aspect, n (paired examples), the baseline's and the system's mean over
    those examples, delta = system - baseline, its 95% interval and the one-sided p-value;
    a header says the p-values are not corrected for multiple comparisons.
    """
    unit = "keys" if cs.paired_on == "key" else "doc ids"
    k = cs.n_tests
    lines = [f"baseline {cs.baseline}; paired bootstrap over {unit}, "
             + (f"{cs.n_boot} resamples (seed {cs.seed}); p = P(mean system <= mean baseline), one-sided"
                if cs.n_boot else "no resamples (no intervals or p-values)")]
    if cs.n_boot:
        lines.append(f"p-values are not corrected for multiple comparisons ({k} test{'s' if k != 1 else ''} here"
                     + (f"; Bonferroni: compare p with 0.05 / {k} = {0.05 / k:.4g})" if k > 1 else ")"))
    for name, c in cs.comparisons:
        if c.n < max(c.n_a, c.n_b):
            where = "both outputs" if cs.paired_on == "key" else "both systems"
            lines.append(f"warning: {name}: only {c.n} {unit} are in {where} (baseline has {c.n_a} scored, "
                         f"{name} {c.n_b}); the others are left out")
    w = max([6] + [len(name) for name, _ in cs.comparisons]) + 2
    wa = max([6] + [len(a) for _, c in cs.comparisons for a in c.rows]) + 2
    lines.append(f"{'system':<{w}}{'aspect':<{wa}}{'n':>6}{'baseline':>10}{'system':>10}{'delta':>10}"
                 f"{'95% CI':>22}{'p':>9}")
    for name, c in cs.comparisons:
        for asp, (ma, mb, d, lo, hi, p) in c.rows.items():
            ci = f"[{lo:+.4f}, {hi:+.4f}]" if c.n_boot else "n/a"
            pv = f"{p:.4f}" if c.n_boot else "n/a"
            lines.append(f"{name:<{w}}{asp:<{wa}}{c.n:>6}{ma:>10.4f}{mb:>10.4f}{d:>+10.4f}{ci:>22}{pv:>9}")
    return "\n".join(lines)


def format_comparison(c: Comparison) -> str:
    """A plain-text table of :class:`Comparison`."""
    lines = [f"{c.n} paired examples, {c.n_boot} bootstrap resamples; p = P(mean B <= mean A) (one-sided)"]
    if c.n < max(c.n_a, c.n_b):
        lines.append(f"warning: only {c.n} keys are in both outputs (A has {c.n_a} scored, B {c.n_b}); "
                     "the others are left out")
    lines.append(f"{'aspect':<20}{'mean A':>10}{'mean B':>10}{'B - A':>10}{'95% CI':>22}{'p':>9}")
    for asp, (ma, mb, d, lo, hi, p) in c.rows.items():
        ci = f"[{lo:+.4f}, {hi:+.4f}]" if c.n_boot else "n/a"
        pv = f"{p:.4f}" if c.n_boot else "n/a"
        lines.append(f"{asp:<20}{ma:>10.4f}{mb:>10.4f}{d:>+10.4f}{ci:>22}{pv:>9}")
    return "\n".join(lines)
