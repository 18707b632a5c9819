"""The fine-tuning driver: train, evaluate, predict and export any `albert_tf.tasks.Task`.

    best = driver.run(MultiLabelTask, settings)

The steps, each the same for every task: the model files the `--init_checkpoint`
brings; the task's checks and every split's files, before any work; the strategy,
seeds and tokenizer (`session.start`); the labels (`--labels`, a model's labels.txt, or
the training split's) and every split read; each split's records converted once and
cached beside their settings; the model and optimizer; training with checkpoints and
exact resume; every kept checkpoint evaluated on dev, the best kept as
`model.ckpt-best`; the test split predicted with the best; the exports asked for
(`--export_dir`, `--export_tflite`, `--export_hf_dir`).
"""

from __future__ import annotations

from absl import logging

from albert_tf.apps import common, session
from albert_tf.training import distribute
from albert_tf.training.loop import predict


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


def run(task_class, settings: dict) -> dict:
    """Trains, evaluates every kept checkpoint on dev (keeping the best), predicts the
    test split and exports; returns the best dev results."""
    settings = common.complete_model_files(settings)
    task = task_class(settings)
    session.check_recompute(settings)
    task.validate()
    session.check_exports(settings, task.serving_kind)
    files = task.data_files()
    if task.has_labels:
        common.check_labels_known(settings)
    context, tokenizer = session.start(settings)
    strategy, output_dir = context.strategy, context.output_dir
    task.tokenizer = tokenizer
    data = read_splits(task, settings, files, output_dir)
    cache_dir = settings.get("cached_dir") or output_dir
    converted = {split: task.cached_records(split, data[split], files[split], cache_dir)
                 for split in files}
    paths = {split: c.path for split, c in converted.items()}
    steps, warmup = task.train_steps(converted["train"].num_examples
                                     if "train" in converted else None)

    with strategy.scope():
        model = task.build_model(context.config)
        optimizer = session.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=steps,
            num_warmup_steps=warmup, optimizer=settings["optimizer"],
            precision=settings["precision"])
    session.initialize_from(model, settings["init_checkpoint"], output_dir)
    trainer = session.make_trainer(settings, strategy, model, optimizer, task.objective(),
                                   output_dir, steps)
    if "train" in paths:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        session.train(trainer, lambda skip: task.dataset(
            paths["train"], micro_batch, True, drop_remainder=True).skip(skip))
    best = {}
    if "dev" in paths:
        best = session.evaluate_checkpoints(task, data["dev"], trainer, settings,
                                            paths["dev"], output_dir)
        if distribute.is_chief(strategy):
            task.evaluated(best, output_dir)
    if "test" in paths or session.exporting(settings):
        session.load_best_or_latest(trainer, output_dir)
        task.prepare_model(trainer.model, output_dir)
    if "test" in paths:
        dataset = task.dataset(paths["test"], settings["predict_batch_size"], False)
        outputs = predict(strategy, trainer.model, dataset,
                          list(task.predict_outputs or task.eval_outputs),
                          list(task.label_features))
        if distribute.is_chief(strategy):
            written = task.write_predictions(data["test"], outputs, output_dir, trainer.step)
            if written:
                logging.info("predictions: %s", written)
    session.export_if_asked(settings, strategy, trainer.model, task.serving_kind,
                            labels=task.labels, **task.export_options())
    return best or task.results
