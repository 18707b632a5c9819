"""Sentence-order (or next-sentence) pairs `[CLS] A [SEP] B [SEP]` made in the graph
from batches of documents, as the original's `create_instances_from_document`."""

from __future__ import annotations

import tensorflow as tf

from albert_tf import names, packing
from albert_tf.data.dynamic_masking.graph import as_seed, randint, split_seed
from albert_tf.data.pretraining import PretrainingDataConfig


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
    PretrainingDataConfig(max_seq_length=max_seq_length).validate()  # room for the pair
    # Eager callers get the traced function (a while loop runs op by op otherwise).
    make = _sop_instances_compiled if tf.executing_eagerly() else _sop_instances
    return make(documents, random_documents, as_seed(seed), max_seq_length=max_seq_length,
                cls_id=cls_id, sep_id=sep_id, short_seq_prob=short_seq_prob,
                random_next_sentence=random_next_sentence)


def _sop_instances(documents, random_documents, seed, *, max_seq_length, cls_id, sep_id,
                   short_seq_prob, random_next_sentence):
    documents, random_documents = _with_other_documents(documents, random_documents)
    drawer = _PairDrawer(documents, random_documents, seed,
                         max_num_tokens=packing.segment_budget(max_seq_length),
                         short_seq_prob=short_seq_prob,
                         random_next_sentence=random_next_sentence)
    # B may come from the other document: one pool of ids, the documents' first (the
    # offsets of `drawer.others` start after them).
    pool = tf.concat([documents.flat_values, random_documents.flat_values], axis=0)
    return _assemble(pool, drawer.draw_all(), cls_id=cls_id, sep_id=sep_id)


_sop_instances_compiled = tf.function(_sop_instances, reduce_retracing=True,
                                      autograph=False)


def _with_other_documents(documents, random_documents):
    """The documents without empty sentences, and each one's "random other document"
    [D, (M), (T)]: the one given (an empty one stands for the document itself), or by
    default the one before it in the batch (the first's is the last)."""
    documents = _drop_empty_sentences(documents)
    num_documents = tf.cast(documents.nrows(), tf.int32)
    index = tf.range(num_documents)
    if random_documents is None:
        return documents, tf.gather(documents, (index - 1) % tf.maximum(num_documents, 1))
    random_documents = _drop_empty_sentences(random_documents)
    other_index = tf.where(random_documents.row_lengths() > 0, num_documents + index, index)
    both = tf.concat([documents, random_documents], axis=0)  # [2D, (N), (T)]
    return documents, tf.gather(both, other_index)


class _PairDrawer:
    """Draws every document's pairs, one pair per document and loop step, as spans of
    the pool of ids (`documents` then `random_documents`, flat)."""

    def __init__(self, documents, random_documents, seed, *, max_num_tokens: int,
                 short_seq_prob: float, random_next_sentence: bool):
        self.sentences = _Sentences(documents, 0)
        self.others = _Sentences(random_documents, tf.size(documents.flat_values))
        self.num_documents = tf.cast(documents.nrows(), tf.int32)
        self.max_num_tokens = max_num_tokens
        self.random_next_sentence = random_next_sentence
        target_seed, self.loop_seed = split_seed(seed, 2)
        self.target = self._target_lengths(target_seed, short_seq_prob)  # [D]

    def _target_lengths(self, seed, short_seq_prob):
        """`max_num_tokens`, or with `short_seq_prob` uniform in [2, that]: one target
        per document, as the original."""
        u = tf.random.stateless_uniform([2, self.num_documents], seed, dtype=tf.float64)
        return tf.where(u[0] < short_seq_prob, randint(u[1], 2, self.max_num_tokens),
                        self.max_num_tokens)

    def draw_all(self):
        """(a_start, a_len, b_start, b_len, labels) of every instance, document by
        document: int32 [I] each."""
        dtypes = (tf.bool,) + (tf.int32,) * 5
        arrays = tuple(tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])
                       for dtype in dtypes)

        def body(step, first, arrays):
            values, next_first = self.step(step, first)
            return step + 1, next_first, tuple(a.write(step, v) for a, v in zip(arrays, values))

        _, _, arrays = tf.while_loop(
            lambda step, first, _: tf.reduce_any(first < self.sentences.count), body,
            (tf.constant(0), tf.zeros([self.num_documents], tf.int32), arrays))
        # [steps, D] -> [D, steps] -> the instances, document by document: [I].
        stacked = [tf.reshape(tf.transpose(a.stack()), [-1]) for a in arrays]
        made = stacked[0]
        return tuple(tf.boolean_mask(s, made) for s in stacked[1:])

    def step(self, step, first):
        """One pair from each document still active, from its sentence `first` on.

        Returns (made, a_start, a_len, b_start, b_len, label), [D] each, and each
        document's next first sentence.
        """
        active = first < self.sentences.count  # [D]
        coin_seed, cut_seed = split_seed(
            tf.random.experimental.stateless_fold_in(self.loop_seed, step), 2)
        u = tf.random.stateless_uniform([3, self.num_documents], coin_seed, dtype=tf.float64)
        # The chunk: sentences first..last of each document.
        last = self.sentences.run_end(first, self.target)
        chunk = last - first + 1
        a_end = tf.where(chunk >= 2, randint(u[0], 1, tf.maximum(chunk - 1, 1)), 1)
        spans, random_next, label = self._segments(u, first, last, a_end)
        a_start, new_a, b_start, new_b = self._truncate(*spans, active, cut_seed)
        # Sentences of the chunk not used (B came from elsewhere) are read again.
        next_first = tf.where(random_next, first + a_end, last + 1)
        next_first = tf.reshape(tf.where(active, next_first, first), tf.shape(first))
        # (reshaped: the loop keeps first's shape)
        return (active, a_start, new_a, b_start, new_b, label), next_first

    def _segments(self, u, first, last, a_end):
        """Where A and B lie in the pool: A is the chunk's first `a_end` sentences and B
        the rest, swapped with probability 1/2 (SOP); a one-sentence chunk (and, with
        NSP, half the chunks) takes B from the other document, from a random sentence
        until the target. Returns ((a_start, a_len, b_start, b_len), random_next,
        label)."""
        chunk_start, split = self.sentences.start(first), self.sentences.start(first + a_end)
        chunk_stop = self.sentences.start(last + 1)
        if self.random_next_sentence:
            random_next = (last == first) | (u[1] < 0.5)
            swap = tf.zeros_like(random_next)
        else:
            random_next = last == first
            swap = ~random_next & (u[1] < 0.5)
        others = self.others
        other_first = randint(u[2], 0, tf.maximum(others.count - 1, 0))
        other_last = others.run_end(other_first,
                                    tf.maximum(self.target - (split - chunk_start), 1))
        a_start = tf.where(swap, split, chunk_start)
        a_stop = tf.where(swap, chunk_stop, split)
        b_start = tf.where(swap, chunk_start, tf.where(
            random_next, others.start(other_first), split))
        b_stop = tf.where(swap, split, tf.where(
            random_next, others.start(other_last + 1), chunk_stop))
        spans = (a_start, a_stop - a_start, b_start, b_stop - b_start)
        return spans, random_next, tf.cast(random_next | swap, tf.int32)

    def _truncate(self, a_start, len_a, b_start, len_b, active, seed):
        """The pair cut to `max_num_tokens`, longest first (`packing.pair_lengths`),
        each removed token from the front or the back: the number from the front is
        Binomial(removed, 1/2). Returns (a_start, a_len, b_start, b_len)."""
        new_a, new_b = packing.pair_lengths(len_a, len_b, self.max_num_tokens)
        removed = tf.where(active[:, tf.newaxis],
                           tf.maximum(tf.stack([len_a - new_a, len_b - new_b], axis=1), 0),
                           0)  # [D, 2]
        front = tf.random.stateless_binomial(
            [self.num_documents, 2], seed, counts=tf.cast(removed, tf.float32), probs=0.5,
            output_dtype=tf.int32)
        return a_start + front[:, 0], new_a, b_start + front[:, 1], new_b


def _assemble(pool, spans, *, cls_id: int, sep_id: int) -> dict:
    """The instances' `[CLS] A [SEP] B [SEP]` (`packing.pack_ragged`) from their spans
    of the pool of ids."""
    a_start, a_len, b_start, b_len, labels = spans
    tokens_a = tf.gather(pool, tf.ragged.range(a_start, a_start + a_len))  # [I, (La)]
    tokens_b = tf.gather(pool, tf.ragged.range(b_start, b_start + b_len))  # [I, (Lb)]
    input_ids, segment_ids = packing.pack_ragged([tokens_a, tokens_b], cls_id=cls_id,
                                                 sep_id=sep_id)  # [I, (S)] each
    return {names.INPUT_IDS: input_ids, names.SEGMENT_IDS: segment_ids,
            names.NEXT_SENTENCE_LABELS: labels}


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
