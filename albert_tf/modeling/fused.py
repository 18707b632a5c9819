"""GELU and LayerNorm as single XLA kernels, forward and backward, inside graphs whose
matmuls stay in TensorFlow's own kernels.

On CPU TensorFlow's oneDNN matmuls beat XLA's (on the 2-core machine of BENCHMARKS.md
~370 against ~290 GFLOP/s), and Grappler fuses a matmul with its bias and residual add;
but between the matmuls TensorFlow runs GELU (8 element-wise ops forward, ~15 backward,
each a pass over a [B, S, I] tensor) and LayerNorm one op at a time. Here each of the two
is a small pure function compiled by XLA (`jit_compile=True`), with its gradient written
out and compiled too: one fused loop each way, the backward pass recomputing what it
needs from the input instead of keeping intermediates. The sums over positions of the
LayerNorm gradient (for gamma and beta) stay outside: TensorFlow's BiasAdd gradient op
computes them faster than XLA's reductions fused into the kernel.

Being pure functions, they run wherever XLA runs a function: eagerly, inside a
`tf.function`, under MirroredStrategy over logical CPU devices, inside a model that is
itself compiled (they are then inlined).

Within `xla_disabled()`, functions traced use the same math as plain TensorFlow ops:
inference graphs use it (`modeling.real_tokens.inference_graph`: SavedModel exports, since
TF Serving runs XLA-compiled functions on CPU only when started with
`--xla_cpu_compilation_enabled`, and evaluation and prediction, whose shapes change with
every batch). The choice is made at tracing time.

`ALBERT_TF_XLA_KERNELS=0` in a process's environment (read at import) makes plain
TensorFlow ops the default there, training included (the optimizers' update kernels
too): the same math, without compiling the kernels for each new batch shape, which is
most of a short run's time on a small model (the test suite runs the scripts so: the
script tests of run_classifier took 87 s instead of 114 on 2 cores).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading

import tensorflow as tf

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


class TracingSwitch:
    """A setting of this thread that functions read when they are traced, with a
    default, changed within a block (`with switch.set(value):`) and restored after it.
    Here: XLA kernels and the LiteRT form; `modeling.real_tokens`: real-token inference."""

    def __init__(self, default: bool):
        self.default = default
        self._local = threading.local()

    def now(self) -> bool:
        return getattr(self._local, "value", self.default)

    @contextlib.contextmanager
    def set(self, value: bool):
        previous = self._local.__dict__.get("value", _UNSET)
        self._local.value = value
        try:
            yield
        finally:
            if previous is _UNSET:  # back to the default, whatever it is then
                del self._local.value
            else:
                self._local.value = previous


_UNSET = object()


KERNELS_VARIABLE = "ALBERT_TF_XLA_KERNELS"
_XLA = TracingSwitch(default=os.environ.get(KERNELS_VARIABLE, "1") != "0")
_LITERT = TracingSwitch(default=False)
_GRADIENTS = TracingSwitch(default=True)


def xla_enabled() -> bool:
    """Whether `gelu` and `layer_norm` are traced as XLA kernels (the default, unless
    ALBERT_TF_XLA_KERNELS=0)."""
    return _XLA.now()


def xla_disabled():
    """Within this context, `gelu` and `layer_norm` trace plain TensorFlow ops."""
    return _XLA.set(False)


def for_litert():
    """Within this context, functions traced are for the LiteRT converter
    (`albert_tf.export.tflite`): `gelu` is `tf.nn.gelu(approximate=True)` (the same
    formula), which becomes LiteRT's one GELU kernel instead of eight element-wise ops,
    and `layer_norm` the same plain ops without a gradient function (inference needs
    none, and the converter would load it as an unsaved custom gradient)."""
    return _LITERT.set(True)


def litert_now() -> bool:
    return _LITERT.now()


def without_gradients():
    """Within this context, `gelu` and `layer_norm` are their forward functions alone,
    with no gradient function beside them: inference graphs
    (`modeling.real_tokens.inference_graph`), which nothing differentiates. A
    SavedModel keeps the gradient function of every custom-gradient op it holds and
    traces each one as it saves (`SaveOptions.experimental_custom_gradients`): without
    them the export of a tiny classifier took 3.6 s instead of 3.9 (means of three
    alternating runs on a 2-core AMD EPYC), and inference traces lose an op per call.
    A model traced outside it (the reusable SavedModel's `__call__`, which fine-tuning
    differentiates) keeps them."""
    return _GRADIENTS.set(False)


def _differentiable(forward, backward):
    """`forward` with `backward` as its gradient function, or (`without_gradients`)
    `forward` itself."""
    if not _GRADIENTS.now():
        return forward

    @tf.custom_gradient
    def op(*tensors):
        return forward(*tensors), lambda dy: backward(tensors, dy)

    return op


def _float32(x):
    return tf.cast(x, tf.float32)


# ------------------------------------------------------------------------ GELU
def _gelu(h):
    return 0.5 * h * (1.0 + tf.tanh(_SQRT_2_OVER_PI * (h + _CUBIC * h * h * h)))


def _gelu_forward(x):
    return tf.cast(_gelu(_float32(x)), x.dtype)


def _gelu_backward(x, dy):
    h = _float32(x)
    h2 = h * h
    t = tf.tanh(_SQRT_2_OVER_PI * (h + _CUBIC * h2 * h))
    slope = 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * _SQRT_2_OVER_PI * (
        1.0 + 3.0 * _CUBIC * h2)
    return tf.cast(_float32(dy) * slope, x.dtype)


# ------------------------------------------------------------------- LayerNorm
def _normalize(x, epsilon):
    h = _float32(x)
    mean, variance = tf.nn.moments(h, axes=[-1], keepdims=True)
    inverse = tf.math.rsqrt(variance + epsilon)
    return (h - mean) * inverse, inverse


def _layer_norm_forward(x, gamma, beta, epsilon):
    normalized, _ = _normalize(x, epsilon)
    return tf.cast(normalized * _float32(gamma) + _float32(beta), x.dtype)


def _layer_norm_backward(x, gamma, dy, epsilon):
    """(dx in x's dtype, dy * normalized in float32)."""
    normalized, inverse = _normalize(x, epsilon)
    dy = _float32(dy)
    d_normalized = dy * _float32(gamma)
    dx = inverse * (d_normalized
                    - tf.reduce_mean(d_normalized, -1, keepdims=True)
                    - normalized * tf.reduce_mean(d_normalized * normalized, -1,
                                                  keepdims=True))
    return tf.cast(dx, x.dtype), dy * normalized


def _sum_over_positions(grad, like):
    """`grad` [..., W] summed over every axis but the last, in `like`'s dtype (the
    BiasAdd gradient op: 2.4x faster than `reduce_sum` on CPU)."""
    return tf.cast(tf.raw_ops.BiasAddGrad(out_backprop=grad), like.dtype)


# ------------------------------------------------------------------ compiling
_functions: dict = {}


def compiled(python_function, xla: bool, **constants):
    """`python_function` (with keyword `constants` bound) as a tf.function, compiled by
    XLA or not; one per distinct arguments, cached."""
    key = (python_function, xla, tuple(sorted(constants.items())))
    if key not in _functions:
        def bound(*tensors):
            return python_function(*tensors, **constants)

        _functions[key] = tf.function(bound, jit_compile=xla, autograph=False,
                                      reduce_retracing=True)
    return _functions[key]


def gelu(x):
    """GELU, the tanh approximation of the original `modeling.gelu`:
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Computed in float32, returned
    in x's dtype.

    In bfloat16 inference graphs (within `xla_disabled()`) the formula is written in x's
    dtype, with no casts around it, so that Grappler fuses it into the oneDNN matmul
    before it, as it does in float32 graphs: oneDNN then computes GELU in float32 on the
    matmul's accumulator and rounds once. (Measured on an AVX512_BF16 CPU: 12 FFN
    matmuls of ALBERT-base over 224 tokens took 36.7 ms against 44.6 with the casts,
    and their outputs were closer to float32's: max error 0.008 against 0.016.)"""
    if litert_now():
        return tf.nn.gelu(x, approximate=True)
    xla = xla_enabled()
    if not xla and x.dtype == tf.bfloat16:
        return _gelu(x)
    backward = compiled(_gelu_backward, xla)
    return _differentiable(compiled(_gelu_forward, xla),
                           lambda tensors, dy: backward(*tensors, dy))(x)


def layer_norm(x, gamma, beta, epsilon: float):
    """LayerNorm over the last axis, as the original's `layer_norm`:
    (x - mean) / sqrt(variance + epsilon) * gamma + beta.

    x: [..., W]; gamma, beta: [W]. Computed in float32, returned in x's dtype."""
    if litert_now():
        return _layer_norm_forward(x, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta),
                                   epsilon)
    xla = xla_enabled()
    backward = compiled(_layer_norm_backward, xla, epsilon=epsilon)

    def grad(tensors, dy):
        x, gamma, beta = tensors
        dx, dy_normalized = backward(x, gamma, dy)
        return (dx, _sum_over_positions(dy_normalized, gamma),
                _sum_over_positions(dy, beta))

    op = _differentiable(compiled(_layer_norm_forward, xla, epsilon=epsilon), grad)
    # Variables are read here, outside the custom-gradient function: it takes tensors.
    return op(x, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))

