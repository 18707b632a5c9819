"""`export_tflite`: a Keras ALBERT model -> one LiteRT (TFLite) flatbuffer, for phones
and CPUs, as the original's `run_squad_v1.py --export_dir` wrote `albert_model.tflite`.

The file has one signature, `serving_default`, with the inputs and outputs of the
SavedModel's `serving_default` (`albert_tf.export.serving`): int32 `input_word_ids`,
`input_mask`, `input_type_ids` [B, S] ([B, num_choices, S] for multiple choice), the
kind's extra inputs (`p_mask`, `masked_lm_positions`), any batch and length up to the
model's `max_position_embeddings`; the same graph, traced on real tokens only, with one
GELU op (`fused.for_litert`). It is made of LiteRT's built-in ops alone (no Flex /
Select TF ops, no custom ops), so the stock runtime runs it, with XNNPACK.

Token ids in, as the original: raw text stays with the client (its tokenizer and
`albert_tf.packing`), since the in-graph tokenizer of `serve_text` needs TensorFlow ops
that LiteRT's built-in set has not (README, "Serving on phones and CPUs").

Precisions (`TFLITE_PRECISIONS`): "float32"; "float16", weights stored in float16 (half
the size, computed in float32 on CPU); "int8", dynamic-range quantization: weights
stored in int8, matmuls in int8 with activations quantized per request (a quarter of the
size).

Beside `<path>` goes `<path>.json` (`TFLITE_INFO_SUFFIX`): kind, precision, labels,
inputs and outputs with their dtypes and shapes, what the client packs with (longest
sequence, lower-casing). Both are written under temporary names and renamed together
when complete; bad arguments, and a model with an op LiteRT has no built-in kernel for,
raise `ExportError` before anything is written.
"""

from __future__ import annotations

import json
import os
import tempfile

import tensorflow as tf

from albert_tf import fileio, fused
from albert_tf.export.kinds import ServingKind
from albert_tf.export.savedmodel import (
    ExportError,
    _check_model,
    _labels_and_pairing,
    _signature_info,
    serving_kind,
    with_dtype_policy,
)
from albert_tf.export.serving import ServingModule
from albert_tf.export.serving_text import TextSettings
from albert_tf.modeling import real_tokens

TFLITE_PRECISIONS = ("float32", "float16", "int8")
TFLITE_INFO_SUFFIX = ".json"


def tflite_info_path(path) -> str:
    return os.fspath(path) + TFLITE_INFO_SUFFIX


def read_tflite_info(path) -> dict:
    """The `<path>.json` written beside a `.tflite` by `export_tflite`."""
    with tf.io.gfile.GFile(tflite_info_path(path)) as f:
        return json.load(f)


def check_tflite_path(path) -> str:
    """`path` as a str; `ExportError` where it cannot name the file to write."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ExportError(f"the LiteRT file's path must be a file name, got {path!r}")
    path = os.fspath(path)
    if path.endswith("/") or tf.io.gfile.isdir(path):
        raise ExportError(f"{path} is a directory; the LiteRT export is one file "
                          "(e.g. model.tflite)")
    return path


def _trace(module: ServingModule):
    """`serving_default` as LiteRT runs it: an inference graph on real tokens, GELU as
    one op (`fused.for_litert`), every variable frozen into a constant: the file holds
    the weights as tensors, which the float16 and int8 conversions quantize."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    with real_tokens.inference_graph(), fused.for_litert():
        concrete = tf.function(module.serving_default, input_signature=module.input_specs(),
                               autograph=False).get_concrete_function()
    return concrete, convert_variables_to_constants_v2(concrete)


def _convert(entry: ServingKind, module: ServingModule, concrete, frozen,
             precision: str) -> bytes:
    """The flatbuffer of the frozen function, with its input and output names (through a
    SavedModel of it in a temporary directory: the converter names a signature's
    tensors only there)."""
    holder = tf.Module()
    holder.serving_default = tf.function(
        lambda *args: tf.nest.pack_sequence_as(concrete.structured_outputs,
                                               tf.nest.flatten(frozen(*args))),
        input_signature=module.input_specs(), autograph=False)
    with tempfile.TemporaryDirectory() as directory:
        tf.saved_model.save(
            holder, directory,
            signatures={"serving_default": holder.serving_default.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(directory)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if precision in ("float16", "int8"):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if precision == "float16":
            converter.target_spec.supported_types = [tf.float16]
        try:
            return converter.convert()
        except Exception as e:  # the converter's ConverterError names the ops
            raise ExportError(
                f"the {entry.name} model cannot be written for LiteRT with its built-in "
                f"ops alone: {_short(e)}. Ops outside that set need LiteRT's Flex "
                "delegate (Select TF ops) in the app, which this export does not use: "
                "serve this model from the SavedModel (export_savedmodel, --export_dir) "
                "instead") from None


def _short(error: Exception) -> str:
    """The converter's message up to its MLIR dump: the lines that name the ops."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    kept = [line for line in lines if "ops" in line.lower() or line.lstrip().startswith("tf.")]
    return " ".join((kept or lines)[:6]).strip()[:1500]


def export_tflite(model, path, *, kind: str, precision: str = "float32", labels=None,
                  task_name: str | None = None, max_seq_length: int | None = None,
                  do_lower_case: bool | None = None) -> str:
    """Writes `model` (of `kind`, any `albert_tf.export.KINDS`) as the LiteRT file `path`
    and `<path>.json`; returns `path`. See the module docstring for the file.

    `precision`: "float32", "float16" or "int8" (`TFLITE_PRECISIONS`). `labels` /
    `task_name` name the outputs as `export_savedmodel`'s do (recorded in the JSON).
    `max_seq_length` (default: the model's max_position_embeddings) and
    `do_lower_case` tell a client how to pack its text; recorded, not enforced by the
    file (any length up to max_position_embeddings runs). A model under a mixed or
    bfloat16 Keras policy is exported from a float32 copy of its weights.
    """
    entry = serving_kind(kind)
    _check_model(entry, model)
    if precision not in TFLITE_PRECISIONS:
        raise ExportError(f"unknown LiteRT precision {precision!r}; expected one of "
                          f"{', '.join(TFLITE_PRECISIONS)}")
    path = check_tflite_path(path)
    longest = model.config.max_position_embeddings
    if max_seq_length is None:
        max_seq_length = longest
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) \
            or not 3 <= max_seq_length <= longest:
        raise ExportError(f"max_seq_length must be an integer from 3 to the model's "
                          f"max_position_embeddings {longest}, got {max_seq_length!r}")
    labels, _ = _labels_and_pairing(entry, model, labels, task_name, None)
    if model.dtype_policy.name != "float32":
        model = with_dtype_policy(model, "float32")
    module = ServingModule(model, entry, None, TextSettings(
        max_seq_length=max_seq_length, num_choices=getattr(model, "num_choices", None)))
    concrete, frozen = _trace(module)
    flatbuffer = _convert(entry, module, concrete, frozen, precision)
    info = {
        "kind": entry.name, "precision": precision, "labels": labels,
        "task_name": task_name, "max_seq_length": max_seq_length,
        "max_position_embeddings": longest, "do_lower_case": do_lower_case,
        "signature": "serving_default",
        "inputs": {spec.name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                   for spec in module.input_specs()},
        "outputs": _signature_info(concrete)["outputs"],
        **{name: getattr(model, name) for name in entry.model_info},
    }
    with fileio.atomic_path(path, suffixes=("", TFLITE_INFO_SUFFIX)) as tmp:
        with tf.io.gfile.GFile(tmp, "wb") as f:
            f.write(flatbuffer)
        with tf.io.gfile.GFile(tmp + TFLITE_INFO_SUFFIX, "w") as f:
            f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return path
