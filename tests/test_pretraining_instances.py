"""Training instances (`albert_tf.data.pretraining.instances`): pairs, sentence order
and truncation drawn as the original's `create_instances_from_document`."""

import random

import numpy as np
import pytest

from albert_tf.data import pretraining as pt
from albert_tf.data.pretraining import instances as pt_instances
from tests.helpers.masking_checks import SIGMAS, within
from tests.helpers.pretraining_data import config


def test_truncation_counts_match_one_at_a_time_truncation():
    expected = np.zeros([13, 13, 26, 2], np.int64)
    for len_a in range(1, 14):
        for len_b in range(1, 14):
            for max_tokens in range(2, 28):
                a, b = len_a, len_b
                cut_a = cut_b = 0
                while a + b > max_tokens:  # the original: cut the longer, B on ties
                    if a > b:
                        a, cut_a = a - 1, cut_a + 1
                    else:
                        b, cut_b = b - 1, cut_b + 1
                assert pt.truncation_counts(len_a, len_b, max_tokens) == (cut_a, cut_b)
                expected[len_a - 1, len_b - 1, max_tokens - 2] = cut_a, cut_b
    # The same counts for arrays (the instance maker truncates a pass's pairs at once).
    len_a, len_b, max_tokens = np.meshgrid(np.arange(1, 14), np.arange(1, 14),
                                           np.arange(2, 28), indexing="ij")
    cuts = pt.truncation_counts(len_a, len_b, max_tokens)
    np.testing.assert_array_equal(np.stack(cuts, axis=-1), expected)


def test_truncation_cuts_front_or_back_with_equal_chance():
    rng = np.random.default_rng(4)
    tokens = np.arange(10)
    fronts = []
    for _ in range(4000):
        kept = pt_instances._cut(tokens, 3, rng)
        assert len(kept) == 7 and np.all(np.diff(kept) == 1)  # a contiguous slice
        fronts.append(kept[0])
    assert within(np.mean(fronts) / 3, 0.5, 3 * 4000)


def synthetic_documents(num_docs, lines_per_doc, line_length, rng):
    """Documents whose every token id tells (document, position in document)."""
    documents = []
    for d in range(num_docs):
        lengths = rng.integers(1, 2 * line_length, size=lines_per_doc)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        documents.append([np.arange(offsets[i], offsets[i + 1], dtype=np.int32)
                          + 100_000 * (d + 1) for i in range(lines_per_doc)])
    return documents


def origin(tokens):
    """(document, first position, last position) of a run of synthetic ids."""
    docs = set((tokens // 100_000).tolist())
    assert len(docs) == 1, "a segment mixes documents"
    return docs.pop(), int((tokens % 100_000).min()), int((tokens % 100_000).max())


@pytest.mark.parametrize("random_next_sentence", [False, True])
def test_sentence_order_and_next_sentence_labels_mean_what_they_say(
        tokenizer, random_next_sentence):
    maker = pt.InstanceMaker(tokenizer, config(
        max_seq_length=40, random_next_sentence=random_next_sentence, short_seq_prob=0.0))
    rng, np_rng = random.Random(5), np.random.default_rng(5)
    documents = synthetic_documents(30, 12, 6, np_rng)
    kinds = {"in_order": 0, "swapped": 0, "other_doc": 0}
    multi_segment = swapped_or_random = 0
    for _ in range(20):
        for index in range(len(documents)):
            for pair in maker.segment_pairs(documents, index, rng, np_rng):
                doc_a, first_a, last_a = origin(pair.tokens_a)
                doc_b, first_b, last_b = origin(pair.tokens_b)
                assert len(pair.tokens_a) + len(pair.tokens_b) <= 37
                # Each segment is one stretch of its document (ends may be truncated).
                assert last_a - first_a + 1 == len(pair.tokens_a)
                assert last_b - first_b + 1 == len(pair.tokens_b)
                if doc_a != doc_b:
                    kind = "other_doc"
                elif last_a < first_b:
                    kind = "in_order"
                else:
                    assert last_b < first_a
                    kind = "swapped"
                kinds[kind] += 1
                assert pair.is_random_next == (kind != "in_order"), kind
                if random_next_sentence:
                    assert kind != "swapped"
                if kind != "other_doc" or random_next_sentence:
                    multi_segment += 1
                    swapped_or_random += pair.is_random_next
    if random_next_sentence:
        assert kinds["other_doc"] > 0 and kinds["swapped"] == 0
    else:
        # Only a one-segment chunk (a document's last line on its own) takes B from
        # another document in SOP mode.
        assert 0 < kinds["other_doc"] < kinds["swapped"]
    # Among pairs where the coin decides, half are negatives.
    assert within(swapped_or_random / multi_segment, 0.5, multi_segment)


def test_short_seq_prob_gives_uniform_short_targets(tokenizer):
    # One-token lines: a document's first pair has exactly `target` tokens.
    maker = pt.InstanceMaker(tokenizer, config(max_seq_length=64, short_seq_prob=0.3))
    rng, np_rng = random.Random(6), np.random.default_rng(6)
    document = [np.array([i], np.int32) for i in range(200)]
    lengths = []
    for _ in range(3000):
        pair = maker.segment_pairs([document], 0, rng, np_rng)[0]
        lengths.append(len(pair.tokens_a) + len(pair.tokens_b))
    lengths = np.array(lengths)
    max_num_tokens = 61
    assert lengths.min() >= 2 and lengths.max() == max_num_tokens
    short = lengths[lengths < max_num_tokens]
    # P(full) = 1 - p + p / 60 (a short target may also be 61).
    assert within(np.mean(lengths == max_num_tokens), 0.7 + 0.3 / 60, len(lengths))
    assert abs(short.mean() - 31) < SIGMAS * np.sqrt((59 ** 2 - 1) / 12 / len(short))
    never_short = pt.InstanceMaker(tokenizer, config(max_seq_length=64, short_seq_prob=0.0))
    assert all(len(p.tokens_a) + len(p.tokens_b) == max_num_tokens
               for p in never_short.segment_pairs([document], 0, rng, np_rng)[:-1])
