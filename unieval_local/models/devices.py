"""Devices and CPU threads: which devices this machine has, the one a run uses, torch's thread
count. torch is imported inside each function."""

from __future__ import annotations

__all__ = ["available_devices", "cpu_threads", "resolve_device", "set_threads"]


def available_devices() -> list[str]:
    """The device strings this machine accepts: ``cpu``, then ``cuda`` and ``cuda:0`` ...
    ``cuda:N-1`` for each visible GPU, and ``mps`` where Apple's backend is available."""
    import torch

    devices = ["cpu"]
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n:
        devices += ["cuda"] + [f"cuda:{i}" for i in range(n)]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(device: str | None) -> str:
    """The device to run on: ``cuda`` when available and ``device`` is None, else ``cpu``;
    a given ``device`` must be one of :func:`available_devices` (exact spelling, e.g.
    ``cuda:1``; ``torch.device`` objects are accepted by their string).

    Raises:
        ValueError: an empty, misspelt (``gpu``, ``CPU``) or unavailable (``cuda:7`` on a
            one-GPU machine, ``mps`` off Apple silicon) device; the message lists the available ones.
    """
    available = available_devices()
    if device is None:
        return "cuda" if "cuda" in available else "cpu"
    dev = str(device)
    if dev not in available:
        hint = ""
        if dev.strip().lower() in ("gpu", "cuda") and "cuda" not in available:
            hint = " (torch sees no CUDA device: is this a GPU node, and a CUDA build of torch?)"
        raise ValueError(f"device {dev!r} is not available on this machine{hint}; available: {', '.join(available)}")
    return dev


def set_threads(n: int) -> None:
    """Make torch use ``n`` CPU threads for its operators (``torch.set_num_threads``; for the
    whole process). By default torch starts one per core, which oversubscribes a machine
    that several jobs share."""
    import torch

    torch.set_num_threads(int(n))


def cpu_threads() -> int | None:
    """The CPU threads torch's operators use (``torch.get_num_threads``), or None when torch is
    not loaded (nothing is imported for it). Signed (``|threads:N``): the thread count can move
    float32 scores in their last digits (~1e-7; README, Threads), so it is part of what a result
    says about how it was made, but not of the score cache's key nor of a batch run's resume check
    (a run resumed with other threads is the same run)."""
    import sys

    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None
