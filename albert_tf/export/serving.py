"""The SavedModel's serving module: one `tf.Module` for every kind, reading the kind's
entry in `albert_tf.export.kinds` (inputs, outputs, text packing).

Signatures (traced by `albert_tf.export.savedmodel`):

- `serving_default`: int32 `input_word_ids`, `input_mask`, `input_type_ids` [B, S]
  ([B, num_choices, S] for a per-choice kind), then the kind's extra inputs [B, *]
  (`p_mask` float32 for squad_v2, `masked_lm_positions` int32 for mlm).
- `serve_examples`: `examples`, serialized `tf.Example`s with the original TFRecord
  feature names (`input_ids`, `input_mask`, `segment_ids` and the extra inputs' own
  names), variable-length int64 lists padded in the graph, each extra input with its
  own padding value (RACE records hold num_choices * S values per feature; S may differ
  between the examples of a request).
- `serve_text`: the kind's string inputs, tokenized and packed in the graph
  (`albert_tf.export.serving_text`); with `long_text="windows"` (the sentence kinds)
  the model runs on every window of the request's texts as one batch, and each
  text's answer is its windows' pooled (`sentence_records.pool_windows_tf`, by the
  kind's `window_pooling`: the run's own pooling).
"""

from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.data.sentence_records import pool_windows_tf
from albert_tf.export.kinds import ServingKind
from albert_tf.export.serving_text import TextSettings


def as_float32(value):
    """A bfloat16 output as float32 (a bfloat16 export answers as a float32 one); any
    other as it is."""
    return tf.cast(value, tf.float32) if value.dtype == tf.bfloat16 else value


def _pad_rows(sparse, default_value, dtype=tf.int32):
    """Variable-length rows [B, (L)] -> dense [B, max L]."""
    return tf.cast(tf.sparse.to_dense(sparse, default_value=default_value), dtype)


class ServingModule(tf.__internal__.tracking.AutoTrackable):
    """The model, its tokenizer (None: no `serve_text`) and the signature functions.
    The root of the SavedModel: a plain trackable object rather than a `tf.Module`, whose
    read-only `variables` would keep a reusable kind from having TF Hub's attributes
    (`albert_tf.export.reusable.add_reusable_api`)."""

    def __init__(self, model, kind: ServingKind, tokenizer, settings: TextSettings,
                 labels=None):
        super().__init__()
        self.labels = None if labels is None else list(labels)
        self.model = model
        self.tokenizer = tokenizer
        self.serving_kind = kind
        self.kind = kind.name
        self.settings = settings
        self.num_choices = getattr(model, "num_choices", None)
        self.min_length = kind.min_length(model)

    # -- the model on int inputs
    _traced_model = None  # within `one_model_trace`: the model as one traced function

    def run(self, inputs: dict) -> dict:
        """The kind's outputs of the model on `inputs` (those the model takes)."""
        inputs = {name: inputs[name] for name in self.serving_kind.input_names}
        rows = tf.shape(inputs[names.INPUT_WORD_IDS])[0]
        # A request of no rows is computed on one row of padding, dropped again (LiteRT's
        # Unpack and TopK refuse empty tensors); a request whose packing is 0 wide gets
        # its one position.
        inputs = self._pad_to_minimum(inputs)
        if self._traced_model is not None:
            outputs = self._traced_model(inputs)
        else:
            outputs = self.model(inputs, training=False)
        return {name: as_float32(outputs[name])[:rows]
                for name in self.serving_kind.outputs if name in outputs}

    @contextlib.contextmanager
    def one_model_trace(self):
        """Within this block the signatures traced call one trace of the model (on
        `serving_default`'s inputs) instead of tracing it each: the SavedModel holds the
        model's graph once, not once per signature (measured on the tiny classifier of
        tests/, one run: exported in 1.31 s instead of 1.52, 3.7 MB instead of 4.0,
        loaded in a new process in 0.68 s instead of 0.92). The trace belongs to the
        block, whose caller sets how the model is traced (`real_tokens.inference_graph`)."""
        specs = {spec.name: spec for spec in self.input_specs()}
        function = tf.function(lambda inputs: self.model(inputs, training=False),
                               input_signature=[specs], autograph=False)
        # Set past the attribute tracking: a function attribute would be saved as one.
        object.__setattr__(self, "_traced_model", function)
        try:
            yield
        finally:
            object.__delattr__(self, "_traced_model")

    def _pad_to_minimum(self, inputs: dict) -> dict:
        """At least one row, and sequences at least the model's minimum length: padded
        at their end, each input with its own padding value."""
        shape = tf.shape(inputs[names.INPUT_WORD_IDS])
        extra_rows = tf.maximum(1 - shape[0], 0)
        extra = tf.maximum(self.min_length - shape[-1], 0)
        pad_values = {x.name: x.pad_value for x in self.serving_kind.extra_inputs}
        per_position = set(names.MODEL_INPUTS) | {
            x.name for x in self.serving_kind.extra_inputs if x.per_position}
        padded = {}
        for name, value in inputs.items():
            paddings = [[0, extra_rows]] + [[0, 0]] * (value.shape.rank - 1)
            if name in per_position:
                paddings[-1] = [0, extra]
            padded[name] = tf.pad(value, paddings, constant_values=tf.cast(
                pad_values.get(name, 0), value.dtype))
        return padded

    # -- serving_default
    def input_specs(self) -> list[tf.TensorSpec]:
        return list(self.model.input_signature().values())

    def serving_default(self, *args):
        return self.run(dict(zip(self.serving_kind.input_names, args)))

    # -- serve_examples
    def serve_examples(self, examples):
        extras = self.serving_kind.extra_inputs
        features = names.RECORD_SEQUENCES + tuple(x.name for x in extras)
        parsed = tf.io.parse_example(
            examples, {name: tf.io.VarLenFeature(tf.int64) for name in features})
        rows = self._choices if self.serving_kind.per_choice else \
            lambda sparse: _pad_rows(sparse, 0)
        inputs = {names.RECORD_TO_MODEL[name]: rows(parsed[name])
                  for name in names.RECORD_SEQUENCES}
        for x in extras:  # positions past an example's end hold the input's padding
            inputs[x.name] = _pad_rows(parsed[x.name], x.pad_value, x.dtype)
        return self.run(inputs)

    def _choices(self, sparse):
        """[B, num_choices * L_b] values (L_b: example b's own length) -> int32
        [B, num_choices, max L_b], each choice padded on its own."""
        ragged = tf.RaggedTensor.from_sparse(sparse)
        tf.debugging.assert_equal(
            ragged.row_lengths() % self.num_choices, tf.constant(0, tf.int64),
            message=f"a multiple-choice tf.Example holds num_choices ({self.num_choices}) "
                    "* seq_length values in each feature")
        lengths = tf.repeat(ragged.row_lengths() // self.num_choices, self.num_choices)
        choices = tf.RaggedTensor.from_row_lengths(ragged.flat_values, lengths)
        dense = tf.cast(choices.to_tensor(default_value=0), tf.int32)  # [B * C, L]
        return tf.reshape(dense, [-1, self.num_choices, tf.shape(dense)[1]])

    # -- serve_text
    def text_specs(self) -> list[tf.TensorSpec]:
        return self.serving_kind.text_specs(self.settings)

    def serve_text(self, *texts):
        named = dict(zip([spec.name for spec in self.text_specs()], texts))
        packed = self.serving_kind.pack_text(self.tokenizer, self.settings, named)
        outputs = self.run(packed.inputs)
        if packed.window_splits is not None:  # a row per window: a row per text
            outputs = pool_windows_tf(outputs, packed.window_splits,
                                      self.serving_kind.window_pooling(self.model))
        outputs.update(packed.returned)
        if self.serving_kind.label_output and self.labels is not None:
            outputs[self.serving_kind.label_output] = tf.gather(
                tf.constant(self.labels), outputs[names.PREDICTIONS])
        return outputs


def warmup_inputs(module: ServingModule) -> dict:
    """A one-example `serving_default` request: [CLS] [SEP] padded to the model's
    minimum length."""
    kind = module.serving_kind
    length = max(module.min_length, 2)
    ids = np.zeros([1, length], np.int32)
    mask = np.zeros([1, length], np.int32)
    ids[0, :2] = [module.tokenizer.cls_id, module.tokenizer.sep_id] \
        if module.tokenizer is not None else [2, 3]
    mask[0, :2] = 1
    inputs = {names.INPUT_WORD_IDS: ids, names.INPUT_MASK: mask,
              names.INPUT_TYPE_IDS: np.zeros_like(ids)}
    if kind.per_choice:  # [1, L] -> [1, C, L]
        inputs = {k: np.repeat(v[:, None], module.num_choices, axis=1)
                  for k, v in inputs.items()}
    for x in kind.extra_inputs:
        inputs[x.name] = x.warmup(mask)
    return inputs
