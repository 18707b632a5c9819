"""`bert/encoder`: the E -> H mapping and the shared transformer groups.

Scopes, as in the original `transformer_model`:
  encoder/embedding_hidden_mapping_in            (only when E != H)
  encoder/transformer/group_g/inner_group_i/     one `AlbertBlock`
      attention_1/self/{query,key,value}, attention_1/output/dense, LayerNorm,
      ffn_1/intermediate/dense, ffn_1/intermediate/output/dense, LayerNorm_1
Layer l runs group `config.group_index(l)`, whose inner groups run in turn.
"""

from __future__ import annotations

import keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling import common, real_tokens, recompute
from albert_tf.modeling.attention import AlbertAttention


class AlbertFeedForward(common.AlbertLayer):
    """`ffn_1/intermediate/dense` (H -> I, hidden_act) and `.../output/dense` (I -> H)."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "ffn_1")
        super().__init__(config, seeds, **kwargs)
        stddev = config.initializer_range
        self.intermediate = common.dense(
            config.intermediate_size, name="dense", stddev=stddev, seeds=seeds,
            dtype=self.dtype_policy, activation=common.get_activation(config.hidden_act))
        self.output_dense = common.dense(
            config.hidden_size, name="dense", stddev=stddev, seeds=seeds,
            dtype=self.dtype_policy)
        self.dropout = common.dropout(config.hidden_dropout_prob, seeds, self.dtype_policy)

    def build(self, input_shape=None):
        with keras.name_scope("intermediate"):
            self.intermediate.build((None, None, self.config.hidden_size))
            with keras.name_scope("output"):
                self.output_dense.build((None, None, self.config.intermediate_size))

    def shared_weights(self, training=False) -> dict[str, common.SharedDense]:
        """{"intermediate": ..., "output": ...}, read once per forward pass."""
        dtype = self.compute_dtype
        return {"intermediate": common.SharedDense.of([self.intermediate], dtype, training),
                "output": common.SharedDense.of([self.output_dense], dtype, training)}

    def call(self, x, training=None, weights=None, residual=None):
        # x: [B, S, H] -> [B, S, I] -> [B, S, H], plus `residual` if given (the block's,
        # before its LayerNorm). weights: `shared_weights()`, if made.
        weights = weights or self.shared_weights(training)
        # (Keras' Dense keeps a callable `activation`: `linear` when the config has none.)
        hidden = self.intermediate.activation(weights["intermediate"](x))
        return common.dense_output(weights["output"], hidden, residual, self.dropout,
                                   training)


class AlbertBlock(common.AlbertLayer):
    """One inner group: attention, residual + LayerNorm, FFN, residual + LayerNorm_1."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        super().__init__(config, seeds, **kwargs)
        self.attention = AlbertAttention(config, seeds, dtype=self.dtype_policy)
        self.attention_layer_norm = common.layer_norm("LayerNorm", self.dtype_policy)
        self.ffn = AlbertFeedForward(config, seeds, dtype=self.dtype_policy)
        self.ffn_layer_norm = common.layer_norm("LayerNorm_1", self.dtype_policy)

    def build(self, input_shape=None):
        shape = (None, None, self.config.hidden_size)
        for layer in (self.attention, self.attention_layer_norm, self.ffn,
                      self.ffn_layer_norm):
            layer.build(shape)

    def shared_weights(self, training=False) -> dict[str, dict[str, common.SharedDense]]:
        """The block's matmul weights, read once per forward pass for all the layers
        that run the block (`common.SharedDense`; transposed too when `training`)."""
        return {"attention": self.attention.shared_weights(training),
                "ffn": self.ffn.shared_weights(training)}

    def call(self, x, input_mask, training=None, first_token_only=False, weights=None,
             tokens=None, input_norm=None, defer_norm=False):
        # x: [B, S, H] (input_norm(x) if given: see `recompute.Deferred`); with
        # first_token_only the output is position 0's alone, [B, 1, H] (its attention
        # still reads every position). weights: `shared_weights()`. tokens: x is the
        # real tokens' [T, H] (`real_tokens.RealTokens`), and so is the output unless
        # first_token_only. defer_norm: the output is a `recompute.Deferred` (training).
        if input_norm is not None:
            x = input_norm(x)
        weights = weights or self.shared_weights(training)
        residual = real_tokens.first_positions(x, tokens) if first_token_only else x
        attention_output = self.attention_layer_norm(self.attention(
            x, input_mask, training=training, first_token_only=first_token_only,
            weights=weights["attention"], residual=residual, tokens=tokens))
        output = self.ffn(attention_output, training=training, weights=weights["ffn"],
                          residual=attention_output)
        if defer_norm:
            return recompute.Deferred(output, self.ffn_layer_norm)
        return self.ffn_layer_norm(output)


class AlbertLayerGroup(common.AlbertLayer):
    """`group_g`: `inner_group_num` blocks whose weights every layer of the group reuses."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        super().__init__(config, seeds, **kwargs)
        # Sub-layers are attributes, not a list: TensorFlow's object-based checkpoints
        # (tf.train.Checkpoint) do not follow Keras 3's tracked lists.
        for i in range(config.inner_group_num):
            setattr(self, f"inner_group_{i}", AlbertBlock(
                config, seeds, name=f"inner_group_{i}", dtype=self.dtype_policy))

    @property
    def blocks(self) -> list[AlbertBlock]:
        return [getattr(self, f"inner_group_{i}") for i in range(self.config.inner_group_num)]

    def build(self, input_shape=None):
        for block in self.blocks:
            block.build((None, None, self.config.hidden_size))

    def shared_weights(self, training=False) -> list:
        """Each block's `shared_weights()`, in order."""
        return [block.shared_weights(training) for block in self.blocks]

    def call(self, x, input_mask, training=None, first_token_only=False, weights=None,
             tokens=None, last_layer=False, input_norm=None, defer_norm=False):
        """Returns the output of each inner block, in order; with `first_token_only`
        the last block computes position 0 alone. weights: `shared_weights()`.
        tokens: `real_tokens.RealTokens`, x being the real tokens' [T, H]. In training
        (see `recompute.Deferred`): the input is input_norm(x) if given, and outputs
        may be `Deferred` (a recomputed block's; with `defer_norm`, the last one)."""
        outputs = []
        blocks = self.blocks
        weights = weights or self.shared_weights(training)
        recomputed = recompute.unit_now() == "layer"
        if input_norm is not None:
            x = recompute.Deferred(x, input_norm)
        for index, (block, block_weights) in enumerate(zip(blocks, weights)):
            # (the encoder's last block is not recomputed: see AlbertTransformer)
            last_block = last_layer and index == len(blocks) - 1
            last = first_token_only and index == len(blocks) - 1
            if common.training_now(training):  # a unit of its own (dropout, recompute)
                recomputed_block = recomputed and not last_block
                defer = recompute.deferring(recomputed_block) or (
                    defer_norm and index == len(blocks) - 1)
                x = recompute.run_unit(
                    lambda x, w, norm, block=block, last=last, defer=defer: block(
                        x, input_mask, training=True, first_token_only=last, weights=w,
                        input_norm=norm, defer_norm=defer),
                    x, block_weights, recompute=recomputed_block)
            else:
                x = block(x, input_mask, training=training, first_token_only=last,
                          weights=block_weights, tokens=tokens)
            outputs.append(x)
        return outputs


class AlbertTransformer(common.AlbertLayer):
    """`bert/encoder`: maps [B, S, E] embeddings to the L x inner_group_num block outputs."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "encoder")
        super().__init__(config, seeds, **kwargs)
        self.embedding_hidden_mapping_in = None
        if config.embedding_size != config.hidden_size:
            self.embedding_hidden_mapping_in = common.dense(
                config.hidden_size, name="embedding_hidden_mapping_in",
                stddev=config.initializer_range, seeds=seeds, dtype=self.dtype_policy)
        # Only the groups that some layer uses exist, as in the original (attributes,
        # not a list, for tf.train.Checkpoint as above).
        for g in config.used_groups():
            setattr(self, f"group_{g}", AlbertLayerGroup(
                config, seeds, name=f"group_{g}", dtype=self.dtype_policy))

    @property
    def groups(self) -> list[AlbertLayerGroup]:
        """The groups that exist, in order."""
        return [getattr(self, f"group_{g}") for g in self.config.used_groups()]

    def build(self, input_shape=None):
        if self.embedding_hidden_mapping_in is not None:
            self.embedding_hidden_mapping_in.build((None, None, self.config.embedding_size))
        with keras.name_scope("transformer"):
            for group in self.groups:
                group.build((None, None, self.config.hidden_size))

    def call(self, embedding_output, input_mask, training=None, first_token_only=False,
             tokens=None):
        # embedding_output: [B, S, E]; returns a list of L * inner_group_num [B, S, H]
        # (the last one [B, 1, H] with first_token_only: only position 0 is computed in
        # the last block, all the pooled output needs). With `tokens`
        # (`real_tokens.RealTokens`) the embeddings and outputs are the real tokens'
        # [T, ·] (the last [B, 1, H] with first_token_only).
        x = embedding_output
        if self.embedding_hidden_mapping_in is not None:
            x = self.embedding_hidden_mapping_in(x)
        all_outputs = []
        num_layers = self.config.num_hidden_layers
        # Each group's weights are read (and transposed) once, for all its layers; in
        # training each layer passes them on to the next one of its group
        # (`common.passed_on`: their gradients add up layer by layer).
        weights = {g: getattr(self, f"group_{g}").shared_weights(training)
                   for g in self.config.used_groups()}
        recomputed = recompute.unit_now() == "group"
        used = set()  # the groups whose weights a layer has read
        with recompute.encoder_draws(self.has_dropout, training):
            for layer_index in range(num_layers):
                g = self.config.group_index(layer_index)
                group = getattr(self, f"group_{g}")
                if common.training_now(training) and g in used:
                    weights[g] = common.passed_on(weights[g])
                used.add(g)
                final = layer_index == num_layers - 1
                last = first_token_only and final
                if common.training_now(training):  # a unit (dropout, recompute)
                    # (the last layer is not: its backward pass comes first and would
                    # recompute at once what it has)
                    recomputed_layer = recomputed and not final
                    defer = recompute.deferring(recomputed_layer)
                    outputs = recompute.run_unit(
                        lambda x, w, norm, group=group, last=last, final=final,
                        defer=defer: group(
                            x, input_mask, training=True, first_token_only=last, weights=w,
                            last_layer=final, input_norm=norm, defer_norm=defer),
                        x, weights[g], recompute=recomputed_layer)
                else:
                    outputs = group(x, input_mask, training=training, weights=weights[g],
                                    tokens=tokens, first_token_only=last)
                # (a deferred LayerNorm whose output nothing reads is pruned)
                all_outputs.extend(recompute.resolved(o) for o in outputs)
                x = outputs[-1]
        return all_outputs

    @property
    def has_dropout(self) -> bool:
        return bool(self.config.hidden_dropout_prob or
                    self.config.attention_probs_dropout_prob)
