"""Documents for dynamic masking: text in the original format tokenized in the graph,
or tokenized shards written once; each document ragged [N, (T)] int32."""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.data import records, rows
from albert_tf.data.dynamic_masking.masker import tokenizer_pair
from albert_tf.data.graph import graph_function
from albert_tf.data.pretraining import PretrainingDataError, expand_input_patterns
from albert_tf.data.report import DataReport, SkipLog
from albert_tf.text import AlbertTextTokenizer, preprocess_text

# Tokenized shards: one tf.train.Example per document, its sentences' ids concatenated
# and their lengths (ids of `FullTokenizer.encode`, i.e. of `AlbertTextTokenizer`).
TOKEN_IDS = "token_ids"
SENTENCE_LENGTHS = "sentence_lengths"


def _blank_lines(lines, sentencepiece: bool, lower: bool):
    """Document delimiters, as the original decides: a line that is empty after the
    SentencePiece preprocessing (or, with WordPiece, after `str.strip`)."""
    if sentencepiece:
        return tf.equal(tf.strings.length(preprocess_text(lines, lower=lower)), 0)
    from albert_tf.text.unicode_classes import character_classes  # str.isspace, in RE2

    return tf.strings.regex_full_match(lines, f"{character_classes()['space']}*")


def _readable(lines):
    """Whether each line is UTF-8 without a NUL byte: a line that is not is skipped, as
    the Python readers skip it (`check_text` counts them), instead of tokenized into
    what the regex ops leave of it."""
    points = tf.strings.unicode_decode(lines, "UTF-8", errors="ignore")  # [L, (C)]
    whole = tf.equal(tf.strings.length(tf.strings.unicode_encode(points, "UTF-8")),
                     tf.strings.length(lines))
    return whole & ~tf.reduce_any(tf.equal(points, 0), axis=1)


def _split_documents(carry, block):
    """Scan step: the documents that end in a block of lines (a blank line ends one).

    carry: (ids, row lengths) of the sentences of the document still open.
    block: (ids ragged [L, (T)], blank [L]).
    Returns the new carry and the finished documents, ragged [D, (N), (T)].

    In flat ops on the lines' tokens and lengths (a boolean mask of tokens by their
    line's choice): the ragged masks this replaces made ~6x the ops, traced twice
    (tf.data's scan relaxes the carry's shape) at every pipeline's start.
    """
    carry_ids, carry_lengths = carry
    ids, blank = block
    lengths = tf.concat([carry_lengths, ids.row_lengths()], axis=0)  # [L0 + L]
    tokens = tf.concat([carry_ids, ids.flat_values], axis=0)  # the lines' tokens
    blank = tf.concat([tf.zeros_like(carry_lengths, tf.bool), blank], axis=0)
    # The document (numbered within this block) each line belongs to.
    document = tf.cumsum(tf.cast(blank, tf.int64), exclusive=True)
    finished = tf.reduce_sum(tf.cast(blank, tf.int64))
    # Lines without tokens are no sentences (the original drops them).
    is_sentence = (lengths > 0) & ~blank
    done = is_sentence & (document < finished)
    rest = is_sentence & (document >= finished)
    token_line = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), lengths)

    def lines(chosen):  # (the chosen lines' tokens, their lengths)
        return (tf.boolean_mask(tokens, tf.gather(chosen, token_line)),
                tf.boolean_mask(lengths, chosen))

    done_tokens, done_lengths = lines(done)
    # Sentences per finished document, those without any dropped.
    sentences = tf.math.unsorted_segment_sum(
        tf.ones_like(done_lengths), tf.boolean_mask(document, done), finished)
    sentences = tf.boolean_mask(sentences, sentences > 0)
    documents = tf.RaggedTensor.from_nested_row_lengths(
        done_tokens, [sentences, done_lengths], validate=False)  # [D, (N), (T)]
    return lines(rest), documents


def text_documents(path, tokenizer: AlbertTextTokenizer,
                   block_lines: int = 1024) -> tf.data.Dataset:
    """The documents of a text file in the original format (one sentence a line, blank
    lines between documents), tokenized in the graph: int32 ragged [N, (T)] each.

    Lines are read and tokenized in blocks of `block_lines`; only the document being
    read is held across blocks. A line that is not UTF-8 or holds a NUL byte is skipped:
    no sentence, and no document's end.
    """
    lines = tf.data.TextLineDataset(path).concatenate(
        tf.data.Dataset.from_tensors(tf.constant("")))  # the file's end ends a document
    sentencepiece = getattr(tokenizer, "spm_model_file", None) is not None

    def tokenize(block):
        readable = _readable(block)
        block = tf.where(readable, block, "")
        ids = tokenizer.tokenize(block)  # [L, (T)]
        return ids, _blank_lines(block, sentencepiece, tokenizer.do_lower_case) & readable

    blocks = lines.batch(block_lines).map(graph_function(tokenize),
                                          num_parallel_calls=tf.data.AUTOTUNE)
    initial = (tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    return blocks.scan(initial, graph_function(_split_documents)).unbatch()


def tokenized_documents(path, records_per_call: int = 256) -> tf.data.Dataset:
    """The documents of a tokenized shard (`write_tokenized_documents`): int32 ragged
    [N, (T)] each. Records are parsed `records_per_call` at a time."""
    spec = {TOKEN_IDS: tf.io.RaggedFeature(tf.int64),
            SENTENCE_LENGTHS: tf.io.RaggedFeature(tf.int64)}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        ids, lengths = parsed[TOKEN_IDS], parsed[SENTENCE_LENGTHS]  # [R, (F)], [R, (N)]
        # tf.debugging.Assert prints its data: the file, then what is wrong.
        checks = [
            tf.debugging.Assert(tf.reduce_all(lengths.flat_values >= 0), [
                "tokenized shard", path, f"has a negative '{SENTENCE_LENGTHS}'"]),
            tf.debugging.Assert(tf.reduce_all(
                tf.reduce_sum(lengths, axis=1) == tf.cast(ids.row_lengths(), tf.int64)), [
                "tokenized shard", path, f": '{SENTENCE_LENGTHS}' do not add up to the "
                f"number of '{TOKEN_IDS}'"]),
        ]
        with tf.control_dependencies(checks):
            sentences = tf.RaggedTensor.from_row_lengths(
                tf.cast(ids.flat_values, tf.int32), lengths.flat_values)  # [sum N, (T)]
        return tf.RaggedTensor.from_row_lengths(  # [R, (N), (T)]
            sentences, tf.cast(lengths.row_lengths(), tf.int64))

    return tf.data.TFRecordDataset(path).batch(records_per_call).map(
        graph_function(parse), num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def write_tokenized_documents(input_files: str | Sequence[str], output_file: str,
                              tokenizer) -> int:
    """Tokenizes text files once (in the graph) and writes one record per document
    (`token_ids`, `sentence_lengths`), so that dynamic pretraining does not tokenize at
    every pass. Returns the number of documents written."""
    files = expand_input_patterns(input_files)
    check_corpus(files, "text")
    _, tokenizer = tokenizer_pair(tokenizer)
    documents = tf.data.Dataset.from_tensor_slices(files).flat_map(
        graph_function(lambda path: text_documents(path, tokenizer)))

    def serialize():
        # Batches of documents: one conversion to NumPy per batch, not per document.
        for batch in documents.ragged_batch(256).prefetch(tf.data.AUTOTUNE):
            ids = batch.flat_values.numpy()
            sentence_lengths = batch.values.row_lengths().numpy()
            sentence_splits = batch.row_splits.numpy()
            token_splits = np.concatenate([[0], np.cumsum(sentence_lengths)])
            for start, stop in zip(sentence_splits[:-1], sentence_splits[1:]):
                yield records.make_example({
                    TOKEN_IDS: records.int64_feature(
                        ids[token_splits[start]:token_splits[stop]]),
                    SENTENCE_LENGTHS: records.int64_feature(sentence_lengths[start:stop]),
                })

    return records.write_records(output_file, serialize())


def check_text(files: Sequence[str], max_skipped_rows=None) -> DataReport:
    """Reads text files once, counting their lines and skipping (naming file and line)
    those that are not UTF-8 or hold a NUL byte, as `text_documents` skips them; stops
    with `TooManySkipped` past `max_skipped_rows` (`albert_tf.data.report`), and with
    `PretrainingDataError` on a corpus with no text. Whole blocks are checked at once:
    lines one by one only in a block with a bad one."""
    report = DataReport(max_skipped_rows)
    blank = re.compile(rb"^[ \t\r\f\v]*$", re.M)
    with report.reading("input", "the input text"):
        for path in files:
            skips, number = SkipLog("input line", path), 0
            with fileio.open_binary(path) as f:
                for block in _line_blocks(f):
                    body = block[:-1] if block.endswith(b"\n") else block
                    if b"\0" not in block and _is_utf8(block):
                        lines = body.count(b"\n") + 1
                        skips.kept += lines - len(blank.findall(body))
                        number += lines
                        continue
                    for raw in body.split(b"\n"):
                        number += 1
                        _, problem = rows.decode_line(raw)
                        if problem is not None:
                            skips.skip(f"{path}:{number}", problem[0])
                        elif raw.strip():  # blank as the fast path's pattern
                            skips.kept += 1
    if not any(log.kept for log in report.splits["input"]):
        raise PretrainingDataError(
            f"input_file: no text in {', '.join(files)}: the corpus is empty (expected "
            "one sentence per line, blank lines between documents)")
    logging.info("%s", report.summary())
    report.check()
    return report


def _line_blocks(f, size: int = 1 << 24):
    """A binary file in blocks of whole lines (about `size` bytes)."""
    rest = b""
    while True:
        data = f.read(size)
        if not data:
            if rest:
                yield rest
            return
        data = rest + data
        end = data.rfind(b"\n") + 1
        if end:
            yield data[:end]
        rest = data[end:]


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# The text corpora `check_corpus` passed in this process: (path, size, modification
# time) of each file, and the limit. A run makes its training and evaluation streams
# (and each resumed one) from the same corpus: it is read through once.
_TEXT_CHECKED: set = set()


def check_corpus(files: Sequence[str], input_format: str, max_skipped_rows=None) -> None:
    """Fails early, naming the files, on a corpus with nothing to read (which a
    streaming pipeline would otherwise only show as a dataset with no elements); text
    is read once by `check_text` (its bad lines counted against `max_skipped_rows`),
    not again while its files are unchanged."""
    if input_format == "text":
        key = (tuple((path, tf.io.gfile.stat(path).length, tf.io.gfile.stat(path)
                      .mtime_nsec) for path in files), str(max_skipped_rows))
        if key not in _TEXT_CHECKED:
            check_text(files, max_skipped_rows)
            _TEXT_CHECKED.add(key)
        return
    found = False
    for path in files:
        for raw in tf.data.TFRecordDataset(path).take(1):
            features = tf.train.Example.FromString(raw.numpy()).features.feature
            missing = [name for name in (TOKEN_IDS, SENTENCE_LENGTHS) if name not in features]
            if missing:
                raise PretrainingDataError(
                    f"{path} is no tokenized shard: its records have no "
                    f"{' or '.join(repr(m) for m in missing)} feature (found: "
                    f"{', '.join(sorted(features)) or 'none'})")
            found = True
    if not found:
        raise PretrainingDataError(
            f"input_file: no records in {', '.join(files)}: the corpus is empty")
