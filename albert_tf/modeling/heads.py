"""Pretraining heads: `cls/predictions` (masked LM) and `cls/seq_relationship` (SOP)."""

from __future__ import annotations

import tensorflow as tf

from albert_tf import task_heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common
from albert_tf.modeling.head_layers import HeadLayers


class MaskedLMHead(common.AlbertLayer):
    """`cls/predictions`: transform (dense H -> E with hidden_act, LayerNorm), then
    logits against the word embedding table (tied) plus `output_bias` [vocab_size]; its
    parts are `task_heads.MASKED_LM`'s."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "predictions")
        super().__init__(config, seeds, **kwargs)
        self._head_layers = HeadLayers(task_heads.MASKED_LM, config, 0, seeds, self.dtype_policy,
                                  within="cls/predictions")
        self.transform_dense = self._head_layers["cls/predictions/transform/dense"]
        self.transform_layer_norm = self._head_layers["cls/predictions/transform/LayerNorm"]

    def build(self, input_shape=None):
        # (under `cls`, as the pretrainer builds its heads: this layer adds `predictions`)
        created = self._head_layers.build(self._add_weight)
        self.output_bias = created["cls/predictions/output_bias"]

    def _add_weight(self, name, shape, initializer):
        return self.add_weight(name=name, shape=shape, initializer=initializer)

    def call(self, sequence_output, masked_lm_positions, word_embeddings):
        # sequence_output: [B, S, H]; masked_lm_positions: [B, P]; word_embeddings: [V, E]
        positions = tf.cast(masked_lm_positions, tf.int32)
        x = tf.gather(sequence_output, positions, batch_dims=1)  # [B, P, H]
        x = self.transform_layer_norm(self.transform_dense(x))  # [B, P, E]
        table = tf.cast(word_embeddings, x.dtype)
        logits = tf.einsum("BPE,VE->BPV", x, table)
        return logits + tf.cast(self.output_bias, x.dtype)  # [B, P, V]


class SentenceOrderHead(common.AlbertLayer):
    """`cls/seq_relationship`: `output_weights` [2, H] and `output_bias` [2] on the
    pooled output (sentence-order prediction; NSP with the same variables); its parts
    are `task_heads.SENTENCE_ORDER`'s."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "seq_relationship")
        super().__init__(config, seeds, **kwargs)
        self._head_layers = HeadLayers(task_heads.SENTENCE_ORDER, config, 2, seeds,
                                  self.dtype_policy, within="cls/seq_relationship")

    def build(self, input_shape=None):
        created = self._head_layers.build(self._add_weight)
        self.output_weights = created["cls/seq_relationship/output_weights"]
        self.output_bias = created["cls/seq_relationship/output_bias"]

    def _add_weight(self, name, shape, initializer):
        return self.add_weight(name=name, shape=shape, initializer=initializer)

    def call(self, pooled_output):
        # pooled_output: [B, H] -> [B, 2]
        return tf.matmul(pooled_output, self.output_weights, transpose_b=True) + self.output_bias
