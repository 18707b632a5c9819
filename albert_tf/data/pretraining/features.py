"""The record format: the original's pretraining features, their types and lengths."""

from __future__ import annotations

import tensorflow as tf

from albert_tf import names

# [max_seq_length] each.
SEQUENCE_FEATURES = names.RECORD_SEQUENCES + (names.TOKEN_BOUNDARY,)
# [max_predictions_per_seq] each, zero-padded (weights 1.0 then 0.0).
PREDICTION_FEATURES = (names.MASKED_LM_POSITIONS, names.MASKED_LM_IDS,
                       names.MASKED_LM_WEIGHTS)
# The original's features, in the order it writes them.
FEATURE_NAMES = SEQUENCE_FEATURES + PREDICTION_FEATURES + (names.NEXT_SENTENCE_LABELS,)
# Every feature is int64 but these, which are float.
FLOAT_FEATURES = frozenset({names.MASKED_LM_WEIGHTS})


def feature_lengths(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, int]:
    """Each feature's fixed length in a record, in the order of `FEATURE_NAMES`."""
    lengths = {name: max_seq_length for name in SEQUENCE_FEATURES}
    lengths.update({name: max_predictions_per_seq for name in PREDICTION_FEATURES})
    lengths[names.NEXT_SENTENCE_LABELS] = 1
    return lengths


def pretraining_feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The parsing spec of pretraining records (the one the original's
    `run_pretraining.py` uses)."""
    return {name: tf.io.FixedLenFeature(
        [length], tf.float32 if name in FLOAT_FEATURES else tf.int64)
        for name, length in feature_lengths(max_seq_length, max_predictions_per_seq).items()}
