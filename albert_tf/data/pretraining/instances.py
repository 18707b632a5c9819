"""Training instances as the original makes them: sentence-order (or next-sentence)
pairs from tokenized documents, truncated, then masked (`albert_tf.data.masking`)."""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import numpy as np

from albert_tf import packing, tokenization
from albert_tf.data.masking import MaskedBatch, Masker
from albert_tf.data.pretraining.config import PretrainingDataConfig

# A tokenized document: the id arrays of its lines with tokens.
TokenizedDocument = Sequence[np.ndarray]


@dataclasses.dataclass
class SegmentPair:
    """`[CLS] tokens_a [SEP] tokens_b [SEP]` before masking; `is_random_next` is the
    record's `next_sentence_labels` (with sentence order: 1 = B came first, or B is
    from another document)."""
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    is_random_next: bool


@dataclasses.dataclass
class InstanceBatch:
    """Training instances: the masked sequences, how many tokens of each have segment
    id 0 (`[CLS] A [SEP]`), and their `next_sentence_labels`."""
    masked: MaskedBatch
    segment_a_lengths: np.ndarray  # [K]
    labels: np.ndarray             # [K]


def truncation_counts(len_a, len_b, max_num_tokens: int):
    """How many tokens the original's `truncate_seq_pair` removes from A and from B
    (ints, or arrays of them): what `packing.pair_lengths` takes off. Which end each
    removal takes is `_cut`'s business."""
    new_a, new_b = packing.pair_lengths(len_a, len_b, max_num_tokens)
    return len_a - new_a, len_b - new_b


def _cut(tokens: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Removes `count` tokens, each from the front or the back with equal chance."""
    if count == 0:
        return tokens
    front = int(rng.binomial(count, 0.5))
    return tokens[front:len(tokens) - (count - front)]


class InstanceMaker:
    """Makes the original's training instances from tokenized documents.

    A document is a list of segments (the id arrays of its non-empty lines). Python's
    `random.Random` draws the pairs (targets, split points, coins, other documents),
    NumPy's generator the truncation ends and the masks, in this order per pass.
    """

    def __init__(self, tokenizer: tokenization.FullTokenizer, config: PretrainingDataConfig):
        self.config = config
        self.max_num_tokens = packing.segment_budget(config.max_seq_length)
        self.cls = np.array([tokenizer.special_id(tokenization.CLS)], np.int32)
        self.sep = np.array([tokenizer.special_id(tokenization.SEP)], np.int32)
        self.masker = Masker(
            tokenizer, masked_lm_prob=config.masked_lm_prob,
            max_predictions_per_seq=config.max_predictions_per_seq, max_ngram=config.ngram,
            favor_shorter_ngram=config.favor_shorter_ngram,
            do_whole_word_mask=config.do_whole_word_mask)

    def make(self, documents: Sequence[TokenizedDocument], rng: random.Random,
             np_rng: np.random.Generator) -> InstanceBatch:
        """One pass over the documents (one of the original's `dupe_factor`): every
        document's pairs, truncated, then masked."""
        pairs = [pair for index in range(len(documents))
                 for pair in self.untruncated_pairs(documents, index, rng)]
        return self.instances(self.truncate(pairs, np_rng), np_rng)

    def segment_pairs(self, documents: Sequence[TokenizedDocument], index: int,
                      rng: random.Random, np_rng: np.random.Generator) -> list[SegmentPair]:
        """The original's `create_instances_from_document`, before masking."""
        return self.truncate(self.untruncated_pairs(documents, index, rng), np_rng)

    # ------------------------------------------------------------------ the pairs
    def untruncated_pairs(self, documents: Sequence[TokenizedDocument], index: int,
                          rng: random.Random) -> list[SegmentPair]:
        """Segments gather into a chunk until it reaches the target length (or the
        document ends); each chunk gives one pair (`_split_chunk`)."""
        document = documents[index]
        target = self._target_length(rng)
        pairs = []
        current: list[np.ndarray] = []
        length = 0
        i = 0
        while i < len(document):
            current.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                pair, unused = self._split_chunk(current, documents, index, target, rng)
                pairs.append(pair)
                i -= unused  # the segments gathered but not used as A are read again
                current, length = [], 0
            i += 1
        return pairs

    def _target_length(self, rng: random.Random) -> int:
        """Sometimes a shorter target, so that pretraining also sees short sequences
        (one target per document and pass, as in the original)."""
        if rng.random() < self.config.short_seq_prob:
            return rng.randint(2, self.max_num_tokens)
        return self.max_num_tokens

    def _split_chunk(self, current: list[np.ndarray], documents, index: int, target: int,
                     rng: random.Random) -> tuple[SegmentPair, int]:
        """A is the chunk's first `randint(1, len - 1)` segments, B the rest (swapped
        with probability 1/2: sentence order), or, for a one-segment chunk (and half
        the chunks with NSP), text from another document. Returns the pair and how many
        segments of the chunk it left unused."""
        a_end = rng.randint(1, len(current) - 1) if len(current) >= 2 else 1
        tokens_a = current[:a_end]
        unused = 0
        if len(current) == 1 or (self.config.random_next_sentence and rng.random() < 0.5):
            is_random_next = True
            tokens_b = self._random_continuation(
                documents, index, target - sum(map(len, tokens_a)), rng)
            unused = len(current) - a_end
        elif not self.config.random_next_sentence and rng.random() < 0.5:
            is_random_next = True  # sentence order: the two halves swapped
            tokens_a, tokens_b = current[a_end:], tokens_a
        else:
            is_random_next = False
            tokens_b = current[a_end:]
        return SegmentPair(np.concatenate(tokens_a), np.concatenate(tokens_b),
                           is_random_next), unused

    @staticmethod
    def _random_continuation(documents, index: int, target_length: int,
                             rng: random.Random) -> list[np.ndarray]:
        """Segments of another document (of this chunk) from a random start, until
        `target_length` tokens. Ten tries to avoid the document itself, as the original."""
        for _ in range(10):
            other = rng.randint(0, len(documents) - 1)
            if other != index:
                break
        document = documents[other]
        segments, length = [], 0
        for segment in document[rng.randint(0, len(document) - 1):]:
            segments.append(segment)
            length += len(segment)
            if length >= target_length:
                break
        return segments

    def truncate(self, pairs: Sequence[SegmentPair], np_rng: np.random.Generator
                 ) -> list[SegmentPair]:
        """Each pair cut to `max_seq_length - 3` tokens, longest first (the counts of
        all pairs at once), each removed token from the front or the back."""
        len_a = np.fromiter((len(p.tokens_a) for p in pairs), np.int64, len(pairs))
        len_b = np.fromiter((len(p.tokens_b) for p in pairs), np.int64, len(pairs))
        cuts_a, cuts_b = truncation_counts(len_a, len_b, self.max_num_tokens)
        return [SegmentPair(_cut(p.tokens_a, cut_a, np_rng), _cut(p.tokens_b, cut_b, np_rng),
                            p.is_random_next)
                for p, cut_a, cut_b in zip(pairs, cuts_a.tolist(), cuts_b.tolist())]

    # ------------------------------------------------------------------ masking
    def instances(self, pairs: Sequence[SegmentPair], np_rng: np.random.Generator
                  ) -> InstanceBatch:
        """Masks `[CLS] A [SEP] B [SEP]` of each pair, all at once.

        The packing is `albert_tf.packing`'s, written here on the flat ids of the whole
        batch (one concatenation) because the masker works on them: `packing.pack`
        handles one sequence at a time and pads it.
        """
        pieces = []
        for pair in pairs:
            pieces += (self.cls, pair.tokens_a, self.sep, pair.tokens_b, self.sep)
        a_lengths = np.array([len(p.tokens_a) + 2 for p in pairs], np.int64)
        lengths = a_lengths + [len(p.tokens_b) + 1 for p in pairs]
        starts = np.concatenate([[0], np.cumsum(lengths)])
        masked = self.masker.mask_batch(np.concatenate(pieces), starts, np_rng)
        return InstanceBatch(masked, a_lengths,
                             np.array([p.is_random_next for p in pairs], np.int8))
