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
  tokenized in the graph with `AlbertTextTokenizer` (the Python tokenizer's ids) and
  packed with `albert_tf.packing` as the kind's records are:
    classifier: `text_a` [B] (and `text_b` [B] for pair tasks), longest-first; with
      `long_text="windows"` (also multi_label's; a run's `--long_text=windows`) each
      text whole, in the windows of the run's records, the model run on all windows
      of the request at once and each text answered by its windows' outputs pooled as
      the run pools them (one row per text; export_info.json's `long_text`,
      `window_stride`);
    multiple_choice: `context` [B], `question` [B] and `choices` [B, N] (N at most
      num_choices, "" for no choice): each ending is the question with the choice in
      its `_` blank (else question + " " + choice), keeping its last `max_qa_length`
      pieces, the context its first pieces that still fit (the multiple-choice
      records); absent choices are all zeros, which the model never predicts; with
      `long_text="windows"` each context whole, in the windows of the run's records
      (each beside all the question's choices), a question answered by the mean of
      its windows' logits (one row per question);
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
    token_classifier: `text` [B], cut into words (`word_split`: whitespace with each
      CJK character alone, or every character) and each word tokenized on its own, as
      the NER features; returns, besides the outputs, `tags` (label names), `input_mask`,
      `word_start` (1 on each word's first piece, the one whose tag is the word's) and
      `token_start_char` / `token_end_char` (the word's code points in `text`, -1 off
      the words); `data.ner.serving_entities` gives the entity spans;
    encoder: `text_a` (and `text_b`);
    mlm: `text_a` (and `text_b`); `mlm_logits` [B, S, V] is returned at EVERY
      position of the packed input (with `input_word_ids` and `input_mask`), since
      raw text cannot carry the [MASK] id: pick the positions you need.

Named outputs: classifier `logits`, `probabilities`, `predictions` (regression:
`logits`, `predictions`); multiple_choice and token_classifier the same; squad_v1 `start_logits`,
`end_logits`; squad_v2 `start_top_log_probs`, `start_top_index`, `end_top_log_probs`,
`end_top_index`, `cls_logits`; encoder `pooled_output`, `sequence_output`; mlm
`mlm_logits`, `sop_logits`.

The version directory is written under a temporary name beside it and renamed when
complete; an existing version is never overwritten (`check_export_dir` checks an
export directory before any work). `assets.extra/` holds
`albert_config.json`, `labels.txt` (classifier / multiple choice) and
`export_info.json` (kind, max_seq_length, do_lower_case, signatures,
serving_precision, the serving_environment its server process should have, ...). The
SentencePiece model (or vocabulary) is a SavedModel asset.

The package: `base` (what every export shares: `ExportError`, the version directories,
export_info.json), `kinds` (each serving kind described once, as data), `serving` (the
one `tf.Module` that reads a kind), `serving_text` (raw text -> model inputs per kind),
`savedmodel` (the export's steps), `reusable` (TF Hub's conventions: an encoder
export's `__call__` and variables for `hub.KerasLayer`, and `export_preprocessor`, its
text preprocessor SavedModel), `tflite` (`export_tflite`: the same `serving_default` as
one LiteRT file, float32, float16 or int8, with `serve_text` too on request;
`tflite_interpreter` runs it from Python), `tflite_text` (the raw text side of such a
file: the tokenizer LiteRT runs, packing in its ops).
"""

from albert_tf.export import serving_text
from albert_tf.export.base import ExportError, check_export_dir, next_version, read_export_info
from albert_tf.export.kinds import ENCODER, ExtraInput, LabelRule, ServingKind, serving_kinds
from albert_tf.export.reusable import export_preprocessor
from albert_tf.export.savedmodel import (
    DEFAULT_MAX_QA_LENGTH,
    DEFAULT_MAX_QUERY_LENGTH,
    SERVING_ENVIRONMENTS,
    SERVING_PRECISIONS,
    SIGNATURES,
    build_model,
    export_savedmodel,
    load_model_from_checkpoint,
    serving_environment_now,
    serving_kind,
)
from albert_tf.export.serving import ServingModule, warmup_inputs
from albert_tf.export.tflite import (
    TFLITE_PRECISIONS,
    export_tflite,
    read_tflite_info,
    tflite_interpreter,
)

__all__ = [
    "DEFAULT_MAX_QA_LENGTH",
    "DEFAULT_MAX_QUERY_LENGTH",
    "ENCODER",
    "SERVING_ENVIRONMENTS",
    "SERVING_PRECISIONS",
    "SIGNATURES",
    "TFLITE_PRECISIONS",
    "ExportError",
    "ExtraInput",
    "LabelRule",
    "ServingKind",
    "ServingModule",
    "build_model",
    "check_export_dir",
    "export_preprocessor",
    "export_savedmodel",
    "export_tflite",
    "load_model_from_checkpoint",
    "next_version",
    "read_export_info",
    "read_tflite_info",
    "serving_text",
    "serving_environment_now",
    "serving_kind",
    "serving_kinds",
    "tflite_interpreter",
    "warmup_inputs",
]
