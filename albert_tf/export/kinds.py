"""The serving kinds, each described once: what `albert_tf.export.serving` reads.

A kind says which Keras model it serves and everything its signatures differ in:

- `outputs`: the model outputs the signatures return (those the model has: a
  regression classifier has no `probabilities`);
- `extra_inputs`: model inputs beside the three sequences (`names.MODEL_INPUTS`), with
  their dtype and the value that pads them (`serving_default` takes them, and
  `serve_examples` reads them from records of the same name);
- `per_choice`: sequences [B, num_choices, S] instead of [B, S];
- `text_specs` / `pack_text`: the string inputs of `serve_text` and how they become
  model inputs (`albert_tf.export.serving_text`);
- `labels`: what `assets.extra/labels.txt` names, if anything; `label_output`: the
  output of `serve_text` that names each prediction with its label (NER's `tags`);
- `model_info` / `text_info`: what the kind adds to `export_info.json`, read from the
  model and from the `TextSettings`;
- `reusable`: the export is also a Reusable SavedModel that `hub.KerasLayer` fine-tunes
  (`albert_tf.export.reusable`);
- `checkpoint_arguments`: model arguments kept beside a checkpoint (multi-label's
  tuned threshold), for an export made from the checkpoint.

`SERVING_KINDS` holds the kinds of the models in `albert_tf.modeling`; a task names its
kinds in `Task.serving_kinds` (a task module of yours, its own), and
`albert_tf.tasks.serving_kinds()` finds every kind by name.
"""

from __future__ import annotations

import dataclasses
import string
from typing import Callable

import numpy as np
import tensorflow as tf

from albert_tf import modeling, names
from albert_tf.export import serving_text


@dataclasses.dataclass(frozen=True)
class ExtraInput:
    """A model input beside the three sequences. `per_position`: one value per sequence
    position (padded with the sequences), else its own length (`masked_lm_positions`).
    `warmup`: its value in the warmup request, from that request's input_mask [1, L]."""

    name: str                # the model input, and the record feature of the same name
    dtype: tf.DType
    pad_value: int           # what positions past an example's end hold
    per_position: bool
    warmup: Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """labels.txt: one label per output, counted by the model's `count_attribute`;
    `default(i)` names output i when no labels are given. With `none_for_one`, a single
    output is a regression: no labels."""

    count_attribute: str
    default: Callable[[int], str]
    none_for_one: bool = False


@dataclasses.dataclass(frozen=True)
class ServingKind:
    name: str
    model_class: type
    outputs: tuple[str, ...]
    text_specs: Callable[[serving_text.TextSettings], list[tf.TensorSpec]]
    pack_text: Callable[..., serving_text.PackedText]
    extra_inputs: tuple[ExtraInput, ...] = ()
    per_choice: bool = False
    model_arguments: tuple[str, ...] = ()   # build_model arguments the model needs
    labels: LabelRule | None = None
    model_info: tuple[str, ...] = ()        # model attributes in export_info.json
    text_info: tuple[str, ...] = ()         # TextSettings fields in export_info.json
    text_offsets: bool = False              # serve_text needs piece offsets (SentencePiece)
    min_length: Callable[[object], int] = lambda model: 1  # shortest input the model takes
    label_output: str | None = None         # serve_text: the predictions' label names
    reusable: bool = False                  # also TF Hub's Reusable SavedModel API
    # (checkpoint path, the export's given model arguments) -> model arguments
    checkpoint_arguments: Callable[[str, dict], dict] | None = None

    @property
    def input_names(self) -> tuple[str, ...]:
        """The model inputs, in the order of `serving_default`'s arguments."""
        return names.MODEL_INPUTS + tuple(x.name for x in self.extra_inputs)


def _p_mask_warmup(mask: np.ndarray) -> np.ndarray:
    p_mask = (1 - mask).astype(np.float32)  # [1, L]: 1 past the end ...
    p_mask[0, 0] = 0  # ... and an answer possible at [CLS] (no answer)
    return p_mask


# SQuAD v2.0: 1 where no answer may be; padding positions never hold one.
P_MASK = ExtraInput(names.P_MASK, tf.float32, pad_value=1, per_position=True,
                    warmup=_p_mask_warmup)
MASKED_LM_POSITIONS = ExtraInput(names.MASKED_LM_POSITIONS, tf.int32, pad_value=0,
                                 per_position=False,
                                 warmup=lambda mask: np.zeros([1, 1], np.int32))

_CLASSIFIER_OUTPUTS = (names.LOGITS, names.PROBABILITIES, names.PREDICTIONS)


def _choice_letter(i: int) -> str:
    return string.ascii_uppercase[i] if i < 26 else str(i)


SERVING_KINDS: dict[str, ServingKind] = {kind.name: kind for kind in (
    ServingKind(
        "classifier", modeling.AlbertClassifier, _CLASSIFIER_OUTPUTS,
        serving_text.sentence_specs, serving_text.pack_sentences,
        model_arguments=("num_labels",),
        labels=LabelRule("num_labels", str, none_for_one=True),
        model_info=("num_labels",)),
    ServingKind(
        "multiple_choice", modeling.AlbertMultipleChoice, _CLASSIFIER_OUTPUTS,
        serving_text.choice_specs, serving_text.pack_choices,
        per_choice=True, model_arguments=("num_choices",),
        labels=LabelRule("num_choices", _choice_letter),
        model_info=("num_choices",), text_info=("max_qa_length",)),
    ServingKind(
        "squad_v1", modeling.AlbertSquadV1, (names.START_LOGITS, names.END_LOGITS),
        serving_text.squad_specs, serving_text.pack_squad,
        text_info=("max_query_length",), text_offsets=True),
    ServingKind(
        "squad_v2", modeling.AlbertSquadV2, names.SQUAD_V2_OUTPUTS,
        serving_text.squad_specs, serving_text.pack_squad,
        extra_inputs=(P_MASK,),
        model_info=("start_n_top", "end_n_top"), text_info=("max_query_length",),
        text_offsets=True,
        # The beam takes the top start_n_top / end_n_top positions.
        min_length=lambda model: max(model.start_n_top, model.end_n_top)),
    ServingKind(
        "token_classifier", modeling.AlbertTokenClassifier, _CLASSIFIER_OUTPUTS,
        serving_text.word_specs, serving_text.pack_words,
        model_arguments=("num_labels",),
        labels=LabelRule("num_labels", lambda i: f"LABEL_{i}"),
        model_info=("num_labels",), text_info=("word_split",), label_output=names.TAGS),
    ServingKind(
        "encoder", modeling.AlbertEncoder, (names.POOLED_OUTPUT, names.SEQUENCE_OUTPUT),
        serving_text.sentence_specs, serving_text.pack_sentences, reusable=True),
    ServingKind(
        "mlm", modeling.AlbertPretrainer, (names.MLM_LOGITS, names.SOP_LOGITS),
        serving_text.sentence_specs, serving_text.pack_sentences_for_mlm,
        extra_inputs=(MASKED_LM_POSITIONS,), reusable=True),
)}
KINDS = tuple(SERVING_KINDS)  # the kinds of the models in albert_tf.modeling
# The encoder of any model: every checkpoint has one.
ENCODER = SERVING_KINDS["encoder"]
