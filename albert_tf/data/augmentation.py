"""Distillation's augmentation (--distill_augment): copies of the training records with
some words replaced by their nearest neighbours in the teacher's word embeddings,
which the teacher then labels (as it labels --transfer_file's texts).

TinyBERT (Jiao et al. 2020, its data_augmentation.py) makes N copies of each training
sentence (N = 30 for MRPC, 20 for SST-2), each word replaced with probability p = 0.4 by
one of M = 15 candidates: a masked language model's for a word of one piece, GloVe's
nearest words for the others. Neither a masked language model of the teacher's
vocabulary nor word vectors are at hand for every teacher (a fine-tuned classifier has
no MLM head), so here the candidates are the teacher's own: the `neighbours` nearest
pieces by cosine in its word-embedding table. And it works on the records, not the
text, so every kind of task is augmented alike and nothing is tokenized twice:

- a *word* is a piece that begins a word (WordPiece: not `##x`; SentencePiece: `▁x`),
  made of letters alone (Chinese characters included: each is a word of the Chinese
  vocabulary), not a special token, and followed by no piece that continues it, by the
  rule whole-word masking uses (`masking.start_piece_table`, the original's: WordPiece's
  `##y`; a SentencePiece piece of English letters without `▁`, so punctuation, digits
  and special tokens end a word);
- a word is replaced, with `probability`, by one of its `neighbours` nearest words
  (itself excluded), uniformly;
- the positions, the mask, the segments and every other feature stay as they were (a
  token task's label positions included), so a copy is as long as its original;
- a copy changes the words of one segment (a pair's first text or its second, in
  turn: copy 0 the first, copy 1 the second, ...), as TinyBERT augments one sentence
  of a pair at a time; the rest of the record is its original's;
- each copy draws from its own stream, seeded by (seed, record, copy): the same
  records and seed make the same copies, in any order. A copy that changed no word is
  not kept.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.data.masking import SPIECE_UNDERLINE, start_piece_table


@dataclasses.dataclass(frozen=True)
class WordPieces:
    """Per id of the vocabulary: `word` (a piece that is a whole word of letters when
    nothing continues it: replaceable, and a candidate) and `continues` (a piece that
    continues the word before it)."""

    word: np.ndarray
    continues: np.ndarray


def word_pieces(tokenizer) -> WordPieces:
    """`WordPieces` of a `FullTokenizer` (WordPiece or SentencePiece)."""
    continues = ~start_piece_table(tokenizer)
    word = np.zeros(len(continues), bool)
    sp = tokenizer.sp_model
    for i, piece in tokenizer.inv_vocab.items():
        if sp is not None:
            special = sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i)
            core = piece[1:] if piece.startswith(SPIECE_UNDERLINE) else ""
        else:
            special = piece.startswith("[") and piece.endswith("]")  # [CLS], [unused0]
            core = "" if continues[i] else piece
        word[i] = not special and core.isalpha()
        continues[i] &= not special  # (SentencePiece's [SEP] ends the word before it)
    return WordPieces(word, continues)


class NearestWords:
    """The candidates (a boolean mask over the rows of `table`, [vocab, E]) nearest to
    an id by cosine in `table`: the table normalized once, then a matmul per block of
    ids asked for."""

    def __init__(self, table: np.ndarray, candidates: np.ndarray):
        table = np.asarray(table, np.float32)
        self.unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
        self.pool = np.flatnonzero(candidates)
        self.pool_unit = self.unit[self.pool]

    def find(self, ids, count: int, chunk: int = 1024) -> dict[int, np.ndarray]:
        """For each of `ids`: the `count` nearest candidates, nearest first, itself
        excluded."""
        ids = np.asarray(sorted(set(int(i) for i in ids)), np.int64)
        top = min(count, len(self.pool) - 1)
        found = {}
        for start in range(0, len(ids), chunk):
            block = ids[start:start + chunk]
            similarity = self.unit[block] @ self.pool_unit.T              # [chunk, pool]
            similarity[self.pool[None, :] == block[:, None]] = -np.inf    # not itself
            best = np.argpartition(-similarity, top - 1, axis=1)[:, :top]
            order = np.take_along_axis(similarity, best, 1).argsort(axis=1)[:, ::-1]
            for i, row in zip(block, np.take_along_axis(best, order, 1)):
                found[int(i)] = self.pool[row]
        return found


def replaceable(ids: np.ndarray, pieces: WordPieces) -> np.ndarray:
    """The positions of `ids` (a record's flat input ids) that hold a whole word."""
    after = np.append(ids[1:], -1)
    followed = np.zeros(len(ids), bool)
    inside = after >= 0
    followed[inside] = pieces.continues[after[inside]]
    return pieces.word[ids] & ~followed


class Augmenter:
    """Copies of records with words replaced (the module docstring)."""

    def __init__(self, tokenizer, embeddings, copies: int, probability: float,
                 neighbours: int, seed: int):
        self.pieces = word_pieces(tokenizer)
        self.words = NearestWords(np.asarray(embeddings)[:len(self.pieces.word)],
                                  self.pieces.word)
        self.copies, self.probability = copies, probability
        self.neighbours, self.seed = neighbours, seed
        self._nearest: dict[int, np.ndarray] = {}

    def _candidates(self, words) -> None:
        missing = [i for i in set(words) if i not in self._nearest]
        if missing:
            self._nearest.update(self.words.find(missing, self.neighbours))

    def copy_of(self, index: int, ids, copy: int, segments=None) -> np.ndarray | None:
        """Copy number `copy` of record number `index`, whose flat input ids are `ids`
        (and segment ids `segments`: the copy's words are all of one segment, the
        copy's turn among those with words): the ids with words replaced, or None where
        no word was replaced."""
        ids = np.asarray(ids, np.int64)
        where = np.flatnonzero(replaceable(ids, self.pieces))
        if segments is not None and len(where):
            segments = np.asarray(segments)[where]
            turns = np.unique(segments)
            where = where[segments == turns[copy % len(turns)]]
        rng = np.random.default_rng([self.seed, index, copy])
        chosen = where[rng.random(len(where)) < self.probability]
        if not len(chosen):
            return None
        self._candidates(ids[chosen].tolist())
        new = ids.copy()
        for position, draw in zip(chosen, rng.random(len(chosen))):
            nearest = self._nearest[int(ids[position])]
            new[position] = nearest[int(draw * len(nearest))]
        return new

    def records(self, path: str):
        """(copy, index, serialized record) of each kept copy of the records at
        `path`, copy by copy (each copy a pass over the file, in its order; no more
        than one record in memory)."""
        for copy in range(self.copies):
            for i, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
                example = tf.train.Example.FromString(record)
                feature = example.features.feature
                new = self.copy_of(i, feature[names.INPUT_IDS].int64_list.value, copy,
                                   feature[names.SEGMENT_IDS].int64_list.value)
                if new is not None:
                    example.features.feature[names.INPUT_IDS].int64_list.value[:] = \
                        new.tolist()
                    yield copy, i, example.SerializeToString()
