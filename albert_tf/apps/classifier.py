"""`run_classifier.py`: GLUE tasks and RACE, train / eval / predict, as the original."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import flags, logging

from albert_tf import losses
from albert_tf.apps import common
from albert_tf.data import glue, race
from albert_tf.evaluation import glue_metrics
from albert_tf.fileio import write_text_atomically
from albert_tf.modeling import AlbertClassifier, AlbertMultipleChoice
from albert_tf.tokenization import FullTokenizer
from albert_tf.training import distribute
from albert_tf.training.loop import Trainer, predict
from albert_tf.training.objectives import MeanObjective

RACE = "race"
BEST_CHECKPOINT = common.BEST_CHECKPOINT


def define_flags():
    common.define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("data_dir", None,
                        "The GLUE root (the task adds its folder, e.g. MRPC/), or the "
                        "folder holding RACE/.")
    flags.DEFINE_string("task_name", None,
                        "A GLUE task (cola, mnli, mismnli, mrpc, rte, sst-2, sts-b, qqp, "
                        "qnli, wnli, ax) or race.")
    flags.DEFINE_string("cached_dir", None,
                        "Where converted TFRecords are cached (default: output_dir).")
    flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
    flags.DEFINE_integer("max_qa_length", 128, "RACE: maximum question + option length.")
    flags.DEFINE_bool("high_only", False, "RACE: only the high-school part.")
    flags.DEFINE_bool("middle_only", False, "RACE: only the middle-school part.")
    flags.DEFINE_bool("do_predict", False, "Predict the test set.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
    flags.DEFINE_integer("train_step", 1000, "Training steps.")
    flags.DEFINE_integer("warmup_step", 0, "Warmup steps.")
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the classifier head.")


# The flags passed to `run`: the model flags and those `define_flags` adds.
FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames(__name__)


@dataclasses.dataclass
class Task:
    """What differs between GLUE tasks and RACE."""

    name: str
    glue_task: glue.GlueTask | None

    @property
    def is_race(self) -> bool:
        return self.glue_task is None

    @property
    def is_regression(self) -> bool:
        return not self.is_race and self.glue_task.is_regression

    def records(self, split, settings, tokenizer) -> str:
        cache_dir = settings["cached_dir"] or settings["output_dir"]
        if self.is_race:
            return race.cached_race_records(
                split, settings["data_dir"], cache_dir, tokenizer, settings["max_seq_length"],
                settings["max_qa_length"], high_only=settings["high_only"],
                middle_only=settings["middle_only"]).path
        return glue.cached_glue_records(self.glue_task, split, settings["data_dir"],
                                        cache_dir, tokenizer, settings["max_seq_length"]).path

    def dataset(self, path, settings, batch_size, training, drop_remainder=False):
        read = race.race_dataset if self.is_race else (
            lambda *a, **k: glue.glue_dataset(a[0], self.glue_task, *a[1:], **k))
        return read(path, settings["max_seq_length"], batch_size, training=training,
                    seed=settings["seed"], drop_remainder=drop_remainder)

    def model(self, config, settings):
        if self.is_race:
            return AlbertMultipleChoice(config, num_choices=race.NUM_CHOICES,
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
        if self.is_race:
            return {"eval_accuracy": float(np.mean(predictions == labels))}
        return glue_metrics.task_metrics(self.glue_task, predictions, labels)

    @property
    def metric(self) -> str:
        return "eval_accuracy" if self.is_race else self.glue_task.metric


def get_task(name) -> Task:
    if not name:
        raise common.UsageError("--task_name is required")
    if name.lower() == RACE:
        return Task(RACE, None)
    try:
        task = glue.get_task(name)
    except (KeyError, ValueError) as e:
        raise common.UsageError(f"{e}; or race") from None
    return Task(task.name, task)


def validate(settings) -> Task:
    """Every check that can fail, before any conversion or training."""
    task = get_task(settings["task_name"])
    if not (settings["do_train"] or settings["do_eval"] or settings["do_predict"]):
        raise common.UsageError("nothing to do: give --do_train, --do_eval or --do_predict")
    if not settings["data_dir"] or not tf.io.gfile.isdir(settings["data_dir"]):
        raise common.UsageError(f"--data_dir={settings['data_dir']} is not a directory")
    if not (settings["spm_model_file"] or settings["vocab_file"]):
        raise common.UsageError("give --spm_model_file (or --vocab_file for WordPiece)")
    for flag in ("spm_model_file", "vocab_file"):
        if settings[flag]:
            common.check_file(settings[flag], flag)
    trained = settings["output_dir"] and tf.io.gfile.isdir(settings["output_dir"]) and (
        tf.train.latest_checkpoint(settings["output_dir"]) or tf.io.gfile.exists(
            os.path.join(settings["output_dir"], BEST_CHECKPOINT + ".index")))
    if (settings["do_predict"] or settings["do_eval"]) and not settings["do_train"] \
            and not trained:
        raise common.UsageError(
            f"--do_eval/--do_predict without --do_train need a trained model in "
            f"--output_dir={settings['output_dir']}, and there is none")
    if settings["high_only"] and settings["middle_only"]:
        raise common.UsageError("--high_only and --middle_only exclude each other")
    if task.name == "race" and not \
            1 <= settings["max_qa_length"] <= settings["max_seq_length"] - 3:
        raise common.UsageError(
            f"--max_qa_length={settings['max_qa_length']} must be positive and leave room "
            f"for [CLS] and 2 x [SEP] in --max_seq_length={settings['max_seq_length']}")
    return task


def run(settings: dict) -> dict:
    """Trains, evaluates (keeping the best checkpoint) and predicts; returns the best
    eval results."""
    settings = common.complete_model_files(settings)
    task = validate(settings)
    context = common.setup(**settings)
    strategy, config = context.strategy, context.config
    for flag in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        distribute.per_replica_batch_size(settings[flag], strategy, flag)
    tokenizer = FullTokenizer(vocab_file=settings["vocab_file"],
                              do_lower_case=settings["do_lower_case"],
                              spm_model_file=settings["spm_model_file"])
    # Convert (or find cached) every split needed before training starts.
    splits = [s for s, on in (("train", settings["do_train"]), ("dev", settings["do_eval"]),
                              ("test", settings["do_predict"])) if on]
    paths = {split: task.records(split, settings, tokenizer) for split in splits}

    with strategy.scope():
        model = task.model(config, settings)
        optimizer = common.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=settings["train_step"],
            num_warmup_steps=settings["warmup_step"], optimizer=settings["optimizer"],
            precision=settings["precision"])
    common.initialize_from(model, settings["init_checkpoint"], context.output_dir)
    trainer = Trainer(
        strategy=strategy, model=model, optimizer=optimizer, objective=task.objective(),
        output_dir=context.output_dir, train_steps=settings["train_step"],
        steps_per_loop=settings["iterations_per_loop"],
        save_checkpoints_steps=settings["save_checkpoints_steps"],
        keep_checkpoint_max=settings["keep_checkpoint_max"],
        gradient_accumulation_steps=settings["gradient_accumulation_steps"],
        enable_xla=settings["enable_xla"])
    if settings["do_train"]:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        trainer.train(lambda skip: task.dataset(paths["train"], settings, micro_batch,
                                                True, drop_remainder=True).skip(skip))
    best = {}
    if settings["do_eval"]:
        best = common.evaluate_checkpoints(task, trainer, settings, paths["dev"],
                                           context.output_dir)
    exporting = settings["export_dir"] or settings["export_hf_dir"]
    if settings["do_predict"] or exporting:
        # Prediction and export both use the best model: load it once.
        common.load_best_or_latest(trainer, context.output_dir)
    if settings["do_predict"]:
        predict_test(task, trainer, settings, paths["test"], context.output_dir)
    if exporting:
        if task.is_race:
            common.export_if_asked(settings, strategy, trainer.model, "multiple_choice",
                                   labels=list(race.RACE_LABELS),
                                   max_qa_length=settings["max_qa_length"])
        else:
            common.export_if_asked(settings, strategy, trainer.model, "classifier",
                                   task_name=task.name,
                                   labels=list(task.glue_task.labels) or None)
    return best


def predict_test(task, trainer, settings, path, output_dir) -> None:
    """Predicts the test set with the model as it is (`run` loads the best checkpoint,
    else the latest); writes test_results.tsv (probabilities or scores) and, for GLUE,
    the submission file."""
    dataset = task.dataset(path, settings, settings["predict_batch_size"], False)
    keys = ["predictions"] if task.is_regression else ["probabilities", "predictions"]
    outputs = predict(trainer.strategy, trainer.model, dataset, keys)
    if not distribute.is_chief(trainer.strategy):
        return
    values = outputs["predictions" if task.is_regression else "probabilities"]
    lines = ["\t".join(f"{v:.6f}" for v in np.atleast_1d(row)) for row in values]
    write_text_atomically(os.path.join(output_dir, "test_results.tsv"), "\n".join(lines) + "\n")
    if not task.is_race:
        written = glue_metrics.write_glue_submission(task.glue_task, outputs["predictions"],
                                                     os.path.join(output_dir, "submission"))
        logging.info("GLUE submission file: %s", written)
