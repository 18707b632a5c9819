"""SavedModel export of the ALBERT models for TF Serving (and `tf.saved_model.load`).

`export_savedmodel(model, export_dir, kind=...)` writes `<export_dir>/<version>/` with
three signatures:

- `serving_default`: int32 `input_word_ids`, `input_mask`, `input_type_ids` [B, S]
  ([B, num_choices, S] for `multiple_choice`; `squad_v2` adds float `p_mask` [B, S];
  `mlm` adds int32 `masked_lm_positions` [B, P]).
- `serve_examples`: `examples`, a string vector of serialized `tf.Example`s with the
  original TFRecord feature names (`input_ids`, `input_mask`, `segment_ids`, and
  `p_mask` / `masked_lm_positions` where the model needs them), variable-length int64
  lists padded in the graph (RACE records hold num_choices * S values per feature; S
  may differ between the examples of a request).
- `serve_text` (when a SentencePiece model or WordPiece vocabulary is given): raw text,
  tokenized and packed in the graph with `AlbertTextTokenizer` and `pack_inputs`
  (the Python tokenizer's ids; truncated to `max_seq_length`):
    classifier: `text_a` [B] (and `text_b` [B] for pair tasks);
    multiple_choice: `text_a` [B] (the passage) and `text_b` [B, num_choices]
      (question + option of each choice);
    squad_v1 / squad_v2: `question` [B] and `context` [B]: the question is cut to
      `max_query_length` pieces, the context to what remains (one window, no doc
      stride). Besides the model outputs it returns the packed `input_word_ids`,
      `input_mask`, `input_type_ids` and `p_mask` (0 on [CLS] and context pieces,
      1 elsewhere, as the original), and `context_start` [B] (int32, the position of
      the first context piece), `token_start_char` and `token_end_char` [B, S]
      (int32: `context[start:end]` is the text of the piece at each position, -1
      where the position holds no context piece; code points, as Python indexes a
      str). `evaluation.squad_postprocess.postprocess_serve_text` turns these into
      the answers `run_squad.py` gives when the context fits in one window;
    encoder: `text_a` (and `text_b`);
    mlm: `text_a` (and `text_b`); `mlm_logits` [B, S, V] is returned at EVERY
      position of the packed input (with `input_word_ids` and `input_mask`), since
      raw text cannot carry the [MASK] id: pick the positions you need.

Named outputs: classifier `logits`, `probabilities`, `predictions` (regression:
`logits`, `predictions`); multiple_choice the same; squad_v1 `start_logits`,
`end_logits`; squad_v2 `start_top_log_probs`, `start_top_index`, `end_top_log_probs`,
`end_top_index`, `cls_logits`; encoder `pooled_output`, `sequence_output`; mlm
`mlm_logits`, `sop_logits`.

The version directory is written under a temporary name beside it and renamed when
complete; an existing version is never overwritten. `assets.extra/` holds
`albert_config.json`, `labels.txt` (classifier / multiple choice) and
`export_info.json` (kind, max_seq_length, do_lower_case, signatures, ...). The
SentencePiece model (or vocabulary) is a SavedModel asset.
"""

from __future__ import annotations

import json
import os
import shutil
import string
import tempfile

import tensorflow as tf

from albert_tf import fused
from albert_tf.checkpoints import load_tf1_checkpoint
from albert_tf.config import AlbertConfig

KINDS = ("classifier", "multiple_choice", "squad_v1", "squad_v2", "encoder", "mlm")
SIGNATURES = ("serving_default", "serve_examples", "serve_text")
DEFAULT_MAX_QUERY_LENGTH = 64  # the original run_squad's --max_query_length

_OUTPUTS = {
    "classifier": ("logits", "probabilities", "predictions"),
    "multiple_choice": ("logits", "probabilities", "predictions"),
    "squad_v1": ("start_logits", "end_logits"),
    "squad_v2": ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                 "end_top_index", "cls_logits"),
    "encoder": ("pooled_output", "sequence_output"),
    "mlm": ("mlm_logits", "sop_logits"),
}


class ExportError(ValueError):
    """Bad arguments to an export (wrong model kind, an existing version, ...)."""


# ------------------------------------------------------------------ model building
def _model_class(kind: str):
    from albert_tf import modeling

    return {"classifier": modeling.AlbertClassifier,
            "multiple_choice": modeling.AlbertMultipleChoice,
            "squad_v1": modeling.AlbertSquadV1, "squad_v2": modeling.AlbertSquadV2,
            "encoder": modeling.AlbertEncoder, "mlm": modeling.AlbertPretrainer}[kind]


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ExportError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def build_model(kind: str, config: AlbertConfig, *, num_labels: int | None = None,
                num_choices: int = 4, **kwargs):
    """The Keras model of `kind` for `config` (weights created, not loaded)."""
    cls = _model_class(_check_kind(kind))
    if kind == "classifier":
        if num_labels is None:
            raise ExportError("kind 'classifier' needs num_labels (or a GLUE task_name)")
        return cls(config, num_labels=num_labels, **kwargs)
    if kind == "multiple_choice":
        return cls(config, num_choices=num_choices, **kwargs)
    return cls(config, **kwargs)


def load_model_from_checkpoint(kind: str, albert_config_file, checkpoint, *,
                               num_labels: int | None = None, num_choices: int = 4,
                               **kwargs):
    """Builds the model of `kind` from `albert_config_file` and loads the TF1 (name-based)
    `checkpoint` strictly: any model variable missing from it, or of another shape,
    raises `CheckpointError` (nothing is written). The load report is kept as
    `model.load_report`."""
    config = AlbertConfig.from_json_file(albert_config_file)
    model = build_model(kind, config, num_labels=num_labels, num_choices=num_choices,
                        **kwargs)
    model.load_report = load_tf1_checkpoint(model, checkpoint, strict=True)
    return model


# --------------------------------------------------------------------- versioning
def next_version(export_dir) -> int:
    """1 + the largest integer subdirectory of `export_dir`, else 1."""
    export_dir = os.fspath(export_dir)
    versions = []
    if os.path.isdir(export_dir):
        versions = [int(n) for n in os.listdir(export_dir)
                    if n.isdigit() and os.path.isdir(os.path.join(export_dir, n))]
    return max(versions, default=0) + 1


# ------------------------------------------------------------------ the module
def _pad_rows(sparse, default_value, dtype=tf.int32):
    return tf.cast(tf.sparse.to_dense(sparse, default_value=default_value), dtype)


class _ServingModule(tf.Module):
    """The model, its tokenizer and the signature functions."""

    def __init__(self, model, kind: str, tokenizer, *, max_seq_length: int,
                 is_pair: bool, max_query_length: int):
        super().__init__(name="albert_serving")
        self.model = model
        self.kind = kind
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.is_pair = is_pair
        self.max_query_length = max_query_length
        self.num_choices = getattr(model, "num_choices", None)
        # SQuAD v2's beam needs at least max(start_n_top, end_n_top) positions.
        self.min_length = (max(model.start_n_top, model.end_n_top)
                           if kind == "squad_v2" else 1)

    # -- the model on int inputs
    def run(self, inputs: dict) -> dict:
        if self.kind == "squad_v2":
            inputs = self._pad_to_min_length(inputs)
        outputs = self.model(inputs, training=False)
        return {name: outputs[name] for name in _OUTPUTS[self.kind] if name in outputs}

    def _pad_to_min_length(self, inputs):
        length = tf.shape(inputs["input_word_ids"])[1]
        extra = tf.maximum(self.min_length - length, 0)
        padded = {}
        for name, value in inputs.items():
            value_pad = 1 if name == "p_mask" else 0
            padded[name] = tf.pad(value, [[0, 0], [0, extra]],
                                  constant_values=tf.cast(value_pad, value.dtype))
        return padded

    # -- signature bodies
    def input_specs(self) -> list[tf.TensorSpec]:
        shape = [None, self.num_choices, None] if self.kind == "multiple_choice" \
            else [None, None]
        specs = [tf.TensorSpec(shape, tf.int32, name=n)
                 for n in ("input_word_ids", "input_mask", "input_type_ids")]
        if self.kind == "squad_v2":
            specs.append(tf.TensorSpec([None, None], tf.float32, name="p_mask"))
        if self.kind == "mlm":
            specs.append(tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions"))
        return specs

    def serving_default(self, *args):
        names = [s.name for s in self.input_specs()]
        return self.run(dict(zip(names, args)))

    def serve_examples(self, examples):
        features = {n: tf.io.VarLenFeature(tf.int64)
                    for n in ("input_ids", "input_mask", "segment_ids")}
        if self.kind == "squad_v2":
            features["p_mask"] = tf.io.VarLenFeature(tf.int64)
        if self.kind == "mlm":
            features["masked_lm_positions"] = tf.io.VarLenFeature(tf.int64)
        parsed = tf.io.parse_example(examples, features)
        names = {"input_word_ids": "input_ids", "input_mask": "input_mask",
                 "input_type_ids": "segment_ids"}
        if self.kind == "multiple_choice":
            inputs = {n: self._choices(parsed[f]) for n, f in names.items()}
        else:
            inputs = {n: _pad_rows(parsed[f], 0) for n, f in names.items()}
        if self.kind == "squad_v2":
            # Positions past an example's end are padding: no answer there.
            inputs["p_mask"] = _pad_rows(parsed["p_mask"], 1, tf.float32)
        if self.kind == "mlm":
            inputs["masked_lm_positions"] = _pad_rows(parsed["masked_lm_positions"], 0)
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
        dense = tf.cast(choices.to_tensor(default_value=0), tf.int32)
        return tf.reshape(dense, [-1, self.num_choices, tf.shape(dense)[1]])

    def _pack(self, segments):
        from albert_tf.text import pack_inputs

        t = self.tokenizer
        return pack_inputs(segments, self.max_seq_length, cls_id=t.cls_id,
                           sep_id=t.sep_id, pad_id=t.pad_id)

    def text_specs(self) -> list[tf.TensorSpec]:
        if self.kind in ("squad_v1", "squad_v2"):
            return [tf.TensorSpec([None], tf.string, name="question"),
                    tf.TensorSpec([None], tf.string, name="context")]
        if self.kind == "multiple_choice":
            return [tf.TensorSpec([None], tf.string, name="text_a"),
                    tf.TensorSpec([None, self.num_choices], tf.string, name="text_b")]
        specs = [tf.TensorSpec([None], tf.string, name="text_a")]
        if self.is_pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_b"))
        return specs

    def serve_text(self, *args):
        tokenize = self.tokenizer.tokenize
        if self.kind in ("squad_v1", "squad_v2"):
            return self._serve_squad_text(*args)
        if self.kind == "multiple_choice":
            text_a, text_b = args
            flat_a = tf.repeat(text_a, self.num_choices)  # [B * C]
            packed = self._pack([tokenize(flat_a), tokenize(tf.reshape(text_b, [-1]))])
            inputs = {n: tf.reshape(v, [tf.shape(text_a)[0], self.num_choices, -1])
                      for n, v in packed.items()}
            return self.run(inputs)
        inputs = self._pack([tokenize(t) for t in args])
        if self.kind == "mlm":
            batch, length = tf.shape(inputs["input_word_ids"])[0], \
                tf.shape(inputs["input_word_ids"])[1]
            inputs["masked_lm_positions"] = tf.tile(tf.range(length)[None], [batch, 1])
            outputs = self.run(inputs)
            outputs["input_word_ids"] = inputs["input_word_ids"]
            outputs["input_mask"] = inputs["input_mask"]
            return outputs
        return self.run(inputs)

    def _serve_squad_text(self, question, context):
        from albert_tf.text import take_first

        q = self.tokenizer.tokenize(question)
        c, c_starts, c_ends = self.tokenizer.tokenize_with_offsets(context)
        q = take_first(q, tf.minimum(q.row_lengths(), self.max_query_length))
        q_len = q.row_lengths()
        c_len = tf.minimum(c.row_lengths(),
                           tf.maximum(self.max_seq_length - 3 - q_len, 0))
        c = take_first(c, c_len)
        inputs = self._pack([q, c])  # no further truncation: q + c <= max - 3
        length = tf.shape(inputs["input_word_ids"])[1]
        positions = tf.range(length, dtype=tf.int64)[None, :]
        start = (q_len + 2)[:, None]
        in_context = tf.logical_and(positions >= start, positions < start + c_len[:, None])
        is_answer = tf.logical_or(positions == 0, in_context)
        inputs["p_mask"] = 1.0 - tf.cast(is_answer, tf.float32)
        model_inputs = dict(inputs)
        if self.kind == "squad_v1":
            model_inputs.pop("p_mask")
        outputs = self.run(model_inputs)
        outputs.update(inputs)
        outputs["context_start"] = tf.cast(q_len + 2, tf.int32)
        # Each context piece's code points in `context`, placed at its input position.
        index = tf.maximum(positions - start, 0)
        for name, offsets in (("token_start_char", c_starts), ("token_end_char", c_ends)):
            table = tf.pad(offsets.to_tensor(), [[0, 0], [0, 1]])
            index_in_row = tf.minimum(index, tf.shape(table, out_type=tf.int64)[1] - 1)
            values = tf.gather(table, index_in_row, batch_dims=1)
            outputs[name] = tf.where(in_context, values, -1)
        return outputs


# ---------------------------------------------------------------------- export
def _default_labels(kind, model, labels):
    if kind == "classifier":
        if model.num_labels == 1:
            return None
        labels = list(labels) if labels is not None else \
            [str(i) for i in range(model.num_labels)]
        if len(labels) != model.num_labels:
            raise ExportError(f"{len(labels)} labels given for a classifier of "
                              f"num_labels={model.num_labels}")
        return labels
    if kind == "multiple_choice":
        labels = list(labels) if labels is not None else \
            [string.ascii_uppercase[i] if i < 26 else str(i)
             for i in range(model.num_choices)]
        if len(labels) != model.num_choices:
            raise ExportError(f"{len(labels)} labels given for num_choices="
                              f"{model.num_choices}")
        return labels
    return None


def warmup_inputs(module: _ServingModule) -> dict:
    """A one-example `serving_default` request: [CLS] [SEP] padded to the model's
    minimum length."""
    import numpy as np

    length = max(module.min_length, 2)
    ids = np.zeros([1, length], np.int32)
    mask = np.zeros([1, length], np.int32)
    ids[0, :2] = [module.tokenizer.cls_id, module.tokenizer.sep_id] \
        if module.tokenizer is not None else [2, 3]
    mask[0, :2] = 1
    inputs = {"input_word_ids": ids, "input_mask": mask,
              "input_type_ids": np.zeros_like(ids)}
    if module.kind == "multiple_choice":
        inputs = {k: np.repeat(v[:, None], module.num_choices, axis=1)
                  for k, v in inputs.items()}
    if module.kind == "squad_v2":
        inputs["p_mask"] = (1 - mask).astype(np.float32)
        inputs["p_mask"][0, 0] = 0
    if module.kind == "mlm":
        inputs["masked_lm_positions"] = np.zeros([1, 1], np.int32)
    return inputs


def _write_warmup(version_dir, module) -> bool:
    """Writes the TF Serving warmup file when the tools for it are installed."""
    try:
        from albert_tf.serving_warmup import write_warmup_requests

        write_warmup_requests(version_dir, "serving_default", warmup_inputs(module))
    except ImportError:
        return False
    return True


def _signature_info(concrete) -> dict:
    inputs = {name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
              for name, spec in concrete.structured_input_signature[1].items()}
    outputs = {name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
               for name, spec in concrete.structured_outputs.items()}
    return {"inputs": inputs, "outputs": outputs}


def export_savedmodel(model, export_dir, *, kind: str, spm_model_file=None,
                      vocab_file=None, do_lower_case: bool = True,
                      max_seq_length: int = 512, labels=None, version: int | None = None,
                      task_name: str | None = None, is_pair: bool | None = None,
                      max_query_length: int = DEFAULT_MAX_QUERY_LENGTH,
                      warmup_requests: bool = True) -> str:
    """Writes `model` (of `kind`) as the SavedModel `<export_dir>/<version>/` and returns
    that directory. See the module docstring for the signatures.

    `task_name` (a GLUE task) gives the labels and whether `serve_text` takes a pair;
    `is_pair` overrides (default: a pair, unless the task is single-sentence).
    `version` defaults to 1 + the largest existing integer version; an existing version
    directory raises `ExportError` before anything is written.
    With `warmup_requests` (and `albert_tf.serving_warmup` with the
    tensorflow-serving-api package available) a `serving_default` warmup request for TF
    Serving goes to `assets.extra/tf_serving_warmup_requests`.
    """
    _check_kind(kind)
    cls = _model_class(kind)
    if not isinstance(model, cls):
        raise ExportError(f"kind {kind!r} needs a {cls.__name__}, got "
                          f"{type(model).__name__}")
    if spm_model_file and vocab_file:
        raise ExportError("give spm_model_file or vocab_file, not both")
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) \
            or max_seq_length < 3:
        raise ExportError(f"max_seq_length must be an integer >= 3, got {max_seq_length!r}")
    if max_seq_length > model.config.max_position_embeddings:
        raise ExportError(f"max_seq_length {max_seq_length} exceeds the model's "
                          f"max_position_embeddings {model.config.max_position_embeddings}")
    if task_name is not None:
        from albert_tf.data.glue import get_task

        task = get_task(task_name)
        if labels is None and not task.is_regression:
            labels = list(task.labels)
        if is_pair is None:
            is_pair = task.is_pair
    is_pair = True if is_pair is None else bool(is_pair)
    labels = _default_labels(kind, model, labels)

    export_dir = os.fspath(export_dir)
    if version is None:
        version = next_version(export_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ExportError(f"version must be a non-negative integer, got {version!r}")
    final_dir = os.path.join(export_dir, str(version))
    if os.path.exists(final_dir):
        raise ExportError(f"{final_dir} exists; an exported version is never overwritten")

    tokenizer = None
    if spm_model_file or vocab_file:
        from albert_tf.text import AlbertTextTokenizer

        squad = kind in ("squad_v1", "squad_v2")
        if squad and vocab_file:
            raise ExportError(
                "SQuAD exports take spm_model_file, not vocab_file: serve_text maps the "
                "answer back to the context through SentencePiece offsets (and the "
                "original reads SQuAD with a SentencePiece model only)")
        tokenizer = AlbertTextTokenizer(spm_model_file=spm_model_file,
                                        vocab_file=vocab_file, do_lower_case=do_lower_case,
                                        with_offsets=squad)
    module = _ServingModule(model, kind, tokenizer, max_seq_length=max_seq_length,
                            is_pair=is_pair, max_query_length=max_query_length)
    # Traced with plain TensorFlow ops: TF Serving runs XLA kernels on CPU only when
    # started with --xla_cpu_compilation_enabled (albert_tf.fused).
    with fused.xla_disabled():
        signatures = {
            "serving_default": tf.function(module.serving_default,
                                           input_signature=module.input_specs())
            .get_concrete_function(),
            "serve_examples": tf.function(
                module.serve_examples,
                input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
            .get_concrete_function(),
        }
        if tokenizer is not None:
            signatures["serve_text"] = tf.function(
                module.serve_text, input_signature=module.text_specs()
            ).get_concrete_function()

    os.makedirs(export_dir, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=export_dir)
    try:
        with fused.xla_disabled():
            tf.saved_model.save(module, temp_dir, signatures=signatures)
        extra = os.path.join(temp_dir, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        model.config.to_json_file(os.path.join(extra, "albert_config.json"))
        if labels is not None:
            with open(os.path.join(extra, "labels.txt"), "w", encoding="utf-8") as f:
                f.write("".join(f"{label}\n" for label in labels))
        warmup = warmup_requests and _write_warmup(temp_dir, module)
        info = {
            "warmup_requests": bool(warmup),
            "kind": kind, "max_seq_length": max_seq_length, "do_lower_case": do_lower_case,
            "task_name": task_name, "is_pair": is_pair, "labels": labels,
            "tokenizer": ("sentencepiece" if spm_model_file else
                          "wordpiece" if vocab_file else None),
            "signatures": {n: _signature_info(c) for n, c in signatures.items()},
        }
        if kind in ("classifier",):
            info["num_labels"] = model.num_labels
        if kind == "multiple_choice":
            info["num_choices"] = model.num_choices
        if kind in ("squad_v1", "squad_v2"):
            info["max_query_length"] = max_query_length
        if kind == "squad_v2":
            info["start_n_top"], info["end_n_top"] = model.start_n_top, model.end_n_top
        with open(os.path.join(extra, "export_info.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2, sort_keys=True)
            f.write("\n")
        if os.path.exists(final_dir):
            raise ExportError(f"{final_dir} appeared during the export; not overwritten")
        os.rename(temp_dir, final_dir)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    return final_dir
