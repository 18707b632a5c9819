"""Recomputation (`recompute=` on the models, the Trainer's and `--recompute`): the same
gradients with dropout on, a fraction of the activation memory, and the refusals.
(Under MirroredStrategy with gradient accumulation: tests/test_training_loop.py; in a
script: the README's run, tests/test_readme.py; resumed: tests/test_resume.py.)"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig
from albert_tf.modeling.common import random_draws
from tests.helpers.scripts import SPM, run_script
from tests.helpers.tiny import random_inputs, tiny_config

# Two groups of two blocks over three layers, dropout everywhere: every way a unit's
# masks could come out different when it is run again.
CONFIG = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2,
                     num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)


def gradient_step(recompute, jit_compile=False, config=CONFIG, batch=3, length=7):
    """A function: loss, gradients of a classifier (seed 1) on fixed inputs under one
    dropout seed."""
    model = AlbertClassifier(config, 2, seed=1, recompute=recompute)
    inputs = random_inputs(config, batch=batch, length=length, min_length=3)
    labels = tf.constant(np.arange(batch) % 2)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape, random_draws(tf.constant([5, 6], tf.int64)):
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_sum(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        return loss, tape.gradient(loss, model.trainable_variables)

    return step


# XLA compiles the whole computation: the smaller two-layer model there.
@pytest.mark.parametrize("jit_compile, config, units", [
    (False, CONFIG, ("layer", "group")),
    (True, tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2),
     ("layer",))], ids=["graph", "xla"])
def test_each_unit_gives_the_gradients_of_no_recomputation(jit_compile, config, units):
    """Dropout on: each recomputed unit replays the masks it drew, so the loss and every
    gradient equal those of the model that keeps everything (in a graph, and compiled
    with XLA as --enable_xla compiles the gradient computation)."""
    matmuls = {}

    def gradients(unit):
        with dense_matmuls_run() as matmuls[unit]:
            loss, grads = gradient_step(unit, jit_compile, config)()
        return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

    loss, expected = gradients(None)
    assert any(np.abs(g).max() > 0 for g in expected)
    for unit in units:
        other_loss, grads = gradients(unit)
        assert other_loss == loss
        for a, b in zip(grads, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    if jit_compile:
        return
    # The replays in the graph TensorFlow runs: each recomputed block's matmuls but its
    # FFN output dense (`recompute.Deferred`). 3 layers of 2 blocks: as layers, every
    # block but the last recomputed, 5 blocks, 3 matmuls each; as groups, every layer
    # but the last, 2 runs of 2 blocks, the first replayed whole (4), the second up to
    # its output dense (3).
    blocks = config.num_hidden_layers * config.inner_group_num
    assert matmuls["layer"][0] - matmuls[None][0] == 3 * (blocks - 1)
    assert matmuls["group"][0] - matmuls[None][0] == 7 * (config.num_hidden_layers - 1)


@contextlib.contextmanager
def dense_matmuls_run():
    """Yields a list that holds, after the block, the number of dense matmuls (not batch
    matmuls) in the graphs that the functions first run in the block ran, as TensorFlow
    optimized them (Grappler's rewrites and pruning done)."""
    from tensorflow.python.eager import context

    found = []
    context.enable_run_metadata()
    try:
        yield found
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    found.append(sum("MatMul" in node.op and "BatchMatMul" not in node.op
                     for function in metadata.function_graphs
                     for graph in function.partition_graphs for node in graph.node))


def test_mixed_bfloat16_gives_the_gradients_of_no_recomputation():
    """Under Keras' mixed_bfloat16 policy (bfloat16 activations, float32 variables, as
    --precision=mixed_bfloat16 trains) too: the same loss and gradients."""
    import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        results = {}
        for unit in (None, "layer"):
            loss, grads = gradient_step(unit)()
            results[unit] = float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert results["layer"][0] == results[None][0]
    for a, b in zip(results["layer"][1], results[None][1]):
        np.testing.assert_array_equal(a, b)


# The tests that read TensorFlow's CPU allocator statistics.
MEMORY_TESTS = ("test_recompute_keeps_a_fraction_of_the_activations",
                "test_a_training_pass_keeps_no_attention_probabilities")
_in_a_process: dict = {}


def statistics_here_or_in_a_process(test) -> bool:
    """True where TensorFlow keeps CPU allocator statistics in this process; else, once
    for all of MEMORY_TESTS, runs them in a new process with oneDNN's CPU allocator,
    which keeps them (TensorFlow turns oneDNN on by default only on some CPUs: AVX-512
    ones), asserts that `test` passed there and returns False."""
    import os

    from tests.helpers.forked import run_python

    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        return True
    except ValueError:
        assert os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "1", "no allocator statistics"
    if not _in_a_process:
        result = run_python(["-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                             *(f"{__file__}::{name}" for name in MEMORY_TESTS)],
                            env={"TF_ENABLE_ONEDNN_OPTS": "1"},
                            cwd=os.path.dirname(os.path.dirname(__file__)))
        _in_a_process["output"] = result.stdout + result.stderr
    output = _in_a_process["output"]
    assert f"PASSED tests/test_recompute.py::{test}" in output, output[-3000:]
    return False


def test_recompute_keeps_a_fraction_of_the_activations():
    """TensorFlow's own allocator statistics of one gradient computation: with each
    layer recomputed the peak above the weights is under a third of what it is
    without (12 layers; what remains is the layers' inputs and one layer's work). At
    batch 16, so that what a process may allocate beside the step (~0.9 MB more in
    both peaks in a run of the whole suite) weighs little (0.25 here, 0.36 at batch 4
    in that run)."""
    config = AlbertConfig(vocab_size=100, embedding_size=16, hidden_size=64,
                          num_hidden_layers=12, num_attention_heads=4,
                          intermediate_size=256, max_position_embeddings=64)
    if not statistics_here_or_in_a_process(
            "test_recompute_keeps_a_fraction_of_the_activations"):
        return
    peaks = {}
    for unit in (None, "layer"):
        step = gradient_step(unit, config=config, batch=16, length=64)
        step()  # traced
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        step()
        peaks[unit] = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    assert peaks["layer"] < peaks[None] / 3, peaks


def test_a_training_pass_keeps_no_attention_probabilities():
    """Without recompute too, training keeps each layer's query, key and value, not its
    attention probabilities (nor the logits before them): the backward pass computes
    them again. With 16 heads of 2 over 128 tokens the probabilities are most of what a
    layer would keep, 6 layers 12 MB at batch 2; the step's peak above the weights is
    below that."""
    config = AlbertConfig(vocab_size=100, embedding_size=16, hidden_size=32,
                          num_hidden_layers=6, num_attention_heads=16,
                          intermediate_size=64, max_position_embeddings=128)
    if not statistics_here_or_in_a_process(
            "test_a_training_pass_keeps_no_attention_probabilities"):
        return
    step = gradient_step(None, config=config, batch=2, length=128)
    step()  # traced
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    step()
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    probabilities = 6 * 2 * 16 * 128 * 128 * 4  # layers x [B, N, S, S] float32
    assert peak < probabilities, (peak, probabilities)


def test_recomputed_attention_probabilities_replay_their_dropout_mask():
    """The attention's output and gradients in training (its probabilities computed
    again in the backward pass) are those of the plain computation that keeps them,
    written out here from the layer's weights with the same dropout mask (the first one
    drawn in the frame): a backward pass with another mask would differ at rate 0.5."""
    import math

    from albert_tf.modeling import common
    from albert_tf.modeling.attention import AlbertAttention, attention_bias

    config = tiny_config(attention_probs_dropout_prob=0.5)
    batch, length, hidden = 2, 7, config.hidden_size
    heads, size = config.num_attention_heads, config.attention_head_size
    attention = AlbertAttention(config, common.SeedStream(3))
    attention.build()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, length, hidden)), tf.float32)
    mask = tf.constant([[1] * length, [1] * 4 + [0] * 3], tf.int32)
    weights = tf.constant(rng.normal(size=(batch, length, hidden)), tf.float32)
    seed = tf.constant([7, 8], tf.int64)
    variables = [x, *attention.trainable_variables]

    def plain():
        def split(layer):
            projected = tf.matmul(x, layer.kernel) + layer.bias
            return tf.transpose(tf.reshape(projected, [batch, length, heads, size]),
                                [0, 2, 1, 3])

        q, k, v = split(attention.query), split(attention.key), split(attention.value)
        logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(size)
        probs = tf.nn.softmax(logits + attention_bias(mask))
        probs = attention.probs_dropout.with_seed(
            probs, common.draw_seed(attention.probs_dropout, True))
        context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]),
                             [batch, length, hidden])
        return tf.matmul(context, attention.output_dense.kernel) + attention.output_dense.bias

    def gradients(forward):
        with tf.GradientTape() as tape, common.random_draws(seed):
            tape.watch(x)
            output = forward()
            loss = tf.reduce_sum(output * weights)
        return output, tape.gradient(loss, variables)

    output, grads = tf.function(lambda: gradients(
        lambda: attention(x, mask, training=True)))()
    expected_output, expected = tf.function(lambda: gradients(plain))()
    np.testing.assert_allclose(output, expected_output, rtol=1e-5, atol=1e-5)
    assert len(grads) == len(expected) == 9  # x, 4 kernels and 4 biases
    for a, b in zip(grads, expected):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_what_cannot_recompute_is_refused_before_training(tmp_path):
    import keras

    from albert_tf.training import distribute
    from albert_tf.training.loop import Trainer
    from albert_tf.training.objectives import MeanObjective

    with pytest.raises(ValueError, match="recompute must be one of layer, group or none, "
                                         "got 'block'"):
        AlbertClassifier(CONFIG, 2, recompute="block")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="recompute='layer': Sequential has no ALBERT "
                                         "encoder"):
        Trainer(strategy=distribute.get_strategy("one_device"), model=model,
                optimizer=keras.optimizers.Adam(), objective=MeanObjective(None),
                output_dir=str(tmp_path), train_steps=1, recompute="layer")
    # A script run that does not train: refused before it reads anything.
    result = run_script("run_classifier.py", "--task_name=sst-2", f"--data_dir={tmp_path}",
                        f"--output_dir={tmp_path / 'out'}", f"--spm_model_file={SPM}",
                        "--albert_config_file=albert_base_v2", "--do_eval", "--recompute",
                        check=False)
    assert result.returncode != 0
    assert "--recompute changes what training keeps in memory; this run does not train" \
        in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_step_out_of_memory_names_what_it_needed(tmp_path):
    """TensorFlow's out-of-memory error in a step (as a GPU's allocator words it) comes
    back as one line: the step, the tensor it could not allocate and its size, what to
    change; the scripts print it without a traceback."""
    from albert_tf.apps.runner import user_errors
    from albert_tf.training import distribute
    from albert_tf.training.loop import TrainingOutOfMemory
    from tests.helpers import tiny_training

    trainer = tiny_training.make_trainer(distribute.get_strategy("one_device"),
                                         str(tmp_path), 2, 100)

    def exhausted(iterator, num_steps):
        raise tf.errors.ResourceExhaustedError(
            None, None, "OOM when allocating tensor with shape[4,64,512,512] and type "
            "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")

    trainer._train_loop = exhausted
    with pytest.raises(TrainingOutOfMemory, match=(
            r"^out of memory in training step 1: TensorFlow could not allocate a float "
            r"tensor of shape \[4, 64, 512, 512\] \(256\.0 MiB\) on GPU:0\. This batch does "
            r"not fit: recompute the encoder's layers \(--recompute")):
        trainer.train(lambda skip: tiny_training.dataset(8, skip))
    assert TrainingOutOfMemory in user_errors()
