"""--distill_augment's copies (`albert_tf.data.augmentation`): which pieces are words
(WordPiece, Chinese characters, SentencePiece), their nearest neighbours in an embedding
table, and the seeded copies of records."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import augmentation, records
from albert_tf.tokenization import FullTokenizer
from tests.helpers.scripts import SPM

VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[unused0]", "good", "##ness", "film", "films",
         "movie", ",", "2", "好", "电", "影", "bad", "dull", "##s", "great"]
SENTENCE = "[CLS] good ##ness film , 2 好 电 影 dull ##s [SEP] [PAD] [PAD]"


@pytest.fixture()
def wordpiece(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return FullTokenizer(vocab_file=str(path), do_lower_case=True)


def test_words_are_whole_pieces_of_letters(wordpiece):
    """A word: a piece of letters (a Chinese character is one) that begins a word and
    that no piece continues; not a special token, a number or punctuation."""
    pieces = augmentation.word_pieces(wordpiece)
    assert [VOCAB[i] for i in np.flatnonzero(pieces.word)] == [
        "good", "film", "films", "movie", "好", "电", "影", "bad", "dull", "great"]
    assert [VOCAB[i] for i in np.flatnonzero(pieces.continues)] == ["##ness", "##s"]
    ids = np.array(wordpiece.convert_tokens_to_ids(SENTENCE.split()))
    assert [VOCAB[i] for i in ids[augmentation.replaceable(ids, pieces)]] == [
        "film", "好", "电", "影"]  # good and dull are continued
    # SentencePiece: "▁un" "be" ... is one word; punctuation after a word ends it
    sp = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    ids = np.array(sp.encode("The unbelievably dull film, 2 hours long."))
    where = augmentation.replaceable(ids, augmentation.word_pieces(sp))
    assert sp.convert_ids_to_tokens(ids[where]) == [
        "\u2581the", "\u2581dull", "\u2581film", "\u2581hours", "\u2581long"]
    # a special token ends the word before it
    ids = np.array([sp.special_id("[CLS]"), *sp.encode("a small delight"),
                    sp.special_id("[SEP]")])
    where = augmentation.replaceable(ids, augmentation.word_pieces(sp))
    assert sp.convert_ids_to_tokens(ids[where]) == ["\u2581a", "\u2581small", "\u2581delight"]


def test_nearest_neighbours_are_the_cosine_nearest_candidates():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 6)) * rng.uniform(0.1, 3, size=(40, 1))  # any norm
    candidates = rng.random(40) < 0.6
    found = augmentation.NearestWords(table, candidates).find([3, 3, 17, 39, 0], 5, chunk=2)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    for i in (0, 3, 17, 39):
        pool = [j for j in np.flatnonzero(candidates) if j != i]
        expected = sorted(pool, key=lambda j: -unit[i] @ unit[j])[:5]
        assert found[i].tolist() == expected, i
    assert sorted(found) == [0, 3, 17, 39]


def _example(ids, label):
    return records.make_example({
        "input_ids": records.int64_feature(ids),
        "input_mask": records.int64_feature([int(i != 0) for i in ids]),
        "segment_ids": records.int64_feature([0] * len(ids)),
        "label_ids": records.int64_feature([label])})


def test_copies_replace_words_by_their_neighbours_seeded_per_record_and_copy(
        wordpiece, tmp_path):
    """Each word of a copy is replaced with the probability by one of its neighbours,
    each as likely, nothing else changed; a pair's copies change its texts in turn; a
    copy is the same whatever else is drawn (seed, record, copy); the records' copies
    come copy by copy, those that changed nothing left out."""
    rng = np.random.default_rng(1)
    table = rng.normal(size=(len(VOCAB) + 3, 8))  # a config's vocabulary may be larger
    ids = np.array(wordpiece.convert_tokens_to_ids(SENTENCE.split()))
    words = augmentation.replaceable(ids, augmentation.word_pieces(wordpiece))
    nearest = augmentation.NearestWords(
        table[:len(VOCAB)], augmentation.word_pieces(wordpiece).word).find(ids[words], 2)

    def augmenter(probability, seed=7, copies=3):
        return augmentation.Augmenter(wordpiece, table, copies, probability, 2, seed)

    every = augmenter(1.0)
    copy = every.copy_of(0, ids, 0)
    assert (copy[~words] == ids[~words]).all()
    assert all(copy[p] in nearest[ids[p]] for p in np.flatnonzero(words))
    half = augmenter(0.5)
    drawn = [half.copy_of(0, ids, c) for c in range(400)]
    assert 0 < sum(d is None for d in drawn) < 50  # (1/2)^4 of them changed nothing
    drawn = np.array([ids if d is None else d for d in drawn])
    changed = (drawn != ids).mean(axis=0)
    assert (changed[~words] == 0).all() and (abs(changed[words] - 0.5) < 0.1).all(), changed
    film = drawn[:, np.flatnonzero(words)[0]]
    shares = [(film == n).mean() / (film != ids[words][0]).mean() for n in nearest[ids[3]]]
    assert abs(shares[0] - 0.5) < 0.1 and abs(sum(shares) - 1) < 1e-9, shares
    # the same (seed, record, copy), the same copy, drawn alone or after others
    np.testing.assert_array_equal(augmenter(0.5).copy_of(0, ids, 123), drawn[123])
    other = augmenter(0.5, seed=8)
    assert sum(np.array_equal(ids if d is None else d, drawn[c]) for c, d in enumerate(
        other.copy_of(0, ids, c) for c in range(40))) < 10  # by chance: about 2 in 40
    # a pair: each copy changes one text, the first, then the second, in turn
    segments = [0] * 7 + [1] * 7  # "... 好 | 电 影 ..."
    pair = [every.copy_of(0, ids, c, segments) for c in range(4)]
    changed = [set(np.flatnonzero(p != ids)) for p in pair]
    assert changed[0] == changed[2] == {3, 6} and changed[1] == changed[3] == {7, 8}
    # the records' copies: copy by copy; a record without a word makes none
    path = str(tmp_path / "train.tf_record")
    numbers = wordpiece.convert_tokens_to_ids("[CLS] 2 , [SEP]".split())
    records.write_records(path, [_example(ids, 1), _example(numbers, 0), _example(ids, 0)])
    made = list(every.records(path))
    assert [(copy, index) for copy, index, _ in made] == [(0, 0), (0, 2), (1, 0), (1, 2),
                                                          (2, 0), (2, 2)]
    for copy, index, record in made:
        feature = tf.train.Example.FromString(record).features.feature
        np.testing.assert_array_equal(feature["input_ids"].int64_list.value,
                                      every.copy_of(index, ids, copy, [0] * len(ids)))
        assert feature["label_ids"].int64_list.value == [1 - index // 2]
        assert feature["input_mask"].int64_list.value == [int(i != 0) for i in ids]
