"""The task API: what a fine-tuning task is, for the one driver (`albert_tf.apps.driver`)
to train, evaluate, predict and export it.

A task is a subclass of `Task` registered once with `@albert_tf.tasks.register`, in the
package (`albert_tf.tasks.multi_label`) or in a file of your own that the scripts load
with `--task_module=path/to/my_task.py`. The driver owns everything else: flags common
to every run, the tokenizer, the record cache, the loop on tf.distribute, checkpoints,
the dev-set evaluation of every kept checkpoint with `model.ckpt-best`, and the
exports. What a task says, attribute by attribute and hook by hook, is "The task
API" of docs/your-own-task.md (tests/test_task_registration.py holds it to this
class). In short: its
`name`, `metric` and `metric_goal`; its `serving_kinds` (each naming its model class);
its options (`Options`, the scripts' flags) and checks (`validate`); its data (`data_files`, `read`,
`head`, `discover_labels`); its records (`features` and `record_spec`, or
`split_records`); its model (`build_model`) and loss (`objective`); its results
(`metrics`, `write_predictions`) and what its export takes (`export_options`).

Where the defaults do not fit, a task overrides the step itself: `cached_records` (the
original's GLUE, RACE and SQuAD records keep their own caches), `dataset`, `train_steps`
(SQuAD's rounding), `evaluated` and `prepare_model` (multi-label's tuned threshold).
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, Mapping, Sequence

import tensorflow as tf

from albert_tf import names
from albert_tf.data import cache, records, tabular
from albert_tf.data.sentence_records import pack_pair
from albert_tf.errors import UsageError
from albert_tf.tasks.checks import check_file, check_run, wanted_splits
from albert_tf.tasks.options import TaskOptions


class Task:
    """Base of every fine-tuning task; see the module's docstring. Instances are made by
    the driver for one run, with the run's `options`: an instance of the task's
    `Options`, or a mapping that makes one."""

    # The task's options: a frozen dataclass (`albert_tf.tasks.options`) deriving from
    # `TaskOptions`, or from `FineTuningOptions` where the task reads its data its own
    # way; its fields are the scripts' flags. A task with options of its own declares
    #     @dataclasses.dataclass(frozen=True)
    #     class Options(Task.Options):
    #         threshold: float = option(0.5, "The flag's help.")
    Options: type = TaskOptions

    name: str = ""
    metric: str = ""
    metric_goal: str = "max"  # or "min": which way `metric` is better
    # The serving kinds of its models (`albert_tf.export.ServingKind`, each naming its
    # model class): the first is the run's unless `__init__` picks another as
    # `self.serving_kind` (SQuAD v2.0's by --version_2_with_negative).
    serving_kinds: tuple = ()
    # The model outputs that `metrics` reads (dev) and `write_predictions` reads (test),
    # and the record features both get beside them.
    eval_outputs: tuple[str, ...] = (names.PREDICTIONS,)
    predict_outputs: tuple[str, ...] | None = None  # default: eval_outputs
    label_features: tuple[str, ...] = (names.LABEL_IDS,)
    # Whether the task has labels: `--labels`, or those of the training split
    # (`discover_labels`), kept as labels.txt beside the checkpoints.
    has_labels: bool = False
    # Record features beside the three sequences that hold one value per position
    # (cut to each batch's longest with them), and what pads any feature in a batch.
    sequence_features: tuple[str, ...] = ()
    padding_values: Mapping[str, int] = {}
    # What a teacher's outputs teach a student of this task (--teacher_checkpoint):
    # (the model output, its soft loss: "softmax", "sigmoid", "regression" or, per
    # labelled position, "token_softmax", as `albert_tf.training.distillation.
    # SOFT_LOSSES`); None: not distilled. A task that sets it and overrides `dataset`
    # takes and parses `extra_spec` there.
    distillation: tuple[str, str] | None = None
    # Bump when `features` changes what it writes: cached records are then rewritten.
    cache_format: int = 1
    # What a run returns where it has no dev split: results the task scored on its test
    # split (SQuAD's EM / F1 of --predict_file), set by `write_predictions`.
    results: dict = {}

    def __init__(self, options: Options | Mapping[str, Any]):
        self.options = self.Options.build(options)
        self.serving_kind = self.serving_kinds[0] if self.serving_kinds else None
        self.tokenizer = None    # set by the driver before `read`
        self.labels: list[str] | None = None  # set by the driver after the training split

    # ---------------------------------------------------------------- what it adds
    @classmethod
    def task_names(cls) -> tuple[str, ...]:
        """The `--task_name`s that pick this task: its `name`; a task that runs several
        named data sets (GLUE's, RACE) names them here."""
        return (cls.name,)

    @classmethod
    def answers(cls, task_name: str) -> bool:
        """Whether `--task_name=task_name` picks this task: one of its `task_names()`,
        in any case."""
        return task_name.strip().lower() in {name.lower() for name in cls.task_names()}

    def validate(self) -> None:
        """Raises `albert_tf.errors.UsageError` for options that cannot make a run.
        The base checks that there is something to do, that the tokenizer's file
        exists and that --do_eval / --do_predict without --do_train find a trained
        model (`albert_tf.tasks.checks.check_run`); a task's own `validate` calls it."""
        check_run(self.options)

    # --------------------------------------------------------------------- the data
    def data_files(self) -> dict[str, list[str]]:
        """The files of each split the run needs (train, dev, test for --do_train,
        --do_eval, --do_predict): `--<split>_file` (comma-separated for several), else
        `<data_dir>/<split>.csv|.tsv|.jsonl`; each must exist."""
        files = {}
        for split in wanted_splits(self.options):
            given = getattr(self.options, f"{split}_file")
            if given:
                paths = [p for p in given.split(",") if p]
            elif self.options.data_dir:
                try:
                    paths = [tabular.split_file(self.options.data_dir, split)]
                except FileNotFoundError as e:
                    raise UsageError(f"--data_dir: {e}") from None
            else:
                raise UsageError(f"give --{split}_file or --data_dir for {self.name}")
            files[split] = [check_file(path, f"{split}_file") for path in paths]
        return files

    def read(self, split: str, paths: Sequence[str]):
        """The split's data: a list of examples, or any object `split_records`,
        `metrics` and `write_predictions` take."""
        raise NotImplementedError(f"{type(self).__name__}.read")

    def head(self, split: str, data, count: int):
        """The split's data cut to its first `count` examples, of the kind `read`
        returns (`split_records`, `write_records`, `metrics` take it): the dev split's
        head is what the metric is checked on before training. By default a list's
        first items."""
        if not isinstance(data, list):
            raise NotImplementedError(f"{type(self).__name__}.head: its data is not a "
                                      "list; say how to take its first examples")
        return data[:count]

    def discover_labels(self, examples: list) -> list[str]:
        """The labels of the training examples, sorted (`has_labels` tasks)."""
        raise NotImplementedError(f"{type(self).__name__}.discover_labels")

    def features(self, example) -> Mapping[str, Sequence]:
        raise NotImplementedError(f"{type(self).__name__}.features")

    def split_records(self, split: str, data) -> Iterable[Mapping[str, Sequence]]:
        """The records of a split, in order: by default one per example (`features`)."""
        return (self.features(example) for example in data)

    def record_spec(self) -> dict[str, tf.io.FixedLenFeature]:
        """The features `features` writes beside the three sequences."""
        return {}

    def cache_settings(self) -> dict:
        """What the records depend on beyond the files, the tokenizer and
        `max_seq_length` (a change converts the data again): by default the labels of a
        `has_labels` task."""
        return {"labels": self.labels} if self.has_labels else {}

    # ------------------------------------------- distillation's transfer text
    def transfer_is_pair(self) -> bool | None:
        """--transfer_file: whether each of its lines is a pair of texts (tab-separated)
        or one text; None (the default): the task takes no transfer text."""
        return None

    def read_transfer(self, path: str) -> list | None:
        """--transfer_file read in the task's own format (its examples, checked before
        any work, for `write_transfer_records`); None (the default): the file is lines
        of text, as `transfer_is_pair` says."""
        return None

    def write_transfer_records(self, texts: Sequence, path: str) -> int:
        """Writes unlabeled texts ((text_a, text_b or None) each, or the examples of
        `read_transfer`) as the task's training records, their labels a placeholder
        that `pseudo_label` replaces; returns how many records (a text may make
        several: a token task's windows). Needed where `transfer_is_pair` is not None
        or `read_transfer` reads the file."""
        raise NotImplementedError(f"{type(self).__name__}.write_transfer_records")

    def pseudo_label(self, example: tf.train.Example, teacher_output) -> None:
        """Sets the label features of a transfer record (a `tf.train.Example`, changed
        in place) from the teacher's output on it (the `distillation` output, a numpy
        row): what the labels' part of the loss learns there."""
        raise NotImplementedError(f"{type(self).__name__}.pseudo_label")

    def cached_records(self, split: str, data, paths: Sequence[str], cache_dir: str):
        """The split's records as a file under `cache_dir` (`records_name`), written by
        `write_records` unless the file there was made from what `cache_info` says;
        returns `albert_tf.data.cache.CachedRecords`."""
        path = os.path.join(cache_dir, self.records_name(split) + ".tf_record")
        return cache.cached_conversion(path, self.cache_info(split, paths),
                                       lambda p: (self.write_records(split, data, p), 0))

    def write_records(self, split: str, data, path: str) -> int:
        """Writes the split's records to `path` (atomically); returns how many. By
        default each of `split_records`, ints as int64 and floats where `record_spec`
        parses them as floats."""
        spec = self.record_spec()

        def serialized(features) -> bytes:
            return records.make_example({
                name: (records.float_feature if name in spec and spec[name].dtype ==
                       tf.float32 else records.int64_feature)(list(values))
                for name, values in features.items()})

        return records.write_records(path, (serialized(features) for features in
                                            self.split_records(split, data)))

    def dataset(self, path: str, batch_size: int, training: bool,
                drop_remainder: bool = False, extra_spec=None) -> tf.data.Dataset:
        """Batches of the records at `path`, each padded to its longest sequence
        (`sequence_features` with the three, `padding_values`); shuffled with the
        run's seed and repeated when `training`. `extra_spec`: features parsed beside
        the task's (a teacher's outputs)."""
        return records.fine_tuning_dataset(
            path, records.fixed_length_spec(self.options.max_seq_length,
                                            self.record_spec()),
            batch_size, training=training, seed=self.options.seed,
            drop_remainder=drop_remainder,
            sequence_features=records.SEQUENCE_FEATURES + tuple(self.sequence_features),
            padding_values=self.padding_values or None, extra_spec=extra_spec)

    def records_name(self, split: str) -> str:
        """The cached record file's name, `.tf_record` added: `<task>_train`,
        `<task>_eval`, `<task>_predict` (the original's suffixes)."""
        return f"{self.name}_{cache.CACHE_SUFFIX[split]}"

    def cache_info(self, split: str, paths: Sequence[str]) -> dict:
        """What the split's records are made from, kept beside them: a difference
        converts again."""
        return {"format": self.cache_format, "task": self.name, "split": split,
                "sources": [cache.abspath_or_url(p) for p in paths],
                "sources_sha256": [cache.file_sha256(p) for p in paths],
                "max_seq_length": int(self.options.max_seq_length),
                **cache.tokenizer_settings(self.tokenizer), **self.cache_settings()}

    def pack(self, text_a: str, text_b: str | None = None) -> dict[str, list[int]]:
        """`[CLS] A [SEP] (B [SEP])` of the raw texts as record features (`input_ids`,
        `input_mask`, `segment_ids`) padded to `max_seq_length`, packed and truncated as
        GLUE's records are (`albert_tf.data.sentence_records.pack_pair`)."""
        encode = self.tokenizer.encode
        packed = pack_pair(encode(text_a), encode(text_b) if text_b else None,
                           self.options.max_seq_length, self.tokenizer)
        return {name: values.tolist() for name, values in packed.items()}

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

    # -------------------------------------------------------------------- the model
    def build_model(self, config):
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def objective(self):
        raise NotImplementedError(f"{type(self).__name__}.objective")

    # ------------------------------------------------------------------ the results
    def metrics(self, examples: list, outputs: Mapping) -> dict:
        raise NotImplementedError(f"{type(self).__name__}.metrics")

    def write_predictions(self, examples: list, outputs: Mapping, output_dir: str,
                          step: int) -> str | None:
        """Writes the test split's predictions (of the model at training step `step`);
        returns the file written."""
        return None

    def evaluated(self, best: dict, output_dir: str) -> None:
        """Called with the best dev results once every checkpoint is evaluated (to keep
        what was tuned on dev beside the model)."""

    def prepare_model(self, model, output_dir: str) -> None:
        """Called with the best model before it predicts the test split and is
        exported."""

    def export_options(self) -> dict:
        """Arguments of `albert_tf.export.export_savedmodel` beside the model, the
        tokenizer and the labels (`is_pair`, ...)."""
        return {}
