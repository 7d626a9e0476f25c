"""Convert the LLM-AggreFact leaderboard's figures into the package data file
``unieval_local/data/llm_aggrefact_board.json``.

The board (https://llm-aggrefact.github.io) keeps its per-dataset balanced accuracies (percent, one
decimal, threshold 0.5 unless a model's authors tuned their own) in the site repository
``llm-aggrefact/llm-aggrefact.github.io``, file ``src/app/data.tsx``: one object per model with
the eleven dataset columns. The site's "Average" is the unweighted mean of the columns rounded
with JavaScript's ``toFixed(1)`` (``src/components/Leaderboard.tsx``, ``calculateAverage``); this
script computes it the same way (half up on the exact double).

Usage (from a clone of the site repository, or any copy of the file)::

    git -C SITE show HEAD:src/app/data.tsx > data.tsx
    python scripts/make_aggrefact_board.py data.tsx --commit "$(git -C SITE rev-parse HEAD)"

Nothing is downloaded. The output also maps the board's model names to this package's evaluators
(:data:`EVALUATORS`); an evaluator that is not on the board says so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "unieval_local" / "data" / "llm_aggrefact_board.json"
REPOSITORY = "llm-aggrefact/llm-aggrefact.github.io"
PATH = "src/app/data.tsx"

#: board column -> the ``dataset`` value of lytang/LLM-AggreFact, in the board's order, with the
#: test split's row count (the dataset card's split sizes: 29,320 rows in all)
DATASETS = (("CNN", "AggreFact-CNN", 558), ("XSum", "AggreFact-XSum", 558), ("MediaS", "TofuEval-MediaS", 726),
            ("MeetB", "TofuEval-MeetB", 772), ("WiCE", "Wice", 358), ("REVEAL", "Reveal", 1710),
            ("ClaimVerify", "ClaimVerify", 1088), ("FactCheck", "FactCheck-GPT", 1566), ("ExpertQA", "ExpertQA", 3702),
            ("LFQA", "Lfqa", 1911), ("RAGTruth", "RAGTruth", 16371))

#: our evaluator -> (its board model, or None when not on the board; the aspect that runs the
#: evaluator's own protocol, the one the board's figure is comparable with)
EVALUATORS = {
    "minicheck-flan-t5-large": ("MiniCheck-Flan-T5-L", "fact/support"),
    "factcg-deberta-large": ("FactCG-DeBERTa-L", "fact/factcg"),
    "hhem-2.1-open": ("HHEM-2.1-open", "fact/hhem"),
    "granite-guardian-3.3-8b": ("Granite Guardian 3.3", "fact/groundedness"),
    "mdeberta-nli": (None, "fact/nli_support"),
    "unieval-fact": (None, "fact/consistency"),
}

_FIELD = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(".*?"|-?[0-9.]+)\s*,?\s*$')


def parse_models(text: str) -> list[dict]:
    """The model objects of ``data.tsx``, in file order: ``{field: str | float}`` each.

    Raises:
        ValueError: no ``scoresData`` array, or an object without ``model`` or a dataset column.
    """
    start = text.find("scoresData")
    if start < 0:
        raise ValueError("no scoresData array in the file")
    body = text[text.index("[", start) + 1:text.rindex("]")]
    models = []
    for block in re.findall(r"\{(.*?)\}", body, flags=re.S):
        fields = {}
        for line in block.splitlines():
            m = _FIELD.match(line)
            if m:
                key, value = m.groups()
                fields[key] = json.loads(value) if value.startswith('"') else float(value)
        missing = [c for c, _, _ in DATASETS if not isinstance(fields.get(c), float)] + \
            (["model"] if "model" not in fields else [])
        if missing:
            raise ValueError(f"model {fields.get('model')!r}: no {', '.join(missing)}")
        models.append(fields)
    return models


def board_average(values: list[float]) -> float:
    """The site's Average: ``(sum / n).toFixed(1)``, summed left to right as JavaScript does."""
    total = 0.0
    for v in values:
        total += v
    return float(Decimal(total / len(values)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def build(text: str, commit: str) -> dict:
    """The package data: source, datasets, every model's row and average, our evaluators' rows."""
    models = {}
    for m in parse_models(text):
        scores = {name: m[column] for column, name, _ in DATASETS}
        models[m["model"]] = {"size": m.get("Size"), "link": m.get("link"), "scores": scores,
                              "average": board_average(list(scores.values()))}
    evaluators = {}
    for name, (board, aspect) in EVALUATORS.items():
        if board is not None and board not in models:
            raise ValueError(f"{board!r} ({name}) is not on the board of this commit")
        evaluators[name] = {"board_model": board, "aspect": aspect,
                            "note": None if board else "not on the board"}
    return {
        "source": {"repository": REPOSITORY, "commit": commit, "path": PATH,
                   "url": f"https://github.com/{REPOSITORY}/blob/{commit}/{PATH}",
                   "site": "https://llm-aggrefact.github.io"},
        "metric": "balanced accuracy in percent on the test split, per dataset; average: unweighted mean over "
                  "the 11 datasets, rounded to one decimal as the site does",
        "datasets": [{"name": name, "column": column, "test_rows": n} for column, name, n in DATASETS],
        "models": models,
        "evaluators": evaluators,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Convert the LLM-AggreFact board's src/app/data.tsx to package data.")
    parser.add_argument("data_tsx", help="a copy of src/app/data.tsx ('-' for stdin)")
    parser.add_argument("--commit", required=True, help="the site repository's commit the file was read at (40 hex)")
    parser.add_argument("--output", default=str(OUT), help=f"where to write (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        parser.error(f"--commit must be 40 hex digits, got {args.commit!r}")
    text = sys.stdin.read() if args.data_tsx == "-" else Path(args.data_tsx).read_text(encoding="utf-8")
    board = build(text, args.commit)
    Path(args.output).write_text(json.dumps(board, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    ours = {b["board_model"]: board["models"][b["board_model"]]["average"]
            for b in board["evaluators"].values() if b["board_model"]}
    print(f"wrote {args.output}: {len(board['models'])} models; ours: "
          + ", ".join(f"{k} {v}" for k, v in ours.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
