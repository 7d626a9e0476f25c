"""The ``causal-lm`` backend's runner: chat prompts (:mod:`unieval_local.text.chat`) through the
checkpoint's own chat template, one forward pass per prompt, a readout at the last prompt
position.

Rendering: ``tokenizer.apply_chat_template(messages, documents=..., tokenize=False,
continue_final_message=True | add_generation_prompt=True, **template variables)`` (the prefix
either continues the final assistant message or follows the generation prompt, as the query
says), then the text's token ids without added special tokens (the template writes them).

Readout (:func:`readout`): softmax over the whole vocabulary at the last real position in
float64, then ``labels`` (P(first word) over the two words) or ``rating`` (the expected rating
over 1..K renormalised, mapped to [0, 1]); each word's probability sums its single-token forms
with and without a leading space. Rows are padded on the left (default) or the right; the
position ids follow the attention mask and only the read positions' logits are computed
(``logits_to_keep``), so a prompt's value does not depend on its batch (tests: to 1e-5).

Long prompts: a prompt over ``max_length`` tokens loses the end of its ``cut`` part (the
source), never the answer slot; ``n_tokens`` is the untruncated count, so the engine notes it.
Batching is the shared core's (:func:`~unieval_local.models.batching.run_batches`).

Generation (:meth:`CausalLMRunner.chat_prompt`, :meth:`CausalLMRunner.generate`): greedy
continuations of rendered chat prompts, in :mod:`~unieval_local.models.causal_lm.generate`.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ...errors import CheckpointError
from ...registry.evaluators import Evaluator
from ...settings import BATCH_TOKENS, check_dtype, default
from ...text.chat import ChatQuery, is_chat_prompt
from .. import tokens
from ..base import Generation, Runner
from ..batching import attention_cells, first_line, run_batches, sort_by_length
from ..checkpoints import ResolvedCheckpoint
from .model import BFLOAT16_ABOVE, CausalLMModel, parameter_count

__all__ = ["CausalLMRunner", "causal_lm_runner_factory", "readout", "render", "verify_causal_lm"]


def render(model: CausalLMModel, query: ChatQuery) -> str:
    """The text of one query through the checkpoint's chat template, ending with the prefix (a
    ``plain`` query: the tokenizer's BOS token, the parts' texts and the prefix, no template)."""
    if query.plain:
        return (model.tokenizer.bos_token or "") + "".join(t for _, t in query.parts) + query.prefix
    messages, documents = query.messages()
    kwargs = dict(query.template)
    if query.continue_final:
        kwargs["continue_final_message"] = True
    else:
        kwargs["add_generation_prompt"] = True
    text = model.tokenizer.apply_chat_template(messages, documents=documents or None, tokenize=False, **kwargs)
    return text if query.continue_final else text + query.prefix


def _ids(model: CausalLMModel, text: str) -> list[int]:
    return tokens.encode(model.tokenizer, text, add_special_tokens=False)["input_ids"]


def encode(model: CausalLMModel, prompt: str, max_length: int | None = None) -> tuple[list[int], int]:
    """``(ids, untruncated count)`` of one chat prompt, its ``cut`` part shortened from its end
    until the ids fit ``max_length`` (None: untruncated). A query without a ``cut`` part, or
    whose other parts alone exceed ``max_length``, keeps what is left of it (the answer slot is
    never cut)."""
    _, ids, full = fit(model, ChatQuery.decode(prompt), max_length)
    return ids, full


def fit(model: CausalLMModel, query: ChatQuery, max_length: int | None) -> tuple[ChatQuery, list[int], int]:
    """``(query, ids, untruncated count)``: the query with its ``cut`` part shortened as :func:`encode`
    says, and its ids."""
    ids = _ids(model, render(model, query))
    full = len(ids)
    if max_length is None or full <= max_length or query.cut is None:
        return query, ids, full
    text = query.parts[query.cut][1]
    n = tokens.count_plain(model.tokenizer, [text])[0]
    keep = n - (full - max_length)
    shorter = query
    for _ in range(4):  # token boundaries may merge differently at the cut: shorten until it fits
        shorter = query.with_cut(text[:tokens.cut(model.tokenizer, text, max(0, keep))])
        ids = _ids(model, render(model, shorter))
        if len(ids) <= max_length or keep <= 0:
            break
        keep -= len(ids) - max_length
    return shorter, ids, full


def readout(probs: np.ndarray, query: ChatQuery, model: CausalLMModel) -> tuple[float, dict[str, float]]:
    """The value of one query from its next-token distribution.

    Args:
        probs: float64 softmax over the whole vocabulary at the read position, shape ``(V,)``.
        query: which readout (``labels``: its ``words``; ``rating``: its ``scale`` K).
        model: the loaded model (each word's single-token forms).

    Returns:
        ``(value, distribution)``: ``labels``: P(words[0]) / (P(words[0]) + P(words[1])) and both
        renormalised; ``rating`` (G-Eval, Liu et al., 2023, Sec. 2.3): ``(E - 1) / (K - 1)`` with
        ``E = sum_k k p(k)`` over ``p(k)`` renormalised over 1..K, and ``{"1": p(1), ...}``.
        NaN (and an empty distribution) when the words have no probability at all.
        ``rating-mass`` (a judge's read after its rationale, :mod:`unieval_local.models.judging`):
        the same value, the distribution NOT renormalised (``{"1": P(1), ...}`` as the model gives
        them, zeros included), so that its sum is the mass on the valid ratings.
    """
    words = list(query.words) if query.readout == "labels" else [str(k) for k in range(1, query.scale + 1)]
    mass = np.array([probs[list(model.forms_of(w))].sum() for w in words], dtype=np.float64)
    total = mass.sum()
    if not np.isfinite(total) or total <= 0:
        return float("nan"), (dict(zip(words, mass.tolist())) if query.readout == "rating-mass" else {})
    p = mass / total
    if query.readout == "rating-mass":
        return (float(np.dot(np.arange(1, query.scale + 1), p)) - 1.0) / (query.scale - 1), dict(zip(words, mass.tolist()))
    dist = dict(zip(words, p.tolist()))
    if query.readout == "labels":
        return float(p[0]), dist
    expected = float(np.dot(np.arange(1, query.scale + 1), p))
    return (expected - 1.0) / (query.scale - 1), dist


class CausalLMRunner(tokens.TokenArithmetic, Runner):
    """The :class:`~unieval_local.models.base.Runner` of a :class:`CausalLMModel` (module docstring).

    Args:
        model: the loaded model. evaluator: its spec. fingerprint: the checkpoint's content hash.
        batch_tokens: padded tokens per forward batch. attention_mib: the attention budget.
        padding: ``left`` (default) or ``right``; the values do not depend on it.
        prefix_reuse: prompts that share at least :data:`PREFIX_MIN_TOKENS` leading tokens (the
            summaries of one source under one aspect) run that prefix once and their suffixes over
            its key/value cache (:meth:`prefix_groups`); the values equal the whole prompts' to
            ~1e-7 in float32 (``scripts/bench_prefix_reuse.py``: 4.45x on 2 SummEval articles x 16
            summaries, CPU). False: every prompt whole.
    """

    def __init__(self, model: CausalLMModel, *, evaluator: Evaluator, fingerprint: str,
                 batch_tokens: int = BATCH_TOKENS["gpu"], attention_mib: float = default("attention_mib"),
                 padding: str = "left", prefix_reuse: bool = True):
        if padding not in ("left", "right"):
            raise ValueError(f"padding must be 'left' or 'right', got {padding!r}")
        self.model = model
        self.evaluator = evaluator
        self.name = str(model.path)
        self.fingerprint = fingerprint
        self.batch_tokens = batch_tokens
        self.max_cells = attention_cells(attention_mib, model.n_heads, 4 if model.dtype == "float32" else 2)
        self.padding = padding
        self.prefix_reuse = prefix_reuse
        self.forward = "plain"
        self.tokenizer_class = model.tokenizer_class
        self.tokenizer_doubt = model.tokenizer_doubt
        self._recent: OrderedDict[tuple[str, int], dict[str, float]] = OrderedDict()  # evidence's distributions
        self._recent_lock = threading.Lock()

    # token arithmetic (TokenCounter)
    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text: a chat prompt as its template renders it, a plain text as is."""
        return [encode(self.model, t)[1] if is_chat_prompt(t) else len(_ids(self.model, t)) for t in texts]

    def probabilities(self, ids: list[list[int]]):
        """float64 next-token distributions at each row's last token, shape ``(len(ids), V)``
        (one forward pass over the padded batch)."""
        import torch

        width = max(len(r) for r in ids)
        input_ids = torch.full((len(ids), width), self.model.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        last = []
        for k, r in enumerate(ids):
            start = width - len(r) if self.padding == "left" else 0
            input_ids[k, start:start + len(r)] = torch.tensor(r)
            mask[k, start:start + len(r)] = 1
            last.append(start + len(r) - 1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        keep = sorted(set(last))
        at = torch.tensor([keep.index(p) for p in last])
        device = self.model.device
        with torch.inference_mode():
            logits = self.model.model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                      position_ids=positions.to(device), use_cache=False,
                                      logits_to_keep=torch.tensor(keep, device=device)).logits
            rows = logits[torch.arange(len(ids), device=device), at.to(device)]
            return torch.softmax(rows.double(), dim=-1).cpu().numpy()

    def evaluate(self, prompts: Sequence[str], *, max_length: int,
                 on_batch: Callable[[int, int], None] | None = None):
        """``(values, n_tokens, distributions)`` per prompt, in order (see :meth:`score`; the
        distributions are :func:`readout`'s, each readout word -> its renormalised probability)."""
        distinct = list(dict.fromkeys(prompts))
        queries = [ChatQuery.decode(p) for p in distinct]
        if any(q.readout == "judge" for q in queries):  # generate, then read (models/judging.py)
            from ..judging import judge_values

            return judge_values(self, prompts, max_length=max_length)
        encoded = [encode(self.model, p, max_length) for p in distinct]
        ids = [e[0] for e in encoded]
        lengths = [len(x) for x in ids]
        values = np.full(len(distinct), np.nan)
        dists: list[dict[str, float]] = [{} for _ in distinct]

        finished = 0

        def forward(batch: list[int]) -> None:
            probs = self.probabilities([ids[i] for i in batch])
            for row, i in enumerate(batch):
                values[i], dists[i] = readout(probs[row], queries[i], self.model)

        def done(batch: list[int], end: int) -> None:
            nonlocal finished
            finished += len(batch)
            if on_batch is not None:
                on_batch(finished, len(distinct))

        groups, alone = self.prefix_groups(ids) if self.prefix_reuse else ([], list(range(len(ids))))
        with self.model.lock:
            for k, members in groups:
                self._run_group(k, members, ids, queries, values, dists, done)
            alone_lengths = [lengths[i] for i in alone]
            run_batches([alone[j] for j in sort_by_length(alone_lengths)], lengths, batch_tokens=self.batch_tokens,
                        holder=self.model, device=self.model.device, forward=forward, max_cells=self.max_cells,
                        on_batch=done)
        with self._recent_lock:
            for p, d in zip(distinct, dists):
                self._recent[(p, max_length)] = d
                self._recent.move_to_end((p, max_length))
            while len(self._recent) > RECENT_DISTRIBUTIONS:
                self._recent.popitem(last=False)
        index = {p: k for k, p in enumerate(distinct)}
        at = [index[p] for p in prompts]
        return values[at], np.array([encoded[k][1] for k in at], dtype=np.int64), [dists[k] for k in at]

    def fit_prompt(self, prompt: str, *, max_length: int) -> str:
        """The chat prompt with its ``cut`` part (the source) shortened from its end until it fits
        ``max_length`` tokens, as scoring cuts it (:func:`encode`); unchanged when it fits or has no
        such part. A judge generates from it, so that a long source is handled as scoring handles it."""
        return fit(self.model, ChatQuery.decode(prompt), max_length)[0].encode()[0]

    def render_prompt(self, prompt: str) -> str:
        """The text a chat prompt (:meth:`ChatQuery.encode <unieval_local.text.chat.ChatQuery.encode>`)
        renders to (:func:`render`), uncut: what :meth:`generate` continues for a judge, so that the
        judge's later read (the same query with the rationale in its prefix) has this text as its start."""
        return render(self.model, ChatQuery.decode(prompt))

    def prefix_groups(self, ids: Sequence[Sequence[int]]) -> tuple[list[tuple[int, list[int]]], list[int]]:
        """``(groups, alone)``: prompts (indices into ``ids``) that share their first ``k >=``
        :data:`PREFIX_MIN_TOKENS` tokens, as ``(k, members)`` with two members or more (``k`` the
        prefix all members share, leaving each at least one token of its own), and the indices of
        the others. The prompts in sorted token order are cut into runs (of at most
        :data:`PREFIX_GROUP_MAX` prompts) that skip the most tokens, ``sum k (n - 1)`` (dynamic
        programming): the summaries of one source share the source, not only the instruction
        before it."""
        order = sorted(range(len(ids)), key=lambda i: ids[i])
        n = len(order)
        # lcp[j]: tokens prompt order[j] shares with order[j - 1], each keeping one of its own
        lcp = [0] + [_common_prefix(ids[order[j - 1]], ids[order[j]],
                                    min(len(ids[order[j - 1]]), len(ids[order[j]])) - 1) for j in range(1, n)]
        best = [0] * (n + 1)  # best[j]: tokens skipped over order[:j]
        cut = [0] * (n + 1)   # cut[j]: where the last run of that best partition starts
        for j in range(1, n + 1):
            best[j], cut[j] = best[j - 1], j - 1  # order[j - 1] alone
            k = None
            for i in range(j - 2, max(-1, j - 1 - PREFIX_GROUP_MAX), -1):  # the run order[i:j]
                k = lcp[i + 1] if k is None else min(k, lcp[i + 1])
                if k < PREFIX_MIN_TOKENS:
                    break
                if best[i] + k * (j - 1 - i) > best[j]:
                    best[j], cut[j] = best[i] + k * (j - 1 - i), i
        groups: list[tuple[int, list[int]]] = []
        alone: list[int] = []
        j = n
        while j > 0:
            i = cut[j]
            if j - i >= 2:
                groups.append((min(lcp[i + 1:j]), [order[m] for m in range(i, j)]))
            else:
                alone.append(order[i])
            j = i
        return groups[::-1], alone[::-1]

    def _run_group(self, k: int, members: list[int], ids, queries, values, dists, done) -> None:
        """Score ``members`` (all sharing ``ids[...][:k]``): the prefix once, then the suffixes in
        batches over its key/value cache (each row's cost budgeted as ``sqrt(s (k + s))`` tokens,
        ``s`` its suffix: its attention cells and its share of the padded tokens)."""
        import copy

        import torch

        device, lm = self.model.device, self.model.model
        with torch.inference_mode():
            out = lm(input_ids=torch.tensor([ids[members[0]][:k]], device=device), use_cache=True,
                     **{_cache_arg(): None})
        prefix_cache = getattr(out, _cache_arg())
        if isinstance(prefix_cache, tuple):  # transformers < 4.47 returns the legacy tuple of (k, v) pairs
            from transformers import DynamicCache

            prefix_cache = DynamicCache.from_legacy_cache(prefix_cache)
        cost = [0] * len(ids)
        for i in members:
            s = len(ids[i]) - k
            cost[i] = int(np.ceil(np.sqrt(s * (k + s))))

        def forward(batch: list[int]) -> None:
            suffixes = [ids[i][k:] for i in batch]
            width = max(len(x) for x in suffixes)
            input_ids = torch.full((len(batch), width), self.model.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), k + width), dtype=torch.long)
            mask[:, :k] = 1
            for row, x in enumerate(suffixes):
                input_ids[row, :len(x)] = torch.tensor(x)
                mask[row, k:k + len(x)] = 1
            positions = (k + torch.arange(width)).unsqueeze(0).expand(len(batch), -1)
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(batch))
            last = torch.tensor([len(x) - 1 for x in suffixes], device=device)
            with torch.inference_mode():
                logits = lm(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), use_cache=True, **{_cache_arg(): cache}).logits
                probs = torch.softmax(logits[torch.arange(len(batch), device=device), last].double(), dim=-1)
            for row, i in enumerate(batch):
                values[i], dists[i] = readout(probs[row].cpu().numpy(), queries[i], self.model)

        order = [members[j] for j in sort_by_length([cost[i] for i in members])]
        run_batches(order, cost, batch_tokens=self.batch_tokens, holder=self.model, device=device,
                    forward=forward, max_cells=self.max_cells, on_batch=done)

    def chat_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The text of ``messages`` (``{"role": ..., "content": ...}`` each) through the
        checkpoint's chat template with ``add_generation_prompt=True``: what
        :meth:`generate` continues as the assistant's turn.

        Raises:
            CheckpointError: the tokenizer has no chat template (not an instruct model).
            ValueError: a message that is not a mapping of string ``role`` and ``content`` (its index).
        """
        if not self.model.tokenizer.chat_template:
            raise CheckpointError(f"{self.model.path}: its tokenizer has no chat template: not an instruct model "
                                  "(a generator needs one)")
        plain = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise ValueError(f"message {i}: must be a mapping with 'role' and 'content', got {type(m).__name__}")
            for field in ("role", "content"):
                if not isinstance(m.get(field), str):
                    raise ValueError(f"message {i}: field {field!r} must be a string, got {m.get(field)!r:.60}")
            plain.append({"role": m["role"], "content": m["content"]})
        return self.model.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int, stop: Sequence[str] = (),
                 max_length: int | None = None, progress: bool | None = None) -> list[Generation]:
        """Greedy, batched, deterministic continuations of rendered prompts, in order
        (:func:`~unieval_local.models.causal_lm.generate.generate`: the key/value cache, left
        padding, stop strings, ``max_new_tokens``).

        Args:
            prompts: rendered texts (:meth:`chat_prompt`'s output, possibly with text appended).
            max_new_tokens: the most tokens per prompt. stop: strings that end a generation (cut
                from its text). max_length: the window for prompt + ``max_new_tokens`` (default: the
                evaluator's ``max_length``); a prompt over it gets ``finish="too_long"``.
            progress: a bar over prompts (None: on a terminal; False: none).

        Returns:
            One :class:`~unieval_local.models.base.Generation` per prompt.

        Raises:
            ValueError: a bad prompt (its index), ``max_new_tokens`` or stop string.
            ModelRuntimeError: the model failed.
        """
        from .generate import generate

        window = self.evaluator.max_length if max_length is None else max_length
        return generate(self.model, prompts, max_new_tokens=max_new_tokens, stop=stop, max_length=window,
                        batch_tokens=self.batch_tokens, max_cells=self.max_cells, progress=progress)

    def distributions(self, prompts: Sequence[str], *, max_length: int) -> list[dict[str, float]]:
        """Per prompt, its readout distribution (:func:`readout`: word or rating digit -> its
        renormalised probability): the one kept from its last scoring (the last
        :data:`RECENT_DISTRIBUTIONS` prompts), else scored again (a score-cache hit keeps only the
        value). Evidence asks for them after the scores (``Evidence.queries[].distribution``).

        Raises:
            ModelRuntimeError: the model failed.
        """
        with self._recent_lock:
            kept = {p: self._recent.get((p, max_length)) for p in prompts}
        missing = list(dict.fromkeys(p for p, d in kept.items() if d is None))
        if missing:
            _, _, again = self.evaluate(missing, max_length=max_length)
            kept.update(zip(missing, again))
        return [kept[p] for p in prompts]

    def score(self, prompts: Sequence[str], *, max_length: int,
              on_batch: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(value, n_tokens)`` per chat prompt, in order: float64 in [0, 1] (a rating mapped
        onto [0, 1], :func:`readout`), NaN where the readout words got no probability; each
        prompt's untruncated token count.

        Raises:
            ValueError: a prompt that is not a chat prompt.
            ModelRuntimeError: the model failed (out of memory on a single prompt included).
        """
        values, n_tokens, _ = self.evaluate(prompts, max_length=max_length, on_batch=on_batch)
        return values, n_tokens


#: the fewest shared leading tokens for which prompts run their prefix once (prefix reuse)
PREFIX_MIN_TOKENS = 128
#: the most prompts one shared prefix serves (bounds the grouping's search)
PREFIX_GROUP_MAX = 64


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading tokens ``a`` and ``b`` share, at most ``limit``."""
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


@functools.cache
def _cache_arg() -> str:
    """The key/value cache's keyword in this transformers' causal LMs (``cache`` in 5.x,
    ``past_key_values`` before) and its output attribute of the same name."""
    import inspect

    from transformers import LlamaForCausalLM

    return "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


#: how many recent prompts' readout distributions a runner keeps for evidence
RECENT_DISTRIBUTIONS = 4096

_MODELS: dict[tuple[str, str | None, str, str], CausalLMModel] = {}
_LOCK = threading.Lock()


def causal_lm_runner_factory(checkpoint: ResolvedCheckpoint, fingerprint: str, evaluator: Evaluator, *, device: str,
                             dtype: str, batch_tokens: int = BATCH_TOKENS["gpu"],
                             attention_mib: float = default("attention_mib"), **_: object) -> CausalLMRunner:
    """The ``causal-lm`` backend's :data:`~unieval_local.models.base.RunnerFactory`: one model per
    folder, content fingerprint, device and dtype per process (``fast_forward`` and ``progress`` do
    not apply).

    Raises:
        CheckpointError: the checkpoint does not load strictly or does not fit the device's
            memory (:class:`~unieval_local.models.causal_lm.model.CausalLMModel`).
    """
    key = (str(Path(checkpoint.path).resolve()), fingerprint, device, check_dtype(dtype))
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = CausalLMModel(checkpoint, evaluator, device, dtype)
        model = _MODELS[key]
    return CausalLMRunner(model, evaluator=evaluator, fingerprint=fingerprint, batch_tokens=batch_tokens,
                          attention_mib=attention_mib)


def verify_causal_lm(report, folder, spec):
    """``unieval-local verify`` for the ``causal-lm`` backend: the config loads as one of the
    layouts, its parameter count, then the strict load the backend does (bfloat16 above
    :data:`~unieval_local.models.causal_lm.model.BFLOAT16_ABOVE` parameters) with the chat template
    and the readout words' single-token forms. ``report``: a
    :class:`~unieval_local.models.verify.VerifyReport`; returned."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        n = parameter_count(config)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"config does not load as a decoder: {first_line(exc)}")
        return report
    dtype = "bfloat16" if n > BFLOAT16_ABOVE else "float32"
    report.info(f"config loads ({config.model_type}, {n / 1e9:.2f}B parameters; checked in {dtype})")
    try:
        model = CausalLMModel(ResolvedCheckpoint(spec.name, Path(folder), "local"), spec, "cpu", dtype)
    except CheckpointError as exc:
        report.fail(str(exc))
        return report
    if model.tokenizer_doubt:
        report.warn(model.tokenizer_doubt)
    forms = ", ".join(f"{w!r}: {len(ids)}" for w, ids in model.forms.items())
    report.info(f"model loads strictly; chat template present; single-token forms per readout word: {forms}")
    return report
