"""SQuAD features as TFRecords in the original `run_squad_v1.py` / `run_squad_v2.py`
layout (so either side reads what the other writes), and read back as batches."""

from __future__ import annotations

import collections
import os
from typing import Iterable

import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.data.graph import graph_function
from albert_tf.data.records import fine_tuning_dataset, int64_feature, make_example, write_records
from albert_tf.data.squad.examples import SquadError
from albert_tf.data.squad.features import SquadFeature

# The record layout, in the original FeatureWriter's order: name, whether it is a
# sequence of max_seq_length values, whether only training records have it. Writer and
# reader are both built from this table.
RECORD_LAYOUT = (
    (names.UNIQUE_IDS, False, False),
    (names.INPUT_IDS, True, False),
    (names.INPUT_MASK, True, False),
    (names.SEGMENT_IDS, True, False),
    (names.P_MASK, True, False),
    (names.START_POSITIONS, False, True),
    (names.END_POSITIONS, False, True),
    (names.IS_IMPOSSIBLE, False, True),
)
SEQUENCE_FEATURES = tuple(name for name, is_sequence, _ in RECORD_LAYOUT if is_sequence)
# Padding: 0 everywhere except p_mask, which marks padding as "not an answer" (1).
PADDING_VALUES = {names.P_MASK: 1}

# Each record feature's values in a SquadFeature.
_RECORD_VALUES = {
    names.UNIQUE_IDS: lambda f: [f.unique_id],
    names.INPUT_IDS: lambda f: f.input_ids,
    names.INPUT_MASK: lambda f: f.input_mask,
    names.SEGMENT_IDS: lambda f: f.segment_ids,
    names.P_MASK: lambda f: f.p_mask,
    names.START_POSITIONS: lambda f: [f.start_position],
    names.END_POSITIONS: lambda f: [f.end_position],
    names.IS_IMPOSSIBLE: lambda f: [int(f.is_impossible)],
}


def record_feature_names(is_training: bool) -> tuple[str, ...]:
    return tuple(name for name, _, training_only in RECORD_LAYOUT
                 if is_training or not training_only)


def record_spec(max_seq_length: int, is_training: bool) -> dict:
    """The parsing spec of the original run_squad records (p_mask included: the
    original writes it for v1.1 too)."""
    return {name: tf.io.FixedLenFeature([max_seq_length] if is_sequence else [], tf.int64)
            for name, is_sequence, training_only in RECORD_LAYOUT
            if is_training or not training_only}


def feature_to_record(feature: SquadFeature, is_training: bool) -> bytes:
    """A serialized tf.train.Example as the original FeatureWriter writes it."""
    if is_training and feature.start_position is None:
        raise SquadError(f"feature {feature.unique_id} has no answer positions: "
                         "convert with is_training=True to write training records")
    return make_example({
        name: int64_feature(np.asarray(_RECORD_VALUES[name](feature), np.int64))
        for name in record_feature_names(is_training)})


def write_features(path, features: Iterable[SquadFeature], is_training: bool) -> int:
    """Writes features as original-format records, atomically; returns how many."""
    return write_records(path, (feature_to_record(f, is_training) for f in features))


def squad_dataset(files, max_seq_length: int, batch_size: int, *, is_training: bool,
                  training: bool | None = None, seed: int | None = None,
                  drop_remainder: bool = False, repeat: bool | None = None,
                  shuffle_buffer: int = 10_000,
                  bucket_boundaries: list[int] | None = None) -> tf.data.Dataset:
    """Batches of original-format SQuAD records (int32), each example trimmed to its
    real length (p_mask too) and each batch padded only to its own longest (p_mask with
    1). `is_training`: the records hold the labels; `training` (default: the same):
    shuffle with `seed` and repeat."""
    return fine_tuning_dataset(
        files, record_spec(max_seq_length, is_training), batch_size,
        training=is_training if training is None else training, seed=seed,
        drop_remainder=drop_remainder, shuffle_buffer=shuffle_buffer, repeat=repeat,
        bucket_boundaries=bucket_boundaries, sequence_features=SEQUENCE_FEATURES,
        padding_values=PADDING_VALUES)


def read_feature_records(path, max_seq_length: int, is_training: bool,
                         batch_size: int = 1024) -> dict[str, np.ndarray]:
    """Every record of a file as numpy arrays ([N] or [N, max_seq_length]), in order."""
    spec = record_spec(max_seq_length, is_training)
    dataset = tf.data.TFRecordDataset(os.fspath(path)).batch(batch_size).map(
        graph_function(lambda batch: tf.io.parse_example(batch, spec)))
    parts = collections.defaultdict(list)
    for batch in dataset.as_numpy_iterator():
        for name, value in batch.items():
            parts[name].append(value)
    return {name: (np.concatenate(parts[name]) if parts[name] else
                   np.zeros((0,) + tuple(spec[name].shape), np.int64))
            for name in spec}
