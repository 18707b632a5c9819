"""Dynamic masking: in-graph sentence-order pairs and masked-LM targets drawn as the
original `create_pretraining_data.py` draws them, checked against the text they come
from, against the rules of the original, and against the offline (Python) helper."""

import math
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import losses, tokenization
from albert_tf.data import dynamic_masking as dm
from albert_tf.data import masking, pretraining, records

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SPM = str(FIXTURES / "spm" / "albert_en_30k_reconstructed.model")
REAL_TEXT = FIXTURES / "text" / "real_sample.txt"
CLS, SEP, MASK = 2, 3, 4
Z = 5.0  # statistical bounds: 5 standard errors (every draw is seeded: no flakes)


# ------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(spm_model_file=SPM)


@pytest.fixture(scope="module")
def text_tokenizer():
    from albert_tf.text import AlbertTextTokenizer

    return AlbertTextTokenizer(spm_model_file=SPM)


def real_sentences():
    lines = REAL_TEXT.read_text(encoding="utf-8").splitlines()
    return [s for line in lines for s in re.split(r"(?<=[.!?])\s+", line)
            if len(s.split()) >= 3]


def real_instances(tokenizer, count, max_len, seed):
    """`[CLS] A [SEP] B [SEP]` windows of real text (cut anywhere, so a segment may
    start inside a word): padded ids, segment ids, mask [count, max_len]."""
    rng = np.random.default_rng(seed)
    stream = np.array([i for line in REAL_TEXT.read_text(encoding="utf-8").splitlines()
                       for i in tokenizer.encode(line)], np.int32)
    ids = np.zeros((count, max_len), np.int32)
    segments = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for row in range(count):
        total = int(rng.integers(8, max_len - 2))
        len_a = int(rng.integers(1, total))
        start = int(rng.integers(0, len(stream) - total))
        a, b = stream[start:start + len_a], stream[start + len_a:start + total]
        seq = np.concatenate([[CLS], a, [SEP], b, [SEP]])
        ids[row, :len(seq)] = seq
        segments[row, len(a) + 2:len(seq)] = 1
        mask[row, :len(seq)] = 1
    return ids, segments, mask


def masked_runs(positions_per_row):
    """Lengths of the runs of adjacent masked positions, over all rows."""
    runs = []
    for positions in positions_per_row:
        run = 0
        for i, p in enumerate(positions):
            run = run + 1 if i and p == positions[i - 1] + 1 else 1
            if i == len(positions) - 1 or positions[i + 1] != p + 1:
                runs.append(run)
    return np.array(runs)


def assert_same_proportion(a_hits, a_total, b_hits, b_total, what):
    p = (a_hits + b_hits) / (a_total + b_total)
    se = math.sqrt(max(p * (1 - p), 1e-12) * (1 / a_total + 1 / b_total))
    assert abs(a_hits / a_total - b_hits / b_total) <= Z * se + 1e-9, (
        what, a_hits / a_total, b_hits / b_total)


def assert_same_mean(a, b, what):
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = math.sqrt(a.var() / len(a) + b.var() / len(b))
    assert abs(a.mean() - b.mean()) <= Z * se + 1e-9, (what, a.mean(), b.mean())


def assert_proportion(hits, total, expected, what):
    se = math.sqrt(expected * (1 - expected) / total)
    assert abs(hits / total - expected) <= Z * se + 1e-9, (what, hits / total, expected)


def restore(features):
    """The ids before masking: `masked_lm_ids` put back at `masked_lm_positions`."""
    ids = np.array(features["input_ids"])
    for row in range(ids.shape[0]):
        weights = np.asarray(features["masked_lm_weights"][row]) > 0
        positions = np.asarray(features["masked_lm_positions"][row])[weights]
        ids[row, positions] = np.asarray(features["masked_lm_ids"][row])[weights]
    return ids


def as_numpy(batches):
    return [{k: v.numpy() for k, v in batch.items()} for batch in batches]


def write_documents(path, documents):
    path.write_text("".join("\n".join(doc) + "\n\n" for doc in documents), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def two_sentence_corpus(tmp_path_factory):
    """Documents of two consecutive real sentences each."""
    sentences = real_sentences()
    documents = [sentences[i:i + 2] for i in range(0, len(sentences) - 1, 2)]
    return write_documents(tmp_path_factory.mktemp("two") / "corpus.txt", documents)


@pytest.fixture(scope="module")
def document_corpus(tmp_path_factory):
    """Real documents of 4 to 11 sentences."""
    sentences = real_sentences()
    rng = np.random.default_rng(0)
    documents, start = [], 0
    while start < len(sentences):
        size = int(rng.integers(4, 12))
        documents.append(sentences[start:start + size])
        start += size
    return write_documents(tmp_path_factory.mktemp("docs") / "corpus.txt", documents)


# ----------------------------------------------------------------------- the masker
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


# ------------------------------------------------------------- sentence-order pairs
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


def test_wordpiece_vocabularies(tmp_path):
    from albert_tf.text import AlbertTextTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alice", "fell", "down", "a", "deep",
         "well", "the", "rabbit", "##s", "run", "##ning", "un", "##bel", "##iev", "##ably",
         ".", ","]) + "\n", encoding="utf-8")
    python = tokenization.FullTokenizer(vocab_file=str(vocab))
    graph = AlbertTextTokenizer(vocab_file=str(vocab))
    lines = ["Alice fell down a deep well.", "   ", "The rabbits running, unbelievably.",
             "Alice fell.", "", "Rabbits running down."]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # Documents split at lines that are blank after str.strip (WordPiece: no
    # SentencePiece preprocessing).
    assert [d.to_list() for d in dm.text_documents(str(corpus), graph)] == [
        [python.encode(lines[0])], [python.encode(lines[2]), python.encode(lines[3])],
        [python.encode(lines[5])]]
    ids = np.array([[2] + python.encode(lines[2]) + [3] + python.encode(lines[5]) + [3]] * 500,
                   np.int32)
    segments = np.zeros_like(ids)
    masker = dm.DynamicMasker.from_tokenizer(graph, masked_lm_prob=0.3)
    out = masker(ids, segments, 2)
    pieces = python.convert_ids_to_tokens(ids[0])
    assert out["token_boundary"].numpy()[0].tolist() == [int(not p.startswith("##"))
                                                          for p in pieces]
    continuation = np.array([p.startswith("##") for p in pieces])
    masked = np.zeros(ids.shape, bool)
    weights = out["masked_lm_weights"].numpy() > 0
    for row in range(len(ids)):
        masked[row, out["masked_lm_positions"].numpy()[row][weights[row]]] = True
    # A "##" piece is masked exactly when the piece before it is.
    assert (masked[:, continuation] == masked[:, np.flatnonzero(continuation) - 1]).all()
    assert masked[:, continuation].any()


# ------------------------------------------------------------------------- pipeline
def test_text_documents_split_as_the_original(tokenizer, text_tokenizer, tmp_path):
    lines = ["", "First document, one.", "  Its second line. ", "", "", "\t ",
             "Second document.", "\u0301", "Third, after a line of accents only.",
             "", "Fourth document", "without a final blank line"]
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    expected, current = [], []
    for line in lines + [""]:  # the original's rule: empty after preprocessing ends one
        if not tokenizer.preprocess(line):
            if current:
                expected.append(current)
            current = []
        elif tokenizer.encode(line):
            current.append(tokenizer.encode(line))
    assert len(expected) == 4
    for block_lines in (2, 1024):  # documents cross blocks, or not
        found = [d.to_list() for d in dm.text_documents(str(path), text_tokenizer,
                                                        block_lines=block_lines)]
        assert found == expected


def corpus_dataset(path, tokenizer, **kwargs):
    settings = dict(batch_size=32, max_seq_length=128, repeat=False,
                    instance_shuffle_buffer=200, document_shuffle_buffer=50)
    settings.update(kwargs)
    return dm.dynamic_pretraining_dataset(path, tokenizer, **settings)


@pytest.fixture(scope="module")
def two_passes(two_sentence_corpus, text_tokenizer):
    """Two passes over the two-sentence corpus (seed 1), and the dataset."""
    dataset = corpus_dataset(two_sentence_corpus, text_tokenizer, seed=1, short_seq_prob=0.0)
    return as_numpy(dataset), as_numpy(dataset)


def test_seed_fixes_the_stream_and_each_pass_draws_new_masks(two_sentence_corpus,
                                                             text_tokenizer, two_passes):
    first, second = two_passes
    again = corpus_dataset(two_sentence_corpus, text_tokenizer, seed=1, short_seq_prob=0.0)
    again_first, again_second = as_numpy(again), as_numpy(again)
    assert len(first) == len(again_first) and len(second) == len(again_second)
    for a, b in zip(first + second, again_first + again_second):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    other = next(iter(corpus_dataset(two_sentence_corpus, text_tokenizer, seed=2,
                                     short_seq_prob=0.0)))
    assert not np.array_equal(first[0]["input_ids"], other["input_ids"].numpy())

    # The same pair in two passes (two-sentence documents: one pair each, A/B maybe
    # swapped) gets a new mask.
    def masks(batches):
        found = {}
        for batch in batches:
            for row, ids in enumerate(restore(batch)):
                key = tuple(ids[:batch["input_mask"][row].sum()])
                weights = batch["masked_lm_weights"][row] > 0
                found[key] = tuple(batch["masked_lm_positions"][row][weights])
        return found

    masks_1, masks_2 = masks(first), masks(second)
    common = set(masks_1) & set(masks_2)
    assert len(common) > 50
    same = sum(masks_1[key] == masks_2[key] for key in common)
    assert same < 0.05 * len(common)


def test_a_config_and_stream_options_give_the_stream_of_keywords(two_sentence_corpus,
                                                                 text_tokenizer, two_passes):
    config = pretraining.PretrainingDataConfig(max_seq_length=128, short_seq_prob=0.0,
                                               random_seed=1)
    stream = dm.StreamOptions(repeat=False, instance_shuffle_buffer=200,
                              document_shuffle_buffer=50)
    dataset = dm.dynamic_pretraining_dataset(two_sentence_corpus, text_tokenizer, 32, config,
                                             stream=stream)
    first, _ = two_passes
    got = as_numpy(dataset)
    assert len(got) == len(first)
    for a, b in zip(first, got):
        assert list(a) == list(b) == list(pretraining.FEATURE_NAMES)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    # Keywords name fields of either; a misspelt one is refused, as Python would.
    with pytest.raises(TypeError, match="max_seq_lenght"):
        dm.dynamic_pretraining_dataset(two_sentence_corpus, text_tokenizer, 8,
                                       max_seq_lenght=64)


def marker_words(tokenizer, count):
    """Words that are one piece each: a line made of one of them says where it is."""
    words = []
    for i in range(1000, tokenizer.vocab_size):
        piece = tokenizer.convert_ids_to_tokens([i])[0]
        word = piece[1:]
        if piece.startswith("▁") and word.isalpha() and word.isascii() and len(word) >= 3:
            if tokenizer.encode(word) == [i]:
                words.append((word, i))
                if len(words) == count:
                    return words
    raise AssertionError("not enough single-piece words")


def test_pairs_against_the_text(tokenizer, text_tokenizer, tmp_path):
    """Every instance, checked against the lines of the corpus: A and B are runs of
    consecutive lines (cut only at their outer ends); label 0 <=> B follows A in the
    same document; label 1 <=> B comes right before A, or (one-line A) B is from
    another document."""
    num_docs, num_lines = 200, 8
    words = marker_words(tokenizer, num_docs * num_lines)
    where, repeats, documents = {}, {}, []
    for d in range(num_docs):
        lines = []
        for i in range(num_lines):
            word, piece = words[d * num_lines + i]
            repeats[d, i] = 1 + (d * 7 + i * 3) % 9
            lines.append(" ".join([word] * repeats[d, i]))
            where[piece] = (d, i)
        documents.append(lines)
    path = write_documents(tmp_path / "markers.txt", documents)
    dataset = corpus_dataset(path, text_tokenizer, max_seq_length=24, seed=3,
                             pad_to_max_length=False)

    def runs(segment):
        lines = [where[t] for t in segment]
        out = []
        for line in lines:
            if out and out[-1][0] == line:
                out[-1][1] += 1
            else:
                out.append([line, 1])
        return out

    same_doc = swapped = from_other = 0
    for _ in range(2):  # two passes
        for batch in as_numpy(dataset):
            assert batch["input_ids"].shape[1] == batch["input_mask"].sum(1).max() <= 24
            for row, ids in enumerate(restore(batch)):
                seq = ids[:batch["input_mask"][row].sum()].tolist()
                sep = seq.index(SEP)
                assert seq[0] == CLS and seq[-1] == SEP and seq.count(SEP) == 2
                assert batch["segment_ids"][row][:len(seq)].tolist() == \
                    [0] * (sep + 1) + [1] * (len(seq) - sep - 1)
                a, b = runs(seq[1:sep]), runs(seq[sep + 1:-1])
                for segment in (a, b):
                    lines = [line for line, _ in segment]
                    assert len({d for d, _ in lines}) == 1  # one document
                    assert [i for _, i in lines] == list(range(lines[0][1],
                                                               lines[0][1] + len(lines)))
                    for line, count in segment[1:-1]:  # inner lines are whole
                        assert count == repeats[line]
                (doc_a, first_a), (doc_b, first_b) = a[0][0], b[0][0]
                last_a, last_b = a[-1][0][1], b[-1][0][1]
                label = batch["next_sentence_labels"][row][0]
                # Truncation may drop whole lines where A and B meet, but never when
                # the pair is shorter than max_seq_length - 3.
                gap = 1 if len(seq) - 3 < 24 - 3 else None
                if doc_a == doc_b:
                    same_doc += 1
                    if label == 0:  # B follows A
                        assert first_b - last_a == gap or (gap is None and first_b > last_a)
                    else:  # B comes right before A
                        assert first_a - last_b == gap or (gap is None and first_a > last_b)
                        swapped += 1
                else:
                    assert label == 1 and len(a) == 1
                    from_other += 1
    assert from_other > 0
    assert_proportion(swapped, same_doc, 0.5, "swapped")


def test_tokenized_shards_give_the_same_stream(two_sentence_corpus, tokenizer, tmp_path,
                                               two_passes):
    shard = str(tmp_path / "corpus.tokenized")
    assert dm.write_tokenized_documents(two_sentence_corpus, shard, tokenizer) == \
        len(real_sentences()) // 2
    from_shard = as_numpy(corpus_dataset(shard, tokenizer, seed=1, short_seq_prob=0.0,
                                         input_format="tokenized"))
    from_text = two_passes[0]
    assert len(from_text) == len(from_shard)
    for a, b in zip(from_text, from_shard):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


def test_batches_read_like_offline_records_and_train(document_corpus, text_tokenizer,
                                                     tokenizer, tmp_path):
    from albert_tf import AlbertConfig, AlbertPretrainer

    output = str(tmp_path / "offline.tfrecord")
    pretraining.create_pretraining_data(
        document_corpus, output, pretraining.TokenizerSpec(spm_model_file=SPM),
        pretraining.PretrainingDataConfig(max_seq_length=64, dupe_factor=1), num_workers=0)
    offline = pretraining.pretraining_dataset(output, 8, is_training=False)
    dynamic = corpus_dataset(document_corpus, text_tokenizer, batch_size=8,
                             max_seq_length=64, drop_remainder=True)
    assert dynamic.element_spec == offline.element_spec
    batch = next(iter(dynamic))
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=16,
                          num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=64)
    outputs = AlbertPretrainer(config, seed=0)(records.to_model_inputs(batch))
    total, mlm, sop = losses.pretraining_loss(outputs, batch)
    assert np.isfinite(total.numpy()) and mlm.numpy() > 0 and sop.numpy() > 0


def offline_records(corpus, path, **settings):
    pretraining.create_pretraining_data(
        corpus, path, pretraining.TokenizerSpec(spm_model_file=SPM),
        pretraining.PretrainingDataConfig(max_seq_length=64, **settings), num_workers=0)
    return as_numpy(pretraining.pretraining_dataset(path, 256, is_training=False,
                                                    drop_remainder=False))


def test_distribution_matches_offline_create_pretraining_data(document_corpus,
                                                              text_tokenizer, tmp_path):
    # Without short targets a document's pairs are fixed in number: the same count.
    offline = offline_records(document_corpus, str(tmp_path / "full.tfrecord"),
                              dupe_factor=1, short_seq_prob=0.0)
    dynamic = as_numpy(corpus_dataset(document_corpus, text_tokenizer, batch_size=256,
                                      max_seq_length=64, short_seq_prob=0.0))
    assert sum(len(b["input_ids"]) for b in dynamic) == sum(len(b["input_ids"]) for b in offline)

    passes = 6
    offline = offline_records(document_corpus, str(tmp_path / "offline.tfrecord"),
                              dupe_factor=passes, short_seq_prob=0.2)
    # As many instances, from one endless stream (a new draw at every pass).
    dynamic = as_numpy(corpus_dataset(
        document_corpus, text_tokenizer, batch_size=256, max_seq_length=64,
        short_seq_prob=0.2, seed=6, repeat=True).take(
            math.ceil(sum(len(b["input_ids"]) for b in offline) / 256)))

    def stats(batches):
        cat = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
        return (cat["input_mask"].sum(1), cat["masked_lm_weights"].sum(1),
                cat["next_sentence_labels"][:, 0], cat["segment_ids"].sum(1))

    lengths, counts, labels, b_lengths = stats(dynamic)
    off_lengths, off_counts, off_labels, off_b_lengths = stats(offline)
    assert_same_mean(lengths, off_lengths, "sequence length")
    assert_same_mean(b_lengths, off_b_lengths, "segment B length")
    assert_same_proportion((lengths < 64).sum(), len(lengths),
                           (off_lengths < 64).sum(), len(off_lengths), "short sequences")
    assert_same_mean(counts, off_counts, "masked pieces")
    assert_same_proportion(labels.sum(), len(labels), off_labels.sum(), len(off_labels),
                           "sentence-order label")


# ------------------------------------------------------------------------- errors
def test_bad_input_is_named(tmp_path, text_tokenizer, tokenizer, document_corpus):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(pretraining.PretrainingDataError, match="empty.txt.*empty"):
        dm.dynamic_pretraining_dataset(str(empty), text_tokenizer, 8)
    with pytest.raises(pretraining.PretrainingDataError, match="nothing-here"):
        dm.dynamic_pretraining_dataset(str(tmp_path / "nothing-here*.txt"), tokenizer, 8)
    with pytest.raises(pretraining.PretrainingDataError, match="input_format"):
        dm.dynamic_pretraining_dataset(document_corpus, tokenizer, 8, input_format="json")
    with pytest.raises(pretraining.PretrainingDataError, match="max_seq_length"):
        dm.dynamic_pretraining_dataset(document_corpus, tokenizer, 8, max_seq_length=4)
    # Pretraining records are no tokenized shard.
    offline = str(tmp_path / "offline.tfrecord")
    pretraining.create_pretraining_data(
        document_corpus, offline, pretraining.TokenizerSpec(spm_model_file=SPM),
        pretraining.PretrainingDataConfig(max_seq_length=64, dupe_factor=1), num_workers=0)
    with pytest.raises(pretraining.PretrainingDataError,
                       match="offline.tfrecord.*'token_ids' or 'sentence_lengths'"):
        dm.dynamic_pretraining_dataset(offline, tokenizer, 8, input_format="tokenized")
    # A shard whose lengths do not add up.
    broken = str(tmp_path / "broken.tokenized")
    records.write_records(broken, [records.make_example({
        dm.TOKEN_IDS: records.int64_feature([5, 6, 7]),
        dm.SENTENCE_LENGTHS: records.int64_feature([1, 1])})])
    with pytest.raises(tf.errors.InvalidArgumentError, match="sentence_lengths"):
        list(dm.tokenized_documents(broken))
