"""run_squad.py end to end on tiny models: v1.1 and v2.0, files and official scores."""

import json

import pytest

from tests.helpers.scripts import FIXTURES, SPM, run_script, write_tiny_config

V1 = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
V2 = FIXTURES / "squad" / "dev-v2.0-excerpt.json"


def run(*args, check=True):
    return run_script("run_squad.py", *args, check=check)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"))


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
    run("--version_2_with_negative", "--do_train", "--do_predict",
        f"--export_dir={out / 'export'}", *flags(config, out, V2))
    info = json.loads((out / "export" / "1" / "assets.extra" / "export_info.json").read_text())
    assert info["kind"] == "squad_v2" and info["max_seq_length"] == 128
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
