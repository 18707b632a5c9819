"""How segments of ids become ALBERT's inputs: truncation and packing, defined once.

Truncation rules, as the original google-research/albert code applies them (each takes
and returns segment *lengths*, and works the same on Python ints, NumPy arrays and
TensorFlow tensors, so the data modules and the graph share one definition; the limits,
`max_seq_length` and the like, are Python ints, except in `pack_inputs` and the rules it
applies, where `max_seq_length` may also be an int32 scalar tensor (the TF Hub
preprocessor's `seq_length`, `albert_tf.export.reusable`)):

- `single_length`: one text keeps its first `max_seq_length - 2` pieces
  (`run_classifier.py` with no text B);
- `pair_lengths`: a pair is cut longest-first to a budget (`_truncate_seq_pair`: pop from
  the longer segment, from B on ties, until the pair fits);
- `query_context_lengths`: SQuAD keeps the question's first `max_query_length` pieces and
  gives the context window what remains of `max_seq_length - 3`;
- `choice_lengths`: RACE keeps the last `max_qa_length` pieces of question + option and
  the start of the article that still fits.

Windows over a long text (`--long_text=windows`), defined once here too:

- `window_layout`: which segment of a text or pair that does not fit is read in windows
  (one text: itself; a pair: the longer, B on ties) and how long the windows are, the
  other segment kept whole up to half of `max_seq_length - 3` (cut as `pair_lengths`
  cuts it when longer);
- `window_spans`: where the windows lie over that segment: every `stride` pieces, the
  last ending at its end, each cut moved back to the nearest word start by at most
  `window_back` pieces (`window_spans_tf`: the same in TensorFlow ops, for one text;
  `record_windows`: those the records write, the default stride and the training cap
  applied);
- `choice_window`: a multiple-choice question's windows over its context: what
  `max_seq_length` leaves beside its longest ending as `choice_lengths` keeps it.

`pack_windows_tf` packs the windows of a batch of texts by these rules in TensorFlow
ops (`pair_window_layout`: `window_layout` of a batch of pairs; `batch_window_spans`:
`window_spans_tf` of each text of a batch), for the SavedModel's `serve_text` of a run
that reads windows; tested equal to the records'.

Packing: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, with `input_mask` 1 on every packed
position and `input_type_ids` 0 up to the first `[SEP]`, 1 after. `pack` is the Python
form (lists of ids -> NumPy arrays; `pack_batch` for a batch), `pack_inputs` the
TensorFlow form (ragged batches); all name their outputs `names.MODEL_INPUTS` and are
tested equal.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import names


# ------------------------------------------------------------------ truncation rules
def _ops(*values):
    """(where, minimum, maximum) of TensorFlow when any value is a tensor, else NumPy."""
    if any(isinstance(v, (tf.Tensor, tf.Variable)) for v in values):
        return tf.where, tf.minimum, tf.maximum
    return np.where, np.minimum, np.maximum


def _result(value, *inputs):
    """A Python int back where every input was a Python int."""
    if all(isinstance(v, (int, np.integer)) for v in inputs):
        return int(value)
    return value


def segment_budget(max_seq_length: int, num_segments: int = 2) -> int:
    """How many pieces the segments may hold together: `max_seq_length` less `[CLS]` and
    a `[SEP]` after each segment (`max_seq_length - 3` for a pair)."""
    return max_seq_length - 1 - num_segments


def single_length(length, max_seq_length):
    """Length of one text packed as `[CLS] A [SEP]`: its first `max_seq_length - 2`."""
    _, minimum, _ = _ops(length)
    if isinstance(max_seq_length, tf.Tensor):  # a tensor limit: `length` is one too
        budget = tf.maximum(tf.cast(segment_budget(max_seq_length, 1), length.dtype), 0)
    else:
        budget = max(segment_budget(max_seq_length, 1), 0)
    return _result(minimum(length, budget), length)


def pair_lengths(length_a, length_b, budget):
    """Lengths of A and B after the original's longest-first truncation to `budget`
    tokens (`max_seq_length - 3` for `[CLS] A [SEP] B [SEP]`).

    Popping from the longer one (B on ties) until the pair fits first cuts the longer
    down to the shorter's length, then takes from B and A in turn, so the closed form
    is: nothing when the pair fits; the excess from the longer one when that keeps it
    at least as long as the other; else `ceil(budget / 2)` for A and `floor` for B.
    """
    where, _, maximum = _ops(length_a, length_b, budget)
    if isinstance(length_a, tf.Tensor) or isinstance(length_b, tf.Tensor):
        length_a = tf.convert_to_tensor(length_a)
        length_b = tf.cast(length_b, length_a.dtype)
        budget = tf.cast(budget, length_a.dtype)
    excess = maximum(length_a + length_b - budget, 0)
    difference = length_a - length_b
    a_only = (difference > 0) & (difference >= excess)
    b_only = (difference <= 0) & (-difference >= excess)
    new_a = where(a_only, length_a - excess, where(b_only, length_a, (budget + 1) // 2))
    new_b = where(b_only, length_b - excess, where(a_only, length_b, budget // 2))
    return (_result(new_a, length_a, length_b, budget),
            _result(new_b, length_a, length_b, budget))


def query_context_lengths(query_length, context_length, max_seq_length, max_query_length):
    """SQuAD's `[CLS] question [SEP] context [SEP]`: the question keeps its first
    `max_query_length` pieces, the context (one window) at most what remains of
    `max_seq_length - 3`. With `context_length` at least that, the second length is the
    window size that `doc_stride` windows are cut to."""
    _, minimum, maximum = _ops(query_length, context_length)
    query = minimum(query_length, max_query_length)
    context = minimum(context_length, maximum(segment_budget(max_seq_length) - query, 0))
    return _result(query, query_length, context_length), \
        _result(context, query_length, context_length)


def choice_lengths(context_length, choice_length, max_seq_length, max_qa_length):
    """RACE's `[CLS] article [SEP] question-with-option [SEP]`: the option keeps its
    LAST `max_qa_length` pieces, the article its first pieces that still fit in
    `max_seq_length - 3`. Returns (article length, option length)."""
    _, minimum, maximum = _ops(context_length, choice_length)
    choice = minimum(choice_length, max_qa_length)
    context = minimum(context_length, maximum(segment_budget(max_seq_length) - choice, 0))
    return _result(context, context_length, choice_length), \
        _result(choice, context_length, choice_length)


def kept_lengths(lengths: Sequence, max_seq_length: int) -> list:
    """What each of one or two segments keeps when packed without a task rule: one text
    `single_length`, a pair `pair_lengths` to `max_seq_length - 3`."""
    _check_segments(lengths)
    if len(lengths) == 1:
        return [single_length(lengths[0], max_seq_length)]
    return list(pair_lengths(lengths[0], lengths[1], segment_budget(max_seq_length)))


def whole_length(lengths: Sequence):
    """The packed length of segments of `lengths` uncut: `[CLS]`, their pieces and a
    `[SEP]` after each (the least `max_seq_length` that cuts none of them)."""
    return sum(lengths) + len(lengths) + 1


def packed_length(lengths: Sequence, max_seq_length: int):
    """The packed sequence's length for segments of `lengths`: what they keep, `[CLS]`,
    and a `[SEP]` after each (for sorting or bucketing texts before packing them)."""
    return whole_length(kept_lengths(lengths, max_seq_length))


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """The original `_truncate_seq_pair`: cuts the two lists, in place, longest-first
    until they fit in `max_length` together (their ends are removed)."""
    new_a, new_b = pair_lengths(len(tokens_a), len(tokens_b), max_length)
    del tokens_a[new_a:]
    del tokens_b[new_b:]


# ------------------------------------------------------------------ long texts
# What becomes of a text longer than `max_seq_length` (`--long_text`): cut as the
# original's rules cut it, or read whole in windows.
TRUNCATE = "truncate"
WINDOWS = "windows"
LONG_TEXT_MODES = (TRUNCATE, WINDOWS)
# How much each training window of a text weighs (`--window_weight`): 1, or
# 1 / the text's windows (a text weighs 1 however many windows it makes).
WINDOW_WEIGHT_ONE = "one"
WINDOW_WEIGHT_INVERSE = "inverse"
WINDOW_WEIGHTS = (WINDOW_WEIGHT_ONE, WINDOW_WEIGHT_INVERSE)
# The split whose texts `--max_windows_per_text` caps (the others read every window).
CAPPED_SPLIT = "train"


def capped_windows(windows: Sequence, cap: int) -> list:
    """The `windows` of one text that a training run with `--max_windows_per_text=cap`
    keeps (0: no cap): all of them where they are `cap` or fewer, else `cap` of them
    evenly spaced over the text, in order, the first and the last always among them (1:
    the first alone, the truncating record's start): window
    `round(i * (len(windows) - 1) / (cap - 1))` for i in 0 .. cap - 1, halves rounded
    up. No randomness: a text keeps the same windows in every run."""
    if cap < 0:
        raise ValueError(f"max_windows_per_text must be 0 (no cap) or more, got {cap}")
    windows = list(windows)
    count = len(windows)
    if not cap or count <= cap:
        return windows
    if cap == 1:
        return windows[:1]
    return [windows[(2 * i * (count - 1) + cap - 1) // (2 * (cap - 1))]
            for i in range(cap)]


def record_windows(word_starts, window: int, stride: int | None, cap: int = 0) -> list:
    """Where the records' windows lie over one text's windowed segment: `window_spans`
    every `stride` pieces (None: `default_window_stride`), `capped_windows` of them
    (`cap`: training's `--max_windows_per_text`; 0: all)."""
    return capped_windows(window_spans(word_starts, window,
                                       stride or default_window_stride(window)), cap)


def window_layout(lengths: Sequence, max_seq_length: int):
    """How one text or a pair of segment `lengths` is read in windows: (the index of the
    segment read in windows, or None where everything fits as `pack` packs it; what
    each segment keeps, the windowed one whole; the window's length in pieces).

    A single text that does not fit is windowed, `max_seq_length - 2` pieces a window.
    A pair that does not fit is windowed over its longer segment (B on ties, where
    `pair_lengths` cuts B first); the other keeps what `pair_lengths` would keep of it
    beside a text at least as long as the budget (`max_seq_length - 3`): all of it up to
    half the budget (A ceil, B floor), else that half, its first pieces, and the windows
    get the rest."""
    _check_segments(lengths)
    if len(lengths) == 1:
        window = segment_budget(max_seq_length, 1)
        return (None if lengths[0] <= window else 0), list(lengths), window
    budget = segment_budget(max_seq_length)
    b_windowed, fits, kept_a, kept_b, window = pair_window_layout(*lengths, budget)
    if fits:
        return None, list(lengths), budget
    return int(b_windowed), [int(kept_a), int(kept_b)], int(window)


def pair_window_layout(length_a, length_b, budget):
    """`window_layout` of a pair in closed form, on Python ints, NumPy arrays or
    TensorFlow tensors alike (a batch of pairs): (whether B is the segment read in
    windows (else A), whether the pair fits in `budget` as it is, what A keeps, what B
    keeps (the windowed one all of itself), the window's length (`budget` where the
    pair fits))."""
    where, _, maximum = _ops(length_a, length_b)
    is_tensor = isinstance(length_a, tf.Tensor) or isinstance(length_b, tf.Tensor)
    a_windowed = length_a > length_b  # B on ties
    b_windowed = (tf.logical_not if is_tensor else np.logical_not)(a_windowed)
    fits = length_a + length_b <= budget
    kept_a = where(fits | a_windowed, length_a,
                   pair_lengths(length_a, maximum(length_b, budget), budget)[0])
    kept_b = where(fits | b_windowed, length_b,
                   pair_lengths(maximum(length_a, budget), length_b, budget)[1])
    window = where(fits, budget, budget - where(b_windowed, kept_a, kept_b))
    return b_windowed, fits, kept_a, kept_b, window


def choice_window(longest_ending, max_seq_length: int, max_qa_length: int):
    """The windows' length over a multiple-choice context (`--long_text=windows`): what
    `max_seq_length` leaves after `[CLS]`, 2 x `[SEP]` and the question's longest
    ending (question + option) as `choice_lengths` keeps it (its last `max_qa_length`
    pieces), so that each window fits beside every ending. An int, or a tensor of
    them."""
    _, minimum, _ = _ops(longest_ending)
    return _result(segment_budget(max_seq_length) - minimum(longest_ending, max_qa_length),
                   longest_ending)


def smallest_window(max_seq_length: int, is_pair: bool,
                    max_qa_length: int | None = None) -> int:
    """The shortest window `window_layout` can give a text (`max_seq_length - 2`) or a
    pair (half the budget, the other segment keeping the ceiling of it), or, with
    `max_qa_length`, `choice_window` a multiple-choice context (beside an ending of
    `max_qa_length` pieces): a stride must be smaller."""
    if max_qa_length is not None:
        return choice_window(max_qa_length, max_seq_length, max_qa_length)
    if not is_pair:
        return segment_budget(max_seq_length, 1)
    return segment_budget(max_seq_length) // 2


def default_window_stride(window: int) -> int:
    """The stride of a window of `window` pieces where none is given: half of it (an
    int, or a tensor of them)."""
    _, _, maximum = _ops(window)
    return _result(maximum(1, window // 2), window)


def window_back(window: int, stride: int) -> int:
    """How far (in pieces) a window's start or end moves back to reach a word start:
    half the stride, and at most half what the stride leaves of the window (so that a
    window never starts past the end of the one before, nor at or before its start).
    Ints, or tensors of them."""
    _, minimum, maximum = _ops(window, stride)
    return _result(maximum(0, minimum(stride // 2, (window - stride) // 2)), window, stride)


def _check_window(window: int, stride: int) -> None:
    if not 1 <= stride < window:
        raise ValueError(f"a window stride must be at least 1 and smaller than the window "
                         f"({window} pieces), got {stride}")


def window_spans(word_starts: Sequence[bool], window: int, stride: int
                 ) -> list[tuple[int, int]]:
    """(start, length) of each window over a segment of `len(word_starts)` pieces
    (`word_starts[i]`: piece i begins a word): one window where it fits in `window`
    pieces; else window k starts at `k * stride`, the last is the first that reaches the
    end, and every other ends at `start + window`. A start or end that falls inside a
    word moves back to the word's first piece, by at most `window_back(window, stride)`
    pieces (else it cuts the word). With every piece a word start, these are SQuAD's
    `doc_stride` windows (`albert_tf.data.squad.features.doc_spans`).

    Starts increase and no piece is left out: window k ends at or after
    `k * stride + stride`, at or after where window k + 1 starts (`window_back` is at
    most half of `window - stride`)."""
    _check_window(window, stride)
    count = len(word_starts)
    if count <= window:
        return [(0, count)]
    back = window_back(window, stride)
    # The word starts, sorted; the first piece starts the first window whatever it is.
    marks = np.flatnonzero(np.asarray(word_starts, bool) | (np.arange(count) == 0))

    def snap(position: int) -> int:
        """The last word start at or before `position` if it is at most `back` before."""
        found = int(np.searchsorted(marks, position, side="right"))
        last = int(marks[found - 1]) if found else -1
        return last if last >= position - back else position

    spans, k = [], 0
    while True:
        start = snap(k * stride)
        if start + window >= count:
            spans.append((start, count - start))
            return spans
        spans.append((start, snap(start + window) - start))
        k += 1


def window_spans_tf(word_starts, window, stride):
    """`window_spans` in TensorFlow ops, for one segment: `word_starts` bool [T] ->
    (starts, lengths), int32 [K] each. `window` and `stride` are Python ints (checked),
    or int32 scalar tensors (a pair's window depends on its other text: the caller
    keeps the stride smaller). Each window's start is computed from `k * stride` alone
    (no loop over the windows): the `k` needed are those up to the first whose window
    reaches the end."""
    if isinstance(window, int) and isinstance(stride, int):
        _check_window(window, stride)
    back = window_back(window, stride)
    word_starts = tf.convert_to_tensor(word_starts, tf.bool)
    count = tf.size(word_starts, out_type=tf.int32)
    first = tf.range(count) == 0
    marks = tf.cast(tf.where(word_starts | first)[:, 0], tf.int32)  # [M], sorted
    after_none = tf.concat([[-1], marks], axis=0)  # [M + 1]: -1 where no mark is <= p

    def snap(positions):  # [K] -> [K]
        found = tf.searchsorted(marks, positions, side="right", out_type=tf.int32)
        last = tf.gather(after_none, found)
        return tf.where((last >= 0) & (last >= positions - back), last, positions)

    # Window k starts at or after k * stride - back: it reaches the end once that does.
    needed = tf.maximum(count - window + back, 0)
    starts = snap(tf.range(needed // stride + 2) * stride)  # increasing
    # the windows before the first that reaches the end, and that one
    windows = tf.reduce_sum(tf.cast(starts + window < count, tf.int32)) + 1
    starts = starts[:windows]
    ends = tf.where(tf.range(windows) == windows - 1, count, snap(starts + window))
    return starts, ends - starts


# ------------------------------------------------------------------ packing, Python
def pack(segments: Sequence[Sequence[int]], max_seq_length: int, *, cls_id: int,
         sep_id: int, pad_id: int = 0, pad_to_max_length: bool = True
         ) -> dict[str, np.ndarray]:
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` from lists of ids, truncated first
    (one segment: `single_length`; two: `pair_lengths` to `max_seq_length - 3`).

    Returns int32 `input_word_ids`, `input_mask`, `input_type_ids` of shape [S]: S is
    `max_seq_length` with `pad_to_max_length` (the original records), else the packed
    length.
    """
    word_ids, type_ids = _packed_lists(segments, max_seq_length, cls_id, sep_id)
    size = max_seq_length if pad_to_max_length else len(word_ids)
    padding = size - len(word_ids)
    return {
        names.INPUT_WORD_IDS: np.array(word_ids + [pad_id] * padding, np.int32),
        names.INPUT_MASK: np.array([1] * len(word_ids) + [0] * padding, np.int32),
        names.INPUT_TYPE_IDS: np.array(type_ids + [0] * padding, np.int32),
    }


def pack_batch(rows: Sequence[Sequence[Sequence[int]]], max_seq_length: int, *,
               cls_id: int, sep_id: int, pad_id: int = 0) -> dict[str, np.ndarray]:
    """`pack` on a batch in Python: each row's segments (one or two lists of ids) ->
    int32 `input_word_ids`, `input_mask`, `input_type_ids` [B, S], S the longest packed
    row (`pack_inputs`' batches, for a client that tokenizes itself: a LiteRT file's
    or `serving_default`'s). No rows: [0, 0]."""
    packed = [_packed_lists(segments, max_seq_length, cls_id, sep_id) for segments in rows]
    width = max((len(word_ids) for word_ids, _ in packed), default=0)
    # Python lists, then one array per input: about 0.02 ms for one SST-2 text, half
    # what `pack` and then np.pad per row and input cost.
    return {name: np.array([values + [pad] * (width - len(values)) for values in lists],
                           np.int32).reshape(len(packed), width)
            for name, pad, lists in (
                (names.INPUT_WORD_IDS, pad_id, [w for w, _ in packed]),
                (names.INPUT_MASK, 0, [[1] * len(w) for w, _ in packed]),
                (names.INPUT_TYPE_IDS, 0, [t for _, t in packed]))}


def _packed_lists(segments, max_seq_length: int, cls_id: int, sep_id: int):
    """(word ids, type ids) as lists: `pack`'s sequence before padding."""
    lengths = kept_lengths([len(s) for s in segments], max_seq_length)
    word_ids, type_ids = [cls_id], [0]
    for type_id, (segment, length) in enumerate(zip(segments, lengths)):
        word_ids += [int(i) for i in segment[:length]] + [sep_id]
        type_ids += [type_id] * (length + 1)
    return word_ids, type_ids


def _check_segments(segments) -> None:
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"packing takes one or two segments, got {len(segments)}")


# -------------------------------------------------------------- packing, TensorFlow
def _rows_cut(segment: tf.RaggedTensor, lengths, from_end: bool) -> tf.RaggedTensor:
    """Each row of a ragged [B, (T)] tensor cut to its first (or last) `lengths[i]` ids,
    as one gather of the kept positions (a few ops to trace and run, where comparing
    ragged positions broadcasts ragged shapes: hundreds)."""
    row_lengths = segment.row_lengths()
    kept = tf.clip_by_value(tf.cast(lengths, row_lengths.dtype), 0, row_lengths)
    starts = segment.row_splits[1:] - kept if from_end else segment.row_splits[:-1]
    positions = tf.ragged.range(starts, starts + kept).values
    return tf.RaggedTensor.from_row_lengths(tf.gather(segment.values, positions), kept,
                                            validate=False)


def take_first(segment: tf.RaggedTensor, lengths) -> tf.RaggedTensor:
    """The first `lengths[i]` ids of each row of a ragged [B, (T)] tensor."""
    return _rows_cut(segment, lengths, from_end=False)


def take_last(segment: tf.RaggedTensor, lengths) -> tf.RaggedTensor:
    """The last `lengths[i]` ids of each row of a ragged [B, (T)] tensor."""
    return _rows_cut(segment, lengths, from_end=True)


def pack_ragged(segments, *, cls_id: int, sep_id: int):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` from segments already cut to size:
    int32 ragged [B, (T)] each -> (word ids, type ids), int32 ragged [B, (S)], without
    padding (for pipelines that pad later, or never)."""
    _check_segments(segments)
    batch = segments[0].nrows()

    def column(value):  # [B, 1] ragged
        return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch, 1]), value))

    pieces, types = [column(cls_id)], [column(0)]
    for type_id, segment in enumerate(segments):
        pieces += [segment, column(sep_id)]
        types += [tf.zeros_like(segment) + type_id, column(type_id)]
    return tf.concat(pieces, axis=1), tf.concat(types, axis=1)  # [B, (S)] each


def pack_inputs(segments, max_seq_length: int, *, cls_id: int, sep_id: int,
                pad_id: int = 0, pad_to_max_length: bool = False) -> dict:
    """`pack` on a batch: ragged int ids [B, (T)] per segment -> int32
    `input_word_ids`, `input_mask`, `input_type_ids` [B, S], truncated as `pack`. S is
    the batch's longest packed length, or `max_seq_length` with `pad_to_max_length`
    (a Python int, or an int32 scalar tensor: then S is unknown when traced).
    (`pack_dense` on each segment's ids and row boundaries.)
    """
    _check_segments(segments)
    return pack_dense([(s.values, s.row_splits) for s in segments], max_seq_length,
                      cls_id=cls_id, sep_id=sep_id, pad_id=pad_id,
                      pad_to_max_length=pad_to_max_length)


def pack_dense(segments, max_seq_length: int, *, cls_id: int, sep_id: int,
               pad_id: int = 0, pad_to_max_length: bool = False) -> dict:
    """The packing of `pack_inputs` in dense ops alone (range, compare, gather, select:
    no ragged ops), so that LiteRT's built-in operators run it too
    (`albert_tf.export.tflite_text`), and a graph holds about 160 ops for a pair where
    ragged concatenation and padding took about 1,600 (ten times the time to trace,
    and ops to run at every request).

    `segments`: one or two (values [F] int, row_splits [B + 1] int) pairs, a ragged batch
    as its flat ids and row boundaries. Returns `pack_inputs`' int32 `input_word_ids`,
    `input_mask`, `input_type_ids` [B, S], S the batch's longest packed length, or
    `max_seq_length` with `pad_to_max_length`.
    """
    _check_segments(segments)
    starts = [tf.cast(splits[:-1], tf.int32)[:, None] for _, splits in segments]  # [B, 1]
    lengths = [tf.cast(splits[1:] - splits[:-1], tf.int32) for _, splits in segments]
    kept = [k[:, None] for k in kept_lengths(lengths, max_seq_length)]  # [B, 1] each
    total = sum(kept) + len(segments) + 1  # [B, 1]
    if pad_to_max_length:
        width = max_seq_length if isinstance(max_seq_length, int) else \
            tf.cast(max_seq_length, tf.int32)
    else:
        width = tf.reduce_max(tf.concat([total[:, 0], [0]], axis=0))
    positions = tf.range(width)[None, :]  # [1, S]
    word_ids = tf.where(positions == 0, cls_id, pad_id) + tf.zeros_like(total)
    type_ids = tf.zeros_like(word_ids)
    first = tf.ones_like(total)  # where the segment's pieces start: after [CLS]
    for type_id, ((values, _), start, length) in enumerate(zip(segments, starts, kept)):
        values = tf.cast(values, tf.int32)
        inside = (positions >= first) & (positions < first + length)
        # A position outside the segment reads the one value appended past its end
        # (so that an empty batch of pieces still gathers from something).
        index = tf.where(inside, start + positions - first, tf.size(values))
        pieces = tf.gather(tf.concat([values, [pad_id]], axis=0), index)
        separator = positions == first + length
        word_ids = tf.where(inside, pieces, tf.where(separator, sep_id, word_ids))
        if type_id:
            type_ids = tf.where(inside | separator, type_id, type_ids)
        first = first + length + 1
    return {
        names.INPUT_WORD_IDS: word_ids,
        names.INPUT_MASK: tf.cast(positions < total, tf.int32),
        names.INPUT_TYPE_IDS: type_ids,
    }


def batch_window_spans(word_starts, window, stride: int | None):
    """`window_spans_tf` of each text of a batch: `word_starts` bool ragged [B, (T)],
    `window` int32 [B] (each text's), `stride` a Python int or None (each text's
    `default_window_stride`) -> (starts, lengths) int32 ragged [B, (K)] each."""
    strides = default_window_stride(window) if stride is None else \
        tf.fill(tf.shape(window), stride)
    spec = tf.RaggedTensorSpec([None], tf.int32, ragged_rank=0)
    return tf.map_fn(lambda row: window_spans_tf(*row), (word_starts, window, strides),
                     fn_output_signature=(spec, spec))


def pack_windows_tf(segments, word_starts, max_seq_length: int, *, stride: int | None,
                    cls_id: int, sep_id: int, pad_id: int = 0):
    """`sentence_records.pack_windows` on a batch, in TensorFlow ops: each text (or
    pair) of ragged int ids [B, (T)] per segment -> the windows of all of them as one
    batch, packed as `pack_inputs` packs (int32 `input_word_ids`, `input_mask`,
    `input_type_ids` [W, S]), and `row_splits` int64 [B + 1]: text b's windows are
    rows `row_splits[b]` to `row_splits[b + 1]` (one at least: a text that fits is
    its one record, packed as `pack_inputs` packs it).

    The rules are those of the records: `pair_window_layout` (a pair's longer
    segment in windows, the other kept whole up to half) and `window_spans_tf` per
    text (every `stride` pieces, default half the window; cuts moved back to a word
    start). `word_starts(ids)`: bool of the same shape as ragged int ids, whether each
    piece begins a word (`FullTokenizer.word_start_table`)."""
    _check_segments(segments)
    lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
    batch = segments[0].nrows(out_type=tf.int32)
    if len(segments) == 1:
        windowed = [tf.ones([batch], tf.bool)]
        kept = lengths
        window = tf.fill([batch], segment_budget(max_seq_length, 1))
        flags = word_starts(segments[0])
    else:
        b_windowed, _, kept_a, kept_b, window = pair_window_layout(
            *lengths, segment_budget(max_seq_length))
        windowed = [tf.logical_not(b_windowed), b_windowed]
        kept = [kept_a, kept_b]
        # the windowed segment's word starts: B's rows where B is windowed, else A's
        flags = tf.gather(tf.concat([word_starts(s) for s in segments], axis=0),
                          tf.range(batch) + batch * tf.cast(b_windowed, tf.int32))
    starts, sizes = batch_window_spans(flags, window, stride)
    text = tf.cast(starts.value_rowids(), tf.int32)  # [W]: the text of each window
    cut = []
    for segment, is_windowed, length in zip(segments, windowed, kept):
        # a window's piece of the windowed segment, else what the other keeps
        here = tf.gather(is_windowed, text)
        start = tf.where(here, starts.values, 0)
        size = tf.where(here, sizes.values, tf.gather(length, text))
        first = tf.gather(tf.cast(segment.row_splits[:-1], tf.int32), text) + start
        positions = tf.ragged.range(first, first + size)
        cut.append((tf.gather(segment.values, positions.values), positions.row_splits))
    packed = pack_dense(cut, max_seq_length, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
    return packed, starts.row_splits
