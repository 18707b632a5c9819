"""The serving kinds, each described once: what `albert_tf.export.serving` reads.

A kind says which Keras model it serves and everything its signatures differ in:

- `outputs`: the model outputs the signatures return (those the model has: a
  regression classifier has no `probabilities`);
- `text_specs` / `pack_text`: the string inputs of `serve_text` and how they become
  model inputs (`albert_tf.export.serving_text`); `lite_pack_text`: the same packing
  in LiteRT's ops (`albert_tf.export.tflite_text`), where a LiteRT file of the kind
  takes raw text too;
- `labels`: what `assets.extra/labels.txt` names, if anything; `label_output`: the
  output of `serve_text` that names each prediction with its label (NER's `tags`);
- `model_info` / `text_info`: what the kind adds to `export_info.json`, read from the
  model and from the `TextSettings`;
- `reusable`: the export is also a Reusable SavedModel that `hub.KerasLayer` fine-tunes
  (`albert_tf.export.reusable`);
- `checkpoint_arguments`: model arguments kept beside a checkpoint (multi-label's
  tuned threshold), for an export made from the checkpoint;
- `window_pooling`: how `serve_text` pools the windows of a long text
  (`long_text="windows"`: the classifier's, regression's, multi-label's and multiple
  choice's).

Its inputs are its model's (`AlbertModel.extra_inputs`, `per_choice`,
`input_signature()`): `serving_default` takes them, and `serve_examples` reads the
extra ones from records of the same name.

A task names its kinds in `Task.serving_kinds` (a task module of yours, its own), each
beside its model; `serving_kinds()` finds every kind by name. `ENCODER` is the one this
layer defines: the encoder of any model.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

from albert_tf import names
from albert_tf.export import serving_text, tflite_text
from albert_tf.modeling import AlbertEncoder
from albert_tf.modeling.base import ExtraInput


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
    model_arguments: tuple[str, ...] = ()   # build_model arguments the model needs
    labels: LabelRule | None = None
    model_info: tuple[str, ...] = ()        # model attributes in export_info.json
    text_info: tuple[str, ...] = ()         # TextSettings fields in export_info.json
    text_offsets: bool = False              # serve_text needs piece offsets (SentencePiece)
    min_length: Callable[[object], int] = lambda model: 1  # shortest input the model takes
    label_output: str | None = None         # serve_text: the predictions' label names
    reusable: bool = False                  # also TF Hub's Reusable SavedModel API
    # (the checkpoint's directory, the export's given model arguments) -> model arguments
    checkpoint_arguments: Callable[[str, dict], dict] | None = None
    # `pack_text` in LiteRT's ops (`tflite_text.pack_sentences`, ...): a LiteRT file of
    # the kind takes raw text too. None: token ids only (SQuAD's offsets, multiple
    # choice's blanks, NER's words need string ops LiteRT has no kernels for).
    lite_pack_text: Callable[..., serving_text.PackedText] | None = None
    # model -> its `sentence_records.WindowPooling`: the kind's `serve_text` reads a
    # long text in windows (`long_text="windows"`) and pools their outputs so, as the
    # run that trained it does. None: the kind cuts a text (its own windows, or none).
    window_pooling: Callable[[object], object] | None = None

    @property
    def extra_inputs(self) -> tuple[ExtraInput, ...]:
        return self.model_class.extra_inputs

    @property
    def per_choice(self) -> bool:
        return self.model_class.per_choice

    @property
    def input_names(self) -> tuple[str, ...]:
        """The model inputs, in the order of `serving_default`'s arguments."""
        return names.MODEL_INPUTS + tuple(x.name for x in self.extra_inputs)


# The encoder of any model: every checkpoint has one. The task models' kinds are their
# tasks' (`albert_tf.tasks`).
ENCODER = ServingKind(
    "encoder", AlbertEncoder, (names.POOLED_OUTPUT, names.SEQUENCE_OUTPUT),
    serving_text.sentence_specs, serving_text.pack_sentences, reusable=True,
    lite_pack_text=tflite_text.pack_sentences)

# Every kind by name: `albert_tf.tasks.serving_kinds`, which the package hands over when
# imported (`set_kind_finder`), so that the export layer names no task.
_kind_finder = None


def set_kind_finder(find) -> None:
    global _kind_finder
    _kind_finder = find


def serving_kinds() -> dict[str, ServingKind]:
    """Every serving kind by name: the encoder's and those of the registered tasks."""
    if _kind_finder is None:
        return {ENCODER.name: ENCODER}
    return _kind_finder()
