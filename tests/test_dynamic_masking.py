"""Dynamic masking end to end (`dynamic_pretraining_dataset`): the stream is fixed by
its seed, its pairs match the text they come from, and it is distributed as the
offline `create_pretraining_data` records."""

import math

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import losses
from albert_tf.data import dynamic_masking as dm
from albert_tf.data import pretraining, records
from tests.helpers.dynamic_masking import (
    CLS,
    SEP,
    SPM,
    as_numpy,
    assert_proportion,
    assert_same_mean,
    assert_same_proportion,
    real_sentences,
    restore,
    write_documents,
)
from tests.helpers.tiny import tiny_config


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
    from albert_tf import AlbertPretrainer

    output = str(tmp_path / "offline.tfrecord")
    pretraining.create_pretraining_data(
        document_corpus, output, pretraining.TokenizerSpec(spm_model_file=SPM),
        pretraining.PretrainingDataConfig(max_seq_length=64, dupe_factor=1), num_workers=0)
    offline = pretraining.pretraining_dataset(output, 8, is_training=False)
    dynamic = corpus_dataset(document_corpus, text_tokenizer, batch_size=8,
                             max_seq_length=64, drop_remainder=True)
    assert dynamic.element_spec == offline.element_spec
    batch = next(iter(dynamic))
    config = tiny_config(vocab_size=tokenizer.vocab_size, num_hidden_layers=1)
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
