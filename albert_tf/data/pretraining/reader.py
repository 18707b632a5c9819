"""Reading pretraining records back as batches (what `run_pretraining.py` trains on)."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from albert_tf import names
from albert_tf.data import records
from albert_tf.data.graph import graph_function
from albert_tf.data.pretraining.config import PretrainingDataError
from albert_tf.data.pretraining.features import pretraining_feature_spec
from albert_tf.data.pretraining.files import expand_input_patterns


def record_lengths(path: str) -> tuple[int, int]:
    """(max_seq_length, max_predictions_per_seq) of the records in `path`."""
    for raw in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(raw.numpy())
        features = example.features.feature
        return (len(features[names.INPUT_IDS].int64_list.value),
                len(features[names.MASKED_LM_POSITIONS].int64_list.value))
    raise PretrainingDataError(f"{path} holds no records")


def _trim_batch(features: dict) -> dict:
    """Cuts the sequence features of a batch to its longest real sequence."""
    trimmed = records.trim_to_length(features)
    length = tf.shape(trimmed[names.INPUT_IDS])[-1]
    trimmed[names.TOKEN_BOUNDARY] = features[names.TOKEN_BOUNDARY][..., :length]
    return trimmed


def _serialized_records(paths: list[str], is_training: bool, seed: int | None,
                        shuffle_buffer: int, cycle_length: int) -> tf.data.Dataset:
    """The records of `paths`: in file order, or (training) files and records
    shuffled by `seed`, forever."""
    dataset = tf.data.Dataset.from_tensor_slices(paths)
    if not is_training:
        return tf.data.TFRecordDataset(dataset)
    dataset = dataset.shuffle(len(paths), seed=seed).repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(paths)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    return dataset.shuffle(shuffle_buffer, seed=seed)


def pretraining_dataset(files: str | Sequence[str], batch_size: int, *,
                        max_seq_length: int | None = None,
                        max_predictions_per_seq: int | None = None,
                        is_training: bool = True, seed: int | None = None,
                        drop_remainder: bool = True, shuffle_buffer: int = 10_000,
                        cycle_length: int = 4, trim_padding: bool = False
                        ) -> tf.data.Dataset:
    """Batches of pretraining records with the original feature names.

    Integer features come as int32 (as the original `run_pretraining.py` casts them),
    `masked_lm_weights` as float32; `next_sentence_labels` is [batch, 1].

    Args:
      files: TFRecord paths or globs (comma-separated in a string).
      max_seq_length, max_predictions_per_seq: the records' lengths; read from the
        first record when not given.
      is_training: shuffle files and records (seeded by `seed`) and repeat forever.
      drop_remainder: every batch has `batch_size` examples (TPU, XLA).
      trim_padding: cut `input_ids`, `input_mask`, `segment_ids`, `token_boundary` to
        each batch's longest sequence.
    """
    paths = expand_input_patterns(files)
    if max_seq_length is None or max_predictions_per_seq is None:
        found = record_lengths(paths[0])
        max_seq_length = max_seq_length or found[0]
        max_predictions_per_seq = max_predictions_per_seq or found[1]
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = _serialized_records(paths, is_training, seed, shuffle_buffer, cycle_length)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        features = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                    for k, v in features.items()}
        return _trim_batch(features) if trim_padding else features

    dataset = dataset.map(graph_function(parse), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)
