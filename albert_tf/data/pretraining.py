"""Pretraining data: raw text -> masked-LM + sentence-order TFRecords, and back.

Input and output are the original google-research/albert `create_pretraining_data.py`
formats: text with one sentence per line and a blank line between documents in; TFRecords
with `input_ids`, `input_mask`, `segment_ids`, `token_boundary` (int64, `max_seq_length`,
zero-padded), `masked_lm_positions`, `masked_lm_ids` (int64, zero-padded),
`masked_lm_weights` (float, 1.0 then 0.0, all three `max_predictions_per_seq` long) and
`next_sentence_labels` (int64, 1) out. Each instance is drawn as the original draws it
(pairing and sentence-order swap, `short_seq_prob` targets, random-front/back
truncation, masking in `albert_tf.data.masking`).

Where this differs from the original, on purpose:

- Text is streamed in *chunks* of whole documents (`chunk_bytes` of input each), each
  processed on its own: memory does not grow with the corpus, and chunks spread over
  worker processes. The original holds every document and every instance in memory.
- So the instances are shuffled within a chunk (not over the whole corpus), and the
  "random other document" that a one-segment chunk (and NSP with
  `random_next_sentence`) pairs with is drawn from the documents of the same chunk,
  not from the whole corpus.
- Every draw comes from generators seeded by `(random_seed, chunk index)`: the output is
  byte-identical for a seed, whatever the number of workers. (The original draws n-gram
  lengths from NumPy's unseeded global generator.)
- Each input file starts a new document (the original lets a file's last document run
  on into the next file). Lines that are not UTF-8 or are longer than `max_line_bytes`,
  and documents with no tokens, are skipped with a warning naming file and line (the
  original stops on bad UTF-8); a corpus with nothing usable is an error.
- Outputs are written under temporary names and renamed when complete.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import glob
import multiprocessing
import os
import random
import re
import time
from typing import Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import tokenization
from albert_tf.data import records
from albert_tf.data.cache import open_binary
from albert_tf.data.masking import MaskedBatch, Masker

# ----------------------------------------------------------------- the record format

# The original's features, in the order it writes them. Every name here is int64
# except these, which are float.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "token_boundary",
                 "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels")
FLOAT_FEATURES = frozenset({"masked_lm_weights"})
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def feature_lengths(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, int]:
    """Each feature's fixed length in a record."""
    lengths = {name: max_seq_length for name in SEQUENCE_FEATURES}
    lengths.update({name: max_predictions_per_seq for name in PREDICTION_FEATURES})
    lengths["next_sentence_labels"] = 1
    return lengths


def pretraining_feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The parsing spec of pretraining records (the one the original's
    `run_pretraining.py` uses)."""
    return {name: tf.io.FixedLenFeature(
        [length], tf.float32 if name in FLOAT_FEATURES else tf.int64)
        for name, length in feature_lengths(max_seq_length, max_predictions_per_seq).items()}


class PretrainingDataError(ValueError):
    """Input or settings that cannot give pretraining data."""


# ---------------------------------------------------------------------- settings

@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """The original flags (with their defaults) and the chunking of this version.

    Attributes:
      chunk_bytes: input text per chunk: the unit of work, of the instance shuffle and
        of the window the random other document comes from. At most `num_workers + 1`
        chunks are in flight, each holding `dupe_factor * chunk_bytes` times 3 to 15
        bytes of records (English text; the more padding, the more bytes: a long
        `max_seq_length` with short documents).
      max_line_bytes: longer lines are skipped (they are not sentences).
    """
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 40
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False
    random_seed: int = 12345
    chunk_bytes: int = 128 * 1024
    max_line_bytes: int = 1 << 20

    def validate(self) -> None:
        checks = [
            ("max_seq_length", self.max_seq_length >= 5,
             "at least 5 ([CLS] A [SEP] B [SEP])"),
            ("max_predictions_per_seq", self.max_predictions_per_seq >= 0, "at least 0"),
            ("masked_lm_prob", 0.0 <= self.masked_lm_prob <= 1.0, "in [0, 1]"),
            ("short_seq_prob", 0.0 <= self.short_seq_prob <= 1.0, "in [0, 1]"),
            ("dupe_factor", self.dupe_factor >= 1, "at least 1"),
            ("ngram", self.ngram >= 1, "at least 1"),
            ("chunk_bytes", self.chunk_bytes >= 1, "at least 1"),
            ("max_line_bytes", self.max_line_bytes >= 1, "at least 1"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise PretrainingDataError(
                    f"{name} must be {expected}, got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """How to build the tokenizer (sent to worker processes instead of the model)."""
    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True

    def build(self) -> tokenization.FullTokenizer:
        return tokenization.FullTokenizer(self.vocab_file, self.do_lower_case,
                                          self.spm_model_file)


# ------------------------------------------------------------------ input files

def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Comma-separated (or listed) globs -> files, each glob's matches sorted.

    Raises `PretrainingDataError` naming any pattern that matches no file.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files, unmatched = [], []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matches = sorted(tf.io.gfile.glob(pattern) if "://" in pattern
                         else (m for m in glob.glob(pattern) if os.path.isfile(m)))
        if not matches:
            unmatched.append(pattern)
        files.extend(matches)
    if unmatched:
        raise PretrainingDataError(
            f"input_file: no file matches {', '.join(repr(p) for p in unmatched)}")
    if not files:
        raise PretrainingDataError("input_file: no input files given")
    return files


_SHARDED = re.compile(r"^(?P<base>.+)@(?P<count>\d+)$")


def expand_output_files(spec: str | Sequence[str]) -> list[str]:
    """Comma-separated (or listed) output paths; `path@N` stands for the N shards
    `path-00000-of-0000N` .. (instances go to the files in turn, as in the original)."""
    if isinstance(spec, str):
        spec = spec.split(",")
    files = []
    for item in (s.strip() for s in spec):
        if not item:
            continue
        match = _SHARDED.match(item)
        if match:
            count = int(match["count"])
            if count < 1:
                raise PretrainingDataError(f"output_file: {item!r} asks for no shards")
            files.extend(f"{match['base']}-{i:05d}-of-{count:05d}" for i in range(count))
        else:
            files.append(item)
    if not files:
        raise PretrainingDataError("output_file: no output files given")
    duplicates = [f for f, n in collections.Counter(files).items() if n > 1]
    if duplicates:
        raise PretrainingDataError(f"output_file: {duplicates[0]!r} is named twice")
    return files


@dataclasses.dataclass
class Document:
    """Raw lines of one document, with where they came from."""
    source: str
    line_numbers: list[int]
    lines: list[str]

    def where(self, position: int = 0) -> str:
        return f"{self.source}:{self.line_numbers[position]}"


@dataclasses.dataclass
class Chunk:
    index: int
    documents: list[Document]


def read_lines(path: str, max_line_bytes: int, skips: records.SkipLog
               ) -> Iterator[tuple[int, str, int]]:
    """(line number, text, size in bytes) of each line of `path`.

    Lines that are not UTF-8 or longer than `max_line_bytes` are skipped with a
    warning; an over-long line is never held in memory whole.
    """
    with open_binary(path) as f:
        number = 0
        while True:
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # drop the rest of the line
                    raw = f.readline(max_line_bytes + 1)
                skips.skip(f"{path}:{number}", f"line longer than {max_line_bytes} bytes")
                continue
            try:
                yield number, raw.decode("utf-8"), len(raw)
            except UnicodeDecodeError as e:
                skips.skip(f"{path}:{number}", f"not UTF-8 ({e.reason} at byte {e.start})")


def read_chunks(files: Sequence[str], chunk_bytes: int, max_line_bytes: int,
                skips: records.SkipLog) -> Iterator[Chunk]:
    """Streams the corpus as chunks of whole documents, about `chunk_bytes` each.

    A document ends at a blank line or at the end of its file. A chunk ends at the
    first document end after `chunk_bytes`; a single document that reaches
    `chunk_bytes` on its own is cut there (its rest is a new document).
    """
    chunk: list[Document] = []
    chunk_size = 0
    index = 0
    for path in files:
        document, document_size = Document(path, [], []), 0
        for number, line, size in read_lines(path, max_line_bytes, skips):
            if line.strip():
                document.line_numbers.append(number)
                document.lines.append(line)
                document_size += size
                if document_size < chunk_bytes:
                    continue
            if document.lines:
                chunk.append(document)
                chunk_size += document_size
                document, document_size = Document(path, [], []), 0
            if chunk_size >= chunk_bytes:
                yield Chunk(index, chunk)
                chunk, chunk_size, index = [], 0, index + 1
        if document.lines:
            chunk.append(document)
            chunk_size += document_size
    if chunk:
        yield Chunk(index, chunk)


# ------------------------------------------------------------- making instances

@dataclasses.dataclass
class SegmentPair:
    """`[CLS] tokens_a [SEP] tokens_b [SEP]` before masking; `is_random_next` is the
    record's `next_sentence_labels` (with sentence order: 1 = B came first, or B is
    from another document)."""
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    is_random_next: bool


def truncation_counts(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """How many tokens the original's `truncate_seq_pair` removes from A and from B.

    It removes one token at a time from the longer (B on ties) until the pair fits: the
    longer is cut down to the other's length, then B and A lose one each in turn. Which
    end each removal takes is a fair coin, drawn separately.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    cut_a = cut_b = 0
    first = min(excess, abs(len_a - len_b))
    if len_a > len_b:
        cut_a = first
    else:
        cut_b = first
    excess -= first
    return cut_a + excess // 2, cut_b + (excess + 1) // 2


def _cut(tokens: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Removes `count` tokens, each from the front or the back with equal chance."""
    if count == 0:
        return tokens
    front = int(rng.binomial(count, 0.5))
    return tokens[front:len(tokens) - (count - front)]


class InstanceMaker:
    """Makes the original's training instances from tokenized documents.

    A document is a list of segments (the id arrays of its non-empty lines).
    """

    def __init__(self, tokenizer: tokenization.FullTokenizer, config: PretrainingDataConfig):
        self.config = config
        self.max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
        self.cls = np.array([tokenizer.special_id("[CLS]")], np.int32)
        self.sep = np.array([tokenizer.special_id("[SEP]")], np.int32)
        self.masker = Masker(
            tokenizer, masked_lm_prob=config.masked_lm_prob,
            max_predictions_per_seq=config.max_predictions_per_seq, max_ngram=config.ngram,
            favor_shorter_ngram=config.favor_shorter_ngram,
            do_whole_word_mask=config.do_whole_word_mask)

    def segment_pairs(self, documents: Sequence[Sequence[np.ndarray]], index: int,
                      rng: random.Random, np_rng: np.random.Generator) -> list[SegmentPair]:
        """The original's `create_instances_from_document`, before masking."""
        document = documents[index]
        target = self.max_num_tokens
        # Sometimes a shorter target, so that pretraining also sees short sequences
        # (one target per document and pass, as in the original).
        if rng.random() < self.config.short_seq_prob:
            target = rng.randint(2, self.max_num_tokens)
        pairs = []
        current: list[np.ndarray] = []
        length = 0
        i = 0
        while i < len(document):
            current.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                a_end = rng.randint(1, len(current) - 1) if len(current) >= 2 else 1
                tokens_a = current[:a_end]
                if len(current) == 1 or (self.config.random_next_sentence
                                         and rng.random() < 0.5):
                    is_random_next = True
                    tokens_b = self._random_continuation(
                        documents, index, target - sum(map(len, tokens_a)), rng)
                    # The segments gathered but not used as A are read again.
                    i -= len(current) - a_end
                elif not self.config.random_next_sentence and rng.random() < 0.5:
                    is_random_next = True  # sentence order: the two halves swapped
                    tokens_a, tokens_b = current[a_end:], tokens_a
                else:
                    is_random_next = False
                    tokens_b = current[a_end:]
                a, b = np.concatenate(tokens_a), np.concatenate(tokens_b)
                cut_a, cut_b = truncation_counts(len(a), len(b), self.max_num_tokens)
                pairs.append(SegmentPair(_cut(a, cut_a, np_rng), _cut(b, cut_b, np_rng),
                                         is_random_next))
                current, length = [], 0
            i += 1
        return pairs

    @staticmethod
    def _random_continuation(documents, index: int, target_length: int,
                             rng: random.Random) -> list[np.ndarray]:
        """Segments of another document (of this chunk) from a random start, until
        `target_length` tokens. Ten tries to avoid the document itself, as the original."""
        for _ in range(10):
            other = rng.randint(0, len(documents) - 1)
            if other != index:
                break
        document = documents[other]
        segments, length = [], 0
        for segment in document[rng.randint(0, len(document) - 1):]:
            segments.append(segment)
            length += len(segment)
            if length >= target_length:
                break
        return segments

    def instances(self, pairs: Sequence[SegmentPair], np_rng: np.random.Generator
                  ) -> InstanceBatch:
        """Masks `[CLS] A [SEP] B [SEP]` of each pair, all at once."""
        pieces = []
        for pair in pairs:
            pieces += (self.cls, pair.tokens_a, self.sep, pair.tokens_b, self.sep)
        a_lengths = np.array([len(p.tokens_a) + 2 for p in pairs], np.int64)
        lengths = a_lengths + [len(p.tokens_b) + 1 for p in pairs]
        starts = np.concatenate([[0], np.cumsum(lengths)])
        masked = self.masker.mask_batch(np.concatenate(pieces), starts, np_rng)
        return InstanceBatch(masked, a_lengths,
                             np.array([p.is_random_next for p in pairs], np.int8))


@dataclasses.dataclass
class InstanceBatch:
    """Training instances: the masked sequences, how many tokens of each have segment
    id 0 (`[CLS] A [SEP]`), and their `next_sentence_labels`."""
    masked: MaskedBatch
    segment_a_lengths: np.ndarray  # [K]
    labels: np.ndarray             # [K]


# ------------------------------------------------------------------ serializing

def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_tag: int, payload: bytes) -> bytes:
    return bytes([field_tag]) + _varint(len(payload)) + payload


def _varint_rows(matrix: np.ndarray) -> list[bytes]:
    """Each row of a non-negative integer matrix as packed protobuf varints."""
    rows, width = matrix.shape
    if matrix.size == 0 or matrix.max() < 0x80:  # one byte a value
        data = matrix.astype(np.uint8).tobytes()
        return [data[r * width:(r + 1) * width] for r in range(rows)]
    if matrix.min() < 0:
        raise ValueError("negative ids cannot be written")
    values = matrix.astype(np.uint64).ravel()
    num_bytes = np.ones(values.shape, np.int64)
    shift = 7
    while shift < 64 and (1 << shift) <= int(values.max()):
        num_bytes += values >= np.uint64(1 << shift)
        shift += 7
    groups = np.arange(num_bytes.max())
    digits = (values[:, None] >> (7 * groups).astype(np.uint64)) & np.uint64(0x7F)
    continued = groups[None, :] < num_bytes[:, None] - 1
    encoded = (digits | (continued.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    data = encoded[groups[None, :] < num_bytes[:, None]].tobytes()
    ends = np.cumsum(num_bytes.reshape(rows, width).sum(axis=1)).tolist()
    return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]


class ExampleEncoder:
    """Serializes pretraining instances as `tf.train.Example` protos, vectorized.

    Writes the same wire format as `tf.train.Example.SerializeToString` (features in
    the original's order, packed values) without building proto objects, and without
    TensorFlow, so worker processes stay light.
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int):
        self.lengths = feature_lengths(max_seq_length, max_predictions_per_seq)
        self._prefixes: dict[tuple[str, int], bytes] = {}

    def _prefix(self, name: str, body_length: int) -> bytes:
        """Everything of a feature's map entry that comes before its packed values."""
        key = (name, body_length)
        if key not in self._prefixes:
            marker = b"\x00" * body_length  # stands for the values while measuring
            values = _length_delimited(0x0A, marker) if body_length else b""
            # Feature.float_list is field 2, Feature.int64_list field 3.
            feature = _length_delimited(0x12 if name in FLOAT_FEATURES else 0x1A, values)
            entry = (_length_delimited(0x0A, name.encode()) + _length_delimited(0x12, feature))
            whole = _length_delimited(0x0A, entry)
            self._prefixes[key] = whole[:len(whole) - body_length]
        return self._prefixes[key]

    def encode(self, batch: InstanceBatch) -> list[bytes]:
        """Serialized examples of a batch, zero-padded to the fixed lengths."""
        masked = batch.masked
        count = len(batch.labels)
        seq_len = self.lengths["input_ids"]
        max_pred = self.lengths["masked_lm_positions"]
        if np.any(masked.lengths > seq_len) or np.any(masked.num_masked > max_pred):
            raise ValueError("an instance is longer than the records' fixed lengths")
        # Row and column of every token, and of every prediction, in the padded arrays.
        rows = np.repeat(np.arange(count), masked.lengths)
        cols = np.arange(len(rows)) - np.repeat(masked.starts[:-1], masked.lengths)
        pred_rows = np.repeat(np.arange(count), masked.num_masked)
        pred_cols = (np.arange(len(pred_rows))
                     - np.repeat(masked.masked_starts[:-1], masked.num_masked))

        def padded(values, width, dtype, rows=rows, cols=cols):
            matrix = np.zeros((count, width), dtype)
            matrix[rows, cols] = values
            return matrix

        columns = {
            "input_ids": _varint_rows(padded(masked.input_ids, seq_len, np.int64)),
            "input_mask": _varint_rows(padded(1, seq_len, np.int8)),
            "segment_ids": _varint_rows(padded(cols >= batch.segment_a_lengths[rows],
                                               seq_len, np.int8)),
            "token_boundary": _varint_rows(padded(masked.token_boundary, seq_len, np.int8)),
            "masked_lm_positions": _varint_rows(padded(
                masked.masked_lm_positions, max_pred, np.int64, pred_rows, pred_cols)),
            "masked_lm_ids": _varint_rows(padded(
                masked.masked_lm_ids, max_pred, np.int64, pred_rows, pred_cols)),
            "masked_lm_weights": [row.tobytes() for row in padded(
                1.0, max_pred, "<f4", pred_rows, pred_cols)],
            "next_sentence_labels": _varint_rows(batch.labels.reshape(count, 1)),
        }
        examples = []
        for row in range(count):
            body = b"".join([self._prefix(name, len(values[row])) + values[row]
                             for name, values in columns.items()])
            examples.append(b"\x0a" + _varint(len(body)) + body)
        return examples


# --------------------------------------------------------------- chunk workers

@dataclasses.dataclass
class ChunkResult:
    index: int
    records: list[bytes]
    num_lines: int
    num_documents: int
    skipped: list[tuple[str, str]]  # (file:line, why) of documents without tokens


def chunk_generators(random_seed: int, chunk_index: int
                     ) -> tuple[random.Random, np.random.Generator]:
    """The generators of one chunk: a function of the seed and the chunk's position
    in the corpus only, so that any number of workers gives the same output."""
    sequence = np.random.SeedSequence([random_seed % (1 << 64), chunk_index])
    py_seed = int.from_bytes(sequence.generate_state(4).tobytes(), "little")
    return random.Random(py_seed), np.random.default_rng(sequence)


class ChunkProcessor:
    """Tokenizes a chunk and turns it into serialized, shuffled instances."""

    def __init__(self, tokenizer_spec: TokenizerSpec, config: PretrainingDataConfig):
        self.config = config
        self.tokenizer = tokenizer_spec.build()
        self.maker = InstanceMaker(self.tokenizer, config)
        self.encoder = ExampleEncoder(config.max_seq_length, config.max_predictions_per_seq)
        sp = self.tokenizer.sp_model
        # Pieces such as "▁1990," that the original re-splits (see tokenization.py):
        # lines with one take the tokenizer's slow path, the rest are encoded directly.
        self._resplit_ids = set() if sp is None else {
            i for i in range(sp.GetPieceSize())
            if len(p := sp.IdToPiece(i)) > 1 and p[-1] == "," and p[-2].isdigit()}

    def preprocess(self, line: str) -> str:
        """The original's line preprocessing: `preprocess_text` with SentencePiece,
        `strip` with WordPiece."""
        if self.tokenizer.sp_model is None:
            return line.strip()
        return self.tokenizer.preprocess(line)

    def encode(self, text: str) -> list[int]:
        """`tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))`, faster."""
        tokenizer = self.tokenizer
        if tokenizer.sp_model is not None:
            ids = tokenizer.sp_model.EncodeAsIds(text)
            if self._resplit_ids.isdisjoint(ids):
                return ids
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    def tokenize(self, documents: Sequence[Document], skipped: list
                 ) -> list[list[np.ndarray]]:
        """Documents as lists of id arrays (one per line with tokens).

        As in the original, a line that preprocesses to nothing (e.g. only combining
        accents) ends a document too. A document none of whose lines has a token is
        left out and reported in `skipped`.
        """
        tokenized = []
        for document in documents:
            segments: list[np.ndarray] = []
            first = 0  # the first line of the current document
            for position, line in enumerate(document.lines):
                text = self.preprocess(line)
                if text:
                    ids = self.encode(text)
                    if ids:
                        segments.append(np.array(ids, np.int32))
                    if position < len(document.lines) - 1:
                        continue
                    position += 1  # the document ends after this line
                if segments:
                    tokenized.append(segments)
                elif position > first:
                    skipped.append((document.where(first), "document without tokens"))
                segments, first = [], position + 1
        return tokenized

    def __call__(self, chunk: Chunk) -> ChunkResult:
        rng, np_rng = chunk_generators(self.config.random_seed, chunk.index)
        skipped: list[tuple[str, str]] = []
        documents = self.tokenize(chunk.documents, skipped)
        serialized: list[bytes] = []
        for _ in range(self.config.dupe_factor if documents else 0):
            pairs = [pair for index in range(len(documents))
                     for pair in self.maker.segment_pairs(documents, index, rng, np_rng)]
            serialized.extend(self.encoder.encode(self.maker.instances(pairs, np_rng)))
        rng.shuffle(serialized)
        num_lines = sum(len(d.lines) for d in chunk.documents)
        return ChunkResult(chunk.index, serialized, num_lines, len(documents), skipped)


_WORKER: ChunkProcessor | None = None


def _init_worker(tokenizer_spec: TokenizerSpec, config: PretrainingDataConfig) -> None:
    global _WORKER
    _WORKER = ChunkProcessor(tokenizer_spec, config)


def _process_in_worker(chunk: Chunk) -> ChunkResult:
    return _WORKER(chunk)


def _ordered_parallel_map(pool, items: Iterable[Chunk], window: int
                          ) -> Iterator[ChunkResult]:
    """Results in input order, with at most `window` chunks in flight, so that reading
    never runs ahead of writing by more than that."""
    pending: collections.deque = collections.deque()
    for item in items:
        pending.append(pool.apply_async(_process_in_worker, (item,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


def default_num_workers() -> int:
    """One worker per CPU this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _start_pool(num_workers: int, tokenizer_spec: TokenizerSpec,
                config: PretrainingDataConfig):
    """Worker processes, forked where possible: they share this process's imported
    modules (TensorFlow among them) instead of importing them again, and never call
    TensorFlow. `gc.freeze` keeps the workers' garbage collector off the inherited
    objects, so that their memory pages stay shared instead of being copied."""
    fork = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else "spawn")
    gc.freeze()
    try:
        return context.Pool(num_workers, initializer=_init_worker,
                            initargs=(tokenizer_spec, config))
    finally:
        gc.unfreeze()


# ---------------------------------------------------------------------- driver

@dataclasses.dataclass
class CreationStats:
    num_instances: int = 0
    num_documents: int = 0
    num_chunks: int = 0
    num_skipped: int = 0  # lines and documents
    seconds: float = 0.0
    output_files: list[str] = dataclasses.field(default_factory=list)

    @property
    def instances_per_second(self) -> float:
        return self.num_instances / max(self.seconds, 1e-9)


def create_pretraining_data(input_files: str | Sequence[str],
                            output_files: str | Sequence[str],
                            tokenizer_spec: TokenizerSpec,
                            config: PretrainingDataConfig = PretrainingDataConfig(),
                            num_workers: int | None = None,
                            log_every_seconds: float = 10.0) -> CreationStats:
    """Writes pretraining TFRecords from text files, as the original script does.

    Args:
      input_files: paths or globs (a string may hold several, comma-separated).
      output_files: paths (comma-separated in a string; `path@N` for N shards);
        instances go to them in turn.
      tokenizer_spec: the vocabulary / SentencePiece model and `do_lower_case`.
      num_workers: worker processes (default: one per CPU); 0 works in this process.
        The output does not depend on it.

    Raises:
      PretrainingDataError: bad settings, an input glob that matches nothing, or no
        usable text at all (then no output file is written).
    """
    config.validate()
    inputs = expand_input_patterns(input_files)
    outputs = expand_output_files(output_files)
    clash = set(map(os.path.abspath, inputs)) & set(map(os.path.abspath, outputs))
    if clash:
        raise PretrainingDataError(f"output_file {sorted(clash)[0]} is also an input")
    num_workers = default_num_workers() if num_workers is None else num_workers
    if num_workers < 0:
        raise PretrainingDataError(f"num_workers must be at least 0, got {num_workers}")
    processor = ChunkProcessor(tokenizer_spec, config)  # also checks the tokenizer files
    logging.info("reading %d input files (%s%s) with %d workers", len(inputs),
                 ", ".join(inputs[:3]), ", ..." if len(inputs) > 3 else "", num_workers)

    line_skips = records.SkipLog("input lines")
    chunks = read_chunks(inputs, config.chunk_bytes, config.max_line_bytes, line_skips)
    stats = CreationStats(output_files=outputs)
    with contextlib.ExitStack() as stack:
        if num_workers == 0:
            results: Iterator[ChunkResult] = map(processor, chunks)
        else:
            pool = stack.enter_context(_start_pool(num_workers, tokenizer_spec, config))
            results = _ordered_parallel_map(pool, chunks, window=num_workers + 1)
        writers = [stack.enter_context(records.atomic_tfrecord_writer(path))
                   for path in outputs]
        _write_all(results, writers, stats, line_skips, log_every_seconds)
        if stats.num_instances == 0:  # the writers then delete their temporary files
            raise PretrainingDataError(
                f"no usable text in {', '.join(inputs)}: no document gave an instance"
                + (f" ({stats.num_skipped} lines or documents skipped)"
                   if stats.num_skipped else ""))
    logging.info("wrote %d instances from %d documents to %d files in %.1f s "
                 "(%.0f instances/s)", stats.num_instances, stats.num_documents,
                 len(outputs), stats.seconds, stats.instances_per_second)
    return stats


def _write_all(results: Iterable[ChunkResult], writers: list, stats: CreationStats,
               line_skips: records.SkipLog, log_every_seconds: float) -> None:
    """Writes the chunks' records to the writers in turn, as the original does;
    reports skipped input and progress."""
    document_skips = records.SkipLog("documents")
    start = last_log = time.monotonic()
    lines = 0
    for result in results:
        for where, why in result.skipped:
            document_skips.skip(where, why)
        for record in result.records:
            writers[stats.num_instances % len(writers)].write(record)
            stats.num_instances += 1
        stats.num_documents += result.num_documents
        stats.num_chunks += 1
        lines += result.num_lines
        if time.monotonic() - last_log >= log_every_seconds:
            last_log = time.monotonic()
            logging.info("%d instances from %d documents (%.0f instances/s)",
                         stats.num_instances, stats.num_documents,
                         stats.num_instances / (last_log - start))
    stats.seconds = time.monotonic() - start
    stats.num_skipped = line_skips.count + document_skips.count
    line_skips.summary(lines + line_skips.count)
    document_skips.summary(stats.num_documents + document_skips.count)


# --------------------------------------------------------------------- reading

def record_lengths(path: str) -> tuple[int, int]:
    """(max_seq_length, max_predictions_per_seq) of the records in `path`."""
    for raw in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(raw.numpy())
        features = example.features.feature
        return (len(features["input_ids"].int64_list.value),
                len(features["masked_lm_positions"].int64_list.value))
    raise PretrainingDataError(f"{path} holds no records")


def _trim_batch(features: dict) -> dict:
    """Cuts the sequence features of a batch to its longest real sequence."""
    trimmed = records.trim_to_length(features)
    length = tf.shape(trimmed["input_ids"])[-1]
    trimmed["token_boundary"] = features["token_boundary"][..., :length]
    return trimmed


def pretraining_dataset(files: str | Sequence[str], batch_size: int, *,
                        max_seq_length: int | None = None,
                        max_predictions_per_seq: int | None = None,
                        is_training: bool = True, seed: int | None = None,
                        drop_remainder: bool = True, shuffle_buffer: int = 10_000,
                        cycle_length: int = 4, trim_padding: bool = False
                        ) -> tf.data.Dataset:
    """Batches of pretraining records with the original feature names.

    Integer features come as int32 (as the original `run_pretraining.py` casts them),
    `masked_lm_weights` as float32; `next_sentence_labels` is [batch, 1].

    Args:
      files: TFRecord paths or globs (comma-separated in a string).
      max_seq_length, max_predictions_per_seq: the records' lengths; read from the
        first record when not given.
      is_training: shuffle files and records (seeded by `seed`) and repeat forever.
      drop_remainder: every batch has `batch_size` examples (TPU, XLA).
      trim_padding: cut `input_ids`, `input_mask`, `segment_ids`, `token_boundary` to
        each batch's longest sequence.
    """
    paths = expand_input_patterns(files)
    if max_seq_length is None or max_predictions_per_seq is None:
        found = record_lengths(paths[0])
        max_seq_length = max_seq_length or found[0]
        max_predictions_per_seq = max_predictions_per_seq or found[1]
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = tf.data.Dataset.from_tensor_slices(paths)
    if is_training:
        dataset = dataset.shuffle(len(paths), seed=seed).repeat()
        dataset = dataset.interleave(
            tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(paths)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        features = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                    for k, v in features.items()}
        return _trim_batch(features) if trim_padding else features

    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)
