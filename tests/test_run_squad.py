"""run_squad.py end to end on tiny models: v1.1 and v2.0, files and official scores."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPM = str(FIXTURES / "spm" / "albert_en_30k_reconstructed.model")
V1 = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
V2 = FIXTURES / "squad" / "dev-v2.0-excerpt.json"
TINY = {"vocab_size": 30000, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 128}


def run(*args, check=True):
    result = subprocess.run([sys.executable, str(ROOT / "run_squad.py"), *map(str, args)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "albert_config.json"
    path.write_text(json.dumps(TINY))
    return path


def flags(config, output_dir, data):
    return [f"--train_file={data}", f"--predict_file={data}", f"--spm_model_file={SPM}",
            f"--albert_config_file={config}", f"--output_dir={output_dir}",
            "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
            "--train_batch_size=4", "--predict_batch_size=4", "--num_train_epochs=1",
            "--iterations_per_loop=5", "--learning_rate=1e-3"]


def question_ids(path):
    return {qa["id"] for article in json.loads(path.read_text())["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


def test_v1_trains_predicts_and_scores(tmp_path, config):
    out = tmp_path / "v1"
    run("--do_train", "--do_predict", *flags(config, out, V1))
    predictions = json.loads((out / "predictions.json").read_text())
    assert set(predictions) == question_ids(V1)
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert all(1 <= len(entries) <= 20 for entries in nbest.values())
    scores = json.loads((out / "eval_results.json").read_text())
    assert 0 <= scores["exact_match"] <= scores["f1"] <= 100
    assert not (out / "null_odds.json").exists()
    # Predicting again reuses the trained model and the cached features.
    result = run("--do_predict", *flags(config, out, V1))
    assert "using the" in result.stderr and "cached SQuAD features" in result.stderr


def test_v2_writes_null_odds_and_v2_scores(tmp_path, config):
    out = tmp_path / "v2"
    run("--version_2_with_negative", "--do_train", "--do_predict", *flags(config, out, V2))
    ids = question_ids(V2)
    assert set(json.loads((out / "predictions.json").read_text())) == ids
    assert set(json.loads((out / "null_odds.json").read_text())) == ids
    scores = json.loads((out / "eval_results.json").read_text())
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1",
            "best_f1_thresh"} <= set(scores)


@pytest.mark.parametrize("args, message", [
    (["--do_predict"], "needs a trained model"),
    (["--do_train", "--train_file=/no/train.json"], "--train_file=/no/train.json"),
    (["--do_train", "--max_seq_length=256"], "max_position_embeddings (128)"),
    (["--do_train", "--doc_stride=0"], "doc_stride"),
])
def test_bad_input_fails_before_training(tmp_path, config, args, message):
    result = run(*flags(config, tmp_path / "bad", V1), *args, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "bad").glob("ckpt-*"))
