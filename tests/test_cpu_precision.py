"""Issue 43, item 1: precision by what the CPU does. The CPU's bfloat16 matrix units are detected
(``/proc/cpuinfo`` flags, else torch's private ``torch.cpu._is_amx_tile_supported``), the bfloat16
warning says the truth for each kind of CPU (faked here, so both kinds are checked on any machine),
float32 stays the default, and bfloat16 is one flag away and signed."""

import json
import re

import numpy as np
import pytest

from unieval_local import Scorer
from unieval_local.cli import main
from unieval_local.engine import Engine
from unieval_local.models import cpu_precision
from unieval_local.models.cpu_precision import CpuBfloat16, bfloat16_cpu_warning, cpu_bfloat16_units, parse_cpuinfo

#: a Sapphire Rapids core's flags (abridged), one without AMX (Ice Lake) and one without AVX-512 (AVX2 only)
AMX_INFO = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
            "flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8\n\n"
            "processor\t: 1\nflags\t\t: fpu\n")
ICELAKE_INFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
COOPER_INFO = "flags\t\t: fpu avx2 avx512f avx512_bf16\n"
ARM_INFO = "processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n"

AMX = CpuBfloat16(amx_bf16=True, amx_tile=True, avx512_bf16=True, source="/proc/cpuinfo", torch_capability="AVX512")
NO_AMX = CpuBfloat16(amx_bf16=False, amx_tile=False, avx512_bf16=False, source="/proc/cpuinfo",
                     torch_capability="AVX512")


@pytest.mark.parametrize("text, amx, avx, lacking", [
    (AMX_INFO, True, True, ""),
    (ICELAKE_INFO, False, False, "no AMX"),
    (COOPER_INFO, False, True, "no AMX; avx512_bf16 only"),
    (ARM_INFO, False, False, "no AMX"),  # no x86 flags line: none of them
    ("flags : amx_tile avx512f\n", False, False, "AMX incomplete: only amx_tile"),
    ("", False, False, "no AMX"),
])
def test_cpuinfo_flags_decide_the_matrix_units(text, amx, avx, lacking):
    """Only the first ``flags`` line counts (processor 1's ``fpu`` above would say no AMX); both AMX
    flags are needed."""
    u = parse_cpuinfo(text, torch_capability="AVX512")
    assert (u.matrix_units, u.avx512_bf16, u.lacking(), u.source) == (amx, avx, lacking, "/proc/cpuinfo")
    assert u.amx_bf16 == ("amx_bf16" in text.split("\n\n")[0])


def test_the_human_line_for_each_kind_of_cpu():
    assert parse_cpuinfo(AMX_INFO, torch_capability="AVX512").line() == (
        "bfloat16 matrix units: AMX (amx_bf16, amx_tile), avx512_bf16 (from /proc/cpuinfo; torch CPU capability "
        "AVX512)")
    assert parse_cpuinfo(ICELAKE_INFO, torch_capability="AVX512").line() == (
        "no bfloat16 matrix units (no AMX) (from /proc/cpuinfo; torch CPU capability AVX512)")
    assert parse_cpuinfo(COOPER_INFO).line() == "no bfloat16 matrix units (no AMX; avx512_bf16 only) (from /proc/cpuinfo)"


def test_this_machine_is_read_once_from_cpuinfo_or_a_given_text(monkeypatch):
    cpu_precision._detected.cache_clear()
    reads = []
    monkeypatch.setattr(cpu_precision, "_read_cpuinfo", lambda: reads.append(1) or ICELAKE_INFO)
    monkeypatch.setattr(cpu_precision, "_torch_capability", lambda: "AVX2")
    try:
        assert cpu_bfloat16_units() == CpuBfloat16(False, False, False, "/proc/cpuinfo", "AVX2")
        assert cpu_bfloat16_units() is cpu_bfloat16_units() and reads == [1]  # cached
        assert cpu_bfloat16_units(AMX_INFO).matrix_units and reads == [1]  # a given text is read, not the machine
    finally:
        cpu_precision._detected.cache_clear()


@pytest.mark.parametrize("tile, avx, want", [
    (lambda: True, lambda: True, CpuBfloat16(True, True, True, "torch.cpu", "AVX512")),
    (lambda: False, lambda: True, CpuBfloat16(False, False, True, "torch.cpu", "AVX512")),
    (None, None, CpuBfloat16(False, False, None, "unknown", "AVX512")),  # a torch without the private functions
])
def test_without_proc_cpuinfo_torch_is_asked(monkeypatch, tile, avx, want):
    """macOS / Windows: no ``/proc/cpuinfo``, so torch's private ``torch.cpu._is_amx_tile_supported`` and
    ``_is_avx512_bf16_supported`` say, where they exist; else the CPU counts as having no units."""
    import torch

    for name, fake in (("_is_amx_tile_supported", tile), ("_is_avx512_bf16_supported", avx)):
        if fake is None:
            monkeypatch.delattr(torch.cpu, name, raising=False)
        else:
            monkeypatch.setattr(torch.cpu, name, fake, raising=False)
    monkeypatch.setattr(cpu_precision, "_read_cpuinfo", lambda: None)
    monkeypatch.setattr(cpu_precision, "_torch_capability", lambda: "AVX512")
    cpu_precision._detected.cache_clear()
    try:
        assert cpu_bfloat16_units() == want
    finally:
        cpu_precision._detected.cache_clear()
    assert want.line().endswith("neither /proc/cpuinfo nor torch.cpu could tell; torch CPU capability AVX512)"
                                if want.source == "unknown" else "(from torch.cpu; torch CPU capability AVX512)")


def test_the_warning_says_the_truth_for_each_kind_of_cpu():
    """With AMX: which backends gain (this project's measured 2.9x for T5, none for DeBERTa and decoders)
    and how far scores move (3.8e-3 on the benchmark's stand-in, up to 1e-1 on others); without: slower
    than float32 on this CPU. Both start ``bfloat16 on CPU:`` (pyproject's filter)."""
    fast, slow = bfloat16_cpu_warning(AMX), bfloat16_cpu_warning(NO_AMX)
    assert fast == ("bfloat16 on CPU: this CPU has bfloat16 matrix units (AMX): the T5 evaluators (UniEval, MiniCheck, "
                    "SEAHORSE, HHEM) run faster in bfloat16 (2.9x float32 on the SummEval workload on the AMX Xeon "
                    "this project is tested on), the DeBERTa and decoder evaluators gain nothing; scores deviate from "
                    "float32 (max |bf16 - fp32| 3.8e-3 on that workload's stand-in, up to 1e-1 on other random "
                    "stand-ins; docs/speed.md): use --dtype float32 (dtype='float32') for exact numbers")
    assert slow == ("bfloat16 on CPU: slower than float32 on this CPU (no bfloat16 matrix units: no AMX), and its "
                    "scores deviate from float32's; use float32 (the default) here, bfloat16 on a GPU or a "
                    "CPU with AMX")
    assert "slower" not in fast
    assert "avx512_bf16 only" in bfloat16_cpu_warning(parse_cpuinfo(COOPER_INFO))
    assert cpu_precision.AMX_SPEEDUP == round(62.0 / 21.6, 1)  # the measured seconds, float32 / bfloat16


@pytest.mark.parametrize("units", [AMX, NO_AMX], ids=["amx", "no-amx"])
def test_engine_warns_by_the_cpu_and_keeps_float32_the_default(monkeypatch, tiny_ckpt, units):
    """The Engine's bfloat16-on-CPU warning is the faked CPU's text; ``auto`` and the default stay float32
    for a T5 checkpoint on either kind of CPU (the runner loads float32, the signature says it)."""
    monkeypatch.setattr(cpu_precision, "cpu_bfloat16_units", lambda cpuinfo=None: units)
    with pytest.warns(RuntimeWarning, match="^" + re.escape(bfloat16_cpu_warning(units)) + "$"):
        Engine(model=tiny_ckpt, device="cpu", dtype="bfloat16")
    for kw in ({}, {"dtype": "auto"}):
        engine = Engine(model=tiny_ckpt, device="cpu", **kw)
        assert engine.config.dtype == "float32" and engine.dtype_for("unieval-sum") == "float32"
    sig = Scorer(model=tiny_ckpt, device="cpu", dtype="auto").score(
        [{"target": "A short summary.", "source": "A short document."}], aspect="fluency").signature
    assert "|dtype:float32|" in str(sig)


@pytest.mark.filterwarnings("always:bfloat16 on CPU:RuntimeWarning")  # shown, not ignored as in pyproject
def test_a_bfloat16_score_is_signed_bfloat16_in_python_and_the_cli(tiny_ckpt, tmp_path, capsys, summeval_records):
    """``Scorer(dtype="bfloat16")`` and ``score --dtype bfloat16`` run in bfloat16 (values differ from
    float32 but stay close), are signed ``dtype:bfloat16``, and the CLI shows the warning as one line."""
    records = summeval_records[:4]
    with pytest.warns(RuntimeWarning, match="^bfloat16 on CPU: "):
        bf = Scorer(model=tiny_ckpt, device="cpu", dtype="bfloat16").score(records, aspect="fluency")
    f32 = Scorer(model=tiny_ckpt, device="cpu").score(records, aspect="fluency")
    a, b = np.array([e.value for e in bf.examples]), np.array([e.value for e in f32.examples])
    assert "|dtype:bfloat16|" in str(bf.signature) and not np.array_equal(a, b) and np.abs(a - b).max() < 0.1
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--model", str(tiny_ckpt), "--device", "cpu", "--aspect", "fluency",
                 "--dtype", "bfloat16", "-o", str(out), "--no-progress"]) == 0
    got = np.array([json.loads(line)["scores"]["fluency"] for line in out.read_text().splitlines()])
    assert np.abs(got - a).max() < 1e-2  # the same bfloat16 path (batches may differ: bfloat16 moves ~1e-3)
    err = capsys.readouterr().err
    assert f"unieval-local: warning: {bfloat16_cpu_warning()}\n" in err
    assert re.search(r"signature: unieval-local:\S*\|dtype:bfloat16\|device:cpu\|", err)


@pytest.mark.parametrize("units", [AMX, NO_AMX], ids=["amx", "no-amx"])
def test_verify_prints_the_cpu_line(monkeypatch, tiny_ckpt, capsys, units):
    monkeypatch.setattr(cpu_precision, "cpu_bfloat16_units", lambda cpuinfo=None: units)
    assert main(["verify", str(tiny_ckpt)]) == 0
    out = capsys.readouterr().out.splitlines()
    verdict = ("so --dtype bfloat16 runs the T5 evaluators faster here (not the DeBERTa or decoder ones)"
               if units.matrix_units else "so --dtype bfloat16 is slower than float32 here")
    assert out[-1] == f"this machine's CPU: {units.line()}; {verdict} (docs/speed.md, Precision)"
    assert out[-1].startswith("this machine's CPU: bfloat16 matrix units: AMX" if units.matrix_units
                              else "this machine's CPU: no bfloat16 matrix units (no AMX)")


@pytest.mark.parametrize("argv", [
    ["score", "in.jsonl", "-o", "out.jsonl"],
    ["serve"],
    ["report", "in.jsonl", "--format", "summ", "-o", "r.json"],
    ["benchmark", "labelled", "claims.jsonl", "-o", "out"],
    ["train", "claims.jsonl", "--base", "minicheck-flan-t5-large", "-o", "out"],
], ids=lambda a: " ".join(a[:2]))
def test_bfloat16_is_one_flag_away_on_every_command(argv):
    """``--dtype bfloat16`` parses on each command that scores or trains; the engine commands hand it
    to the engine's settings (``scripts/score_jsonl.py`` passes its arguments to ``score``)."""
    from unieval_local.cli import _build_parser
    from unieval_local.cli.common import engine_settings

    args = _build_parser(argv[0]).parse_args([*argv, "--dtype", "bfloat16"])
    assert args.dtype == "bfloat16"
    if argv[0] != "train":
        assert engine_settings(args)["dtype"] == "bfloat16"


def test_cpu_model_is_the_first_model_name_line_else_the_platform(monkeypatch):
    """The benchmarks' machine lines name the CPU by its first ``model name`` line; without
    /proc/cpuinfo (or without that line), by ``platform.processor()``, else ``unknown CPU``."""
    import platform

    monkeypatch.setattr(cpu_precision, "_read_cpuinfo", lambda: "processor\t: 0\nmodel name\t: Xeon A\n"
                        "model name\t: Xeon B\nflags\t\t: fpu amx_bf16\n")
    assert cpu_precision.cpu_model() == "Xeon A"
    monkeypatch.setattr(cpu_precision, "_read_cpuinfo", lambda: None)
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert cpu_precision.cpu_model() == "arm"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert cpu_precision.cpu_model() == "unknown CPU"
