"""Small pieces shared by the ALBERT layers: activations, initializers, seeds."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

# The original uses `tf.contrib.layers.layer_norm`, whose epsilon is 1e-12.
LAYER_NORM_EPSILON = 1e-12


def gelu(x):
    """GELU, tanh approximation: exactly the original `modeling.gelu`."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def get_activation(name: str):
    """Maps a config `hidden_act` to a function (None for linear), as the original."""
    act = name.lower()
    if act in ("", "linear"):
        return None
    if act == "gelu":
        return gelu
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

    def __init__(self, seed: int | None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        self.seed = seed
        self._count = 0

    def __call__(self) -> int | None:
        if self.seed is None:
            return None
        self._count += 1
        return (self.seed * 1_000_003 + self._count * 7919) % (2**31 - 1)


def truncated_normal(stddev: float, seeds: SeedStream):
    """The original's `create_initializer`: truncated normal at 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=stddev, seed=seeds())


def dense(units: int, *, name: str, stddev: float, seeds: SeedStream, dtype,
          activation=None) -> keras.layers.Dense:
    """A dense layer with the original's `kernel` [in, out] and zero `bias`."""
    return keras.layers.Dense(
        units, activation=activation, name=name, dtype=dtype,
        kernel_initializer=truncated_normal(stddev, seeds),
        bias_initializer="zeros")


def layer_norm(name: str, dtype) -> keras.layers.LayerNormalization:
    """LayerNorm over the last axis with the original's epsilon and `gamma`/`beta`."""
    return keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name=name, dtype=dtype)


def dropout(rate: float, seeds: SeedStream, dtype, name: str = "dropout"):
    """A seeded dropout layer, or None when the rate is 0 (every v2 release)."""
    if not rate:
        return None
    return keras.layers.Dropout(rate, seed=seeds(), name=name, dtype=dtype)


def apply_dropout(layer, x, training):
    return x if layer is None else layer(x, training=training)
