"""`SquadExample`s -> `SquadFeature`s: one per paragraph window, as the original
`convert_examples_to_features`.

For each example: the question's pieces (its first `max_query_length`), the paragraph's
pieces and their alignment to its characters (`alignment.py`), the training answer's
first and last piece, windows of the pieces every `doc_stride`, and per window
`[CLS] question [SEP] window [SEP]` (`albert_tf.packing`), `p_mask` and the answer's
positions in the input.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterator, Sequence

import numpy as np
from absl import logging

from albert_tf import names, packing, tokenization
from albert_tf.data.report import SkipLog
from albert_tf.data.squad.alignment import ParagraphAlignment, align_paragraph
from albert_tf.data.squad.examples import SquadError, SquadExample

FIRST_UNIQUE_ID = 1_000_000_000


@dataclasses.dataclass
class SquadFeature:
    """One window of one example: the model's inputs, the training labels, and what
    post-processing needs to map predicted positions back to paragraph text.

    Positions (`start_position`, `end_position`, arguments of `span_text` and
    `is_max_context`) index the input sequence `[CLS] question [SEP] window [SEP]`; the
    window's first piece is at `doc_offset` (= question length + 2).
    """

    unique_id: int
    example_index: int
    qas_id: str
    doc_span_index: int
    doc_span_start: int                  # the window's first piece among the paragraph's
    doc_offset: int
    tok_start_to_orig_index: list[int]   # [doc_length] first character of each piece
    tok_end_to_orig_index: list[int]     # [doc_length] last character of each piece
    token_is_max_context: list[bool]     # [doc_length]
    input_ids: np.ndarray                # [max_seq_length] int32
    input_mask: np.ndarray
    segment_ids: np.ndarray
    p_mask: np.ndarray
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False

    @property
    def doc_length(self) -> int:
        return len(self.tok_start_to_orig_index)

    def in_window(self, position: int) -> bool:
        """Whether input `position` holds a paragraph piece."""
        return 0 <= position - self.doc_offset < self.doc_length

    def is_max_context(self, position: int) -> bool:
        """The original's `token_is_max_context.get(position, False)`."""
        return self.in_window(position) and self.token_is_max_context[position - self.doc_offset]


def span_text(feature: SquadFeature, paragraph_text: str, start: int, end: int) -> str:
    """The paragraph text of input positions start..end (inclusive), as the original's
    prediction writer extracts it: from the first character of the start piece to the
    last character of the end piece, stripped of surrounding whitespace."""
    if not (feature.in_window(start) and feature.in_window(end) and start <= end):
        raise ValueError(
            f"positions {start}..{end} are not a span of the paragraph window "
            f"{feature.doc_offset}..{feature.doc_offset + feature.doc_length - 1} "
            f"of feature {feature.unique_id}")
    first = feature.tok_start_to_orig_index[start - feature.doc_offset]
    last = feature.tok_end_to_orig_index[end - feature.doc_offset]
    return paragraph_text[first:last + 1].strip()


# ---------------------------------------------------------------------------- windows
def doc_spans(num_pieces: int, max_tokens_for_doc: int, doc_stride: int
              ) -> list[tuple[int, int]]:
    """The original's sliding windows over a paragraph: (start, length) pairs, each
    window starting `doc_stride` pieces after the previous, the last one ending at the
    paragraph's end."""
    spans = []
    start = 0
    while start < num_pieces:
        length = min(num_pieces - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def max_context_span(spans: Sequence[tuple[int, int]], position: int) -> int | None:
    """The window in which paragraph piece `position` has the most context: the largest
    min(left, right) context plus 0.01 x window length, the first such window on a tie."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index


def window_p_mask(max_seq_length: int, doc_offset: int, window_length: int) -> np.ndarray:
    """SQuAD's p_mask [max_seq_length] int32: 0 where an answer may be ([CLS] and the
    window's pieces), 1 on the question, both [SEP] and the padding."""
    mask = np.ones(max_seq_length, np.int32)
    mask[0] = 0
    mask[doc_offset:doc_offset + window_length] = 0
    return mask


# --------------------------------------------------------------------------- settings
def validate_settings(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    if max_seq_length <= max_query_length + 3:
        raise SquadError(f"max_seq_length ({max_seq_length}) must be greater than "
                         f"max_query_length ({max_query_length}) + 3")
    if doc_stride < 1 or max_query_length < 1:
        raise SquadError(f"doc_stride ({doc_stride}) and max_query_length "
                         f"({max_query_length}) must be positive")


def sentencepiece_model(tokenizer):
    """The tokenizer's SentencePiece model; the alignment works on its pieces."""
    if getattr(tokenizer, "sp_model", None) is None:
        raise SquadError("SQuAD features need a SentencePiece tokenizer (spm_model_file), "
                         "as the original squad_utils does")
    return tokenizer.sp_model


# ------------------------------------------------------------------ examples -> features
def iter_features(examples: Sequence[SquadExample], tokenizer, max_seq_length: int,
                  doc_stride: int, max_query_length: int, is_training: bool, *,
                  do_lower_case: bool | None = None,
                  first_unique_id: int = FIRST_UNIQUE_ID) -> Iterator[SquadFeature]:
    """Examples -> features, one per window, in order: the original
    `convert_examples_to_features`. Examples whose paragraph cannot be aligned to its
    pieces (the original's "MISMATCH DETECTED") yield nothing and are logged."""
    validate_settings(max_seq_length, doc_stride, max_query_length)
    sp_model = sentencepiece_model(tokenizer)
    lower = tokenizer.do_lower_case if do_lower_case is None else do_lower_case
    windows = _Windows(max_seq_length, doc_stride, max_query_length, is_training,
                       pack=functools.partial(
                           packing.pack, max_seq_length=max_seq_length,
                           cls_id=sp_model.PieceToId(tokenization.CLS),
                           sep_id=sp_model.PieceToId(tokenization.SEP)))
    alignments: dict[str, ParagraphAlignment | None] = {}
    skips = SkipLog("SQuAD question")  # converted after the run's report: warns itself
    unique_id = first_unique_id
    num_positive = num_negative = 0
    for example_index, example in enumerate(examples):
        if is_training and example.start_position is None:
            raise SquadError(f"question {example.qas_id!r} has no training answer: read "
                             "the file with is_training=True")
        if example.paragraph_text not in alignments:
            alignments[example.paragraph_text] = align_paragraph(
                example.paragraph_text, sp_model, lower)
        alignment = alignments[example.paragraph_text]
        if alignment is None:
            skips.skip(f"question id {example.qas_id!r}", "pieces not aligned",
                       "the paragraph's pieces do not align with its text")
            continue
        answer = _answer_pieces(example, alignment) if is_training else None
        if answer is not None and answer[0] > answer[1]:
            skips.skip(f"question id {example.qas_id!r}", "answer not in pieces",
                       "the answer does not map to pieces")
            continue
        skips.keep()
        question_ids = [sp_model.PieceToId(p) for p in tokenization.encode_pieces(
            sp_model, tokenization.preprocess_text(example.question_text, lower=lower))]
        for feature in windows.features(example, example_index, alignment, question_ids,
                                        answer, unique_id):
            yield feature
            unique_id += 1
            num_negative += feature.is_impossible
            num_positive += not feature.is_impossible
    skips.summary()
    logging.info("SQuAD features: %d = %d with an answer + %d without",
                 num_positive + num_negative, num_positive, num_negative)


def _answer_pieces(example: SquadExample, alignment: ParagraphAlignment
                   ) -> tuple[int, int] | None:
    """The first and last piece of the training answer; None for an unanswerable
    question. The first can come after the last: the answer has no piece of its own."""
    if example.is_impossible:
        return None
    answer_end = example.start_position + len(example.orig_answer_text) - 1
    return alignment.char_span_to_pieces(example.start_position, answer_end)


@dataclasses.dataclass(frozen=True)
class _Windows:
    """Cuts one example's paragraph into windows and packs each with the question."""

    max_seq_length: int
    doc_stride: int
    max_query_length: int
    is_training: bool
    pack: Callable[[Sequence[Sequence[int]]], dict[str, np.ndarray]]

    def features(self, example: SquadExample, example_index: int,
                 alignment: ParagraphAlignment, question_ids: list[int],
                 answer: tuple[int, int] | None, first_unique_id: int
                 ) -> Iterator[SquadFeature]:
        # The window size is what max_seq_length leaves beside the question (cut to
        # max_query_length), [CLS] and two [SEP]; no window is longer than the paragraph.
        query_length, window_size = packing.query_context_lengths(
            len(question_ids), len(alignment.piece_ids), self.max_seq_length,
            self.max_query_length)
        query_ids = question_ids[:query_length]
        doc_offset = query_length + 2  # [CLS] question [SEP]
        spans = doc_spans(len(alignment.piece_ids), window_size, self.doc_stride)
        for span_index, (span_start, span_length) in enumerate(spans):
            window = slice(span_start, span_start + span_length)
            inputs = names.to_record_features(
                self.pack([query_ids, alignment.piece_ids[window]]))
            start_position, end_position, is_impossible = self._labels(
                example, answer, span_start, span_length, doc_offset)
            yield SquadFeature(
                unique_id=first_unique_id + span_index,
                example_index=example_index,
                qas_id=example.qas_id,
                doc_span_index=span_index,
                doc_span_start=span_start,
                doc_offset=doc_offset,
                tok_start_to_orig_index=alignment.tok_start_to_orig_index[window].tolist(),
                tok_end_to_orig_index=alignment.tok_end_to_orig_index[window].tolist(),
                token_is_max_context=[max_context_span(spans, p) == span_index
                                      for p in range(window.start, window.stop)],
                input_ids=inputs[names.INPUT_IDS],
                input_mask=inputs[names.INPUT_MASK],
                segment_ids=inputs[names.SEGMENT_IDS],
                p_mask=window_p_mask(self.max_seq_length, doc_offset, span_length),
                start_position=start_position,
                end_position=end_position,
                is_impossible=is_impossible)

    def _labels(self, example: SquadExample, answer: tuple[int, int] | None,
                span_start: int, span_length: int, doc_offset: int
                ) -> tuple[int | None, int | None, bool]:
        """(start_position, end_position, is_impossible) of one window. Training: the
        answer's input positions when the window holds all of its pieces; else 0, 0 and
        "no answer" (the original keeps such windows, for v1.1 too). Otherwise no
        positions."""
        if not self.is_training:
            return None, None, bool(example.is_impossible)
        if answer is None:
            return 0, 0, True
        first, last = answer
        if span_start <= first and last < span_start + span_length:
            return first - span_start + doc_offset, last - span_start + doc_offset, False
        return 0, 0, True


def convert_examples_to_features(examples: Sequence[SquadExample], tokenizer,
                                 max_seq_length: int, doc_stride: int,
                                 max_query_length: int, is_training: bool, *,
                                 do_lower_case: bool | None = None,
                                 first_unique_id: int = FIRST_UNIQUE_ID
                                 ) -> list[SquadFeature]:
    """`iter_features` as a list."""
    return list(iter_features(examples, tokenizer, max_seq_length, doc_stride,
                              max_query_length, is_training, do_lower_case=do_lower_case,
                              first_unique_id=first_unique_id))
