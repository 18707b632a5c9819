"""Offset arithmetic of the in-graph tokenizer's `tokenize_with_offsets`: where each
piece of `albert_tf.text.AlbertTextTokenizer` lies in the raw text.

Row-wise operations on ragged batches (cumulative sums, searches, gathers), the length
of each piece's text, the lengths of unknown pieces taken from the older SentencePiece
op's, positions mapped to that op's byte offsets, and each raw code point's share of
the preprocessed text (`preprocessed_lengths`).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.text.unicode_classes import character_classes
from albert_tf.tokenization import SPIECE_UNDERLINE

_BIG = tf.int64.max


def row_cumsum(ragged):
    """Inclusive cumulative sum within each row of a ragged [N, (T)] int tensor."""
    values = tf.cast(ragged.flat_values, tf.int64)
    running = tf.cumsum(values)
    before = tf.concat([[0], running], 0)
    row_offset = tf.gather(before, ragged.row_starts())
    return ragged.with_flat_values(running - tf.gather(row_offset, ragged.value_rowids()))


def search_rows(sorted_rows, values, side: str):
    """Row-wise `searchsorted`: for each value of row i of dense [N, K] `values`, its
    index in row i of ragged `sorted_rows` [N, (O)]."""
    sequence = sorted_rows.to_tensor(default_value=_BIG)
    # A row of `sorted_rows` may be empty, and a batch may have no rows: searchsorted
    # wants at least one column on both sides (a 0 x 0 batch would not reshape).
    sequence = tf.pad(sequence, [[0, 0], [0, 1]], constant_values=_BIG)
    index = tf.searchsorted(sequence, tf.pad(values, [[0, 0], [0, 1]]), side=side,
                            out_type=tf.int64)
    return index[:, :-1]


def gather_rows(ragged, index):
    """ragged[i][index[i, k]] for ragged [N, (O)] and dense index [N, K], the index
    clipped to the row (0 for an empty row)."""
    table = tf.pad(ragged.to_tensor(default_value=0), [[0, 0], [0, 1]])
    last = tf.maximum(ragged.row_lengths() - 1, 0)
    return tf.gather(table, tf.minimum(index, last[:, tf.newaxis]), batch_dims=1)


def piece_units(pieces):
    """Length of each piece's text in bytes, `▁` counting as the one space it stands
    for."""
    return tf.strings.length(
        tf.strings.regex_replace(pieces, SPIECE_UNDERLINE, " "))


def units_of_unknowns(ours_unknown, our_units, theirs_unknown, their_units):
    """`our_units` where our k-th unknown piece of a row takes the length of the k-th
    unknown piece of that row of theirs."""
    def keys(unknown):  # row * 2^32 + rank among the row's unknowns, for each unknown
        flat = tf.cast(unknown.flat_values, tf.int64)
        rank = row_cumsum(unknown.with_flat_values(flat)).flat_values - 1
        key = unknown.value_rowids() * (1 << 32) + rank
        return tf.boolean_mask(key, unknown.flat_values)

    their_keys = keys(theirs_unknown)
    their_lengths = tf.boolean_mask(tf.cast(their_units.flat_values, tf.int64),
                                    theirs_unknown.flat_values)
    our_keys = keys(ours_unknown)
    at = tf.minimum(tf.searchsorted(their_keys, our_keys, out_type=tf.int64),
                    tf.maximum(tf.size(their_keys, tf.int64) - 1, 0))
    padded_keys = tf.concat([their_keys, [-1]], 0)
    padded_lengths = tf.concat([their_lengths, [0]], 0)
    matched = tf.gather(padded_keys, at) == our_keys
    lengths = tf.where(matched, tf.gather(padded_lengths, at), 0)
    units = tf.cast(our_units.flat_values, tf.int64)
    positions = tf.where(ours_unknown.flat_values)
    units = tf.tensor_scatter_nd_update(units, positions, lengths)
    return our_units.with_flat_values(units)


def to_their_bytes(positions, their_ends, byte_starts, byte_ends, side: str):
    """Byte offsets in the preprocessed text of `positions` (in the normalized text) by
    the piece of theirs that holds them: a piece start (`side="right"`) falls in the
    piece ending after it, a piece end (`"left"`) in the piece ending at or after it.
    Counted back from that piece's end, so a leading ▁ the text lacks (the first piece
    of a text) does not shift it."""
    index = search_rows(their_ends, positions, side=side)
    start = gather_rows(byte_starts, index)
    end = gather_rows(byte_ends, index)
    return tf.clip_by_value(end - (gather_rows(their_ends, index) - positions), start, end)


def preprocessed_lengths(texts, lower: bool):
    """For each code point of `texts` [N], the number of bytes it becomes in
    `albert_tf.text.preprocess_text(texts, lower)`, and whether it is a non-space that
    becomes nothing (so belongs to the code point before): [N, (C)] int64 and bool.

    Whitespace: the first of a run between two non-space characters becomes one space,
    the rest nothing; other characters are normalized on their own (NFKD, combining marks dropped,
    lower-cased), which equals normalizing the whole text because the only
    characters NFKD moves across each other are combining marks, and those are dropped.
    """
    c = character_classes()
    chars = tf.strings.unicode_split(texts, "UTF-8")  # [N, (C)]
    flat = chars.flat_values
    rows = chars.value_rowids()
    index = tf.range(tf.size(flat, tf.int64))
    row_start = tf.gather(chars.row_starts(), rows)
    at_row_start = tf.equal(index, row_start)

    def previous(flags):  # the flag of the previous character of the row, else False
        shifted = tf.concat([[False], flags[:-1]], 0)
        return tf.logical_and(shifted, tf.logical_not(at_row_start))

    normalized = tf_text.normalize_utf8(flat, "NFKD")
    normalized = tf.strings.regex_replace(normalized, f"{c['combining']}+", "")
    if lower:
        normalized = tf.strings.lower(normalized, encoding="utf-8")
    lengths = tf.cast(tf.strings.length(normalized), tf.int64)

    is_space = tf.strings.regex_full_match(flat, c["space"])
    non_space = chars.with_flat_values(tf.cast(tf.logical_not(is_space), tf.int64))
    seen = row_cumsum(non_space).flat_values
    after = tf.gather(seen, tf.gather(chars.row_limits() - 1, rows)) - seen
    kept_space = tf.logical_and(
        tf.logical_and(is_space, tf.logical_not(previous(is_space))),
        tf.logical_and(tf.logical_not(at_row_start), after > 0))
    lengths = tf.where(is_space, tf.cast(kept_space, tf.int64), lengths)

    attached = tf.logical_and(tf.equal(lengths, 0), tf.logical_not(is_space))
    return chars.with_flat_values(lengths), chars.with_flat_values(attached)
