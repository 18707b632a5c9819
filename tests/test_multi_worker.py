"""Fine-tuning on several hosts: two run_classifier.py / run_squad.py / run_ner.py
workers under multi_worker_mirrored (TF_CONFIG, two loopback ports, one record file
shared through --output_dir) end with the weights, dev results and predictions of one
process trained on the same global batches (dropout 0). A worker SIGKILLed in the
middle of a run stops the other within a bounded time, with one line saying what
happened and what to do; the same command again resumes from the last checkpoint and
ends with the uninterrupted cluster's weights and slots bit for bit (dropout 0.1)."""

import json
import re
import time

import numpy as np
import pytest

from tests.helpers import faults
from tests.helpers.forked import run_python
from tests.helpers.scripts import (
    FIXTURES,
    ROOT,
    SPM,
    read_results,
    run_cluster,
    run_script,
    run_with_faults,
)
from tests.helpers.tiny import write_tiny_config


def two_workers(script, args):
    """`script args` as worker 0 and worker 1 of one cluster, both at once."""
    run_cluster(lambda tf_config: run_script(
        script, "--distribution_strategy=multi_worker_mirrored", *args, check=False,
        env={"TF_CONFIG": tf_config}))


def latest_checkpoint(directory):
    import tensorflow as tf

    return tf.train.latest_checkpoint(str(directory))


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


# How long a worker may stay silent before the coordination service declares it lost
# (`--heartbeat_timeout`), and the most the survivor may take from the kill to
# its end: the silence noticed, the collectives aborted, the error, the exit (1.8-2.7 s
# measured on 2 busy cores). TensorFlow's default timeout, 10 s, stops it 5 to 10 s
# after the kill (6.8 s measured): the bound also checks that the setting is applied.
HEARTBEAT_TIMEOUT, STOPPED_WITHIN = 2, 5


def test_a_killed_worker_stops_the_other_and_the_same_command_resumes(tmp_path):
    config = write_tiny_config(tmp_path, max_position_embeddings=32,
                               hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    flags = ["--distribution_strategy=multi_worker_mirrored", "--task_name=MRPC",
             f"--data_dir={FIXTURES / 'glue'}", f"--spm_model_file={SPM}",
             f"--albert_config_file={config}", "--do_train", "--max_seq_length=32",
             "--train_batch_size=8", "--train_step=8", "--warmup_step=2",
             "--save_checkpoints_steps=4", "--iterations_per_loop=2",
             "--learning_rate=1e-3", "--dropout_prob=0.1", "--seed=5",
             f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}"]

    def cluster(output_dir, kill_worker_1_at=None):
        """Both workers of `flags`; worker 1 SIGKILLed at a step if asked; the results
        and the time each worker ended."""
        ended = {}

        def worker(tf_config):
            index = json.loads(tf_config)["task"]["index"]
            result = run_with_faults(
                "run_classifier", *flags, f"--output_dir={output_dir}",
                kill_at=kill_worker_1_at if index == 1 else None, check=False,
                env={"TF_CONFIG": tf_config})
            ended[index] = time.monotonic()
            return result

        return run_cluster(worker, check=kill_worker_1_at is None), ended

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    cluster(straight)
    # Worker 1 dies after step 6 (the checkpoint of step 4 written, steps 5-6 lost);
    # worker 0 waits for it in the collectives of step 7.
    (survivor, victim), ended = cluster(killed, kill_worker_1_at=6)
    assert victim.returncode == -9, victim.stderr[-3000:]
    assert survivor.returncode == 1, survivor.stderr[-3000:]
    assert ended[0] - ended[1] < STOPPED_WITHIN
    errors = [line for line in survivor.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: lost worker 1 of the multi_worker_mirrored cluster in training steps 7-8 "
        "(it stopped sending heartbeats); this worker 0 stops too. Start the cluster "
        "again with the same command on every worker: training resumes from ckpt-4"], \
        survivor.stderr[-3000:]
    assert "Traceback" not in survivor.stderr
    assert latest_checkpoint(killed).endswith("ckpt-4")
    restarted, _ = cluster(killed)
    for result in restarted:
        assert re.search(r"resumed from \S*ckpt-4 at step 4", result.stderr)
    ends = [latest_checkpoint(d) for d in (straight, killed)]
    assert all(end.endswith("ckpt-8") for end in ends), ends
    assert faults.assert_same_checkpoints(*ends) > 30  # weights, both Adam slots, step
    assert not list(killed.glob(".worker_tmp_*"))


# What TensorFlow's collective raised on worker 1 when worker 0, the coordination
# service's leader, was SIGKILLed in the middle of an exchange (TF 2.21).
LEADER_LOST = (
    "Collective ops is aborted by: Socket closed\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:0 "
    "while calling /tensorflow.WorkerService/RecvBuf:\n"
    ":UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:\"Socket closed\"}\n"
    "The error could be from a previous operation. Restart your program to reset.")


def test_a_lost_peer_is_one_line_across_workers_and_the_error_itself_on_one_host():
    import types

    import tensorflow as tf

    from albert_tf.training import distribute

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": ["a:1", "b:2"]}), task_type="worker", task_id=1)
    worker_1 = types.SimpleNamespace(cluster_resolver=resolver)
    with pytest.raises(distribute.PeerLost) as lost:
        with distribute.peer_loss_stops(worker_1, "in evaluation"):
            raise tf.errors.UnavailableError(None, None, LEADER_LOST)
    assert str(lost.value) == (
        "lost worker 0 of the multi_worker_mirrored cluster in evaluation (its "
        "connection closed); this worker 1 stops too. Start the cluster again with the "
        "same command on every worker: training resumes from the last checkpoint, if any")
    with pytest.raises(tf.errors.UnavailableError):  # one host: not a lost worker
        with distribute.peer_loss_stops(tf.distribute.get_strategy(), "in evaluation"):
            raise tf.errors.UnavailableError(None, None, LEADER_LOST)


def test_the_heartbeat_timeout_is_a_positive_number_of_seconds():
    from albert_tf.training import distribute

    for right in (None, 2.5):
        distribute.check_heartbeat_timeout(right)
    for wrong in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(distribute.DistributionError, match="positive number"):
            distribute.get_strategy("multi_worker_mirrored", heartbeat_timeout=wrong)


def test_threads_are_set_before_tensorflow_starts_and_refused_after():
    """--intra_op_threads / --inter_op_threads: set in a process TensorFlow has not
    started in; a different value after it started is one line naming the flag; the
    value it runs with passes. --num_gpus is mirrored's, and at most the host's GPUs."""
    code = (
        "import tensorflow as tf\n"
        "from albert_tf.training import distribute\n"
        "distribute.set_threads(1, 2)\n"
        "tf.constant(1.0) + 1\n"
        "distribute.set_threads(1, 2)\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads(),\n"
        "      tf.config.threading.get_inter_op_parallelism_threads())\n"
        "try:\n"
        "    distribute.set_threads(3, None)\n"
        "except distribute.DistributionError as e:\n"
        "    print(e)\n")
    result = run_python(["-c", code], cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    first, second = result.stdout.splitlines()
    assert first == "1 2"
    assert second.startswith("--intra_op_threads=3: TensorFlow has started in this "
                             "process already")
    import tensorflow as tf

    from albert_tf.training import distribute

    with pytest.raises(distribute.DistributionError, match="--num_gpus is for "
                       "--distribution_strategy=mirrored, not one_device"):
        distribute.get_strategy("one_device", num_gpus=1)
    gpus = len(tf.config.list_logical_devices("GPU"))
    with pytest.raises(distribute.DistributionError,
                       match=f"--num_gpus={gpus + 1}: this host has {gpus} GPU"):
        distribute.get_strategy("mirrored", num_gpus=gpus + 1)
