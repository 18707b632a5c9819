"""A task's data as its model trains on it (`Task.Data`, the task's collaborator): where
a split's files are, the labels of the training split, the records of a split (written
once, cached beside what made them), the batches and the training length.

    class Data(Task.Data):             # inside a task, where the defaults do not fit
        def discover_labels(self, examples):   # a task with labels (labels.txt)
            return sorted({label for _, _, label in examples})

The defaults serve a task whose examples each make one record (`Task.features`), packed
as GLUE's sentences are (`pack`), parsed as the first record holds its features (each of
them handed to the task's metrics and predictions), and batched padded to each batch's
longest sequence; a task overrides only the steps that
differ (SQuAD's windows and cached features, NER's word positions, GLUE's and RACE's own
record caches). The driver makes one for the run: `task.data`, which holds the task
(`self.task`: its options, tokenizer and labels).
"""

from __future__ import annotations

import math
import os
from typing import Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.data import cache, records, tabular
from albert_tf.data.sentence_records import LongText, pack_pair, pack_windows
from albert_tf.errors import UsageError
from albert_tf.tasks.checks import check_file, given_file, wanted_splits
from albert_tf.tasks.options import LongTextOptions


class TaskData:
    """The data collaborator of a task; see the module's docstring."""

    # The names of the data sets the task runs besides its `name` (GLUE's tasks, RACE):
    # a --task_name of any of them, in any case, picks the task.
    data_sets: tuple[str, ...] = ()
    # The model outputs that `Task.metrics` reads (dev) and `Task.write_predictions`
    # reads (test), and the record features both get beside them (None: every feature
    # of the records beside the three sequences).
    eval_outputs: tuple[str, ...] = (names.PREDICTIONS,)
    predict_outputs: tuple[str, ...] | None = None  # default: eval_outputs
    label_features: tuple[str, ...] | None = None
    # Record features beside the three sequences that hold one value per position (cut
    # to each batch's longest with them), and what pads any feature in a batch.
    sequence_features: tuple[str, ...] = ()
    padding_values: Mapping[str, int] = {}
    # Bump when `Task.features` changes what it writes: cached records are then rewritten.
    cache_format: int = 1

    def __init__(self, task):
        self.task = task

    @property
    def options(self):
        return self.task.options

    # ------------------------------------------------------------------ the splits
    def data_files(self) -> dict[str, list[str]]:
        """The files of each split the run needs (train, dev, test for --do_train,
        --do_eval, --do_predict): `--<split>_file` (comma-separated for several), else
        `<data_dir>/<split>.csv|.tsv|.jsonl`; each must exist."""
        o, files = self.options, {}
        for split in wanted_splits(o):
            given = given_file(o, split)
            if given:
                paths = [p for p in given.split(",") if p]
            elif o.data_dir:
                try:
                    paths = [tabular.split_file(o.data_dir, split)]
                except FileNotFoundError as e:
                    raise UsageError(f"--data_dir: {e}") from None
            else:
                raise UsageError(f"give --{split}_file or --data_dir for {self.task.name}")
            files[split] = [check_file(path, f"{split}_file") for path in paths]
        return files

    @property
    def has_labels(self) -> bool:
        """Whether the task has labels: --labels, or those of the training split
        (`discover_labels`), kept as labels.txt beside the checkpoints and given to the
        task in its options (`options.labels`, `task.labels`). By default: where
        `discover_labels` is defined."""
        return type(self).discover_labels is not TaskData.discover_labels

    def derived_options(self, data: Mapping) -> dict:
        """Options the run derives from its data (fields of `Options` with
        `flag=False`, left None by the user), given to the run's task when it is made:
        `data` maps each split to what `Task.read` returns, each read once, when first
        looked at, by a task made with the run's other options and labels (what a
        derived option says must not change how a split is read). By default none."""
        return {}

    def discover_labels(self, examples) -> list[str]:
        """The labels of the training examples, sorted (a task with labels defines
        it)."""
        raise NotImplementedError(f"{type(self.task).__name__}.Data.discover_labels")

    def head(self, split: str, data, count: int):
        """The split's data cut to its first `count` examples, of the kind `Task.read`
        returns: the dev split's head is what the metric is checked on before
        training. By default a list's first items."""
        if not isinstance(data, list):
            raise NotImplementedError(f"{type(self.task).__name__}.Data.head: its data is "
                                      "not a list; say how to take its first examples")
        return data[:count]

    # ----------------------------------------------------------------- the records
    def pack(self, text_a: str, text_b: str | None = None) -> dict[str, list[int]]:
        """`[CLS] A [SEP] (B [SEP])` of the raw texts as record features (`input_ids`,
        `input_mask`, `segment_ids`) padded to `max_seq_length`, packed and truncated as
        GLUE's records are (`albert_tf.data.sentence_records.pack_pair`)."""
        tokenizer = self.task.tokenizer
        packed = pack_pair(tokenizer.encode(text_a),
                           tokenizer.encode(text_b) if text_b else None,
                           self.options.max_seq_length, tokenizer)
        return {name: values.tolist() for name, values in packed.items()}

    @property
    def long_text(self) -> LongText:
        """How texts longer than `max_seq_length` are read: `--long_text`,
        `--window_stride`, `--window_weight` and `--max_windows_per_text` of a task whose
        options have them (`albert_tf.tasks.options.LongTextOptions`), else truncated;
        a split's records read `long_text.at(split)` (the cap is training's alone)."""
        o = self.options
        if not isinstance(o, LongTextOptions):
            return LongText()
        return LongText(o.long_text, o.window_stride, o.window_weight,
                        o.max_windows_per_text)

    def with_windows(self, features: tuple[str, ...]) -> tuple[str, ...]:
        """`features`, and each record's text (`example_index`) where texts are read in
        windows: the `label_features` of a task that pools windows."""
        return (*features, *((names.EXAMPLE_INDEX,) if self.long_text.windows else ()))

    def pack_windows(self, text_a: str, text_b: str | None = None,
                     split: str | None = None) -> list[dict[str, list[int]]]:
        """`pack`'s record features of the raw texts for `--long_text=windows`: the one
        record where they fit, else one per window of the text (of a pair's longer
        text, the other kept whole up to half), every `--window_stride` pieces
        (`albert_tf.data.sentence_records.pack_windows`). A task whose options have
        no `long_text`: `pack`'s one record. `split`: the records of a split (the
        training split's keep `--max_windows_per_text` windows of a text at most);
        None: every window."""
        long_text = self.long_text
        if not long_text.windows:
            return [self.pack(text_a, text_b)]
        tokenizer = self.task.tokenizer
        windows = pack_windows(tokenizer.encode(text_a),
                               tokenizer.encode(text_b) if text_b else None,
                               self.options.max_seq_length, tokenizer, long_text.stride,
                               long_text.at(split).max_windows if split else 0)
        return [{name: values.tolist() for name, values in window.items()}
                for window in windows]

    def split_records(self, split: str, data) -> Iterable[Mapping[str, Sequence]]:
        """The records of a split, in order: by default one per example
        (`Task.features`)."""
        return (self.task.features(example) for example in data)

    def record_spec(self) -> dict[str, tf.io.FixedLenFeature] | None:
        """How to parse the features `Task.features` writes beside the three sequences;
        None (the default): as the first record of a file holds them
        (`albert_tf.data.records.spec_of_first_record`)."""
        return None

    def write_records(self, split: str, data, path: str) -> int:
        """Writes the split's records to `path` (atomically); returns how many. By
        default each of `split_records`, floats as floats (where `record_spec` says
        so, or the values are) and the rest as int64."""
        spec = self.record_spec()

        def is_float(name, values) -> bool:
            if spec is not None:
                return name in spec and spec[name].dtype == tf.float32
            return np.asarray(values).dtype.kind == "f"

        def serialized(features) -> bytes:
            return records.make_example({
                name: (records.float_feature if is_float(name, values) else
                       records.int64_feature)(list(values))
                for name, values in features.items()})

        return records.write_records(path, (serialized(features) for features in
                                            self.split_records(split, data)))

    def cache_settings(self) -> dict:
        """What the records depend on beyond the files, the tokenizer, `max_seq_length`
        and how a long text is read (`long_text`, which `cache_info` adds as the split
        reads it): a change converts the data again. By default the labels of a
        `has_labels` task."""
        return {"labels": self.task.labels} if self.has_labels else {}

    def records_name(self, split: str) -> str:
        """The cached record file's name, `.tf_record` added: `<task>_train`,
        `<task>_eval`, `<task>_predict` (the original's suffixes)."""
        return f"{self.task.name}_{cache.CACHE_SUFFIX[split]}"

    def cache_info(self, split: str, paths: Sequence[str]) -> dict:
        """What the split's records are made from, kept beside them: a difference
        converts again (`cache_settings`, and the split's `long_text`)."""
        return {"format": self.cache_format, "task": self.task.name, "split": split,
                "sources": [cache.abspath_or_url(p) for p in paths],
                "sources_sha256": [cache.file_sha256(p) for p in paths],
                "max_seq_length": int(self.options.max_seq_length),
                **cache.tokenizer_settings(self.task.tokenizer), **self.cache_settings(),
                **self.long_text.at(split).cache_settings()}

    def cached_records(self, split: str, data, paths: Sequence[str], cache_dir: str):
        """The split's records as a file under `cache_dir` (`records_name`), written by
        `write_records` unless the file there was made from what `cache_info` says;
        returns `albert_tf.data.cache.CachedRecords`."""
        path = os.path.join(cache_dir, self.records_name(split) + ".tf_record")
        return cache.cached_conversion(path, self.cache_info(split, paths),
                                       lambda p: (self.write_records(split, data, p), 0))

    # ----------------------------------------------------------------- the batches
    def dataset(self, path: str, batch_size: int, training: bool,
                drop_remainder: bool = False, extra_spec=None) -> tf.data.Dataset:
        """Batches of the records at `path`, each padded to its longest sequence
        (`sequence_features` with the three, `padding_values`); shuffled with the
        run's seed and repeated when `training`. `extra_spec`: features parsed beside
        the task's (a teacher's outputs)."""
        spec = self.record_spec()
        if spec is None:
            spec = records.spec_of_first_record(
                path, known=(*records.SEQUENCE_FEATURES, *(extra_spec or {})))
        return records.fine_tuning_dataset(
            path, records.fixed_length_spec(self.options.max_seq_length, spec),
            batch_size, training=training, seed=self.options.seed,
            drop_remainder=drop_remainder,
            sequence_features=records.SEQUENCE_FEATURES + tuple(self.sequence_features),
            padding_values=self.padding_values or None, extra_spec=extra_spec)

    def example_outputs(self, outputs: Mapping[str, np.ndarray]) -> Mapping:
        """The outputs of a prediction pass over a split's records (and the features
        fetched beside them) as `metrics` and `write_predictions` read them, one row
        per example: by default as they are (a record an example); a task that reads an
        example in several records pools them here (the sentence tasks' windows of a
        long text, by their `example_index`)."""
        return outputs

    def fetched_features(self, dataset: tf.data.Dataset) -> list[str]:
        """The record features of `dataset`'s batches that a prediction pass hands
        `Task.metrics` and `Task.write_predictions` beside the outputs:
        `label_features`, or every feature beside the three sequences."""
        if self.label_features is not None:
            return list(self.label_features)
        return [name for name in dataset.element_spec
                if name not in records.SEQUENCE_FEATURES]

    def train_steps(self, num_examples: int | None) -> tuple[int, int]:
        """(training steps, warmup steps): --train_step, else --num_train_epochs over the
        `num_examples` training records (None: no training split); --warmup_step, else
        --warmup_proportion of the steps."""
        o = self.options
        steps = o.train_step
        if steps is None:
            steps = 1 if num_examples is None else max(1, math.ceil(
                num_examples / o.train_batch_size * o.num_train_epochs))
        warmup = o.warmup_step
        if warmup is None:
            warmup = int(steps * o.warmup_proportion)
        return steps, warmup
