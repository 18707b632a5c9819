"""`run_classifier.py`: GLUE tasks and RACE as the original; multiple choice on C3, SWAG
or JSON lines; classification and regression from your own CSV / TSV / JSONL files.
Train / eval / predict."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np
import tensorflow as tf
from absl import flags, logging

from albert_tf import losses, packing, tasks
from albert_tf.apps import common, driver
from albert_tf.data import cache, glue, multiple_choice, race, tabular
from albert_tf.evaluation import glue_metrics
from albert_tf.fileio import write_text_atomically
from albert_tf.modeling import AlbertClassifier, AlbertMultipleChoice
from albert_tf.training import distribute
from albert_tf.training.loop import predict
from albert_tf.training.objectives import MeanObjective

RACE = "race"
CHOICE_TASKS = ("c3", "swag", "multiple_choice")  # besides RACE
FILE_TASKS = ("classification", "regression")     # CSV / TSV / JSONL
CACHE_FORMAT = 1  # of the records of CHOICE_TASKS and FILE_TASKS


def define_flags():
    common.define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("data_dir", None,
                        "The GLUE root (the task adds its folder, e.g. MRPC/), the folder "
                        "holding RACE/, C3's c3-{d,m}-*.json, SWAG's {train,val,test}.csv, "
                        "or {train,dev,test}.jsonl / .csv / .tsv of your own task.")
    flags.DEFINE_string("task_name", None,
                        "A GLUE task (cola, mnli, mismnli, mrpc, rte, sst-2, sts-b, qqp, "
                        "qnli, wnli, ax), race, c3, swag, multiple_choice (JSON lines "
                        "{id, context, question, choices, label}), or classification / "
                        "regression (your CSV, TSV or JSONL files; see --text_a_field), "
                        "multi_label (the same files, several labels per row; see "
                        "--label_separator), or the name of a --task_module's task.")
    flags.DEFINE_string("train_file", None,
                        "c3 / swag / multiple_choice / classification / regression: the "
                        "training file (comma-separated for several), instead of "
                        "--data_dir's.")
    flags.DEFINE_string("dev_file", None, "As --train_file, for --do_eval.")
    flags.DEFINE_string("test_file", None, "As --train_file, for --do_predict.")
    flags.DEFINE_string("text_a_field", None,
                        "classification / regression: the text's column name (CSV/TSV "
                        "header, JSON key) or 0-based index.")
    flags.DEFINE_string("text_b_field", None, "The second text's field, for pairs.")
    flags.DEFINE_string("label_field", "label", "The label's field.")
    flags.DEFINE_list("labels", None,
                      "classification: the labels, comma-separated (default: those of the "
                      "training file, sorted, saved as labels.txt in --output_dir).")
    flags.DEFINE_bool("header", True,
                      "CSV / TSV files start with a header row (else fields are indices).")
    flags.DEFINE_string("cached_dir", None,
                        "Where converted TFRecords are cached (default: output_dir).")
    flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
    flags.DEFINE_integer("max_qa_length", None, "Multiple choice: maximum question + "
                         f"option length (default: RACE's {race.DEFAULT_MAX_QA_LENGTH}, or "
                         "what --max_seq_length leaves after [CLS] and 2 x [SEP]).")
    flags.DEFINE_bool("high_only", False, "RACE: only the high-school part.")
    flags.DEFINE_bool("middle_only", False, "RACE: only the middle-school part.")
    flags.DEFINE_bool("do_predict", False, "Predict the test set.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
    flags.DEFINE_integer("train_step", 1000, "Training steps.")
    flags.DEFINE_integer("warmup_step", 0, "Warmup steps.")
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the classifier head.")
    flags.DEFINE_string(tasks.TASK_MODULE_FLAG, None,
                        "A task of your own: a Python file (or module) whose TASK is an "
                        "albert_tf.tasks.Task subclass; its flags are added to these. "
                        "Trained, evaluated, predicted and exported as the built-in tasks.")
    for name in tasks.BUILTIN:
        tasks.builtin(name).define_flags()
    given = tasks.task_module_in(sys.argv[1:])
    if given:
        tasks.load_task_module(given)


# The flags passed to `run`: the model flags, those `define_flags` adds, those of the
# built-in task modules and those of a --task_module file.
FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames(
    __name__, *tasks.BUILTIN.values(), tasks.loaded_modules)


@dataclasses.dataclass
class Task:
    """What differs between the tasks. `kind`: "glue", "race", "choice" (C3, SWAG,
    JSON lines) or "file" (classification / regression from CSV, TSV, JSONL).
    `glue_task` describes GLUE tasks and file tasks (records, metrics); `examples`
    holds the examples read of choice and file tasks, by split."""

    name: str
    glue_task: glue.GlueTask | None
    kind: str = "glue"
    num_choices: int = race.NUM_CHOICES
    files: dict = dataclasses.field(default_factory=dict)     # split -> [paths]
    examples: dict = dataclasses.field(default_factory=dict)  # split -> examples

    @property
    def is_race(self) -> bool:
        return self.kind == "race"

    @property
    def is_choice(self) -> bool:
        return self.kind in ("race", "choice")

    @property
    def is_regression(self) -> bool:
        return self.glue_task is not None and self.glue_task.is_regression

    # -- reading
    def read(self, settings, tokenizer, splits, output_dir) -> None:
        """The examples of choice and file tasks (their labels and choice count)."""
        if self.kind == "choice":
            for split in splits:
                self.examples[split] = self._read_choices(split, tokenizer)
            self.num_choices = max(len(e.endings) for examples in self.examples.values()
                                   for e in examples)
            if self.name in ("c3", "swag"):
                self.num_choices = max(self.num_choices, race.NUM_CHOICES)
        elif self.kind == "file":
            fields = tabular.Fields(settings["text_a_field"], settings["text_b_field"],
                                    settings["label_field"])
            regression = self.name == "regression"

            def read(split, labels):
                return tabular.read_examples(
                    self.files[split][0], fields, split=split, labels=labels,
                    regression=regression, header=settings["header"],
                    process_text=tokenizer.preprocess)

            if "train" in splits:
                self.examples["train"] = read("train", settings["labels"])
            labels = None
            if not regression:
                labels = common.resolve_labels(
                    settings, output_dir, lambda: tabular.labels_of(self.examples["train"]))
            for split in splits:
                if split not in self.examples:
                    self.examples[split] = read(split, labels)
            self.glue_task = tabular.file_task(self.name, labels, regression=regression,
                                               is_pair=fields.text_b is not None)

    def _read_choices(self, split, tokenizer):
        paths = self.files[split]
        process = tokenizer.preprocess
        if self.name == "c3":
            return multiple_choice.read_c3(paths, process)
        read = multiple_choice.read_swag if self.name == "swag" else \
            multiple_choice.read_choice_jsonl
        return [e for path in paths for e in read(path, process)]

    # -- records
    def records(self, split, settings, tokenizer) -> str:
        cache_dir = settings["cached_dir"] or settings["output_dir"]
        if self.is_race:
            return race.cached_race_records(
                split, settings["data_dir"], cache_dir, tokenizer, settings["max_seq_length"],
                settings["max_qa_length"], high_only=settings["high_only"],
                middle_only=settings["middle_only"]).path
        if self.kind == "glue":
            return glue.cached_glue_records(self.glue_task, split, settings["data_dir"],
                                            cache_dir, tokenizer,
                                            settings["max_seq_length"]).path
        paths = self.files[split]
        info = {"format": CACHE_FORMAT, "task": self.name, "split": split,
                "sources": [cache.abspath_or_url(p) for p in paths],
                "sources_sha256": [cache.file_sha256(p) for p in paths],
                "max_seq_length": int(settings["max_seq_length"]),
                **cache.tokenizer_settings(tokenizer)}
        if self.is_choice:
            info.update(max_qa_length=int(settings["max_qa_length"]),
                        num_choices=self.num_choices)
        else:
            info.update(labels=list(self.glue_task.labels),
                        fields=[settings[f] for f in ("text_a_field", "text_b_field",
                                                      "label_field")],
                        header=settings["header"])

        def convert(path):
            examples = self.examples[split]
            if self.is_choice:
                count = race.write_examples(examples, settings["max_seq_length"],
                                            settings["max_qa_length"], tokenizer, path,
                                            self.num_choices)
            else:
                count = glue.write_examples(examples, self.glue_task,
                                            settings["max_seq_length"], tokenizer, path)
            return count, 0

        suffix = glue.CACHE_SUFFIX[split]
        return cache.cached_conversion(
            os.path.join(cache_dir, f"{self.name}_{suffix}.tf_record"), info, convert).path

    def dataset(self, path, settings, batch_size, training, drop_remainder=False):
        if self.is_choice:
            return race.race_dataset(path, settings["max_seq_length"], batch_size,
                                     training=training, seed=settings["seed"],
                                     drop_remainder=drop_remainder,
                                     num_choices=self.num_choices)
        return glue.glue_dataset(path, self.glue_task, settings["max_seq_length"],
                                 batch_size, training=training, seed=settings["seed"],
                                 drop_remainder=drop_remainder)

    # -- model and scores
    def model(self, config, settings):
        if self.is_choice:
            return AlbertMultipleChoice(config, num_choices=self.num_choices,
                                        seed=settings["seed"],
                                        dropout_rate=settings["dropout_prob"])
        return AlbertClassifier(config, self.glue_task.num_labels, seed=settings["seed"],
                                dropout_rate=settings["dropout_prob"])

    def objective(self):
        if self.is_regression:
            return MeanObjective(lambda o, f: losses.regression_loss(
                o["predictions"], f["label_ids"], per_example=True))
        return MeanObjective(lambda o, f: losses.classification_loss(
            o["logits"], f["label_ids"], per_example=True))

    def metrics(self, outputs) -> dict:
        predictions, labels = outputs["predictions"], outputs["label_ids"]
        if self.is_choice:
            return {"eval_accuracy": float(np.mean(predictions == labels))}
        return glue_metrics.task_metrics(self.glue_task, predictions, labels)

    @property
    def metric(self) -> str:
        return "eval_accuracy" if self.is_choice else self.glue_task.metric


def get_task(name) -> Task:
    if not name:
        raise common.UsageError("--task_name is required")
    key = name.lower()
    if key == RACE:
        return Task(RACE, None, "race")
    if key in CHOICE_TASKS:
        return Task(key, None, "choice")
    if key in FILE_TASKS:
        return Task(key, None, "file")
    try:
        task = glue.get_task(name)
    except (KeyError, ValueError) as e:
        raise common.UsageError(
            f"{e}; or race, {', '.join(CHOICE_TASKS)}, {', '.join(FILE_TASKS)}") from None
    return Task(task.name, task)


def data_files(task: Task, settings, splits) -> dict[str, list[str]]:
    """The files of each split of a choice or file task: --<split>_file, else the
    task's names under --data_dir."""
    files = {}
    for split in splits:
        given = settings[f"{split}_file"]
        if given:
            paths = [p for p in given.split(",") if p]
        elif not settings["data_dir"]:
            raise common.UsageError(f"give --{split}_file or --data_dir for {task.name}")
        elif task.name == "c3":
            paths = multiple_choice.c3_files(settings["data_dir"], split)
        elif task.name == "swag":
            paths = [os.path.join(settings["data_dir"], multiple_choice.SWAG_FILES[split])]
        elif task.name == "multiple_choice":
            paths = [os.path.join(settings["data_dir"], multiple_choice.JSONL_FILES[split])]
        else:
            paths = [tabular.split_file(settings["data_dir"], split)]
        for path in paths:
            common.check_file(path, f"{split}_file")
        if task.kind == "file" and len(paths) != 1:
            raise common.UsageError(f"--{split}_file: one file for {task.name}")
        files[split] = paths
    return files


def with_max_qa_length(settings: dict) -> dict:
    """`max_qa_length` left unset: RACE's default cut to what `max_seq_length` leaves
    (a default fits the flags given, as the export's does); a value given is checked
    by `validate`."""
    if settings.get("max_qa_length") is not None:
        return settings
    return dict(settings, max_qa_length=min(
        race.DEFAULT_MAX_QA_LENGTH, packing.segment_budget(settings["max_seq_length"])))


def validate(settings) -> Task:
    """Every check that can fail, before any conversion or training."""
    task = get_task(settings["task_name"])
    if task.kind in ("glue", "race") and (
            not settings["data_dir"] or not tf.io.gfile.isdir(settings["data_dir"])):
        raise common.UsageError(f"--data_dir={settings['data_dir']} is not a directory")
    common.check_run(settings)
    if settings["high_only"] and settings["middle_only"]:
        raise common.UsageError("--high_only and --middle_only exclude each other")
    if task.is_choice and not \
            1 <= settings["max_qa_length"] <= settings["max_seq_length"] - 3:
        raise common.UsageError(
            f"--max_qa_length={settings['max_qa_length']} must be positive and leave room "
            f"for [CLS] and 2 x [SEP] in --max_seq_length={settings['max_seq_length']}")
    if task.kind == "file":
        if not settings["text_a_field"]:
            raise common.UsageError(f"--task_name={task.name} needs --text_a_field")
        if task.name == "classification":
            common.check_labels_known(settings)
    if task.kind in ("choice", "file"):
        task.files = data_files(task, settings, common.wanted_splits(settings))
    return task


def task_class(settings: dict):
    """The `albert_tf.tasks.Task` of `--task_module` or of a built-in task module
    (`--task_name=multi_label`); None for the tasks of this module."""
    if settings.get(tasks.TASK_MODULE_FLAG):
        task = tasks.load_task_module(settings[tasks.TASK_MODULE_FLAG])
        if settings.get("task_name") and settings["task_name"] != task.name:
            raise common.UsageError(
                f"--task_name={settings['task_name']}, but --task_module="
                f"{settings[tasks.TASK_MODULE_FLAG]} is the task {task.name!r}")
        return task
    return tasks.builtin(settings.get("task_name"))


def run(settings: dict) -> dict:
    """Trains, evaluates (keeping the best checkpoint) and predicts; returns the best
    eval results."""
    task = task_class(settings)
    if task is not None:
        return driver.run(task, settings)
    settings = with_max_qa_length(common.complete_model_files(settings))
    task = validate(settings)
    context, tokenizer = common.start(settings)
    strategy, config = context.strategy, context.config
    # Read and convert (or find cached) every split needed before training starts.
    splits = common.wanted_splits(settings)
    task.read(settings, tokenizer, splits, context.output_dir)
    paths = {split: task.records(split, settings, tokenizer) for split in splits}

    with strategy.scope():
        model = task.model(config, settings)
        optimizer = common.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=settings["train_step"],
            num_warmup_steps=settings["warmup_step"], optimizer=settings["optimizer"],
            precision=settings["precision"])
    common.initialize_from(model, settings["init_checkpoint"], context.output_dir)
    trainer = common.make_trainer(settings, strategy, model, optimizer, task.objective(),
                                  context.output_dir, settings["train_step"])
    if settings["do_train"]:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        common.train(trainer, lambda skip: task.dataset(
            paths["train"], settings, micro_batch, True, drop_remainder=True).skip(skip))
    best = {}
    if settings["do_eval"]:
        best = common.evaluate_checkpoints(task, trainer, settings, paths["dev"],
                                           context.output_dir)
    exporting = common.exporting(settings)
    if settings["do_predict"] or exporting:
        # Prediction and export both use the best model: load it once.
        common.load_best_or_latest(trainer, context.output_dir)
    if settings["do_predict"]:
        predict_test(task, trainer, settings, paths["test"], context.output_dir)
    if exporting:
        if task.is_choice:
            common.export_if_asked(settings, strategy, trainer.model, "multiple_choice",
                                   max_qa_length=settings["max_qa_length"])
        else:
            labels = list(task.glue_task.labels) or None
            options = {"task_name": task.name} if task.kind == "glue" else \
                {"is_pair": task.glue_task.is_pair}
            common.export_if_asked(settings, strategy, trainer.model, "classifier",
                                   labels=labels, **options)
    return best


def predict_test(task, trainer, settings, path, output_dir) -> None:
    """Predicts the test set with the model as it is (`run` loads the best checkpoint,
    else the latest); writes test_results.tsv (probabilities or scores), for GLUE the
    submission file, for the other new tasks `<task>_predictions.jsonl`."""
    dataset = task.dataset(path, settings, settings["predict_batch_size"], False)
    keys = ["predictions"] if task.is_regression else ["probabilities", "predictions"]
    outputs = predict(trainer.strategy, trainer.model, dataset, keys)
    if not distribute.is_chief(trainer.strategy):
        return
    values = outputs["predictions" if task.is_regression else "probabilities"]
    lines = ["\t".join(f"{v:.6f}" for v in np.atleast_1d(row)) for row in values]
    write_text_atomically(os.path.join(output_dir, "test_results.tsv"), "\n".join(lines) + "\n")
    if task.kind == "glue":
        written = glue_metrics.write_glue_submission(task.glue_task, outputs["predictions"],
                                                     os.path.join(output_dir, "submission"))
        logging.info("GLUE submission file: %s", written)
    elif not task.is_race:
        path = os.path.join(output_dir, f"{task.name}_predictions.jsonl")
        write_text_atomically(path, "".join(
            json.dumps(row, ensure_ascii=False) + "\n"
            for row in prediction_rows(task, task.examples["test"], outputs)))
        logging.info("predictions: %s", path)


def prediction_rows(task, examples, outputs):
    """One object per example: `id`, `prediction` (a choice's index; a label; a score),
    `probabilities` (of the example's own choices; of every label), `label` (the gold
    one, or null)."""
    for i, example in enumerate(examples):
        prediction = outputs["predictions"][i]
        if task.is_choice:
            count = len(example.endings)
            label = None if example.label == multiple_choice.NO_LABEL else example.label
            yield {"id": example.example_id, "prediction": int(prediction),
                   "probabilities": [round(float(p), 6)
                                     for p in outputs["probabilities"][i][:count]],
                   "label": label}
        elif task.is_regression:
            yield {"id": example.guid, "prediction": float(prediction),
                   "label": example.label}
        else:
            yield {"id": example.guid, "prediction": task.glue_task.labels[int(prediction)],
                   "probabilities": [round(float(p), 6) for p in outputs["probabilities"][i]],
                   "label": example.label}
