"""Sentence classification and regression records, whatever the data: `[CLS] A [SEP]
(B [SEP])` as the original `classifier_utils.py` packs GLUE.

A `SentenceTask` says what the records of a task hold (its labels, or a float score for
regression; one text or a pair) and how it is scored (`metric`, read by
`albert_tf.evaluation.glue_metrics`); an `InputExample` is one row. Examples become the
original's features: longest-first truncation of a pair (a single text keeps its
start), zero padding to `max_seq_length`, records with `input_ids`, `input_mask`,
`segment_ids`, `label_ids` (float for regression) and `is_real_example`.

The readers are `albert_tf.data.glue` (GLUE's TSV files; its `GlueTask`s are
`SentenceTask`s) and `albert_tf.data.tabular` (your CSV, TSV or JSONL files).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from albert_tf import names, packing
from albert_tf.data import records, report
from albert_tf.data.errors import DataError
from albert_tf.data.records import InputFeatures
from albert_tf.tokenization import CLS, SEP


class SentenceDataError(DataError):
    """Sentence data that cannot be used (a label the task does not know, nothing valid
    left in a file)."""


@dataclasses.dataclass(frozen=True)
class SentenceTask:
    """What a sentence task's records and scores are."""

    name: str                      # the original's task_name, lower case: "sts-b"
    labels: tuple[str, ...]        # () for regression
    metric: str                    # the original's eval key: eval_accuracy, ...
    is_regression: bool
    is_pair: bool

    @property
    def num_labels(self) -> int:
        """Outputs of the classifier: 1 for regression, as the original's `[None]`."""
        return 1 if self.is_regression else len(self.labels)


@dataclasses.dataclass
class InputExample:
    """One example. `label` is a label string, a float (regression), or None (test)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


def label_id(task: SentenceTask, label) -> int | float:
    """The record label: the label's index, the float score (STS-B), or 0 for a test
    example (the original gives test examples the first label)."""
    if label is None:
        return 0.0 if task.is_regression else 0
    if task.is_regression:
        return float(label)
    try:
        return task.labels.index(label)
    except ValueError:
        raise SentenceDataError(f"unknown {task.name} label {label!r} (expected one of "
                                f"{', '.join(task.labels)})") from None


def pack_pair(ids_a: Sequence[int], ids_b: Sequence[int] | None, max_seq_length: int,
              tokenizer) -> dict:
    """`[CLS] A [SEP] (B [SEP])` as record features (`input_ids`, `input_mask`,
    `segment_ids`, NumPy) padded to `max_seq_length`, truncated as the original (pair:
    longest first; single: keep the start); an empty B counts as no B, as there. Counted
    where records are being written (`albert_tf.data.report.truncation_counter`)."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    segments = [ids_a, ids_b] if ids_b else [ids_a]
    counter = report.truncation_counter()
    if counter is not None:
        lengths = [len(segment) for segment in segments]
        counter.add(max_seq_length, [(lengths, packing.kept_lengths(lengths,
                                                                    max_seq_length))])
    return names.to_record_features(packing.pack(
        segments, max_seq_length, cls_id=tokenizer.special_id(CLS),
        sep_id=tokenizer.special_id(SEP)))


def convert_single_example(example: InputExample, task: SentenceTask,
                           max_seq_length: int, tokenizer) -> InputFeatures:
    """The example's packed sequences (`pack_pair` of its pieces) and label."""
    def ids(text):
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    packed = pack_pair(ids(example.text_a), ids(example.text_b) if example.text_b else None,
                       max_seq_length, tokenizer)
    return InputFeatures(input_ids=packed[names.INPUT_IDS].tolist(),
                         input_mask=packed[names.INPUT_MASK].tolist(),
                         segment_ids=packed[names.SEGMENT_IDS].tolist(),
                         label_id=label_id(task, example.label))


def write_examples(examples: Sequence[InputExample], task: SentenceTask,
                   max_seq_length: int, tokenizer, output_file) -> int:
    """Writes the examples' features to `output_file` (atomically); returns how many."""
    return records.write_records(output_file, (
        convert_single_example(e, task, max_seq_length, tokenizer).to_record()
        for e in examples))


def record_spec(task: SentenceTask, max_seq_length: int) -> dict:
    """The parsing spec of the task's records (`label_ids` float32 for regression)."""
    return records.fixed_length_spec(max_seq_length, {
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if task.is_regression
                                           else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    })


def sentence_dataset(files, task: SentenceTask, max_seq_length: int, batch_size: int, *,
                     training: bool, seed: int | None = None, drop_remainder: bool = False,
                     bucket_boundaries: list[int] | None = None,
                     **kwargs) -> tf.data.Dataset:
    """Batches of the task's records (original feature names), each padded to its own
    longest sequence; see `records.fine_tuning_dataset`."""
    return records.fine_tuning_dataset(
        files, record_spec(task, max_seq_length), batch_size, training=training, seed=seed,
        drop_remainder=drop_remainder, bucket_boundaries=bucket_boundaries, **kwargs)
