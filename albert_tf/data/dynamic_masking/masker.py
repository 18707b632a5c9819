"""In-graph masked-LM targets, drawn as the original's `create_masked_lm_predictions`."""

from __future__ import annotations

import typing

import numpy as np
import tensorflow as tf

from albert_tf import names, tokenization
from albert_tf.data.dynamic_masking.graph import as_seed, split_seed
from albert_tf.data.masking import (
    KEEP_TOKEN_PROB,
    MASK_TOKEN_PROB,
    ngram_probabilities,
    start_piece_table,
)
from albert_tf.data.pretraining import PretrainingDataConfig
from albert_tf.text import AlbertTextTokenizer


def tokenizer_pair(tokenizer):
    """(FullTokenizer, AlbertTextTokenizer) built from the same files as `tokenizer`:
    the Python one knows the vocabulary, the in-graph one reads text in tf.data."""
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


class _Words(typing.NamedTuple):
    """The words of a [B, S] batch (pieces that may be masked, grouped)."""
    content: tf.Tensor         # [B, S] bool: a real piece, not [CLS]/[SEP]
    token_boundary: tf.Tensor  # [B, S] bool: [CLS], [SEP], or a piece starting a word
    word_of_piece: tf.Tensor   # [B, S] int32: the word of each content piece
    num_words: tf.Tensor       # [B]
    starts: tf.Tensor          # [B, S + 1]: pieces in the words before each word


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
        self._compiled_core = tf.function(self._core, reduce_retracing=True,
                                          autograph=False)

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs) -> "DynamicMasker":
        """From a `FullTokenizer` or an `AlbertTextTokenizer`, and the original flags."""
        python, _ = tokenizer_pair(tokenizer)
        return cls(start_piece_table(python), cls_id=python.special_id(tokenization.CLS),
                   sep_id=python.special_id(tokenization.SEP),
                   mask_id=python.special_id(tokenization.MASK),
                   replacement_ids=sorted(set(python.vocab.values())), **kwargs)

    @classmethod
    def from_config(cls, tokenizer, config: PretrainingDataConfig) -> "DynamicMasker":
        """`from_tokenizer` with the masking flags of a `PretrainingDataConfig`."""
        return cls.from_tokenizer(
            tokenizer, max_predictions_per_seq=config.max_predictions_per_seq,
            masked_lm_prob=config.masked_lm_prob, ngram=config.ngram,
            favor_shorter_ngram=config.favor_shorter_ngram,
            do_whole_word_mask=config.do_whole_word_mask)

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
        features, span_words = core(ids, segment_ids, input_mask, as_seed(seed))
        if next_sentence_labels is not None:
            features[names.NEXT_SENTENCE_LABELS] = tf.reshape(
                tf.cast(next_sentence_labels, tf.int32), [-1, 1])  # [B, 1]
        if single:
            features = {k: v[0] for k, v in features.items()}
            span_words = span_words[0]
        return features, span_words

    # ------------------------------------------------------------- the steps
    def _core(self, ids, segment_ids, input_mask, seed):
        """Masking of [B, S] int32 ids; seed: [2] int64."""
        order_seed, ngram_seed, replace_seed, random_id_seed = split_seed(seed, 4)
        valid = input_mask > 0
        words = self._words(ids, valid)
        order, drawn = self._visits(words.num_words, tf.shape(ids)[1], order_seed,
                                    ngram_seed)
        covered, span_words = self._choose_spans(order, drawn, words.num_words, words.starts,
                                                 self._budget(valid))
        chosen = words.content & tf.gather(covered, tf.maximum(words.word_of_piece, 0),
                                           batch_dims=1)  # [B, S]
        features = {
            names.INPUT_IDS: self._replace(ids, chosen, replace_seed, random_id_seed),
            names.INPUT_MASK: input_mask,
            names.SEGMENT_IDS: segment_ids,
            names.TOKEN_BOUNDARY: tf.cast(words.token_boundary, tf.int32),
            **self._targets(ids, chosen),
        }
        return features, span_words

    def _words(self, ids, valid) -> _Words:
        """Which pieces form which word (the original's whole-word rule)."""
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
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
        return _Words(content, token_boundary, word_of_piece, num_words, word_starts)

    def _budget(self, valid):
        """Pieces to mask in each row: the original's `num_to_predict`. [B]"""
        lengths = tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)  # [B]
        if self.masked_lm_prob == 0:
            return tf.zeros_like(lengths)
        # round() of Python halves to even, as tf.round; float64 as Python's float.
        expected = tf.round(tf.cast(lengths, tf.float64) * self.masked_lm_prob)
        return tf.minimum(self.max_predictions_per_seq,
                          tf.maximum(1, tf.cast(expected, tf.int32)))

    def _visits(self, num_words, seq, order_seed, ngram_seed):
        """The visiting order, a uniformly random permutation of each row's words (the
        slots past num_words sort last and are never visited), and the n drawn at each
        visit. ([B, S] int32 each.)"""
        batch = tf.shape(num_words)[0]
        keys = tf.random.stateless_uniform([batch, seq], order_seed, dtype=tf.float64)
        word_slots = tf.range(seq)[tf.newaxis]  # [1, S]
        keys = tf.where(word_slots < num_words[:, tf.newaxis], keys, 2.0)
        order = tf.argsort(keys, axis=1, stable=True)  # [B, S] int32
        drawn = tf.random.stateless_categorical(
            self._ngram_logits, batch * seq, ngram_seed, dtype=tf.int32)  # [1, B*S]
        drawn = tf.reshape(drawn, [batch, seq]) + 1  # [B, S], in 1..ngram
        return order, drawn

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

    def _replace(self, ids, chosen, replace_seed, random_id_seed):
        """The chosen pieces: 80% [MASK], 10% unchanged, 10% a random id (the original's
        two coins, as one uniform per piece). [B, S]"""
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        u = tf.random.stateless_uniform([batch, seq], replace_seed)
        random_ids = tf.gather(self._replacement_ids, tf.random.stateless_uniform(
            [batch, seq], random_id_seed, minval=0,
            maxval=tf.size(self._replacement_ids), dtype=tf.int32))
        replaced = tf.where(u < MASK_TOKEN_PROB, self.mask_id,
                            tf.where(u < MASK_TOKEN_PROB + KEEP_TOKEN_PROB, ids, random_ids))
        return tf.where(chosen, replaced, ids)

    def _targets(self, ids, chosen) -> dict:
        """`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [B, P]: the
        chosen positions ascending, their original ids, then zero padding."""
        seq = tf.shape(ids)[1]
        # Chosen positions sort before seq.
        positions = tf.range(seq)[tf.newaxis]
        keys = tf.sort(tf.where(chosen, positions, seq + positions), axis=1)
        width = self.max_predictions_per_seq
        keys = tf.pad(keys, [[0, 0], [0, tf.maximum(width - seq, 0)]],
                      constant_values=2 * seq)[:, :width]  # [B, P]
        is_target = keys < seq
        target_positions = tf.where(is_target, keys, 0)
        target_ids = tf.where(is_target, tf.gather(ids, target_positions, batch_dims=1), 0)
        return {
            names.MASKED_LM_POSITIONS: tf.ensure_shape(target_positions, [None, width]),
            names.MASKED_LM_IDS: tf.ensure_shape(target_ids, [None, width]),
            names.MASKED_LM_WEIGHTS: tf.ensure_shape(tf.cast(is_target, tf.float32),
                                                     [None, width]),
        }
