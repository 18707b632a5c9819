"""The fine-tuning driver: train, evaluate, predict and export any `albert_tf.tasks.Task`.

    best = driver.run(MultiLabelTask, settings)

The steps, each the same for every task: the model files the `--init_checkpoint`
brings; the task's checks and every split's files, before any work; the strategy,
seeds and tokenizer (`common.start`); the labels (`--labels`, a model's labels.txt, or
the training split's) and every split read; each split's records converted once and
cached beside their settings; the model and optimizer; training with checkpoints and
exact resume; every kept checkpoint evaluated on dev, the best kept as
`model.ckpt-best`; the test split predicted with the best; the exports asked for
(`--export_dir`, `--export_tflite`, `--export_hf_dir`).
"""

from __future__ import annotations

import math
import os

import tensorflow as tf
from absl import logging

from albert_tf.apps import common
from albert_tf.data import cache, records
from albert_tf.training import distribute
from albert_tf.training.loop import predict


class _Records:
    """The task's records as `common.evaluate_checkpoints` and the loop read them."""

    def __init__(self, task, dev=None):
        self.task, self.dev = task, dev
        self.metric = task.metric
        self.eval_outputs = task.eval_outputs
        self.label_features = task.label_features

    def dataset(self, path, settings, batch_size, training, drop_remainder=False):
        task = self.task
        return records.fine_tuning_dataset(
            path, records.fixed_length_spec(settings["max_seq_length"], task.record_spec()),
            batch_size, training=training, seed=settings["seed"],
            drop_remainder=drop_remainder,
            sequence_features=records.SEQUENCE_FEATURES + tuple(task.sequence_features),
            padding_values=task.padding_values or None)

    def metrics(self, outputs) -> dict:
        return self.task.metrics(self.dev, outputs)


def _serialize(features, spec) -> bytes:
    """One record: each feature as int64 or float, as `spec` parses it (the three
    sequences are int64)."""
    return records.make_example({
        name: (records.float_feature if name in spec and spec[name].dtype == tf.float32
               else records.int64_feature)(list(values))
        for name, values in features.items()})


def convert(task, split: str, data, paths: list[str], cache_dir) -> cache.CachedRecords:
    """The split's records under `cache_dir` (`task.records_name`), reused when they were
    made from what `task.cache_info` says."""
    spec = task.record_spec()

    def write(path):
        count = records.write_records(path, (_serialize(features, spec) for features in
                                             task.split_records(split, data)))
        logging.info("wrote %d %s %s records to %s", count, task.name, split, path)
        return count, 0

    path = os.path.join(cache_dir, task.records_name(split) + ".tf_record")
    return cache.cached_conversion(path, task.cache_info(split, paths), write)


def read_splits(task, settings, files, output_dir) -> dict:
    """Every split's data, read once the labels are known (`--labels`, else a model's
    labels.txt, else the task's `discover_labels` of the training split)."""
    data = {}

    def training_data():
        if "train" not in data:
            data["train"] = task.read("train", files["train"])
        return data["train"]

    if task.has_labels:
        task.labels = common.resolve_labels(
            settings, output_dir, lambda: task.discover_labels(training_data()))
    for split in files:
        if split not in data:
            data[split] = task.read(split, files[split])
    return data


def train_steps(settings, num_examples: int | None) -> tuple[int, int]:
    """(steps, warmup): --train_step, else --num_train_epochs over the training records;
    --warmup_step, else --warmup_proportion of the steps."""
    steps = settings.get("train_step")
    if steps is None:
        steps = 1 if num_examples is None else max(1, math.ceil(
            num_examples / settings["train_batch_size"] * settings["num_train_epochs"]))
    warmup = settings.get("warmup_step")
    if warmup is None:
        warmup = int(steps * settings["warmup_proportion"])
    return steps, warmup


def run(task_class, settings: dict) -> dict:
    """Trains, evaluates every kept checkpoint on dev (keeping the best), predicts the
    test split and exports; returns the best dev results."""
    settings = common.complete_model_files(settings)
    task = task_class(settings)
    common.check_run(settings)
    task.validate()
    files = task.data_files()
    if task.has_labels:
        common.check_labels_known(settings)
    context, tokenizer = common.start(settings)
    strategy, output_dir = context.strategy, context.output_dir
    task.tokenizer = tokenizer
    data = read_splits(task, settings, files, output_dir)
    cache_dir = settings["cached_dir"] or output_dir
    converted = {split: convert(task, split, data[split], files[split], cache_dir)
                 for split in files}
    paths = {split: c.path for split, c in converted.items()}
    steps, warmup = train_steps(settings, converted["train"].num_examples
                                if "train" in converted else None)

    with strategy.scope():
        model = task.build_model(context.config)
        optimizer = common.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=steps,
            num_warmup_steps=warmup, optimizer=settings["optimizer"],
            precision=settings["precision"])
    common.initialize_from(model, settings["init_checkpoint"], output_dir)
    trainer = common.make_trainer(settings, strategy, model, optimizer, task.objective(),
                                  output_dir, steps)
    reader = _Records(task, data.get("dev"))
    if "train" in paths:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        common.train(trainer, lambda skip: reader.dataset(
            paths["train"], settings, micro_batch, True, drop_remainder=True).skip(skip))
    best = {}
    if "dev" in paths:
        best = common.evaluate_checkpoints(reader, trainer, settings, paths["dev"], output_dir)
        if distribute.is_chief(strategy):
            task.evaluated(best, output_dir)
    if "test" in paths or common.exporting(settings):
        common.load_best_or_latest(trainer, output_dir)
        task.prepare_model(trainer.model, output_dir)
    if "test" in paths:
        dataset = reader.dataset(paths["test"], settings, settings["predict_batch_size"],
                                 False)
        outputs = predict(strategy, trainer.model, dataset, list(task.eval_outputs),
                          list(task.label_features))
        if distribute.is_chief(strategy):
            written = task.write_predictions(data["test"], outputs, output_dir, trainer.step)
            if written:
                logging.info("predictions: %s", written)
    common.export_if_asked(settings, strategy, trainer.model, task.serving_kind,
                           labels=task.labels, **task.export_options())
    return best
