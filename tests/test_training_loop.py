"""The training loop: distribution, accumulation, checkpoints, resume, signals."""

import json
import os
import pathlib
import signal
import time

import keras
import pytest

from albert_tf.checkpoints import CheckpointError
from albert_tf.training import distribute
from tests.helpers import tiny_training
from tests.helpers.forked import run_python, start_python

SCRIPT = str(pathlib.Path(tiny_training.__file__))
ROOT = str(pathlib.Path(__file__).parent.parent)


def run_script(*args, timeout=240):
    result = run_python([SCRIPT, *args], timeout=timeout, cwd=ROOT,
                        env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_same_weights(a, b, rtol=1e-5, atol=1e-6):
    assert a.keys() == b.keys()
    for name in a:
        # (Sums of |w|; atol covers the key biases, whose gradient is only rounding noise.)
        assert a[name] == pytest.approx(b[name], rel=rtol, abs=atol), name


def test_training_lowers_the_loss_and_writes_checkpoints_and_summaries(tmp_path):
    strategy = distribute.get_strategy("one_device")
    trainer = tiny_training.make_trainer(strategy, str(tmp_path), 12, 4)
    result = trainer.train(lambda skip: tiny_training.dataset(8, skip))
    assert result.step == 12 and not result.stopped_by_signal
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == [
        "ckpt-12.index", "ckpt-4.index", "ckpt-8.index"]
    assert result.checkpoint == str(tmp_path / "ckpt-12")
    assert list((tmp_path / "train").glob("events.out.tfevents.*"))
    # Training again with the same output_dir finds the work done.
    again = tiny_training.make_trainer(strategy, str(tmp_path), 12, 4)
    assert again.train(lambda skip: tiny_training.dataset(8, skip)).step == 12
    # Predicting with each checkpoint in turn (the best-checkpoint loop) traces the step
    # once and reads the loaded weights.
    from albert_tf import names
    from albert_tf.training import loop

    outputs = []
    for checkpoint in again.checkpoints_oldest_first():
        assert again.load(checkpoint, partial=True)
        outputs.append(loop.predict(strategy, again.model, tiny_training.dataset(8).take(2),
                                    [names.MLM_LOGITS])[names.MLM_LOGITS])
    assert [o.shape for o in outputs] == [(16, 3, 40)] * 3
    assert all(abs(a - b).max() > 1e-3 for a, b in zip(outputs, outputs[1:]))
    [step] = loop._STEP_FUNCTIONS[again.model].values()
    assert step.experimental_get_tracing_count() == 1


def test_loss_goes_down():
    strategy = distribute.get_strategy("one_device")
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        trainer = tiny_training.make_trainer(strategy, directory, 40, 100)
        losses = []
        original = trainer._report

        def record(step, terms, loss, *rest):
            losses.append(loss)
            original(step, terms, loss, *rest)

        trainer._report = record
        trainer.train(lambda skip: tiny_training.dataset(64, skip))
    assert losses[-1] < 0.7 * losses[0], losses


def test_keep_checkpoint_max(tmp_path):
    strategy = distribute.get_strategy("one_device")
    trainer = tiny_training.make_trainer(strategy, str(tmp_path), 10, 2, keep_checkpoint_max=2)
    trainer.train(lambda skip: tiny_training.dataset(8, skip))
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == [
        "ckpt-10.index", "ckpt-8.index"]


def test_accumulation_and_two_devices_equal_the_whole_batch_on_one(tmp_path):
    """Four steps of a global batch of 8: as two accumulated micro-batches, and mirrored
    over two devices with two micro-batches each and every layer recomputed (dropout 0;
    recomputation with dropout on: tests/test_recompute.py), end with the weights of the
    whole batch on one device."""
    whole = run_script(tmp_path / "whole", 4, 100, "--batch=8")
    accumulated = run_script(tmp_path / "accumulated", 4, 100, "--batch=8", "--accumulation=2")
    assert accumulated["loss"] == pytest.approx(whole["loss"], rel=1e-5)
    assert_same_weights(accumulated["weights"], whole["weights"])
    two = run_script(tmp_path / "two", 4, 100, "--batch=8", "--strategy=mirrored",
                     "--accumulation=2", "--recompute=layer")
    assert two["loss"] == pytest.approx(whole["loss"], rel=1e-5)
    assert_same_weights(two["weights"], whole["weights"])


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_and_stops_cleanly(tmp_path, number):
    # SIGTERM (a scheduler's) and SIGINT (Ctrl-C): the running steps end, their
    # checkpoint is saved, and the result names the signal.
    process = start_python([SCRIPT, str(tmp_path), "1000", "500", "--sleep=0.3"], cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    deadline = time.time() + 120
    while not list((tmp_path / "train").glob("events.out.tfevents.*")) if (
            tmp_path / "train").exists() else True:
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(number)
    done = process.wait(timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["stopped"] == number.name and 0 < result["step"] < 1000
    assert (tmp_path / f"ckpt-{result['step']}.index").exists()


def test_a_checkpoint_that_cannot_be_written_leaves_no_half_and_says_so(tmp_path):
    # A full disk (or no permission) while a checkpoint is written: its temporary files
    # go, and one line names the directory, what to do and the checkpoint to resume from.
    import tensorflow as tf

    from albert_tf.training.loop import CheckpointWriteError

    strategy = distribute.get_strategy("one_device")
    trainer = tiny_training.make_trainer(strategy, str(tmp_path), 8, 4)
    result = trainer.train(lambda skip: tiny_training.dataset(8, skip))
    assert result.step == 8

    def full_disk(checkpoint_number):
        temp = tmp_path / f"ckpt-{checkpoint_number}_temp"
        temp.mkdir()
        (temp / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    trainer.manager.save = full_disk
    with pytest.raises(CheckpointWriteError) as refused:
        trainer.save()
    message = str(refused.value)
    assert "\n" not in message and f"the checkpoint of step 8 under {tmp_path}" in message
    assert "ResourceExhaustedError: No space left on device" in message
    assert message.endswith("rerun the same command to resume from ckpt-8")
    assert not list(tmp_path.glob("*_temp*"))


def test_batch_that_does_not_divide_over_replicas_is_refused():
    class FakeStrategy:
        num_replicas_in_sync = 3

    with pytest.raises(distribute.DistributionError,
                       match="--train_batch_size=8 does not divide over the 3 replicas"):
        distribute.per_replica_batch_size(8, FakeStrategy())
    with pytest.raises(distribute.DistributionError, match="unknown distribution_strategy"):
        distribute.get_strategy("horovod")
    with pytest.raises(distribute.DistributionError, match="needs --tpu"):
        distribute.get_strategy("tpu")


def test_trainer_refuses_the_frozen_weights_environment(monkeypatch):
    """A Trainer made in a process with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS set (TensorFlow
    reads 1 or true; what bfloat16 exports ask of their server) is refused before it
    touches its arguments: its MatMuls would keep the first step's weights."""
    from albert_tf.export.savedmodel import FROZEN_WEIGHTS
    from albert_tf.training.loop import Trainer

    def make():
        Trainer(strategy=None, model=None, optimizer=None, objective=None,
                output_dir="unused", train_steps=1)

    for value in ("1", "TRUE"):
        monkeypatch.setenv(FROZEN_WEIGHTS, value)
        with pytest.raises(ValueError, match=f"{FROZEN_WEIGHTS}={value} is set in this "
                                             f"process.* Unset {FROZEN_WEIGHTS} to run "
                                             "training"):
            make()
    monkeypatch.setenv(FROZEN_WEIGHTS, "0")
    with pytest.raises(Exception) as past_the_check:  # the missing strategy
        make()
    assert FROZEN_WEIGHTS not in str(past_the_check.value)


def test_xla_gives_the_same_training(tmp_path):
    strategy = distribute.get_strategy("one_device")
    plain = tiny_training.make_trainer(strategy, str(tmp_path / "plain"), 4, 100)
    compiled = tiny_training.make_trainer(strategy, str(tmp_path / "xla"), 4, 100,
                                          enable_xla=True)
    assert compiled.use_xla
    results = [t.train(lambda skip: tiny_training.dataset(8, skip)) for t in (plain, compiled)]
    assert results[1].loss == pytest.approx(results[0].loss, rel=1e-4)
    assert_same_weights(tiny_training.weights_summary(compiled.model),
                        tiny_training.weights_summary(plain.model), rtol=1e-4)


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_trainer_reproduces_the_originals_two_steps(tmp_path, name):
    """The whole loop (objective, clipping, original optimizer, schedule) against the
    checkpoint the ORIGINAL TF1 code reaches after two steps on the fixture batch."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertPretrainer, load_tf1_checkpoint
    from albert_tf.training.loop import Trainer
    from albert_tf.training.objectives import PretrainingObjective
    from albert_tf.training.optimizers import create_optimizer

    fixture = pathlib.Path(ROOT) / "tests" / "fixtures" / "albert_tf1_tiny_grouped"
    strategy = distribute.get_strategy("one_device")
    with strategy.scope():
        model = AlbertPretrainer(AlbertConfig.from_json_file(fixture / "albert_config.json"))
        optimizer = create_optimizer(1e-2, 10, 0, optimizer=name)
        load_tf1_checkpoint(model, str(fixture / "model.ckpt"), strict=True,
                            optimizer=optimizer)
    trainer = Trainer(strategy=strategy, model=model, optimizer=optimizer,
                      objective=PretrainingObjective(), output_dir=str(tmp_path),
                      train_steps=2, steps_per_loop=1)
    batch = dict(np.load(fixture / "inputs.npz"))
    losses = []
    original = trainer._report
    trainer._report = lambda step, terms, loss, *rest: (losses.append(loss),
                                                        original(step, terms, loss, *rest))
    trainer.train(lambda skip: tf.data.Dataset.from_tensors(batch).repeat())
    expected_losses = np.load(fixture / f"after_2_steps_{name}" / "losses.npz")["losses"]
    np.testing.assert_allclose(losses, expected_losses, atol=1e-5)
    reader = tf.train.load_checkpoint(str(fixture / f"after_2_steps_{name}" / "model.ckpt-2"))
    for weight in model.weights:
        # 5e-5: the original's own float32 result is 1.3e-5 from float64 (see
        # tests/test_optimizers.py).
        np.testing.assert_allclose(weight.numpy(), reader.get_tensor(weight.path), atol=5e-5,
                                   rtol=0, err_msg=weight.path)


def test_xla_is_turned_off_with_a_message_for_replicas_on_cpu(caplog):
    class TwoCpuReplicas:
        num_replicas_in_sync = 2

    assert not distribute.use_xla(True, TwoCpuReplicas())
    assert "XLA cannot run under TwoCpuReplicas over 2 CPU devices" in caplog.text
    assert not distribute.use_xla(False, distribute.get_strategy("one_device"))
    assert distribute.use_xla(True, distribute.get_strategy("one_device"))
    assert "mixed_bfloat16" not in caplog.text


def test_xla_under_mixed_bfloat16_on_cpu_warns_that_it_is_slower(caplog):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        assert distribute.use_xla(True, distribute.get_strategy("one_device"))
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    assert ("--enable_xla with mixed_bfloat16 on CPU: XLA's CPU matmuls run bfloat16 no "
            "faster than float32") in caplog.text


def test_an_unreadable_latest_checkpoint_resumes_from_the_one_before(tmp_path, caplog):
    """A truncated ckpt-8 (a crash on a file system without atomic rename): reported,
    the run resumes from ckpt-4, ends with the uninterrupted run's weights; nothing is
    deleted."""
    strategy = distribute.get_strategy("one_device")
    straight = tiny_training.make_trainer(strategy, str(tmp_path / "straight"), 8, 4)
    straight.train(lambda skip: tiny_training.dataset(8, skip))
    directory = tmp_path / "crashed"
    first = tiny_training.make_trainer(strategy, str(directory), 8, 4)
    first.train(lambda skip: tiny_training.dataset(8, skip))
    index = directory / "ckpt-8.index"
    index.write_bytes(index.read_bytes()[:20])
    with caplog.at_level("WARNING"):
        again = tiny_training.make_trainer(strategy, str(directory), 8, 4)
        assert again.restore() == 4
    assert f"checkpoint {directory / 'ckpt-8'} cannot be read" in caplog.text
    assert index.exists()
    result = again.train(lambda skip: tiny_training.dataset(8, skip))
    assert result.step == 8
    assert_same_weights(tiny_training.weights_summary(again.model),
                        tiny_training.weights_summary(straight.model))
    # None readable: the run stops, naming them, instead of training from its initial
    # weights over them (issue 29); nothing is deleted
    kept = sorted(directory.glob("ckpt-*.index"))
    assert [p.name for p in kept] == ["ckpt-4.index", "ckpt-8.index"]
    for index in kept:
        index.write_bytes(index.read_bytes()[:20])
    fresh = tiny_training.make_trainer(strategy, str(directory), 8, 4)
    with pytest.raises(CheckpointError, match=f"no checkpoint of {directory} can be read "
                       r"\(ckpt-4, ckpt-8; .*initial weights"):
        fresh.train(lambda skip: tiny_training.dataset(8, skip))
    assert fresh.step == 0 and all(index.exists() for index in kept)


DISTRIBUTED_ROWS = r"""
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.training import distribute
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
out = {}
for size, drop in ((3, False), (4, True)):  # parts sliced; a static batch reshaped
    rows = tf.data.Dataset.range(7).map(lambda i: {"x": tf.fill([2], i)})
    seen = []
    for batch in distribute.distribute_dataset(strategy, rows.batch(size, drop)):
        parts = strategy.experimental_local_results(batch["x"])
        seen.append([p[:, 0].numpy().tolist() for p in parts])
    out[size] = seen
# Neither a per-device buffer nor the host pipeline's autotuning model: with them, deleting
# the iterator could wait seconds for their threads (distribute._NO_DEVICE_BUFFER).
batches = distribute.distribute_dataset(strategy, rows.batch(2))
out["buffer"] = batches._options.experimental_per_replica_buffer_size
out["autotune"] = batches._datasets[0].options().autotune.enabled
print(json.dumps(out))
"""


def test_each_replica_takes_its_rows_of_every_global_batch():
    """distribute.distribute_dataset: replica i reads the i-th part of each global batch,
    in order (the last batch's parts shorter, or empty), as one process reads it."""
    result = run_python(["-c", DISTRIBUTED_ROWS], cwd=ROOT,
                        env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["3"] == [[[0, 1], [2]], [[3, 4], [5]], [[6], []]]
    assert out["4"] == [[[0, 1], [2, 3]]]
    assert (out["buffer"], out["autotune"]) == (0, False)
