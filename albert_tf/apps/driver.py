"""The fine-tuning driver: train, evaluate, predict and export any `albert_tf.tasks.Task`.

    best = driver.run(MultiLabelTask, options)     # or driver.run("mrpc", options)

`run` is a pipeline of stages, each the same for every task, each a function here:
`read` (the model files the --init_checkpoint brings; the task's checks, every split's
files and the config; the tokenizer, the labels (--labels, a model's labels.txt, or the
training split's) and every split read, each row whole or skipped, checked against
--max_skipped_rows and summed up once (`albert_tf.data.report`); the run's extensions
and their options: all before anything is written), then the strategy, seeds and
output directory (`session.setup`); `build` (the model, started from its weights and by
the extensions, and the task's metric checked on the first dev batch); `convert`
(labels.txt, each split's records converted once and cached beside what made them,
what --max_seq_length cut of each split's texts, data_report.json); `train` (the
optimizer, the objective and the training records as the extensions make them,
checkpoints and exact resume); `evaluate` (every kept checkpoint
on dev, the best by the task's metric and `metric_goal` kept as `model.ckpt-best`);
`predict_test` (the test split, with the best); `export` (--export_dir,
--export_tflite, --export_hf_dir). A run stopped before training removes the output
directory it created and leaves one it did not create as it was.

Distillation and LoRA are extensions (`albert_tf.apps.extension`), not branches of the
stages: each is made for a run that asks for it and wraps the model, the training
records and the objective at the stages' hooks.

`keras_data` takes the same steps up to the records, for Keras' own `fit`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
from typing import Mapping

import numpy as np
import tensorflow as tf
from absl import flags, logging

from albert_tf import names, tasks
from albert_tf.apps import distill, session
from albert_tf.apps.extension import LoRA
from albert_tf.apps.labels import check_labels_known, resolve_labels, save_labels
from albert_tf.apps.model_files import save_model_files
from albert_tf.apps.options import OptionsError, define_flags, from_flags
from albert_tf.checkpoints import release
from albert_tf.data.report import DataReport, SkipLimit
from albert_tf.errors import UsageError
from albert_tf.tasks.base import Task
from albert_tf.tasks.options import FineTuningOptions, TaskOptions
from albert_tf.training import distribute
from albert_tf.training.loop import predict


def define_task_flags(task_classes, what: str, helps=None, omit=()) -> None:
    """Defines a run script's flags: `--task_module`, and the options of `task_classes`
    (the tasks it runs; `what`: what it calls them) and of the --task_module's task
    named among the command-line arguments (loaded now, before absl parses them), each
    default its task's: a flag whose default differs between them names each task's in
    its help (`omit`: the built-in tasks' options that are no flags of the script). A
    module that cannot be loaded, or whose options clash with the script's flags, stops
    the program with one line, `error: <why>`."""
    define_flags(FineTuningOptions, only=[tasks.TASK_MODULE_FLAG], helps={
        tasks.TASK_MODULE_FLAG: FineTuningOptions.help_of(tasks.TASK_MODULE_FLAG) +
        f" Trained, evaluated, predicted and exported as {what}."})
    own = tasks.load_task_module_in(sys.argv[1:])
    classes = tuple(task_classes) + ((own,) if own and own not in task_classes else ())
    try:
        define_flags(*(task.Options for task in classes), omit=omit, helps=helps,
                     labels={task.Options: task.name for task in classes})
        if own is not None:
            define_flags(own.Options)
    except OptionsError as e:
        if own is None:
            raise
        raise SystemExit(f"error: --{tasks.TASK_MODULE_FLAG}: {e}") from None


def task_name_help() -> str:
    """`--task_name`'s help, from the registry: every fine-tuning task and the names it
    answers."""
    listed = []
    for task in tasks.fine_tuning():
        others = [n for n in tasks.task_names(task) if n.lower() != task.name.lower()]
        listed.append(task.name + (f" ({', '.join(others)})" if others else ""))
    return ("The task: one of the registered tasks, or a data set one of them runs: "
            f"{'; '.join(listed)}; or the name of a --task_module's task.")


def task_of(options, default=None):
    """The task of a run (`options`: a mapping, or a task's options): the task whose
    `Options` they are; else `--task_module`'s; else `default` (the script's one task);
    else the registered fine-tuning task that `--task_name` names (`tasks.find`). A
    --task_name given beside must be one the task answers."""
    def value(name):
        return options.get(name) if isinstance(options, Mapping) else \
            getattr(options, name, None)

    name = value("task_name")
    module = value(tasks.TASK_MODULE_FLAG)
    task = None if isinstance(options, Mapping) else tasks.owning(options)
    if task is None and module:
        task = tasks.load_task_module(module)
    if task is not None:
        if name and not tasks.answers(task, name):
            where = (f"--task_module={module} is" if module else
                     f"the options ({type(options).__qualname__}) are those of")
            raise UsageError(f"--task_name={name}, but {where} the task {task.name!r}")
        return task
    if default is not None:
        if name and not tasks.answers(default, name):
            raise UsageError(f"--task_name={name}: this script runs "
                             f"{', '.join(tasks.task_names(default))}, or give "
                             "--task_module")
        return default
    if not name:
        raise UsageError("--task_name is required (or --task_module)")
    task = tasks.find(name)
    if task is None or task not in tasks.fine_tuning():
        known = dict.fromkeys(n for task in tasks.fine_tuning() for n in tasks.task_names(task))
        raise UsageError(f"--task_name={name}: no such task here; expected one of "
                         f"{', '.join(known)}, or give --task_module")
    return task


def options_from_flags(default=None):
    """The run's options from the flags given: those of its task (`task_of`), filled
    by `albert_tf.apps.options.from_flags` (a flag given that the task has no option
    for is an error)."""
    given = {name: flags.FLAGS[name].value for name in ("task_name", tasks.TASK_MODULE_FLAG)
             if name in flags.FLAGS}
    task = task_of(given, default)
    return from_flags(task.Options, f"the task {task.name!r}")


def skip_limit(options) -> SkipLimit:
    """`--max_skipped_rows`, checked before any work."""
    try:
        return SkipLimit.parse(options.max_skipped_rows)
    except ValueError as e:
        raise UsageError(str(e)) from None


class SplitData(Mapping):
    """The run's data as it is read: split -> what `Task.read` returned, each split
    read once (inside `report.reading(split)`), when first looked at, by the task
    `reader` at that moment; in the files' order."""

    def __init__(self, files, report: DataReport):
        self.files, self.report = files, report
        self.reader = None
        self.read = {}

    def __getitem__(self, split):
        if split not in self.read:
            if split not in self.files:
                raise KeyError(split)
            with self.report.reading(split):
                self.read[split] = self.reader.read(split, self.files[split])
            if isinstance(self.read[split], list):
                self.report.examples[split] = len(self.read[split])
        return self.read[split]

    def __iter__(self):
        return iter(self.files)

    def __len__(self):
        return len(self.files)


def made_task(task_class, options, tokenizer, files, report: DataReport):
    """(the run's task, its options, every split's data): the task made whole, with
    what the run derives from its data in its options (`--labels`, else a model's
    labels.txt, else the task's `discover_labels` of the training split; then
    `Data.derived_options`). A split read before the task is made is read by a task
    of the options known then, and not again. Nothing is written."""
    data = SplitData(files, report)
    data.reader = task_class(options, tokenizer)
    if data.reader.data.has_labels:
        if not isinstance(options, TaskOptions):
            from albert_tf.tasks import TaskModuleError

            raise TaskModuleError(f"{task_class.__name__} has labels, but its Options "
                                  "no --labels: derive them from Task.Options")
        labels = resolve_labels(options, options.output_dir,
                                lambda: data.reader.data.discover_labels(data["train"]))
        options = options.replace(labels=tuple(labels))
        data.reader = task_class(options, tokenizer)
    derived = data.reader.data.derived_options(data)
    if derived:  # (else the reader is the run's task already)
        options = options.replace(**derived)
        data.reader = task_class(options, tokenizer)
    return data.reader, options, {split: data[split] for split in files}


def check_data(task, report: DataReport) -> None:
    """The summary of what was read, printed once; each split within the skip limit;
    the labels of the rows kept, the model's (labels.txt)."""
    logging.info("%s", report.summary())
    report.check()
    if task.data.has_labels:
        for split in report.splits:
            report.check_labels(split, task.labels)


def check_metric(task, dev, model, strategy, options) -> None:
    """The task's `metric` among what its `metrics` returns, on the first dev batch
    (`task.data.head`), before training: a task whose promise does not hold stops here,
    not after training and evaluating."""
    from albert_tf.tasks import TaskModuleError

    count = options.eval_batch_size
    head = task.data.head("dev", dev, count)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dev_head.tf_record")
        task.data.write_records("dev", head, path)
        dataset = task.data.dataset(path, count, False)
        outputs = predict(strategy, model, dataset, list(task.data.eval_outputs),
                          task.data.fetched_features(dataset))
    results = task.metrics(head, task.data.example_outputs(outputs))
    if task.metric not in results:
        raise TaskModuleError(
            f"{type(task).__name__}.metric is {task.metric!r}, which its metrics() does "
            f"not return (it returns {', '.join(map(repr, sorted(results))) or 'nothing'}"
            f"; checked on the first {count} dev examples before training)")


def resolve_task(task, options):
    """The task class of `run(task, options)` and `keras_data(task, options)`."""
    if task is None:
        return task_of(options)
    if isinstance(task, str):
        found = tasks.find(task)
        if found is None:
            raise UsageError(f"no registered task answers {task!r}; expected one of "
                             f"{', '.join(tasks.registered())}")
        return found
    return task


def read_task(task_class, options):
    """(task, options, config, files, report, data): the task and its options checked,
    the config read, the tokenizer made, the labels known and every split read and
    checked against --max_skipped_rows, before anything is written (what `run` and
    `keras_data` start with)."""
    checked, options = session.checked_task(task_class, options)
    files = checked.data.data_files()
    if checked.data.has_labels:
        check_labels_known(options)
    config = session.check_setup(options)
    report = DataReport(skip_limit(options))
    task, options, data = made_task(task_class, options, session.tokenizer(options),
                                    files, report)
    check_data(task, report)
    return task, options, config, files, report, data


# The extensions of every run, in the order their hooks are called: LoRA's adapters go
# on the loaded base (a distilled student's, once started from its teacher).
EXTENSIONS = (distill.Distillation, LoRA)


@dataclasses.dataclass
class Run:
    """One fine-tuning run as its stages make it (`run`)."""

    task: Task
    options: FineTuningOptions
    config: object        # the model's AlbertConfig
    files: dict           # split -> its files
    report: DataReport    # what was read and skipped
    data: dict            # split -> what the task read
    extensions: list = dataclasses.field(default_factory=list)
    context: session.RunContext | None = None   # strategy and output directory
    model: object = None
    records: dict = dataclasses.field(default_factory=dict)  # split -> CachedRecords
    trainer: object = None

    @property
    def strategy(self):
        return self.context.strategy

    @property
    def output_dir(self) -> str:
        return self.context.output_dir

    @property
    def cache_dir(self) -> str:
        return self.options.cached_dir or self.output_dir


def run(task, options) -> dict:
    """Trains, evaluates every kept checkpoint on dev (keeping the best), predicts the
    test split and exports; returns the best dev results. `task`: a registered task (its
    class, or a name it answers: `"mrpc"`, a task file's task's name), or None for the
    one `options` name (their class's task, --task_module's or --task_name's:
    `task_of`). `options`: the task's `Options`, or a mapping that makes them."""
    with logged_as_a_script():
        state = read(task, options)       # every split read and checked; nothing written
        state.context = session.setup(state.options)
        with session.removed_if_stopped(state.context):
            build(state)                  # the model started; the metric checked
        convert(state)                    # from here on the run writes
        train(state)
        best = evaluate(state)
        scored = predict_test(state, best)
        export(state)
    return best or scored


@contextlib.contextmanager
def logged_as_a_script():
    """A run called from Python logs what a script's does (absl at INFO: what was read
    and skipped, training's progress, the results), unless absl's flags are parsed (a
    script, whose --verbosity says); the verbosity is put back after."""
    if flags.FLAGS.is_parsed():
        yield
        return
    previous = logging.get_verbosity()
    logging.set_verbosity(logging.INFO)
    try:
        yield
    finally:
        logging.set_verbosity(previous)


def read(task, options) -> Run:
    """The read stage: the task, its options, every split read and checked
    (`read_task`), and the run's extensions with their options checked, before any
    work."""
    state = Run(*read_task(resolve_task(task, options), options))
    state.extensions = [e for e in (ext.for_run(state) for ext in EXTENSIONS) if e]
    return state


def build(state: Run) -> None:
    """The build stage: the task's model under the run's strategy, started from
    --init_checkpoint (or a checkpoint of the run to resume), then by each extension;
    the task's metric checked on the first dev batch."""
    session.check_batch_sizes(state.options, state.strategy)
    with state.strategy.scope():
        state.model = state.task.build_model(state.context.config)
    session.initialize_from(state.model, state.context)
    for extension in state.extensions:
        extension.started(state, state.model)
    if "dev" in state.data:
        check_metric(state.task, state.data["dev"], state.model, state.strategy,
                     state.options)


def convert(state: Run) -> None:
    """The data and the task known good: labels.txt and the model files written, each
    split's records converted once (cached; `convert_records`), and data_report.json
    written."""
    task, options, output_dir = state.task, state.options, state.output_dir
    if task.data.has_labels:
        save_labels(options, output_dir, task.labels)
    if distribute.is_chief(state.strategy):
        save_model_files(options, output_dir, state.context.config)
    state.records = convert_records(task, state.data, state.files, state.cache_dir,
                                    state.report)
    if distribute.is_chief(state.strategy):
        logging.info("what was read: %s", state.report.write(output_dir))


def convert_records(task, data, files, cache_dir, report: DataReport, splits=None
                    ) -> dict:
    """Each split's records (of `splits`, by default every split of `files`) converted
    once and cached under `cache_dir`, as `albert_tf.data.cache.CachedRecords` by split;
    what --max_seq_length cut of each split's texts (counted as its records were
    written, kept with them) added to `report`, printed, and warned of where it is
    more than a few percent of a split (`DataReport.check_truncation`). Where the
    records make more of a split for its metrics and predictions (`CachedRecords.data`:
    SQuAD's features), `data` holds that from here on."""
    converted = {split: task.data.cached_records(split, data[split], files[split],
                                                 cache_dir)
                 for split in (files if splits is None else splits)}
    for split, records in converted.items():
        if records.truncated is not None:
            report.truncated[split] = records.truncated
        if records.data is not None:
            data[split] = records.data
    report.check_truncation()
    return converted


def train(state: Run) -> None:
    """The train stage: the optimizer over the run's steps, the objective and the
    training records as the extensions make them, training with checkpoints and exact
    resume (no training split: the trainer alone, to evaluate and predict)."""
    task, options = state.task, state.options
    training = state.records.get("train")
    steps, warmup = task.data.train_steps(training.num_examples if training else None)
    with state.strategy.scope():
        optimizer = session.make_optimizer(
            learning_rate=options.learning_rate, num_train_steps=steps,
            num_warmup_steps=warmup, optimizer=options.optimizer,
            precision=options.precision)
    objective, path, extra_spec = task.objective(), None, None
    if training is not None:
        path = training.path
        for extension in state.extensions:
            changed = extension.train_records(state, training)
            if changed is not None:
                path, more = changed
                extra_spec = {**(extra_spec or {}), **(more or {})} or None
        for extension in state.extensions:
            objective = extension.objective(state, objective)
    state.trainer = session.make_trainer(options, state.strategy, state.model, optimizer,
                                         objective, state.output_dir, steps)
    if training is None:
        return
    micro_batch = options.train_batch_size // options.gradient_accumulation_steps
    # (a task that distils takes the teacher's outputs' spec; the others' `dataset` need
    # not know the argument)
    teaching = {"extra_spec": extra_spec} if extra_spec else {}
    session.train(state.trainer, lambda skip: task.data.dataset(
        path, micro_batch, True, drop_remainder=True, **teaching).skip(skip))
    for extension in state.extensions:
        extension.trained(state, state.model)


def evaluate(state: Run) -> dict:
    """Every kept checkpoint evaluated on dev, the best kept as `model.ckpt-best`;
    returns its results ({} without a dev split)."""
    if "dev" not in state.records:
        return {}
    best = session.evaluate_checkpoints(state.task, state.data["dev"], state.trainer,
                                        state.options, state.records["dev"].path,
                                        state.output_dir)
    return best


def predict_test(state: Run, best: dict) -> dict:
    """The best model (else the latest) made ready (`Task.prepare_model`, with the dev
    results that picked it) for the test split and the exports; the test split's
    predictions written. Returns what the task scored on the test split ({} where it
    scored nothing)."""
    task, trainer = state.task, state.trainer
    if "test" in state.records or session.exporting(state.options):
        session.load_best_or_latest(trainer, state.output_dir)
        task.prepare_model(trainer.model, state.output_dir, best)
    elif best:  # (nothing predicts or is exported: no model is loaded for it)
        task.prepare_model(None, state.output_dir, best)
    if "test" not in state.records:
        return {}
    dataset = task.data.dataset(state.records["test"].path,
                                state.options.predict_batch_size, False)
    outputs = predict(state.strategy, trainer.model, dataset,
                      list(task.data.predict_outputs or task.data.eval_outputs),
                      task.data.fetched_features(dataset))
    if not distribute.is_chief(state.strategy):
        return {}
    written = task.write_predictions(state.data["test"], task.data.example_outputs(outputs),
                                     state.output_dir, trainer.step)
    if isinstance(written, Mapping):
        return dict(written)
    if written:
        logging.info("predictions: %s", written)
    return {}


def export(state: Run) -> None:
    """The exports asked for (--export_dir, --export_tflite, --export_hf_dir)."""
    task = state.task
    session.export_if_asked(state.options, state.strategy, state.trainer.model,
                            task.serving_kind, labels=task.labels, **task.export_options())


@dataclasses.dataclass
class KerasData:
    """A task's splits for Keras' own `fit`, `evaluate` and `predict` (`keras_data`)."""

    task: object       # the task: its labels known, `build_model`, `objective()`
    options: object    # the run's options, complete
    config: object     # the model's AlbertConfig
    datasets: dict     # split -> tf.data.Dataset of (model inputs, record features)
    num_examples: dict  # split -> its examples
    train_steps: int | None   # the run's training steps (None without a train split)
    warmup_steps: int | None

    def build_model(self):
        """The task's model, as the scripts build it (seeded with --seed), loaded from
        --init_checkpoint where given (any layout), with --lora_rank's adapters."""
        model = self.task.build_model(self.config)
        if self.options.init_files is not None:
            release.load_checkpoint(model, self.options.init_files)
        if self.options.lora_rank:
            model.enable_lora(self.options.lora_rank, ffn=self.options.lora_ffn)
        return model

    def optimizer(self):
        """The run's optimizer, as the scripts make it (`--optimizer`, `--learning_rate`,
        warmup and polynomial decay over `train_steps`, clipping, the no-decay
        variables)."""
        return session.make_optimizer(
            learning_rate=self.options.learning_rate, num_train_steps=self.train_steps,
            num_warmup_steps=self.warmup_steps, optimizer=self.options.optimizer,
            precision=self.options.precision)

    def example_outputs(self, split: str, outputs) -> dict:
        """`model.predict(self.datasets[split])`'s outputs (a dict of NumPy arrays, a
        row per record of the split, in order) as the scripts score and write them, a
        row per example: beside the record features the task reads (its
        `fetched_features`: the labels, and with --long_text=windows each window's
        `example_index`), pooled by the task's `example_outputs` (the windows of a long
        text: one row, their logits' mean, as `run` evaluates; a task of a record per
        example: as they are). Not for the training split, which is shuffled and
        repeated."""
        if split == "train" or split not in self.datasets:
            raise UsageError(f"example_outputs reads a split of records in order "
                             f"({', '.join(s for s in self.datasets if s != 'train')}), "
                             f"not {split!r}")
        features = self.datasets[split].map(lambda inputs, record: record)
        wanted = self.task.data.fetched_features(features)
        fetched = {name: [] for name in wanted}
        for batch in features.as_numpy_iterator():
            for name in wanted:
                fetched[name].append(batch[name])
        rows = {name: np.asarray(value) for name, value in outputs.items()}
        rows.update({name: np.concatenate(parts) if parts else np.zeros(0)
                     for name, parts in fetched.items()})
        counts = {name: len(value) for name, value in rows.items()}
        if len(set(counts.values())) > 1:
            raise UsageError(f"the outputs and the {split} records differ in rows: "
                             f"{counts}; predict on datasets[{split!r}], all of it")
        return dict(self.task.data.example_outputs(rows))


def keras_data(task, options, splits=("train", "dev")) -> KerasData:
    """The task's `splits` (those of them it has files for) read, checked and converted
    to records (cached in --cached_dir, else --output_dir) as `run` does, as batches for
    Keras: (model inputs, the batch's record features, labels among them). Each batch
    is padded to its own longest sequence; the training split is shuffled with the
    run's seed, repeated and cut to whole batches of --train_batch_size, exactly the
    batches `run` trains on; the others are batched by --eval_batch_size
    (--predict_batch_size for test), in order, once: it sets the process's global seed
    and precision as the scripts do (`session.seed_and_precision`), which the shuffle
    reads. Each new iterator of the training split is a new shuffle, as a new epoch is:
    the first is the run's (fit's, unless the split was iterated before). Pair them with
    `model.compile(optimizer=data.optimizer(), loss=data.task.objective())`.

    A batch is of records: with --long_text=windows, of a long text's windows, each
    with its text's label (and its `example_index`), so the training split trains on
    each window as `run` does, and `num_examples` and `train_steps` count windows, as
    --num_train_epochs does; `predict` on dev answers a row per window, which
    `KerasData.example_outputs` pools into a row per text, as `run` evaluates."""
    with logged_as_a_script():
        task, options, config, files, report, data = read_task(
            resolve_task(task, options), options)
    session.seed_and_precision(options)  # as the scripts: the same order of batches
    cache_dir = options.cached_dir or options.output_dir
    converted = convert_records(task, data, files, cache_dir, report,
                                [split for split in splits if split in files])
    steps, warmup = task.data.train_steps(converted["train"].num_examples
                                     if "train" in converted else None)
    inputs = task.serving_kind.input_names

    def for_keras(features):
        model_inputs = names.to_model_inputs(features)
        return {name: model_inputs[name] for name in inputs}, features

    sizes = {"train": options.train_batch_size, "dev": options.eval_batch_size,
             "test": options.predict_batch_size}
    datasets = {split: task.data.dataset(c.path, sizes[split], split == "train",
                                    drop_remainder=split == "train").map(
                    for_keras, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                for split, c in converted.items()}
    return KerasData(task, options, config, datasets,
                     {split: c.num_examples for split, c in converted.items()},
                     steps if "train" in converted else None,
                     warmup if "train" in converted else None)
