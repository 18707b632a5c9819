"""`sop_instances_from_documents` (`albert_tf.data.dynamic_masking.pairs`): in-graph
sentence-order (and next-sentence) pairs drawn as the original's
`create_instances_from_document`: targets, swaps, other documents, truncation."""

import math

import numpy as np
import tensorflow as tf

from albert_tf.data import dynamic_masking as dm
from tests.helpers.dynamic_masking import (
    CLS,
    SEP,
    Z,
    assert_proportion,
)


def nested(documents):
    """Python lists [D][N][T] -> int32 ragged [D, (N), (T)]."""
    flat = [t for document in documents for sentence in document for t in sentence]
    return tf.RaggedTensor.from_nested_row_lengths(
        np.array(flat, np.int32),
        [[len(d) for d in documents], [len(s) for d in documents for s in d]])


def test_short_seq_prob_draws_the_target_length():
    # One-token sentences: a chunk ends exactly at the target, so the first instance
    # of each document (the only one holding both token 5 and not the last, 74) is
    # exactly `target` tokens long.
    documents = nested([[[5 + i] for i in range(70)]] * 2000)
    max_num_tokens = 64 - 3
    lengths = {}
    for short_seq_prob in (0.0, 0.3):
        out = dm.sop_instances_from_documents(documents, 6, max_seq_length=64, cls_id=CLS,
                                              sep_id=SEP, short_seq_prob=short_seq_prob)
        ids = out["input_ids"].to_list()
        first = [len(s) - 3 for s in ids if 5 in s and 74 not in s]
        assert len(first) == 2000
        lengths[short_seq_prob] = np.array(first)
        assert max(len(s) for s in ids) <= 64
    assert (lengths[0.0] == max_num_tokens).all()
    short = lengths[0.3][lengths[0.3] < max_num_tokens]
    # target = randint(2, max_num_tokens) with probability short_seq_prob.
    assert_proportion(len(short), 2000, 0.3 * (max_num_tokens - 2) / (max_num_tokens - 1),
                      "short targets")
    assert short.min() >= 2
    uniform_sd = math.sqrt(((max_num_tokens - 1) ** 2 - 1) / 12)
    assert abs(short.mean() - (2 + max_num_tokens) / 2) <= Z * uniform_sd / math.sqrt(len(short))


def test_pairs_are_swapped_half_the_time_and_truncated_at_random_ends():
    # Two 40-token sentences: one chunk, A one sentence, B the other; 80 -> 61 tokens:
    # B loses 10, A 9 (longest first, ties from B), each token from a random end.
    s0, s1 = list(range(1000, 1040)), list(range(2000, 2040))
    out = dm.sop_instances_from_documents(nested([[s0, s1]] * 2000), 8, max_seq_length=64,
                                          cls_id=CLS, sep_id=SEP, short_seq_prob=0.0)
    ids = out["input_ids"].to_list()
    segment_ids = out["segment_ids"].to_list()
    labels = out["next_sentence_labels"].numpy()
    assert len(ids) == 2000
    front_a, front_b = [], []
    for seq, segs, label in zip(ids, segment_ids, labels):
        sep = seq.index(SEP)
        a, b = seq[1:sep], seq[sep + 1:-1]
        assert seq[0] == CLS and seq[-1] == SEP and len(seq) == 64
        assert segs == [0] * (sep + 1) + [1] * (len(seq) - sep - 1)
        assert (len(a), len(b)) == (31, 30)
        assert a == list(range(a[0], a[0] + 31)) and b == list(range(b[0], b[0] + 30))
        # label 1 <=> the second sentence comes first.
        assert label == int(a[0] >= 2000) and (a[0] >= 2000) != (b[0] >= 2000)
        front_a.append(a[0] % 1000)
        front_b.append(b[0] % 1000)
    assert_proportion(labels.sum(), len(labels), 0.5, "swapped")
    for front, removed in ((front_a, 9), (front_b, 10)):
        front = np.array(front)
        assert front.min() >= 0 and front.max() <= removed
        # Binomial(removed, 1/2): mean removed/2, variance removed/4.
        assert abs(front.mean() - removed / 2) <= Z * math.sqrt(removed / 4 / len(front))
        assert abs(front.var() - removed / 4) < 0.15 * removed / 4


def test_a_single_sentence_takes_b_from_the_other_document():
    other = [[20, 21], [22, 23], [24]]
    out = dm.sop_instances_from_documents(
        nested([[[10, 11, 12]]] * 600), 4, max_seq_length=64, cls_id=CLS, sep_id=SEP,
        short_seq_prob=0.0, random_documents=nested([other] * 600))
    ids = out["input_ids"].to_list()
    assert (out["next_sentence_labels"].numpy() == 1).all()
    # B: from a random sentence of the other document on, until the target.
    starts = {20: 0, 22: 0, 24: 0}
    for seq in ids:
        assert seq[:5] == [CLS, 10, 11, 12, SEP]
        b = seq[5:-1]
        assert b == list(range(b[0], 25))
        starts[b[0]] += 1
    for count in starts.values():
        assert_proportion(count, 600, 1 / 3, "random start")


def test_random_next_sentence_is_nsp():
    s0, s1 = list(range(100, 110)), list(range(200, 210))
    other = [list(range(300, 305)), list(range(400, 405))]
    out = dm.sop_instances_from_documents(
        nested([[s0, s1]] * 1000), 5, max_seq_length=64, cls_id=CLS, sep_id=SEP,
        short_seq_prob=0.0, random_documents=nested([other] * 1000),
        random_next_sentence=True)
    labels = out["next_sentence_labels"].numpy()
    actual_next = 0
    for seq, label in zip(out["input_ids"].to_list(), labels):
        sep = seq.index(SEP)
        a, b = seq[1:sep], seq[sep + 1:-1]
        if label == 0:
            assert (a, b) == (s0, s1)
            actual_next += 1
        else:  # B from the other document; A's unused sentence is read again
            assert a in (s0, s1) and b[0] >= 300
    assert len(labels) == actual_next + 2 * (1000 - actual_next)
    assert_proportion(actual_next, 1000, 0.5, "actual next")


def test_one_document_short_of_the_target_is_one_pair(tokenizer):
    sentences = [tokenizer.encode(t) for t in (
        "The first sentence.", "The second one is a little longer.", "Third.",
        "And a fourth sentence here.")]
    labels = []
    for seed in range(40):
        out = dm.sop_instances_from_document(tf.ragged.constant(sentences), seed,
                                             max_seq_length=128, cls_id=CLS, sep_id=SEP)
        (seq,), (label,) = out["input_ids"].to_list(), out["next_sentence_labels"].numpy()
        sep = seq.index(SEP)
        a, b = seq[1:sep], seq[sep + 1:-1]
        # Every sentence once, cut between two sentences; B first when label 1.
        whole = b + a if label else a + b
        assert whole == [t for s in sentences for t in s]
        assert len(a if not label else b) in np.cumsum([len(s) for s in sentences])[:-1]
        labels.append(label)
    assert 0 < sum(labels) < 40
