"""The evaluator registry: what each checkpoint family expects.

An :class:`Evaluator` owns everything about a checkpoint that the engine must not hard-code:
its name and hub id, its prompt format (:mod:`unieval_local.text.prompts`), its answer words
(the positive one first; their first token ids are checked distinct at load and by
``verify``), its readout (``pair``: softmax over the two answer logits = sigmoid of their
difference, UniEval's and MiniCheck's rule; ``vocab``: softmax over the whole vocabulary,
P(positive answer), SEAHORSE's and TRUE's rule), its default ``max_length``, and the input
hints it was trained with. Aspects name their evaluator (``Aspect.checkpoint``); the
engine, the runner and the score cache read the spec from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..text.prompts import BOOLEAN_QA, HHEM, MINICHECK, NLI_PAIR, SEAHORSE, PromptFormat
from ..text.chat import GEVAL, GRANITE_GROUNDEDNESS
from ..text.factcg import FACTCG
from ..text.judges import PROMETHEUS, THEMIS

if TYPE_CHECKING:
    from .tasks import Aspect

__all__ = ["EVALUATORS", "Evaluator", "HUB_ID", "Readout", "SEAHORSE_LANGUAGES", "answer_ids", "evaluator_of_hub_id",
           "format_of", "get_evaluator"]

#: How a T5 evaluator's score is read from the logits of the first decoder step (:class:`Evaluator`).
Readout = Literal["pair", "vocab"]

#: A Hugging Face repository id, ``owner/name``.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


@dataclass(frozen=True)
class Evaluator:
    """One checkpoint family's contract.

    Attributes:
        name: the evaluator (and checkpoint folder) name, e.g. ``unieval-sum``.
        hub_id: its Hugging Face repository, or None.
        prompt_format: how its prompts are built (:class:`~unieval_local.text.prompts.PromptFormat`).
        answers: ``(positive, negative)`` answer words (their first token ids are read at the
            first decoder step; ``readout`` says how).
        max_length: default tokens per query (the run's ``max_length`` overrides it).
        input_hints: field -> (the ending its training data had, what that field is);
            inputs without it are scored as given, with one warning. Declare one only where the
            ending changes the token ids (whitespace a SentencePiece tokenizer drops does not).
        description: one line for ``unieval-local tasks`` and the README.
        model_types: the ``model_type`` values of ``config.json`` this family's checkpoints
            have (``t5`` for UniEval and MiniCheck); a folder of another type is refused.
        backend: the model backend that loads and runs it (:mod:`unieval_local.models.backends`):
            ``t5`` (seq2seq, the answer tokens' logits at the first decoder step) or
            ``seq-classifier`` (an encoder with a classification head over text pairs).
        label: for the classifier backends (``seq-classifier``, ``hhem``): the label whose
            probability is the score (softmax over the head's labels); its index is read from
            ``config.json``'s ``id2label``, and a checkpoint whose named labels lack it is refused
            (:func:`~unieval_local.models.classifier.runner.readout_label`); None for ``t5``.
        label_index: the output index of ``label`` where the checkpoint's labels are generic
            (``LABEL_0``, ``LABEL_1``: transformers' default, HHEM-2.1-Open's config names none)
            or absent: HHEM's 1 (its ``modeling_hhem_v2.py`` reads ``softmax(logits)[:, 1]``,
            "consistent"). When set and the labels ARE named, the named index must equal it (a
            config naming class 1 "hallucinated" is refused). None: the labels must name ``label``.
        tokenizer_from: the hub id of another checkpoint that holds the tokenizer (and the
            architecture config) when the folder has none (HHEM: ``google/flan-t5-base``).
        readout: how the score of a query is read (``t5`` backend), in [0, 1]:
            ``pair`` (UniEval, MiniCheck) ``sigmoid(l_pos - l_neg)`` = softmax over the two answer
            logits only (UniEval ``scorer.py``: ``p[yes] / (p[yes] + p[no])``); ``vocab`` (SEAHORSE,
            Clark et al. 2023, trained as TRUE, Honovich et al. 2022) ``softmax(all logits)[pos]``
            = P(the positive answer's first token) over the WHOLE vocabulary (the negative answer
            is then only checked to exist). Part of :meth:`key` only when not ``pair``.
        languages: ISO 639-1 codes of the languages its training data had (from the paper or
            model card); text in another language is scored with one warning per run, or
            refused under ``strict_language``. ``None``: not declared (a user's checkpoint).
        licence: the weights' licence as their model card states it (SPDX-style where it names
            one), ``"not stated"`` where the card names none; printed by ``download`` before fetching
            and listed by ``download --list``.
        size_gb: approximate download size in GB (10^9 bytes) of the files ``download`` fetches
            (the weights dominate; from the hub's file listing); None where there are no default
            weights (``g-eval``) or it is unknown (a user's checkpoint).
    """

    name: str
    hub_id: str | None
    prompt_format: PromptFormat = BOOLEAN_QA
    answers: tuple[str, str] = ("Yes", "No")
    max_length: int = 1024
    input_hints: dict[str, tuple[str, str]] = field(default_factory=dict)
    description: str = ""
    model_types: tuple[str, ...] = ("t5",)
    backend: str = "t5"
    label: str | None = None
    label_index: int | None = None
    tokenizer_from: str | None = None
    languages: tuple[str, ...] | None = ("en",)
    readout: Readout = "pair"
    licence: str = "not stated"
    size_gb: float | None = None

    def __post_init__(self) -> None:
        if len(self.answers) != 2 or self.answers[0] == self.answers[1]:
            raise ValueError(f"evaluator {self.name!r}: answers must be two different words, got {self.answers!r}")
        if self.readout not in ("pair", "vocab"):
            raise ValueError(f"evaluator {self.name!r}: readout must be 'pair' or 'vocab', got {self.readout!r}")

    def key(self) -> dict[str, object]:
        """What of the spec can change a score (part of every score-cache key)."""
        key: dict[str, object] = {"evaluator": self.name, "format": self.prompt_format.name,
                                  "answers": list(self.answers)}
        if self.backend != "t5":  # T5 keys stay as they were (cached values remain valid)
            key.update(backend=self.backend, label=self.label)
            if self.label_index is not None:  # the index read where the labels are generic
                key["label_index"] = self.label_index
        if self.readout != "pair":  # likewise: pair-readout keys are unchanged
            key["readout"] = self.readout
        return key


#: mDeBERTa-v3-base-xnli-multilingual-nli-2mil7's training languages: the 27 its model card lists
#: (XNLI and multilingual-NLI-26lang-2mil7).
NLI_LANGUAGES = ("ar", "bn", "de", "en", "es", "fa", "fr", "he", "hi", "id", "it", "ja", "ko", "mr", "nl", "pl",
                 "ps", "pt", "ru", "sv", "sw", "ta", "tr", "uk", "ur", "vi", "zh")

#: SEAHORSE's languages: those of its human ratings (Clark et al., 2023; the model cards of
#: google/seahorse-large-q1..q6). mT5's pretraining covers many more; the ratings did not.
SEAHORSE_LANGUAGES = ("de", "en", "es", "ru", "tr", "vi")

#: SEAHORSE's six questions (q1..q6), as the paper names them.
_SEAHORSE_QUESTIONS = ("is the summary comprehensible?", "is the summary free of unnecessary repetition?",
                       "is the summary grammatical?",
                       "is the summary fully attributable to (supported by) the article?",
                       "does the summary capture the article's main ideas?", "is the summary concise?")

#: The built-in evaluators, by name.
EVALUATORS: dict[str, Evaluator] = {e.name: e for e in [
    # UniEval (Zhong et al., EMNLP 2022): T5-large, pytorch_model.bin ~3.1 GB each; the hub model
    # cards (MingZhong/unieval-*) state no licence.
    Evaluator("unieval-sum", "MingZhong/unieval-sum", size_gb=3.1,
              description="UniEval for summarization and data-to-text (Zhong et al., 2022)"),
    # No input_hints: its training histories end with "\n\n" and facts with "\n", but T5's
    # SentencePiece normalisation (nmt_nfkc, remove_extra_whitespaces) reads newlines as spaces and
    # drops runs and trailing ones, so those endings give the same token ids (issue 29; tested).
    Evaluator("unieval-dialog", "MingZhong/unieval-dialog", size_gb=3.1,
              description="UniEval for knowledge-grounded dialogue responses (Zhong et al., 2022)"),
    Evaluator("unieval-fact", "MingZhong/unieval-fact", size_gb=3.1,
              description="UniEval for factual consistency (Zhong et al., 2022)"),
    # MiniCheck-Flan-T5-Large (Tang, Laban and Durrett, EMNLP 2024; code Apache-2.0, weights MIT):
    # '1' = supported, '0' = not (first tokens 209 and 3 in Flan-T5's vocabulary), 2,048 tokens.
    Evaluator("minicheck-flan-t5-large", "lytang/MiniCheck-Flan-T5-Large", MINICHECK, answers=("1", "0"),
              max_length=2048, licence="MIT", size_gb=3.1,
              description="MiniCheck-Flan-T5-Large fact checker (Tang et al., 2024): is the "
              "claim supported by the document?"),
    # mDeBERTa-v3-base NLI (Laurer et al., MIT): 3 labels (entailment, neutral, contradiction),
    # 27 languages; scored as P(entailment) of (document chunk, claim) pairs, 512 tokens.
    Evaluator("mdeberta-nli", "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7", NLI_PAIR,
              max_length=512, model_types=("deberta-v2",), backend="seq-classifier", label="entailment",
              languages=NLI_LANGUAGES, licence="MIT", size_gb=0.58,
              description="mDeBERTa-v3 NLI cross-encoder (multilingual): P(entailment) of document chunk -> "
              "claim, SummaC-ZS style"),
    # HHEM-2.1-Open (Vectara, Apache-2.0): a T5-base encoder with a 2-label head, reimplemented
    # natively (models/hhem: no remote code); its tokenizer and T5 config are flan-t5-base's.
    Evaluator("hhem-2.1-open", "vectara/hallucination_evaluation_model", HHEM, max_length=2048,
              model_types=("HHEMv2",), backend="hhem", label="consistent", label_index=1,
              tokenizer_from="google/flan-t5-base", licence="Apache-2.0", size_gb=0.44,
              description="HHEM-2.1-Open hallucination detector (Vectara): P(consistent) of source -> target"),
    # FactCG-DeBERTa-v3-Large (Lei et al., NAACL 2025, arXiv 2501.17144; code and weights MIT, 1.74 GB
    # safetensors, English): one text (document chunk + an instruction quoting the claim, text/factcg.py),
    # 550-word chunks, max over them; generic labels (the authors load it with num_labels=2), output 1 =
    # supported (factcg/inference.py reads softmax(logits)[:, 1]); 2,048 tokens as its tokenizer call.
    Evaluator("factcg-deberta-large", "yaxili96/FactCG-DeBERTa-v3-Large", FACTCG, max_length=2048,
              model_types=("deberta-v2",), backend="seq-classifier", label="supported", label_index=1,
              licence="MIT", size_gb=1.74,
              description="FactCG-DeBERTa-v3-Large fact checker (Lei et al., 2025): P(supported) of the claim "
              "given a document chunk, max over 550-word chunks"),
    # SEAHORSE (Clark et al., 2023, arXiv 2305.13194; weights cc-by-4.0): six mT5-large metrics,
    # "premise: ARTICLE hypothesis: SUMMARY", answer "1"/"0", P("1") over the whole vocabulary
    # (TRUE's rule); no max length is documented (mT5 has relative positions): 2,048 tokens.
    *(Evaluator(f"seahorse-large-q{n}", f"google/seahorse-large-q{n}", SEAHORSE, answers=("1", "0"), max_length=2048,
                model_types=("mt5",), languages=SEAHORSE_LANGUAGES, readout="vocab", licence="CC-BY-4.0",
                size_gb=4.9,
                description=f"SEAHORSE Q{n} (mT5-large, Clark et al., 2023): {question}")
      for n, question in enumerate(_SEAHORSE_QUESTIONS, 1)),
    # Granite Guardian 3.3 8B (IBM, Apache-2.0; causal-lm backend): the groundedness risk of its
    # model card (guardian_config criteria_id "groundedness", think off), read as 1 - P(yes) after a
    # teacher-forced "<score>"; the source in 500-word chunks, max over them. Parity with IBM's
    # own scoring is not verified here (no weights on the build machines).
    Evaluator("granite-guardian-3.3-8b", "ibm-granite/granite-guardian-3.3-8b", GRANITE_GROUNDEDNESS,
              answers=("no", "yes"), max_length=8192, model_types=("granite",), backend="causal-lm",
              licence="Apache-2.0", size_gb=16.3,
              description="Granite Guardian 3.3 8B (IBM, Apache-2.0): 1 - P(groundedness risk) of the target "
              "given the source, max over chunks"),
    # G-Eval (Liu et al., 2023) with a local instruct model the user names (no default weights):
    # the expected rating over the score tokens; answers: the scale's top and bottom digits (every
    # digit 1..9 must be one token, checked at load).
    Evaluator("g-eval", None, GEVAL, answers=("5", "1"), max_length=4096, model_types=("llama", "qwen2", "granite"),
              backend="causal-lm", licence="that of the model you name", languages=None,  # the user's model: unknown
              description="G-Eval (Liu et al., 2023) with a local instruct model: "
              "probability-weighted rating over the score tokens"),
    # Judges that reason (issue 44; text/judges.py): a rationale generated, the rating prefix forced,
    # the expected rating read over 1-5. Themis-8B (Hu et al., 2024; Llama-3-8B based, Apache-2.0,
    # 8.03B parameters = 16.1 GB in bfloat16): 8,192 tokens of context less its eval.py's 2,048 new ones.
    Evaluator("themis", "PKU-ONELab/Themis", THEMIS, answers=("5", "1"), max_length=6144, model_types=("llama",),
              backend="causal-lm", licence="Apache-2.0", size_gb=16.1,
              description="Themis-8B (Hu et al., 2024), a judge that reasons: its analysis, then the expected "
              "rating 1-5 read after 'Rating: '"),
    # Prometheus 2 7B (Kim et al., 2024; Mistral-7B-Instruct-v0.2 based, Apache-2.0, 7.24B = 14.5 GB):
    # absolute grading with a rubric; "llama" beside "mistral" for the Llama-layout test stand-ins.
    Evaluator("prometheus-7b-v2.0", "prometheus-eval/prometheus-7b-v2.0", PROMETHEUS, answers=("5", "1"),
              max_length=8192, model_types=("mistral", "llama"), backend="causal-lm", licence="Apache-2.0",
              size_gb=14.5,
              description="Prometheus 2 7B (Kim et al., 2024), absolute grading with a rubric: its feedback, "
              "then the expected rating 1-5 read after '[RESULT] '"),
]}


def get_evaluator(name: str) -> Evaluator:
    """The evaluator ``name``: a built-in one, or, for a hub id ``owner/name`` (a user's
    checkpoint in UniEval's format), a Boolean-QA evaluator over it.

    Raises:
        ValueError: neither a built-in name nor a hub id (the message lists the built-ins).
    """
    if name in EVALUATORS:
        return EVALUATORS[name]
    if HUB_ID.match(name):
        return Evaluator(name, name, languages=None)
    raise ValueError(f"unknown evaluator {name!r}; built in: {', '.join(EVALUATORS)} (or a hub id 'owner/name')")


def evaluator_of_hub_id(hub_id: str | None) -> Evaluator | None:
    """The built-in evaluator whose hub repository is ``hub_id`` (case-insensitive, as the hub
    treats repository names), or None."""
    if not hub_id:
        return None
    return next((e for e in EVALUATORS.values() if e.hub_id and e.hub_id.lower() == hub_id.lower()), None)


def answer_ids(tokenizer, evaluator: Evaluator, rows: int | None = None) -> tuple[int, int]:
    """The first token ids of the evaluator's ``(positive, negative)`` answer words (UniEval's
    ``pos_id``/``neg_id``: ``tokenizer("Yes").input_ids[0]``; MiniCheck's 209/3 for "1"/"0"),
    the readout tokens whose logits give the score.

    Args:
        tokenizer: the checkpoint's loaded tokenizer.
        evaluator: whose ``answers`` to read.
        rows: the model's LM-head (embedding) rows, when known: both ids must lie inside them.

    Raises:
        CheckpointError: either is the unknown token, both are the same id, or one is outside
            ``rows`` (a tokenizer of another model).
    """
    from ..errors import CheckpointError

    pos, neg = (tokenizer(w).input_ids[0] for w in evaluator.answers)
    unk = tokenizer.unk_token_id
    if pos == neg or unk in (pos, neg):
        raise CheckpointError(f"the tokenizer has no distinct first tokens for the answers {evaluator.answers} of "
                              f"{evaluator.name} ({evaluator.answers[0]}={pos}, {evaluator.answers[1]}={neg}, "
                              f"unk={unk})")
    if rows is not None and not (0 <= pos < rows and 0 <= neg < rows):
        raise CheckpointError(f"the answer ids {evaluator.answers[0]}={pos}, {evaluator.answers[1]}={neg} of "
                              f"{evaluator.name} are outside the model's {rows:,} vocabulary rows: a tokenizer of "
                              "another model")
    return pos, neg


def format_of(aspect: "Aspect") -> PromptFormat:
    """The prompt format of the evaluator an aspect names (``aspect.evaluator``)."""
    return get_evaluator(aspect.checkpoint).prompt_format
