"""Truncation and packing (`albert_tf.packing`): the original's rules, and the Python and
TensorFlow forms giving the same inputs."""

import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import names, packing

CLS, SEP = 2, 3


def original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original `_truncate_seq_pair` loop, written out as the reference."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def original_pack(a, b, max_len):
    """The original `convert_single_example` packing of ids (pad 0)."""
    a, b = list(a), (list(b) if b is not None else None)
    if b is None:
        a = a[:max_len - 2]
        ids, types = [CLS] + a + [SEP], [0] * (len(a) + 2)
    else:
        original_truncate_seq_pair(a, b, max_len - 3)
        ids, types = [CLS] + a + [SEP] + b + [SEP], [0] * (len(a) + 2) + [1] * (len(b) + 1)
    padding = [0] * (max_len - len(ids))
    return ids + padding, [1] * len(ids) + padding, types + padding


CASES = [(a, b, m) for a in range(0, 12) for b in range(0, 12) for m in range(0, 14)]


def test_pair_lengths_equal_the_originals_loop_on_ints_arrays_and_tensors():
    want = []
    for a, b, m in CASES:
        seq_a, seq_b = list(range(a)), list(range(b))
        original_truncate_seq_pair(seq_a, seq_b, m)
        want.append((len(seq_a), len(seq_b)))
    assert [packing.pair_lengths(a, b, m) for a, b, m in CASES] == want
    a, b, m = (np.array(x) for x in zip(*CASES))
    for budget in (m, tf.constant(m)):
        got_a, got_b = packing.pair_lengths(tf.constant(a), tf.constant(b), budget)
        assert list(zip(got_a.numpy().tolist(), got_b.numpy().tolist())) == want
    got_a, got_b = packing.pair_lengths(a, b, m)
    assert list(zip(got_a.tolist(), got_b.tolist())) == want
    assert type(packing.pair_lengths(5, 4, 6)[0]) is int


def test_truncate_seq_pair_cuts_the_ends_longest_first():
    a, b = list(range(7)), list(range(4))
    packing.truncate_seq_pair(a, b, 8)
    assert (a, b) == ([0, 1, 2, 3], [0, 1, 2, 3])
    a, b = list(range(5)), list(range(5))
    packing.truncate_seq_pair(a, b, 7)
    assert (len(a), len(b)) == (4, 3)  # ties pop from the second


def test_squad_and_race_rules():
    # SQuAD: the question keeps its start, the window what remains of max - 3.
    assert packing.query_context_lengths(70, 500, 128, 64) == (64, 61)
    assert packing.query_context_lengths(5, 10, 128, 64) == (5, 10)
    assert packing.query_context_lengths(5, 10**9, 128, 64) == (5, 120)  # window size
    # RACE: the option keeps its last max_qa_length, the article what still fits.
    assert packing.choice_lengths(500, 200, 512, 128) == (381, 128)
    assert packing.choice_lengths(10, 5, 512, 128) == (10, 5)
    assert packing.choice_lengths(600, 20, 64, 128) == (41, 20)
    q, c = (tf.constant(x, tf.int64) for x in ([70, 5, 5], [500, 10, 10**9]))
    got = packing.query_context_lengths(q, c, 128, 64)
    assert [g.numpy().tolist() for g in got] == [[64, 5, 5], [61, 10, 120]]
    got = packing.choice_lengths(tf.constant([500, 10, 600]), tf.constant([200, 5, 20]),
                                 512, 128)
    assert [g.numpy().tolist() for g in got] == [[381, 10, 489], [128, 5, 20]]
    assert packing.single_length(600, 512) == 510
    assert packing.single_length(tf.constant([600, 3]), 512).numpy().tolist() == [510, 3]


def random_segments(seed, count=24):
    rng = random.Random(seed)
    return [[rng.randrange(5, 100) for _ in range(rng.randrange(0, 15))]
            for _ in range(count)]


@pytest.mark.parametrize("num_segments", [1, 2])
def test_pack_and_pack_inputs_equal_the_originals_packing(num_segments):
    a, b = random_segments(0), random_segments(1)
    segments = [a, b][:num_segments]
    max_len = 16
    ragged = [tf.ragged.constant(s, tf.int32) for s in segments]
    packed = packing.pack_inputs(ragged, max_len, cls_id=CLS, sep_id=SEP,
                                 pad_to_max_length=True)
    graph = {k: v.numpy() for k, v in packed.items()}
    assert sorted(graph) == sorted(names.MODEL_INPUTS)
    # A batch packed in Python equals the graph's batch padded to its longest row.
    batch = packing.pack_batch(list(zip(*segments)), max_len, cls_id=CLS, sep_id=SEP)
    longest = packing.pack_inputs(ragged, max_len, cls_id=CLS, sep_id=SEP)
    for name in names.MODEL_INPUTS:
        np.testing.assert_array_equal(batch[name], longest[name].numpy(), err_msg=name)
        assert batch[name].dtype == np.int32
    for i in range(len(a)):
        want = original_pack(a[i], b[i] if num_segments == 2 else None, max_len)
        python = packing.pack([s[i] for s in segments], max_len, cls_id=CLS, sep_id=SEP)
        for name, values in zip(names.MODEL_INPUTS, want):
            assert python[name].tolist() == values, (i, name)
            assert python[name].dtype == np.int32
            assert graph[name][i].tolist() == values, (i, name)


def test_packing_pads_to_the_batch_or_to_max_length():
    segments = [tf.ragged.constant([[7, 8], [9]])]
    packed = packing.pack_inputs(segments, 10, cls_id=CLS, sep_id=SEP)
    np.testing.assert_array_equal(packed["input_word_ids"], [[2, 7, 8, 3], [2, 9, 3, 0]])
    np.testing.assert_array_equal(packed["input_mask"], [[1, 1, 1, 1], [1, 1, 1, 0]])
    padded = packing.pack_inputs(segments, 10, cls_id=CLS, sep_id=SEP, pad_id=1,
                                 pad_to_max_length=True)
    np.testing.assert_array_equal(padded["input_word_ids"][0], [2, 7, 8, 3] + [1] * 6)
    short = packing.pack([[7, 8]], 10, cls_id=CLS, sep_id=SEP, pad_to_max_length=False)
    assert short["input_word_ids"].tolist() == [2, 7, 8, 3]
    for pack in (packing.pack, packing.pack_inputs):
        with pytest.raises(ValueError, match="one or two segments"):
            pack([], 10, cls_id=CLS, sep_id=SEP)
    assert packing.pack_batch([], 10, cls_id=CLS, sep_id=SEP)["input_mask"].shape == (0, 0)


def test_take_first_and_take_last():
    ragged = tf.ragged.constant([[1, 2, 3, 4], [5], []])
    assert packing.take_first(ragged, [2, 1, 0]).to_list() == [[1, 2], [5], []]
    assert packing.take_last(ragged, [2, 1, 0]).to_list() == [[3, 4], [5], []]
    assert packing.take_last(ragged, tf.constant([9, 0, 0])).to_list() == [[1, 2, 3, 4], [],
                                                                           []]


def test_packed_length_is_the_length_pack_gives():
    a, b = random_segments(2), random_segments(3)
    for segments in ([a], [a, b]):
        for max_len in (5, 9, 16, 40):
            graph = packing.packed_length(
                [tf.constant([len(s) for s in seg], tf.int64) for seg in segments], max_len)
            for i in range(len(a)):
                rows = [seg[i] for seg in segments]
                want = len(packing.pack(rows, max_len, cls_id=CLS, sep_id=SEP,
                                        pad_to_max_length=False)["input_word_ids"])
                assert packing.packed_length([len(r) for r in rows], max_len) == want
                assert int(graph[i]) == want


def test_pack_ragged_packs_without_cutting_or_padding():
    a = tf.ragged.constant([[5, 6, 7], []], tf.int32)
    b = tf.ragged.constant([[8], [9, 10]], tf.int32)
    word_ids, type_ids = packing.pack_ragged([a, b], cls_id=CLS, sep_id=SEP)
    assert word_ids.to_list() == [[2, 5, 6, 7, 3, 8, 3], [2, 3, 9, 10, 3]]
    assert type_ids.to_list() == [[0, 0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]
    for i in range(2):  # the rows pack gives, without its padding
        want = packing.pack([a[i].numpy().tolist(), b[i].numpy().tolist()], 100,
                            cls_id=CLS, sep_id=SEP, pad_to_max_length=False)
        assert word_ids[i].numpy().tolist() == want["input_word_ids"].tolist()
        assert type_ids[i].numpy().tolist() == want["input_type_ids"].tolist()
    single, _ = packing.pack_ragged([a], cls_id=CLS, sep_id=SEP)
    assert single.to_list() == [[2, 5, 6, 7, 3], [2, 3]]


def test_segment_budget_is_what_the_special_tokens_leave():
    for max_len in (3, 16, 512):
        assert packing.segment_budget(max_len, 1) == max_len - 2  # [CLS] A [SEP]
        assert packing.segment_budget(max_len) == max_len - 3     # [CLS] A [SEP] B [SEP]
        assert packing.packed_length([10**6], max_len) == max_len
        assert packing.packed_length([10**6, 10**6], max_len) == max_len


# ------------------------------------------------------------- windows over long texts
def test_window_layout_windows_the_longer_text_beside_the_other_kept_to_half():
    # a single text: windows of max_seq_length - 2 where it does not fit
    assert packing.window_layout([14], 16) == (None, [14], 14)
    assert packing.window_layout([15], 16) == (0, [15], 14)
    # a pair that fits is packed whole, as `pack` packs it
    assert packing.window_layout([6, 7], 16) == (None, [6, 7], 13)
    # budget 13: B the longer, A kept whole (4 <= 6) -> windows of 9 over B
    assert packing.window_layout([4, 40], 16) == (1, [4, 40], 9)
    # A longer than half (ceil 7): cut to 7 as pair_lengths cuts it -> windows of 6
    assert packing.window_layout([20, 40], 16) == (1, [7, 40], 6)
    # A the longer: B kept whole up to floor(13 / 2) = 6, A windowed
    assert packing.window_layout([40, 3], 16) == (0, [40, 3], 10)
    assert packing.window_layout([40, 30], 16) == (0, [40, 6], 7)
    # ties: B, which pair_lengths cuts first
    assert packing.window_layout([30, 30], 16) == (1, [7, 30], 6)
    # what is kept of the other text is what the truncation keeps beside a long text
    for a, b in ((4, 40), (20, 40), (40, 3), (40, 30), (30, 30)):
        windowed, kept, window = packing.window_layout([a, b], 16)
        other = 1 - windowed
        assert kept[other] == packing.pair_lengths(a, b, 13)[other]
        assert kept[other] + window == 13
    assert packing.smallest_window(16, False) == 14 and packing.smallest_window(16, True) == 6


def test_window_spans_with_every_piece_a_word_are_squads_doc_stride_windows():
    from albert_tf.data.squad.features import doc_spans

    for count in range(1, 60):
        for window, stride in ((8, 4), (10, 3), (10, 9), (7, 1), (30, 15)):
            assert packing.window_spans([True] * count, window, stride) == \
                doc_spans(count, window, stride), (count, window, stride)


def test_window_spans_cut_at_word_starts_where_near():
    # words of 3 pieces (starts at 0, 3, 6, ...), 30 pieces, windows of 10 every 5:
    # back = min(5 // 2, (10 - 5) // 2) = 2 pieces at most
    starts = [i % 3 == 0 for i in range(30)]
    assert packing.window_spans(starts, 10, 5) == [(0, 9), (3, 9), (9, 9), (15, 9),
                                                   (18, 9), (24, 6)]
    # nominal starts 5, 10, 15, 20, 25 move back to 3, 9, 15, 18, 24; ends 10 to 9 ...
    for start, length in packing.window_spans(starts, 10, 5)[:-1]:
        assert starts[start] and starts[start + length]
    # a word longer than the window is cut where the windows fall (nothing near)
    long_word = [True] + [False] * 24 + [True] * 5
    assert packing.window_spans(long_word, 10, 5) == [(0, 10), (5, 10), (10, 10),
                                                      (15, 10), (20, 10)]
    # the stride checked: smaller than the window, at least 1
    for stride in (0, 10, 11):
        with pytest.raises(ValueError, match="smaller than the window"):
            packing.window_spans(starts, 10, stride)


def test_window_spans_cover_the_text_and_equal_their_tensorflow_form():
    rng = random.Random(5)
    for _ in range(400):
        count, window = rng.randint(0, 70), rng.randint(2, 24)
        stride = rng.randint(1, window - 1)
        density = rng.choice([0.1, 0.4, 0.8, 1.0])
        starts = [rng.random() < density for _ in range(count)]
        spans = packing.window_spans(starts, window, stride)
        assert spans[0][0] == 0 and sum(spans[-1]) == count
        assert all(length <= window for _, length in spans)
        for (start, length), (following, _) in zip(spans, spans[1:]):
            assert start < following <= start + length  # no piece left out
            # a cut moves back by window_back at most: starts are a stride apart, +- that
            assert following - start <= stride + packing.window_back(window, stride)
        got_starts, got_lengths = packing.window_spans_tf(tf.constant(starts, tf.bool),
                                                          window, stride)
        assert list(zip(got_starts.numpy().tolist(), got_lengths.numpy().tolist())) == \
            spans, (starts, window, stride)
    # traced once, for texts of any length (as a SavedModel would hold it)
    traced = tf.function(lambda starts: packing.window_spans_tf(starts, 14, 7),
                         input_signature=[tf.TensorSpec([None], tf.bool)])
    for count in (0, 5, 14, 15, 40, 100):
        starts = [rng.random() < 0.6 for _ in range(count)]
        got_starts, got_lengths = traced(tf.constant(starts, tf.bool))
        assert list(zip(got_starts.numpy().tolist(), got_lengths.numpy().tolist())) == \
            packing.window_spans(starts, 14, 7)
