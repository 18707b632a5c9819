"""The names of features, model inputs and model outputs: one table, imported everywhere.

Three vocabularies meet in this toolkit:

- record features: the names of the original google-research/albert TFRecords
  (`input_ids`, `input_mask`, `segment_ids`, ...), which `serve_examples` also reads;
- model inputs: the names the Keras models and the `serving_default` signatures take
  (`input_word_ids`, `input_mask`, `input_type_ids`: TF Model Garden's and TF-Hub's);
- model outputs: what each model returns, by head;
- the inputs and extra outputs of the `serve_text` signatures;
- the Hugging Face `transformers` class of each model.

A record feature that is also a model input has one entry in `RECORD_TO_MODEL`;
every other feature keeps its name on both sides (`p_mask`, `masked_lm_positions`).
"""

from __future__ import annotations

from typing import Mapping

# ------------------------------------------------------------------- model inputs
INPUT_WORD_IDS = "input_word_ids"
INPUT_MASK = "input_mask"
INPUT_TYPE_IDS = "input_type_ids"
# The three sequences every model takes, in the order of the serving signatures.
MODEL_INPUTS = (INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS)

# ---------------------------------------------------------------- record features
INPUT_IDS = "input_ids"
SEGMENT_IDS = "segment_ids"
# The three sequences of every original fine-tuning and pretraining record.
RECORD_SEQUENCES = (INPUT_IDS, INPUT_MASK, SEGMENT_IDS)
RECORD_TO_MODEL = {INPUT_IDS: INPUT_WORD_IDS, INPUT_MASK: INPUT_MASK,
                   SEGMENT_IDS: INPUT_TYPE_IDS}
MODEL_TO_RECORD = {model: record for record, model in RECORD_TO_MODEL.items()}

# Features with the same name in records and model inputs.
P_MASK = "p_mask"                        # SQuAD: 1 where no answer may be
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"  # the SOP label in ALBERT's records
TOKEN_BOUNDARY = "token_boundary"
LABEL_IDS = "label_ids"
IS_REAL_EXAMPLE = "is_real_example"
# A window of a long text (`--long_text=windows`): the place of its example in its split.
EXAMPLE_INDEX = "example_index"
# Its weight in the training loss (`--window_weight=inverse`: 1 / its example's windows).
WINDOW_WEIGHT = "window_weight"
# SQuAD records (the original run_squad_v1.py / run_squad_v2.py FeatureWriter).
UNIQUE_IDS = "unique_ids"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"

# ------------------------------------------------------------------ model outputs
SEQUENCE_OUTPUT = "sequence_output"
POOLED_OUTPUT = "pooled_output"
LOGITS = "logits"
PROBABILITIES = "probabilities"
PREDICTIONS = "predictions"
START_LOGITS = "start_logits"
END_LOGITS = "end_logits"
MLM_LOGITS = "mlm_logits"
# A task model's hidden states, each layer pass's output, where asked for
# (`AlbertTaskModel.hidden_states_output`: distillation of hidden states).
HIDDEN_STATES = "hidden_states"
# ... and the attention scores of some layer passes (`attention_layers_output`).
ATTENTION_SCORES = "attention_scores"
SOP_LOGITS = "sop_logits"
# ALBERT's SQuAD v2.0 head (beam search over start and end positions).
SQUAD_V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                    "end_top_index", "cls_logits")


# ------------------------------------------------------------- serve_text signatures
# Its string inputs: a sentence or pair, or SQuAD's question and context.
TEXT_A = "text_a"
TEXT_B = "text_b"
QUESTION = "question"
CONTEXT = "context"
# What SQuAD's serve_text returns beside the packed inputs and the model outputs: where
# the context's first piece is, and each position's code points in the context.
CONTEXT_START = "context_start"
TOKEN_START_CHAR = "token_start_char"
TOKEN_END_CHAR = "token_end_char"
# Token classification (NER): the raw text, and per position whether it holds a word's
# first piece (the one that carries the word's tag) and the tag's name.
TEXT = "text"
# Multiple choice: the choices of each question, [B, N] ("" where a row has fewer).
CHOICES = "choices"
WORD_START = "word_start"
TAGS = "tags"
# A Keras text model's: the input position of each word's first piece (-1: none).
WORD_POSITIONS = "word_positions"
# A Keras text model's that reads long texts in windows: text b's windows are the rows
# window_splits[b] to window_splits[b + 1] of its inputs (`packing.pack_windows_tf`).
WINDOW_SPLITS = "window_splits"

# ------------------------------------------------ Hugging Face `transformers` classes
# The class with the same weights as each of our models (`AlbertModel.hf_architecture`;
# `albert_tf.checkpoints.huggingface` reads and writes them).
HF_PRETRAINING = "AlbertForPreTraining"
HF_MASKED_LM = "AlbertForMaskedLM"
HF_BASE = "AlbertModel"
HF_SEQUENCE_CLASSIFICATION = "AlbertForSequenceClassification"
HF_MULTIPLE_CHOICE = "AlbertForMultipleChoice"
HF_TOKEN_CLASSIFICATION = "AlbertForTokenClassification"
HF_QUESTION_ANSWERING = "AlbertForQuestionAnswering"


def to_model_inputs(features: Mapping) -> dict:
    """Record feature names -> model input names (`input_ids` -> `input_word_ids`,
    `segment_ids` -> `input_type_ids`); other keys pass through."""
    return {RECORD_TO_MODEL.get(k, k): v for k, v in features.items()}


def to_record_features(inputs: Mapping) -> dict:
    """Model input names -> record feature names; other keys pass through."""
    return {MODEL_TO_RECORD.get(k, k): v for k, v in inputs.items()}
