"""What every stage of dynamic masking shares: stateless seeds and uniform integers
(the stages' tf.data functions are `albert_tf.data.graph.graph_function`s)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def as_seed(seed) -> tf.Tensor:
    """A stateless-op seed ([2] int64) from a Python int or a [2] tensor."""
    if isinstance(seed, (int, np.integer)):
        return tf.constant([int(seed) % (1 << 63), 0], tf.int64)
    seed = tf.convert_to_tensor(seed)
    seed.shape.assert_is_compatible_with([2])
    return tf.cast(seed, tf.int64)


def split_seed(seed, count: int) -> list[tf.Tensor]:
    seeds = tf.random.experimental.stateless_split(seed, count)  # [count, 2]
    return [seeds[i] for i in range(count)]


def sub_seed(seed: int, purpose: int) -> int:
    """An independent tf.data op seed for each random stage of the pipeline."""
    return int(np.random.SeedSequence([seed % (1 << 63), purpose]).generate_state(1)[0])


def randint(u, low, high):
    """Uniform integer in [low, high] (inclusive, like `random.randint`) from a
    float64 uniform `u` in [0, 1)."""
    low, high = tf.cast(low, tf.int32), tf.cast(high, tf.int32)
    offset = tf.cast(tf.floor(u * tf.cast(high - low + 1, tf.float64)), tf.int32)
    return low + tf.minimum(offset, high - low)
