"""Sentence classification and regression records, whatever the data: `[CLS] A [SEP]
(B [SEP])` as the original `classifier_utils.py` packs GLUE.

A `SentenceTask` says what the records of a task hold (its labels, or a float score for
regression; one text or a pair) and how it is scored (`metric`, read by
`albert_tf.evaluation.glue_metrics`); an `InputExample` is one row. Examples become the
original's features: longest-first truncation of a pair (a single text keeps its
start), zero padding to `max_seq_length`, records with `input_ids`, `input_mask`,
`segment_ids`, `label_ids` (float for regression) and `is_real_example`.

With `--long_text=windows` (`LongText`) a text that does not fit is read whole instead,
in windows (`pack_windows`, by the rules of `albert_tf.packing`: `window_layout`,
`window_spans`): a record per window, each with its example's label and
`example_index`, the example's place in its split; `pool_windows` makes the model's
outputs on them one row per example again.

The readers are `albert_tf.data.glue` (GLUE's TSV files; its `GlueTask`s are
`SentenceTask`s) and `albert_tf.data.tabular` (your CSV, TSV or JSONL files).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import numpy as np
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


@dataclasses.dataclass(frozen=True)
class LongText:
    """How the records read a text longer than `max_seq_length` (`--long_text`,
    `--window_stride`, `--window_weight`, `--max_windows_per_text`): cut by the
    original's rules (`truncate`: the original's records), or whole in windows of
    `max_seq_length` every `stride` pieces (`windows`; None: half the window,
    `packing.default_window_stride`), each window weighing 1 in training (`weight` one:
    no weight recorded) or 1 / its text's windows (`inverse`: each record's
    `window_weight`), and a text of more than `max_windows` windows (0: no cap) keeping
    `packing.capped_windows` of them. The cap is the training split's alone: `at(split)`
    is what a split's records read."""

    mode: str = packing.TRUNCATE
    stride: int | None = None
    weight: str = packing.WINDOW_WEIGHT_ONE
    max_windows: int = 0

    def __post_init__(self):
        if self.mode not in packing.LONG_TEXT_MODES:
            raise ValueError(f"long_text must be one of {', '.join(packing.LONG_TEXT_MODES)}"
                             f", got {self.mode!r}")
        if self.weight not in packing.WINDOW_WEIGHTS:
            raise ValueError(f"window_weight must be one of "
                             f"{', '.join(packing.WINDOW_WEIGHTS)}, got {self.weight!r}")
        if self.weight != packing.WINDOW_WEIGHT_ONE and not self.windows:
            raise ValueError(f"window_weight={self.weight} needs long_text=windows")
        if self.max_windows < 0:
            raise ValueError(f"max_windows_per_text must be 0 (no cap) or more, got "
                             f"{self.max_windows}")
        if self.max_windows and not self.windows:
            raise ValueError(f"max_windows_per_text={self.max_windows} needs "
                             "long_text=windows")

    @property
    def windows(self) -> bool:
        return self.mode == packing.WINDOWS

    @property
    def weighted(self) -> bool:
        """Whether its records carry each window's `window_weight`."""
        return self.weight != packing.WINDOW_WEIGHT_ONE

    def at(self, split: str) -> "LongText":
        """How `split`'s records read a long text: the training split's with the cap of
        windows per text, any other's every window."""
        if split == packing.CAPPED_SPLIT or not self.max_windows:
            return self
        return dataclasses.replace(self, max_windows=0)

    def cache_settings(self) -> dict:
        """What cached records keep of it beside their other settings: nothing when
        they truncate (their settings stay the original's), the mode and stride when
        they are windows (so that neither is ever read for the other), the weight and
        the cap where there are (so that no record of one setting is read for
        another)."""
        if not self.windows:
            return {}
        return {"long_text": self.mode, "window_stride": self.stride,
                **({"window_weight": self.weight} if self.weighted else {}),
                **({"max_windows_per_text": self.max_windows} if self.max_windows
                   else {})}

    def export_options(self) -> dict:
        """What `albert_tf.export.export_savedmodel` takes of it (its `serve_text`
        reads the windows too): nothing when it truncates (the export of a truncating
        run is the one it always was); a training weight or cap is nothing to it."""
        return {k: v for k, v in self.cache_settings().items()
                if k not in ("window_weight", "max_windows_per_text")}


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


def pack_windows(ids_a: Sequence[int], ids_b: Sequence[int] | None, max_seq_length: int,
                 tokenizer, stride: int | None = None, max_windows: int = 0) -> list[dict]:
    """`pack_pair`'s records for `--long_text=windows`: one where the text or pair fits
    (`pack_pair`'s), else one per window (`packing.window_layout`: over the single text,
    or over the longer of a pair beside the other kept whole up to half;
    `packing.window_spans`: every `stride` pieces, default half the window, cut at the
    tokenizer's word starts where possible); `max_windows` (training's
    `--max_windows_per_text`; 0: all) of them at most, `packing.capped_windows`.
    Counted where records are being written, with the windows written."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    segments = [list(ids_a), list(ids_b)] if ids_b else [list(ids_a)]
    lengths = [len(segment) for segment in segments]
    windowed, kept, window = packing.window_layout(lengths, max_seq_length)
    spans = [None]
    if windowed is not None:
        starts = tokenizer.word_start_table()[np.asarray(segments[windowed], np.int64)]
        spans = packing.record_windows(starts, window, stride, max_windows)
    counter = report.truncation_counter()
    if counter is not None:
        counter.add(max_seq_length, [(lengths, kept)], windows=len(spans))
    packed = []
    for span in spans:
        cut = [segment[:length] for segment, length in zip(segments, kept)]
        if span is not None:
            start, length = span
            cut[windowed] = segments[windowed][start:start + length]
        packed.append(names.to_record_features(packing.pack(
            cut, max_seq_length, cls_id=tokenizer.special_id(CLS),
            sep_id=tokenizer.special_id(SEP))))
    return packed


def _example_ids(example: InputExample, tokenizer):
    def ids(text):
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    return ids(example.text_a), ids(example.text_b) if example.text_b else None


def _features(packed: dict, label, example_index: int | None = None) -> InputFeatures:
    return InputFeatures(input_ids=packed[names.INPUT_IDS].tolist(),
                         input_mask=packed[names.INPUT_MASK].tolist(),
                         segment_ids=packed[names.SEGMENT_IDS].tolist(),
                         label_id=label, example_index=example_index)


def convert_single_example(example: InputExample, task: SentenceTask,
                           max_seq_length: int, tokenizer) -> InputFeatures:
    """The example's packed sequences (`pack_pair` of its pieces) and label."""
    packed = pack_pair(*_example_ids(example, tokenizer), max_seq_length, tokenizer)
    return _features(packed, label_id(task, example.label))


def convert_example_windows(example: InputExample, example_index: int,
                            task: SentenceTask, max_seq_length: int, tokenizer,
                            stride: int | None = None,
                            weight: str = packing.WINDOW_WEIGHT_ONE,
                            max_windows: int = 0) -> list[InputFeatures]:
    """The example's windows (`pack_windows`; `max_windows` of them at most, 0: all),
    each with its label and `example_index` (`weight` inverse: and its `window_weight`,
    1 / its windows written)."""
    label = label_id(task, example.label)
    features = [_features(packed, label, example_index) for packed in pack_windows(
        *_example_ids(example, tokenizer), max_seq_length, tokenizer, stride,
        max_windows)]
    if weight == packing.WINDOW_WEIGHT_INVERSE:
        for feature in features:
            feature.window_weight = 1.0 / len(features)
    return features


def write_examples(examples: Sequence[InputExample], task: SentenceTask,
                   max_seq_length: int, tokenizer, output_file,
                   long_text: LongText | None = None) -> int:
    """Writes the examples' features to `output_file` (atomically), one record each, or
    with `long_text` windows one per window (as many as its `max_windows` keeps: give
    a split's, `LongText.at`); returns how many records."""
    if long_text is not None and long_text.windows:
        features = (f for index, e in enumerate(examples) for f in convert_example_windows(
            e, index, task, max_seq_length, tokenizer, long_text.stride, long_text.weight,
            long_text.max_windows))
    else:
        features = (convert_single_example(e, task, max_seq_length, tokenizer)
                    for e in examples)
    return records.write_records(output_file, (f.to_record() for f in features))


def record_spec(task: SentenceTask, max_seq_length: int, windows: bool = False,
                weighted: bool = False) -> dict:
    """The parsing spec of the task's records (`label_ids` float32 for regression; with
    `windows`, each record's `example_index`; `weighted`, its `window_weight`)."""
    return records.fixed_length_spec(max_seq_length, {
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if task.is_regression
                                           else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
        **({names.EXAMPLE_INDEX: tf.io.FixedLenFeature([], tf.int64)} if windows else {}),
        **({names.WINDOW_WEIGHT: tf.io.FixedLenFeature([], tf.float32)} if weighted
           else {}),
    })


def sentence_dataset(files, task: SentenceTask, max_seq_length: int, batch_size: int, *,
                     training: bool, seed: int | None = None, drop_remainder: bool = False,
                     bucket_boundaries: list[int] | None = None, windows: bool = False,
                     weighted: bool = False, **kwargs) -> tf.data.Dataset:
    """Batches of the task's records (original feature names), each padded to its own
    longest sequence (`windows`: records of windows, their `example_index` read too;
    `weighted`, their `window_weight`); see `records.fine_tuning_dataset`."""
    return records.fine_tuning_dataset(
        files, record_spec(task, max_seq_length, windows, weighted), batch_size,
        training=training,
        seed=seed, drop_remainder=drop_remainder, bucket_boundaries=bucket_boundaries,
        **kwargs)


# How `pool_windows` reduces an output over an example's windows.
POOLINGS = ("mean", "max")


@dataclasses.dataclass(frozen=True)
class WindowPooling:
    """How a task makes one answer of a text's windows' outputs, defined once for its
    evaluation (`pool_windows`, NumPy) and its SavedModel's `serve_text`
    (`pool_windows_tf`): each output `reduce` names pooled over the windows ("mean",
    in float64, or "max"), every other one the text's first window's; then `finish`
    (TensorFlow ops, run eagerly on the NumPy values too), where given, computes
    outputs from the pooled ones (a classifier's probabilities and class from its
    pooled logits)."""

    reduce: Mapping[str, str]
    finish: Callable[[dict], Mapping] | None = None

    def __post_init__(self):
        for name, how in self.reduce.items():
            if how not in POOLINGS:
                raise ValueError(f"pooling {name} by {how!r}: expected one of "
                                 f"{', '.join(POOLINGS)}")

    @classmethod
    def of(cls, pooling: "WindowPooling | Mapping[str, str]") -> "WindowPooling":
        return pooling if isinstance(pooling, cls) else cls(dict(pooling))


def pool_windows(outputs: Mapping[str, np.ndarray],
                 pooling: WindowPooling | Mapping[str, str]) -> dict[str, np.ndarray]:
    """A prediction pass's outputs over window records as one row per example, in
    order, pooled as `pooling` says (a `WindowPooling`, or its `reduce` alone): the
    outputs it names reduced over their example's windows, every other one (the labels)
    its example's first window's. `outputs[names.EXAMPLE_INDEX]` [W] says whose each
    row is: a split's windows in its examples' order, an example's together (as
    `write_examples` writes them and an evaluation reads them back)."""
    pooling = WindowPooling.of(pooling)
    index = np.asarray(outputs[names.EXAMPLE_INDEX]).reshape(-1)
    firsts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]]) if index.size else \
        np.zeros(0, np.int64)
    if not np.array_equal(index[firsts], np.arange(firsts.size)):
        raise ValueError(f"window records out of their examples' order (example indices "
                         f"{index[:20].tolist()}...): each example's windows together, "
                         f"the examples in order")
    counts = np.diff(np.r_[firsts, index.size])
    pooled = {}
    for name, values in outputs.items():
        values = np.asarray(values)
        how = pooling.reduce.get(name)
        if not firsts.size:
            pooled[name] = values[:0]
        elif how == "mean":
            sums = np.add.reduceat(values.astype(np.float64), firsts, axis=0)
            pooled[name] = (sums / counts.reshape((-1,) + (1,) * (values.ndim - 1))
                            ).astype(values.dtype)
        elif how == "max":
            pooled[name] = np.maximum.reduceat(values, firsts, axis=0)
        else:
            pooled[name] = values[firsts]
    if pooling.finish is not None:
        pooled.update({name: np.asarray(value) for name, value in
                       pooling.finish(pooled).items()})
    return pooled


def pool_windows_tf(outputs: Mapping[str, tf.Tensor], row_splits,
                    pooling: WindowPooling | Mapping[str, str]) -> dict[str, tf.Tensor]:
    """`pool_windows` in TensorFlow ops: outputs [W, ...] over the windows of B texts
    -> [B, ...], text b's windows the rows `row_splits[b]` to `row_splits[b + 1]` (one
    at least; `albert_tf.packing.pack_windows_tf`)."""
    pooling = WindowPooling.of(pooling)
    row_splits = tf.cast(row_splits, tf.int32)
    count = tf.size(row_splits) - 1
    text = tf.ragged.row_splits_to_segment_ids(row_splits, out_type=tf.int32)  # [W]
    pooled = {}
    for name, values in outputs.items():
        how = pooling.reduce.get(name)
        if how == "mean":
            pooled[name] = tf.cast(tf.math.unsorted_segment_mean(
                tf.cast(values, tf.float64), text, count), values.dtype)
        elif how == "max":
            pooled[name] = tf.math.unsorted_segment_max(values, text, count)
        else:
            pooled[name] = tf.gather(values, row_splits[:-1])
    if pooling.finish is not None:
        pooled.update(pooling.finish(pooled))
    return pooled
