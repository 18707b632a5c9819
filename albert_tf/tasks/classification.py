"""Sentence (pair) classification and regression, written with the task API: the GLUE
tasks as the original `run_classifier.py` runs them, and `classification` /
`regression` from your CSV, TSV or JSONL files (`albert_tf.data.tabular`).

GLUE records are the original's (`albert_tf.data.glue`: `<task>_{train,eval,predict}
.tf_record`, read when the cache is stale); the model is `AlbertClassifier`
(`num_labels == 1`: regression, STS-B). `--do_predict` writes `test_results.tsv` (each
example's probabilities, or its score), and GLUE's submission file or, for your files,
`<task>_predictions.jsonl`.

`--long_text=windows` reads a text longer than `--max_seq_length` whole, in windows
(`albert_tf.data.sentence_records.pack_windows`): each window trains as an example of
its text's label, of weight 1 as SQuAD's windows are (a text of more windows weighs
more; `--window_weight=inverse`: 1 / its text's windows, the loss their weighted
mean, `objectives.WeightedMeanObjective`), and a text's answer at evaluation and
prediction is the mean of its windows' logits (`Data.example_outputs`), its
probabilities their softmax, its class their argmax; a regression's score is the mean
of its windows'.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import losses, names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.data import glue, sentence_records, tabular
from albert_tf.errors import UsageError
from albert_tf.evaluation import glue_metrics
from albert_tf.export import LabelRule, ServingKind, serving_text, tflite_text
from albert_tf.fileio import write_text_atomically
from albert_tf.modeling.task_model import (
    HEAD_DROPOUT_RATE,
    AlbertTaskModel,
    check_count,
    check_rate,
    choice_outputs,
)
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_long_text, wanted_splits
from albert_tf.tasks.options import LongTextOptions, option
from albert_tf.training.objectives import MeanObjective, WeightedMeanObjective

FILE_TASKS = ("classification", "regression")  # CSV / TSV / JSONL


def write_test_results(values, output_dir: str) -> str:
    """`test_results.tsv`: a line per example, its values (probabilities, or a score)
    tab-separated, as the original."""
    path = os.path.join(output_dir, "test_results.tsv")
    lines = ["\t".join(f"{v:.6f}" for v in np.atleast_1d(row)) for row in values]
    write_text_atomically(path, "\n".join(lines) + "\n")
    return path


def prediction_file(task_name: str, output_dir: str, rows) -> str:
    """`<task>_predictions.jsonl`: one JSON object per example."""
    path = os.path.join(output_dir, f"{task_name}_predictions.jsonl")
    write_text_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n"
                                        for row in rows))
    return path


class AlbertClassifier(AlbertTaskModel):
    """GLUE classification on the pooled output, as `classifier_utils.create_model`.

    Variables (root scope): `output_weights` [num_labels, H], `output_bias` [num_labels].
    logits = dropout(pooled_output) @ output_weights^T + output_bias, dropout
    (`dropout_rate`, the original's 0.1) only when training.

    Inputs: the encoder's dict. Outputs (float32):
      classification (num_labels >= 2): `logits` [B, num_labels], `probabilities`
        (softmax) and `predictions` (argmax, int32 [B]);
      regression (num_labels == 1, STS-B): `logits` [B] (squeezed, as the original) and
        `predictions` = `logits`.
    Losses: `losses.classification_loss(logits, label_ids)`, or
    `losses.regression_loss(predictions, label_ids)`.
    """

    hf_architecture = names.HF_SEQUENCE_CLASSIFICATION
    heads = (task_heads.CLASSIFIER,)
    outputs_argument = "num_labels"

    def __init__(self, config: AlbertConfig, num_labels: int, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        check_count("num_labels", num_labels)
        dropout_rate = check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_classifier")
        super().__init__(config, seed, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self._build_head(self.heads[0], num_labels, dropout_rate)
        self.built = True

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def call(self, inputs, training=None):
        # Only the pooled output is read: the last block computes [CLS] alone.
        pooled = self._encode(inputs, training, first_token_only=True)[names.POOLED_OUTPUT]
        logits = tf.cast(self._score_pooled(pooled, training), tf.float32)  # [B, num_labels]
        if self.is_regression:
            logits = tf.squeeze(logits, -1)  # [B]
            return {names.LOGITS: logits, names.PREDICTIONS: logits}
        return choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels,
                "dropout_rate": self.dropout_rate}


# How a text's answer comes from its windows' (`--long_text=windows`), at evaluation
# and prediction and in the export's `serve_text`: the mean of their logits, the
# probabilities and class of that as the model makes them of its logits; a
# regression's score the mean of theirs.
CLASSIFICATION_POOLING = sentence_records.WindowPooling(
    {names.LOGITS: "mean"}, finish=lambda pooled: choice_outputs(pooled[names.LOGITS]))
REGRESSION_POOLING = sentence_records.WindowPooling(
    {names.LOGITS: "mean", names.PREDICTIONS: "mean"})


def window_pooling(is_regression: bool) -> sentence_records.WindowPooling:
    return REGRESSION_POOLING if is_regression else CLASSIFICATION_POOLING


# What a classifier's export returns (a regression's has no probabilities).
CLASSIFIER_OUTPUTS = (names.LOGITS, names.PROBABILITIES, names.PREDICTIONS)
CLASSIFIER = ServingKind(
    "classifier", AlbertClassifier, CLASSIFIER_OUTPUTS,
    serving_text.sentence_specs, serving_text.pack_sentences,
    model_arguments=("num_labels",),
    labels=LabelRule("num_labels", str, none_for_one=True),
    model_info=("num_labels",), lite_pack_text=tflite_text.pack_sentences,
    window_pooling=lambda model: window_pooling(model.is_regression))


@register
class ClassificationTask(Task):
    name = "classification"
    serving_kinds = (CLASSIFIER,)

    @dataclasses.dataclass(frozen=True)
    class Options(LongTextOptions, Task.Options):
        """The original run_classifier.py's defaults (512 tokens, 1,000 steps, no
        warmup), the fields of your files, and long texts (`LongTextOptions`)."""

        max_seq_length: int = option(512)
        train_step: int | None = option(1000)
        warmup_step: int | None = option(0)
        dropout_prob: float = option(0.1, "Dropout of the classifier head.")
        text_a_field: str | None = option(
            None, "classification / regression: the text's column name (CSV/TSV header, "
            "JSON key) or 0-based index.")
        text_b_field: str | None = option(None, "The second text's field, for pairs.")
        label_field: str | None = option("label", "The label's field.")
        header: bool = option(
            True, "CSV / TSV files start with a header row (else fields are indices).")

        def validate(self) -> None:
            name = (self.task_name or "").lower()
            if name not in FILE_TASKS and (not self.data_dir or
                                           not os.path.isdir(self.data_dir)):
                raise UsageError(f"--data_dir={self.data_dir} is not a directory")
            super().validate()
            if name in FILE_TASKS and not self.text_a_field:
                raise UsageError(f"--task_name={name} needs --text_a_field")
            check_long_text(self, self.is_pair, weights=True)

        @property
        def is_pair(self) -> bool:
            """Whether each example is a pair of texts: a GLUE task's, or files with
            --text_b_field."""
            name = (self.task_name or "").lower()
            if name in FILE_TASKS:
                return self.text_b_field is not None
            try:
                return glue.get_task(name).is_pair
            except glue.GlueDataError:
                return self.text_b_field is not None  # (the run names the task unknown)

    def __init__(self, options, tokenizer=None):
        super().__init__(options, tokenizer)
        self.name = self.options.task_name.lower()
        self.is_file = self.name in FILE_TASKS
        self.is_regression = self.name == "regression"
        self._sentence_task = None if self.is_file else glue.get_task(self.options.task_name)
        if self._sentence_task is not None:
            self.name = self._sentence_task.name
            self.is_regression = self._sentence_task.is_regression
            self.labels = list(self._sentence_task.labels) or None

    @property
    def fields(self) -> tabular.Fields:
        o = self.options
        return tabular.Fields(o.text_a_field, o.text_b_field, o.label_field)

    @property
    def sentence_task(self) -> sentence_records.SentenceTask:
        """The GLUE task, or the files' task as one (its labels known once read)."""
        if self._sentence_task is None:
            return tabular.file_task(self.name, self.labels, regression=self.is_regression,
                                     is_pair=self.fields.text_b is not None)
        return self._sentence_task

    @property
    def metric(self) -> str:
        return self.sentence_task.metric

    # -------------------------------------------------------------------- data
    def read(self, split, paths):
        """The split's examples: GLUE's TSV files under --data_dir, or your file."""
        if not self.is_file:
            return glue.get_processor(self.sentence_task, self.tokenizer).get_examples(
                self.options.data_dir, split)
        return tabular.read_examples(paths[0], self.fields, split=split, labels=self.labels,
                                     regression=self.is_regression,
                                     header=self.options.header,
                                     process_text=self.tokenizer.preprocess)

    class Data(Task.Data):
        """GLUE's records are the original's (their own cache); your files' are one per
        example, as GLUE's are packed."""

        data_sets = (*glue.GLUE_TASKS, *FILE_TASKS, *glue.TASK_ALIASES)

        @property
        def has_labels(self) -> bool:
            return self.task.is_file and not self.task.is_regression

        @property
        def label_features(self) -> tuple[str, ...]:
            return self.with_windows((names.LABEL_IDS,))

        @property
        def eval_outputs(self) -> tuple[str, ...]:
            if self.long_text.windows and not self.task.is_regression:
                return (names.LOGITS,)  # pooled, then the class (`example_outputs`)
            return (names.PREDICTIONS,)

        @property
        def predict_outputs(self) -> tuple[str, ...]:
            if self.task.is_regression:
                return (names.PREDICTIONS,)
            if self.long_text.windows:
                return (names.LOGITS,)
            return (names.PROBABILITIES, names.PREDICTIONS)

        def example_outputs(self, outputs):
            """With windows, a text's answer from its windows': the mean of their
            logits, its probabilities the softmax of that and its class the argmax (a
            regression: the mean of their scores)."""
            if not self.long_text.windows:
                return outputs
            return sentence_records.pool_windows(outputs,
                                                 window_pooling(self.task.is_regression))

        def data_files(self) -> dict[str, list[str]]:
            if not self.task.is_file:  # GLUE: found (or named missing) as records are made
                return {split: [] for split in wanted_splits(self.options)}
            files = super().data_files()
            for split, paths in files.items():
                if len(paths) != 1:
                    raise UsageError(f"--{split}_file: one file for {self.task.name}")
            return files

        def discover_labels(self, examples) -> list[str]:
            return tabular.labels_of(examples)

        def cached_records(self, split, examples, paths, cache_dir):
            task = self.task
            if task.is_file:
                return super().cached_records(split, examples, paths, cache_dir)
            return glue.cached_glue_records(task.sentence_task, split, self.options.data_dir,
                                            cache_dir, task.tokenizer,
                                            self.options.max_seq_length, examples,
                                            self.long_text.at(split))

        def cache_settings(self) -> dict:
            o = self.options
            return {"labels": list(self.task.sentence_task.labels),  # [] for regression
                    "fields": [o.text_a_field, o.text_b_field, o.label_field],
                    "header": o.header}

        def write_records(self, split, examples, path) -> int:
            return sentence_records.write_examples(examples, self.task.sentence_task,
                                                   self.options.max_seq_length,
                                                   self.task.tokenizer, path,
                                                   self.long_text.at(split))

        def dataset(self, path, batch_size, training, drop_remainder=False,
                    extra_spec=None):
            return sentence_records.sentence_dataset(
                path, self.task.sentence_task, self.options.max_seq_length, batch_size,
                training=training, seed=self.options.seed, drop_remainder=drop_remainder,
                windows=self.long_text.windows, weighted=self.long_text.weighted,
                extra_spec=extra_spec)

    class Teaching(Task.Teaching):
        """The teacher's logits (softmax), or its score (a regression); its class or
        score labels a transfer text."""

        @property
        def output(self) -> str:
            return names.PREDICTIONS if self.task.is_regression else names.LOGITS

        @property
        def soft_loss(self) -> str:
            return "regression" if self.task.is_regression else "softmax"

        def transfer_is_pair(self) -> bool:
            return self.task.sentence_task.is_pair

        def write_transfer_records(self, texts, path) -> int:
            process = self.task.tokenizer.preprocess
            return self.task.data.write_records("train", [
                sentence_records.InputExample(f"transfer-{i}", process(a),
                                              None if b is None else process(b))
                for i, (a, b) in enumerate(texts)], path)

        def pseudo_label(self, example, teacher_output) -> None:
            """The teacher's class (its score, for a regression)."""
            label = example.features.feature[names.LABEL_IDS]
            if self.task.is_regression:
                label.float_list.value[:] = [float(np.reshape(teacher_output, -1)[0])]
            else:
                label.int64_list.value[:] = [int(np.argmax(teacher_output))]

    # ------------------------------------------------------------------- model
    def build_model(self, config):
        return AlbertClassifier(config, self.sentence_task.num_labels,
                                seed=self.options.seed,
                                dropout_rate=self.options.dropout_prob)

    def objective(self):
        """The mean of the examples' losses (`--window_weight=inverse`: weighted by
        each window's `window_weight`)."""
        if self.is_regression:
            loss = lambda o, f: losses.regression_loss(  # noqa: E731
                o[names.PREDICTIONS], f[names.LABEL_IDS], per_example=True)
        else:
            loss = lambda o, f: losses.classification_loss(  # noqa: E731
                o[names.LOGITS], f[names.LABEL_IDS], per_example=True)
        if self.data.long_text.weighted:
            return WeightedMeanObjective(loss, names.WINDOW_WEIGHT)
        return MeanObjective(loss)

    # ----------------------------------------------------------------- results
    def metrics(self, examples, outputs) -> dict:
        return glue_metrics.task_metrics(self.sentence_task, outputs[names.PREDICTIONS],
                                         outputs[names.LABEL_IDS])

    def write_predictions(self, examples, outputs, output_dir, step) -> str:
        """test_results.tsv (probabilities or scores); GLUE's submission file, or
        `<task>_predictions.jsonl`: `id`, `prediction` (a label; a score),
        `probabilities` (of every label), `label` (the gold one, or null)."""
        values = outputs[names.PREDICTIONS if self.is_regression else names.PROBABILITIES]
        written = write_test_results(values, output_dir)
        if not self.is_file:
            submission = glue_metrics.write_glue_submission(
                self.sentence_task, outputs[names.PREDICTIONS],
                os.path.join(output_dir, "submission"))
            logging.info("GLUE submission file: %s", submission)
            return written
        rows = []
        for i, example in enumerate(examples):
            prediction = outputs[names.PREDICTIONS][i]
            if self.is_regression:
                rows.append({"id": example.guid, "prediction": float(prediction),
                             "label": example.label})
            else:
                rows.append({"id": example.guid,
                             "prediction": self.sentence_task.labels[int(prediction)],
                             "probabilities": [round(float(p), 6)
                                               for p in outputs[names.PROBABILITIES][i]],
                             "label": example.label})
        return prediction_file(self.name, output_dir, rows)

    def export_options(self) -> dict:
        """The task (a GLUE task's name, or whether your files hold pairs), and with
        `--long_text=windows` the windows that `serve_text` reads too."""
        long_text = self.data.long_text.export_options()
        if self.is_file:
            return {"is_pair": self.sentence_task.is_pair, **long_text}
        return {"task_name": self.name, **long_text}
