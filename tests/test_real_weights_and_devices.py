"""Checks that need the official weights or a GPU (they skip cleanly elsewhere), and bfloat16."""

import json
import re

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.models.cpu_precision import bfloat16_cpu_warning

README_EXPECTED = {"coherence": 0.948185, "consistency": 0.883036, "fluency": 0.42928, "relevance": 0.636075}


@pytest.mark.real_weights
def test_unieval_readme_example_with_official_weights(real_home, shared_data):
    ex = json.loads((shared_data / "unieval-readme-example.json").read_text())
    scorer = Scorer(model={"unieval-sum": str(real_home / "unieval-sum")}, device="cpu")
    got = {a: scorer.score([ex], aspect=a).overall.value for a in README_EXPECTED}
    for a, want in README_EXPECTED.items():
        assert abs(got[a] - want) < 1e-5, (a, got[a], want)
    assert abs(np.mean(list(got.values())) - ex["expected_with_official_unieval_sum"]["overall"]) < 1e-5


def _values(scorer, records, aspect):
    return np.array([e.value for e in scorer.score(records, aspect=aspect).examples])


def test_bfloat16_stays_close_to_float32_on_cpu(tiny_ckpt, summeval_records):
    records = summeval_records[:12]
    f32 = _values(Scorer(model=tiny_ckpt, device="cpu"), records, "coherence")
    with pytest.warns(RuntimeWarning, match=re.escape(bfloat16_cpu_warning())):  # this CPU's text (AMX or not)
        bf16 = _values(Scorer(model=tiny_ckpt, device="cpu", dtype="bfloat16"), records, "coherence")
    assert np.isfinite(bf16).all()
    assert np.abs(bf16 - f32).max() < 0.1
    assert not np.array_equal(bf16, f32)  # it really ran in another precision


@pytest.mark.gpu
def test_cuda_float32_equals_cpu(tiny_ckpt, summeval_records):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    records = summeval_records[:16]
    cpu = _values(Scorer(model=tiny_ckpt, device="cpu"), records, "consistency")
    gpu = _values(Scorer(model=tiny_ckpt, device="cuda"), records, "consistency")
    assert np.abs(gpu - cpu).max() < 1e-5
