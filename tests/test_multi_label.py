"""Multi-label classification (`--task_name=multi_label`, `albert_tf.tasks.multi_label`)
end to end through run_classifier.py: an easy keyword task it must learn, the real
GoEmotions rows (tests/fixtures/goemotions), scikit-learn's F1 on what it writes, the
tuned threshold, the exports (SavedModel text in, LiteRT) and Hugging Face's
`problem_type: multi_label_classification` both ways."""

import csv
import json
import random

import numpy as np
import pytest

from albert_tf import convert, names
from albert_tf.tasks.multi_label import AlbertMultiLabelClassifier, scores
from tests.helpers.scripts import FIXTURES, SPM, run_script, serve_text
from tests.helpers.scripts import read_results as results
from tests.helpers.tiny import write_tiny_config

GOEMOTIONS = FIXTURES / "goemotions"
TOPICS = {"sports": ["football"], "politics": ["election"], "science": ["physics"]}
FILLER = ["the", "news", "today", "about", "was", "really", "story", "people"]


def easy_rows(count, rng):
    """(text, labels): each text names one or two topics by their words."""
    rows = []
    for _ in range(count):
        labels = sorted(rng.sample(sorted(TOPICS), rng.choice([1, 1, 2])))
        words = rng.sample(FILLER, 3) + [rng.choice(TOPICS[t]) for t in labels]
        rng.shuffle(words)
        rows.append((" ".join(words), labels))
    return rows


def write_splits(root, counts, rows, seed, to_json):
    """`<root>/<split>.jsonl` for each (split, count) of `counts`: `rows(count, rng)`
    made into JSON objects by `to_json(text, label)`."""
    rng = random.Random(seed)
    for split, count in counts:
        with open(root / f"{split}.jsonl", "w") as f:
            for text, label in rows(count, rng):
                f.write(json.dumps(to_json(text, label)) + "\n")


def flags(config, out, **changes):
    values = {"spm_model_file": SPM, "albert_config_file": config, "output_dir": out,
              "max_seq_length": 16, "train_batch_size": 16, "eval_batch_size": 16,
              "predict_batch_size": 16, "train_step": 600, "warmup_step": 10,
              "save_checkpoints_steps": 300, "iterations_per_loop": 300,
              "learning_rate": 3e-3, "dropout_prob": 0}
    values.update(changes)
    return [f"--{k}={v}" for k, v in values.items()]


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def easy(tmp_path_factory):
    """The keyword task as JSON lines (labels as lists), trained with the threshold tuned
    on dev, its test file predicted and the model exported every way."""
    root = tmp_path_factory.mktemp("easy")
    write_splits(root, [("train", 400), ("dev", 80), ("test", 12)], easy_rows, 3,
                 lambda text, labels: {"text": text, "topics": labels})
    config = write_tiny_config(root)
    out = root / "out"
    run_script("run_classifier.py", "--task_name=multi_label", f"--data_dir={root}",
               "--text_a_field=text", "--label_field=topics", "--do_train", "--do_eval",
               "--do_predict", "--tune_threshold", f"--export_dir={out / 'export'}",
               f"--export_tflite={root / 'model.tflite'}", f"--export_hf_dir={root / 'hf'}",
               *flags(config, out))
    return root


def test_learns_and_scores_as_scikit_learn_on_what_it_writes(easy):
    from sklearn.metrics import accuracy_score, f1_score

    out = easy / "out"
    assert (out / "labels.txt").read_text() == "politics\nscience\nsports\n"
    best = results(out / "best_trial.txt")
    assert best["micro_f1"] >= 0.9 and best["macro_f1"] >= 0.9  # chance is far below
    for label in TOPICS:
        assert {f"{label}_{m}" for m in ("precision", "recall", "f1", "support")} <= set(best)
    # The tuned threshold is kept beside the model and used for the predictions.
    threshold = float((out / "threshold.txt").read_text())
    assert threshold == best["threshold"]
    predicted = read_jsonl(out / "multi_label_predictions.jsonl")
    assert len(predicted) == 12
    for row in predicted:
        assert set(row["probabilities"]) == set(TOPICS)
        assert row["labels"] == [x for x, p in row["probabilities"].items() if p >= threshold]
    labels = sorted(TOPICS)
    gold = [[int(x in r["gold"]) for x in labels] for r in predicted]
    guess = [[int(x in r["labels"]) for x in labels] for r in predicted]
    test = results(out / "test_results.txt")
    assert test["micro_f1"] == pytest.approx(f1_score(gold, guess, average="micro"))
    assert test["macro_f1"] == pytest.approx(f1_score(gold, guess, average="macro"))
    assert test["subset_accuracy"] == pytest.approx(accuracy_score(gold, guess))


def test_exports_answer_as_the_predictions(easy):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import read_export_info, read_tflite_info
    from albert_tf.packing import pack_batch
    from albert_tf.tokenization import FullTokenizer

    texts = [json.loads(line)["text"] for line in (easy / "test.jsonl").read_text().splitlines()]
    predicted = read_jsonl(easy / "out" / "multi_label_predictions.jsonl")
    expected = np.array([list(r["probabilities"].values()) for r in predicted])
    hot = [[int(x in r["labels"]) for x in r["probabilities"]] for r in predicted]
    version = easy / "out" / "export" / "1"
    served = serve_text(version, text_a=texts)
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert served["predictions"] == hot  # multi-hot at the tuned threshold
    info = read_export_info(version)
    assert info["kind"] == "multi_label" and info["is_pair"] is False
    assert info["threshold"] == float((easy / "out" / "threshold.txt").read_text())
    assert (version / "assets.extra" / "labels.txt").read_text().split() == sorted(TOPICS)
    # The LiteRT file, token ids in.
    tflite = read_tflite_info(easy / "model.tflite")
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=tflite["do_lower_case"])
    inputs = pack_batch([[tokenizer.encode(t)] for t in texts], tflite["max_seq_length"],
                        cls_id=tokenizer.special_id("[CLS]"),
                        sep_id=tokenizer.special_id("[SEP]"))
    runner = Interpreter(model_path=str(easy / "model.tflite")).get_signature_runner()
    answer = runner(**{k: np.asarray(v, np.int32) for k, v in inputs.items()})
    np.testing.assert_allclose(answer[names.PROBABILITIES], expected, atol=1e-4)
    assert answer[names.PREDICTIONS].tolist() == hot


def test_export_script_takes_the_kind_and_the_tuned_threshold(easy, tmp_path):
    from albert_tf.export import read_export_info

    labels = (easy / "out" / "labels.txt").read_text().split()
    run_script("export_savedmodel.py", "--kind=multi_label",
               f"--checkpoint={easy / 'out' / 'model.ckpt-best'}",
               f"--albert_config_file={easy / 'albert_config.json'}", f"--spm_model_file={SPM}",
               f"--labels={','.join(labels)}", "--max_seq_length=16",
               f"--export_dir={tmp_path / 'export'}")
    info = read_export_info(tmp_path / "export" / "1")
    assert info["num_labels"] == 3 and info["labels"] == labels
    assert info["threshold"] == float((easy / "out" / "threshold.txt").read_text())


def test_hugging_face_directory_says_multi_label_and_converts_back(easy, tmp_path):
    config = json.loads((easy / "hf" / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert config["architectures"] == ["AlbertForSequenceClassification"]
    assert sorted(config["id2label"].values()) == sorted(TOPICS)
    model, files = convert.load(easy / "hf")  # the model is told by problem_type
    assert isinstance(model, AlbertMultiLabelClassifier) and model.num_labels == 3
    tf1, _ = convert.load(easy / "out" / "model.ckpt-best", kind="multi_label",
                          albert_config_file=easy / "albert_config.json")
    inputs = {names.INPUT_WORD_IDS: np.array([[2, 40, 50, 3]]),
              names.INPUT_MASK: np.ones([1, 4], np.int32),
              names.INPUT_TYPE_IDS: np.zeros([1, 4], np.int32)}
    np.testing.assert_allclose(model(inputs)["logits"], tf1(inputs)["logits"], atol=1e-6)
    # and back to Google's layout: a TF1 checkpoint whose head is the classifier's
    written = convert.convert(easy / "hf", tmp_path / "google", to="google")
    again, _ = convert.load(written, kind="multi_label")
    np.testing.assert_allclose(again(inputs)["logits"], tf1(inputs)["logits"], atol=1e-6)


# ------------------------------------------------------------ the real data set
def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[1:]


def test_goemotions_rows_with_separated_labels(tmp_path):
    """GoEmotions' real rows (comma-separated emotions, a header, texts with quotes):
    labels found in the training file, the dev file predicted as a test file; the
    model learns at least the labels' distribution (the tiny model cannot learn much
    more from 320 rows: see the keyword task above for learning from the text)."""
    config = write_tiny_config(tmp_path, max_position_embeddings=64)
    out = tmp_path / "out"
    run_script("run_classifier.py", "--task_name=multi_label",
               f"--train_file={GOEMOTIONS / 'train.tsv'}", f"--dev_file={GOEMOTIONS / 'dev.tsv'}",
               f"--test_file={GOEMOTIONS / 'dev.tsv'}", "--text_a_field=text",
               "--label_field=labels", "--do_train", "--do_eval", "--do_predict",
               "--tune_threshold",
               *flags(config, out, max_seq_length=32, train_batch_size=32, train_step=20,
                      save_checkpoints_steps=20, iterations_per_loop=20))
    train, dev = read_tsv(GOEMOTIONS / "train.tsv"), read_tsv(GOEMOTIONS / "dev.tsv")
    labels = sorted({x for row in train for x in row[1].split(",")})
    assert (out / "labels.txt").read_text().splitlines() == labels
    # dev rows with an emotion the training rows lack are skipped (named in the log)
    kept = [row for row in dev if set(row[1].split(",")) <= set(labels)]
    predicted = read_jsonl(out / "multi_label_predictions.jsonl")
    assert [r["gold"] for r in predicted] == [row[1].split(",") for row in kept]
    gold = np.array([[int(x in r["gold"]) for x in labels] for r in predicted])
    best = results(out / "best_trial.txt")
    test = results(out / "test_results.txt")
    assert test["micro_f1"] == pytest.approx(best["micro_f1"], abs=1e-4)
    # At least the best single-label constant answer's micro F1.
    constant = max(scores(np.tile(np.eye(len(labels))[i], [len(gold), 1]), gold, 0.5,
                          labels)["micro_f1"] for i in range(len(labels)))
    assert best["micro_f1"] >= constant - 1e-6


# --------------------------------------------------------------------- bad input
def test_bad_threshold_and_missing_field_stop_before_any_work(tmp_path):
    config = write_tiny_config(tmp_path)
    common = ["--task_name=multi_label", f"--train_file={GOEMOTIONS / 'train.tsv'}",
              "--label_field=labels", "--do_train", *flags(config, tmp_path / "out")]
    result = run_script("run_classifier.py", "--text_a_field=text", "--threshold=1.5",
                        *common, check=False)
    assert result.returncode != 0
    assert "--threshold must be a number in (0, 1), got 1.5" in result.stderr
    result = run_script("run_classifier.py", *common, check=False)
    assert "--task_name=multi_label needs --text_a_field" in result.stderr
    assert not (tmp_path / "out" / "multi_label_train.tf_record").exists()


def test_rows_name_their_labels_as_lists_or_separated(tmp_path, caplog):
    """A JSON list, a separated string (spaces around ignored, repeats once), an empty
    field (no label); a label outside --labels skips the row, naming file and line."""
    from albert_tf.tasks.multi_label import MultiLabelTask

    (tmp_path / "rows.jsonl").write_text(
        '{"t": "a", "y": ["x", "z"]}\n{"t": "b", "y": "z | x | z"}\n{"t": "c", "y": ""}\n'
        '{"t": "d", "y": "x|w"}\n')
    task = MultiLabelTask({"text_a_field": "t", "text_b_field": None, "label_field": "y",
                           "header": True, "label_separator": "|", "labels": ("x", "z")})
    examples = task.read("train", [str(tmp_path / "rows.jsonl")])
    assert [(e.text_a, e.labels) for e in examples] == [
        ("a", ("x", "z")), ("b", ("z", "x")), ("c", ())]
    assert [task.multi_hot(e.labels) for e in examples] == [[1, 1], [1, 1], [0, 0]]
    assert f"{tmp_path / 'rows.jsonl'}:4: label(s) 'w' not one of the 2 labels" in caplog.text
