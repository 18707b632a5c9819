"""Fine-tuning on several hosts: two run_classifier.py / run_squad.py / run_ner.py
workers under multi_worker_mirrored (TF_CONFIG, two loopback ports, one record file
shared through --output_dir) end with the weights, dev results and predictions of one
process trained on the same global batches (dropout 0)."""

import json

import numpy as np
import pytest

from tests.helpers.scripts import FIXTURES, SPM, read_results, run_cluster, run_script
from tests.helpers.tiny import write_tiny_config


def two_workers(script, args):
    """`script args` as worker 0 and worker 1 of one cluster, both at once."""
    run_cluster(lambda tf_config: run_script(
        script, "--distribution_strategy=multi_worker_mirrored", *args, check=False,
        env={"TF_CONFIG": tf_config}))


def checkpoint_values(directory):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(directory)))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith("_") and "OBJECT_GRAPH" not in name}


def assert_same_training(one, two):
    """Both runs' last checkpoints are of the same step and hold the same values."""
    import tensorflow as tf

    steps = [tf.train.latest_checkpoint(str(d)).rsplit("-", 1)[1] for d in (one, two)]
    assert steps[0] == steps[1] and int(steps[0]) > 0
    first, second = checkpoint_values(one), checkpoint_values(two)
    assert sorted(first) == sorted(second)
    for name in first:
        np.testing.assert_allclose(second[name], first[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def assert_same_file(one, two):
    """Results and predictions: text equal, numbers to float rounding."""
    if one.suffix == ".txt":
        assert read_results(two) == pytest.approx(read_results(one), rel=1e-4, abs=1e-6)
        return
    assert_close(read_json(two), read_json(one))


def read_json(path):
    """A JSON file, or a JSON lines file as a list."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines()]


def assert_close(got, want):
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-5)
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for key in want:
            assert_close(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert_close(a, b)
    else:
        assert got == want


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"), max_position_embeddings=128)


@pytest.mark.parametrize("script, flags, kept", [
    ("run_classifier.py",
     ["--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}", "--do_eval",
      "--max_seq_length=64", "--eval_batch_size=6", "--dropout_prob=0"],
     ["eval_results.txt", "best_trial.txt"]),
    ("run_squad.py",
     [f"--train_file={FIXTURES / 'squad' / 'dev-v1.1-excerpt.json'}",
      f"--predict_file={FIXTURES / 'squad' / 'dev-v1.1-excerpt.json'}", "--do_predict",
      "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
      "--predict_batch_size=6", "--num_train_epochs=1"],
     ["predictions.json", "nbest_predictions.json"]),
    ("run_ner.py",
     [f"--train_file={FIXTURES / 'ner' / 'cluener_train.json'}",
      f"--dev_file={FIXTURES / 'ner' / 'cluener_dev.json'}",
      f"--test_file={FIXTURES / 'ner' / 'cluener_dev.json'}",
      f"--vocab_file={FIXTURES / 'ner' / 'vocab_chinese.txt'}", "--do_predict",
      "--max_seq_length=64", "--predict_batch_size=6", "--dropout_prob=0"],
     ["test_predictions.json", "test_results.txt"]),
], ids=["classifier", "squad", "ner"])
def test_two_workers_train_as_one_process(tmp_path, config, script, flags, kept):
    if script == "run_ner.py":
        config = write_tiny_config(tmp_path, vocab_size=21128)
    common = [*flags, f"--albert_config_file={config}", "--do_train",
              "--train_batch_size=8", "--learning_rate=1e-2", "--iterations_per_loop=2",
              "--save_checkpoints_steps=2"]
    common += [] if script == "run_squad.py" else ["--train_step=4"]
    if script != "run_ner.py":
        common.append(f"--spm_model_file={SPM}")
    run_script(script, *common, f"--output_dir={tmp_path / 'one'}")
    two_workers(script, [*common, f"--output_dir={tmp_path / 'two'}"])
    assert_same_training(tmp_path / "one", tmp_path / "two")
    for name in kept:  # written once, by the chief, from every example
        assert_same_file(tmp_path / "one" / name, tmp_path / "two" / name)
    # The other worker's checkpoints went to a temporary folder, removed at the end.
    assert not list((tmp_path / "two").glob(".worker_tmp_*"))
