"""`AlbertEncoder`: the ALBERT network (`bert/...`) as a Keras model."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf import names
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common, real_tokens
from albert_tf.modeling.base import AlbertModel, tf1_scope
from albert_tf.modeling.embeddings import AlbertEmbeddings
from albert_tf.modeling.tf1_variables import block_scope
from albert_tf.modeling.transformer import AlbertTransformer

INPUT_NAMES = names.MODEL_INPUTS


def read_inputs(inputs) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(input_word_ids, input_mask, input_type_ids) as int32 [B, S] from an input dict.

    `input_mask` defaults to all ones and `input_type_ids` to zeros, as in the original.
    """
    if not isinstance(inputs, dict):
        raise TypeError(
            "ALBERT models take a dict of int32 tensors with keys "
            f"{', '.join(INPUT_NAMES)}; got {type(inputs).__name__}")
    if names.INPUT_WORD_IDS not in inputs:
        hint = ""
        if names.INPUT_IDS in inputs:
            hint = (f" (the TFRecord feature '{names.INPUT_IDS}' is called "
                    f"'{names.INPUT_WORD_IDS}' here, '{names.SEGMENT_IDS}' is "
                    f"'{names.INPUT_TYPE_IDS}')")
        raise KeyError(
            f"missing input '{names.INPUT_WORD_IDS}'{hint}; got keys {sorted(inputs)}")
    word_ids = tf.cast(inputs[names.INPUT_WORD_IDS], tf.int32)
    mask = inputs.get(names.INPUT_MASK)
    mask = tf.ones_like(word_ids) if mask is None else tf.cast(mask, tf.int32)
    type_ids = inputs.get(names.INPUT_TYPE_IDS)
    type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.cast(type_ids, tf.int32)
    return word_ids, mask, type_ids


class AlbertEncoder(AlbertModel):
    """ALBERT: factorized embeddings, a shared-weight transformer and the pooler.

    Called with a dict of int32 `input_word_ids`, `input_mask`, `input_type_ids`
    ([B, S]); returns a dict with
      `sequence_output` [B, S, H], `pooled_output` [B, H],
      `encoder_outputs` (list of L * inner_group_num [B, S, H], the original's
      `all_encoder_layers`) and `embedding_output` [B, S, E].

    All weights are created by the constructor, under variable paths that are the
    original TF1 names (`bert/embeddings/word_embeddings`, ...), so a TF1 checkpoint
    can be loaded right away with `albert_tf.load_tf1_checkpoint`.
    """

    hf_architecture = names.HF_BASE

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        kwargs.setdefault("name", "albert_encoder")
        super().__init__(config, seed, **kwargs)
        seeds = common.SeedStream(seed)
        self.embeddings = AlbertEmbeddings(config, seeds, dtype=self.dtype_policy)
        self.encoder = AlbertTransformer(config, seeds, dtype=self.dtype_policy)
        self.pooler = common.dense(
            config.hidden_size, name="dense", stddev=config.initializer_range,
            seeds=seeds, dtype=self.dtype_policy, activation="tanh")
        with tf1_scope("bert"):
            self.embeddings.build()
            self.encoder.build()
            with keras.name_scope("pooler"):
                self.pooler.build((None, config.hidden_size))
        self.built = True

    def call(self, inputs, training=None, first_token_only=False):
        """`first_token_only=True` computes the last block for position 0 alone: the
        same `pooled_output` with less work (for ALBERT-base at 128 tokens, 7% fewer
        FLOPs), for models that only read the pooled output; `sequence_output` and the
        last of `encoder_outputs` are then [B, 1, H]."""
        word_ids, mask, type_ids = read_inputs(inputs)
        # Inference within `real_tokens_only()`: the real tokens alone, [T, ·].
        tokens = real_tokens.RealTokens(mask) \
            if real_tokens.enabled_now() and not training else None
        embedding_output = self.embeddings(word_ids, type_ids, training=training,
                                           tokens=tokens)
        encoder_outputs = self.encoder(embedding_output, mask, training=training,
                                       first_token_only=first_token_only, tokens=tokens)
        if tokens is not None:  # back to [B, S, ·] (what is not read is pruned)
            embedding_output = tokens.scatter(embedding_output)
            encoder_outputs = [tokens.scatter(x) for x in encoder_outputs[:-1]] + [
                encoder_outputs[-1] if first_token_only
                else tokens.scatter(encoder_outputs[-1])]
        sequence_output = encoder_outputs[-1]  # [B, S, H]
        pooled_output = self.pooler(sequence_output[:, 0, :])  # [B, H]
        return {
            names.SEQUENCE_OUTPUT: sequence_output,
            names.POOLED_OUTPUT: pooled_output,
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }

    def attention_scores(self, encoded, layers) -> list[tf.Tensor]:
        """The attention scores of the last block of each layer pass in `layers`
        (0-based), as float32 [B, N, S, S]: each head's q . k / sqrt(D), before the
        padding's bias and the softmax (what TinyBERT's attention loss compares;
        `AlbertAttention.scores`). `encoded`: this encoder's outputs, every position
        computed (not `first_token_only`). They are computed again from each block's
        input (one query-key matmul per layer) with the weights the block ran with, so
        the gradient reaches them through the same variables."""
        inner = self.config.inner_group_num
        scores = []
        for layer in layers:
            position = (layer + 1) * inner - 1  # the layer's last block, among all run
            block = self._block_run(position)
            scores.append(block.attention.scores(self._block_input(encoded, position)))
        return scores

    def ffn_activations(self, encoded, input_mask) -> list[tuple[str, tf.Tensor]]:
        """Each block run's FFN units after `hidden_act` ([B, S, I], in the order the
        blocks ran), with the block's TF1 scope (`tf1_variables.block_scope`, the same
        for each pass of a shared block): computed again, as `attention_scores`, from
        each block's input in `encoded` (this encoder's outputs on inputs of
        `input_mask` [B, S], every position computed)."""
        found = []
        for position in range(len(encoded["encoder_outputs"])):
            block = self._block_run(position)
            x = self._block_input(encoded, position)
            attended = block.attention_layer_norm(block.attention(
                x, tf.cast(input_mask, tf.int32), residual=x))
            found.append((self._block_scope(position), block.ffn.intermediate(attended)))
        return found

    def _block_place(self, position: int) -> tuple[int, int]:
        """(group, inner block) of the `position`-th block run (0-based, over the layer
        passes' inner blocks in turn)."""
        c = self.config
        return c.group_index(position // c.inner_group_num), position % c.inner_group_num

    def _block_run(self, position: int):
        """The `AlbertBlock` of the `position`-th block run."""
        group, inner = self._block_place(position)
        return getattr(self.encoder, f"group_{group}").blocks[inner]

    def _block_scope(self, position: int) -> str:
        return block_scope(*self._block_place(position))

    def _block_input(self, encoded, position: int) -> tf.Tensor:
        """What the `position`-th block run read: the block before's output, or for the
        first the embeddings mapped to H."""
        if position:
            return encoded["encoder_outputs"][position - 1]
        mapping = self.encoder.embedding_hidden_mapping_in
        x = encoded["embedding_output"]
        return x if mapping is None else mapping(x)

    def lora_encoder(self):
        return self

    @property
    def word_embeddings(self):
        """The [vocab_size, E] table that the MLM head ties its output to."""
        return self.embeddings.word_embeddings
