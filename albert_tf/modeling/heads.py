"""Every head's Keras layers, built from its parts (`albert_tf.task_heads.Head`, the
tables of the heads' TF1 names, shapes, initializers and Hugging Face keys, which sit
below the models because the checkpoint readers, `albert_tf.convert` and
`albert_tf.modeling.tf1_variables` read them too):

- `HeadLayers`: any head's layers and variables, under its TF1 names (what a task model
  builds its head with: `AlbertTaskModel.head_layers`);
- `MaskedLMHead` (`cls/predictions`) and `SentenceOrderHead` (`cls/seq_relationship`):
  the pretraining heads as Keras layers of `AlbertPretrainer`, made of their
  `HeadLayers`.

    layers = HeadLayers(task_heads.SQUAD_V2, config, 1, seeds, dtype, dropout_rate=0.1)
    start_dense = layers["start_logits/dense"]        # created, its seed drawn
    variables = layers.build()                        # built under the TF1 names

A part's layer is created when `HeadLayers` is (so each initializer draws its seed in
the parts' order, the order the original's graph draws them in) and built by `build`,
under its TF1 scope: absolute at a model (`tf1_scope` of its first name), or relative to
`within`, the scope a layer holding the head builds in (the masked LM's
`cls/predictions`).
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from albert_tf import task_heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common
from albert_tf.modeling.base import tf1_scope

# The original's classifier, RACE and SQuAD v1 heads initialize their `output_weights`
# with a fixed `truncated_normal_initializer(stddev=0.02)` (`initial="weights"`), not
# the config's initializer_range (`initial="range"`, which SQuAD v2 and SOP use).
HEAD_INITIALIZER_STDDEV = 0.02


def root_scope():
    """The TF1 root variable scope: a variable created in it is named by its bare name
    (`output_weights`) whatever scopes enclose the model."""
    return keras.name_scope("", override_parent="")


def _name(part) -> str:
    return part.name if isinstance(part, task_heads.Variable) else part.scope


class HeadLayers:
    """The layers of `head`'s parts for `config` and `num_outputs`, created in order:
    a `Dense`'s `keras.layers.Dense`, a `LayerNorm`'s LayerNorm, a `Dropout`'s dropout
    layer (None at rate 0) and a `Variable`'s initializer, by the part's TF1 name."""

    def __init__(self, head: task_heads.Head, config, num_outputs: int,
                 seeds: common.SeedStream, dtype, *, dropout_rate: float = 0.0,
                 within: str = ""):
        self.head, self.config, self.num_outputs = head, config, num_outputs
        self.dtype, self.within = dtype, within
        self.layers = {}
        for part in head.parts:
            leaf = _name(part).rsplit("/", 1)[-1]
            if isinstance(part, task_heads.Variable):
                layer = "zeros" if part.initial == "zeros" else common.truncated_normal(
                    config.initializer_range if part.initial == "range"
                    else HEAD_INITIALIZER_STDDEV, seeds)
            elif isinstance(part, task_heads.Dense):
                activation = part.activation(config) if part.activation else None
                layer = common.dense(
                    part.fan_out(config, num_outputs), name=leaf,
                    stddev=config.initializer_range, seeds=seeds, dtype=dtype,
                    activation=common.get_activation(activation) if activation else None,
                    use_bias=part.bias)
            elif isinstance(part, task_heads.LayerNorm):
                layer = common.layer_norm(leaf, dtype)
            else:
                layer = common.dropout(dropout_rate, seeds, dtype, name=leaf)
            self.layers[_name(part)] = layer

    def __getitem__(self, name: str):
        return self.layers[name]

    @contextlib.contextmanager
    def _scope(self, name: str):
        """The scope a part named `name` is created in (its name less the leaf)."""
        if self.within:
            if not name.startswith(self.within + "/"):
                raise ValueError(f"{name} is not inside {self.within}")
            name = name[len(self.within) + 1:]
        *scopes, _ = name.split("/")
        with contextlib.ExitStack() as stack:
            if not self.within:
                stack.enter_context(tf1_scope(scopes.pop(0)) if scopes else root_scope())
            for scope in scopes:
                stack.enter_context(keras.name_scope(scope))
            yield

    def build(self, create_variable=None) -> dict[str, keras.Variable]:
        """Builds the layers and creates the variables under their TF1 names, in the
        parts' order; returns the variables of the `Variable` parts by TF1 name.
        `create_variable(name, shape, initializer)` makes one (default: a
        `keras.Variable` of the dtype's variable dtype; a layer passes its `add_weight`)."""
        create_variable = create_variable or self._variable
        created = {}
        for part in self.head.parts:
            name = _name(part)
            with self._scope(name):
                if isinstance(part, task_heads.Variable):
                    created[name] = create_variable(
                        name.rsplit("/", 1)[-1], part.shape(self.config, self.num_outputs),
                        self.layers[name])
                elif isinstance(part, task_heads.Dense):
                    self.layers[name].build((None, part.fan_in(self.config,
                                                               self.num_outputs)))
                elif isinstance(part, task_heads.LayerNorm):
                    self.layers[name].build((None, part.width(self.config,
                                                              self.num_outputs)))
        return created

    def _variable(self, name: str, shape, initializer) -> keras.Variable:
        policy = keras.dtype_policies.get(self.dtype)
        return keras.Variable(initializer, shape=shape, dtype=policy.variable_dtype,
                              name=name)


# ---------------------------------------------------------------- the pretraining heads
class MaskedLMHead(common.AlbertLayer):
    """`cls/predictions`: transform (dense H -> E with hidden_act, LayerNorm), then
    logits against the word embedding table (tied) plus `output_bias` [vocab_size]; its
    parts are `task_heads.MASKED_LM`'s."""

    def __init__(self, config: AlbertConfig, seeds: common.SeedStream, **kwargs):
        kwargs.setdefault("name", "predictions")
        super().__init__(config, seeds, **kwargs)
        self._head_layers = HeadLayers(task_heads.MASKED_LM, config, 0, seeds,
                                       self.dtype_policy, within="cls/predictions")
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
