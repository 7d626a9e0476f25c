"""``train --lora`` (peft adapters merged into a plain folder), ``--replay`` (the base's other aspects kept
with its own answers as soft targets) and ``--forgetting`` (the base's other aspects before and after),
on the tiny stand-ins of tests/test_train.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from test_train import MC, _plain_minicheck, mc_base, verb_data, verb_rows, write_jsonl  # noqa: F401  fixtures

from unieval_local.cli import main


def train_cli(*args: str) -> int:
    return main(["train", *args, "--no-progress"])


def test_the_lora_folder_scores_as_a_plain_forward_of_its_merged_weights(mc_base, verb_data, tmp_path):
    """Only the adapters train (their count by hand: A is r x d_model, B is inner x r, on q and v of each of
    the stand-in's 2 encoder self-attentions and 2 + 2 decoder self/cross attentions); the saved folder holds
    exactly the base's tensor names (no lora_ key), is scored by ``score`` (no peft in the path) as the
    float64 reference forward of its weights (1e-6), and differs from the base."""
    out = tmp_path / "lora"
    assert train_cli(str(verb_data["train"]), "--dev", str(verb_data["dev"]), "--base", f"{MC}={mc_base}", "-o",
                     str(out), "--max-steps", "20", "--eval-steps", "10", "--bootstrap", "0", "--lora",
                     "--lora-rank", "4", "--optimizer", "adamw", "--learning-rate", "5e-3") == 0
    cfg = json.loads((mc_base / "config.json").read_text())
    r, d, inner = 4, cfg["d_model"], cfg["num_heads"] * cfg["d_kv"]
    attentions = cfg["num_layers"] + 2 * cfg.get("num_decoder_layers", cfg["num_layers"])
    lora = json.loads((out / "config.json").read_text())["unieval_local_training"]["lora"]
    assert lora["trainable_parameters"] == attentions * 2 * (r * d + inner * r)
    assert lora["targets"] == ["q", "v"]
    from safetensors import safe_open

    from unieval_local.models.t5.loading import stored_weight_names

    with safe_open(str(out / "model.safetensors"), "pt") as fh:
        saved = set(fh.keys())
    assert saved == set(stored_weight_names(mc_base))
    rows = verb_rows(6, 9)
    src = write_jsonl(tmp_path / "claims.jsonl", rows)
    scored = tmp_path / "scored.jsonl"
    assert main(["score", str(src), "--task", "fact", "--aspect", "support", "--model", f"{MC}={out}", "-o",
                 str(scored), "--no-progress"]) == 0
    got = [json.loads(line)["scores"]["support"] for line in scored.read_text().splitlines()]
    want = [_plain_minicheck(out, r_["source"], r_["target"]) for r_ in rows]
    assert np.max(np.abs(np.array(got) - np.array(want))) < 1e-6
    base = [_plain_minicheck(mc_base, r_["source"], r_["target"]) for r_ in rows]
    assert np.max(np.abs(np.array(base) - np.array(want))) > 1e-4
