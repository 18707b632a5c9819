"""GLUE metrics, computed with numpy, and the GLUE server's submission files.

The metrics: `accuracy`, `f1_score` (binary, of one positive class), `matthews_corrcoef`
(binary or multi-class), `pearson_corrcoef` and `spearman_corrcoef` (average ranks for
ties). `task_metrics(task, predictions, labels)` gives a task's scores under the keys of
the original `run_classifier.py` / `classifier_utils.py` evaluation:

- every classification task: `eval_accuracy`;
- CoLA: `matthew_corr` (the original's key; 0 when a confusion-matrix margin is empty, as
  its `div_no_nan`) and `eval_accuracy`;
- STS-B: `pearson` and `MSE` (the original's keys), plus `spearman`;
- MRPC and QQP: `eval_accuracy` plus `f1` (positive class "1", as GLUE reports it);
- MNLI: task `mnli` is the matched dev set and `mismnli` the mismatched one, each scored
  with `eval_accuracy`.

The original's `eval_loss` needs the model's loss and is left to the training script.
`task.metric` (from `albert_tf.data.glue.GLUE_TASKS`) names the key the original uses to
pick its best checkpoint; it is always among the keys returned.

`write_glue_submission(task, predictions, path)` writes the test-set predictions as the
GLUE server reads them: `<TASK>.tsv` (`CoLA.tsv`, `MNLI-m.tsv`, `MNLI-mm.tsv`, `AX.tsv`, ...),
a header `index<TAB>prediction`, then one row per test example: its index and the label
string (`entailment`, `1`, ...) or, for STS-B, the score.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.data.cache import write_text_atomically
from albert_tf.data.glue import get_task
from albert_tf.data.sentence_records import SentenceTask

ACCURACY_KEY = "eval_accuracy"
MCC_KEY = "matthew_corr"
PEARSON_KEY = "pearson"
SPEARMAN_KEY = "spearman"
MSE_KEY = "MSE"
F1_KEY = "f1"

# Tasks GLUE reports with F1 as well as accuracy, and their positive label.
F1_TASKS = {"mrpc": "1", "qqp": "1"}

# The file the GLUE server expects for each task's test predictions.
SUBMISSION_FILES = {
    "cola": "CoLA.tsv",
    "sst-2": "SST-2.tsv",
    "mrpc": "MRPC.tsv",
    "sts-b": "STS-B.tsv",
    "qqp": "QQP.tsv",
    "mnli": "MNLI-m.tsv",
    "mismnli": "MNLI-mm.tsv",
    "qnli": "QNLI.tsv",
    "rte": "RTE.tsv",
    "wnli": "WNLI.tsv",
    "ax": "AX.tsv",
}
SUBMISSION_HEADER = "index\tprediction"


# ------------------------------------------------------------------------ input checks
def _vector(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"{name} must be a vector, got shape {array.shape}")
    return array


def _pair(predictions, labels) -> tuple[np.ndarray, np.ndarray]:
    predictions = _vector(predictions, "predictions")
    labels = _vector(labels, "labels")
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
    if len(labels) == 0:
        raise ValueError("no predictions and labels to score")
    return predictions, labels


def _numbers(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numbers, got {values.dtype}")
    return values.astype(np.float64)


# ----------------------------------------------------------------------------- metrics
def accuracy(predictions, labels) -> float:
    """The fraction of predictions equal to their label."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, positive=1) -> float:
    """Binary F1 of class `positive`: 2 TP / (2 TP + FP + FN); 0 when there is no positive
    label and no positive prediction (scikit-learn's value, which GLUE uses)."""
    predictions, labels = _pair(predictions, labels)
    predicted, actual = predictions == positive, labels == positive
    true_positives = np.sum(predicted & actual)
    denominator = 2 * true_positives + np.sum(predicted & ~actual) + np.sum(~predicted & actual)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corrcoef(predictions, labels) -> float:
    """Matthews correlation coefficient, binary or multi-class (the R_K statistic; for two
    classes (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))). 0 when the
    denominator is 0 (a single class predicted or present), as the original's
    `div_no_nan` and scikit-learn."""
    predictions, labels = _pair(predictions, labels)
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    k = len(classes)
    true_codes, predicted_codes = codes[:len(labels)], codes[len(labels):]
    confusion = np.zeros((k, k), np.float64)
    np.add.at(confusion, (true_codes, predicted_codes), 1.0)
    n = confusion.sum()
    correct = np.trace(confusion)
    true_totals, predicted_totals = confusion.sum(axis=1), confusion.sum(axis=0)
    covariance = correct * n - np.dot(true_totals, predicted_totals)
    variance_predicted = n * n - np.dot(predicted_totals, predicted_totals)
    variance_true = n * n - np.dot(true_totals, true_totals)
    denominator = np.sqrt(variance_predicted * variance_true)
    return float(covariance / denominator) if denominator > 0 else 0.0


def pearson_corrcoef(predictions, labels) -> float:
    """Pearson's r; NaN when either side is constant (the correlation is undefined) or
    holds a NaN."""
    predictions, labels = _pair(predictions, labels)
    x = _numbers(predictions, "predictions")
    y = _numbers(labels, "labels")
    if np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    if denominator == 0:
        return float("nan")
    return float(np.clip(np.dot(x, y) / denominator, -1.0, 1.0))


def rankdata(values) -> np.ndarray:
    """1-based ranks of `values`, tied values sharing the average of their ranks."""
    values = _numbers(_vector(values, "values"), "values")
    if np.isnan(values).any():
        raise ValueError("cannot rank NaN values")
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_group = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    group = np.cumsum(starts_group) - 1
    sizes = np.bincount(group)
    last_rank = np.cumsum(sizes)
    mean_rank = last_rank - (sizes - 1) / 2.0
    ranks = np.empty(len(values), np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def spearman_corrcoef(predictions, labels) -> float:
    """Spearman's rho: Pearson's r of the average ranks; NaN as `pearson_corrcoef`."""
    predictions, labels = _pair(predictions, labels)
    x = _numbers(predictions, "predictions")
    y = _numbers(labels, "labels")
    if np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    return pearson_corrcoef(rankdata(x), rankdata(y))


def mean_squared_error(predictions, labels) -> float:
    predictions, labels = _pair(predictions, labels)
    difference = _numbers(predictions, "predictions") - _numbers(labels, "labels")
    return float(np.mean(difference * difference))


# -------------------------------------------------------------- task-level conversion
def _label_indices(task: SentenceTask, values, name: str) -> np.ndarray:
    """Class indices from label strings, indices, or [N, num_labels] logits/probabilities."""
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == len(task.labels) and array.dtype.kind in "biuf":
        return np.argmax(array, axis=1)
    array = _vector(array, name)
    if array.dtype.kind in "US" or (array.dtype == object and array.size
                                    and isinstance(array.flat[0], str)):
        index = {label: i for i, label in enumerate(task.labels)}
        unknown = sorted({str(v) for v in array.tolist() if v not in index})
        if unknown:
            raise ValueError(f"{name}: unknown {task.name} label(s) {unknown[:5]} "
                             f"(expected one of {', '.join(task.labels)})")
        return np.array([index[v] for v in array.tolist()], np.int64)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{name}: class indices must be integers; give logits as "
                             f"[N, {len(task.labels)}]")
        array = array.astype(np.int64)
    elif array.dtype.kind not in "biu":
        raise ValueError(f"{name}: expected class indices, label strings or logits, "
                         f"got {array.dtype}")
    bad = (array < 0) | (array >= len(task.labels))
    if bad.any():
        raise ValueError(f"{name}: class index {int(array[bad][0])} out of range for "
                         f"{task.name} ({len(task.labels)} labels)")
    return array.astype(np.int64)


def _scores(values, name: str) -> np.ndarray:
    return _numbers(_vector(values, name), name)


def _real_only(values: np.ndarray, is_real_example) -> np.ndarray:
    if is_real_example is None:
        return values
    mask = _vector(is_real_example, "is_real_example").astype(bool)
    if len(mask) != len(values):
        raise ValueError(f"is_real_example has {len(mask)} entries for {len(values)} "
                         "predictions")
    return values[mask]


def task_metrics(task: str | SentenceTask, predictions, labels, *,
                 is_real_example=None) -> dict[str, float]:
    """The task's scores under the original's eval keys (see the module docstring).

    predictions: class indices, label strings or [N, num_labels] logits (classification);
      scores, [N] or [N, 1] (STS-B).
    labels: class indices or label strings; scores for STS-B.
    is_real_example: optional 0/1 mask; examples with 0 (the original's padding
      examples) are left out, as its metric weights do.
    """
    task = get_task(task)
    if task.is_regression:
        x, y = _scores(predictions, "predictions"), _scores(labels, "labels")
    else:
        x = _label_indices(task, predictions, "predictions")
        y = _label_indices(task, labels, "labels")
    if len(x) != len(y):
        raise ValueError(f"{len(x)} predictions but {len(y)} labels")
    x, y = _real_only(x, is_real_example), _real_only(y, is_real_example)
    if task.is_regression:
        return {PEARSON_KEY: pearson_corrcoef(x, y), SPEARMAN_KEY: spearman_corrcoef(x, y),
                MSE_KEY: mean_squared_error(x, y)}
    result = {ACCURACY_KEY: accuracy(x, y)}
    if task.metric == MCC_KEY:
        result[MCC_KEY] = matthews_corrcoef(x, y)
    if task.name in F1_TASKS:
        result[F1_KEY] = f1_score(x, y, positive=task.labels.index(F1_TASKS[task.name]))
    return result


# ----------------------------------------------------------------------- submissions
def submission_file_name(task: str | SentenceTask) -> str:
    """The GLUE server's file name for the task's test predictions (`MNLI-mm.tsv`, ...)."""
    return SUBMISSION_FILES[get_task(task).name]


def submission_lines(task: str | SentenceTask, predictions,
                     ids: Sequence | None = None) -> list[str]:
    """The submission file's lines (header included, no newlines)."""
    task = get_task(task)
    if task.is_regression:
        values = _scores(predictions, "predictions")
        if not np.all(np.isfinite(values)):
            raise ValueError("STS-B predictions must be finite numbers")
        texts = [f"{v:.3f}" for v in values.tolist()]
    else:
        texts = [task.labels[i] for i in _label_indices(task, predictions, "predictions")]
    if ids is None:
        ids = range(len(texts))
    ids = [str(i) for i in ids]
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} predictions")
    if not texts:
        raise ValueError(f"no {task.name} predictions to write")
    bad = [i for i in ids if not i or "\t" in i or "\n" in i]
    if bad:
        raise ValueError(f"ids must be non-empty and hold no tab or newline: {bad[0]!r}")
    return [SUBMISSION_HEADER] + [f"{i}\t{t}" for i, t in zip(ids, texts)]


def write_glue_submission(task: str | SentenceTask, predictions, path,
                          ids: Sequence | None = None) -> str:
    """Writes the task's test predictions as the GLUE server expects them; returns the
    file written.

    path: a directory (created if needed; the file gets the task's GLUE name, e.g.
      `MRPC.tsv`), or a file name ending in `.tsv`.
    predictions: as for `task_metrics`, in test-file order.
    ids: the `index` column (default 0, 1, ...; the original writes each test
      example's guid, which is the file's index column).
    The file is written under a temporary name and renamed.
    """
    task = get_task(task)
    lines = submission_lines(task, predictions, ids)
    path = os.fspath(path)
    if not path.endswith(".tsv"):
        tf.io.gfile.makedirs(path)
        path = os.path.join(path, submission_file_name(task))
    else:
        parent = os.path.dirname(path)
        if parent:
            tf.io.gfile.makedirs(parent)
    write_text_atomically(path, "\n".join(lines) + "\n")
    return path

