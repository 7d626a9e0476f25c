"""The files of a checkpoint folder, by role: what resolution, download and verification agree on."""

from __future__ import annotations

__all__ = ["MANIFEST_NAME", "OPTIONAL_FILES", "TOKENIZER_FILES"]

#: The SHA-256 manifest ``unieval-local download`` writes into each staged folder.
MANIFEST_NAME = "unieval_manifest.json"
#: The tokenizer files a folder may hold (SentencePiece model: T5's spiece.model, DeBERTa-v3's spm.model;
#: fast-tokenizer JSON, configs).
TOKENIZER_FILES = ("spiece.model", "spm.model", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json")
#: Files fetched when present, never required: ``chat_template.jinja`` is where newer repositories
#: (ibm-granite/granite-guardian-3.3-8b) keep the chat template that ``tokenizer_config.json`` used to
#: hold; transformers' ``AutoTokenizer`` reads it when the config has none (checked with 5.x).
OPTIONAL_FILES = ("generation_config.json", "chat_template.jinja")
