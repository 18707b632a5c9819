"""Dynamic masking: ALBERT pretraining instances made and masked on the fly in tf.data.

The offline `create_pretraining_data` (`albert_tf.data.pretraining`) writes each
document `dupe_factor` times with different masks. Here the same instances are drawn
inside the input pipeline instead, with the same distribution, so a long run sees new
sentence pairs and new masks at every pass over the corpus and needs no dupe pass:

    text (one sentence a line, blank lines between documents) or tokenized shards
      -> documents (ragged [num_sentences, (T)], read in blocks: never the whole corpus)
      -> sentence-order pairs `[CLS] A [SEP] B [SEP]`  (`sop_instances_from_documents`)
      -> shuffled, batched
      -> masked-LM targets                              (`DynamicMasker`)
      -> the original pretraining features, int32 (`masked_lm_weights` float32)

Everything is TensorFlow ops (no `tf.py_function`), so every stage runs in parallel
`Dataset.map` calls. Every random choice is a stateless op whose seed comes from
`tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`: one `seed` fixes the
whole stream, and each pass draws new pairs and masks.

What is drawn is what the original google-research/albert `create_pretraining_data.py`
draws (facts in `albert_tf.data.masking` and `albert_tf.data.pretraining`); the order in
which the random numbers are consumed differs, which changes no distribution:

- The greedy span choice visits the words in a uniformly random order with an n-gram
  length drawn for each visit: both are drawn for all words up front (a random key per
  word, argsorted; a length per word) and the greedy loop runs on them.
- 80/10/10 replacement: one uniform per chosen piece.
- Front/back truncation: each removed token is a fair coin, so the number removed from
  the front of a segment is Binomial(removed, 1/2), drawn once.
- The "random other document" a one-sentence chunk (or NSP with `random_next_sentence`)
  takes its B segment from is the document before it in the shuffled document stream
  (within each group of `documents_per_call` documents, the first taking the last; the
  original draws one from the whole corpus, the offline helper from its chunk). A group
  of a single document pairs it with itself.
- Each input file starts a new document (as the offline helper).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.data import records
from albert_tf.data.masking import (
    KEEP_TOKEN_PROB,
    MASK_TOKEN_PROB,
    ngram_probabilities,
    start_piece_table,
)
from albert_tf.data.pretraining import (
    FEATURE_NAMES,
    PretrainingDataConfig,
    PretrainingDataError,
    expand_input_patterns,
)
from albert_tf.text import AlbertTextTokenizer, preprocess_text, truncated_lengths

# Tokenized shards: one tf.train.Example per document, its sentences' ids concatenated
# and their lengths (ids of `FullTokenizer.encode`, i.e. of `AlbertTextTokenizer`).
TOKEN_IDS = "token_ids"
SENTENCE_LENGTHS = "sentence_lengths"
INPUT_FORMATS = ("text", "tokenized")

# The functions given to tf.data here are plain TensorFlow ops: tracing them without
# AutoGraph's conversion is faster and changes nothing.
_graph_function = tf.autograph.experimental.do_not_convert


# --------------------------------------------------------------------------- seeds
def _as_seed(seed) -> tf.Tensor:
    """A stateless-op seed ([2] int64) from a Python int or a [2] tensor."""
    if isinstance(seed, (int, np.integer)):
        return tf.constant([int(seed) % (1 << 63), 0], tf.int64)
    seed = tf.convert_to_tensor(seed)
    seed.shape.assert_is_compatible_with([2])
    return tf.cast(seed, tf.int64)


def _split_seed(seed, count: int) -> list[tf.Tensor]:
    seeds = tf.random.experimental.stateless_split(seed, count)  # [count, 2]
    return [seeds[i] for i in range(count)]


def _sub_seed(seed: int, purpose: int) -> int:
    """An independent tf.data op seed for each random stage of the pipeline."""
    return int(np.random.SeedSequence([seed % (1 << 63), purpose]).generate_state(1)[0])


def _randint(u, low, high):
    """Uniform integer in [low, high] (inclusive, like `random.randint`) from a
    float64 uniform `u` in [0, 1)."""
    low, high = tf.cast(low, tf.int32), tf.cast(high, tf.int32)
    offset = tf.cast(tf.floor(u * tf.cast(high - low + 1, tf.float64)), tf.int32)
    return low + tf.minimum(offset, high - low)


# ------------------------------------------------------------------------ masking
def _tokenizers(tokenizer):
    """(FullTokenizer, AlbertTextTokenizer) built from the same files as `tokenizer`."""
    if isinstance(tokenizer, AlbertTextTokenizer):
        python = tokenization.FullTokenizer(
            vocab_file=getattr(tokenizer, "vocab_file", None),
            do_lower_case=tokenizer.do_lower_case,
            spm_model_file=getattr(tokenizer, "spm_model_file", None))
        return python, tokenizer
    if isinstance(tokenizer, tokenization.FullTokenizer):
        return tokenizer, AlbertTextTokenizer(
            spm_model_file=tokenizer.spm_model_file,
            vocab_file=None if tokenizer.spm_model_file else tokenizer.vocab_file,
            do_lower_case=tokenizer.do_lower_case)
    raise TypeError("tokenizer must be a tokenization.FullTokenizer or a "
                    f"text.AlbertTextTokenizer, got {type(tokenizer).__name__}")


class DynamicMasker:
    """In-graph masked-LM targets, distributed as the original's
    `create_masked_lm_predictions` (see `albert_tf.data.masking` for the rules).

    Args:
      is_start_piece: bool[vocab]: whether each id starts a word
        (`masking.start_piece_table`).
      cls_id, sep_id, mask_id: the special ids.
      replacement_ids: the ids a random replacement is drawn from, uniformly (the
        original: every vocabulary entry).
      max_predictions_per_seq, masked_lm_prob, ngram, favor_shorter_ngram,
      do_whole_word_mask: the original flags.
    """

    def __init__(self, is_start_piece, *, cls_id: int, sep_id: int, mask_id: int,
                 replacement_ids, max_predictions_per_seq: int = 20,
                 masked_lm_prob: float = 0.15, ngram: int = 3,
                 favor_shorter_ngram: bool = True, do_whole_word_mask: bool = True):
        PretrainingDataConfig(max_predictions_per_seq=max_predictions_per_seq,
                              masked_lm_prob=masked_lm_prob, ngram=ngram).validate()
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.ngram = ngram
        self.do_whole_word_mask = do_whole_word_mask
        self.cls_id, self.sep_id, self.mask_id = cls_id, sep_id, mask_id
        self.ngram_probabilities = ngram_probabilities(ngram, favor_shorter_ngram)
        self._is_start = tf.constant(np.asarray(is_start_piece, bool))
        self._replacement_ids = tf.constant(np.asarray(replacement_ids, np.int32))
        self._ngram_logits = tf.constant(np.log(self.ngram_probabilities)[None], tf.float32)
        self._compiled_core = tf.function(self._core, reduce_retracing=True)

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs) -> "DynamicMasker":
        """From a `FullTokenizer` or an `AlbertTextTokenizer`, and the original flags."""
        python, _ = _tokenizers(tokenizer)
        return cls(start_piece_table(python), cls_id=python.special_id(tokenization.CLS),
                   sep_id=python.special_id(tokenization.SEP),
                   mask_id=python.special_id(tokenization.MASK),
                   replacement_ids=sorted(set(python.vocab.values())), **kwargs)

    def __call__(self, input_ids, segment_ids, seed, *, input_mask=None,
                 next_sentence_labels=None) -> dict:
        """Masks `[CLS] A [SEP] B [SEP]` sequences.

        Args:
          input_ids, segment_ids: int [S] (one sequence) or [B, S] (padded batch).
          seed: a Python int or a [2] int tensor (stateless ops: it fixes the output).
          input_mask: 1 on real tokens, 0 on padding (default: all real).
          next_sentence_labels: passed through as [1] / [B, 1] when given.

        Returns:
          The original features: `input_ids` (with replacements), `input_mask`,
          `segment_ids`, `token_boundary` ([S] / [B, S] int32), `masked_lm_positions`,
          `masked_lm_ids` (int32), `masked_lm_weights` (float32) of
          `max_predictions_per_seq`, and `next_sentence_labels` if given.
        """
        features, _ = self._mask(input_ids, segment_ids, seed, input_mask,
                                 next_sentence_labels)
        return features

    def _mask(self, input_ids, segment_ids, seed, input_mask=None,
              next_sentence_labels=None):
        """`__call__`, plus the number of words of each span chosen, in the order chosen
        ([B, S] int32, zeros after the last): to check the n-gram distribution."""
        ids = tf.cast(tf.convert_to_tensor(input_ids), tf.int32)
        if ids.shape.rank not in (1, 2):
            raise ValueError(f"input_ids must be [S] or [B, S], got shape {ids.shape}")
        single = ids.shape.rank == 1
        expand = (lambda x: x[tf.newaxis]) if single else (lambda x: x)
        ids = expand(ids)  # [B, S]
        segment_ids = expand(tf.cast(segment_ids, tf.int32))
        input_mask = tf.ones_like(ids) if input_mask is None else \
            expand(tf.cast(input_mask, tf.int32))
        # Eager callers get the traced function (a while loop runs op by op otherwise).
        core = self._compiled_core if tf.executing_eagerly() else self._core
        features, span_words = core(ids, segment_ids, input_mask, _as_seed(seed))
        if next_sentence_labels is not None:
            features["next_sentence_labels"] = tf.reshape(
                tf.cast(next_sentence_labels, tf.int32), [-1, 1])  # [B, 1]
        if single:
            features = {k: v[0] for k, v in features.items()}
            span_words = span_words[0]
        return features, span_words

    def _core(self, ids, segment_ids, input_mask, seed):
        """Masking of [B, S] int32 ids; seed: [2] int64."""
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        order_seed, ngram_seed, replace_seed, random_id_seed = _split_seed(seed, 4)

        valid = input_mask > 0
        special = valid & ((ids == self.cls_id) | (ids == self.sep_id))
        content = valid & ~special
        is_start = tf.gather(self._is_start, ids)
        token_boundary = special | (content & is_start)
        if self.do_whole_word_mask:
            # A non-start piece joins the word before it, even across a [SEP] (as the
            # original); the first maskable piece always starts a word.
            earlier = tf.cumsum(tf.cast(content, tf.int32), axis=1, exclusive=True) > 0
            new_word = content & (is_start | ~earlier)
        else:
            new_word = content
        word_of_piece = tf.cumsum(tf.cast(new_word, tf.int32), axis=1) - 1  # [B, S]
        num_words = tf.reduce_sum(tf.cast(new_word, tf.int32), axis=1)  # [B]
        # Pieces per word: words of row b are numbered within [0, S) -> segments b*S + w.
        segments = tf.where(content, tf.range(batch)[:, tf.newaxis] * seq + word_of_piece,
                            batch * seq)
        word_sizes = tf.math.unsorted_segment_sum(
            tf.cast(content, tf.int32), segments, batch * seq + 1)[:-1]
        word_sizes = tf.reshape(word_sizes, [batch, seq])  # [B, S]
        # word_starts[b, w]: pieces in the words before w; [B, S + 1].
        word_starts = tf.concat([tf.zeros([batch, 1], tf.int32),
                                 tf.cumsum(word_sizes, axis=1)], axis=1)

        lengths = tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)  # [B]
        if self.masked_lm_prob == 0:
            budget = tf.zeros_like(lengths)
        else:
            # round() of Python halves to even, as tf.round; float64 as Python's float.
            expected = tf.round(tf.cast(lengths, tf.float64) * self.masked_lm_prob)
            budget = tf.minimum(self.max_predictions_per_seq,
                                tf.maximum(1, tf.cast(expected, tf.int32)))

        # The visiting order: a uniformly random permutation of each row's words (the
        # slots past num_words sort last and are never visited).
        keys = tf.random.stateless_uniform([batch, seq], order_seed, dtype=tf.float64)
        word_slots = tf.range(seq)[tf.newaxis]  # [1, S]
        keys = tf.where(word_slots < num_words[:, tf.newaxis], keys, 2.0)
        order = tf.argsort(keys, axis=1, stable=True)  # [B, S] int32
        # The n drawn at each visit.
        drawn = tf.random.stateless_categorical(
            self._ngram_logits, batch * seq, ngram_seed, dtype=tf.int32)  # [1, B*S]
        drawn = tf.reshape(drawn, [batch, seq]) + 1  # [B, S], in 1..ngram

        covered, span_words = self._choose_spans(order, drawn, num_words, word_starts,
                                                 budget)
        chosen = content & tf.gather(covered, tf.maximum(word_of_piece, 0), batch_dims=1)

        # 80% [MASK], 10% unchanged, 10% a random id (the original's two coins, as one
        # uniform per piece).
        u = tf.random.stateless_uniform([batch, seq], replace_seed)
        random_ids = tf.gather(self._replacement_ids, tf.random.stateless_uniform(
            [batch, seq], random_id_seed, minval=0,
            maxval=tf.size(self._replacement_ids), dtype=tf.int32))
        replaced = tf.where(u < MASK_TOKEN_PROB, self.mask_id,
                            tf.where(u < MASK_TOKEN_PROB + KEEP_TOKEN_PROB, ids, random_ids))
        output_ids = tf.where(chosen, replaced, ids)

        # Chosen positions ascending, then padding: chosen ones sort before seq.
        positions = tf.range(seq)[tf.newaxis]
        keys = tf.sort(tf.where(chosen, positions, seq + positions), axis=1)
        width = self.max_predictions_per_seq
        keys = tf.pad(keys, [[0, 0], [0, tf.maximum(width - seq, 0)]],
                      constant_values=2 * seq)[:, :width]  # [B, P]
        is_target = keys < seq
        target_positions = tf.where(is_target, keys, 0)
        target_ids = tf.where(is_target, tf.gather(ids, target_positions, batch_dims=1), 0)

        features = {
            "input_ids": output_ids,
            "input_mask": input_mask,
            "segment_ids": segment_ids,
            "token_boundary": tf.cast(token_boundary, tf.int32),
            "masked_lm_positions": tf.ensure_shape(target_positions, [None, width]),
            "masked_lm_ids": tf.ensure_shape(target_ids, [None, width]),
            "masked_lm_weights": tf.ensure_shape(tf.cast(is_target, tf.float32),
                                                 [None, width]),
        }
        return features, span_words

    def _choose_spans(self, order, drawn, num_words, word_starts, budget):
        """The original's greedy span choice, for every row at once.

        Visits words in `order`; at visit t of row b, from word w = order[b, t], takes
        the longest span of k <= drawn[b, t] words (fewer at the end of the sequence)
        whose pieces fit in what is left of the budget; skips w if none fits or a word
        of the span is covered already; stops once the budget is reached.

        Returns (covered [B, S] bool per word, span_words [B, S]: words of each span
        taken, in the order taken, then zeros).
        """
        batch, seq = tf.shape(order)[0], tf.shape(order)[1]
        ks = tf.range(1, self.ngram + 1)[tf.newaxis]  # [1, N]
        word_slots = tf.range(seq)[tf.newaxis]  # [1, S]

        def active(t, count):
            return (t < num_words) & (count < budget)  # [B]

        def cond(t, count, covered, spans):
            return tf.reduce_any(active(t, count))

        def body(t, count, covered, spans):
            first = order[:, t]  # [B]
            ends = tf.minimum(first[:, tf.newaxis] + ks, num_words[:, tf.newaxis])  # [B, N]
            pieces = (tf.gather(word_starts, ends, batch_dims=1)
                      - tf.gather(word_starts, first, batch_dims=1)[:, tf.newaxis])  # [B, N]
            fits = (ks <= drawn[:, t:t + 1]) & (count[:, tf.newaxis] + pieces
                                                <= budget[:, tf.newaxis])
            # Pieces grow with k, so shrinking k until it fits = the largest k that fits.
            k = tf.reduce_max(tf.where(fits, ks, 0), axis=1)  # [B], 0: nothing fits
            end = tf.minimum(first + k, num_words)
            in_span = (word_slots >= first[:, tf.newaxis]) & (word_slots < end[:, tf.newaxis])
            overlaps = tf.reduce_any(covered & in_span, axis=1)
            take = active(t, count) & (k > 0) & ~overlaps  # [B]
            size = tf.gather(pieces, tf.maximum(k - 1, 0), batch_dims=1)
            # Record the span's words in the row's next free slot.
            num_taken = tf.reduce_sum(tf.cast(spans > 0, tf.int32), axis=1, keepdims=True)
            spans = tf.where((word_slots == num_taken) & take[:, tf.newaxis],
                             (end - first)[:, tf.newaxis], spans)
            covered = covered | (in_span & take[:, tf.newaxis])
            count = count + tf.where(take, size, 0)
            return t + 1, count, covered, spans

        _, _, covered, spans = tf.while_loop(
            cond, body,
            (tf.constant(0), tf.zeros([batch], tf.int32), tf.zeros([batch, seq], tf.bool),
             tf.zeros([batch, seq], tf.int32)),
            maximum_iterations=seq)
        return covered, spans


# ------------------------------------------------------------- sentence-order pairs
class _Sentences:
    """Where the sentences of a batch of documents lie in their flat ids.

    From ragged [D, (N), (T)]: `starts` [sum N + 1] (offset of each sentence in the flat
    ids, plus `offset`, then the end: strictly increasing, as no sentence is empty),
    `first` [D] (index in `starts` of each document's first sentence) and `count` [D].
    """

    def __init__(self, documents: tf.RaggedTensor, offset):
        lengths = tf.cast(documents.values.row_lengths(), tf.int32)  # [sum N]
        self.starts = offset + tf.concat([[0], tf.cumsum(lengths)], axis=0)
        self.first = tf.cast(documents.row_starts(), tf.int32)
        self.count = tf.cast(documents.row_lengths(), tf.int32)

    def start(self, sentence):
        """Offset of sentence `sentence[d]` of each document (count[d]: its end). [D]"""
        return tf.gather(self.starts, self.first + tf.clip_by_value(sentence, 0, self.count))

    def run_end(self, sentence, needed):
        """The last sentence of the shortest run from `sentence` with >= `needed` tokens,
        or the document's last sentence. [D]"""
        # The first global sentence index whose start is >= start + needed.
        stop = tf.searchsorted(self.starts, self.start(sentence) + needed, side="left",
                               out_type=tf.int32)
        stop = tf.reshape(stop, tf.shape(sentence))  # (keeps the static shape: [D])
        return tf.minimum(stop - 1 - self.first, self.count - 1)


def _drop_empty_sentences(documents: tf.RaggedTensor) -> tf.RaggedTensor:
    """ragged [D, (N), (T)] without empty sentences (the original keeps only lines
    with tokens)."""
    documents = tf.cast(documents, tf.int32)
    keep = documents.values.row_lengths() > 0
    return tf.RaggedTensor.from_value_rowids(
        tf.ragged.boolean_mask(documents.values, keep),
        tf.boolean_mask(documents.value_rowids(), keep), nrows=documents.nrows())


def sop_instances_from_documents(documents: tf.RaggedTensor, seed, *, max_seq_length: int,
                                 cls_id: int, sep_id: int, short_seq_prob: float = 0.1,
                                 random_documents: tf.RaggedTensor | None = None,
                                 random_next_sentence: bool = False) -> dict:
    """The original's `create_instances_from_document` for a batch of documents, in
    the graph, before masking.

    For each document a target length is drawn (`max_seq_length - 3`, or with
    `short_seq_prob` uniform in [2, that]); consecutive sentences gather into a chunk
    until it reaches the target (or the document ends); A is the chunk's first
    `randint(1, len - 1)` sentences and B the rest, swapped with probability 1/2
    (label 1). A one-sentence chunk (and, with `random_next_sentence`, half the chunks:
    NSP) takes B from the document's random other document from a random sentence on,
    until the target (label 1), and its unused sentences are read again. The pair is
    cut to `max_seq_length - 3` tokens, longest first, each removed token from the
    front or the back at random.

    Args:
      documents: int ragged [D, (N), (T)]: each document's sentences (lines) as ids.
      seed: a Python int or a [2] int tensor.
      random_documents: ragged [D, (M), (T)]: each document's "random other document"
        (default: the document before it in the batch; the first's is the last). An
        empty one stands for the document itself.

    Returns:
      `input_ids`, `segment_ids`: int32 ragged [I, (S)] (`[CLS] A [SEP] B [SEP]`,
      S <= max_seq_length), document by document; `next_sentence_labels`: int32 [I]
      (1: B came first, or B is from the other document).
    """
    if max_seq_length < 5:
        raise PretrainingDataError(
            f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {max_seq_length}")
    # Eager callers get the traced function (a while loop runs op by op otherwise).
    make = _sop_instances_compiled if tf.executing_eagerly() else _sop_instances
    return make(documents, random_documents, _as_seed(seed), max_seq_length=max_seq_length,
                cls_id=cls_id, sep_id=sep_id, short_seq_prob=short_seq_prob,
                random_next_sentence=random_next_sentence)


def _sop_instances(documents, random_documents, seed, *, max_seq_length, cls_id, sep_id,
                   short_seq_prob, random_next_sentence):
    max_num_tokens = max_seq_length - 3
    documents = _drop_empty_sentences(documents)
    num_documents = tf.cast(documents.nrows(), tf.int32)
    index = tf.range(num_documents)
    if random_documents is None:
        other_index = (index - 1) % tf.maximum(num_documents, 1)
    else:
        # An empty other document stands for the document itself.
        random_documents = _drop_empty_sentences(random_documents)
        other_index = tf.where(random_documents.row_lengths() > 0, num_documents + index, index)
        documents_too = tf.concat([documents, random_documents], axis=0)  # [2D, (N), (T)]
    random_documents = tf.gather(documents if random_documents is None else documents_too,
                                 other_index)
    # B may come from the other document: one pool of ids, the documents' first.
    pool = tf.concat([documents.flat_values, random_documents.flat_values], axis=0)
    sentences = _Sentences(documents, 0)
    others = _Sentences(random_documents, tf.size(documents.flat_values))

    target_seed, loop_seed = _split_seed(seed, 2)
    u = tf.random.stateless_uniform([2, num_documents], target_seed, dtype=tf.float64)
    target = tf.where(u[0] < short_seq_prob, _randint(u[1], 2, max_num_tokens),
                      max_num_tokens)  # [D]

    def body(step, first, outputs):
        active = first < sentences.count  # [D]
        coin_seed, cut_seed = _split_seed(
            tf.random.experimental.stateless_fold_in(loop_seed, step), 2)
        u = tf.random.stateless_uniform([3, num_documents], coin_seed, dtype=tf.float64)
        # The chunk: sentences first..last of each document.
        last = sentences.run_end(first, target)
        chunk = last - first + 1
        a_end = tf.where(chunk >= 2, _randint(u[0], 1, tf.maximum(chunk - 1, 1)), 1)
        chunk_start, split = sentences.start(first), sentences.start(first + a_end)
        chunk_stop = sentences.start(last + 1)
        if random_next_sentence:
            random_next = (chunk == 1) | (u[1] < 0.5)
            swap = tf.zeros_like(random_next)
        else:
            random_next = chunk == 1
            swap = ~random_next & (u[1] < 0.5)
        other_first = _randint(u[2], 0, tf.maximum(others.count - 1, 0))
        other_last = others.run_end(other_first, tf.maximum(target - (split - chunk_start), 1))
        a_start = tf.where(swap, split, chunk_start)
        a_stop = tf.where(swap, chunk_stop, split)
        b_start = tf.where(swap, chunk_start, tf.where(
            random_next, others.start(other_first), split))
        b_stop = tf.where(swap, split, tf.where(
            random_next, others.start(other_last + 1), chunk_stop))
        len_a, len_b = a_stop - a_start, b_stop - b_start
        new_a, new_b = truncated_lengths(len_a, len_b, max_num_tokens)
        removed = tf.where(active[:, tf.newaxis],
                           tf.maximum(tf.stack([len_a - new_a, len_b - new_b], axis=1), 0),
                           0)  # [D, 2]
        front = tf.random.stateless_binomial(
            [num_documents, 2], cut_seed, counts=tf.cast(removed, tf.float32), probs=0.5,
            output_dtype=tf.int32)
        values = (active, a_start + front[:, 0], new_a, b_start + front[:, 1], new_b,
                  tf.cast(random_next | swap, tf.int32))
        outputs = tuple(ta.write(step, v) for ta, v in zip(outputs, values))
        # Sentences of the chunk not used (B came from elsewhere) are read again.
        next_first = tf.where(random_next, first + a_end, last + 1)
        next_first = tf.reshape(tf.where(active, next_first, first), tf.shape(first))
        return step + 1, next_first, outputs  # (reshaped: the loop keeps first's shape)

    dtypes = (tf.bool,) + (tf.int32,) * 5
    arrays = tuple(tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])
                   for dtype in dtypes)
    _, _, arrays = tf.while_loop(
        lambda step, first, _: tf.reduce_any(first < sentences.count), body,
        (tf.constant(0), tf.zeros([num_documents], tf.int32), arrays))
    # [steps, D] -> [D, steps] -> the instances, document by document: [I].
    stacked = [tf.reshape(tf.transpose(a.stack()), [-1]) for a in arrays]
    made = stacked[0]
    a_start, a_len, b_start, b_len, labels = (tf.boolean_mask(s, made) for s in stacked[1:])
    tokens_a = tf.gather(pool, tf.ragged.range(a_start, a_start + a_len))  # [I, (La)]
    tokens_b = tf.gather(pool, tf.ragged.range(b_start, b_start + b_len))  # [I, (Lb)]
    column = tf.ones_like(labels)[:, tf.newaxis]  # [I, 1]
    input_ids = tf.concat([column * cls_id, tokens_a, column * sep_id, tokens_b,
                           column * sep_id], axis=1)
    segment_ids = tf.concat([column * 0, tf.zeros_like(tokens_a), column * 0,
                             tf.ones_like(tokens_b), column], axis=1)
    return {"input_ids": input_ids, "segment_ids": segment_ids,
            "next_sentence_labels": labels}


_sop_instances_compiled = tf.function(_sop_instances, reduce_retracing=True)


def sop_instances_from_document(sentences: tf.RaggedTensor, seed, *, max_seq_length: int,
                                cls_id: int, sep_id: int, short_seq_prob: float = 0.1,
                                random_document: tf.RaggedTensor | None = None,
                                random_next_sentence: bool = False) -> dict:
    """`sop_instances_from_documents` for one document, ragged [N, (T)];
    `random_document` ([M, (T)]) is its other document (default: itself)."""
    if not isinstance(sentences, tf.RaggedTensor):
        sentences = tf.RaggedTensor.from_tensor(sentences)
    documents = tf.RaggedTensor.from_row_lengths(sentences, [sentences.nrows()])  # [1, N, T]
    random_documents = documents if random_document is None else \
        tf.RaggedTensor.from_row_lengths(random_document, [random_document.nrows()])
    return sop_instances_from_documents(
        documents, seed, max_seq_length=max_seq_length, cls_id=cls_id, sep_id=sep_id,
        short_seq_prob=short_seq_prob, random_documents=random_documents,
        random_next_sentence=random_next_sentence)


# ---------------------------------------------------------------------- documents
def _blank_lines(lines, sentencepiece: bool, lower: bool):
    """Document delimiters, as the original decides: a line that is empty after the
    SentencePiece preprocessing (or, with WordPiece, after `str.strip`)."""
    if sentencepiece:
        return tf.equal(tf.strings.length(preprocess_text(lines, lower=lower)), 0)
    from albert_tf.text import character_classes  # str.isspace as an RE2 class

    return tf.strings.regex_full_match(lines, f"{character_classes()['space']}*")


def _split_documents(carry, block):
    """Scan step: the documents that end in a block of lines (a blank line ends one).

    carry: (ids, row lengths) of the sentences of the document still open.
    block: (ids ragged [L, (T)], blank [L]).
    Returns the new carry and the finished documents, ragged [D, (N), (T)].
    """
    carry_ids, carry_lengths = carry
    ids, blank = block
    lengths = tf.concat([carry_lengths, ids.row_lengths()], axis=0)  # [L0 + L]
    lines = tf.RaggedTensor.from_row_lengths(
        tf.concat([carry_ids, ids.flat_values], axis=0), lengths)  # [L0 + L, (T)]
    blank = tf.concat([tf.zeros_like(carry_lengths, tf.bool), blank], axis=0)
    # The document (numbered within this block) each line belongs to.
    document = tf.cumsum(tf.cast(blank, tf.int64), exclusive=True)
    finished = tf.reduce_sum(tf.cast(blank, tf.int64))
    # Lines without tokens are no sentences (the original drops them).
    is_sentence = (lengths > 0) & ~blank
    done = is_sentence & (document < finished)
    documents = tf.RaggedTensor.from_value_rowids(
        tf.ragged.boolean_mask(lines, done), tf.boolean_mask(document, done),
        nrows=finished)  # [D, (N), (T)]
    documents = tf.ragged.boolean_mask(documents, documents.row_lengths() > 0)
    rest = tf.ragged.boolean_mask(lines, is_sentence & (document >= finished))
    return (rest.flat_values, rest.row_lengths()), documents


def text_documents(path, tokenizer: AlbertTextTokenizer,
                   block_lines: int = 1024) -> tf.data.Dataset:
    """The documents of a text file in the original format (one sentence a line, blank
    lines between documents), tokenized in the graph: int32 ragged [N, (T)] each.

    Lines are read and tokenized in blocks of `block_lines`; only the document being
    read is held across blocks.
    """
    lines = tf.data.TextLineDataset(path).concatenate(
        tf.data.Dataset.from_tensors(tf.constant("")))  # the file's end ends a document
    sentencepiece = getattr(tokenizer, "spm_model_file", None) is not None

    def tokenize(block):
        ids = tokenizer.tokenize(block)  # [L, (T)]
        return ids, _blank_lines(block, sentencepiece, tokenizer.do_lower_case)

    blocks = lines.batch(block_lines).map(_graph_function(tokenize),
                                          num_parallel_calls=tf.data.AUTOTUNE)
    initial = (tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    return blocks.scan(initial, _graph_function(_split_documents)).unbatch()


def tokenized_documents(path, records_per_call: int = 256) -> tf.data.Dataset:
    """The documents of a tokenized shard (`write_tokenized_documents`): int32 ragged
    [N, (T)] each. Records are parsed `records_per_call` at a time."""
    spec = {TOKEN_IDS: tf.io.RaggedFeature(tf.int64),
            SENTENCE_LENGTHS: tf.io.RaggedFeature(tf.int64)}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        ids, lengths = parsed[TOKEN_IDS], parsed[SENTENCE_LENGTHS]  # [R, (F)], [R, (N)]
        # tf.debugging.Assert prints its data: the file, then what is wrong.
        checks = [
            tf.debugging.Assert(tf.reduce_all(lengths.flat_values >= 0), [
                "tokenized shard", path, f"has a negative '{SENTENCE_LENGTHS}'"]),
            tf.debugging.Assert(tf.reduce_all(
                tf.reduce_sum(lengths, axis=1) == tf.cast(ids.row_lengths(), tf.int64)), [
                "tokenized shard", path, f": '{SENTENCE_LENGTHS}' do not add up to the "
                f"number of '{TOKEN_IDS}'"]),
        ]
        with tf.control_dependencies(checks):
            sentences = tf.RaggedTensor.from_row_lengths(
                tf.cast(ids.flat_values, tf.int32), lengths.flat_values)  # [sum N, (T)]
        return tf.RaggedTensor.from_row_lengths(  # [R, (N), (T)]
            sentences, tf.cast(lengths.row_lengths(), tf.int64))

    return tf.data.TFRecordDataset(path).batch(records_per_call).map(
        _graph_function(parse), num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def write_tokenized_documents(input_files: str | Sequence[str], output_file: str,
                              tokenizer) -> int:
    """Tokenizes text files once (in the graph) and writes one record per document
    (`token_ids`, `sentence_lengths`), so that dynamic pretraining does not tokenize at
    every pass. Returns the number of documents written."""
    files = expand_input_patterns(input_files)
    _check_corpus(files, "text")
    _, tokenizer = _tokenizers(tokenizer)
    documents = tf.data.Dataset.from_tensor_slices(files).flat_map(
        _graph_function(lambda path: text_documents(path, tokenizer)))

    def serialize():
        # Batches of documents: one conversion to NumPy per batch, not per document.
        for batch in documents.ragged_batch(256).prefetch(tf.data.AUTOTUNE):
            ids = batch.flat_values.numpy()
            sentence_lengths = batch.values.row_lengths().numpy()
            sentence_splits = batch.row_splits.numpy()
            token_splits = np.concatenate([[0], np.cumsum(sentence_lengths)])
            for start, stop in zip(sentence_splits[:-1], sentence_splits[1:]):
                yield records.make_example({
                    TOKEN_IDS: records.int64_feature(
                        ids[token_splits[start]:token_splits[stop]]),
                    SENTENCE_LENGTHS: records.int64_feature(sentence_lengths[start:stop]),
                })

    return records.write_records(output_file, serialize())


def _check_corpus(files: Sequence[str], input_format: str) -> None:
    """Fails early, naming the files, on a corpus with nothing to read (which a
    streaming pipeline would otherwise only show as a dataset with no elements)."""
    if input_format == "text":
        for path in files:
            with tf.io.gfile.GFile(path, "rb") as f:
                if any(line.strip() for line in f):
                    return
        raise PretrainingDataError(
            f"input_file: no text in {', '.join(files)}: the corpus is empty (expected "
            "one sentence per line, blank lines between documents)")
    found = False
    for path in files:
        for raw in tf.data.TFRecordDataset(path).take(1):
            features = tf.train.Example.FromString(raw.numpy()).features.feature
            missing = [name for name in (TOKEN_IDS, SENTENCE_LENGTHS) if name not in features]
            if missing:
                raise PretrainingDataError(
                    f"{path} is no tokenized shard: its records have no "
                    f"{' or '.join(repr(m) for m in missing)} feature (found: "
                    f"{', '.join(sorted(features)) or 'none'})")
            found = True
    if not found:
        raise PretrainingDataError(
            f"input_file: no records in {', '.join(files)}: the corpus is empty")


# ----------------------------------------------------------------------- pipeline
def dynamic_pretraining_dataset(
        input_files: str | Sequence[str], tokenizer, batch_size: int, *,
        max_seq_length: int = 512, max_predictions_per_seq: int = 20,
        masked_lm_prob: float = 0.15, ngram: int = 3, favor_shorter_ngram: bool = True,
        do_whole_word_mask: bool = True, short_seq_prob: float = 0.1,
        random_next_sentence: bool = False, seed: int = 12345, input_format: str = "text",
        repeat: bool = True, pad_to_max_length: bool = True, drop_remainder: bool = False,
        document_shuffle_buffer: int = 1000, instance_shuffle_buffer: int = 10_000,
        cycle_length: int = 4, documents_per_call: int = 64) -> tf.data.Dataset:
    """Batches of pretraining features drawn on the fly from a corpus.

    The batches carry the original record features (`albert_tf.data.pretraining`:
    `input_ids`, `input_mask`, `segment_ids`, `token_boundary` [B, S];
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [B,
    max_predictions_per_seq]; `next_sentence_labels` [B, 1]; int32 but the float32
    weights), as `pretraining.pretraining_dataset` gives them from offline records;
    `records.to_model_inputs` renames them for the model.

    Args:
      input_files: paths or globs (comma-separated in a string): text in the original
        format, or tokenized shards (`write_tokenized_documents`) with
        `input_format="tokenized"`.
      tokenizer: a `FullTokenizer` or an `AlbertTextTokenizer` (text is tokenized in the
        graph; shards need it for the special ids and the word starts).
      max_seq_length ... random_next_sentence: the original flags.
      seed: fixes the whole stream (files, documents and instances shuffled, pairs,
        masks); each pass over the corpus draws new pairs and masks.
      repeat: pass over the corpus forever (training); otherwise once per iteration of
        the dataset (each iteration a new pass, with new draws).
      pad_to_max_length: pad to `max_seq_length`; otherwise to each batch's longest.
      document_shuffle_buffer, instance_shuffle_buffer: shuffle windows (documents
        before pairing; instances before batching, as the original shuffles its
        instances).
      cycle_length: files read at once.
      documents_per_call: documents made into instances by one (vectorized) call.

    Raises:
      PretrainingDataError: bad settings, no matching file, an empty corpus, or shards
        without the tokenized features.
    """
    PretrainingDataConfig(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob, ngram=ngram).validate()
    if input_format not in INPUT_FORMATS:
        raise PretrainingDataError(
            f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if batch_size < 1:
        raise PretrainingDataError(f"batch_size must be at least 1, got {batch_size}")
    files = expand_input_patterns(input_files)
    _check_corpus(files, input_format)
    python, graph_tokenizer = _tokenizers(tokenizer)
    masker = DynamicMasker.from_tokenizer(
        python, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, ngram=ngram, favor_shorter_ngram=favor_shorter_ngram,
        do_whole_word_mask=do_whole_word_mask)
    cls_id, sep_id = masker.cls_id, masker.sep_id

    def read(path):
        if input_format == "text":
            return text_documents(path, graph_tokenizer)
        return tokenized_documents(path)

    def random_seeds(purpose):
        # Stateless seeds, one [2] pair per element; new ones at every iteration.
        return tf.data.Dataset.random(seed=_sub_seed(seed, purpose),
                                      rerandomize_each_iteration=True).batch(2)

    paths = tf.data.Dataset.from_tensor_slices(files).shuffle(
        len(files), seed=_sub_seed(seed, 0), reshuffle_each_iteration=True)
    if repeat:
        paths = paths.repeat()
    documents = paths.interleave(
        _graph_function(read), cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    documents = documents.shuffle(document_shuffle_buffer, seed=_sub_seed(seed, 1),
                                  reshuffle_each_iteration=True)
    # Documents are paired in batches; in a batch each document's "random other
    # document" is the one before it (the shuffle made it a random one).
    documents = documents.ragged_batch(documents_per_call)

    def make_instances(batch, seed_pair):
        instances = sop_instances_from_documents(
            batch, seed_pair, max_seq_length=max_seq_length, cls_id=cls_id, sep_id=sep_id,
            short_seq_prob=short_seq_prob, random_next_sentence=random_next_sentence)
        # Padded here, in one op per batch of documents, so that the instances are
        # plain [max_seq_length] rows for the shuffle and batch that follow.
        shape = [None, max_seq_length]
        return {
            "input_ids": instances["input_ids"].to_tensor(shape=shape),  # [I, L]
            "segment_ids": instances["segment_ids"].to_tensor(shape=shape),
            "input_mask": tf.ones_like(instances["input_ids"]).to_tensor(shape=shape),
            "next_sentence_labels": instances["next_sentence_labels"],  # [I]
        }

    instances = tf.data.Dataset.zip((documents, random_seeds(2))).map(
        _graph_function(make_instances), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    instances = instances.shuffle(instance_shuffle_buffer, seed=_sub_seed(seed, 3),
                                  reshuffle_each_iteration=True)
    batches = instances.batch(batch_size, drop_remainder=drop_remainder)

    def mask(batch, seed_pair):
        if not pad_to_max_length:  # cut to the batch's longest
            length = tf.reduce_max(tf.reduce_sum(batch["input_mask"], axis=1))
            batch = {k: v[:, :length] if v.shape.rank == 2 else v for k, v in batch.items()}
        features = masker(batch["input_ids"], batch["segment_ids"], seed_pair,
                          input_mask=batch["input_mask"],
                          next_sentence_labels=batch["next_sentence_labels"])
        return {name: features[name] for name in FEATURE_NAMES}

    batches = tf.data.Dataset.zip((batches, random_seeds(4))).map(
        _graph_function(mask), num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)
