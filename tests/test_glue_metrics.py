"""GLUE metrics and submission files (albert_tf.evaluation.glue_metrics).

Expected values are worked out by hand (counts of a small confusion matrix) or computed
here from the definitions in plain Python, independently of the module's numpy code.
"""

import math
import os
import pathlib

import numpy as np
import pytest

from albert_tf.data import glue
from albert_tf.evaluation import glue_metrics as gm

GLUE_FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "glue"


# ------------------------------------------------------------------- plain references
def _pearson_reference(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def _average_ranks_reference(values):
    """Rank of each value = mean of the 1-based positions its equals take when sorted."""
    ordered = sorted(values)
    return [sum(i + 1 for i, v in enumerate(ordered) if v == value) / ordered.count(value)
            for value in values]


def _mcc_reference(predictions, labels):
    """Multi-class MCC as the correlation of the one-hot matrices (Gorodkin's R_K)."""
    classes = sorted(set(predictions) | set(labels))
    x = [[float(p == c) for c in classes] for p in predictions]
    y = [[float(t == c) for c in classes] for t in labels]
    n = len(labels)

    def cov(a, b):
        total = 0.0
        for k in range(len(classes)):
            ma = sum(row[k] for row in a) / n
            mb = sum(row[k] for row in b) / n
            total += sum((ra[k] - ma) * (rb[k] - mb) for ra, rb in zip(a, b))
        return total

    denominator = math.sqrt(cov(x, x) * cov(y, y))
    return cov(x, y) / denominator if denominator else 0.0


# ---------------------------------------------------------------------------- metrics
def test_accuracy_by_hand():
    assert gm.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    assert gm.accuracy(np.array([2, 0, 1]), np.array([2, 0, 1])) == 1.0


def test_f1_by_hand_and_edge_cases():
    # TP = 2 (positions 0, 4), FP = 1 (1), FN = 1 (3): P = R = 2/3, F1 = 2/3.
    assert gm.f1_score([1, 1, 0, 0, 1], [1, 0, 0, 1, 1]) == pytest.approx(2 / 3)
    # TP = 1, FP = 2, FN = 0: P = 1/3, R = 1, F1 = 2PR/(P+R) = 1/2.
    assert gm.f1_score([1, 1, 1, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    # The positive class is a parameter: for class 0 the same data has TP = 1 (position 2),
    # FP = 1 (3), FN = 1 (1): F1 = 2 / 4.
    assert gm.f1_score([1, 1, 0, 0, 1], [1, 0, 0, 1, 1], positive=0) == pytest.approx(0.5)
    # No positive label and no positive prediction: 0 (not NaN), as scikit-learn/GLUE.
    assert gm.f1_score([0, 0, 0], [0, 0, 0]) == 0.0
    # Positives exist but none predicted (recall 0) / predicted but none exist (precision 0).
    assert gm.f1_score([0, 0, 0], [1, 0, 1]) == 0.0
    assert gm.f1_score([1, 1, 0], [0, 0, 0]) == 0.0
    assert gm.f1_score([1, 0, 1], [1, 0, 1]) == 1.0


def test_matthews_identities_and_hand_case():
    labels = [1, 0, 1, 1, 0, 0, 1]
    assert gm.matthews_corrcoef(labels, labels) == pytest.approx(1.0)
    assert gm.matthews_corrcoef([1 - v for v in labels], labels) == pytest.approx(-1.0)
    # One class predicted: an empty margin, 0 as the original's div_no_nan.
    assert gm.matthews_corrcoef([1] * 7, labels) == 0.0
    assert gm.matthews_corrcoef([0] * 7, labels) == 0.0
    # TP = 3, TN = 2, FP = 1, FN = 2: (3*2 - 1*2) / sqrt(4 * 5 * 3 * 4).
    predictions = [1, 1, 1, 1, 0, 0, 0, 0]
    truth = [1, 1, 1, 0, 0, 0, 1, 1]
    assert gm.matthews_corrcoef(predictions, truth) == pytest.approx(4 / math.sqrt(240))
    # The binary MCC is the phi coefficient: Pearson's r of the 0/1 vectors; symmetric.
    assert gm.matthews_corrcoef(predictions, truth) == pytest.approx(
        _pearson_reference(predictions, truth))
    assert gm.matthews_corrcoef(truth, predictions) == pytest.approx(
        gm.matthews_corrcoef(predictions, truth))


@pytest.mark.parametrize("seed", range(3))
def test_matthews_multiclass_equals_the_one_hot_correlation(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=40).tolist()
    predictions = [t if rng.random() < 0.6 else int(rng.integers(0, 3)) for t in labels]
    assert gm.matthews_corrcoef(predictions, labels) == pytest.approx(
        _mcc_reference(predictions, labels))
    # Label strings work the same as indices.
    names = np.array(["contradiction", "entailment", "neutral"])
    assert gm.matthews_corrcoef(names[predictions], names[labels]) == pytest.approx(
        _mcc_reference(predictions, labels))


def test_pearson_by_hand_and_invariances():
    # x = 1, 2, 3; y = 2, 4, 7: Sxy = 5, Sxx = 2, Syy = 114/9.
    assert gm.pearson_corrcoef([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30)
    r = gm.pearson_corrcoef(x, y)
    assert r == pytest.approx(_pearson_reference(x.tolist(), y.tolist()))
    assert gm.pearson_corrcoef(3 * x + 1, y) == pytest.approx(r)
    assert gm.pearson_corrcoef(-x, y) == pytest.approx(-r)
    assert gm.pearson_corrcoef(x, 2 * x - 5) == pytest.approx(1.0)
    # A constant side has no correlation: NaN, not a made-up number.
    assert math.isnan(gm.pearson_corrcoef([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]))


def test_average_ranks_with_ties():
    assert gm.rankdata([10, 20, 20, 30]).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert gm.rankdata([3.0, 1.0, 3.0, 3.0, 0.5]).tolist() == [4.0, 2.0, 4.0, 4.0, 1.0]
    rng = np.random.default_rng(1)
    values = rng.integers(0, 6, size=50).astype(float)  # many ties
    assert gm.rankdata(values).tolist() == pytest.approx(_average_ranks_reference(values.tolist()))
    with pytest.raises(ValueError, match="NaN"):
        gm.rankdata([1.0, float("nan")])


def test_spearman_with_ties_is_pearson_of_average_ranks():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, size=40).astype(float)           # STS-B-like tied scores
    y = np.round(x + rng.normal(scale=1.5, size=40))
    expected = _pearson_reference(_average_ranks_reference(x.tolist()),
                                  _average_ranks_reference(y.tolist()))
    assert gm.spearman_corrcoef(x, y) == pytest.approx(expected)
    # Without ties: 1 - 6 sum(d^2) / (n (n^2 - 1)); ranks of x 1..5, of y: 2 1 4 3 5.
    assert gm.spearman_corrcoef([1, 2, 3, 4, 5], [20, 10, 40, 30, 50]) == pytest.approx(
        1 - 6 * 4 / (5 * 24))
    # Any increasing transform keeps rho at 1 (Pearson's r would not be 1).
    z = rng.normal(size=25)
    assert gm.spearman_corrcoef(z, np.exp(3 * z)) == pytest.approx(1.0)
    assert gm.pearson_corrcoef(z, np.exp(3 * z)) < 0.99


def test_mismatched_or_empty_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="3 predictions but 2 labels"):
        gm.accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="3 predictions but 2 labels"):
        gm.task_metrics("cola", [1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="no predictions"):
        gm.f1_score([], [])
    with pytest.raises(ValueError, match="vector"):
        gm.pearson_corrcoef(np.ones((2, 2)), np.ones((2, 2)))


# ---------------------------------------------------------------------- task metrics
def test_task_metrics_keys_are_the_originals():
    expected = {
        "cola": {"eval_accuracy", "matthew_corr"},
        "sst-2": {"eval_accuracy"},
        "mrpc": {"eval_accuracy", "f1"},
        "qqp": {"eval_accuracy", "f1"},
        "sts-b": {"pearson", "spearman", "MSE"},
        "mnli": {"eval_accuracy"},
        "mismnli": {"eval_accuracy"},
        "qnli": {"eval_accuracy"},
        "rte": {"eval_accuracy"},
        "wnli": {"eval_accuracy"},
        "ax": {"eval_accuracy"},
    }
    assert set(expected) == set(glue.GLUE_TASKS)
    for name, task in glue.GLUE_TASKS.items():
        if task.is_regression:
            predictions, labels = [0.5, 2.0, 4.5, 3.0], [1.0, 2.5, 4.0, 2.0]
        else:
            predictions, labels = [0, 1, 1, 0], [0, 1, 0, 0]
        result = gm.task_metrics(name, predictions, labels)
        assert set(result) == expected[name], name
        # The key the original picks its best checkpoint with is among them.
        assert task.metric in result


def test_task_metrics_values():
    # MRPC: indices, label strings and logits give the same scores.
    labels = ["1", "0", "1", "1", "0"]
    indices = [1, 1, 1, 0, 0]
    logits = np.array([[-1.0, 2.0], [0.1, 0.3], [-3.0, 3.0], [1.0, -1.0], [2.0, 0.0]])
    for predictions in (indices, [str(i) for i in indices], logits):
        result = gm.task_metrics("MRPC", predictions, labels)
        assert result["eval_accuracy"] == pytest.approx(3 / 5)
        # TP = 2, FP = 1, FN = 1.
        assert result["f1"] == pytest.approx(2 / 3)
    # CoLA: MCC and accuracy.
    cola = gm.task_metrics("cola", [1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 1, 1])
    assert cola == pytest.approx({"matthew_corr": 4 / math.sqrt(240), "eval_accuracy": 5 / 8})
    # MNLI with label strings and an alias for the mismatched set.
    mnli_labels = ["entailment", "neutral", "contradiction", "neutral"]
    mnli_predictions = ["entailment", "neutral", "neutral", "neutral"]
    for task in ("mnli", "MNLI-mm", "mismnli"):
        assert gm.task_metrics(task, mnli_predictions, mnli_labels) == {"eval_accuracy": 0.75}
    # STS-B: [N, 1] predictions as the regression head gives them.
    x = np.array([[0.5], [2.0], [4.5], [3.0], [3.0]], np.float32)
    y = [1.0, 2.5, 4.0, 2.0, 3.0]
    stsb = gm.task_metrics("sts-b", x, y)
    assert stsb["pearson"] == pytest.approx(_pearson_reference(x[:, 0].tolist(), y))
    assert stsb["spearman"] == pytest.approx(_pearson_reference(
        _average_ranks_reference(x[:, 0].tolist()), _average_ranks_reference(y)))
    assert stsb["MSE"] == pytest.approx(np.mean((x[:, 0] - np.array(y)) ** 2))


def test_task_metrics_leaves_out_padding_examples():
    full = gm.task_metrics("sst2", [1, 0, 1, 1], [1, 0, 0, 0], is_real_example=[1, 1, 0, 0])
    assert full == {"eval_accuracy": 1.0}


def test_task_metrics_errors():
    with pytest.raises(ValueError, match="unknown GLUE task 'nope'"):
        gm.task_metrics("nope", [0], [0])
    with pytest.raises(ValueError, match="out of range"):
        gm.task_metrics("rte", [0, 2], [0, 1])
    with pytest.raises(ValueError, match="unknown rte label"):
        gm.task_metrics("rte", ["entailment", "maybe"], [0, 1])
    with pytest.raises(ValueError, match="integers"):
        gm.task_metrics("rte", [0.4, 1.0], [0, 1])
    with pytest.raises(ValueError, match="is_real_example"):
        gm.task_metrics("rte", [0, 1], [0, 1], is_real_example=[1])


# ------------------------------------------------------------------------ submission
def test_submission_file_names():
    assert {name: gm.submission_file_name(name) for name in glue.GLUE_TASKS} == {
        "cola": "CoLA.tsv", "sst-2": "SST-2.tsv", "mrpc": "MRPC.tsv", "sts-b": "STS-B.tsv",
        "qqp": "QQP.tsv", "mnli": "MNLI-m.tsv", "mismnli": "MNLI-mm.tsv", "qnli": "QNLI.tsv",
        "rte": "RTE.tsv", "wnli": "WNLI.tsv", "ax": "AX.tsv"}


def test_submission_contents(tmp_path):
    path = gm.write_glue_submission("mrpc", np.array([[0.2, 0.9], [1.0, -1.0], [0.0, 3.0]]),
                                    tmp_path / "out")
    assert path == os.path.join(tmp_path / "out", "MRPC.tsv")
    assert pathlib.Path(path).read_text() == "index\tprediction\n0\t1\n1\t0\n2\t1\n"

    path = gm.write_glue_submission("mnli-mm", [2, 0, 1], tmp_path)
    assert pathlib.Path(path).name == "MNLI-mm.tsv"
    assert pathlib.Path(path).read_text() == (
        "index\tprediction\n0\tneutral\n1\tcontradiction\n2\tentailment\n")
    path = gm.write_glue_submission("MNLI", ["entailment"], tmp_path)
    assert pathlib.Path(path).name == "MNLI-m.tsv"

    path = gm.write_glue_submission("ax", [1, 1], tmp_path)
    assert pathlib.Path(path).read_text() == "index\tprediction\n0\tentailment\n1\tentailment\n"

    path = gm.write_glue_submission("qnli", [1, 0], tmp_path)
    assert pathlib.Path(path).read_text() == (
        "index\tprediction\n0\tnot_entailment\n1\tentailment\n")

    path = gm.write_glue_submission("sts-b", np.array([[4.25], [0.1234], [5.0]], np.float32),
                                    tmp_path / "STS-B-run2.tsv")
    assert path == str(tmp_path / "STS-B-run2.tsv")
    assert pathlib.Path(path).read_text() == "index\tprediction\n0\t4.250\n1\t0.123\n2\t5.000\n"
    # Only the final files: every temporary file was renamed.
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "MRPC.tsv", "QNLI.tsv", "STS-B-run2.tsv"]


@pytest.mark.parametrize("task", ["CoLA", "MRPC", "MNLI", "mismnli", "ax", "rte"])
def test_submission_rows_follow_the_test_file(task, tmp_path):
    """Index column = the test file's ids (the original writes each example's guid)."""
    examples = glue.get_processor(task).get_test_examples(GLUE_FIXTURES)
    labels = glue.get_task(task).labels
    predictions = [i % len(labels) for i in range(len(examples))]
    path = gm.write_glue_submission(task, predictions, tmp_path,
                                    ids=[e.guid for e in examples])
    rows = [line.split("\t") for line in pathlib.Path(path).read_text().splitlines()]
    assert rows[0] == ["index", "prediction"]
    assert rows[1:] == [[e.guid, labels[p]] for e, p in zip(examples, predictions)]
    # The fixtures' guids are their index column: 0, 1, ...
    assert [row[0] for row in rows[1:]] == [str(i) for i in range(len(examples))]


def test_submission_overwrites_and_rejects_bad_input(tmp_path):
    gm.write_glue_submission("sst-2", [1, 1, 1], tmp_path)
    path = gm.write_glue_submission("sst-2", [0], tmp_path)
    assert pathlib.Path(path).read_text() == "index\tprediction\n0\t0\n"
    with pytest.raises(ValueError, match="2 ids for 1 predictions"):
        gm.write_glue_submission("sst-2", [0], tmp_path, ids=["a", "b"])
    with pytest.raises(ValueError, match="finite"):
        gm.write_glue_submission("sts-b", [1.0, float("nan")], tmp_path)
    with pytest.raises(ValueError, match="no sst-2 predictions"):
        gm.write_glue_submission("sst-2", [], tmp_path)
    with pytest.raises(ValueError, match="unknown GLUE task"):
        gm.write_glue_submission("squad", [0], tmp_path)
    # Nothing half-written was left behind by the failures.
    assert [p.name for p in tmp_path.iterdir()] == ["SST-2.tsv"]


def test_every_class_is_written_as_its_label_string():
    for name, task in glue.GLUE_TASKS.items():
        if task.is_regression:
            continue
        indices = list(range(len(task.labels)))
        assert gm.submission_lines(name, indices) == ["index\tprediction"] + [
            f"{i}\t{task.labels[i]}" for i in indices]
