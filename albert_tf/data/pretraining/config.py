"""The settings of pretraining data creation: the original flags, checked once."""

from __future__ import annotations

import dataclasses

from albert_tf import tokenization
from albert_tf.data.errors import DataError


class PretrainingDataError(DataError):
    """Input or settings that cannot give pretraining data."""


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """The original flags (with their defaults) and the chunking of this version.

    Dynamic masking (`albert_tf.data.dynamic_masking`) reads the same settings; it has
    no chunks nor duplicates, so it ignores `dupe_factor`, `chunk_bytes` and
    `max_line_bytes`.

    Attributes:
      chunk_bytes: input text per chunk: the unit of work, of the instance shuffle and
        of the window the random other document comes from. At most `num_workers + 1`
        chunks are in flight, each holding `dupe_factor * chunk_bytes` times 3 to 15
        bytes of records (English text; the more padding, the more bytes: a long
        `max_seq_length` with short documents).
      max_line_bytes: longer lines are skipped (they are not sentences).
    """
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 40
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False
    random_seed: int = 12345
    chunk_bytes: int = 128 * 1024
    max_line_bytes: int = 1 << 20

    def validate(self) -> None:
        checks = [
            ("max_seq_length", self.max_seq_length >= 5,
             "at least 5 ([CLS] A [SEP] B [SEP])"),
            ("max_predictions_per_seq", self.max_predictions_per_seq >= 0, "at least 0"),
            ("masked_lm_prob", 0.0 <= self.masked_lm_prob <= 1.0, "in [0, 1]"),
            ("short_seq_prob", 0.0 <= self.short_seq_prob <= 1.0, "in [0, 1]"),
            ("dupe_factor", self.dupe_factor >= 1, "at least 1"),
            ("ngram", self.ngram >= 1, "at least 1"),
            ("chunk_bytes", self.chunk_bytes >= 1, "at least 1"),
            ("max_line_bytes", self.max_line_bytes >= 1, "at least 1"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise PretrainingDataError(
                    f"{name} must be {expected}, got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """How to build the tokenizer (sent to worker processes instead of the model)."""
    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True

    def build(self) -> tokenization.FullTokenizer:
        return tokenization.FullTokenizer(self.vocab_file, self.do_lower_case,
                                          self.spm_model_file)
