"""Tiny models and random model inputs for the tests: one base config, one input maker.

Every test that needs a small model of its own builds it here, changing only the fields
its numbers depend on, so that a test states what is special about its model and nothing
else. (The checkpoint of the ORIGINAL code has its own config, conftest's `tiny_config`
fixture, read from `fixtures/albert_tf1_tiny_grouped`.)
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

from albert_tf import AlbertConfig, names

# Small enough for seconds of training; the English SentencePiece fixture's 30k
# vocabulary, so that real tokenizers can feed it.
TINY = dict(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
# Ids below this are the special pieces of the fixtures' vocabularies (<pad>, <unk>,
# [CLS], [SEP], [MASK]): random words never draw them.
FIRST_WORD_ID = 5


def tiny_config(**changes) -> AlbertConfig:
    """The base tiny config with `changes`; AlbertConfig validates it and refuses an
    unknown field (a misspelt override must not pass silently)."""
    return AlbertConfig(**{**TINY, **changes})


def write_tiny_config(directory: str | os.PathLike, **changes) -> pathlib.Path:
    """`directory/albert_config.json` of `tiny_config(**changes)`, for the scripts'
    `--albert_config_file`; returns its path."""
    path = pathlib.Path(directory) / "albert_config.json"
    tiny_config(**changes).to_json_file(path)
    return path


def random_inputs(config_or_vocab: AlbertConfig | int, batch: int = 2, length: int = 6,
                  seed: int | np.random.Generator = 0, *, num_choices: int | None = None,
                  lengths=None, min_length: int | None = None,
                  second_segment_from: int | None = None,
                  masked_lm_predictions: int | None = None) -> dict[str, np.ndarray]:
    """Random model inputs (`names.MODEL_INPUTS`, int32), the same for the same seed.

    Shape [batch, length], or [batch, num_choices, length]. Word ids are drawn first
    from [FIRST_WORD_ID, vocab), so the words of a given seed and shape do not depend on
    the options. Rows are full unless `lengths` gives each row's (flat, row order) or
    `min_length` draws them from [min_length, length]; a row ends in padding (mask 0,
    ids 0, type 0). `second_segment_from`: type id 1 from that position on.
    `masked_lm_predictions`: that many `masked_lm_positions` per row, drawn after the
    lengths from [1, shortest possible row) (never [CLS], never padding).

    `seed` may be a Generator, which the caller goes on drawing from afterwards.
    """
    vocab = getattr(config_or_vocab, "vocab_size", config_or_vocab)
    rng = np.random.default_rng(seed)
    rows = (batch,) if num_choices is None else (batch, num_choices)
    ids = rng.integers(FIRST_WORD_ID, vocab, (*rows, length))
    if lengths is not None:
        lengths = np.asarray(lengths).reshape(rows)
        shortest = min(int(lengths.min()), length)
    elif min_length is not None:
        lengths = rng.integers(min_length, length + 1, size=rows)
        shortest = min_length
    else:
        lengths = np.full(rows, length)
        shortest = length
    mask = np.arange(length) < lengths[..., None]  # [*rows, length]
    types = np.zeros_like(mask)
    if second_segment_from is not None:
        types = (np.arange(length) >= second_segment_from) & mask
    inputs = dict(zip(names.MODEL_INPUTS, (ids * mask, mask, types)))
    if masked_lm_predictions is not None:
        if num_choices is not None:
            raise ValueError("masked_lm_positions are for pretraining inputs, not choices")
        inputs[names.MASKED_LM_POSITIONS] = rng.integers(
            1, shortest, (batch, masked_lm_predictions))
    return {name: value.astype(np.int32) for name, value in inputs.items()}
