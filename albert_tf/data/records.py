"""TFRecord plumbing shared by every dataset: writing safely, reading back, batching.

Files keep the original google-research/albert formats (fixed-length features padded to
`max_seq_length`, the original feature names), so records written by either side are
read by the other. Reading trims each example back to its real length and pads a batch
only to its own longest sequence, so no computation is spent on padding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Iterator, Mapping

import numpy as np
import tensorflow as tf

from albert_tf import fileio, names
from albert_tf.data.graph import graph_function

# The original feature names -> the model's input names (the table is albert_tf.names).
MODEL_INPUT_NAMES = names.RECORD_TO_MODEL
SEQUENCE_FEATURES = names.RECORD_SEQUENCES


def int64_feature(values) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(np.ravel(values))))


def float_feature(values) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(np.ravel(values))))


def bytes_feature(values) -> tf.train.Feature:
    values = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def make_example(features: Mapping[str, tf.train.Feature]) -> bytes:
    """A tf.train.Example's bytes, its features in name order: the same bytes in every
    process (protobuf writes a map in an order that changes with the process), so that
    the same records give the same file and `records_sha256`."""
    return tf.train.Example(features=tf.train.Features(feature=dict(features))) \
        .SerializeToString(deterministic=True)


@contextlib.contextmanager
def atomic_tfrecord_writer(path: str | os.PathLike, options: str | None = None
                           ) -> Iterator[tf.io.TFRecordWriter]:
    """A TFRecord writer whose file appears at `path` only when the block succeeds.

    Records go to a temporary name beside `path`, renamed on success and deleted on
    any error, so no run leaves a truncated file behind.
    """
    with fileio.atomic_path(path) as tmp:
        writer = tf.io.TFRecordWriter(tmp, options=options)
        try:
            yield writer
        finally:
            writer.close()


@dataclasses.dataclass
class InputFeatures:
    """The original fine-tuning features of one example (`run_classifier.py`,
    `run_race.py`): the three sequences padded to `max_seq_length` (a multiple-choice
    example holds its choices' sequences one after another), the label (a float for
    regression) and whether the example is real (not TPU batch padding); a window of a
    long text (`--long_text=windows`) says which example it is of (`example_index`,
    the example's place in its split; None: no window, no such feature), and with
    `--window_weight=inverse` its weight in training (`window_weight`; None: none)."""

    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    label_id: int | float
    is_real_example: bool = True
    example_index: int | None = None
    window_weight: float | None = None

    def to_record(self) -> bytes:
        """A serialized tf.Example in the original format."""
        label = float_feature if isinstance(self.label_id, float) else int64_feature
        features = {
            names.INPUT_IDS: int64_feature(self.input_ids),
            names.INPUT_MASK: int64_feature(self.input_mask),
            names.SEGMENT_IDS: int64_feature(self.segment_ids),
            names.LABEL_IDS: label([self.label_id]),
            names.IS_REAL_EXAMPLE: int64_feature([int(self.is_real_example)]),
        }
        if self.example_index is not None:
            features[names.EXAMPLE_INDEX] = int64_feature([self.example_index])
        if self.window_weight is not None:
            features[names.WINDOW_WEIGHT] = float_feature([self.window_weight])
        return make_example(features)


def write_records(path: str | os.PathLike, records) -> int:
    """Writes serialized examples atomically; returns how many."""
    count = 0
    with atomic_tfrecord_writer(path) as writer:
        for record in records:
            writer.write(record)
            count += 1
    return count


def fixed_length_spec(max_seq_length: int, extra: Mapping[str, tf.io.FixedLenFeature]
                      | None = None, sequence_shape=()) -> dict:
    """The original fine-tuning record spec: the three sequences of
    `sequence_shape + [max_seq_length]` int64, plus `extra` features."""
    shape = list(sequence_shape) + [max_seq_length]
    spec = {name: tf.io.FixedLenFeature(shape, tf.int64) for name in SEQUENCE_FEATURES}
    spec.update(extra or {})
    return spec


_DTYPES = {"int64_list": tf.int64, "float_list": tf.float32, "bytes_list": tf.string}


def spec_of_first_record(path, known=()) -> dict:
    """The parsing spec of the features of the first record at `path` beside `known`
    (the three sequences, ...): each as written (int64, float32 or bytes), a feature of
    one value as a scalar, else a list of its length. {} for a file of no record."""
    first = next(iter(tf.data.TFRecordDataset(os.fspath(path)).take(1)
                      .as_numpy_iterator()), None)
    if first is None:
        return {}
    spec = {}
    for name, feature in tf.train.Example.FromString(first).features.feature.items():
        kind = feature.WhichOneof("kind")
        if name in known or kind is None:
            continue
        count = len(getattr(feature, kind).value)
        spec[name] = tf.io.FixedLenFeature([] if count == 1 else [count], _DTYPES[kind])
    return spec


def _to_int32(features: dict) -> dict:
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in features.items()}


def trim_to_length(features: dict, sequence_features=SEQUENCE_FEATURES) -> dict:
    """Cuts the sequence features (by default the three model inputs; a dataset with
    more, such as SQuAD's `p_mask`, names them all) back to the longest real length (sum
    of `input_mask` along the last axis), so that batches can pad to their own longest."""
    length = tf.reduce_max(tf.reduce_sum(tf.cast(features[names.INPUT_MASK], tf.int32), -1))
    trimmed = dict(features)
    for name in sequence_features:
        trimmed[name] = features[name][..., :length]
    return trimmed


to_model_inputs = names.to_model_inputs


# How many examples the training order draws from (the original's records shuffle
# through a buffer too).
SHUFFLE_BUFFER = 10_000


def shuffled(dataset: tf.data.Dataset, seed: int | None,
             buffer_size: int = SHUFFLE_BUFFER) -> tf.data.Dataset:
    """The training order of fine-tuning examples: `dataset` shuffled through a buffer
    with `seed` (and the process's global seed, as a run sets it), a new order each
    pass."""
    return dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True)


def fine_tuning_dataset(files, spec: dict, batch_size: int, *, training: bool,
                        seed: int | None = None, drop_remainder: bool = False,
                        shuffle_buffer: int = SHUFFLE_BUFFER, repeat: bool | None = None,
                        bucket_boundaries: list[int] | None = None,
                        sequence_features=SEQUENCE_FEATURES,
                        padding_values: Mapping[str, int] | None = None,
                        extra_spec: Mapping | None = None
                        ) -> tf.data.Dataset:
    """Batches of original-format fine-tuning records, padded to each batch's longest.

    Args:
      files: a TFRecord path or list of paths.
      spec: the parsing spec (`fixed_length_spec`).
      training: shuffle (seeded) and repeat.
      drop_remainder: fixed batch size (TPU).
      bucket_boundaries: sequence lengths at which to bucket, so that examples of
        similar length share a batch (eval and predict keep every example).
      sequence_features: the features trimmed to the real length (`trim_to_length`).
      padding_values: feature name -> the value that pads it in a batch (default 0).
      extra_spec: features parsed beside `spec`'s (a teacher's outputs).
    """
    spec = {**spec, **(extra_spec or {})}
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    dataset = tf.data.TFRecordDataset([os.fspath(f) for f in files])
    if training:
        dataset = shuffled(dataset, seed, shuffle_buffer)
    if repeat if repeat is not None else training:
        dataset = dataset.repeat()
    dataset = dataset.map(graph_function(lambda record: trim_to_length(_to_int32(
        tf.io.parse_single_example(record, spec)), sequence_features)),
        num_parallel_calls=tf.data.AUTOTUNE)
    padding = None
    if padding_values:
        padding = {name: tf.constant(padding_values.get(name, 0), element.dtype)
                   for name, element in dataset.element_spec.items()}
    if bucket_boundaries:
        dataset = dataset.bucket_by_sequence_length(
            lambda f: tf.shape(f[names.INPUT_IDS])[-1], bucket_boundaries,
            [batch_size] * (len(bucket_boundaries) + 1), padding_values=padding,
            drop_remainder=drop_remainder)
    else:
        dataset = dataset.padded_batch(batch_size, padding_values=padding,
                                       drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)
