"""What this CPU does with bfloat16, and the warning a bfloat16 run on it gets (issue 43).

bfloat16 is fast on a CPU only where it has bfloat16 *matrix units*: Intel's AMX (cpuinfo flags
``amx_bf16`` and ``amx_tile``; Xeon from Sapphire Rapids on). Without them bfloat16 matrix products
are slower than float32 ones. Measured on the AMX Xeon this project is tested on (2 threads, torch
2.13): the SummEval workload (3 documents x 16 systems, the four summarization aspects, a T5-large-width
4-layer stand-in) took 62.0 s in float32 and 21.6 s in bfloat16 (2.9x; medians of 3 idle runs,
scripts/benchmark.py), max |bf16 - fp32| 3.8e-3; with
oneDNN kept off AMX (``ONEDNN_MAX_CPU_ISA``) a 1024^3 bfloat16 GEMM ran at 0.74x float32's speed with
``avx512_bf16`` and 0.32x without it (docs/speed.md, Precision).

``torch.backends.cpu.get_cpu_capability()`` does not tell: it says ``AVX512`` on that AMX host. So the
flags are read from ``/proc/cpuinfo`` (Linux), else asked of ``torch.cpu._is_amx_tile_supported()`` and
``torch.cpu._is_avx512_bf16_supported()`` (private; used only where they exist). torch is imported
inside the functions only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AMX_MAX_DIFF", "AMX_SPEEDUP", "CPUINFO", "CpuBfloat16", "bfloat16_cpu_warning", "cpu_bfloat16_units", "cpu_model",
           "parse_cpuinfo"]

#: bfloat16's speed over float32 on the SummEval workload on the AMX Xeon this project is tested on (62.0 s / 21.6 s, docs/speed.md)
AMX_SPEEDUP = 2.9
#: max |bf16 - fp32| of the scores on that workload, that machine
AMX_MAX_DIFF = 3.8e-3
#: where Linux lists the CPU's flags
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuBfloat16:
    """What the CPU offers for bfloat16.

    Attributes:
        amx_bf16, amx_tile: the AMX flags (both: bfloat16 matrix units).
        avx512_bf16: bfloat16 dot-product instructions (no matrix units); None when not known.
        source: how it was told: ``/proc/cpuinfo``, ``torch.cpu`` (its private ``_is_*_supported``
            functions), or ``unknown`` (neither was available: reported as no units).
        torch_capability: ``torch.backends.cpu.get_cpu_capability()`` (``AVX512``, ``AVX2``, ``DEFAULT`` ...),
            None when torch could not say.
    """

    amx_bf16: bool
    amx_tile: bool
    avx512_bf16: bool | None
    source: str
    torch_capability: str | None = None

    @property
    def matrix_units(self) -> bool:
        """True when the CPU has bfloat16 matrix units (AMX: ``amx_bf16`` and ``amx_tile``)."""
        return self.amx_bf16 and self.amx_tile

    def line(self) -> str:
        """One line for people, e.g. ``bfloat16 matrix units: AMX (amx_bf16, amx_tile), avx512_bf16 (from
        /proc/cpuinfo; torch CPU capability AVX512)`` or ``no bfloat16 matrix units (no AMX; avx512_bf16 only)
        ...``."""
        how = f"from {self.source}" if self.source != "unknown" else "neither /proc/cpuinfo nor torch.cpu could tell"
        if self.torch_capability:
            how += f"; torch CPU capability {self.torch_capability}"
        if self.matrix_units:
            extra = ", avx512_bf16" if self.avx512_bf16 else ""
            return f"bfloat16 matrix units: AMX (amx_bf16, amx_tile){extra} ({how})"
        return f"no bfloat16 matrix units ({self.lacking()}) ({how})"

    def lacking(self) -> str:
        """What a CPU without matrix units has instead: ``no AMX``, ``no AMX; avx512_bf16 only``,
        ``AMX incomplete: only amx_tile`` ...; empty when it has them."""
        if self.matrix_units:
            return ""
        amx = [f for f in ("amx_bf16", "amx_tile") if getattr(self, f)]
        why = f"AMX incomplete: only {amx[0]}" if amx else "no AMX"
        if self.avx512_bf16:
            why += "; avx512_bf16 only"
        elif self.avx512_bf16 is None:
            why += "; avx512_bf16 not known"
        return why


def parse_cpuinfo(text: str, *, torch_capability: str | None = None) -> CpuBfloat16:
    """The bfloat16 facts in the text of ``/proc/cpuinfo``: its first ``flags`` line (every core lists
    the same). A text with no ``flags`` line (an ARM CPU lists ``Features``) has none of the x86 flags."""
    flags: set[str] = set()
    for row in text.splitlines():
        key, _, value = row.partition(":")
        if key.strip() == "flags":
            flags = set(value.split())
            break
    return CpuBfloat16(amx_bf16="amx_bf16" in flags, amx_tile="amx_tile" in flags,
                       avx512_bf16="avx512_bf16" in flags, source=str(CPUINFO), torch_capability=torch_capability)


def _read_cpuinfo() -> str | None:
    """The text of ``/proc/cpuinfo``, None where there is none (macOS, Windows) or it cannot be read."""
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's model name: the first ``model name`` line of ``/proc/cpuinfo`` (Linux), else
    ``platform.processor()``, else ``unknown CPU`` (the benchmarks' machine lines)."""
    import platform

    text = _read_cpuinfo() or ""
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
    return model or platform.processor() or "unknown CPU"


def _torch_capability() -> str | None:
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001  an old or broken torch: the line just lacks it
        return None


def _from_torch(capability: str | None) -> CpuBfloat16:
    """Ask torch's private ``torch.cpu._is_amx_tile_supported`` / ``_is_avx512_bf16_supported`` (torch
    >= 2.3); ``unknown`` when they are missing. AMX tiles come with ``amx_bf16`` on every CPU that has them."""
    try:
        import torch

        amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
        avx = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
        tile = bool(amx()) if amx is not None else None
        dot = bool(avx()) if avx is not None else None
    except Exception:  # noqa: BLE001  no torch, or the private functions changed
        tile = dot = None
    if tile is None:
        return CpuBfloat16(False, False, dot, "unknown", capability)
    return CpuBfloat16(tile, tile, dot, "torch.cpu", capability)


@functools.lru_cache(maxsize=1)
def _detected() -> CpuBfloat16:
    text, capability = _read_cpuinfo(), _torch_capability()
    return parse_cpuinfo(text, torch_capability=capability) if text is not None else _from_torch(capability)


def cpu_bfloat16_units(cpuinfo: str | None = None) -> CpuBfloat16:
    """Whether this CPU has bfloat16 matrix units, and how that was told.

    Args:
        cpuinfo: the text of a ``/proc/cpuinfo`` to read instead of this machine's (tests, other hosts).

    Returns:
        A frozen :class:`CpuBfloat16`; for this machine (``cpuinfo`` None) detected once per process:
        ``/proc/cpuinfo``'s flags on Linux, else torch's private ``torch.cpu._is_amx_tile_supported()``.
        ``torch.backends.cpu.get_cpu_capability()`` is recorded beside, not used: it says ``AVX512`` on
        an AMX Xeon.
    """
    if cpuinfo is not None:
        return parse_cpuinfo(cpuinfo, torch_capability=_torch_capability())
    return _detected()


def bfloat16_cpu_warning(units: CpuBfloat16 | None = None) -> str:
    """The warning a bfloat16 run on the CPU gets; every variant starts ``bfloat16 on CPU: `` and
    says the scores deviate from float32's.

    With bfloat16 matrix units it says which backends gain (the T5 ones: :data:`AMX_SPEEDUP` measured
    on this project's AMX Xeon; the DeBERTa classifier and decoder backends measured no gain,
    docs/speed.md "bfloat16, evaluator by evaluator") and how far scores move (:data:`AMX_MAX_DIFF` on
    the benchmark's stand-in, up to 1e-1 on other random stand-ins); without them it says bfloat16 is
    slower than float32 on this CPU.

    Args:
        units: the CPU's facts; default :func:`cpu_bfloat16_units` of this machine.
    """
    units = units or cpu_bfloat16_units()
    if units.matrix_units:
        max_diff = f"{AMX_MAX_DIFF:.1e}".replace("e-0", "e-")
        return (f"bfloat16 on CPU: this CPU has bfloat16 matrix units (AMX): the T5 evaluators (UniEval, MiniCheck, "
                f"SEAHORSE, HHEM) run faster in bfloat16 ({AMX_SPEEDUP}x float32 on the SummEval workload on the AMX "
                f"Xeon this project is tested on), the DeBERTa and decoder evaluators gain nothing; scores deviate "
                f"from float32 (max |bf16 - fp32| {max_diff} on that workload's stand-in, up to 1e-1 on other random "
                f"stand-ins; docs/speed.md): use --dtype float32 (dtype='float32') for exact numbers")
    return (f"bfloat16 on CPU: slower than float32 on this CPU (no bfloat16 matrix units: {units.lacking()}), and "
            "its scores deviate from float32's; use float32 (the default) here, bfloat16 on a GPU or a CPU "
            "with AMX")
