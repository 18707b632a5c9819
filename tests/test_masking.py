"""Masked-LM targets (`albert_tf.data.masking`): the original's rules (n-gram lengths,
budget, start pieces, whole words, 80/10/10) on the shared fixtures."""

import numpy as np
import pytest

from albert_tf.data import masking
from tests.helpers.masking_checks import SIGMAS, within, words_of
from tests.helpers.paths import ALICE

CLS, SEP, MASK = 2, 3, 4


@pytest.fixture(scope="module")
def alice_segments(tokenizer):
    """The fixture's lines as id arrays (the sentences the tests mask)."""
    lines = ALICE.read_text(encoding="utf-8").splitlines()
    return [np.array(tokenizer.encode(line), np.int32) for line in lines if line.strip()]


def test_ngram_probabilities_are_proportional_to_one_over_n():
    np.testing.assert_allclose(masking.ngram_probabilities(3), np.array([6, 3, 2]) / 11)
    np.testing.assert_allclose(masking.ngram_probabilities(3, favor_shorter=False),
                               np.array([2, 3, 6]) / 11)
    np.testing.assert_allclose(masking.ngram_probabilities(1), [1.0])
    with pytest.raises(ValueError, match="ngram must be at least 1"):
        masking.ngram_probabilities(0)


def test_num_to_predict_rounds_half_to_even_and_caps():
    assert masking.num_to_predict(10, 0.15, 20) == 2   # 1.5 -> 2
    assert masking.num_to_predict(30, 0.15, 20) == 4   # 4.5 -> 4 (Python's round)
    assert masking.num_to_predict(3, 0.15, 20) == 1    # at least one
    assert masking.num_to_predict(512, 0.15, 20) == 20  # max_predictions_per_seq
    assert masking.num_to_predict(512, 0.0, 20) == 0


@pytest.mark.parametrize("piece, starts", [
    ("▁the", True), ("ing", False), ("Ing", False), ("<unk>", True), (".", True),
    ("..", False), ("-ing", False), ("'s", True), ("1990", True), ("é", True),
    ("▁", True), ("[MASK]", False),
])
def test_sentencepiece_start_piece_rule_of_the_original(piece, starts):
    # The apostrophe is missing from the original's punctuation set, so "'s" starts a
    # word; digits and non-English letters always start one.
    assert masking.is_start_piece_sentencepiece(piece) is starts


def test_start_piece_table_matches_the_rule_for_every_piece(tokenizer):
    table = masking.start_piece_table(tokenizer)
    assert table.shape == (tokenizer.vocab_size,)
    expected = [masking.is_start_piece_sentencepiece(tokenizer.sp_model.IdToPiece(i))
                for i in range(tokenizer.vocab_size)]
    assert table.tolist() == expected
    assert 0.05 < 1 - table.mean() < 0.95  # both kinds occur


def test_draw_ngram_lengths_follow_the_probabilities():
    rng = np.random.default_rng(0)
    for favor_shorter in (True, False):
        p = masking.ngram_probabilities(4, favor_shorter)
        draws = masking.draw_ngram_lengths(rng, p, 20_000)
        assert set(np.unique(draws)) == {1, 2, 3, 4}
        for n in range(1, 5):
            assert within(np.mean(draws == n), p[n - 1], len(draws)), (favor_shorter, n)


def test_chosen_span_lengths_are_proportional_to_one_over_n():
    # Many one-piece words and a small budget: collisions and budget cuts are rare, so
    # the chosen n-gram lengths show the sampling distribution itself.
    rng = np.random.default_rng(1)
    num_words, budget = 20_000, 300
    word_starts = list(range(num_words + 1))
    p = masking.ngram_probabilities(3)
    lengths = []
    for _ in range(20):
        order = rng.permutation(num_words).tolist()
        draws = masking.draw_ngram_lengths(rng, p, num_words).tolist()
        spans = masking.choose_spans(word_starts, order, draws, budget)
        assert sum(b - a for a, b in spans) == budget
        lengths += [b - a for a, b in spans]
    lengths = np.array(lengths)
    for n in (1, 2, 3):
        assert within(np.mean(lengths == n), p[n - 1], len(lengths)), n


def test_chosen_spans_respect_budget_and_never_overlap():
    rng = np.random.default_rng(2)
    for _ in range(300):
        sizes = rng.integers(1, 4, size=rng.integers(1, 40))  # pieces per word
        word_starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        budget = int(rng.integers(1, 12))
        order = rng.permutation(len(sizes)).tolist()
        draws = rng.integers(1, 4, size=len(sizes)).tolist()
        spans = masking.choose_spans(word_starts, order, draws, budget)
        words = [w for a, b in spans for w in range(a, b)]
        assert len(words) == len(set(words))
        assert sum(word_starts[b] - word_starts[a] for a, b in spans) <= budget
        assert all(1 <= b - a <= 3 for a, b in spans)


def test_token_boundary_and_words_follow_the_original(tokenizer):
    masker = masking.Masker(tokenizer)
    pieces = ["[CLS]", "▁the", "re", "fore", "[SEP]", "ing", "▁a", ",", "[SEP]"]
    ids = np.array(tokenizer.convert_tokens_to_ids(pieces))
    boundary, special = masker.token_boundary(ids)
    assert boundary.tolist() == [1, 1, 0, 0, 1, 0, 1, 1, 1]
    positions, word_starts = masker.words(ids, special)
    assert positions.tolist() == [1, 2, 3, 5, 6, 7]
    # "ing" after [SEP] joins the word before it, as in the original.
    assert word_starts == [0, 4, 5, 6]
    masker.do_whole_word_mask = False
    assert masker.words(ids, special)[1] == [0, 1, 2, 3, 4, 5, 6]
    assert masker.token_boundary(ids)[0].tolist() == boundary.tolist()
    # A segment that starts inside a word (truncated at the front): its first piece
    # still opens a word, without a boundary mark.
    masker.do_whole_word_mask = True
    ids = np.array(tokenizer.convert_tokens_to_ids(["[CLS]", "ing", "▁a", "[SEP]", "re",
                                                    "[SEP]"]))
    boundary, special = masker.token_boundary(ids)
    assert boundary.tolist() == [1, 0, 1, 1, 0, 1]
    assert masker.words(ids, special)[1] == [0, 1, 3]


def masked_sequences(segments, masker, count, seed=0):
    """`count` sequences [CLS] A [SEP] B [SEP] from consecutive fixture lines, masked
    together in one batch."""
    sequences = [np.concatenate([[CLS], segments[i % len(segments)], [SEP],
                                 segments[(i + 1) % len(segments)], [SEP]]).astype(np.int32)
                 for i in range(count)]
    starts = np.concatenate([[0], np.cumsum([len(s) for s in sequences])])
    batch = masker.mask_batch(np.concatenate(sequences), starts, np.random.default_rng(seed))
    return [(ids, batch.sequence(k)) for k, ids in enumerate(sequences)]


def test_masking_fraction_and_80_10_10(tokenizer, alice_segments):
    masker = masking.Masker(tokenizer, masked_lm_prob=0.15, max_predictions_per_seq=8)
    sequences = masked_sequences(alice_segments, masker, 3000)
    total = full = 0
    outcome = {"mask": 0, "kept": 0, "random": 0}
    random_ids = []
    for ids, m in sequences:
        budget = masking.num_to_predict(len(ids), 0.15, 8)
        assert len(m.masked_lm_positions) <= budget <= 8
        full += len(m.masked_lm_positions) == budget
        assert np.all(np.diff(m.masked_lm_positions) > 0)
        assert not np.isin(ids[m.masked_lm_positions], [CLS, SEP]).any()
        np.testing.assert_array_equal(m.masked_lm_ids, ids[m.masked_lm_positions])
        untouched = np.setdiff1d(np.arange(len(ids)), m.masked_lm_positions)
        np.testing.assert_array_equal(m.input_ids[untouched], ids[untouched])
        got = m.input_ids[m.masked_lm_positions]
        outcome["mask"] += np.sum(got == MASK)
        outcome["kept"] += np.sum(got == m.masked_lm_ids)
        changed = (got != MASK) & (got != m.masked_lm_ids)
        outcome["random"] += np.sum(changed)
        random_ids += got[changed].tolist()
        total += len(got)
    # Whole-word spans sometimes cannot fill the last slot; almost every budget is met.
    assert full / len(sequences) > 0.9
    assert within(outcome["mask"] / total, 0.8, total)
    assert within(outcome["kept"] / total, 0.1, total)
    assert within(outcome["random"] / total, 0.1, total)
    # Random replacements are drawn from the whole vocabulary.
    assert abs(np.mean(random_ids) - tokenizer.vocab_size / 2) < SIGMAS * 30_000 / np.sqrt(
        12 * len(random_ids))

@pytest.mark.parametrize("whole_word", [True, False])
def test_whole_word_spans_are_never_split(tokenizer, alice_segments, whole_word):
    masker = masking.Masker(tokenizer, max_predictions_per_seq=20,
                            do_whole_word_mask=whole_word)
    split = 0
    for ids, m in masked_sequences(alice_segments, masker, 600, seed=3):
        words = words_of(len(ids), np.isin(ids, [CLS, SEP]), m.token_boundary)
        masked = set(m.masked_lm_positions.tolist())
        by_word = {}
        for position, word in words.items():
            by_word.setdefault(word, set()).add(position in masked)
        split += sum(len(states) > 1 for states in by_word.values())
    if whole_word:
        assert split == 0
    else:
        assert split > 20  # per-piece masking does split words: the check can fail


def test_masking_one_sequence(tokenizer, alice_segments):
    ids = np.concatenate([[CLS], alice_segments[0], [SEP], alice_segments[1], [SEP]])
    m = masking.Masker(tokenizer)(ids, np.random.default_rng(0))
    assert len(m.masked_lm_positions) == masking.num_to_predict(len(ids), 0.15, 20)
    np.testing.assert_array_equal(m.masked_lm_ids, ids[m.masked_lm_positions])
    none = masking.Masker(tokenizer, masked_lm_prob=0.0)(ids, np.random.default_rng(0))
    assert len(none.masked_lm_positions) == 0
    np.testing.assert_array_equal(none.input_ids, ids)

