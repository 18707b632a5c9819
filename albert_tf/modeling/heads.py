"""Pretraining heads: `cls/predictions` (masked LM) and `cls/seq_relationship` (SOP)."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import common


class MaskedLMHead(keras.layers.Layer):
    """`cls/predictions`: transform (dense H -> E with hidden_act, LayerNorm), then
    logits against the word embedding table (tied) plus `output_bias` [vocab_size]."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "predictions")
        super().__init__(**kwargs)
        self.config = config
        self.transform_dense = common.dense(
            config.embedding_size, name="dense", stddev=config.initializer_range,
            seeds=seeds, dtype=self.dtype_policy,
            activation=common.get_activation(config.hidden_act))
        self.transform_layer_norm = common.layer_norm("LayerNorm", self.dtype_policy)

    def build(self, input_shape=None):
        with keras.name_scope("transform"):
            self.transform_dense.build((None, None, self.config.hidden_size))
            self.transform_layer_norm.build((None, None, self.config.embedding_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.config.vocab_size,), initializer="zeros")

    def call(self, sequence_output, masked_lm_positions, word_embeddings):
        # sequence_output: [B, S, H]; masked_lm_positions: [B, P]; word_embeddings: [V, E]
        positions = tf.cast(masked_lm_positions, tf.int32)
        x = tf.gather(sequence_output, positions, batch_dims=1)  # [B, P, H]
        x = self.transform_layer_norm(self.transform_dense(x))  # [B, P, E]
        table = tf.cast(word_embeddings, x.dtype)
        logits = tf.einsum("BPE,VE->BPV", x, table)
        return logits + tf.cast(self.output_bias, x.dtype)  # [B, P, V]


class SentenceOrderHead(keras.layers.Layer):
    """`cls/seq_relationship`: `output_weights` [2, H] and `output_bias` [2] on the
    pooled output (sentence-order prediction; NSP with the same variables)."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "seq_relationship")
        super().__init__(**kwargs)
        self.config = config
        self._initializer = common.truncated_normal(config.initializer_range, seeds)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.config.hidden_size),
            initializer=self._initializer)
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")

    def call(self, pooled_output):
        # pooled_output: [B, H] -> [B, 2]
        return tf.matmul(pooled_output, self.output_weights, transpose_b=True) + self.output_bias
