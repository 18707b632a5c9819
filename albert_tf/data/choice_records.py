"""Multiple-choice records, whatever the data: one `[CLS] context [SEP] ending [SEP]`
per choice, as the original ALBERT `race_utils.py` packs RACE.

A `ChoiceExample` is a context and its endings (question + option, the option in place
of the question's `_` blank when it has one: `make_ending`). Each ending keeps its last
`max_qa_length` tokens and the context what still fits (`packing.choice_lengths`); the
choices are packed as `[num_choices, max_seq_length]` (flattened in the TFRecord, as the
original writes them; `[B, num_choices, S]` once batched). An example with fewer endings
than `num_choices` (C3's 2 or 3) is padded with absent choices: all zeros, input_mask
included, which `AlbertMultipleChoice` never predicts.

The readers are `albert_tf.data.race` (RACE's release) and
`albert_tf.data.multiple_choice` (C3, SWAG, JSON lines).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from albert_tf import names, packing
from albert_tf.data import records, report
from albert_tf.data.errors import DataError
from albert_tf.data.records import InputFeatures
from albert_tf.tokenization import CLS, SEP

# The original run_race.py's default (RACE's four choices: `race.NUM_CHOICES`).
DEFAULT_MAX_QA_LENGTH = 128
DEFAULT_NUM_CHOICES = 4


class ChoiceDataError(DataError):
    """Multiple-choice data that cannot be used (nothing valid left in a file, an
    example with more endings than the task's choices)."""


@dataclasses.dataclass
class ChoiceExample:
    """One question: the context and its endings (question + option texts)."""

    example_id: str
    context: str
    endings: list[str]   # 1 to the task's num_choices texts (RACE: always 4)
    label: int           # the right ending's index (RACE: 0-3 for A-D); -1: not known


def make_ending(question: str, option: str) -> str:
    """The option in place of every `_` of the question, else question + " " + option."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    if max_qa_length < 1:
        raise ValueError(f"max_qa_length must be positive, got {max_qa_length}")
    if packing.segment_budget(max_seq_length) < max_qa_length:
        raise ValueError(f"max_seq_length ({max_seq_length}) must leave room for "
                         f"[CLS], 2 x [SEP] and max_qa_length ({max_qa_length}) tokens")


def convert_single_example(example: ChoiceExample, max_seq_length: int, max_qa_length: int,
                           tokenizer, num_choices: int = DEFAULT_NUM_CHOICES) -> InputFeatures:
    """`num_choices` `[CLS] context [SEP] ending [SEP]` sequences, each of
    `max_seq_length` (see the module's docstring). Counted where records are being
    written (`albert_tf.data.report.truncation_counter`)."""
    check_lengths(max_seq_length, max_qa_length)
    if not 1 <= len(example.endings) <= num_choices:
        raise ChoiceDataError(f"example {example.example_id} has {len(example.endings)} "
                              f"endings, expected 1 to {num_choices}")
    context = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.context))
    cls_id, sep_id = tokenizer.special_id(CLS), tokenizer.special_id(SEP)
    sequences = {name: [] for name in names.RECORD_SEQUENCES}  # [num_choices][S] each
    # (whole, kept) of each choice's context and option, as --max_seq_length cuts them:
    # the context (the option's cut to its last max_qa_length is its own limit's)
    lengths = []
    for ending in example.endings:
        option = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(ending))
        context_length, option_length = packing.choice_lengths(
            len(context), len(option), max_seq_length, max_qa_length)
        lengths.append(((len(context), option_length), (context_length, option_length)))
        packed = names.to_record_features(packing.pack(
            [context[:context_length], option[len(option) - option_length:]],
            max_seq_length, cls_id=cls_id, sep_id=sep_id))
        for name, choices in sequences.items():
            choices.append(packed[name].tolist())
    for choices in sequences.values():
        choices += [[0] * max_seq_length] * (num_choices - len(example.endings))
    counter = report.truncation_counter()
    if counter is not None:
        counter.add(max_seq_length, lengths)
    return InputFeatures(*(sequences[n] for n in names.RECORD_SEQUENCES), example.label)


def write_examples(examples: Sequence[ChoiceExample], max_seq_length: int,
                   max_qa_length: int, tokenizer, output_file,
                   num_choices: int = DEFAULT_NUM_CHOICES) -> int:
    """Writes the examples' features to `output_file` (atomically); returns how many."""
    check_lengths(max_seq_length, max_qa_length)
    return records.write_records(output_file, (
        convert_single_example(e, max_seq_length, max_qa_length, tokenizer,
                               num_choices).to_record()
        for e in examples))


def record_spec(max_seq_length: int, num_choices: int = DEFAULT_NUM_CHOICES) -> dict:
    """The parsing spec: sequences `[num_choices, max_seq_length]`, int64 labels."""
    return records.fixed_length_spec(max_seq_length, {
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }, sequence_shape=(num_choices,))


def choice_dataset(files, max_seq_length: int, batch_size: int, *, training: bool,
                   seed: int | None = None, drop_remainder: bool = False,
                   bucket_boundaries: list[int] | None = None,
                   num_choices: int = DEFAULT_NUM_CHOICES, **kwargs) -> tf.data.Dataset:
    """Batches of multiple-choice records: sequences `[B, num_choices, L]` with L the
    batch's longest."""
    return records.fine_tuning_dataset(
        files, record_spec(max_seq_length, num_choices), batch_size, training=training,
        seed=seed, drop_remainder=drop_remainder, bucket_boundaries=bucket_boundaries,
        **kwargs)
