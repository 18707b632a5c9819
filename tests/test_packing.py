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
