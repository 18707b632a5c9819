"""The TF Hub way: exports a user builds into their own Keras model.

Two SavedModels follow TF Hub's "Common SavedModel APIs for Text Tasks" (text
embeddings with Transformer encoders), as Google's published ALBERT encoders and their
`albert_en_preprocess` companions do:

- **The encoder** (`--kind=encoder`, and `--kind=mlm`) is also a Reusable SavedModel
  (`add_reusable_api`): besides its serving signatures its root object has
    `__call__(inputs, training=None)`: `inputs` the dict of int32 `input_word_ids`,
      `input_mask`, `input_type_ids` [B, S]; returns `pooled_output` [B, H] (also as
      `default`), `sequence_output` [B, S, H] and `encoder_outputs` (one [B, S, H] per
      layer, the last being `sequence_output`), float32; dropout is on with
      `training=True` (the config's rates: 0 in every v2 release);
    `variables`, `trainable_variables` (the encoder's weights) and
      `regularization_losses` (none: ALBERT's weight decay is the optimizer's).
  `hub.KerasLayer(path, trainable=True)` fine-tunes it inside a Keras model. An `mlm`
  export also has `mlm`, a callable of the same kind over the whole pretraining model:
  its inputs add `masked_lm_positions` [B, P], its outputs `mlm_logits` [B, P, V] and
  `sop_logits` [B, 2]. Unlike the serving signatures, these run the padded computation
  (as training does: `sequence_output` at padded positions is what the model computes
  there), with no XLA kernels.
- **The preprocessor** (`--kind=preprocessor`, `export_preprocessor`): raw text to those
  inputs, with the model's SentencePiece model or WordPiece vocabulary (the ids of
  `albert_tf.tokenization.FullTokenizer` and of the records):
    `tokenize(strings)` [B] -> int32 ragged ids [B, (T)];
      `tokenize.get_special_tokens_dict()` the ids `bert_pack_inputs` uses;
    `bert_pack_inputs(segments, seq_length=<default>)`: one or two tokenized segments
      -> `input_word_ids`, `input_mask`, `input_type_ids` [B, seq_length], packed as
      `albert_tf.packing` packs (`[CLS] A [SEP] (B [SEP])`, a pair cut longest-first);
    `__call__(strings)` (and the `serving_default` signature, `text_a`): one segment at
      the default `seq_length`.
  No variables: it runs in a `tf.data` pipeline as well as inside a model.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf
from tensorflow.python.saved_model import save_context

from albert_tf import fileio, names, packing
from albert_tf.export.base import (
    ExportError,
    check_export_dir,
    is_int_at_least,
    signature_info,
    write_export_info,
)
from albert_tf.export.serving import as_float32
from albert_tf.modeling import AlbertEncoder, fused, real_tokens

ENCODER_OUTPUTS = "encoder_outputs"
DEFAULT = "default"  # TF Hub's name for the pooled output
MLM_OUTPUTS = (names.MLM_LOGITS, names.SOP_LOGITS)
# ALBERT has two token types: `[CLS] A [SEP] B [SEP]` is the most a sequence packs.
MAX_SEGMENTS = 2
# bert_pack_inputs is also traced for these counts, to answer them with a named error.
_REFUSED_SEGMENTS = (3,)


@contextlib.contextmanager
def traced_as_saved():
    """Traces tf.functions as `tf.saved_model.save` looks them up. The saver asks each
    tf.function attribute again for every input signature it was traced with, inside its
    save context, and tf.function keys its traces by that context too (the save
    options' variable policy): traced outside it, each was traced a second time while
    saving (0.3 s a trace of the tiny test encoder, 6 per mlm export)."""
    if save_context.in_save_context():
        yield
        return
    with save_context.save_context(tf.saved_model.SaveOptions()):
        yield


class Reusable(tf.__internal__.tracking.AutoTrackable):
    """A callable of TF Hub's Reusable SavedModel API: `__call__`, `variables`,
    `trainable_variables`, `regularization_losses` (attributes, as the loaded object
    has them). `call(inputs, training)` returns a dict of tensors; it is traced for
    `training` None, False and True on `specs`."""

    def __init__(self, call, specs: dict, variables):
        super().__init__()

        def padded(inputs, training=None):
            # Whenever traced (the SavedModel may trace again while saving, inside the
            # serving signatures' `inference_graph`): the padded computation of
            # training, in plain TensorFlow ops (any server, any device).
            with real_tokens.real_tokens_only(False), fused.xla_disabled():
                return call(inputs, training=training)

        function = tf.function(padded, autograph=False)
        with traced_as_saved():
            for training in (None, False, True):
                function.get_concrete_function(specs, training=training)
        self.__call__ = function
        # The Keras variables themselves: the functions' captures are bound to them
        # when loaded (their tf.Variables inside would load as other objects, which a
        # gradient of the head variables read by plain TensorFlow ops would not reach).
        self.variables = list(variables)
        self.trainable_variables = [v for v in variables if v.trainable]
        self.regularization_losses = []


def _input_specs(extra=()) -> dict:
    return {name: tf.TensorSpec([None, None], tf.int32, name=name)
            for name in names.MODEL_INPUTS + tuple(extra)}


def _encoder_outputs(outputs: dict) -> dict:
    hub = {names.POOLED_OUTPUT: as_float32(outputs[names.POOLED_OUTPUT]),
           names.SEQUENCE_OUTPUT: as_float32(outputs[names.SEQUENCE_OUTPUT]),
           ENCODER_OUTPUTS: [as_float32(x) for x in outputs[ENCODER_OUTPUTS]]}
    hub[DEFAULT] = hub[names.POOLED_OUTPUT]
    return hub


def add_reusable_api(module) -> None:
    """Makes the serving module of an encoder or mlm export (the SavedModel's root) a
    Reusable SavedModel: `__call__` and the variables of its encoder (an mlm export also
    gets `mlm`, over the whole model). Its serving signatures are unchanged."""
    model = module.model
    encoder = model if isinstance(model, AlbertEncoder) else model.encoder

    def call(inputs, training=None):
        return _encoder_outputs(encoder(_read(inputs, names.MODEL_INPUTS),
                                        training=training))

    hub = Reusable(call, _input_specs(), encoder.variables)
    module.__call__ = hub.__call__
    module.variables = hub.variables
    module.trainable_variables = hub.trainable_variables
    module.regularization_losses = hub.regularization_losses
    if model is not encoder:  # the pretraining model: its heads too
        inputs = names.MODEL_INPUTS + (names.MASKED_LM_POSITIONS,)

        def call_mlm(inputs_, training=None):
            outputs = model(_read(inputs_, inputs), training=training)
            hub_outputs = _encoder_outputs(outputs)
            hub_outputs.update({name: as_float32(outputs[name]) for name in MLM_OUTPUTS})
            return hub_outputs

        module.mlm = Reusable(call_mlm, _input_specs([names.MASKED_LM_POSITIONS]),
                              model.variables)


def _read(inputs: dict, keys) -> dict:
    return {name: inputs[name] for name in keys}


# ------------------------------------------------------------------ the preprocessor
class _Tokenize(tf.__internal__.tracking.AutoTrackable):
    """`tokenize(strings)`, with `get_special_tokens_dict()` beside it. It holds the
    tokenizer (its tables and model), so that a Keras model built on
    `hub.KerasLayer(preprocessor.tokenize)` saves them with it."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer
        self.__call__ = tf.function(
            tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)
        special = {"vocab_size": tokenizer.vocab_size,
                   "start_of_sequence_id": tokenizer.cls_id,
                   "end_of_segment_id": tokenizer.sep_id,
                   "padding_id": tokenizer.pad_id, "mask_id": tokenizer.mask_id}
        self.get_special_tokens_dict = tf.function(
            lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()},
            input_signature=[], autograph=False)


class Preprocessor(tf.__internal__.tracking.AutoTrackable):
    """The root of a preprocessor SavedModel (see the module's docstring).
    `seq_length`: the default length; `max_seq_length`: the longest one
    `bert_pack_inputs` packs (the encoder's max_position_embeddings)."""

    def __init__(self, tokenizer, seq_length: int, max_seq_length: int):
        super().__init__()
        self.tokenizer = tokenizer
        self.tokenize = _Tokenize(tokenizer)
        ids = dict(cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)

        def pack(segments, seq_length=seq_length):
            if len(segments) > MAX_SEGMENTS:  # traced only to say so at the call
                tf.debugging.Assert(False, [
                    f"bert_pack_inputs packs at most {MAX_SEGMENTS} segments (ALBERT's "
                    f"[CLS] A [SEP] B [SEP], two token types); got {len(segments)}"])
                segments = segments[:MAX_SEGMENTS]
            seq_length = tf.convert_to_tensor(seq_length, tf.int32)
            checks = [tf.debugging.assert_greater_equal(
                          seq_length, len(segments) + 1, message=(
                              f"bert_pack_inputs: seq_length must leave room for [CLS] "
                              f"and a [SEP] per segment ({len(segments) + 1})")),
                      tf.debugging.assert_less_equal(
                          seq_length, max_seq_length, message=(
                              f"bert_pack_inputs: seq_length must be at most "
                              f"{max_seq_length}, the encoder's max_position_embeddings"))]
            with tf.control_dependencies(checks):
                seq_length = tf.identity(seq_length)
            return packing.pack_inputs(list(segments), seq_length, pad_to_max_length=True,
                                       **ids)

        pack_inputs = tf.function(pack, autograph=False)
        ragged = tf.RaggedTensorSpec([None, None], tf.int32)
        with traced_as_saved():
            for count in (*range(1, MAX_SEGMENTS + 1), *_REFUSED_SEGMENTS):
                pack_inputs.get_concrete_function([ragged] * count,
                                                  seq_length=tf.TensorSpec([], tf.int32))
        self.bert_pack_inputs = pack_inputs
        self.seq_length = seq_length
        self.__call__ = tf.function(
            lambda strings: pack([tokenizer.tokenize(strings)]),
            input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)

    def serving_default(self, text_a):
        return self.__call__(text_a)


def export_preprocessor(export_dir, *, spm_model_file=None, vocab_file=None,
                        do_lower_case: bool = True, seq_length: int = 128,
                        max_seq_length: int = 512, version: int | None = None) -> str:
    """Writes the preprocessor SavedModel `<export_dir>/<version>/` (see the module's
    docstring) for the model's SentencePiece model or WordPiece vocabulary; returns the
    version directory. `seq_length` is the default packed length, `max_seq_length`
    the longest `bert_pack_inputs` accepts (the encoder's max_position_embeddings).
    `assets.extra/export_info.json` says what it is. Bad arguments raise `ExportError`
    before anything is written."""
    from albert_tf.text import AlbertTextTokenizer

    if bool(spm_model_file) == bool(vocab_file):
        raise ExportError("the preprocessor needs spm_model_file or vocab_file (one)")
    shortest = MAX_SEGMENTS + 1
    for name, value in (("seq_length", seq_length), ("max_seq_length", max_seq_length)):
        if not is_int_at_least(value, shortest):
            raise ExportError(f"{name} must be an integer >= {shortest}, got {value!r}")
    if seq_length > max_seq_length:
        raise ExportError(f"seq_length {seq_length} exceeds max_seq_length {max_seq_length}"
                          " (the encoder's max_position_embeddings)")
    final_dir = check_export_dir(export_dir, version)
    tokenizer = AlbertTextTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                                    do_lower_case=do_lower_case)
    root = Preprocessor(tokenizer, seq_length, max_seq_length)
    signature = tf.function(root.serving_default, autograph=False).get_concrete_function(
        tf.TensorSpec([None], tf.string, name=names.TEXT_A))
    info = {"kind": "preprocessor", "seq_length": seq_length,
            "max_seq_length": max_seq_length, "do_lower_case": do_lower_case,
            "tokenizer": "sentencepiece" if spm_model_file else "wordpiece",
            "max_segments": MAX_SEGMENTS,
            "signatures": {"serving_default": signature_info(signature)}}
    with fileio.atomic_directory(final_dir) as temp_dir:
        tf.saved_model.save(root, temp_dir, signatures={"serving_default": signature})
        write_export_info(temp_dir, info)
    return final_dir
