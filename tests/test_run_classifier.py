"""run_classifier.py end to end on tiny models: GLUE (classification, regression), RACE,
C3, SWAG, multiple-choice JSON lines, classification and regression from CSV / TSV /
JSONL files."""

import json
import random
import shutil

import numpy as np
import pytest

from tests.helpers.scripts import FIXTURES, SPM, run_script
from tests.helpers.scripts import read_results as results
from tests.helpers.tiny import write_tiny_config


def run(*args, check=True):
    return run_script("run_classifier.py", *args, check=check)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    """The tiny model's albert_config.json, positions for the longest run (RACE, 128)."""
    return write_tiny_config(tmp_path_factory.mktemp("config"), max_position_embeddings=128)


def common_flags(config, output_dir, **overrides):
    flags = {"spm_model_file": SPM, "albert_config_file": config, "output_dir": output_dir,
             "max_seq_length": 64, "train_batch_size": 8, "eval_batch_size": 8,
             "predict_batch_size": 8, "train_step": 6, "save_checkpoints_steps": 3,
             "iterations_per_loop": 3, "learning_rate": 1e-3}
    flags.update(overrides)
    return [f"--{k}={v}" for k, v in flags.items()]


# MRPC (training, evaluation, test predictions, the GLUE submission, the best and final
# checkpoints' names, the export answering raw text as the run predicted, a later
# --do_predict run alone): the README's MRPC commands, checked by tests/test_readme.py.


def test_sts_b_is_regression(tmp_path, config_file):
    out = tmp_path / "stsb"
    run("--task_name=STS-B", f"--data_dir={FIXTURES / 'glue'}", "--do_train", "--do_eval",
        *common_flags(config_file, out))
    evaluation = results(out / "eval_results.txt")
    assert {"pearson", "spearman", "MSE"} <= set(evaluation)


def test_float16_mixed_precision_trains_with_loss_scaling(tmp_path, config_file):
    out = tmp_path / "fp16"
    run("--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}", "--do_train", "--do_eval",
        "--precision=mixed_float16", *common_flags(config_file, out, train_step=3,
                                                   save_checkpoints_steps=3))
    assert results(out / "eval_results.txt")["global_step"] == 3
    import tensorflow as tf

    kernel = tf.train.load_checkpoint(str(out / "model.ckpt-best")).get_tensor("output_weights")
    assert kernel.dtype.name == "float32"  # weights stay float32


# RACE (training and evaluation at 128 with max_qa_length 32): the README's RACE command,
# checked by tests/test_readme.py.


def easy_sst2(directory, seed=0):
    """A sentiment task a tiny model must learn: one word of four decides the label."""
    rng = random.Random(seed)
    positive = ["great", "good", "wonderful", "excellent", "lovely"]
    negative = ["bad", "awful", "terrible", "poor", "boring"]
    filler = ["the", "movie", "film", "was", "plot", "actors", "story", "really", "quite"]
    (directory / "SST-2").mkdir(parents=True)
    for split, count in (("train", 400), ("dev", 100)):
        rows = ["sentence\tlabel"]
        for _ in range(count):
            label = rng.randint(0, 1)
            words = rng.sample(filler, 3) + [rng.choice(positive if label else negative)]
            rng.shuffle(words)
            rows.append(f"{' '.join(words)}\t{label}")
        (directory / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def test_a_tiny_model_learns_an_easy_task(tmp_path, config_file):
    easy_sst2(tmp_path / "glue")
    out = tmp_path / "easy"
    # The runtime's threads are set before TensorFlow starts in the script.
    log = run("--task_name=sst-2", f"--data_dir={tmp_path / 'glue'}", "--do_train",
              "--do_eval", "--intra_op_threads=2", "--inter_op_threads=1",
              *common_flags(config_file, out, max_seq_length=16, train_batch_size=16,
                            train_step=150, warmup_step=10, save_checkpoints_steps=150,
                            iterations_per_loop=50, learning_rate=3e-3, dropout_prob=0))
    assert "TensorFlow's threads: 2 within an op, 1 ops at once" in log.stderr
    accuracy = results(out / "eval_results.txt")["eval_accuracy"]
    assert accuracy >= 0.9, accuracy  # chance is 0.5


@pytest.mark.parametrize("args, message", [
    (["--task_name=nope", "--do_train"], "nope"),
    (["--task_name=MRPC", "--do_train", "--data_dir=/no/such/dir"], "/no/such/dir"),
    (["--task_name=MRPC", "--do_predict"], "need a trained model"),
    (["--task_name=MRPC"], "nothing to do"),
    (["--task_name=MRPC", "--do_train", "--init_checkpoint=/no/model.ckpt"],
     "no checkpoint at /no/model.ckpt"),
    (["--task_name=race", "--do_train", f"--data_dir={FIXTURES / 'race'}",
      "--max_qa_length=200"], "--max_qa_length=200 must be positive and leave room"),
])
def test_bad_input_fails_before_training(tmp_path, config_file, args, message):
    flags = common_flags(config_file, tmp_path / "bad")
    if not any(a.startswith("--data_dir") for a in args):
        flags.append(f"--data_dir={FIXTURES / 'glue'}")
    result = run(*args, *flags, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "bad").glob("ckpt-*"))


def test_the_serving_environment_of_bfloat16_exports_is_refused(tmp_path, config_file):
    """What bfloat16 exports ask of their server (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1: the
    MatMuls keep the weights of their first call) would train on the first step's
    weights: the script stops before any work, naming the variable."""
    from albert_tf.export import SERVING_ENVIRONMENTS

    result = run_script("run_classifier.py", "--task_name=MRPC", "--do_train",
                        f"--data_dir={FIXTURES / 'glue'}",
                        *common_flags(config_file, tmp_path / "out"), check=False,
                        env=SERVING_ENVIRONMENTS["bfloat16"])
    assert result.returncode != 0, result.stderr[-2000:]
    assert "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 is set in this process" in result.stderr
    assert not (tmp_path / "out").exists()


def test_checkpoint_of_another_size_lists_every_mismatch(tmp_path, config_file):
    result = run("--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}", "--do_train",
                 f"--init_checkpoint={FIXTURES / 'albert_tf1_tiny_grouped' / 'model.ckpt'}",
                 *common_flags(config_file, tmp_path / "out"), check=False)
    assert result.returncode != 0
    assert "does not fit" in result.stderr and "variables differ" in result.stderr
    assert not list((tmp_path / "out").glob("ckpt-*"))
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def test_brightmart_release_as_init_checkpoint(tmp_path):
    """brightmart's albert_zh directory alone: its config (converted to E = H), its
    vocab.txt and weights are found and read; the result is written for transformers."""
    import json

    from tests.helpers.layouts import brightmart_release

    release = brightmart_release(tmp_path / "albert_tiny_zh")
    chars = (release / "vocab.txt").read_text(encoding="utf-8").split()[5:]
    data = tmp_path / "zh" / "SST-2"
    data.mkdir(parents=True)
    rows = ["".join(chars[i:i + 6]) + f"\t{i % 2}" for i in range(0, 48, 3)]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n",
                                    encoding="utf-8")
    out = tmp_path / "out"
    result = run("--task_name=SST-2", f"--data_dir={data.parent}", f"--init_checkpoint={release}",
                 f"--output_dir={out}", "--do_train", "--max_seq_length=16",
                 "--train_batch_size=4", "--train_step=2", "--save_checkpoints_steps=2",
                 f"--export_hf_dir={tmp_path / 'hf'}")
    assert "brightmart/albert_zh TF1 names" in result.stderr
    assert "loaded 23 variables" in result.stderr  # the encoder; the MLM and SOP heads unused
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["architectures"], config["embedding_size"], config["hidden_size"],
            config["id2label"]) == (["AlbertForSequenceClassification"], 32, 32,
                                    {"0": "0", "1": "1"})
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == (release / "vocab.txt").read_bytes()


# ------------------------------------------------- multiple choice beyond RACE
C3 = FIXTURES / "c3"
CHINESE_VOCAB = FIXTURES / "ner" / "vocab_chinese.txt"


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_c3_variable_choices_predictions_and_export(tmp_path):
    """C3 (slices of the real files: 2, 3 and 4 choices) with the Chinese vocabulary:
    trained, evaluated, predicted (c3_predictions.jsonl: one object per question, ids
    m-<document id>-<question index>, probabilities of its own choices only, a padded
    choice never predicted), exported; the export in a fresh process gives the
    script's probabilities from raw context, question and choices."""
    from albert_tf.data import multiple_choice
    from tests.test_export import call_in_a_fresh_process

    # A wide initializer: choices that score apart.
    config = write_tiny_config(tmp_path, vocab_size=21128, max_position_embeddings=128,
                               initializer_range=1.0)
    out = tmp_path / "c3"
    run("--task_name=c3", f"--data_dir={C3}", f"--vocab_file={CHINESE_VOCAB}", "--do_train",
        "--do_eval", "--do_predict", f"--test_file={C3 / 'c3-m-dev.json'}",
        f"--export_dir={out / 'export'}",
        *common_flags(config, out, spm_model_file="", max_seq_length=96,
                      train_step=2, save_checkpoints_steps=2, iterations_per_loop=2,
                      learning_rate=1e-6))
    # --max_qa_length unset: RACE's 128 does not fit in 96; what 96 leaves is used
    from albert_tf.export import read_export_info

    assert read_export_info(out / "export" / "1")["max_qa_length"] == 93
    assert 0 <= results(out / "eval_results.txt")["eval_accuracy"] <= 1
    rows = read_jsonl(out / "c3_predictions.jsonl")
    documents = json.loads((C3 / "c3-m-dev.json").read_text(encoding="utf-8"))
    questions = [(d, i, q) for d in documents for i, q in enumerate(d[1])]
    assert [r["id"] for r in rows] == [f"m-{d[2]}-{i}" for d, i, _ in questions]
    counts = [len(q["choice"]) for _, _, q in questions]
    assert {2, 3, 4} <= set(counts)
    for row, (_, _, q), count in zip(rows, questions, counts):
        assert len(row["probabilities"]) == count and 0 <= row["prediction"] < count
        assert sum(row["probabilities"]) == pytest.approx(1, abs=1e-5)
        assert row["label"] == q["choice"].index(q["answer"])
    assert len({tuple(r["probabilities"]) for r in rows if len(r["probabilities"]) == 4}) > 1

    texts = {"context": [], "question": [], "choices": []}
    for document, _, q in questions:
        texts["context"].append(" ".join(document[0]))
        texts["question"].append(q["question"])
        texts["choices"].append(q["choice"] + [""] * (4 - len(q["choice"])))
    calls = {"c3": (str(out / "export" / "1"), "serve_text",
                    {k: np.array(v, dtype=object) for k, v in texts.items()})}
    got = call_in_a_fresh_process(calls, tmp_path)["c3"]
    for row, probabilities, count in zip(rows, got["probabilities"], counts):
        np.testing.assert_allclose(probabilities[:count], row["probabilities"], atol=2e-6)
        assert (probabilities[count:] == 0).all()
    assert multiple_choice.NO_LABEL == -1


SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2," \
              "ending3,label"


def test_swag_csv_and_a_test_file_without_labels(tmp_path, config_file):
    rows = [SWAG_HEADER,
            'anetv_1,5,"The man sits. He","The man sits.",He,gold,"reads, slowly.",'
            'eats the sky.,jumps into a cup.,"sings ""loudly"".",0',
            "lsmdc_2,6,Someone runs. She,Someone runs.,She,gen,stops.,flies away.,"
            "melts.,turns into a car.,0",
            "lsmdc_3,7,A dog barks. It,A dog barks.,It,gold,sleeps.,wags its tail.,"
            "reads a book.,drives home.,1"]
    (tmp_path / "swag").mkdir()
    (tmp_path / "swag" / "train.csv").write_text("\n".join(rows) + "\n")
    test = [r.rsplit(",", 1)[0] for r in rows]  # no label column
    (tmp_path / "swag" / "test.csv").write_text("\n".join(test) + "\n")
    out = tmp_path / "out"
    run("--task_name=swag", f"--data_dir={tmp_path / 'swag'}", "--do_train", "--do_predict",
        *common_flags(config_file, out, max_seq_length=32, max_qa_length=16,
                      train_batch_size=2, train_step=2, save_checkpoints_steps=2,
                      iterations_per_loop=2))
    predicted = read_jsonl(out / "swag_predictions.jsonl")
    assert [r["id"] for r in predicted] == ["5", "6", "7"]
    assert all(r["label"] is None and len(r["probabilities"]) == 4 for r in predicted)


def test_multiple_choice_jsonl_with_five_choices(tmp_path, config_file):
    """The generic JSONL: up to five choices, labels by index or by text. A bad line is
    skipped, named and counted: past --max_skipped_rows (1% by default) the run stops
    before anything is written (not even the output directory); within it, the run
    trains and data_report.json says what was read."""
    lines = [{"id": "a", "context": "The cat sat on the mat.", "question": "Where is the cat?",
              "choices": ["on the mat", "in the sky", "at sea", "in a car", "nowhere"],
              "label": 0},
             {"id": "b", "context": "It rained all day.", "question": "The day was _.",
              "choices": ["wet", "dry"], "label": "wet"},
             {"id": "c", "context": "x", "choices": ["a", "b"], "label": 7}]
    data = tmp_path / "mc"
    data.mkdir()
    for split in ("train", "dev"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    flags = ["--task_name=multiple_choice", f"--data_dir={data}", "--do_train", "--do_eval",
             *common_flags(config_file, out, max_seq_length=32, max_qa_length=16,
                           train_batch_size=2, eval_batch_size=2, train_step=2,
                           save_checkpoints_steps=2, iterations_per_loop=2)]
    refused = run(*flags, check=False)
    assert refused.returncode != 0
    error = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert error == [
        f"error: the train split has too many bad rows: skipped 1 of 3 train line(s): 1 "
        f"unknown label ({data / 'train.jsonl'}:3: answer 7 is neither a choice nor a "
        f"choice's index). --max_skipped_rows=0.01 allows 0.01 of the rows (1%); fix the "
        f"rows named (or raise --max_skipped_rows to leave them out)"]
    assert "Traceback" not in refused.stderr and not out.exists()
    kept = tmp_path / "kept"  # a directory it did not create is left as it was
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    refused = run(*[f if not f.startswith("--output_dir=") else f"--output_dir={kept}"
                    for f in flags], check=False)
    assert refused.returncode != 0 and "too many bad rows" in refused.stderr
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]

    run(*flags, "--max_skipped_rows=1")
    assert results(out / "eval_results.txt")["eval_accuracy"] in (0.0, 0.5, 1.0)
    report = json.loads((out / "data_report.json").read_text())
    assert report["max_skipped_rows"] == "1"
    for split in ("train", "dev"):
        path = str(data / f"{split}.jsonl")
        assert report["splits"][split] == {
            "rows_read": 3, "rows_kept": 2, "rows_skipped": 1, "examples": 2,
            "skipped": {"unknown label": {"count": 1, "first": [
                f"{path}:3: answer 7 is neither a choice nor a choice's index"]}},
            "labels": {"0": 2},
            # (the longest: "where is the cat? on the mat" after the article's 7 pieces)
            "truncated": {"max_seq_length": 32, "examples": 2, "examples_cut": 0,
                          "pieces_dropped": 0, "longest": 7 + 8 + 3},
            "files": [{"path": path, "unit": "line", "rows_read": 3, "rows_kept": 2,
                       "rows_skipped": 1, "skipped": {"unknown label": {"count": 1, "first": [
                           f"{path}:3: answer 7 is neither a choice nor a choice's index"]}},
                       "labels": {"0": 2}}]}


# ------------------------------------------- classification from your own files
def easy_rows(count, rng):
    """(text, label) of the easy sentiment task, labels as words."""
    positive = ["great", "good", "wonderful", "excellent", "lovely"]
    negative = ["bad", "awful", "terrible", "poor", "boring"]
    filler = ["the", "movie", "film", "was", "plot", "actors", "story", "really", "quite"]
    rows = []
    for _ in range(count):
        label = rng.randint(0, 1)
        words = rng.sample(filler, 3) + [rng.choice(positive if label else negative)]
        rng.shuffle(words)
        rows.append((" ".join(words), "pos" if label else "neg"))
    return rows


def test_classification_from_a_csv_file_learns(tmp_path, config_file):
    """A CSV with named columns (and quoted commas): labels found in the training file,
    saved; the GLUE metrics and best checkpoint; predictions named by label."""
    import csv

    rng = random.Random(1)
    for split, count in (("train", 400), ("dev", 100), ("test", 5)):
        with open(tmp_path / f"{split}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "review", "sentiment"])
            for i, (text, label) in enumerate(easy_rows(count, rng)):
                writer.writerow([i, text.replace(" ", ", ", 1), label])
    out = tmp_path / "out"
    run("--task_name=classification", f"--data_dir={tmp_path}", "--text_a_field=review",
        "--label_field=sentiment", "--do_train", "--do_eval", "--do_predict",
        *common_flags(config_file, out, max_seq_length=16, train_batch_size=16,
                      train_step=150, warmup_step=10, save_checkpoints_steps=150,
                      iterations_per_loop=50, learning_rate=3e-3, dropout_prob=0))
    assert (out / "labels.txt").read_text() == "neg\npos\n"
    assert results(out / "eval_results.txt")["eval_accuracy"] >= 0.9  # chance is 0.5
    assert (out / "model.ckpt-best.index").exists()
    predicted = read_jsonl(out / "classification_predictions.jsonl")
    assert len(predicted) == 5 and {r["prediction"] for r in predicted} <= {"neg", "pos"}
    assert all(r["label"] is None and len(r["probabilities"]) == 2 for r in predicted)


def test_regression_from_jsonl_and_a_tsv_by_column_index(tmp_path, config_file):
    train = [{"a": f"{w} one", "b": "two", "score": i / 3} for i, w in
             enumerate(["red", "blue", "green", "gold"])]
    train.append({"a": "no score"})  # skipped, named
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in train))
    (tmp_path / "dev.tsv").write_text("red one\ttwo\t0.0\nblue one\ttwo\t1.0\n")
    out = tmp_path / "out"
    result = run("--task_name=regression", f"--train_file={tmp_path / 'train.jsonl'}",
                 f"--dev_file={tmp_path / 'dev.tsv'}", "--text_a_field=a",
                 "--text_b_field=b", "--label_field=score", "--do_train",
                 "--max_skipped_rows=20%",
                 *common_flags(config_file, out, max_seq_length=16, train_batch_size=2,
                               train_step=2, save_checkpoints_steps=2,
                               iterations_per_loop=2))
    assert (f"1 missing field ({tmp_path / 'train.jsonl'}:5: no 'b' (--text_b_field), "
            f"'score' (--label_field))") in result.stderr
    # Evaluation alone, the TSV without header read by column index.
    run("--task_name=regression", f"--dev_file={tmp_path / 'dev.tsv'}", "--text_a_field=0",
        "--text_b_field=1", "--label_field=2", "--noheader", "--do_eval",
        *common_flags(config_file, out, max_seq_length=16, eval_batch_size=2))
    evaluation = results(out / "eval_results.txt")
    assert "pearson" in evaluation and "spearman" in evaluation


def test_one_run_per_output_dir_and_a_dead_runs_lock_is_taken_over(tmp_path, config_file):
    """A live run's lock (here this test's own process) stops a second run before any
    work, naming the directory and the process; a lock left by a killed run is taken
    over with a warning, and removed when the run ends. (Its checkpoints then serve an
    evaluation that skips an unreadable one.)"""
    import os
    import socket
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".albert_tf.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                "started": "earlier"}))
    args = ["--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}", "--do_train",
            *common_flags(config_file, out, train_step=2, save_checkpoints_steps=1,
                          iterations_per_loop=1)]
    refused = run(*args, check=False)
    assert refused.returncode != 0
    assert f"--output_dir={out} is in use by another run: process {os.getpid()}" \
        in refused.stderr
    assert not list(out.glob("ckpt-*")) and not list(out.glob("*.tf_record"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    taken = run(*args)
    assert f"taking over {lock} from process {dead.pid}, which is no longer running" \
        in taken.stderr
    assert (out / "ckpt-2.index").exists() and not lock.exists()
    # Evaluation of the kept checkpoints reports a truncated one and scores the others.
    index = out / "ckpt-1.index"
    index.write_bytes(index.read_bytes()[:20])
    evaluated = run(*[a for a in args if a != "--do_train"], "--do_eval")
    assert f"checkpoint {out / 'ckpt-1'} cannot be read" in evaluated.stderr
    assert results(out / "eval_results.txt")["global_step"] == 2
    assert results(out / "best_trial.txt")["global_step"] == 2 and index.exists()
