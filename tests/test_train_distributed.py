"""``unieval-local train`` under torchrun: two CPU processes (gloo) at batch B end with the weights of
one process at batch 2B (dropout 0, one fixed unshuffled order), and only rank 0 writes; bfloat16
training runs on CPU and saves a float32 folder that scores."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import build_test_checkpoint
from test_train import MC, verb_rows, write_jsonl

from unieval_local.cli import main

ENTRY = "import sys; from unieval_local.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def mc_base(tmp_path_factory, shared_data) -> Path:
    """A MiniCheck-format T5 v1.1 stand-in ("1"/"0" answers) at T5's own initialisation scale."""
    return build_test_checkpoint(tmp_path_factory.mktemp("mcbase") / MC, data_dir=shared_data, layout="v1.1",
                                 answers=("1", "0"), evaluator=MC, init_factor=1.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _weights(folder: Path) -> dict:
    import torch
    from safetensors.torch import load_file

    if (folder / "model.safetensors").exists():
        return load_file(str(folder / "model.safetensors"))
    return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)


def test_two_gloo_processes_at_batch_b_equal_one_process_at_batch_2b(mc_base, tmp_path):
    """DDP averages the two ranks' gradients; each rank's loss is the mean over its B records, so the
    step equals one process's step on the mean over the same 2B records (the sharded fixed order:
    rank 0 takes records 0..B-1, rank 1 B..2B-1). Final weights equal within 1e-5, and they moved
    (by about 3e-4, a hundred times more). The differences left are float rounding of the padding
    (each rank pads its 4 rows to their own width), which AdamW's normalised step turns into
    weight differences proportional to the rate: 1.6e-5 at lr 1e-3, so the rate here is 1e-4."""
    train = write_jsonl(tmp_path / "train.jsonl", verb_rows(48, 0))
    dev = write_jsonl(tmp_path / "dev.jsonl", verb_rows(8, 1))
    common = [str(train), "--dev", str(dev), "--base", f"{MC}={mc_base}", "--device", "cpu", "--dropout", "0",
              "--no-shuffle", "--max-steps", "3", "--eval-steps", "100", "--optimizer", "adamw",
              "--learning-rate", "1e-4", "--bootstrap", "0", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    two = tmp_path / "two"
    script = tmp_path / "entry.py"
    script.write_text(ENTRY + "\n")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), str(script),
                           "train", *common, "--batch-size", "4", "-o", str(two)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("trained: tuned by") == 1, done.stdout  # one report table: rank 0's
    assert "2 processes: 4 records per process and step, 8 in all" in done.stderr
    one = tmp_path / "one"
    assert main(["train", *common, "--batch-size", "8", "-o", str(one)]) == 0
    a, b, base = _weights(two), _weights(one), _weights(mc_base)
    assert a.keys() == b.keys()
    diff = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
    moved = max(float((b[k].double() - base[k].double()).abs().max()) for k in b if k in base)
    print(f"max |two - one| = {diff:.3g}, max |trained - base| = {moved:.3g}")
    assert diff < 1e-5, diff
    assert moved > 1e-4 and diff < moved / 100, (moved, diff)
    cfg = json.loads((two / "config.json").read_text())["unieval_local_training"]
    assert cfg["steps"] == 3 and cfg["config"]["shuffle"] is False and cfg["config"]["batch_size"] == 4
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("two")) == ["two", "two.work"]


def test_dropout_0_leaves_no_random_mask_in_training_mode(mc_base):
    """T5 applies its attention dropout functionally (``T5Attention.dropout``, a float), not through an
    ``nn.Dropout``: after ``set_dropout(module, 0)`` a training-mode forward equals the eval-mode one
    and a row padded with 6 masked pads gives its unpadded logits (within 1e-5). Before the fix,
    training mode left the 0.1 attention dropout on (the padded row differed by 0.8)."""
    import torch
    from transformers import T5ForConditionalGeneration

    from unieval_local.models.train.trainer import set_dropout

    torch.manual_seed(0)
    m = T5ForConditionalGeneration.from_pretrained(str(mc_base))
    ids = torch.tensor([[32, 12, 30, 67, 114, 34, 5, 6, 7, 1]])
    padded = torch.cat([ids, torch.zeros((1, 6), dtype=torch.long)], 1)
    mask = (torch.arange(16) < 10).long()[None]
    start = torch.zeros((1, 1), dtype=torch.long)
    m.eval()
    with torch.no_grad():
        plain = m(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=start).logits
    assert set_dropout(m, 0.0) >= 2 * m.config.num_layers  # nn.Dropout layers and the attention floats
    m.train()
    with torch.no_grad():
        a = m(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=start).logits
        b = m(input_ids=padded, attention_mask=mask, decoder_input_ids=start).logits
    assert float((a - plain).abs().max()) < 1e-5
    assert float((b - plain).abs().max()) < 1e-5


def test_bfloat16_training_runs_on_cpu_and_saves_a_float32_folder_that_scores(mc_base, tmp_path):
    """``--dtype bfloat16`` (the Trainer's bf16 autocast) trains the stand-in for 3 steps on CPU; the
    folder holds float32 weights (the master copy autocast keeps), they moved, and they stay close to
    a float32 run of the same steps (the whole update's norm within 10 %, the two updates apart by
    under half of it: bfloat16 keeps 8 bits of mantissa, and AdamW's normalised step flips the
    elements whose gradient is near 0, so elementwise maxima are no measure); the trained folder scores every evaluation row (the report's n)."""
    train = write_jsonl(tmp_path / "train.jsonl", verb_rows(24, 0))
    dev = write_jsonl(tmp_path / "dev.jsonl", verb_rows(8, 1))
    common = [str(train), "--dev", str(dev), "--base", f"{MC}={mc_base}", "--device", "cpu", "--dropout", "0",
              "--no-shuffle", "--max-steps", "3", "--eval-steps", "100", "--optimizer", "adamw",
              "--learning-rate", "1e-3", "--batch-size", "8", "--bootstrap", "0", "--no-progress"]
    bf, fp = tmp_path / "bf16", tmp_path / "fp32"
    assert main(["train", *common, "--dtype", "bfloat16", "-o", str(bf)]) == 0
    assert main(["train", *common, "-o", str(fp)]) == 0
    a, b, base = _weights(bf), _weights(fp), _weights(mc_base)
    assert {str(t.dtype) for t in a.values()} == {"torch.float32"}
    keys = [k for k in a if k in base]
    step_bf = sum(float(((a[k].double() - base[k].double()) ** 2).sum()) for k in keys) ** 0.5
    step_fp = sum(float(((b[k].double() - base[k].double()) ** 2).sum()) for k in keys) ** 0.5
    apart = sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in keys) ** 0.5
    print(f"bf16: |step bf16| {step_bf:.4g}, |step fp32| {step_fp:.4g}, |bf16 - fp32| {apart:.4g}")
    assert step_bf > 1e-2 and abs(step_bf / step_fp - 1) < 0.1, (step_bf, step_fp)
    assert apart < 0.5 * step_fp, (apart, step_fp)
    report = json.loads((bf / "training_report.json").read_text())
    assert report["figures"]["groups"]["trained"]["all"]["n"] == 8
    assert json.loads((bf / "config.json").read_text())["unieval_local_training"]["config"]["dtype"] == "bfloat16"
