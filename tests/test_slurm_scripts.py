"""Issue 37, item 7 (and issue 42's training template): the SLURM templates run under bash with stubbed commands (no SLURM here):
``python`` (which runs ``scripts/score_jsonl.py``), ``srun``, ``scontrol`` and ``sleep`` are fakes on
PATH that record their arguments. ``slurm_array.sbatch`` needs only ``SLURM_ARRAY_TASK_ID``
and the array's bounds, or the shard count given (``SHARDS`` or a third argument)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

STUB = '#!/bin/sh\nprintf "%s\\n" "$(basename "$0") $*" >> "$CALLS"\n'


def _run(tmp_path: Path, script: str, args: list[str], **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``scripts/SCRIPT`` with bash in ``tmp_path``, the stubs first on PATH and only ``env``'s
    SLURM variables set; returns the process and the stubs' recorded calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "srun", "scontrol", "sleep", "unieval-local", "torchrun"):
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "scontrol").write_text('#!/bin/sh\nprintf "%s\\n" "scontrol $*" >> "$CALLS"\necho node1; echo node2\n')
    calls = tmp_path / "calls.txt"
    calls.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM") and k not in ("SHARDS", "GPUS",
                                                                                            "OMP_NUM_THREADS")}
    base.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", CALLS=str(calls), HOME=str(tmp_path), **env)
    done = subprocess.run(["bash", str(SCRIPTS / script), *args], cwd=tmp_path, env=base,
                          capture_output=True, text=True, timeout=60)
    return done, calls.read_text().splitlines() if calls.exists() else []


def _shard(calls: list[str]) -> str:
    (line,) = [c for c in calls if c.startswith("python scripts/score_jsonl.py")]
    words = line.split()
    return words[words.index("--shard") + 1]


def test_array_task_id_with_the_array_bounds_only(tmp_path):
    """No SLURM_ARRAY_TASK_COUNT (set -u used to stop the script there): the count from MIN/MAX."""
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="3",
                       SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_MAX="7")
    assert done.returncode == 0, done.stderr
    assert _shard(calls) == "3/8"
    assert "--output out/shard_3.jsonl" in calls[0] and (tmp_path / "out").is_dir()


def test_array_task_id_alone_with_the_shard_count_given(tmp_path):
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="2", SHARDS="4")
    assert done.returncode == 0, done.stderr
    assert _shard(calls) == "2/4"
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out", "5"], SLURM_ARRAY_TASK_ID="4")
    assert done.returncode == 0, done.stderr
    assert _shard(calls) == "4/5"


def test_array_from_one_maps_to_shards_from_zero(tmp_path):
    """--array=1-4: task 4 is shard 3/4 (a shard K must be below N)."""
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="4",
                       SLURM_ARRAY_TASK_MIN="1", SLURM_ARRAY_TASK_MAX="4", SLURM_ARRAY_TASK_COUNT="4")
    assert done.returncode == 0, done.stderr
    assert _shard(calls) == "3/4"


def test_array_without_a_shard_count_or_with_gaps_says_what_to_give(tmp_path):
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="0")
    assert done.returncode == 2 and "SHARDS=N" in done.stderr and calls == []
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="2",
                       SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_MAX="6", SLURM_ARRAY_TASK_COUNT="4")  # --array=0-6:2
    assert done.returncode == 2 and "contiguous" in done.stderr and calls == []
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"], SLURM_ARRAY_TASK_ID="9", SHARDS="4")
    assert done.returncode == 2 and "not one of 4 shards" in done.stderr and calls == []
    done, calls = _run(tmp_path, "slurm_array.sbatch", ["in.jsonl", "out"])
    assert done.returncode != 0 and "sbatch --array" in done.stderr and calls == []


def test_ray_template_starts_the_head_and_workers_then_the_driver(tmp_path):
    done, calls = _run(tmp_path, "slurm_ray.sbatch", ["in.jsonl", "out.jsonl"], SLURM_JOB_NODELIST="node[1-2]")
    assert done.returncode == 0, done.stderr
    assert any(c.startswith("srun ") and "-w node1 ray start --head" in c for c in calls), calls
    assert any(c.startswith("srun ") and "-w node2 ray start --address=node1:6379" in c for c in calls), calls
    driver = [c for c in calls if c.startswith("python scripts/score_jsonl.py")]
    assert driver and "--ray-address node1:6379" in driver[0]


def test_train_template_runs_torchrun_with_one_process_per_gpu_and_resumes_when_requeued(tmp_path):
    """slurm_train.sbatch: N from SLURM_GPUS_ON_NODE (or GPUS), `torchrun --nproc_per_node N` on
    `unieval-local train` with the arguments passed on; --resume once
    OUTPUT.work/checkpoints exists (a requeued job); no GPU count: exit 2 naming --gres."""
    args = ["claims.jsonl", "minicheck-flan-t5-large", "out/mc", "--max-steps", "20"]
    done, calls = _run(tmp_path, "slurm_train.sbatch", args, SLURM_GPUS_ON_NODE="4", SLURM_CPUS_PER_TASK="16")
    assert done.returncode == 0, done.stderr
    assert calls == ["torchrun --standalone --nproc_per_node 4 --no-python unieval-local train claims.jsonl --base "
                     "minicheck-flan-t5-large -o out/mc --no-progress --max-steps 20"]
    (tmp_path / "out" / "mc.work" / "checkpoints").mkdir(parents=True)
    done, calls = _run(tmp_path, "slurm_train.sbatch", args, GPUS="2")
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith("torchrun --standalone --nproc_per_node 2 ") and " --no-progress --resume " in calls[0]
    done, calls = _run(tmp_path, "slurm_train.sbatch", args)
    assert done.returncode == 2 and "--gres=gpu:N" in done.stderr and calls == []
