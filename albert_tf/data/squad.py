"""SQuAD v1.1 and v2.0 for ALBERT: examples, features, TFRecords, cached features.

The features are those of the original google-research/albert `squad_utils.py` for the
same input and settings: the question's pieces (at most `max_query_length`), the
paragraph's pieces cut into windows of `doc_stride`, `[CLS] question [SEP] window [SEP]`,
`p_mask` (1 on the question, on both `[SEP]` and on padding), answer positions found by
the original's character-level alignment (a banded longest common subsequence) between
the raw paragraph and the text of its SentencePiece pieces, positions 0/0 and
`is_impossible` for v2 unanswerable questions and for training windows that miss the
answer, `unique_id` counting from 1000000000. Records use the original `run_squad_v1.py` /
`run_squad_v2.py` feature names, so either side reads what the other writes.

Each `SquadFeature` also keeps what post-processing needs to turn a predicted token span
back into paragraph text (character offsets of every window piece, max-context flags,
the example it came from); `span_text` does that mapping. `load_or_build_features` caches
the records together with a JSON file holding those offsets and the settings that made
them, and rebuilds both when anything that shaped them has changed.

Where we differ from the original, only on input it could not handle: bad questions
(an answer that is not at its offset, malformed entries, text that is not UTF-8,
duplicate ids) are skipped with a warning naming the file and question id instead of
crashing or producing wrong positions; a training question with several answers (the dev
sets) uses the first one instead of raising.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import os
import random
from typing import Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import tokenization
from albert_tf.data import records
from albert_tf.data.cache import (
    META_SUFFIX,
    changed_settings,
    file_sha256,
    write_text_atomically,
)

FIRST_UNIQUE_ID = 1_000_000_000
# run_squad_v1.py / run_squad_v2.py shuffle the training examples with
# random.Random(12345) before converting them.
ORIGINAL_TRAIN_SHUFFLE_SEED = 12345
# Bump when a change to this module changes the features, so that caches are rebuilt.
FEATURE_FORMAT_VERSION = 1

# The record layout, in the original FeatureWriter's order: name, whether it is a
# sequence of max_seq_length values, whether only training records have it. Writer and
# reader are both built from this table.
RECORD_LAYOUT = (
    ("unique_ids", False, False),
    ("input_ids", True, False),
    ("input_mask", True, False),
    ("segment_ids", True, False),
    ("p_mask", True, False),
    ("start_positions", False, True),
    ("end_positions", False, True),
    ("is_impossible", False, True),
)
SEQUENCE_FEATURES = tuple(name for name, is_sequence, _ in RECORD_LAYOUT if is_sequence)
# Padding: 0 everywhere except p_mask, which marks padding as "not an answer" (1).
PADDING_VALUES = {"p_mask": 1}


class SquadError(ValueError):
    """A SQuAD file or setting that cannot be used."""


# ---------------------------------------------------------------------------- examples
@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one paragraph.

    `orig_answer_text` / `start_position` (a character offset in `paragraph_text`) are
    the training answer (the first one), as in the original: set when reading for
    training, `""` / -1 for unanswerable questions, None otherwise. `answers` holds every
    gold answer text, whatever the mode, for evaluation.
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: str | None = None
    start_position: int | None = None
    is_impossible: bool = False
    answers: tuple[str, ...] = ()


def _fspath(path) -> str:
    return os.fspath(path)


def _read_bytes(path: str) -> bytes:
    if not tf.io.gfile.exists(path):
        raise SquadError(f"SQuAD file {path} does not exist")
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _parse_squad_json(raw: bytes, path: str) -> list:
    # Bytes that are not UTF-8 become lone surrogates, so that only the questions that
    # contain them are lost, not the file.
    text = raw.decode("utf-8-sig", "surrogateescape")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise SquadError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise SquadError(f"{path} is not a SQuAD file: expected an object with a 'data' list")
    return document["data"]


def _not_utf8(value: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in value)


def _text_problem(value, name: str) -> str | None:
    if not isinstance(value, str):
        return f"no '{name}' text"
    if _not_utf8(value):
        return f"'{name}' is not valid UTF-8"
    if not value.strip():
        return f"empty '{name}'"
    return None


def _answer_texts(answers) -> tuple[str, ...]:
    if not isinstance(answers, list):
        return ()
    return tuple(a["text"] for a in answers if isinstance(a, dict)
                 and isinstance(a.get("text"), str) and not _not_utf8(a["text"]))


def _training_answer(qa: dict, context: str) -> tuple[str, int] | str:
    """(text, start) of the first answer, or why there is none usable."""
    answers = qa.get("answers")
    if not isinstance(answers, list) or not answers:
        return "no answer (and not 'is_impossible')"
    answer = answers[0]
    if not isinstance(answer, dict):
        return "malformed answer"
    text, start = answer.get("text"), answer.get("answer_start")
    problem = _text_problem(text, "answers[0].text")
    if problem:
        return problem
    if not isinstance(start, int) or isinstance(start, bool):
        return f"answer_start {start!r} is not an integer"
    if start < 0 or context[start:start + len(text)] != text:
        found = context[max(start, 0):max(start, 0) + len(text)]
        return f"answer text {text!r} is not at offset {start} of the context (found {found!r})"
    return text, start


def read_squad_examples(input_file, is_training: bool) -> list[SquadExample]:
    """Reads a SQuAD v1.1 or v2.0 JSON file into `SquadExample`s, in file order.

    With `is_training`, each question needs an answer whose text is at its
    `answer_start`, unless v2's `is_impossible` is true. Questions that cannot be used are
    skipped with a warning naming the file and question id; a file with no usable
    question, a missing file, or one that is not SQuAD JSON raise `SquadError`.
    """
    path = _fspath(input_file)
    return _examples_from_bytes(_read_bytes(path), path, is_training)


def _examples_from_bytes(raw: bytes, path: str, is_training: bool) -> list[SquadExample]:
    data = _parse_squad_json(raw, path)
    skips = records.SkipLog("SQuAD questions")
    examples: list[SquadExample] = []
    seen_ids: set[str] = set()
    total = 0
    for article_index, article in enumerate(data):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            total += 1
            skips.skip(f"{path}, data[{article_index}]", "no 'paragraphs' list")
            continue
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{path}, data[{article_index}].paragraphs[{paragraph_index}]"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                total += 1
                skips.skip(where, "no 'qas' list")
                continue
            context = paragraph.get("context")
            context_problem = _text_problem(context, "context")
            for qa_index, qa in enumerate(qas):
                total += 1
                qas_id = qa.get("id") if isinstance(qa, dict) else None
                if isinstance(qas_id, int) and not isinstance(qas_id, bool):
                    qas_id = str(qas_id)
                if not isinstance(qas_id, str) or not qas_id or _not_utf8(qas_id):
                    skips.skip(f"{where}.qas[{qa_index}]", "no usable question 'id'")
                    continue
                question_where = f"{path}, question id {qas_id!r}"
                problem = context_problem or _text_problem(qa.get("question"), "question")
                if problem is None and qas_id in seen_ids:
                    problem = "duplicate question id"
                is_impossible = qa.get("is_impossible", False)
                if problem is None and not isinstance(is_impossible, bool):
                    problem = f"'is_impossible' is {is_impossible!r}, not true/false"
                answer_text, start_position = None, None
                if problem is None and is_training:
                    if is_impossible:
                        answer_text, start_position = "", -1
                    else:
                        answer = _training_answer(qa, context)
                        if isinstance(answer, str):
                            problem = answer
                        else:
                            answer_text, start_position = answer
                if problem is not None:
                    skips.skip(question_where, problem)
                    continue
                seen_ids.add(qas_id)
                examples.append(SquadExample(
                    qas_id=qas_id,
                    question_text=qa["question"],
                    paragraph_text=context,
                    orig_answer_text=answer_text,
                    start_position=start_position,
                    is_impossible=is_impossible,
                    answers=() if is_impossible else _answer_texts(qa.get("answers"))))
    skips.summary(total)
    if not examples:
        raise SquadError(f"{path} has no usable question ({skips.count} of {total} skipped)")
    return examples


# -------------------------------------------------- paragraph <-> pieces alignment
@functools.lru_cache(maxsize=65536)
def _normalized_char(char: str, lower: bool) -> int:
    """The code point `char` becomes under the original's per-character preprocessing,
    or -1 when it becomes no character or several (it then matches nothing)."""
    normalized = tokenization.preprocess_text(char, remove_space=False, lower=lower)
    return ord(normalized) if len(normalized) == 1 else -1


def _lcs_table(orig: np.ndarray, tok: np.ndarray, max_dist: int) -> tuple[int, np.ndarray]:
    """The original's banded longest common subsequence of two code-point arrays.

    Cell (i, j) exists for j in [i - max_dist, i + max_dist) and 0 <= j < m; every other
    cell counts 0. Returns f[n-1, m-1] and the back-pointers, stored by band offset
    `j - i + max_dist`: 2 = match (diagonal), 1 = left (j - 1), 0 = up (i - 1), -1 = none,
    with the original's preference order (a match only when strictly longer, then left
    only when strictly longer than up).
    """
    n, m = len(orig), len(tok)
    width = 2 * max_dist
    back = np.full((n, width), -1, np.int8)
    prev = np.zeros(m + 1, np.int64)  # prev[j + 1] = f[i - 1, j]; prev[0] = 0
    for i in range(n):
        lo, hi = max(0, i - max_dist), min(m, i + max_dist)
        row_prev = np.zeros(m + 1, np.int64)
        if lo < hi:
            up = prev[lo + 1:hi + 1]
            diag_plus_one = prev[lo:hi] + 1
            match = tok[lo:hi] == orig[i]
            # f[i, j] = max(up, left, diag + 1 on a match); left is the running maximum.
            row = np.maximum.accumulate(np.where(match, np.maximum(up, diag_plus_one), up))
            left = np.concatenate(([0], row[:-1]))
            best_before_match = np.maximum(up, left)
            takes_match = match & (diag_plus_one > best_before_match)
            takes_left = ~takes_match & (left > up)
            back[i, lo - i + max_dist:hi - i + max_dist] = np.where(
                takes_match, 2, np.where(takes_left, 1, 0 if i > 0 else -1))
            row_prev[lo + 1:hi + 1] = row
        prev = row_prev
    return int(prev[m]), back


def _trace_back(back: np.ndarray, n: int, m: int, max_dist: int
                ) -> tuple[list[int], list[int]]:
    """Matched pairs along the back-pointers from (n-1, m-1): (orig -> chartok,
    chartok -> orig), -1 where unmatched."""
    orig_to_chartok = [-1] * n
    chartok_to_orig = [-1] * m
    i, j = n - 1, m - 1
    width = 2 * max_dist
    while i >= 0 and j >= 0:
        offset = j - i + max_dist
        if not 0 <= offset < width:
            break
        step = back[i, offset]
        if step < 0:
            break
        if step == 2:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif step == 1:
            j -= 1
        else:
            i -= 1
    return orig_to_chartok, chartok_to_orig


def _convert_index(index: Sequence[int], pos: int, m: int | None = None,
                   is_start: bool = True) -> int:
    """Maps `pos` through `index` (-1 = unmapped), taking the original's choice for an
    unmapped position from its nearest mapped neighbours on each side."""
    if index[pos] >= 0:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] < 0:
        rear += 1
    front = pos
    while front > 0 and index[front] < 0:
        front -= 1
    if index[front] < 0:  # nothing mapped before pos
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] < 0:  # nothing mapped after pos
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if index[rear] > index[front] + 1:
        return index[front] + 1 if is_start else index[rear] - 1
    return index[rear] if is_start else index[front]


@dataclasses.dataclass(frozen=True)
class ParagraphAlignment:
    """A paragraph's pieces and where each lies in the raw paragraph text.

    piece_ids: [num_pieces] ids of the paragraph's pieces.
    tok_start_to_orig_index / tok_end_to_orig_index: [num_pieces] character offsets in
      the raw paragraph of each piece's first / last character (the leading `▁` counts
      as a character).
    orig_to_chartok_index: [len(paragraph)] matched position in the pieces' text, -1
      when unmatched. chartok_to_tok_index: [len(pieces' text)] piece of each character.
    """

    piece_ids: np.ndarray
    tok_start_to_orig_index: np.ndarray
    tok_end_to_orig_index: np.ndarray
    orig_to_chartok_index: np.ndarray
    chartok_to_tok_index: np.ndarray

    def char_span_to_pieces(self, start: int, end: int) -> tuple[int, int]:
        """First and last piece of the raw characters start..end (inclusive)."""
        orig_to_chartok = self.orig_to_chartok_index.tolist()
        first = _convert_index(orig_to_chartok, start, is_start=True)
        last = _convert_index(orig_to_chartok, end, is_start=False)
        return int(self.chartok_to_tok_index[first]), int(self.chartok_to_tok_index[last])


def align_paragraph(paragraph_text: str, sp_model, lower: bool) -> ParagraphAlignment | None:
    """Pieces of a paragraph aligned to its raw characters as the original does, or None
    where the original reports a mismatch (under 80% of the characters matched)."""
    pieces = tokenization.encode_pieces(
        sp_model, tokenization.preprocess_text(paragraph_text, lower=lower))
    chartok_to_tok, tok_start_to_chartok, tok_end_to_chartok = [], [], []
    char_count = 0
    for i, piece in enumerate(pieces):
        piece_text = piece.replace(tokenization.SPIECE_UNDERLINE, " ")
        chartok_to_tok.extend([i] * len(piece_text))
        tok_start_to_chartok.append(char_count)
        char_count += len(piece_text)
        tok_end_to_chartok.append(char_count - 1)
    tok_text = "".join(pieces).replace(tokenization.SPIECE_UNDERLINE, " ")
    n, m = len(paragraph_text), len(tok_text)
    if n == 0 or m == 0:
        return None
    orig = np.array([_normalized_char(c, lower) for c in paragraph_text], np.int64)
    tok = np.array([ord(c) for c in tok_text], np.int64)

    # A narrow band first; twice as wide when under 80% of the paragraph matched.
    max_dist = abs(n - m) + 5
    for band in (max_dist, 2 * max_dist):
        score, back = _lcs_table(orig, tok, band)
        if score > 0.8 * n:
            break
    orig_to_chartok, chartok_to_orig = _trace_back(back, n, m, band)
    if score < 0.8 * n or all(v < 0 for v in orig_to_chartok):
        return None
    tok_start_to_orig = [_convert_index(chartok_to_orig, s, n, is_start=True)
                         for s in tok_start_to_chartok]
    tok_end_to_orig = [_convert_index(chartok_to_orig, e, n, is_start=False)
                       for e in tok_end_to_chartok]
    return ParagraphAlignment(
        piece_ids=np.array([sp_model.PieceToId(p) for p in pieces], np.int32),
        tok_start_to_orig_index=np.array(tok_start_to_orig, np.int32),
        tok_end_to_orig_index=np.array(tok_end_to_orig, np.int32),
        orig_to_chartok_index=np.array(orig_to_chartok, np.int32),
        chartok_to_tok_index=np.array(chartok_to_tok, np.int32))


# ---------------------------------------------------------------------------- features
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


def validate_settings(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    if max_seq_length <= max_query_length + 3:
        raise SquadError(f"max_seq_length ({max_seq_length}) must be greater than "
                         f"max_query_length ({max_query_length}) + 3")
    if doc_stride < 1 or max_query_length < 1:
        raise SquadError(f"doc_stride ({doc_stride}) and max_query_length "
                         f"({max_query_length}) must be positive")


def _sp_model(tokenizer):
    if getattr(tokenizer, "sp_model", None) is None:
        raise SquadError("SQuAD features need a SentencePiece tokenizer (spm_model_file), "
                         "as the original squad_utils does")
    return tokenizer.sp_model


def iter_features(examples: Sequence[SquadExample], tokenizer, max_seq_length: int,
                  doc_stride: int, max_query_length: int, is_training: bool, *,
                  do_lower_case: bool | None = None,
                  first_unique_id: int = FIRST_UNIQUE_ID) -> Iterator[SquadFeature]:
    """Examples -> features, one per window, in order: the original
    `convert_examples_to_features`. Examples whose paragraph cannot be aligned to its
    pieces (the original's "MISMATCH DETECTED") yield nothing and are logged."""
    validate_settings(max_seq_length, doc_stride, max_query_length)
    sp_model = _sp_model(tokenizer)
    lower = tokenizer.do_lower_case if do_lower_case is None else do_lower_case
    cls_id, sep_id = sp_model.PieceToId(tokenization.CLS), sp_model.PieceToId(tokenization.SEP)
    alignments: dict[str, ParagraphAlignment | None] = {}
    skips = records.SkipLog("SQuAD examples")
    unique_id = first_unique_id
    num_positive = num_negative = 0

    for example_index, example in enumerate(examples):
        if is_training and example.start_position is None:
            raise SquadError(f"question {example.qas_id!r} has no training answer: read "
                             "the file with is_training=True")
        query_ids = [sp_model.PieceToId(p) for p in tokenization.encode_pieces(
            sp_model, tokenization.preprocess_text(example.question_text, lower=lower))]
        query_ids = query_ids[:max_query_length]

        if example.paragraph_text not in alignments:
            alignments[example.paragraph_text] = align_paragraph(
                example.paragraph_text, sp_model, lower)
        alignment = alignments[example.paragraph_text]
        if alignment is None:
            skips.skip(f"question id {example.qas_id!r}",
                       "the paragraph's pieces do not align with its text")
            continue

        tok_start_position = tok_end_position = 0
        if is_training and not example.is_impossible:
            answer_end = example.start_position + len(example.orig_answer_text) - 1
            tok_start_position, tok_end_position = alignment.char_span_to_pieces(
                example.start_position, answer_end)
            if tok_start_position > tok_end_position:
                skips.skip(f"question id {example.qas_id!r}",
                           "the answer does not map to pieces")
                continue

        piece_ids = alignment.piece_ids
        max_tokens_for_doc = max_seq_length - len(query_ids) - 3  # [CLS], 2 x [SEP]
        spans = doc_spans(len(piece_ids), max_tokens_for_doc, doc_stride)
        doc_offset = len(query_ids) + 2
        for span_index, (span_start, span_length) in enumerate(spans):
            span_end = span_start + span_length - 1
            length = doc_offset + span_length + 1
            input_ids = np.zeros(max_seq_length, np.int32)
            input_ids[0] = cls_id
            input_ids[1:doc_offset - 1] = query_ids
            input_ids[doc_offset - 1] = sep_id
            input_ids[doc_offset:length - 1] = piece_ids[span_start:span_end + 1]
            input_ids[length - 1] = sep_id
            input_mask = np.zeros(max_seq_length, np.int32)
            input_mask[:length] = 1
            segment_ids = np.zeros(max_seq_length, np.int32)
            segment_ids[doc_offset:length] = 1
            # 0 where an answer may be: [CLS] and the paragraph's pieces.
            p_mask = np.ones(max_seq_length, np.int32)
            p_mask[0] = 0
            p_mask[doc_offset:length - 1] = 0

            span_is_impossible = example.is_impossible
            start_position = end_position = None
            if is_training:
                start_position = end_position = 0
                if not span_is_impossible:
                    if span_start <= tok_start_position and tok_end_position <= span_end:
                        start_position = tok_start_position - span_start + doc_offset
                        end_position = tok_end_position - span_start + doc_offset
                    else:  # the window misses the answer: kept, as "no answer"
                        span_is_impossible = True

            yield SquadFeature(
                unique_id=unique_id,
                example_index=example_index,
                qas_id=example.qas_id,
                doc_span_index=span_index,
                doc_span_start=span_start,
                doc_offset=doc_offset,
                tok_start_to_orig_index=alignment.tok_start_to_orig_index[
                    span_start:span_end + 1].tolist(),
                tok_end_to_orig_index=alignment.tok_end_to_orig_index[
                    span_start:span_end + 1].tolist(),
                token_is_max_context=[max_context_span(spans, p) == span_index
                                      for p in range(span_start, span_end + 1)],
                input_ids=input_ids,
                input_mask=input_mask,
                segment_ids=segment_ids,
                p_mask=p_mask,
                start_position=start_position,
                end_position=end_position,
                is_impossible=bool(span_is_impossible))
            unique_id += 1
            if span_is_impossible:
                num_negative += 1
            else:
                num_positive += 1
    skips.summary(len(examples))
    logging.info("SQuAD features: %d = %d with an answer + %d without",
                 num_positive + num_negative, num_positive, num_negative)


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


def shuffle_examples(examples: Sequence[SquadExample],
                     seed: int = ORIGINAL_TRAIN_SHUFFLE_SEED) -> list[SquadExample]:
    """The examples in the order run_squad_v1/v2.py convert them for training."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    return shuffled


# ----------------------------------------------------------------------------- records
def record_feature_names(is_training: bool) -> tuple[str, ...]:
    return tuple(name for name, _, training_only in RECORD_LAYOUT
                 if is_training or not training_only)


def record_spec(max_seq_length: int, is_training: bool) -> dict:
    """The parsing spec of the original run_squad records (p_mask included: the
    original writes it for v1.1 too)."""
    return {name: tf.io.FixedLenFeature([max_seq_length] if is_sequence else [], tf.int64)
            for name, is_sequence, training_only in RECORD_LAYOUT
            if is_training or not training_only}


_RECORD_VALUES = {
    "unique_ids": lambda f: [f.unique_id],
    "input_ids": lambda f: f.input_ids,
    "input_mask": lambda f: f.input_mask,
    "segment_ids": lambda f: f.segment_ids,
    "p_mask": lambda f: f.p_mask,
    "start_positions": lambda f: [f.start_position],
    "end_positions": lambda f: [f.end_position],
    "is_impossible": lambda f: [int(f.is_impossible)],
}


def feature_to_record(feature: SquadFeature, is_training: bool) -> bytes:
    """A serialized tf.train.Example as the original FeatureWriter writes it."""
    if is_training and feature.start_position is None:
        raise SquadError(f"feature {feature.unique_id} has no answer positions: "
                         "convert with is_training=True to write training records")
    return records.make_example({
        name: records.int64_feature(np.asarray(_RECORD_VALUES[name](feature), np.int64))
        for name in record_feature_names(is_training)})


def write_features(path, features: Iterable[SquadFeature], is_training: bool) -> int:
    """Writes features as original-format records, atomically; returns how many."""
    return records.write_records(
        path, (feature_to_record(f, is_training) for f in features))


def squad_dataset(files, max_seq_length: int, batch_size: int, *, is_training: bool,
                  training: bool | None = None, seed: int | None = None,
                  drop_remainder: bool = False, repeat: bool | None = None,
                  shuffle_buffer: int = 10_000,
                  bucket_boundaries: list[int] | None = None) -> tf.data.Dataset:
    """Batches of original-format SQuAD records (int32), each example trimmed to its
    real length (p_mask too) and each batch padded only to its own longest (p_mask with
    1). `is_training`: the records hold the labels; `training` (default: the same):
    shuffle with `seed` and repeat."""
    return records.fine_tuning_dataset(
        files, record_spec(max_seq_length, is_training), batch_size,
        training=is_training if training is None else training, seed=seed,
        drop_remainder=drop_remainder, shuffle_buffer=shuffle_buffer, repeat=repeat,
        bucket_boundaries=bucket_boundaries, sequence_features=SEQUENCE_FEATURES,
        padding_values=PADDING_VALUES)


def read_feature_records(path, max_seq_length: int, is_training: bool,
                         batch_size: int = 1024) -> dict[str, np.ndarray]:
    """Every record of a file as numpy arrays ([N] or [N, max_seq_length]), in order."""
    spec = record_spec(max_seq_length, is_training)
    dataset = tf.data.TFRecordDataset(_fspath(path)).batch(batch_size).map(
        lambda batch: tf.io.parse_example(batch, spec))
    parts = collections.defaultdict(list)
    for batch in dataset.as_numpy_iterator():
        for name, value in batch.items():
            parts[name].append(value)
    return {name: (np.concatenate(parts[name]) if parts[name] else
                   np.zeros((0,) + tuple(spec[name].shape), np.int64))
            for name in spec}


# ------------------------------------------------------------------------------ cache
@dataclasses.dataclass
class SquadFeatureFile:
    """What `load_or_build_features` returns.

    examples: the examples, in conversion order (shuffled when `shuffle_seed` is set).
    features: with `keep_features`, every feature (inputs read back from the records),
      for post-processing; else None.
    rebuilt: whether the records were (re)written by this call.
    """

    record_file: str
    meta_file: str
    examples: list[SquadExample]
    num_features: int
    settings: dict
    features: list[SquadFeature] | None
    rebuilt: bool


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _feature_meta(feature: SquadFeature, paragraph_index: int) -> dict:
    return {
        "unique_id": feature.unique_id,
        "example_index": feature.example_index,
        "doc_span_index": feature.doc_span_index,
        "doc_span_start": feature.doc_span_start,
        "doc_length": feature.doc_length,
        "doc_offset": feature.doc_offset,
        "paragraph": paragraph_index,
        "start_position": feature.start_position,
        "end_position": feature.end_position,
        "is_impossible": feature.is_impossible,
    }


def _load_cached(record_file: str, meta_file: str, settings: dict,
                 examples: list[SquadExample], keep_features: bool
                 ) -> tuple[int, list[SquadFeature] | None] | str:
    """(num_features, features) from a valid cache, or why it cannot be used."""
    if not tf.io.gfile.exists(meta_file) or not tf.io.gfile.exists(record_file):
        return "no cached features"
    try:
        with tf.io.gfile.GFile(meta_file, "r") as f:
            meta = json.load(f)
        cached_settings = meta["settings"]
        records_sha256 = meta["records_sha256"]
        num_features = int(meta["num_features"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"unreadable {meta_file} ({e})"
    changed = changed_settings(settings, cached_settings)
    if changed:
        return "settings changed: " + ", ".join(changed)
    if file_sha256(record_file) != records_sha256:
        return f"{record_file} is not the file {meta_file} describes"
    if not keep_features:
        return num_features, None
    if meta.get("features") is None:
        return "no post-processing data in the cache"
    try:
        features = _features_from_cache(record_file, meta, settings, examples)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        return f"inconsistent cache ({e})"
    return num_features, features


def _features_from_cache(record_file: str, meta: dict, settings: dict,
                         examples: list[SquadExample]) -> list[SquadFeature]:
    arrays = read_feature_records(record_file, settings["max_seq_length"],
                                  settings["is_training"])
    entries = meta["features"]
    if len(entries) != len(arrays["unique_ids"]) or len(entries) != meta["num_features"]:
        raise ValueError("record and feature counts differ")
    paragraphs = meta["paragraphs"]
    # Max-context flags follow from the windows of each example.
    windows = collections.defaultdict(list)
    for entry in entries:
        windows[entry["example_index"]].append((entry["doc_span_start"], entry["doc_length"]))
    features = []
    for row, entry in enumerate(entries):
        if int(arrays["unique_ids"][row]) != entry["unique_id"]:
            raise ValueError(f"unique_id {entry['unique_id']} is not record {row}")
        offsets = paragraphs[entry["paragraph"]]
        start, length = entry["doc_span_start"], entry["doc_length"]
        example = examples[entry["example_index"]]
        features.append(SquadFeature(
            unique_id=entry["unique_id"],
            example_index=entry["example_index"],
            qas_id=example.qas_id,
            doc_span_index=entry["doc_span_index"],
            doc_span_start=start,
            doc_offset=entry["doc_offset"],
            tok_start_to_orig_index=offsets["tok_start_to_orig_index"][start:start + length],
            tok_end_to_orig_index=offsets["tok_end_to_orig_index"][start:start + length],
            token_is_max_context=[
                max_context_span(windows[entry["example_index"]], p) == entry["doc_span_index"]
                for p in range(start, start + length)],
            input_ids=arrays["input_ids"][row].astype(np.int32),
            input_mask=arrays["input_mask"][row].astype(np.int32),
            segment_ids=arrays["segment_ids"][row].astype(np.int32),
            p_mask=arrays["p_mask"][row].astype(np.int32),
            start_position=entry["start_position"],
            end_position=entry["end_position"],
            is_impossible=entry["is_impossible"]))
    return features


def load_or_build_features(input_file, tokenizer, record_file, *, is_training: bool,
                           max_seq_length: int = 384, doc_stride: int = 128,
                           max_query_length: int = 64, shuffle_seed: int | None = None,
                           keep_features: bool | None = None) -> SquadFeatureFile:
    """Features of a SQuAD file as original-format records at `record_file`, converted
    once and reused while nothing that shapes them changes.

    Beside the records, `<record_file>.meta.json` holds the settings (SHA-256 of the
    SQuAD file and of the SentencePiece model, lowercasing, lengths, stride, mode,
    shuffle seed, format version), the records' SHA-256 and, with `keep_features`
    (default: not `is_training`), what post-processing needs for each feature (character
    offsets of the pieces, stored once per paragraph, and the windows). A cache
    whose settings differ, whose records are not the ones described, or that lacks what
    is asked for is rebuilt. Both files are written under temporary names and renamed.

    `shuffle_seed`: convert the examples in `random.Random(seed)` order, as the original
    training scripts do with `ORIGINAL_TRAIN_SHUFFLE_SEED`.
    """
    input_file, record_file = _fspath(input_file), _fspath(record_file)
    meta_file = record_file + META_SUFFIX
    keep = (not is_training) if keep_features is None else keep_features
    validate_settings(max_seq_length, doc_stride, max_query_length)
    sp_model = _sp_model(tokenizer)
    raw = _read_bytes(input_file)
    examples = _examples_from_bytes(raw, input_file, is_training)
    if shuffle_seed is not None:
        examples = shuffle_examples(examples, shuffle_seed)
    settings = {
        "format_version": FEATURE_FORMAT_VERSION,
        "input_sha256": _sha256(raw),
        "spm_model_sha256": _sha256(sp_model.serialized_model_proto()),
        "do_lower_case": bool(tokenizer.do_lower_case),
        "max_seq_length": max_seq_length,
        "doc_stride": doc_stride,
        "max_query_length": max_query_length,
        "is_training": is_training,
        "shuffle_seed": shuffle_seed,
        "first_unique_id": FIRST_UNIQUE_ID,
    }
    cached = _load_cached(record_file, meta_file, settings, examples, keep)
    if not isinstance(cached, str):
        num_features, features = cached
        logging.info("using the %d cached SQuAD features in %s", num_features, record_file)
        return SquadFeatureFile(record_file, meta_file, examples, num_features, settings,
                                features, rebuilt=False)
    logging.info("converting %s into %s: %s", input_file, record_file, cached)

    features: list[SquadFeature] | None = [] if keep else None
    feature_entries: list[dict] = []
    paragraph_index: dict[str, int] = {}
    paragraph_offsets: list[dict] = []

    def remember(feature_iter):
        for feature in feature_iter:
            if keep:
                text = examples[feature.example_index].paragraph_text
                index = paragraph_index.setdefault(text, len(paragraph_offsets))
                if index == len(paragraph_offsets):
                    paragraph_offsets.append({"tok_start_to_orig_index": [],
                                              "tok_end_to_orig_index": []})
                offsets = paragraph_offsets[index]
                # The windows of one example cover every piece, in order and without
                # gaps: the paragraph's first example gives all its offsets.
                end = feature.doc_span_start + feature.doc_length
                known = len(offsets["tok_start_to_orig_index"])
                if end > known:
                    cut = known - feature.doc_span_start
                    offsets["tok_start_to_orig_index"].extend(feature.tok_start_to_orig_index[cut:])
                    offsets["tok_end_to_orig_index"].extend(feature.tok_end_to_orig_index[cut:])
                feature_entries.append(_feature_meta(feature, index))
                features.append(feature)
            yield feature

    if tf.io.gfile.exists(meta_file):  # never leave a description of other records
        tf.io.gfile.remove(meta_file)
    num_features = write_features(record_file, remember(iter_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training)),
        is_training)
    if num_features == 0:
        tf.io.gfile.remove(record_file)
        raise SquadError(f"{input_file} gave no features: no paragraph could be aligned")
    meta = {
        "format": "albert_tf SQuAD features",
        "input_file": input_file,
        "settings": settings,
        "num_examples": len(examples),
        "num_features": num_features,
        "records_sha256": file_sha256(record_file),
        "paragraphs": paragraph_offsets if keep else None,
        "features": feature_entries if keep else None,
    }
    write_text_atomically(meta_file, json.dumps(meta, separators=(",", ":")))
    return SquadFeatureFile(record_file, meta_file, examples, num_features, settings,
                            features, rebuilt=True)
