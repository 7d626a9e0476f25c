"""The files of a checkpoint folder, by role: what resolution, download and verification agree on."""

from __future__ import annotations

__all__ = ["MANIFEST_NAME", "OPTIONAL_FILES", "TOKENIZER_FILES"]

#: The SHA-256 manifest ``unieval-local download`` writes into each staged folder.
MANIFEST_NAME = "unieval_manifest.json"
#: The tokenizer files a folder may hold (SentencePiece model: T5's spiece.model, DeBERTa-v3's spm.model;
#: fast-tokenizer JSON, configs).
TOKENIZER_FILES = ("spiece.model", "spm.model", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json")
#: Files fetched when present, never required.
OPTIONAL_FILES = ("generation_config.json",)
