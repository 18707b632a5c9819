"""`export_savedmodel`: a Keras ALBERT model -> `<export_dir>/<version>/` for TF Serving.

The steps: check the arguments against the kind's entry (`albert_tf.export.kinds`),
resolve the labels and whether `serve_text` takes a pair, build the in-graph tokenizer,
trace the signatures of `albert_tf.export.serving.ServingModule`, then write the version
directory under a temporary name (renamed when complete: an existing version is never
overwritten) with its `assets.extra/`.
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from albert_tf import fileio, packing
from albert_tf.checkpoints.release import (
    ReleaseFiles,
    describe_checkpoint,
    head_outputs,
    layout_config,
    load_checkpoint,
)
from albert_tf.config import AlbertConfig
from albert_tf.data.choice_records import DEFAULT_MAX_QA_LENGTH
from albert_tf.data.ner import WORD_SPLITS
from albert_tf.export.base import (
    EXPORT_CONFIG,
    ExportError,
    check_export_dir,
    is_int_at_least,
    signature_info,
    write_export_info,
)
from albert_tf.export.kinds import ServingKind, serving_kinds
from albert_tf.export.reusable import add_reusable_api
from albert_tf.export.serving import ServingModule, warmup_inputs
from albert_tf.export.serving_text import TextSettings
from albert_tf.modeling import real_tokens

SIGNATURES = ("serving_default", "serve_examples", "serve_text")
# What the exported graph computes in: "bfloat16" runs the matmuls in bfloat16 (as Keras'
# mixed_bfloat16 policy does), LayerNorm, softmax and the heads' outputs in float32.
SERVING_PRECISIONS = ("float32", "bfloat16")
_BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# The environment a server process of an export of each precision runs best in
# (export_info.json's "serving_environment"). TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 tells
# TensorFlow's oneDNN CPU kernels that the second operand of every MatMul with a bias is
# a constant weight: each such MatMul node reorders it once, at its first call, into the
# layout it multiplies in, and keeps that copy (ALBERT-base in bfloat16: ~175 MB more
# per signature called), where by default it multiplies the weights as stored. In
# bfloat16 that layout is the same whatever the request's rows: on an AVX512_BF16 CPU
# (2 cores) one SST-2 text per request took 24 ms p50 instead of 31-37, one MRPC pair
# 41-46 instead of 46-54, requests of 8 or 32 texts about the same (BENCHMARKS.md). In
# float32 the layout depends on the first request's rows: after a request of 32 texts,
# requests of one took 132 ms instead of 46, so float32 exports ask for nothing.
# Only for processes whose MatMuls all multiply by weights that never change, as this
# package's exports do (tests/test_export.py): a MatMul of two request tensors would be
# answered from the first request's copy, and training from its first step's weights
# (`refuse_frozen_weights`).
FROZEN_WEIGHTS = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
SERVING_ENVIRONMENTS = {"float32": {}, "bfloat16": {FROZEN_WEIGHTS: "1"}}
DEFAULT_MAX_QUERY_LENGTH = 64  # the original run_squad's --max_query_length
# What a missing build_model argument can also come from.
_ARGUMENT_HINTS = {"num_labels": " (or a checkpoint with the head: "
                                 "load_model_from_checkpoint counts its outputs)"}


def serving_environment_now() -> dict[str, str]:
    """The variables of `SERVING_ENVIRONMENTS` that this process has, with their values."""
    wanted = {name for environment in SERVING_ENVIRONMENTS.values() for name in environment}
    return {name: os.environ[name] for name in sorted(wanted) if name in os.environ}


def refuse_frozen_weights(what: str, error: type[Exception] = ValueError) -> None:
    """Raises `error` where this process has FROZEN_WEIGHTS set (as TensorFlow reads it:
    1 or true): `what` changes weights that its MatMuls would keep as first seen."""
    value = os.environ.get(FROZEN_WEIGHTS, "")
    if value.lower() in ("1", "true"):
        raise error(
            f"{FROZEN_WEIGHTS}={value} is set in this process: TensorFlow's oneDNN "
            f"MatMuls would keep the weights of their first call, and {what} would run "
            "on them; it is for processes that serve exports (export_info.json's "
            f"serving_environment). Unset {FROZEN_WEIGHTS} to run {what}.")


# ------------------------------------------------------------------ model building
def serving_kind(kind: str | ServingKind) -> ServingKind:
    """The `ServingKind` of `kind`: itself, or the kind of that name (the encoder's or
    a registered task's: `kinds.serving_kinds`); `ExportError` for an unknown name."""
    if isinstance(kind, ServingKind):
        return kind
    known = serving_kinds()
    if kind not in known:
        raise ExportError(f"unknown kind {kind!r}; expected one of {', '.join(known)}")
    return known[kind]


def build_model(kind: str | ServingKind, config: AlbertConfig, *,
                num_labels: int | None = None, num_choices: int = 4, **kwargs):
    """The Keras model of `kind` for `config` (weights created, not loaded)."""
    entry = serving_kind(kind)
    given = {"num_labels": num_labels, "num_choices": num_choices}
    for argument in entry.model_arguments:
        if given[argument] is None:
            raise ExportError(f"kind {entry.name!r} needs {argument}"
                              f"{_ARGUMENT_HINTS.get(argument, '')}")
        kwargs[argument] = given[argument]
    return entry.model_class(config, **kwargs)


def load_model_from_checkpoint(kind: str | ServingKind, albert_config_file, checkpoint, *,
                               num_labels: int | None = None, num_choices: int = 4,
                               **kwargs):
    """Builds the model of `kind` and loads `checkpoint` (any layout that
    `release.load_checkpoint` reads, or its `ReleaseFiles`) strictly: any model variable
    missing from it, or of another shape, raises `CheckpointError` (nothing is
    written). The model's
    number of outputs (`outputs_argument`: `num_labels`), where not given, is that of
    the checkpoint's head; the arguments the kind keeps beside a checkpoint
    (`checkpoint_arguments`: multi-label's threshold) come from there unless given.
    `albert_config_file` is an `AlbertConfig`, the path of an albert_config.json (or
    config.json) or a shipped config name (`albert_base_v2`); for brightmart weights it
    is converted to their Google-layout equivalent. The load report is kept as
    `model.load_report`."""
    config = albert_config_file if isinstance(albert_config_file, AlbertConfig) \
        else AlbertConfig.from_name_or_file(albert_config_file)
    files = checkpoint if isinstance(checkpoint, ReleaseFiles) \
        else describe_checkpoint(checkpoint)
    config = layout_config(config, files.layout)
    entry = serving_kind(kind)
    if entry.model_class.outputs_argument == "num_labels" and num_labels is None:
        num_labels = head_outputs(files, entry.model_class, config)
    if entry.checkpoint_arguments is not None:
        kwargs.update(entry.checkpoint_arguments(files.directory, kwargs))
    model = build_model(entry, config, num_labels=num_labels, num_choices=num_choices,
                        **kwargs)
    model.load_report = load_checkpoint(model, files, strict=True)
    return model


def in_serving_precision(model, precision: str):
    """`model` itself for "float32"; for "bfloat16" a copy of it (same class, config and
    weights) under the "bfloat16" policy: its weights stored in bfloat16, LayerNorm's in
    float32 (`modeling.common.layer_norm`). It computes the numbers of the
    mixed_bfloat16 policy (whose float32 weights are rounded to bfloat16 at every
    forward pass; here once, when the copy is made), without those casts (on an
    AVX512_BF16 CPU a one-text ALBERT-base request took 32.9 ms instead of 34.7), and the
    export is half the size. Warns when this machine's CPU has no bfloat16 instructions:
    there bfloat16 runs slower than float32 (the export still works, for the servers it
    is meant for)."""
    if precision not in SERVING_PRECISIONS:
        raise ExportError(f"unknown serving precision {precision!r}; expected one of "
                          f"{', '.join(SERVING_PRECISIONS)}")
    if precision == "float32":
        return model
    flags = cpu_flags()
    if flags is not None and not flags & set(_BFLOAT16_CPU_FLAGS):
        logging.warning(
            "exporting for bfloat16 on a CPU without %s: this machine multiplies bfloat16 "
            "slower than float32; serve it where the CPU has them",
            " or ".join(_BFLOAT16_CPU_FLAGS))
    return with_dtype_policy(model, "bfloat16")


def with_dtype_policy(model, dtype: str):
    """A copy of `model` (same class, config and weights) under the Keras dtype policy
    `dtype` (its weights cast to the policy's variable dtypes)."""
    copy = type(model).from_config(dict(model.get_config(), dtype=dtype))
    copy.set_weights(model.get_weights())
    return copy


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags (/proc/cpuinfo), or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


# ------------------------------------------------------------------ the arguments
def _check_model(entry: ServingKind, model) -> None:
    if not isinstance(model, entry.model_class):
        raise ExportError(f"kind {entry.name!r} needs a {entry.model_class.__name__}, got "
                          f"{type(model).__name__}")


def _check_arguments(entry: ServingKind, model, *, spm_model_file, vocab_file,
                     max_seq_length, max_qa_length, word_split) -> None:
    _check_model(entry, model)
    if spm_model_file and vocab_file:
        raise ExportError("give spm_model_file or vocab_file, not both")
    if not is_int_at_least(max_seq_length, 3):
        raise ExportError(f"max_seq_length must be an integer >= 3, got {max_seq_length!r}")
    if max_seq_length > model.config.max_position_embeddings:
        raise ExportError(f"max_seq_length {max_seq_length} exceeds the model's "
                          f"max_position_embeddings {model.config.max_position_embeddings}")
    if not is_int_at_least(max_qa_length, 1):
        raise ExportError(f"max_qa_length must be a positive integer, got {max_qa_length!r}")
    if word_split not in WORD_SPLITS:
        raise ExportError(f"word_split must be one of {', '.join(WORD_SPLITS)}, got "
                          f"{word_split!r}")


def check_windows_kind(kind: str | ServingKind, long_text: str | None) -> None:
    """`ExportError` unless `long_text` (None: "truncate") is a mode the kind's
    `serve_text` reads: "windows" only for the kinds that pool windows (scripts call
    it before any work)."""
    entry = serving_kind(kind)
    if long_text is not None and long_text not in packing.LONG_TEXT_MODES:
        raise ExportError(f"long_text must be one of {', '.join(packing.LONG_TEXT_MODES)}"
                          f", got {long_text!r}")
    if long_text == packing.WINDOWS and entry.window_pooling is None:
        raise ExportError(f"kind {entry.name!r} reads no windows of a long text "
                          "(long_text=windows is for the classifier, regression, "
                          "multi_label and multiple_choice kinds)")


def _check_windows(entry: ServingKind, long_text: str, window_stride, max_seq_length: int,
                   is_pair: bool, max_qa_length: int) -> None:
    """`long_text` and `window_stride` that the kind's `serve_text` can read: windows
    for the kinds that pool them, a stride smaller than the shortest window (a
    multiple-choice context's: beside an ending of `max_qa_length` pieces)."""
    check_windows_kind(entry, long_text)
    if long_text != packing.WINDOWS:
        if window_stride is not None:
            raise ExportError(f"window_stride={window_stride} is for long_text=windows")
        return
    qa_length = max_qa_length if entry.per_choice else None
    window = packing.smallest_window(max_seq_length, is_pair, qa_length)
    if window < 2 or (window_stride is not None and not
                      (is_int_at_least(window_stride, 1) and window_stride < window)):
        what = f"a context (max_qa_length {qa_length})" if entry.per_choice else \
            "a pair" if is_pair else "a text"
        raise ExportError(f"long_text=windows: max_seq_length {max_seq_length} gives "
                          f"{what} windows of {window} "
                          f"piece(s), and window_stride {window_stride} must be a "
                          "positive integer smaller than that")


def _resolve_labels(entry: ServingKind, model, labels) -> list[str] | None:
    """The lines of labels.txt: the given labels (one per output) or the kind's
    defaults; None when the kind names no outputs (or a regression)."""
    rule = entry.labels
    if rule is None:
        return None
    count = getattr(model, rule.count_attribute)
    if rule.none_for_one and count == 1:
        return None
    labels = list(labels) if labels is not None else [rule.default(i) for i in range(count)]
    if len(labels) != count:
        raise ExportError(f"{len(labels)} labels given for a {entry.name} of "
                          f"{rule.count_attribute}={count}")
    return labels


def _labels_and_pairing(entry: ServingKind, model, labels, task_name, is_pair):
    """(labels, is_pair): a GLUE `task_name` gives its labels and whether it is a pair
    task, unless `labels` / `is_pair` say otherwise; a pair by default."""
    if task_name is not None:
        from albert_tf.data.glue import get_task

        task = get_task(task_name)
        if labels is None and not task.is_regression:
            labels = list(task.labels)
        if is_pair is None:
            is_pair = task.is_pair
    is_pair = True if is_pair is None else bool(is_pair)
    return _resolve_labels(entry, model, labels), is_pair


def _build_tokenizer(entry: ServingKind, spm_model_file, vocab_file, do_lower_case):
    """The in-graph tokenizer of `serve_text`; None without a SentencePiece model or
    vocabulary (no `serve_text`)."""
    if not (spm_model_file or vocab_file):
        return None
    if entry.text_offsets and vocab_file:
        raise ExportError(
            "SQuAD exports take spm_model_file, not vocab_file: serve_text maps the "
            "answer back to the context through SentencePiece offsets (and the "
            "original reads SQuAD with a SentencePiece model only)")
    from albert_tf.text import AlbertTextTokenizer

    return AlbertTextTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case, with_offsets=entry.text_offsets)


# ------------------------------------------------------------------ the signatures
def _trace_signatures(module: ServingModule) -> dict:
    """The concrete functions of each signature (`serve_text` only with a tokenizer),
    traced as inference graphs: on real tokens only, without XLA kernels. The serving
    code is plain TensorFlow ops (no Python control flow on tensors): traced without
    AutoGraph's source conversion, the tiny export of tests/ took 6.3 s instead of 9.5."""
    def trace(function, specs):
        return tf.function(function, input_signature=specs,
                           autograph=False).get_concrete_function()

    with real_tokens.inference_graph(), module.one_model_trace():
        signatures = {
            "serving_default": trace(module.serving_default, module.input_specs()),
            "serve_examples": trace(module.serve_examples,
                                    [tf.TensorSpec([None], tf.string, name="examples")]),
        }
        if module.tokenizer is not None:
            signatures["serve_text"] = trace(module.serve_text, module.text_specs())
    return signatures


# ------------------------------------------------------------------ the files
def _write_warmup(version_dir, module: ServingModule) -> bool:
    """Writes the TF Serving warmup file when the tools for it are installed."""
    try:
        from albert_tf.export.warmup import write_warmup_requests

        write_warmup_requests(version_dir, "serving_default", warmup_inputs(module))
    except ImportError:
        return False
    return True


def _write_extras(version_dir, model, labels, info: dict) -> None:
    """`assets.extra/`: albert_config.json, labels.txt (when there are labels) and
    export_info.json."""
    extra = write_export_info(version_dir, info)
    model.config.to_json_file(os.path.join(extra, EXPORT_CONFIG))
    if labels is not None:
        fileio.write_text_atomically(os.path.join(extra, "labels.txt"),
                                     "".join(f"{label}\n" for label in labels))


def _export_info(module: ServingModule, signatures: dict, *, warmup: bool,
                 do_lower_case: bool, task_name, labels, tokenizer_name,
                 serving_precision: str) -> dict:
    """What export_info.json says the model serves: the common fields, then those the
    kind adds (from the model and from the text settings)."""
    entry, settings = module.serving_kind, module.settings
    info = {
        "warmup_requests": bool(warmup),
        "kind": entry.name, "max_seq_length": settings.max_seq_length,
        "do_lower_case": do_lower_case, "task_name": task_name,
        "is_pair": settings.is_pair, "labels": labels, "tokenizer": tokenizer_name,
        "serving_precision": serving_precision,
        "serving_environment": SERVING_ENVIRONMENTS[serving_precision],
        "signatures": {n: signature_info(c) for n, c in signatures.items()},
    }
    info.update({name: getattr(module.model, name) for name in entry.model_info})
    info.update({name: getattr(settings, name) for name in entry.text_info})
    info.update(windowing_info(entry, settings.long_text, settings.window_stride))
    return info


def windowing_info(entry: ServingKind, long_text: str, window_stride) -> dict:
    """What export_info.json (and a LiteRT file's .json) says of a long text, for the
    kinds that can read windows: `long_text`, "truncate" (cut at max_seq_length) or
    "windows" (read in windows of max_seq_length), with windows `window_stride` (null:
    half of each window)."""
    if entry.window_pooling is None:
        return {}
    if long_text != packing.WINDOWS:
        return {"long_text": packing.TRUNCATE}
    return {"long_text": packing.WINDOWS, "window_stride": window_stride}


def export_savedmodel(model, export_dir, *, kind: str, spm_model_file=None,
                      vocab_file=None, do_lower_case: bool = True,
                      max_seq_length: int = 512, labels=None, version: int | None = None,
                      task_name: str | None = None, is_pair: bool | None = None,
                      max_query_length: int = DEFAULT_MAX_QUERY_LENGTH,
                      max_qa_length: int = DEFAULT_MAX_QA_LENGTH,
                      word_split: str = "whitespace",
                      warmup_requests: bool = True,
                      serving_precision: str = "float32",
                      long_text: str = packing.TRUNCATE,
                      window_stride: int | None = None) -> str:
    """Writes `model` (of `kind`) as the SavedModel `<export_dir>/<version>/` and returns
    that directory. See `albert_tf.export` for the signatures.

    `task_name` (a GLUE task) gives the labels and whether `serve_text` takes a pair;
    `is_pair` overrides (default: a pair, unless the task is single-sentence).
    `max_query_length` (SQuAD) and `max_qa_length` (multiple choice: the option's last
    pieces, capped at `max_seq_length - 3`) pack `serve_text` as the kind's records;
    `word_split` (token_classifier: "whitespace" or "characters", see
    `data.ner.split_words`) cuts its raw text into words as the training data's were.
    `version` defaults to 1 + the largest existing integer version; an existing version
    directory raises `ExportError` before anything is written.
    With `warmup_requests` (and `albert_tf.export.warmup` with the
    tensorflow-serving-api package available) a `serving_default` warmup request for TF
    Serving goes to `assets.extra/tf_serving_warmup_requests`.
    `serving_precision` "bfloat16" exports a mixed_bfloat16 copy of the model
    (`in_serving_precision`); export_info.json records the precision and the environment
    to serve it in (`SERVING_ENVIRONMENTS`, logged too).
    `long_text` "windows" (the classifier, regression, multi-label and multiple-choice
    kinds, as a run with `--long_text=windows`): `serve_text` reads a text (a context)
    longer than
    `max_seq_length` whole, in windows every `window_stride` pieces (None: half the
    window) as the run's records do, runs the model on all windows of the request at
    once and answers each text with its windows' outputs pooled as the run pools them
    (the kind's `window_pooling`); export_info.json records it.
    """
    entry = serving_kind(kind)
    _check_arguments(entry, model, spm_model_file=spm_model_file, vocab_file=vocab_file,
                     max_seq_length=max_seq_length, max_qa_length=max_qa_length,
                     word_split=word_split)
    labels, is_pair = _labels_and_pairing(entry, model, labels, task_name, is_pair)
    # The records refuse a longer one; here the option then fills the whole input.
    max_qa_length = min(max_qa_length, packing.segment_budget(max_seq_length))
    _check_windows(entry, long_text, window_stride, max_seq_length, is_pair,
                   max_qa_length)
    final_dir = check_export_dir(export_dir, version)
    model = in_serving_precision(model, serving_precision)
    settings = TextSettings(
        max_seq_length=max_seq_length, is_pair=is_pair, max_query_length=max_query_length,
        max_qa_length=max_qa_length,
        num_choices=getattr(model, "num_choices", None), word_split=word_split,
        long_text=long_text, window_stride=window_stride)
    tokenizer = _build_tokenizer(entry, spm_model_file, vocab_file, do_lower_case)
    module = ServingModule(model, entry, tokenizer, settings, labels=labels)
    if entry.reusable:
        add_reusable_api(module)
    signatures = _trace_signatures(module)

    with fileio.atomic_directory(final_dir) as temp_dir:
        with real_tokens.inference_graph():
            tf.saved_model.save(module, temp_dir, signatures=signatures)
        warmup = warmup_requests and _write_warmup(temp_dir, module)
        _write_extras(temp_dir, model, labels, _export_info(
            module, signatures, warmup=warmup, do_lower_case=do_lower_case,
            serving_precision=serving_precision,
            task_name=task_name, labels=labels,
            tokenizer_name=("sentencepiece" if spm_model_file else
                            "wordpiece" if vocab_file else None)))
        if os.path.exists(final_dir):
            raise ExportError(f"{final_dir} appeared during the export; not overwritten")
    environment = SERVING_ENVIRONMENTS[serving_precision]
    if environment:
        logging.info("serve %s in a process with the environment %s (export_info.json's "
                     "serving_environment)", final_dir,
                     " ".join(f"{k}={v}" for k, v in environment.items()))
    return final_dir
