"""run_ner.py end to end on tiny models and slices of the real CLUENER2020 and WNUT-17
files (tests/fixtures/ner): train, evaluate (seqeval's scores), predict back in the
input's format, export; the export, in a fresh process, gives the script's entities."""

import json

import numpy as np
import pytest

from albert_tf.data import ner
from tests.helpers.scripts import FIXTURES, SPM, read_results, run_script
from tests.helpers.tiny import write_tiny_config

NER = FIXTURES / "ner"
VOCAB = NER / "vocab_chinese.txt"


def run(*args, check=True):
    return run_script("run_ner.py", *args, check=check)


def flags(config, output_dir, **overrides):
    values = {"albert_config_file": config, "output_dir": output_dir,
              "max_seq_length": 64, "train_batch_size": 16, "eval_batch_size": 16,
              "predict_batch_size": 16, "train_step": 4, "save_checkpoints_steps": 2,
              "iterations_per_loop": 2, "learning_rate": 1e-6}
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items()]


@pytest.fixture(scope="module")
def cluener_run(tmp_path_factory):
    """CLUENER: train 4 steps (a learning rate of 1e-6 keeps the random head, whose tags
    are varied), evaluate both checkpoints, predict the dev file, export."""
    work = tmp_path_factory.mktemp("cluener")
    config = write_tiny_config(work, vocab_size=21128)
    out = work / "out"
    run(f"--train_file={NER / 'cluener_train.json'}", f"--dev_file={NER / 'cluener_dev.json'}",
        f"--test_file={NER / 'cluener_dev.json'}", f"--vocab_file={VOCAB}", "--do_train",
        "--do_eval", "--do_predict", f"--export_dir={out / 'export'}", *flags(config, out))
    return out


def test_cluener_labels_scores_and_predictions(cluener_run):
    out = cluener_run
    train = ner.read_ner_file(str(NER / "cluener_train.json"))
    dev = ner.read_ner_file(str(NER / "cluener_dev.json"))
    assert (out / "labels.txt").read_text().split() == ner.labels_of([train])
    predicted = [json.loads(line) for line in
                 (out / "test_predictions.json").read_text(encoding="utf-8").splitlines()]
    assert [{**p, "label": None} for p in predicted] == \
        [{**o, "label": None} for o in dev.objects]  # every line, its other fields kept
    # The predictions read back as a CLUENER file: spans inside their text.
    path = out / "reread.json"
    path.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in predicted) + "\n",
                    encoding="utf-8")
    tags = [s.tags for s in ner.read_cluener(str(path)).sentences]
    assert sum(len(p["label"]) for p in predicted) > 0  # the random head finds entities
    # The scores are seqeval's on these predictions (eval of the best = last checkpoint
    # step: the same weights as the prediction's, up to a learning rate of 1e-6).
    test = read_results(out / "test_results.txt")
    want = ner.ner_metrics([s.tags for s in dev.sentences], tags)
    for key in ("f1", "precision", "recall", "name_f1", "address_f1"):
        assert test[key] == pytest.approx(want[key], abs=1e-9), key
    # (Token accuracy is of the raw tags: an I- that opens an entity is written back as
    # the span seqeval reads, so the file's tags are not the raw ones.)
    assert 0 <= test["accuracy"] <= 1
    evaluation = read_results(out / "eval_results.txt")
    assert evaluation["global_step"] == 4 and "name_f1" in evaluation
    assert (out / "model.ckpt-4.index").exists()  # the final weights, TF1 names
    best = read_results(out / "best_trial.txt")
    assert best["global_step"] in (2, 4) and (out / "model.ckpt-best.index").exists()


def test_cluener_export_gives_the_scripts_entities_in_a_fresh_process(cluener_run, tmp_path):
    from albert_tf.export import read_export_info
    from tests.test_export import call_in_a_fresh_process

    out = cluener_run
    version = out / "export" / "1"
    info = read_export_info(version)
    assert info["kind"] == "token_classifier" and info["word_split"] == "characters"
    assert info["labels"] == (out / "labels.txt").read_text().split()
    predicted = [json.loads(line) for line in
                 (out / "test_predictions.json").read_text(encoding="utf-8").splitlines()]
    fitting = [p for p in predicted if len(p["text"].replace(" ", "")) <= 62][:24]
    calls = {"text": (str(version), "serve_text",
                      {"text": np.array([p["text"] for p in fitting], dtype=object)})}
    got = call_in_a_fresh_process(calls, tmp_path)["text"]
    for i, p in enumerate(fitting):
        label = {}
        for entity_type, start, end, text in ner.serving_entities(p["text"], got, i):
            label.setdefault(entity_type, {}).setdefault(text, []).append([start, end - 1])
        assert label == p["label"], p["text"]


def test_conll_windows_predictions_written_back(tmp_path):
    """WNUT-17 (its train file ends sentences with a lone TAB) with an English
    SentencePiece model and windows of 16: every token line of the test file gets one
    predicted tag, everything else is kept; a rerun predicts from the saved labels."""
    config = write_tiny_config(tmp_path)
    out = tmp_path / "out"
    # The test file's three sentences with I-product, which no training sentence has,
    # are skipped (counted against --max_skipped_rows) and written back as they are.
    run(f"--train_file={NER / 'wnut17_train.conll'}", f"--test_file={NER / 'wnut17_dev.conll'}",
        f"--spm_model_file={SPM}", "--do_train", "--do_predict", "--max_skipped_rows=3",
        *flags(config, out, max_seq_length=16, train_step=2))
    source = (NER / "wnut17_dev.conll").read_text(encoding="utf-8").splitlines()
    written = (out / "test_predictions.conll").read_text(encoding="utf-8").splitlines()
    assert len(written) == len(source)
    labels = set((out / "labels.txt").read_text().split())
    skipped = json.loads((out / "data_report.json").read_text())["splits"]["test"]["skipped"]
    starts = [int(place.split(":")[1]) for place in skipped["unknown label"]["first"]]
    assert len(starts) == 3
    unchanged, sentence_start = set(), None
    for number, line in enumerate(source, 1):
        sentence_start = None if not line.strip() else (sentence_start or number)
        if sentence_start in starts:
            unchanged.add(number)
    assert len(unchanged) > 3 and any("I-product" in source[n - 1] for n in unchanged)
    for number, (line, row) in enumerate(zip(source, written), 1):
        if not line.strip() or number in unchanged:
            assert row == line
        else:
            assert row.startswith(line.rstrip() + "\t")
            assert row[len(line.rstrip()) + 1:] in labels
    dev = ner.read_conll(str(NER / "wnut17_dev.conll"))
    assert max(len(s.words) for s in dev.sentences) > 14  # some need several windows
    # --do_predict alone: the model and labels.txt of the run; the same predictions.
    first = written
    (out / "test_predictions.conll").unlink()
    run(f"--test_file={NER / 'wnut17_dev.conll'}", f"--spm_model_file={SPM}", "--do_predict",
        "--max_skipped_rows=3", *flags(config, out, max_seq_length=16))
    assert (out / "test_predictions.conll").read_text(encoding="utf-8").splitlines() == first


@pytest.mark.parametrize("args, message", [
    (["--do_train", "--task_name=msra", "--data_dir=/tmp"],
     "--task_name=msra: this script runs ner, cluener, conll"),
    (["--do_predict", f"--test_file={NER / 'cluener_dev.json'}"], "need a trained model"),
    ([], "nothing to do"),
])
def test_bad_input_fails_before_training(tmp_path, args, message):
    config = write_tiny_config(tmp_path, vocab_size=21128)
    result = run(*args, f"--vocab_file={VOCAB}", *flags(config, tmp_path / "out"),
                 check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "out").glob("ckpt-*"))


def test_a_file_with_nothing_usable_names_its_bad_line(tmp_path):
    config = write_tiny_config(tmp_path)
    bad = tmp_path / "train.conll"
    bad.write_text("EU\tB-ORG\nrejects\n", encoding="utf-8")
    result = run(f"--train_file={bad}", f"--spm_model_file={SPM}", "--do_train",
                 *flags(config, tmp_path / "out"), check=False)
    assert result.returncode != 0
    assert f"error: {bad} holds no usable sentence: skipped 1 of 1 CoNLL sentence(s): 1 " \
        f"wrong number of fields ({bad}:2: 1 column(s) where the file's token lines have " \
        f"a tag)" in result.stderr.splitlines()
