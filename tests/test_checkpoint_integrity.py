"""A checkpoint whose weights do not match its config is refused (load, CLI exit 3, verify),
truncated weight files fail verify, misnamed home folders are reported, and the official
T5 v1.1 layout loads without transformers' "will NOT tie them" warning."""

import json
import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from unieval_local.models.verify import verify_checkpoint
from unieval_local.cli import EXIT_CHECKPOINT, main
from unieval_local.errors import CheckpointError
from unieval_local.models.t5.loading import load_model


def edited_copy(src, dst, edit):
    """A copy of checkpoint ``src`` whose weight file went through ``edit(state_dict)``."""
    shutil.copytree(src, dst)
    if (dst / "model.safetensors").is_file():
        save_file(edit(load_file(dst / "model.safetensors")), str(dst / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(edit(torch.load(dst / "pytorch_model.bin", weights_only=True)), dst / "pytorch_model.bin")
    return dst


def without(*names):
    return lambda sd: {k: v for k, v in sd.items() if k not in names and not any(k.startswith(n) for n in names)}


BROKEN = {  # case -> (layout, edit, what the error must name)
    "no shared.weight": ("t5", without("shared.weight"), "shared.weight"),
    "no layer": ("t5", without("encoder.block.1."), "encoder.block.1.layer.0.SelfAttention.q.weight"),
    "extra tensor": ("t5", lambda sd: {**sd, "extra.weight": torch.zeros(3)}, "1 unexpected: extra.weight"),
    "wrong shape": ("t5", lambda sd: {**sd, "encoder.final_layer_norm.weight": torch.zeros(3)},
                    "encoder.final_layer_norm.weight (file [3] vs config [64])"),
    "v1.1 without its head": ("v1.1", without("lm_head.weight"), "1 missing: lm_head.weight"),
    "v1.1 without any embedding": ("v1.1", without("shared.weight", "encoder.embed_tokens.weight",
                                                   "decoder.embed_tokens.weight"), "1 missing: shared.weight"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_mismatched_weights_are_refused_everywhere(case, tmp_path, tiny_ckpt, v11_ckpts, capsys):
    layout, edit, named = BROKEN[case]
    folder = edited_copy(tiny_ckpt if layout == "t5" else v11_ckpts["bin"], tmp_path / "unieval-sum", edit)
    with pytest.raises(CheckpointError, match="do not match its config.json") as info:
        load_model(folder)
    assert named in str(info.value)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"target": "A summary.", "source": "A document."}) + "\n")
    assert main(["score", str(src), "--model", str(folder), "--no-progress", "-o", str(tmp_path / "o.jsonl")]) \
        == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert named in err and "LOAD REPORT" not in err
    assert not (tmp_path / "o.jsonl").exists() or (tmp_path / "o.jsonl").read_text() == ""
    report = verify_checkpoint(folder)[0]
    assert not report.ok and any(named in m for m in report.messages if m.startswith("FAIL"))


def test_correct_layouts_load_and_verify(tiny_ckpt, v11_ckpts):
    for folder in (tiny_ckpt, *v11_ckpts.values()):
        model, _ = load_model(folder)
        report = verify_checkpoint(folder)[0]
        assert report.ok, report.messages
    # the v1.1 .bin holds the embedding under three names sharing one storage, and may lack
    # shared.weight itself (the embed_tokens copies are the same tensor)
    folder = edited_copy(v11_ckpts["bin"], v11_ckpts["bin"].parent.parent / "noshared" / "unieval-sum",
                         without("shared.weight"))
    model, _ = load_model(folder)
    ref, _ = load_model(v11_ckpts["bin"])
    assert torch.equal(model.shared.weight, ref.shared.weight)


def test_truncated_weight_file_fails_verify(tmp_path, tiny_ckpt, v11_ckpts):
    for src, name in ((tiny_ckpt, "model.safetensors"), (v11_ckpts["bin"], "pytorch_model.bin")):
        folder = tmp_path / src.parent.name / "unieval-sum"
        shutil.copytree(src, folder)
        path = folder / name
        path.write_bytes(path.read_bytes()[:-1000])
        report = verify_checkpoint(folder)[0]
        assert not report.ok
        assert any(m.startswith("FAIL cannot open weight file") and "truncated or corrupt" in m for m in report.messages)
        with pytest.raises(CheckpointError):
            load_model(folder)


def test_verify_checks_home_folder_names(tmp_path, tiny_ckpt, capsys):
    home = tmp_path / "home"
    shutil.copytree(tiny_ckpt, home / "unieval-sum")
    shutil.copytree(tiny_ckpt, home / "unieval_dialog")
    reports = {r.folder.name: r for r in verify_checkpoint(home)}
    assert reports["unieval-sum"].ok
    bad = reports["unieval_dialog"]
    assert not bad.ok and any("rename it to 'unieval-dialog'" in m for m in bad.messages)
    assert main(["verify", str(home)]) == 1
    assert "is not a checkpoint name" in capsys.readouterr().out


def test_v11_layout_loads_without_the_untied_warning(v11_ckpts, caplog, capfd):
    """transformers 5 warns "... will NOT tie them" for every correct v1.1 load; users must not see it."""
    with caplog.at_level(logging.WARNING):
        load_model(v11_ckpts["bin"])
    out = capfd.readouterr()
    assert "NOT tie" not in out.err + out.out and "NOT tie" not in caplog.text
    # a tied-config checkpoint whose stored head differs is refused, not loaded with a warning
    folder = v11_ckpts["bin"].parent.parent / "lying" / "unieval-sum"
    shutil.copytree(v11_ckpts["bin"], folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    with pytest.raises(CheckpointError, match="differs from shared.weight"):
        load_model(folder)
