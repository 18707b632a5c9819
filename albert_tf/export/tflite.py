"""`export_tflite`: a Keras ALBERT model -> one LiteRT (TFLite) flatbuffer, for phones
and CPUs, as the original's `run_squad_v1.py --export_dir` wrote `albert_model.tflite`.

The file has the signature `serving_default`, with the inputs and outputs of the
SavedModel's `serving_default` (`albert_tf.export.serving`): int32 `input_word_ids`,
`input_mask`, `input_type_ids` [B, S] ([B, num_choices, S] for multiple choice), the
kind's extra inputs (`p_mask`, `masked_lm_positions`), any batch and length up to the
model's `max_position_embeddings`; the same graph, traced on real tokens only, with one
GELU op (`fused.for_litert`). It is made of LiteRT's built-in ops alone (no Flex /
Select TF ops, no custom ops), so the stock runtime runs it, with XNNPACK (a file with
`serve_text` too adds the tokenizer's custom ops, below).

Token ids in, as the original; and with `with_text=True` (and the tokenizer files) also
`serve_text`: the SavedModel's raw-text signature for the kinds that pack one text or a
pair (classifier, regression, multi-label, encoder, mlm), tokenized inside the file by
TensorFlow Text's tokenizer ops (SentencePiece models and WordPiece vocabularies;
built-in ops around them, no Flex): custom ops whose kernels the app's runtime registers
(`tflite_interpreter` does in Python; `<path>.json` names them; see
`albert_tf.export.tflite_text`). A text is cut at `max_seq_length`, also for a run
that reads long texts in windows (`long_text`: one warning line, and the .json says
`"long_text": "truncate"`): the SavedModel's `serve_text` reads the windows.

Precisions (`TFLITE_PRECISIONS`): "float32"; "float16", weights stored in float16 (half
the size, computed in float32 on CPU); "int8", dynamic-range quantization: weights
stored in int8, matmuls in int8 with activations quantized per request (a quarter of the
size).

Beside `<path>` goes `<path>.json` (`TFLITE_INFO_SUFFIX`): kind, precision, labels,
inputs and outputs with their dtypes and shapes (`signatures`: every signature's), what
the client packs with (longest sequence, lower-casing), the custom ops and their TF Text
registrars. Both are written under temporary names and renamed together
when complete; an existing file is never overwritten (as a SavedModel's versions are
not): `<path>` or `<path>.json` already there, bad arguments, and a model with an op
LiteRT has no built-in kernel for, raise `ExportError` before anything is written.
"""

from __future__ import annotations

import json
import os
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf import fileio, packing
from albert_tf.export import tflite_text
from albert_tf.export.base import ExportError, file_in_the_way, signature_info
from albert_tf.export.kinds import ServingKind
from albert_tf.export.savedmodel import (
    _check_model,
    _labels_and_pairing,
    serving_kind,
    windowing_info,
    with_dtype_policy,
)
from albert_tf.export.serving import ServingModule
from albert_tf.export.serving_text import TextSettings
from albert_tf.modeling import fused, real_tokens
from albert_tf.tokenization import TokenizerError

TFLITE_PRECISIONS = ("float32", "float16", "int8")
TFLITE_INFO_SUFFIX = ".json"


def tflite_info_path(path) -> str:
    return os.fspath(path) + TFLITE_INFO_SUFFIX


def read_tflite_info(path) -> dict:
    """The `<path>.json` written beside a `.tflite` by `export_tflite`."""
    with tf.io.gfile.GFile(tflite_info_path(path)) as f:
        return json.load(f)


def check_tflite_path(path) -> str:
    """`path` as a str; `ExportError` where it cannot name a new file to write: a
    directory, a path under a file, or a file that exists (with its `.json` beside it:
    a written LiteRT file is never replaced, as a SavedModel's versions are not)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ExportError(f"the LiteRT file's path must be a file name, got {path!r}")
    path = os.fspath(path)
    if path.endswith("/") or tf.io.gfile.isdir(path):
        raise ExportError(f"{path} is a directory; the LiteRT export is one file "
                          "(e.g. model.tflite)")
    in_the_way = file_in_the_way(os.path.dirname(path))
    if in_the_way is not None:
        raise ExportError(f"{in_the_way} is a file, not a directory to write {path} in")
    _refuse_existing(path)
    return path


def _refuse_existing(path: str, when: str = "exists") -> None:
    for existing in (path, tflite_info_path(path)):
        if tf.io.gfile.exists(existing):
            raise ExportError(f"{existing} {when}; a written LiteRT file is never "
                              "overwritten: give a new path, or remove the old file and "
                              "its .json first")


def _freeze(function, input_signature):
    """`function` as LiteRT runs it: an inference graph on real tokens, GELU as one op
    (`fused.for_litert`), every variable frozen into a constant: the file holds the
    weights as tensors, which the float16 and int8 conversions quantize. Returns (the
    traced function, the frozen one)."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    with real_tokens.inference_graph(), fused.for_litert():
        concrete = tf.function(function, input_signature=input_signature,
                               autograph=False).get_concrete_function()
    return concrete, convert_variables_to_constants_v2(concrete)


def _text_function(module: ServingModule, tokenizer, packer):
    """`serve_text` in LiteRT's ops: the kind's text inputs, packed by `packer`."""
    text_names = [spec.name for spec in module.text_specs()]

    def serve_text(*texts):
        packed = packer(tokenizer, module.settings, dict(zip(text_names, texts)))
        outputs = module.run(packed.inputs)
        outputs.update(packed.returned)
        return outputs
    return serve_text


def _convert(entry: ServingKind, signatures: dict, precision: str,
             custom: tuple[str, ...]) -> bytes:
    """The flatbuffer of the frozen functions (`signatures`: name -> (input specs,
    traced, frozen)), with their input and output names (through a SavedModel of them in
    a temporary directory: the converter names a signature's tensors only there); the
    `custom` ops (the tokenizer's) and LiteRT's built-in ops alone."""
    holder = tf.Module()
    functions = {}
    for name, (specs, concrete, frozen) in signatures.items():
        functions[name] = tf.function(_named_outputs(concrete, frozen),
                                      input_signature=specs, autograph=False)
        setattr(holder, name, functions[name])
    with tempfile.TemporaryDirectory() as directory:
        tf.saved_model.save(holder, directory, signatures={
            name: function.get_concrete_function() for name, function in functions.items()})
        converter = tf.lite.TFLiteConverter.from_saved_model(
            directory, signature_keys=list(signatures))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        # The tokenizer's op is a custom op (TF Text's LiteRT kernel); whatever else the
        # converter would make one is refused below.
        converter.allow_custom_ops = bool(custom)
        if precision in ("float16", "int8"):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if precision == "float16":
            converter.target_spec.supported_types = [tf.float16]
        try:
            flatbuffer = converter.convert()
        except Exception as e:  # the converter's ConverterError names the ops
            raise ExportError(
                f"the {entry.name} model cannot be written for LiteRT with its built-in "
                f"ops alone: {_short(e)}. Ops outside that set need LiteRT's Flex "
                "delegate (Select TF ops) in the app, which this export does not use: "
                "serve this model from the SavedModel (export_savedmodel, --export_dir) "
                "instead") from None
    unexpected = sorted(custom_ops(flatbuffer) - set(custom))
    if unexpected:
        raise ExportError(
            f"the {entry.name} model's serve_text needs ops that LiteRT has no kernel "
            f"for: {', '.join(unexpected)} (only the tokenizer's {', '.join(custom)} "
            "are expected); serve its text from the SavedModel instead")
    return flatbuffer


def _named_outputs(concrete, frozen):
    """The frozen function, answering with the traced one's output names."""
    def call(*args):
        return tf.nest.pack_sequence_as(concrete.structured_outputs,
                                        tf.nest.flatten(frozen(*args)))
    return call


def custom_ops(flatbuffer: bytes) -> set[str]:
    """The names of the custom ops a LiteRT flatbuffer holds."""
    import importlib

    schema = importlib.import_module("tensorflow.lite.python.schema_py_generated")
    model = schema.Model.GetRootAs(flatbuffer, 0)
    codes = (model.OperatorCodes(i) for i in range(model.OperatorCodesLength()))
    return {code.CustomCode().decode() for code in codes if code.CustomCode()}


def _short(error: Exception) -> str:
    """The converter's message up to its MLIR dump: the lines that name the ops."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    kept = [line for line in lines if "ops" in line.lower() or line.lstrip().startswith("tf.")]
    return " ".join((kept or lines)[:6]).strip()[:1500]


def export_tflite(model, path, *, kind: str, precision: str = "float32", labels=None,
                  task_name: str | None = None, max_seq_length: int | None = None,
                  do_lower_case: bool | None = None, with_text: bool = False,
                  spm_model_file=None, vocab_file=None, is_pair: bool | None = None,
                  long_text: str | None = None) -> str:
    """Writes `model` (of `kind`, any `albert_tf.export.KINDS`) as the LiteRT file `path`
    and `<path>.json`, neither of which may exist yet (`ExportError`: never
    overwritten); returns `path`. See the module docstring for the file.

    `precision`: "float32", "float16" or "int8" (`TFLITE_PRECISIONS`). `labels` /
    `task_name` name the outputs as `export_savedmodel`'s do (recorded in the JSON).
    `max_seq_length` (default: the model's max_position_embeddings) and
    `do_lower_case` tell a client how to pack its text; recorded, not enforced by the
    file's `serving_default` (any length up to max_position_embeddings runs). A model
    under a mixed or bfloat16 Keras policy is exported from a float32 copy of its
    weights.

    `with_text`: the file also has `serve_text`, raw text in (`text_a`, and `text_b`
    for a pair task: `task_name`'s, or `is_pair`; a pair by default), tokenized with
    `spm_model_file` or `vocab_file` and `do_lower_case` and packed to `max_seq_length`,
    for the kinds whose `serve_text` packs one text or a pair (those with a
    `lite_pack_text`).

    `long_text`: how the run read a long text. The file cuts each text at
    `max_seq_length` whatever it says (its `serve_text` packs one row per text, and
    windows in LiteRT's ops would need a loop over the texts and segment ops this
    export does not write): a run's "windows" get one warning line naming the
    SavedModel's `serve_text` as the export that reads them, and the .json records
    `"long_text": "truncate"` for the kinds that can read windows.
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
    labels, is_pair = _labels_and_pairing(entry, model, labels, task_name, is_pair)
    tokenizer = _text_tokenizer(entry, with_text, spm_model_file, vocab_file,
                                do_lower_case)  # (a kind LiteRT cannot read refused first)
    if long_text == packing.WINDOWS:
        logging.warning(
            "the LiteRT file %s cuts each text at max_seq_length %d (--long_text=windows "
            "is read by the SavedModel's serve_text, --export_dir, not by LiteRT)", path,
            max_seq_length)
    if model.dtype_policy.name != "float32":
        model = with_dtype_policy(model, "float32")
    module = ServingModule(model, entry, None, TextSettings(
        max_seq_length=max_seq_length, is_pair=is_pair,
        num_choices=getattr(model, "num_choices", None)), labels=labels)
    signatures = {"serving_default": (module.input_specs(), *_freeze(
        module.serving_default, module.input_specs()))}
    if tokenizer is not None:
        signatures["serve_text"] = (module.text_specs(), *_freeze(
            _text_function(module, tokenizer, entry.lite_pack_text),
            module.text_specs()))
    flatbuffer = _convert(entry, signatures, precision,
                          tokenizer.custom_ops if tokenizer is not None else ())
    info = {
        "kind": entry.name, "precision": precision, "labels": labels,
        "task_name": task_name, "max_seq_length": max_seq_length,
        "max_position_embeddings": longest, "do_lower_case": do_lower_case,
        "signature": "serving_default",
        "inputs": {spec.name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                   for spec in module.input_specs()},
        "outputs": signature_info(signatures["serving_default"][1])["outputs"],
        "signatures": {name: signature_info(concrete)
                       for name, (_, concrete, _) in signatures.items()},
        "custom_ops": sorted(custom_ops(flatbuffer)),
        "op_registerers": tokenizer.registerers if tokenizer is not None else [],
        **{name: getattr(model, name) for name in entry.model_info},
        **windowing_info(entry, packing.TRUNCATE, None),
    }
    with fileio.atomic_path(path, suffixes=("", TFLITE_INFO_SUFFIX)) as tmp:
        with tf.io.gfile.GFile(tmp, "wb") as f:
            f.write(flatbuffer)
        with tf.io.gfile.GFile(tmp + TFLITE_INFO_SUFFIX, "w") as f:
            f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
        _refuse_existing(path, "appeared during the export")
    return path


def check_text_export(kind, spm_model_file=None, vocab_file=None) -> None:
    """`ExportError` where a LiteRT file of `kind` cannot have `serve_text` with this
    tokenizer (scripts call it before training)."""
    entry = serving_kind(kind)
    if entry.lite_pack_text is None:
        raise ExportError(
            f"raw text in a LiteRT file is offered for the kinds that pack one text or a "
            f"pair; {entry.name}'s serve_text needs string ops LiteRT has no kernels for "
            "(SQuAD's piece offsets, multiple choice's blanks, NER's words). Tokenize in "
            "the app and call the file's serving_default (token ids), or serve the "
            "text from the SavedModel")
    if not (spm_model_file or vocab_file):
        raise ExportError("raw text in a LiteRT file needs the model's tokenizer: give "
                          "spm_model_file or vocab_file (--spm_model_file, --vocab_file)")


def _text_tokenizer(entry: ServingKind, with_text: bool, spm_model_file, vocab_file,
                    do_lower_case):
    """The tokenizer of the file's `serve_text`, None without `with_text`; an
    `ExportError` (before anything is written) where the kind or the tokenizer cannot
    be run by LiteRT."""
    if not with_text:
        return None
    check_text_export(entry, spm_model_file, vocab_file)
    try:
        return tflite_text.LiteTextTokenizer(
            spm_model_file=spm_model_file, vocab_file=vocab_file,
            do_lower_case=True if do_lower_case is None else do_lower_case)
    except TokenizerError as e:
        raise ExportError(str(e)) from None


def tflite_interpreter(path, **kwargs):
    """A LiteRT interpreter (`ai_edge_litert`, XNNPACK for the float ops) of the file at
    `path`; for a file with `serve_text`, one that registers TensorFlow Text's kernels of
    the custom ops its JSON names (`op_registerers`, from `tensorflow_text`). `kwargs`
    go to the interpreter (`num_threads`, ...)."""
    from ai_edge_litert.interpreter import Interpreter, InterpreterWithCustomOps

    registerers = read_tflite_info(path).get("op_registerers") or []
    if not registerers:
        return Interpreter(model_path=os.fspath(path), **kwargs)
    try:
        from tensorflow_text import tflite_registrar
    except ImportError as e:
        raise ImportError(
            f"{path} tokenizes text with TensorFlow Text's ops "
            f"({', '.join(registerers)}): their LiteRT kernels come with the "
            "tensorflow-text package (pip install tensorflow-text)") from e
    return InterpreterWithCustomOps(
        model_path=os.fspath(path),
        custom_op_registerers=[getattr(tflite_registrar, name) for name in registerers],
        **kwargs)
