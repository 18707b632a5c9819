"""A head's Keras layers and variables, built from its parts (`albert_tf.task_heads.Head`):
the one definition of the head's TF1 names, shapes and initializers, which the
checkpoint readers, the Hugging Face keys and `albert_tf.convert` read too.

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

from albert_tf import task_heads
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
