"""Small pieces shared by the ALBERT layers: activations, initializers, seeds, the base
of the layers and their registration as Keras serializables."""

from __future__ import annotations

import contextlib
import threading
from typing import NamedTuple

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import fused

# The original uses `tf.contrib.layers.layer_norm`, whose epsilon is 1e-12.
LAYER_NORM_EPSILON = 1e-12


def gelu(x):
    """GELU, tanh approximation: the original `modeling.gelu`, as one XLA kernel each
    way (`fused.gelu`)."""
    return fused.gelu(x)


def gelu_exact(x):
    """GELU in its exact erf form, x * Phi(x): `hidden_act: "gelu_exact"` (what a
    `transformers` config calls "gelu")."""
    return tf.nn.gelu(x, approximate=False)


def get_activation(name: str):
    """Maps a config `hidden_act` to a function (None for linear), as the original."""
    act = name.lower()
    if act in ("", "linear"):
        return None
    if act == "gelu":
        return gelu
    if act == "gelu_exact":
        return gelu_exact
    if act == "relu":
        return tf.nn.relu
    if act == "tanh":
        return tf.tanh
    raise ValueError(f"unsupported activation {name!r}")


class SeedStream:
    """Hands out one seed per random choice, derived from a base seed.

    With `seed=None` every draw returns None, so Keras falls back to its global
    generator (which `keras.utils.set_random_seed` makes reproducible). With an integer
    the model's initial weights and dropout masks depend only on that integer.
    """

    def __init__(self, seed: int | None, drawn: int = 0):
        """`drawn`: how many seeds were handed out already (`state`)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        self.seed = seed
        self._count = drawn

    @property
    def state(self) -> list:
        """[seed, seeds drawn so far]: `SeedStream(*state)` goes on from here."""
        return [self.seed, self._count]

    def __call__(self) -> int | None:
        if self.seed is None:
            return None
        self._count += 1
        return (self.seed * 1_000_003 + self._count * 7919) % (2**31 - 1)


def serializable(cls):
    """Registers `cls` as a Keras serializable (what `keras.models.load_model` finds a
    `.keras` file's classes by): as `albert_tf>Name` for a class of this package, as
    `<module>>Name` for another (a task file's model: load the file before the model).
    Every subclass of `AlbertLayer` and `AlbertModel` is registered when defined."""
    module = cls.__module__
    package = "albert_tf" if module.split(".")[0] == "albert_tf" else module
    return keras.saving.register_keras_serializable(package=package)(cls)


def checked_config(config) -> AlbertConfig:
    """`config`, refused unless it is an `AlbertConfig` (what every layer and model of
    the package is made from)."""
    if not isinstance(config, AlbertConfig):
        raise TypeError(f"config must be an AlbertConfig, got {type(config).__name__}")
    return config


class AlbertLayer(keras.layers.Layer):
    """A layer of the encoder or of the pretraining heads, made from an `AlbertConfig`
    and the `SeedStream` its initial weights and dropout draw from. Its config (Keras'
    `get_config`) holds both, the stream as it was when the layer was made, so that
    `from_config` makes the same layer with the same initial weights."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        serializable(cls)

    def __init__(self, config: AlbertConfig, seeds: SeedStream, **kwargs):
        super().__init__(**kwargs)
        self.config = checked_config(config)
        self._seeds_state = seeds.state

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "seeds": list(self._seeds_state)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")),
                   SeedStream(*config.pop("seeds")), **config)


def truncated_normal(stddev: float, seeds: SeedStream):
    """The original's `create_initializer`: truncated normal at 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev, seed=seeds())


def dense(units: int, *, name: str, stddev: float, seeds: SeedStream, dtype,
          activation=None, use_bias: bool = True) -> keras.layers.Dense:
    """A dense layer with the original's `kernel` [in, out] and zero `bias`."""
    return keras.layers.Dense(
        units, activation=activation, name=name, dtype=dtype, use_bias=use_bias,
        kernel_initializer=truncated_normal(stddev, seeds),
        bias_initializer="zeros")


def training_now(training) -> bool:
    """Whether `training` is a training pass known when tracing (Python True; Keras may
    hand a tensor in some flows, which gets the inference path)."""
    return isinstance(training, bool) and training


def float_kernel(layer, dtype) -> tf.Tensor:
    """A Keras Dense layer's kernel as a float matmul takes it, in `dtype`. After Keras'
    `model.quantize("int8")` the layer holds an int8 kernel and a scale per output
    (`kernel_scale`, Keras' abs-max quantization: kernel ≈ int8 / scale): dequantized
    here, once per forward pass, so the shared blocks multiply in float with weights
    stored as int8 (weight-only int8). Other quantization modes are refused by name."""
    mode = getattr(layer, "quantization_mode", None)
    if mode is None:  # with LoRA, the frozen kernel alone (`SharedDense.low_rank`)
        return tf.cast(layer._kernel if _lora_on(layer) else layer.kernel, dtype)
    if mode == "int8":
        return tf.cast(layer.kernel, dtype) / tf.cast(layer.kernel_scale, dtype)
    raise ValueError(f"{layer.path}: Keras' quantization mode {mode!r} is not supported "
                     "by the encoder's shared layers; quantize(\"int8\") is")


class SharedDense(NamedTuple):
    """The weights of a dense layer (or of several side by side), read once per forward
    pass for every layer that shares them: `kernel` [in, out], `bias` [out] and, for
    training, the transpose `kernel_t` [out, in], in the compute dtype.

    Calling it computes `x @ kernel + bias (+ residual)`. With `kernel_t` the input
    gradient is `dy @ kernel_t`: on CPU oneDNN multiplies by a transposed operand up to
    15% slower (for ALBERT-base's FFN, 291 against 340 GFLOP/s), and the transpose made
    once serves the 12 layers. Several layers side by side (query, key and value) are
    one matmul, one bias and one transpose of the heads.

    `low_rank` (A [in, R], B [R, out]): the LoRA adapters of the layers that have them
    (Keras' Dense `enable_lora`; B scaled by alpha / rank, zero in the columns of a
    layer without one), added as `(x @ A) @ B` beside the frozen kernel rather than
    folded into it: the step then needs no kernel-sized gradient (only A's and B's)
    and no kernel-sized copy of kernel + A @ B (xxlarge's FFN kernel is 256 MB).
    """

    kernel: tf.Tensor
    bias: tf.Tensor
    kernel_t: tf.Tensor | None = None
    low_rank: tuple[tf.Tensor, tf.Tensor] | None = None

    @classmethod
    def of(cls, layers, dtype, training=False) -> "SharedDense":
        kernels = [float_kernel(layer, dtype) for layer in layers]
        biases = [tf.cast(layer.bias, dtype) for layer in layers]
        kernel = kernels[0] if len(kernels) == 1 else tf.concat(kernels, axis=1)
        bias = biases[0] if len(biases) == 1 else tf.concat(biases, axis=0)
        # (`training` may be a tensor in some Keras flows: transposed for Python True.)
        return cls(kernel, bias, tf.transpose(kernel) if training_now(training) else None,
                   _low_rank(layers, [int(k.shape[1]) for k in kernels], dtype))

    def columns(self, start: int, stop: int) -> "SharedDense":
        """The outputs start:stop alone (e.g. the query of a query-key-value triple)."""
        return SharedDense(self.kernel[:, start:stop], self.bias[start:stop],
                           None if self.kernel_t is None else self.kernel_t[start:stop],
                           None if self.low_rank is None
                           else (self.low_rank[0], self.low_rank[1][:, start:stop]))

    def __call__(self, x, residual=None):
        """x [..., in] -> [..., out], plus `residual` [..., out] if given."""
        # A matrix (the real tokens' [T, in]) is multiplied as it is: the reshapes to
        # and from [-1, in] would add four shape ops per call to each inference graph.
        flat = x.shape.rank == 2
        if not flat:
            width = tf.shape(self.kernel)[1]
            shape = tf.concat([tf.shape(x)[:-1], [width]], axis=0)
            x = tf.reshape(x, [-1, tf.shape(x)[-1]])
            residual = None if residual is None else tf.reshape(residual, [-1, width])
        extra = () if residual is None else (residual,)
        if self.kernel_t is None:
            y = _matmul_bias_add(x, self.kernel, self.bias, *extra)
        else:
            y = _shared_matmul(x, self.kernel, self.kernel_t, self.bias, *extra)
        if self.low_rank is not None:
            y = y + tf.matmul(tf.matmul(x, self.low_rank[0]), self.low_rank[1])
        return y if flat else tf.reshape(y, shape)


def _lora_on(layer) -> bool:
    """A Keras Dense with LoRA enabled on its float kernel (Keras' own int8 path
    keeps its adapters folded in)."""
    return bool(getattr(layer, "lora_enabled", False)) and \
        getattr(layer, "quantization_mode", None) is None


def _low_rank(layers, widths, dtype):
    """`SharedDense.low_rank` of `layers` side by side (`widths`: their outputs); None
    where none has LoRA."""
    if not any(_lora_on(layer) for layer in layers):
        return None
    a_parts, b_parts, start, total = [], [], 0, sum(widths)
    for layer, width in zip(layers, widths):
        if _lora_on(layer):
            scale = layer.lora_alpha / layer.lora_rank
            a_parts.append(tf.cast(layer.lora_kernel_a, dtype))
            b_parts.append(tf.pad(tf.cast(layer.lora_kernel_b, dtype) * scale,
                                  [[0, 0], [start, total - start - width]]))
        start += width
    return tf.concat(a_parts, axis=1), tf.concat(b_parts, axis=0)


def _matmul_bias_add(x, kernel, bias, *residual):
    # Grappler fuses the matmul, bias and residual add into one oneDNN call.
    y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return y + residual[0] if residual else y


@tf.custom_gradient
def _shared_matmul(x, kernel, kernel_t, bias, *residual):
    def grad(dy):
        return (tf.matmul(dy, kernel_t), tf.matmul(x, dy, transpose_a=True), None,
                tf.raw_ops.BiasAddGrad(out_backprop=dy)) + ((dy,) if residual else ())

    return _matmul_bias_add(x, kernel, bias, *residual), grad


def passed_on(weights):
    """`weights` (a nest of tensors; None leaves kept) as the next layer sharing them
    reads them: the same values, through which the gradients of the layers after this
    one come back summed.

    TensorFlow sums the gradients of a tensor read by n ops in one AddN of all n, so a
    group's weights read by its 12 layers had 12 gradients alive at once (28 MB each for
    ALBERT-base, 0.8 GB for xxlarge: 9.6 GB in a training step, four times its
    activations at batch 1 and 512 tokens); read through a chain, each tensor has two
    readers and the sum grows as the backward pass goes, one gradient alive besides it
    (ALBERT-base, batch 1, 128 tokens: the step's peak from 373 to 141 MB, TensorFlow's
    allocator statistics). The chain's gradient is a Snapshot: Grappler merges a chain
    of AddN into one AddN of all its inputs, and stops at an op that is not an
    addition."""
    return tf.nest.map_structure(lambda t: None if t is None else _pass_on(t), weights)


@tf.custom_gradient
def _pass_on(tensor):
    return tf.identity(tensor), lambda grad: tf.raw_ops.Snapshot(input=grad)


def dense_output(dense: SharedDense, x, residual, dropout_layer, training):
    """dropout(dense(x)) (+ residual): the end of each half of a block. With no dropout
    to apply, the matmul, bias and residual add are one fused oneDNN call."""
    if dropout_layer is None or not training:
        return dense(x, residual=residual)
    output = dropout_layer(dense(x), training=training)
    return output if residual is None else output + residual


@serializable
class LayerNorm(keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis (the same `gamma` and `beta`),
    computed as one XLA kernel each way (`fused.layer_norm`)."""

    def call(self, x):
        return fused.layer_norm(x, self.gamma, self.beta, self.epsilon)


def layer_norm(name: str, dtype) -> LayerNorm:
    """LayerNorm over the last axis with the original's epsilon and `gamma`/`beta`.
    `gamma` and `beta` are float32 under any policy, as the computation is (under a
    "bfloat16" policy the layer computes as under "mixed_bfloat16")."""
    policy = keras.dtype_policies.get(dtype)
    if policy.variable_dtype != "float32":
        policy = keras.dtype_policies.get(f"mixed_{policy.compute_dtype}")
    return LayerNorm(axis=-1, epsilon=LAYER_NORM_EPSILON, name=name, dtype=policy)


class _Draws(threading.local):
    """The seed of the dropout masks being traced (`random_draws`), per thread."""

    def __init__(self):
        self.stack: list[list] = []


_DRAWS = _Draws()


@contextlib.contextmanager
def random_draws(seed):
    """Inside this block every dropout mask of a model is a pure function of `seed`
    ([2] integers, a tensor: the training loop folds in the run's seed, the step, the
    micro-batch and the replica), of the layer's own seed and of the order in which the
    masks are drawn in the forward pass (the same at every trace, so a shared layer's
    k-th call gets the k-th mask). No generator state is involved: a run resumed at
    step N draws the masks the uninterrupted run draws at step N, on any number of
    replicas. Outside such a block, dropout draws from the layer's Keras generator.

    Each block of the encoder (and each run of a layer group) draws its masks in a
    frame of its own, opened with a seed drawn here (`next_frame_seed`): what lets a
    recomputed block replay its masks (`modeling.recompute`)."""
    _DRAWS.stack.append([tf.cast(seed, tf.int64), 0])
    try:
        yield
    finally:
        _DRAWS.stack.pop()


def drawing() -> bool:
    """Whether a `random_draws` block is open."""
    return bool(_DRAWS.stack)


def next_frame_seed():
    """The seed of a nested `random_draws` frame, drawn in the current one as a mask
    would be; None outside `random_draws`."""
    return _next_draw_seed(None)


def _next_draw_seed(layer_seed: int | None):
    """The seed of the next mask inside `random_draws`, or None outside."""
    if not _DRAWS.stack:
        return None
    frame = _DRAWS.stack[-1]
    base, frame[1] = frame[0], frame[1] + 1
    fold_in = tf.random.experimental.stateless_fold_in
    return fold_in(fold_in(base, layer_seed or 0), frame[1])


@serializable
class Dropout(keras.layers.Dropout):
    """Keras' Dropout (its variables, config and scaling), whose masks inside
    `random_draws` come from the block's seed instead of the layer's generator."""

    def call(self, inputs, training=False):
        seed = _next_draw_seed(self.seed) if training and self.rate > 0 else None
        if seed is None:
            return super().call(inputs, training=training)
        return self.with_seed(inputs, seed)

    def with_seed(self, inputs, seed):
        """The mask of `seed` (a `draw_seed`) applied to `inputs`."""
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed)


def draw_seed(layer: Dropout | None, training):
    """The seed of `layer`'s next mask inside `random_draws`, drawn now as calling the
    layer would draw it, for `Dropout.with_seed`; None where no mask would be drawn
    from a seed (no dropout, not training, or outside `random_draws`)."""
    if layer is None or not training_now(training):
        return None
    return _next_draw_seed(layer.seed)


def dropout(rate: float, seeds: SeedStream, dtype, name: str = "dropout"):
    """A seeded dropout layer, or None when the rate is 0 (every v2 release)."""
    if not rate:
        return None
    return Dropout(rate, seed=seeds(), name=name, dtype=dtype)


def apply_dropout(layer, x, training):
    return x if layer is None else layer(x, training=training)
