"""Multi-label classification: any number of labels per text (a sigmoid per label and
binary cross-entropy), from your CSV, TSV or JSONL files.

    run_classifier.py --task_name=multi_label --data_dir=emotions \\
        --text_a_field=text --label_field=labels --label_separator=, ...

Rows are read as `run_classifier.py --task_name=classification` reads them
(`albert_tf.data.tabular`: `--text_a_field`, `--text_b_field`, `--label_field`,
`--header`); the label field holds a JSON list (`["anger", "joy"]`) or a string cut at
`--label_separator` (`anger,joy`); an empty one is a text with no label. A row naming a
label outside `--labels` (or the saved labels.txt) is skipped with a warning naming
file and line.

The head is the classifier's (`output_weights` [num_labels, H], `output_bias` on the
pooled output), so a model converts to Hugging Face's `AlbertForSequenceClassification`
with `problem_type: multi_label_classification`, and such a directory loads here.
A label is predicted when its probability is at least the threshold: `--threshold`,
else the one `--tune_threshold` chose on dev (kept as threshold.txt beside the model),
else 0.5. Results: micro and macro F1, precision and recall, subset accuracy and each
label's precision, recall and F1 (scikit-learn's definitions); the best checkpoint by
micro F1. Predictions: `multi_label_predictions.jsonl`, every label's probability.
With `--long_text=windows` a long text is read in windows (classification's), each
trained with the text's labels; a text's probability of a label is the most any of its
windows gives it (the max: a label is the text's where some part of it says so).
This module is written with the public task API (`albert_tf.tasks.Task`) alone.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, names
from albert_tf.data import sentence_records, tabular
from albert_tf.data.report import SkipLog
from albert_tf.errors import UsageError
from albert_tf.evaluation.results import write_results
from albert_tf.export import kinds, serving_text, tflite_text
from albert_tf.tasks import register
from albert_tf.tasks.base import Task
from albert_tf.tasks.checks import check_long_text
from albert_tf.tasks.classification import AlbertClassifier, ClassificationTask
from albert_tf.tasks.options import FineTuningOptions, option
from albert_tf.training.objectives import MeanObjective

HF_PROBLEM_TYPE = "multi_label_classification"
THRESHOLD_FILE = "threshold.txt"  # beside the checkpoints: the threshold tuned on dev
DEFAULT_THRESHOLD = 0.5
# The thresholds `--tune_threshold` tries on dev.
THRESHOLD_GRID = tuple(round(t, 2) for t in np.arange(0.05, 0.951, 0.05))


class AlbertMultiLabelClassifier(AlbertClassifier):
    """`AlbertClassifier`'s head, each output a label of its own.

    Outputs (float32): `logits` [B, num_labels], `probabilities` (sigmoid) and
    `predictions` (int32 [B, num_labels], 1 where the probability is at least
    `threshold`). Loss: `multi_label_loss`.
    """

    hf_problem_type = HF_PROBLEM_TYPE
    detectable = False  # a TF1 checkpoint cannot tell it from the classifier

    def __init__(self, config, num_labels: int, seed: int | None = None,
                 threshold: float = DEFAULT_THRESHOLD, **kwargs):
        kwargs.setdefault("name", "albert_multi_label_classifier")
        super().__init__(config, num_labels, seed=seed, **kwargs)
        self.threshold = check_threshold(threshold, "threshold")

    @property
    def is_regression(self) -> bool:
        return False

    def call(self, inputs, training=None):
        pooled = self._encode(inputs, training, first_token_only=True)[names.POOLED_OUTPUT]
        logits = tf.cast(self._score_pooled(pooled, training), tf.float32)  # [B, L]
        probabilities = tf.sigmoid(logits)
        return {names.LOGITS: logits, names.PROBABILITIES: probabilities,
                names.PREDICTIONS: tf.cast(probabilities >= self.threshold, tf.int32)}

    def get_config(self):
        return {**super().get_config(), "threshold": self.threshold}


def check_threshold(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"{what} must be a number in (0, 1), got {value!r}")
    return float(value)


def threshold_for(given, model_path) -> float:
    """`given` (--threshold), else the tuned one kept beside the model (`model_path`:
    its directory or a checkpoint in it), else 0.5."""
    if given is not None:
        return check_threshold(given, "--threshold")
    directory = model_path if tf.io.gfile.isdir(model_path) else os.path.dirname(model_path)
    path = os.path.join(os.fspath(directory), THRESHOLD_FILE)
    if fileio.exists(path):
        text = fileio.read_bytes(path).decode("utf-8").strip()
        try:
            return check_threshold(float(text), path)
        except ValueError:
            raise ValueError(f"{path} holds {text!r}, not a threshold in (0, 1)") from None
    return DEFAULT_THRESHOLD


def multi_label_loss(logits, label_ids):
    """Per example: the mean over the labels of the sigmoid cross-entropy [B]."""
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(label_ids, tf.float32), logits=tf.cast(logits, tf.float32)), -1)


# How a text's answer comes from its windows' (`--long_text=windows`), at evaluation
# and in the export's `serve_text`: each label's most probable window (its logit and
# prediction alike: the sigmoid and the threshold keep the order).
WINDOW_POOLING = sentence_records.WindowPooling(
    {names.LOGITS: "max", names.PROBABILITIES: "max", names.PREDICTIONS: "max"})

# The serving kind: `serving_default`, `serve_examples` and `serve_text` as the
# classifier's, with multi-hot `predictions`; labels.txt names the outputs.
SERVING_KIND = kinds.ServingKind(
    "multi_label", AlbertMultiLabelClassifier,
    (names.LOGITS, names.PROBABILITIES, names.PREDICTIONS),
    serving_text.sentence_specs, serving_text.pack_sentences,
    model_arguments=("num_labels",), labels=kinds.LabelRule("num_labels", str),
    model_info=("num_labels", "threshold"), lite_pack_text=tflite_text.pack_sentences,
    window_pooling=lambda model: WINDOW_POOLING,
    checkpoint_arguments=lambda directory, given: {
        "threshold": threshold_for(given.get("threshold"), directory)})


@dataclasses.dataclass(frozen=True)
class Example:
    guid: str
    text_a: str
    text_b: str | None
    labels: tuple[str, ...] | None  # None: not given (a test file without labels)


def scores(probabilities: np.ndarray, label_ids: np.ndarray, threshold: float,
           labels: list[str]) -> dict:
    """Micro and macro F1 / precision / recall, subset accuracy and each label's
    precision, recall and F1, at `threshold` (scikit-learn's definitions; a label never
    predicted nor present scores 0)."""
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    predicted = (np.asarray(probabilities) >= threshold).astype(np.int64)
    gold = np.asarray(label_ids).astype(np.int64)
    result = {"threshold": float(threshold),
              "subset_accuracy": float(accuracy_score(gold, predicted))}
    for average in ("micro", "macro"):
        p, r, f, _ = precision_recall_fscore_support(gold, predicted, average=average,
                                                     zero_division=0)
        result.update({f"{average}_precision": float(p), f"{average}_recall": float(r),
                       f"{average}_f1": float(f)})
    p, r, f, support = precision_recall_fscore_support(gold, predicted, average=None,
                                                       zero_division=0)
    for i, label in enumerate(labels):
        result.update({f"{label}_precision": float(p[i]), f"{label}_recall": float(r[i]),
                       f"{label}_f1": float(f[i]), f"{label}_support": int(support[i])})
    return result


@register
class MultiLabelTask(Task):
    name = "multi_label"
    metric = "micro_f1"
    serving_kinds = (SERVING_KIND,)

    @dataclasses.dataclass(frozen=True)
    class Options(ClassificationTask.Options):
        """Classification's options (the fields of your files), and the labels'
        separator and threshold."""

        label_separator: str = option(
            ",", "multi_label: what separates the labels of a row's label field (a JSON "
            "list needs none).")
        threshold: float | None = option(
            None, "multi_label: a label is predicted when its probability is at least "
            "this (default: the one --tune_threshold kept in --output_dir, else 0.5).")
        tune_threshold: bool = option(
            False, "multi_label: with --do_eval, pick the threshold with the best dev "
            "micro F1 for each checkpoint, and keep the best checkpoint's as "
            "threshold.txt in --output_dir.")

        def validate(self) -> None:
            FineTuningOptions.validate(self)  # (not classification's: no GLUE here)
            name = MultiLabelTask.name
            if not self.text_a_field:
                raise UsageError(f"--task_name={name} needs --text_a_field")
            if self.do_train and not self.label_field:
                raise UsageError(f"--task_name={name} needs --label_field to train")
            if not self.label_separator:
                raise UsageError("--label_separator must not be empty")
            if self.threshold is not None:
                try:
                    check_threshold(self.threshold, "--threshold")
                except ValueError as e:
                    raise UsageError(str(e)) from None
            check_long_text(self, self.text_b_field is not None)

    @property
    def fields(self) -> tabular.Fields:
        o = self.options
        return tabular.Fields(o.text_a_field, o.text_b_field, o.label_field)

    # --------------------------------------------------------------------- data
    def _row_labels(self, raw) -> list[str]:
        """The labels of a label field: a JSON list (in a JSON line, or a cell that
        starts with "["), else the cell cut at --label_separator. Raises ValueError for
        a cell that looks like a JSON list but is not a list of texts."""
        if isinstance(raw, str) and raw.strip().startswith("["):
            try:
                raw = json.loads(raw)
            except ValueError as e:
                raise ValueError(f"{raw!r} starts as a JSON list but is not one "
                                 f"({getattr(e, 'msg', e)})") from None
        if isinstance(raw, list):
            if not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in raw):
                raise ValueError(f"{raw!r} is not a list of labels")
            return [str(label).strip() for label in raw if str(label).strip()]
        parts = str(raw).split(self.options.label_separator)
        return [part.strip() for part in parts if part.strip()]

    def read(self, split, paths) -> list[Example]:
        fields = self.fields
        with_label = split != "test" and fields.label is not None
        examples, logs = [], []
        for path in paths:
            skips, before = SkipLog(f"{split} row", path), len(examples)
            logs.append(skips)
            here, unended = None, False
            for here, row, unended in tabular.complete_rows(
                    path, fields, self.options.header, with_label, skips):
                labels = None
                if fields.label is not None and row.get(fields.label) is not None:
                    try:
                        labels = tuple(dict.fromkeys(self._row_labels(row[fields.label])))
                    except ValueError as e:
                        skips.skip(here, "label not a JSON list", str(e))
                        continue
                    unknown = [x for x in labels if self.labels and x not in self.labels]
                    if unknown:
                        skips.skip(here, tabular.UNKNOWN_LABEL,
                                   f"label(s) {', '.join(map(repr, unknown))} not one of "
                                   f"the {len(self.labels)} labels")
                        continue
                text_b = None if fields.text_b is None else str(row[fields.text_b])
                examples.append(Example(f"{split}-{len(examples)}", str(row[fields.text_a]),
                                        text_b, labels))
                skips.keep(*(labels or ()))
            if not self.labels and len(examples) > before:
                tabular.drop_cut_short_label(examples, unended, lambda e: e.labels or (),
                                             skips, here)
            skips.summary()
        if not examples:
            raise tabular.TableDataError(
                f"no usable {split} row in {', '.join(paths)}: "
                + "; ".join(log.describe() for log in logs))
        return examples

    class Data(Task.Data):
        eval_outputs = (names.PROBABILITIES,)

        @property
        def label_features(self) -> tuple[str, ...]:
            return self.with_windows((names.LABEL_IDS,))

        def discover_labels(self, examples) -> list[str]:
            return sorted({label for e in examples for label in (e.labels or ())})

        def record_spec(self) -> dict:
            spec = {names.LABEL_IDS: tf.io.FixedLenFeature([len(self.task.labels)],
                                                           tf.int64)}
            if self.long_text.windows:
                spec[names.EXAMPLE_INDEX] = tf.io.FixedLenFeature([], tf.int64)
            return spec

        def split_records(self, split, data):
            """A record per example (`features`), or with windows one per window of it
            (`pack_windows`; training's: `--max_windows_per_text` at most), each with the
            example's labels and `example_index`."""
            if not self.long_text.windows:
                yield from super().split_records(split, data)
                return
            for index, example in enumerate(data):
                labels = self.task.multi_hot(example.labels)
                for window in self.pack_windows(example.text_a, example.text_b, split):
                    yield {**window, names.LABEL_IDS: labels,
                           names.EXAMPLE_INDEX: [index]}

        def example_outputs(self, outputs):
            """With windows, each label's probability of a text: the most any of its
            windows gives it."""
            if not self.long_text.windows:
                return outputs
            return sentence_records.pool_windows(outputs, WINDOW_POOLING)

        def cache_settings(self) -> dict:
            o = self.options
            return {**super().cache_settings(),
                    "fields": [o.text_a_field, o.text_b_field, o.label_field],
                    "header": o.header, "label_separator": o.label_separator}

    def multi_hot(self, labels) -> list[int]:
        index = {label: i for i, label in enumerate(self.labels)}
        hot = [0] * len(self.labels)
        for label in labels or ():
            hot[index[label]] = 1
        return hot

    def features(self, example: Example) -> dict:
        return {**self.data.pack(example.text_a, example.text_b),
                names.LABEL_IDS: self.multi_hot(example.labels)}

    class Teaching(Task.Teaching):
        soft_loss = "sigmoid"  # of each label's logit

        def transfer_is_pair(self) -> bool:
            return self.task.fields.text_b is not None

        def write_transfer_records(self, texts, path) -> int:
            return self.task.data.write_records(
                "train", [Example(f"transfer-{i}", a, b, ())
                          for i, (a, b) in enumerate(texts)], path)

        def pseudo_label(self, example, teacher_output) -> None:
            """The labels whose probability by the teacher is at least --threshold (0.5
            where not given)."""
            threshold = self.task.options.threshold or DEFAULT_THRESHOLD
            probabilities = 1 / (1 + np.exp(-np.asarray(teacher_output, np.float64)))
            example.features.feature[names.LABEL_IDS].int64_list.value[:] = (
                probabilities >= threshold).astype(np.int64).tolist()

    # -------------------------------------------------------------------- model
    def build_model(self, config):
        return AlbertMultiLabelClassifier(config, len(self.labels), seed=self.options.seed,
                                          dropout_rate=self.options.dropout_prob)

    def objective(self):
        return MeanObjective(lambda o, f: multi_label_loss(o[names.LOGITS],
                                                           f[names.LABEL_IDS]))

    # ------------------------------------------------------------------ results
    def threshold(self, output_dir: str) -> float:
        return threshold_for(self.options.threshold, output_dir)

    def metrics(self, examples, outputs) -> dict:
        probabilities, gold = outputs[names.PROBABILITIES], outputs[names.LABEL_IDS]
        if not self.options.tune_threshold:
            return scores(probabilities, gold, self.threshold(self.options.output_dir),
                          self.labels)
        tried = [scores(probabilities, gold, t, self.labels) for t in THRESHOLD_GRID]
        return max(tried, key=lambda s: s["micro_f1"])  # the first (lowest) of ties

    def prepare_model(self, model, output_dir: str, best: dict) -> None:
        """The dev-tuned threshold (--tune_threshold) kept as threshold.txt beside the
        model; the model predicts with the run's threshold."""
        if self.options.tune_threshold and best:
            fileio.write_text_atomically(os.path.join(output_dir, THRESHOLD_FILE),
                                         f"{best['threshold']}\n")
            logging.info("kept the dev-tuned threshold %s", best["threshold"])
        if model is not None:
            model.threshold = self.threshold(output_dir)

    def write_predictions(self, examples, outputs, output_dir, step) -> str:
        """`multi_label_predictions.jsonl`: per example its `id`, the predicted `labels`,
        every label's `probabilities` and the `gold` labels (or null); with gold labels
        in the file, its scores to test_results.txt."""
        threshold = self.threshold(output_dir)
        probabilities = outputs[names.PROBABILITIES]
        lines = []
        for example, row in zip(examples, probabilities):
            lines.append(json.dumps({
                "id": example.guid,
                "labels": [x for x, p in zip(self.labels, row) if p >= threshold],
                "probabilities": {x: round(float(p), 6) for x, p in zip(self.labels, row)},
                "gold": None if example.labels is None else list(example.labels),
            }, ensure_ascii=False) + "\n")
        path = os.path.join(output_dir, f"{self.name}_predictions.jsonl")
        fileio.write_text_atomically(path, "".join(lines))
        if examples and all(e.labels is not None for e in examples):
            gold = np.array([self.multi_hot(e.labels) for e in examples])
            results = scores(probabilities, gold, threshold, self.labels)
            results["global_step"] = step
            write_results(os.path.join(output_dir, "test_results.txt"), results,
                          title="Test results")
        return path

    def export_options(self) -> dict:
        return {"is_pair": self.options.text_b_field is not None,
                **self.data.long_text.export_options()}
