"""`DynamicMasker` (`albert_tf.data.dynamic_masking.masker`): in-graph masked-LM targets
drawn by the original's rules, checked on real text and against the offline masker."""

import math

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import dynamic_masking as dm
from albert_tf.data import masking, pretraining
from tests.helpers.dynamic_masking import (
    CLS,
    MASK,
    SEP,
    Z,
    assert_proportion,
    assert_same_mean,
    assert_same_proportion,
    masked_runs,
    real_instances,
)


@pytest.fixture(scope="module")
def masker(tokenizer):
    return dm.DynamicMasker.from_tokenizer(tokenizer)


def test_masker_features_and_token_boundary(tokenizer, masker):
    text_a, text_b = "Unbelievably, it's 1990, and the rabbit-hole went on.", "Alice ran."
    a, b = tokenizer.encode(text_a), tokenizer.encode(text_b)
    ids = np.array([CLS] + a + [SEP] + b + [SEP], np.int32)
    segments = np.array([0] * (len(a) + 2) + [1] * (len(b) + 1), np.int32)
    features = masker(ids, segments, 3, next_sentence_labels=1)
    assert list(features) == list(pretraining.FEATURE_NAMES)
    spec = pretraining.pretraining_feature_spec(len(ids), 20)
    for name, value in features.items():
        assert value.dtype == (tf.float32 if spec[name].dtype == tf.float32 else tf.int32), name
        assert value.shape == spec[name].shape, name
    # token_boundary: [CLS]/[SEP] and the pieces that start a word by the original rule.
    pieces = tokenizer.convert_ids_to_tokens(ids)
    expected = [int(p in ("[CLS]", "[SEP]") or masking.is_start_piece_sentencepiece(p))
                for p in pieces]
    assert features["token_boundary"].numpy().tolist() == expected
    assert 0 in expected  # the text has word continuations ("liev", "ably", ...)
    assert features["next_sentence_labels"].numpy().tolist() == [1]
    np.testing.assert_array_equal(features["segment_ids"], segments)
    np.testing.assert_array_equal(features["input_mask"], np.ones_like(ids))


def test_masker_is_seeded(tokenizer, masker):
    ids, segments, mask = real_instances(tokenizer, 16, 64, seed=1)
    first = masker(ids, segments, 7, input_mask=mask)
    again = masker(ids, segments, tf.constant([7, 0]), input_mask=mask)
    other = masker(ids, segments, 8, input_mask=mask)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])
    # One sequence ([S]) is masked as a batch of one.
    length = mask[0].sum()
    single = masker(ids[0, :length], segments[0, :length], 7)
    assert single["masked_lm_positions"].shape == (20,)
    assert single["input_ids"].shape == (length,)


@pytest.fixture(scope="module")
def real_batch(tokenizer):
    return real_instances(tokenizer, 3000, 128, seed=2)


@pytest.mark.parametrize("whole_word", [True, False])
def test_masked_positions_follow_the_rules(tokenizer, real_batch, whole_word):
    ids, segments, mask = real_batch
    masker = dm.DynamicMasker.from_tokenizer(tokenizer, do_whole_word_mask=whole_word)
    out = {k: v.numpy() for k, v in masker(ids, segments, 11, input_mask=mask).items()}
    is_start = masking.start_piece_table(tokenizer)
    split_words = 0
    for row in range(len(ids)):
        length = mask[row].sum()
        weights = out["masked_lm_weights"][row]
        count = int(weights.sum())
        assert weights.tolist() == [1.0] * count + [0.0] * (20 - count)
        positions = out["masked_lm_positions"][row][:count]
        assert (np.diff(positions) > 0).all()  # ascending, no repeats
        assert (out["masked_lm_positions"][row][count:] == 0).all()
        assert (out["masked_lm_ids"][row][count:] == 0).all()
        seq = ids[row, :length]
        assert not np.isin(seq[positions], [CLS, SEP]).any()
        assert (positions < length).all()
        np.testing.assert_array_equal(out["masked_lm_ids"][row][:count], seq[positions])
        unmasked = np.setdiff1d(np.arange(ids.shape[1]), positions)
        np.testing.assert_array_equal(out["input_ids"][row][unmasked], ids[row][unmasked])
        assert 1 <= count <= masking.num_to_predict(length, 0.15, 20)
        # Words, as the original forms them: a non-start piece joins the word before.
        word, words = -1, np.full(length, -1)
        for p in range(length):
            if seq[p] in (CLS, SEP):
                continue
            if is_start[seq[p]] or word < 0:
                word += 1
            words[p] = word
        chosen = np.zeros(length, bool)
        chosen[positions] = True
        for w in range(word + 1):
            in_word = chosen[words == w]
            if in_word.any() and not in_word.all():
                split_words += 1
    if whole_word:
        assert split_words == 0
    else:
        assert split_words > 50  # per-piece masking does cut words


def test_replacements_are_80_10_10(tokenizer, masker, real_batch):
    ids, segments, mask = real_batch
    out = masker(ids, segments, 5, input_mask=mask)
    weights = out["masked_lm_weights"].numpy() > 0
    original = out["masked_lm_ids"].numpy()[weights]
    replaced = np.take_along_axis(out["input_ids"].numpy(),
                                  out["masked_lm_positions"].numpy(), axis=1)[weights]
    total = len(original)
    assert total > 20_000
    is_mask = replaced == MASK
    kept = (replaced == original) & ~is_mask
    random_ids = replaced[~is_mask & ~kept]
    vocab = tokenizer.vocab_size
    # A random replacement equals the original with probability 1/vocab.
    assert_proportion(is_mask.sum(), total, 0.8 + 0.1 * (original == MASK).mean(), "[MASK]")
    assert_proportion(kept.sum(), total, 0.1 + 0.1 / vocab, "unchanged")
    assert_proportion(len(random_ids), total, 0.1 * (1 - 1 / vocab), "random")
    # Random ids are uniform over the whole vocabulary.
    uniform_sd = math.sqrt((vocab ** 2 - 1) / 12)
    assert abs(random_ids.mean() - (vocab - 1) / 2) <= Z * uniform_sd / math.sqrt(len(random_ids))
    assert random_ids.min() < vocab * 0.05 and random_ids.max() > vocab * 0.95


@pytest.mark.parametrize("favor_shorter", [True, False])
def test_ngram_lengths_are_drawn_proportional_to_1_over_n(tokenizer, favor_shorter):
    # Single-piece words only, so the first span of a sequence is never shortened by
    # the budget nor blocked by another: its length is the n drawn, cut at the end.
    word_ids = np.array([i for i in range(1000, 6000)
                         if tokenizer.convert_ids_to_tokens([i])[0].startswith("▁")])
    rows, seq = 4000, 64
    rng = np.random.default_rng(3)
    ids = rng.choice(word_ids, size=(rows, seq)).astype(np.int32)
    ids[:, 0], ids[:, 30], ids[:, -1] = CLS, SEP, SEP
    segments = np.zeros_like(ids)
    segments[:, 31:] = 1
    masker = dm.DynamicMasker.from_tokenizer(tokenizer, ngram=3,
                                             favor_shorter_ngram=favor_shorter)
    _, spans = masker._mask(ids, segments, 9)
    first = spans.numpy()[:, 0]
    p = 1 / np.arange(1, 4)
    p = p / p.sum() if favor_shorter else (p / p.sum())[::-1]
    words = seq - 3
    expected = np.zeros(4)
    for start in range(words):  # a span is cut at the last word
        for n in (1, 2, 3):
            expected[min(n, words - start)] += p[n - 1] / words
    for k in (1, 2, 3):
        assert_proportion((first == k).sum(), rows, expected[k], f"first span of {k}")
    # Spans are whole words of the drawn length and fill the budget exactly here.
    budget = masking.num_to_predict(seq, 0.15, 20)
    assert (spans.numpy().sum(axis=1) == budget).all()


@pytest.mark.parametrize("settings", [
    dict(),
    dict(do_whole_word_mask=False),
    dict(favor_shorter_ngram=False),
    dict(max_predictions_per_seq=5),
    dict(masked_lm_prob=0.4, ngram=4),
])
def test_masking_matches_the_offline_masker(tokenizer, real_batch, settings):
    ids, segments, mask = real_batch
    offline_settings = dict(settings)
    if "ngram" in offline_settings:
        offline_settings["max_ngram"] = offline_settings.pop("ngram")
    offline = masking.Masker(tokenizer, **offline_settings)
    rng = np.random.default_rng(4)
    offline_positions = [offline(ids[r, :mask[r].sum()], rng).masked_lm_positions
                         for r in range(len(ids))]
    out = dm.DynamicMasker.from_tokenizer(tokenizer, **settings)(
        ids, segments, 4, input_mask=mask)
    weights = out["masked_lm_weights"].numpy() > 0
    positions = [row[w] for row, w in zip(out["masked_lm_positions"].numpy(), weights)]
    counts, offline_counts = weights.sum(1), np.array([len(p) for p in offline_positions])
    budgets = np.array([masking.num_to_predict(
        m.sum(), settings.get("masked_lm_prob", 0.15),
        settings.get("max_predictions_per_seq", 20)) for m in mask])
    assert (counts <= budgets).all()
    # The budget, min(max_predictions_per_seq, round(length * masked_lm_prob)), is
    # nearly always filled: masked_lm_prob of the tokens unless the cap binds.
    assert (counts == budgets).mean() > 0.99
    lengths = mask.sum(1)
    if not settings:
        assert abs((counts / lengths).mean() - 0.15) < 0.005
    if "max_predictions_per_seq" in settings:
        assert (counts / lengths).mean() < 0.1  # 5 of up to 128
    assert_same_mean(counts, offline_counts, "masked pieces per sequence")
    assert_same_proportion((counts == budgets).sum(), len(counts),
                           (offline_counts == budgets).sum(), len(counts), "budget reached")
    # Where in the sequence: the mean relative position of the masked pieces.
    relative = np.concatenate([p / lengths[r] for r, p in enumerate(positions)])
    offline_relative = np.concatenate([p / lengths[r] for r, p in enumerate(offline_positions)])
    assert_same_mean(relative, offline_relative, "relative position")
    # Span structure: runs of adjacent masked pieces.
    runs, offline_runs = masked_runs(positions), masked_runs(offline_positions)
    for size in (1, 2, 3, 4):
        assert_same_proportion((runs == size).sum(), len(runs),
                               (offline_runs == size).sum(), len(offline_runs),
                               f"runs of {size}")


def test_no_predictions_without_masked_lm_prob(tokenizer, real_batch):
    ids, segments, mask = real_batch
    out = dm.DynamicMasker.from_tokenizer(tokenizer, masked_lm_prob=0.0)(
        ids[:50], segments[:50], 1, input_mask=mask[:50])
    assert out["masked_lm_weights"].numpy().sum() == 0
    np.testing.assert_array_equal(out["input_ids"], ids[:50])
