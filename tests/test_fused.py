"""The fused kernels (albert_tf.modeling.fused, common.SharedDense) against the plain math they
replace: values and gradients, XLA on and off, float32 and float16; exports without XLA."""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.modeling import common, fused
from tests.helpers import tiny
from tests.helpers.forked import run_python


def plain_gelu(x):  # the original modeling.gelu
    return x * 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def plain_layer_norm(x, gamma, beta, epsilon=1e-12):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta


def value_and_grads(fn, *inputs, weight):
    """fn(*inputs) and the gradients of sum(fn(...) * weight) for every input."""
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = fn(*inputs)
        loss = tf.reduce_sum(tf.cast(out, tf.float32) * weight)
    return out, tape.gradient(loss, inputs)


def assert_close(actual, expected, atol, name=""):
    np.testing.assert_allclose(np.asarray(actual, np.float32),
                               np.asarray(expected, np.float32), atol=atol, rtol=0,
                               err_msg=name)


@pytest.fixture(params=[True, False], ids=["xla", "plain"])
def xla(request):
    if request.param:
        yield True
    else:
        with fused.xla_disabled():
            yield False


def test_gelu_equals_the_original_formula(xla):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(0, 3, (4, 5, 24)), tf.float32)
    weight = tf.constant(rng.normal(size=(4, 5, 24)), tf.float32)
    out, (dx,) = value_and_grads(fused.gelu, x, weight=weight)
    want, (want_dx,) = value_and_grads(plain_gelu, x, weight=weight)
    assert_close(out, want, 1e-5)
    assert_close(dx, want_dx, 1e-5)
    # inside a graph too (the custom gradient of a traced function)
    graph_dx = tf.function(lambda x: value_and_grads(fused.gelu, x, weight=weight)[1][0])(x)
    assert_close(graph_dx, want_dx, 1e-5)


def test_layer_norm_equals_the_original_formula(xla):
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(2, 3, (3, 7, 16)), tf.float32)
    gamma = tf.constant(rng.normal(1, 0.2, 16), tf.float32)
    beta = tf.constant(rng.normal(0, 0.2, 16), tf.float32)
    weight = tf.constant(rng.normal(size=(3, 7, 16)), tf.float32)
    out, grads = value_and_grads(lambda x, g, b: fused.layer_norm(x, g, b, 1e-12),
                                 x, gamma, beta, weight=weight)
    want, want_grads = value_and_grads(plain_layer_norm, x, gamma, beta, weight=weight)
    assert_close(out, want, 1e-5)
    for name, got, expected in zip(("x", "gamma", "beta"), grads, want_grads):
        assert got.shape == expected.shape, name
        assert_close(got, expected, 1e-4)


def test_half_precision_inputs_compute_in_float32_and_keep_their_dtype(xla):
    rng = np.random.default_rng(2)
    x32 = tf.constant(rng.normal(0, 2, (2, 3, 8)), tf.float32)
    x16 = tf.cast(x32, tf.float16)
    gamma, beta = tf.ones([8]), tf.zeros([8])
    out = fused.gelu(x16)
    assert out.dtype == tf.float16
    assert_close(out, plain_gelu(tf.cast(x16, tf.float32)), 2e-3)
    normed = fused.layer_norm(x16, gamma, beta, 1e-12)
    assert normed.dtype == tf.float16
    assert_close(normed, plain_layer_norm(tf.cast(x16, tf.float32), gamma, beta), 5e-3)
    _, (dx,) = value_and_grads(fused.gelu, x16, weight=tf.ones_like(x32))
    assert dx.dtype == tf.float16


def test_shared_dense_equals_matmul_bias_and_residual():
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(2, 5, 6)), tf.float32)
    residual = tf.constant(rng.normal(size=(2, 5, 9)), tf.float32)
    kernel = tf.Variable(rng.normal(size=(6, 9)), dtype=tf.float32)
    bias = tf.Variable(rng.normal(size=(9,)), dtype=tf.float32)
    weight = tf.constant(rng.normal(size=(2, 5, 9)), tf.float32)

    class Layer:  # what SharedDense.of reads of a Keras Dense
        pass

    layer = Layer()
    layer.kernel, layer.bias = kernel, bias

    def grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([x, residual])
            out = fn()
            loss = tf.reduce_sum(out * weight)
        return [out] + tape.gradient(loss, [x, residual, kernel, bias])

    want = grads(lambda: tf.einsum("bsi,io->bso", x, kernel) + bias + residual)
    for training in (True, False):  # through kernel_t (training) or plain autodiff
        dense = common.SharedDense.of([layer], tf.float32, training=training)
        assert (dense.kernel_t is not None) == training
        got = grads(lambda: dense(x, residual=residual))
        for name, a, b in zip(("output", "x", "residual", "kernel", "bias"), got, want):
            assert_close(a, b, 1e-5, name)
    # side by side, then a column slice: the same as the layer alone
    pair = common.SharedDense.of([layer, layer], tf.float32, training=True)
    assert pair.kernel.shape == (6, 18) and pair.kernel_t.shape == (18, 6)
    assert_close(pair.columns(9, 18)(x), want[0] - residual, 1e-5)


def _xla_functions(graph_def) -> list[str]:
    return [f.signature.name for f in graph_def.library.function
            if f.attr["_XlaMustCompile"].b]


def test_a_switch_block_leaves_no_setting_behind():
    """After a block, a thread reads the switch's default again, as it is then (the test
    process changes the XLA switch's default per module: conftest.KERNEL_MODULES)."""
    switch = fused.TracingSwitch(default=False)
    with switch.set(True):
        assert switch.now() is True
        with switch.set(False):
            assert switch.now() is False
        assert switch.now() is True
    switch.default = True
    assert switch.now() is True
    with switch.set(False):
        assert switch.now() is False
    switch.default = False
    assert switch.now() is False


def test_xla_disabled_traces_plain_ops(tiny_config):
    from albert_tf import AlbertEncoder

    model = AlbertEncoder(tiny_config, seed=0)
    inputs = {"input_word_ids": tf.ones([2, 6], tf.int32)}

    def graph():
        fn = tf.function(lambda: model(inputs)["sequence_output"])
        return fn.get_concrete_function().graph.as_graph_def()

    assert _xla_functions(graph()), "by default GELU and LayerNorm are XLA kernels"
    with fused.xla_disabled():
        assert fused.xla_enabled() is False
        assert _xla_functions(graph()) == []
    assert fused.xla_enabled() is True


def test_exported_savedmodel_has_no_xla_kernels_and_matches_keras(tiny_config, tmp_path):
    """TF Serving runs XLA on CPU only with --xla_cpu_compilation_enabled: exports are
    traced without it, and answer as the (XLA-fused) Keras model does."""
    from tensorflow.core.protobuf import saved_model_pb2

    from albert_tf import AlbertClassifier
    from albert_tf.export import export_savedmodel

    model = AlbertClassifier(tiny_config, 3, seed=0)
    path = export_savedmodel(model, str(tmp_path / "export"), kind="classifier",
                             max_seq_length=16, warmup_requests=False)
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    assert all(_xla_functions(g.graph_def) == [] for g in saved.meta_graphs)
    inputs = tiny.random_inputs(tiny_config, batch=2, length=16, seed=4)
    want = model(inputs)["logits"].numpy()
    script = ("import json, sys, numpy as np, tensorflow as tf\n"
              "inputs = {k: tf.constant(v) for k, v in json.loads(sys.argv[2]).items()}\n"
              "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
              "print(json.dumps(f(**inputs)['logits'].numpy().tolist()))\n")
    out = run_python(["-c", script, path,
                      json.dumps({k: v.tolist() for k, v in inputs.items()})],
                     check=True).stdout
    assert_close(json.loads(out.strip().splitlines()[-1]), want, 1e-5)
