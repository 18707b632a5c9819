"""Multiple-choice records, whatever the data: one `[CLS] context [SEP] ending [SEP]`
per choice, as the original ALBERT `race_utils.py` packs RACE.

A `ChoiceExample` is a context and its endings (question + option, the option in place
of the question's `_` blank when it has one: `make_ending`). Each ending keeps its last
`max_qa_length` tokens and the context what still fits (`packing.choice_lengths`); the
choices are packed as `[num_choices, max_seq_length]` (flattened in the TFRecord, as the
original writes them; `[B, num_choices, S]` once batched). An example with fewer endings
than `num_choices` (C3's 2 or 3) is padded with absent choices: all zeros, input_mask
included, which `AlbertMultipleChoice` never predicts.

With `--long_text=windows` (`LongText`) the context is read whole instead, in windows
(`convert_example_windows`, by the rules of `albert_tf.packing`: `choice_window`,
`window_spans`): a record per window, each with all the question's choices, its label
and `example_index`, the question's place in its split; the task pools the model's
outputs on them per question (`sentence_records.pool_windows`).

The readers are `albert_tf.data.race` (RACE's release) and
`albert_tf.data.multiple_choice` (C3, SWAG, JSON lines).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import names, packing
from albert_tf.data import records, report
from albert_tf.data.errors import DataError
from albert_tf.data.records import InputFeatures
from albert_tf.data.sentence_records import LongText
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


def _checked_ids(example: ChoiceExample, max_seq_length: int, max_qa_length: int,
                 tokenizer, num_choices: int) -> tuple[list[int], list[list[int]]]:
    """The ids of the example's context and of each ending, its lengths checked."""
    check_lengths(max_seq_length, max_qa_length)
    if not 1 <= len(example.endings) <= num_choices:
        raise ChoiceDataError(f"example {example.example_id} has {len(example.endings)} "
                              f"endings, expected 1 to {num_choices}")

    def ids(text):
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    return ids(example.context), [ids(ending) for ending in example.endings]


def _packed_choices(pairs, max_seq_length: int, tokenizer, num_choices: int) -> list:
    """Each (context ids, ending ids), already cut to fit, packed as
    `[CLS] context [SEP] ending [SEP]`, the absent choices all zeros: the record
    sequences, [num_choices][S] each, in `names.RECORD_SEQUENCES` order."""
    cls_id, sep_id = tokenizer.special_id(CLS), tokenizer.special_id(SEP)
    sequences = {name: [] for name in names.RECORD_SEQUENCES}  # [num_choices][S] each
    for context, ending in pairs:
        packed = names.to_record_features(packing.pack(
            [context, ending], max_seq_length, cls_id=cls_id, sep_id=sep_id))
        for name, choices in sequences.items():
            choices.append(packed[name].tolist())
    for choices in sequences.values():
        choices += [[0] * max_seq_length] * (num_choices - len(pairs))
    return [sequences[n] for n in names.RECORD_SEQUENCES]


def _count(max_seq_length: int, lengths, windows: int | None = None) -> None:
    counter = report.truncation_counter()
    if counter is not None:
        counter.add(max_seq_length, lengths, windows=windows)


def convert_single_example(example: ChoiceExample, max_seq_length: int, max_qa_length: int,
                           tokenizer, num_choices: int = DEFAULT_NUM_CHOICES) -> InputFeatures:
    """`num_choices` `[CLS] context [SEP] ending [SEP]` sequences, each of
    `max_seq_length` (see the module's docstring). Counted where records are being
    written (`albert_tf.data.report.truncation_counter`)."""
    context, endings = _checked_ids(example, max_seq_length, max_qa_length, tokenizer,
                                    num_choices)
    # (whole, kept) of each choice's context and option, as --max_seq_length cuts them:
    # the context (the option's cut to its last max_qa_length is its own limit's)
    pairs, lengths = [], []
    for option in endings:
        context_length, option_length = packing.choice_lengths(
            len(context), len(option), max_seq_length, max_qa_length)
        lengths.append(((len(context), option_length), (context_length, option_length)))
        pairs.append((context[:context_length], option[len(option) - option_length:]))
    sequences = _packed_choices(pairs, max_seq_length, tokenizer, num_choices)
    _count(max_seq_length, lengths)
    return InputFeatures(*sequences, example.label)


def convert_example_windows(example: ChoiceExample, example_index: int,
                            max_seq_length: int, max_qa_length: int, tokenizer,
                            num_choices: int = DEFAULT_NUM_CHOICES,
                            stride: int | None = None,
                            max_windows: int = 0) -> list[InputFeatures]:
    """`--long_text=windows`: the example's context read whole, in windows
    (`packing.choice_window` long: what `max_seq_length` leaves beside the longest
    ending as `choice_lengths` keeps it; `packing.window_spans`: every `stride`
    pieces, default half the window, cut at the tokenizer's word starts where
    possible), each a record of all its choices (`[CLS] window [SEP] ending [SEP]`, the
    ending's last `max_qa_length` pieces) with the example's label and
    `example_index`; `max_windows` of them at most (training's `--max_windows_per_text`,
    `packing.capped_windows`; 0: all). A context that fits is its one record,
    `convert_single_example`'s. Counted where records are being written, with the
    windows written: nothing is cut."""
    context, endings = _checked_ids(example, max_seq_length, max_qa_length, tokenizer,
                                    num_choices)
    kept = [packing.choice_lengths(len(context), len(option), max_seq_length,
                                   max_qa_length)[1] for option in endings]
    window = packing.choice_window(max(len(option) for option in endings),
                                   max_seq_length, max_qa_length)
    starts = tokenizer.word_start_table()[np.asarray(context, np.int64)]
    spans = packing.record_windows(starts, window, stride, max_windows)
    _count(max_seq_length, [((len(context), k), (len(context), k)) for k in kept],
           windows=len(spans))
    return [InputFeatures(*_packed_choices(
        [(context[start:start + length], option[len(option) - k:])
         for option, k in zip(endings, kept)], max_seq_length, tokenizer, num_choices),
        example.label, example_index=example_index) for start, length in spans]


def write_examples(examples: Sequence[ChoiceExample], max_seq_length: int,
                   max_qa_length: int, tokenizer, output_file,
                   num_choices: int = DEFAULT_NUM_CHOICES,
                   long_text: LongText | None = None) -> int:
    """Writes the examples' features to `output_file` (atomically), one record each, or
    with `long_text` windows one per window of its context (as many as its
    `max_windows` keeps: give a split's, `LongText.at`); returns how many records."""
    check_lengths(max_seq_length, max_qa_length)
    if long_text is not None and long_text.windows:
        features = (f for index, e in enumerate(examples) for f in convert_example_windows(
            e, index, max_seq_length, max_qa_length, tokenizer, num_choices,
            long_text.stride, long_text.max_windows))
    else:
        features = (convert_single_example(e, max_seq_length, max_qa_length, tokenizer,
                                           num_choices) for e in examples)
    return records.write_records(output_file, (f.to_record() for f in features))


def record_spec(max_seq_length: int, num_choices: int = DEFAULT_NUM_CHOICES,
                windows: bool = False) -> dict:
    """The parsing spec: sequences `[num_choices, max_seq_length]`, int64 labels (with
    `windows`, each record's `example_index`)."""
    return records.fixed_length_spec(max_seq_length, {
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
        **({names.EXAMPLE_INDEX: tf.io.FixedLenFeature([], tf.int64)} if windows else {}),
    }, sequence_shape=(num_choices,))


def choice_dataset(files, max_seq_length: int, batch_size: int, *, training: bool,
                   seed: int | None = None, drop_remainder: bool = False,
                   bucket_boundaries: list[int] | None = None,
                   num_choices: int = DEFAULT_NUM_CHOICES, windows: bool = False,
                   **kwargs) -> tf.data.Dataset:
    """Batches of multiple-choice records: sequences `[B, num_choices, L]` with L the
    batch's longest (`windows`: records of windows, their `example_index` read too)."""
    return records.fine_tuning_dataset(
        files, record_spec(max_seq_length, num_choices, windows), batch_size,
        training=training,
        seed=seed, drop_remainder=drop_remainder, bucket_boundaries=bucket_boundaries,
        **kwargs)
