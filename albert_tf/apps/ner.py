"""`run_ner.py`: token classification (NER) on CoNLL column files or CLUENER JSON lines:
train / eval / predict, the labels kept beside the model, an export that answers raw
text.

The data side is `albert_tf.data.ner` (formats, windows, predictions written back,
seqeval's metrics); the model is `AlbertTokenClassifier`; training, checkpoints, the
dev-set evaluation of every kept checkpoint and `model.ckpt-best` are the classifier's
(`albert_tf.apps.common`).
"""

from __future__ import annotations

import dataclasses
import math
import os

import tensorflow as tf
from absl import flags, logging

from albert_tf import names
from albert_tf.apps import common
from albert_tf.data import cache, ner, records
from albert_tf.modeling import AlbertTokenClassifier
from albert_tf.training import distribute
from albert_tf.training.loop import predict
from albert_tf.training.objectives import TokenObjective

CACHE_FORMAT = 1
# --data_dir + --task_name: the file names of each split.
TASK_FILES = {
    "cluener": {"train": "train.json", "dev": "dev.json", "test": "test.json"},
    "conll": {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"},
}
PREDICTION_FILES = {"conll": "test_predictions.conll", "cluener": "test_predictions.json"}


def define_flags():
    common.define_model_flags(learning_rate=5e-5, optimizer="adamw")
    flags.DEFINE_string("data_dir", None,
                        "Folder of the task's files (with --task_name; see --train_file).")
    flags.DEFINE_string("task_name", None,
                        "cluener (train.json, dev.json, test.json: CLUENER2020 JSON lines) "
                        "or conll (train.txt, dev.txt, test.txt: CoNLL column files).")
    flags.DEFINE_string("train_file", None,
                        "Training file: CoNLL columns (tag last) or CLUENER JSON lines "
                        "(overrides --data_dir).")
    flags.DEFINE_string("dev_file", None, "Dev file for --do_eval (same formats).")
    flags.DEFINE_string("test_file", None,
                        "File for --do_predict; predictions are written back in its own "
                        "format (test_predictions.conll / test_predictions.json).")
    flags.DEFINE_list("labels", None,
                      "The tags, comma-separated (default: those of the training file, "
                      "\"O\" first, saved as labels.txt in --output_dir).")
    flags.DEFINE_string("cached_dir", None,
                        "Where converted TFRecords are cached (default: output_dir).")
    flags.DEFINE_integer("max_seq_length", 128,
                         "Window length; longer sentences are split into windows of "
                         "whole words.")
    flags.DEFINE_bool("do_predict", False, "Predict --test_file.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
    flags.DEFINE_integer("train_step", None,
                         "Training steps (default: --num_train_epochs over the windows).")
    flags.DEFINE_float("num_train_epochs", 3.0, "Epochs, when --train_step is not given.")
    flags.DEFINE_integer("warmup_step", None,
                         "Warmup steps (default: --warmup_proportion of the steps).")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps spent warming up.")
    flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the tagging head.")


FLAG_NAMES = common.MODEL_FLAG_NAMES + common.FlagNames(__name__)


# ------------------------------------------------------------------------ the files
def data_files(settings) -> dict[str, str | None]:
    """The file of each split asked for: --train_file etc., else --data_dir/<task's
    name>."""
    task = (settings["task_name"] or "").lower() or None
    if task is not None and task not in TASK_FILES:
        raise common.UsageError(f"--task_name={settings['task_name']} is not one of "
                                f"{', '.join(TASK_FILES)}")
    files = {}
    for split in common.wanted_splits(settings):
        path = settings[f"{split}_file"]
        if path is None:
            if not (settings["data_dir"] and task):
                raise common.UsageError(
                    f"give --{split}_file, or --data_dir and --task_name")
            path = os.path.join(settings["data_dir"], TASK_FILES[task][split])
        files[split] = common.check_file(path, f"{split}_file")
    return files


def validate(settings) -> dict[str, str]:
    """Every check that can fail before reading data; returns the files."""
    common.check_run(settings)
    files = data_files(settings)
    common.check_labels_known(settings)
    if settings["train_step"] is not None and settings["train_step"] < 1:
        raise common.UsageError(f"--train_step={settings['train_step']} must be positive")
    return files


def read_files(files: dict[str, str]) -> dict[str, ner.NerFile]:
    """Each split's file read (errors name file and line); training and dev files must
    have tags."""
    read = {}
    for split, path in files.items():
        read[split] = ner.read_ner_file(path)
        if split != "test" and not read[split].has_tags:
            raise ner.NerDataError(f"{path}: the {split} file has no tags")
        ner.warn_about_unopened_entities(read[split])
    return read


# ------------------------------------------------------------------------- records
def record_spec(max_seq_length: int) -> dict:
    return records.fixed_length_spec(max_seq_length, {
        names.LABEL_IDS: tf.io.FixedLenFeature([max_seq_length], tf.int64)})


def write_features(path: str, features: list[ner.NerFeature]) -> int:
    def serialized(feature):
        record = {names.MODEL_TO_RECORD[k]: records.int64_feature(v)
                  for k, v in feature.inputs.items()}
        record[names.LABEL_IDS] = records.int64_feature(feature.label_ids)
        return records.make_example(record)
    return records.write_records(path, (serialized(f) for f in features))


@dataclasses.dataclass
class Split:
    """A split converted: its file, its windows (kept for dev and test, to put the
    predictions back per word) and their cached records."""

    data: ner.NerFile
    features: list[ner.NerFeature] | None
    records: cache.CachedRecords


def convert(split: str, data: ner.NerFile, settings, tokenizer, labels, cache_dir) -> Split:
    """The windows of a split as TFRecords under `cache_dir` (`ner_<split>.tf_record`),
    reused when the file, tokenizer, labels and length are those they were made with."""
    info = {"format": CACHE_FORMAT, "split": split,
            "source": cache.abspath_or_url(data.path),
            "source_sha256": cache.file_sha256(data.path), "labels": list(labels),
            "max_seq_length": int(settings["max_seq_length"]),
            **cache.tokenizer_settings(tokenizer)}
    features = None if split == "train" else ner.file_features(
        data, tokenizer, settings["max_seq_length"], labels)

    def write(path):
        nonlocal features
        if features is None:
            features = ner.file_features(data, tokenizer, settings["max_seq_length"], labels)
        count = write_features(path, features)
        logging.info("wrote %d windows of %d sentences of %s to %s", count,
                     len(data.sentences), data.path, path)
        return count, 0

    cached = cache.cached_conversion(
        os.path.join(cache_dir, f"ner_{split}.tf_record"), info, write)
    return Split(data, features, cached)


def dataset(path: str, settings, batch_size: int, training: bool,
            drop_remainder: bool = False) -> tf.data.Dataset:
    """Batches of the windows, each padded to its longest (labels with `IGNORE`)."""
    return records.fine_tuning_dataset(
        path, record_spec(settings["max_seq_length"]), batch_size, training=training,
        seed=settings["seed"], drop_remainder=drop_remainder,
        sequence_features=records.SEQUENCE_FEATURES + (names.LABEL_IDS,),
        padding_values={names.LABEL_IDS: ner.IGNORE})


@dataclasses.dataclass
class DevSet:
    """The dev split as `common.evaluate_checkpoints` reads a task: seqeval's
    entity-level scores of the predictions put back per word."""

    split: Split
    labels: list[str]
    metric: str = "f1"

    def dataset(self, path, settings, batch_size, training):
        return dataset(path, settings, batch_size, training)

    def metrics(self, outputs) -> dict:
        predicted = ner.word_predictions(self.split.data, self.split.features,
                                         outputs[names.PREDICTIONS], self.labels)
        return ner.ner_metrics([s.tags for s in self.split.data.sentences], predicted)


# ------------------------------------------------------------------------------ run
def train_steps(settings, num_windows: int) -> int:
    if settings["train_step"] is not None:
        return settings["train_step"]
    return max(1, math.ceil(num_windows / settings["train_batch_size"] *
                            settings["num_train_epochs"]))


def run(settings: dict) -> dict:
    """Trains, evaluates every kept checkpoint on the dev file (keeping the best),
    predicts the test file; returns the best dev scores."""
    settings = common.complete_model_files(settings)
    files = validate(settings)
    context, tokenizer = common.start(settings)
    strategy, output_dir = context.strategy, context.output_dir
    data = read_files(files)
    labels = common.resolve_labels(settings, output_dir,
                                   lambda: ner.labels_of([data["train"]]))
    cache_dir = settings["cached_dir"] or output_dir
    splits = {split: convert(split, data[split], settings, tokenizer, labels, cache_dir)
              for split in data}
    steps = train_steps(settings, splits["train"].records.num_examples) \
        if "train" in splits else 1
    warmup = settings["warmup_step"] if settings["warmup_step"] is not None else \
        int(steps * settings["warmup_proportion"])

    with strategy.scope():
        model = AlbertTokenClassifier(context.config, len(labels), seed=settings["seed"],
                                      dropout_rate=settings["dropout_prob"])
        optimizer = common.make_optimizer(
            learning_rate=settings["learning_rate"], num_train_steps=steps,
            num_warmup_steps=warmup, optimizer=settings["optimizer"],
            precision=settings["precision"])
    common.initialize_from(model, settings["init_checkpoint"], output_dir)
    trainer = common.make_trainer(settings, strategy, model, optimizer, TokenObjective(),
                                  output_dir, steps)
    if "train" in splits:
        micro_batch = settings["train_batch_size"] // settings["gradient_accumulation_steps"]
        path = splits["train"].records.path
        common.train(trainer, lambda skip: dataset(path, settings, micro_batch, True,
                                                   drop_remainder=True).skip(skip))
    best = {}
    if "dev" in splits:
        best = common.evaluate_checkpoints(DevSet(splits["dev"], labels), trainer, settings,
                                           splits["dev"].records.path, output_dir)
    if settings["do_predict"] or common.exporting(settings):
        common.load_best_or_latest(trainer, output_dir)
    if "test" in splits:
        predict_test(trainer, settings, splits["test"], labels, output_dir)
    # serve_text cuts raw text into words as the data read here were cut.
    word_split = ner.word_split_of(next(iter(data.values())))
    common.export_if_asked(settings, strategy, trainer.model, "token_classifier",
                           labels=labels, word_split=word_split)
    return best


def predict_test(trainer, settings, split: Split, labels, output_dir) -> None:
    """Writes the test file back with the predicted tags, in its own format; with tags
    in the file, also its scores to test_results.txt."""
    outputs = predict(trainer.strategy, trainer.model,
                      dataset(split.records.path, settings, settings["predict_batch_size"],
                              False), [names.PREDICTIONS])
    if not distribute.is_chief(trainer.strategy):
        return
    tags = ner.word_predictions(split.data, split.features, outputs[names.PREDICTIONS],
                                labels)
    path = os.path.join(output_dir, PREDICTION_FILES[split.data.format])
    ner.write_predictions(split.data, tags, path)
    logging.info("wrote the predictions of %d sentences to %s", len(tags), path)
    if split.data.has_tags:
        scores = ner.ner_metrics([s.tags for s in split.data.sentences], tags)
        scores["global_step"] = trainer.step
        common.write_results(os.path.join(output_dir, "test_results.txt"), scores,
                             title="Test results")
