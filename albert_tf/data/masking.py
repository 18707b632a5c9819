"""Masked-LM targets as the original `create_pretraining_data.py` chooses them.

The distribution is the original's (google-research/albert):

- Every piece that is not `[CLS]`/`[SEP]` belongs to a *word*: with whole-word masking a
  piece that does not start a word joins the word before it, otherwise every piece is a
  word. `token_boundary` is 1 at `[CLS]`, `[SEP]` and at pieces that start a word (by
  the original's `is_start_piece` rule, also without whole-word masking).
- The budget is `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`
  pieces (Python's `round`: halves to even), `len(tokens)` counting `[CLS]`/`[SEP]`.
- Words are visited in a random order. At each one an n-gram length `n` in
  `1..max_ngram` is drawn with `p(n) ∝ 1/n` (reversed, `p(n) ∝ 1/(max_ngram + 1 - n)`,
  without `favor_shorter_ngram`); the span is the `n` words from there (fewer at the
  end of the sequence). While the span would overrun the budget it is shortened one
  word at a time; if even one word overruns, or any word of the span is masked
  already, the word is skipped. Visiting stops once the budget is reached.
- Each chosen piece independently becomes `[MASK]` (80%), stays (10%) or becomes a
  uniformly random vocabulary entry (10%, any id, control symbols included).

`ngram_probabilities`, `num_to_predict`, `start_piece_table` and `choose_spans` are the
pieces a dynamic (in-graph) masker needs to reproduce this; `Masker` puts them together
for the static data creation. Unlike the original, whose n-gram lengths come from
NumPy's global, unseeded generator, every draw here comes from the generator passed in.
"""

from __future__ import annotations

import dataclasses
import string
from typing import Iterable, Sequence

import numpy as np

# The 80% / 10% / 10% replacement of a chosen piece.
MASK_TOKEN_PROB = 0.8
KEEP_TOKEN_PROB = 0.1
RANDOM_TOKEN_PROB = 0.1

# The original's `_is_start_piece_sp` tables. Its punctuation string spells `"` twice
# and has no apostrophe (an escaping slip), so `'` counts as a foreign character: a
# piece containing it always starts a word. Its `€`/`£` entries are UTF-8 bytes that
# never equal a piece, which changes nothing since those characters are not English
# letters either.
_SP_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset(string.ascii_lowercase) | _SP_PUNCTUATION
SPIECE_UNDERLINE = "▁"


def ngram_probabilities(max_ngram: int, favor_shorter: bool = True) -> np.ndarray:
    """p(n) for n = 1..max_ngram: ∝ 1/n, or reversed when not `favor_shorter`.

    With max_ngram=3: [6/11, 3/11, 2/11] (reversed: [2/11, 3/11, 6/11]).
    """
    if max_ngram < 1:
        raise ValueError(f"ngram must be at least 1, got {max_ngram}")
    p = 1.0 / np.arange(1, max_ngram + 1)
    p /= p.sum()
    return p if favor_shorter else p[::-1].copy()


def num_to_predict(seq_length: int, masked_lm_prob: float,
                   max_predictions_per_seq: int) -> int:
    """How many pieces the original masks in a sequence of `seq_length` tokens (with
    `[CLS]`/`[SEP]`); 0 when `masked_lm_prob` is 0."""
    if masked_lm_prob == 0:
        return 0
    return min(max_predictions_per_seq, max(1, int(round(seq_length * masked_lm_prob))))


def is_start_piece_sentencepiece(piece: str) -> bool:
    """The original rule: a SentencePiece piece starts a word unless it is made only
    of English letters and ASCII punctuation without a leading `▁` (nor `<`), and is
    not a single punctuation mark. Digits and non-English characters start words."""
    if piece.startswith((SPIECE_UNDERLINE, "<")) or piece in _SP_PUNCTUATION:
        return True
    return not all(c.lower() in _SP_WORD_CHARS for c in piece)


def is_start_piece_wordpiece(piece: str) -> bool:
    """WordPiece continuation pieces start with `##`."""
    return not piece.startswith("##")


def start_piece_table(tokenizer) -> np.ndarray:
    """bool[vocab id]: whether the piece of that id starts a word.

    Indexed by id so that a whole sequence is classified with one lookup. Unknown
    SentencePiece pieces map to `<unk>`, which starts a word, as their surface text
    (a character outside the vocabulary) does in the original.
    """
    if tokenizer.sp_model is not None:
        sp = tokenizer.sp_model
        return np.array([is_start_piece_sentencepiece(sp.IdToPiece(i))
                         for i in range(sp.GetPieceSize())], dtype=bool)
    table = np.ones(max(tokenizer.vocab.values()) + 1, dtype=bool)
    for piece, index in tokenizer.vocab.items():
        table[index] = is_start_piece_wordpiece(piece)
    return table


def draw_ngram_lengths(rng: np.random.Generator, probabilities: np.ndarray,
                       size: int) -> np.ndarray:
    """`size` n-gram lengths (1-based) drawn from `probabilities`."""
    thresholds = np.cumsum(probabilities)[:-1]
    return np.searchsorted(thresholds, rng.random(size), side="right") + 1


def choose_spans(word_starts: Sequence[int], order: Iterable[int],
                 ngram_lengths: Iterable[int], budget: int, first_word: int = 0,
                 end_word: int | None = None) -> list[tuple[int, int]]:
    """The original's span selection in one sequence, as `(first, end)` word pairs
    (end exclusive).

    Args:
      word_starts: piece offset of each word, then one more entry: the offset after
        the last word (so word `w` has `word_starts[w + 1] - word_starts[w]` pieces).
      order: the words `first_word <= w < end_word` of the sequence, in the order
        they are visited (a random permutation).
      ngram_lengths: the n drawn for each visit, aligned with `order`.
      budget: the most pieces to choose (`num_to_predict`).
      first_word, end_word: the sequence's words (default: all of `word_starts`).
    """
    if end_word is None:
        end_word = len(word_starts) - 1
    covered = bytearray(end_word - first_word)
    spans = []
    count = 0
    for first, n in zip(order, ngram_lengths):
        if count >= budget:
            break
        end = min(first + n, end_word)
        start_piece = word_starts[first]
        # Shorter n-grams until the span fits the budget (a span cut by the end of the
        # sequence repeats the same end, so visiting each end once is equivalent).
        while end > first + 1 and count + word_starts[end] - start_piece > budget:
            end -= 1
        size = word_starts[end] - start_piece
        if count + size > budget or 1 in covered[first - first_word:end - first_word]:
            continue
        covered[first - first_word:end - first_word] = b"\x01" * (end - first)
        spans.append((first, end))
        count += size
    return spans


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of `arange(start, end)` for each pair."""
    sizes = ends - starts
    return np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())


@dataclasses.dataclass
class MaskedBatch:
    """Masked sequences, concatenated (sequence k is `input_ids[starts[k]:starts[k+1]]`).

    What the original's `TrainingInstance` carries, for a batch of instances.
    """
    starts: np.ndarray               # [K + 1] offsets of the sequences
    input_ids: np.ndarray            # [T] int32, replacements applied
    token_boundary: np.ndarray       # [T] int8
    masked_starts: np.ndarray        # [K + 1] offsets of each sequence's predictions
    masked_lm_positions: np.ndarray  # [N] int32, within its sequence, ascending
    masked_lm_ids: np.ndarray        # [N] int32, the original ids there

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @property
    def num_masked(self) -> np.ndarray:
        return np.diff(self.masked_starts)

    def sequence(self, k: int) -> MaskedSequence:
        a, b = self.starts[k], self.starts[k + 1]
        c, d = self.masked_starts[k], self.masked_starts[k + 1]
        return MaskedSequence(self.input_ids[a:b], self.token_boundary[a:b],
                              self.masked_lm_positions[c:d], self.masked_lm_ids[c:d])


@dataclasses.dataclass
class MaskedSequence:
    """One sequence after masking."""
    input_ids: np.ndarray            # [len] int32, with replacements applied
    token_boundary: np.ndarray       # [len] int8
    masked_lm_positions: np.ndarray  # [num_masked] int32, ascending
    masked_lm_ids: np.ndarray        # [num_masked] int32, the original ids there


class Masker:
    """Chooses masked-LM targets for id sequences that hold `[CLS]`/`[SEP]`.

    Args:
      tokenizer: a `FullTokenizer` (its vocabulary gives the start-piece table, the
        special ids and the ids that random replacement draws from).
      masked_lm_prob, max_predictions_per_seq, max_ngram, favor_shorter_ngram,
      do_whole_word_mask: the original flags.
    """

    def __init__(self, tokenizer, *, masked_lm_prob: float = 0.15,
                 max_predictions_per_seq: int = 20, max_ngram: int = 3,
                 favor_shorter_ngram: bool = True, do_whole_word_mask: bool = True):
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.do_whole_word_mask = do_whole_word_mask
        self.ngram_probs = ngram_probabilities(max_ngram, favor_shorter_ngram)
        self.is_start = start_piece_table(tokenizer)
        self.cls_id = tokenizer.special_id("[CLS]")
        self.sep_id = tokenizer.special_id("[SEP]")
        self.mask_id = tokenizer.special_id("[MASK]")
        # The original draws a random replacement uniformly from the vocabulary's
        # entries (`list(vocab.keys())`), then converts it to its id.
        self.replacement_ids = np.array(sorted(set(tokenizer.vocab.values())), np.int32)

    def token_boundary(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(`token_boundary` int8, whether each position is `[CLS]`/`[SEP]`)."""
        special = (ids == self.cls_id) | (ids == self.sep_id)
        return (special | self.is_start[ids]).astype(np.int8), special

    def words(self, ids: np.ndarray, special: np.ndarray, starts: np.ndarray | None = None
              ) -> tuple[np.ndarray, list[int]]:
        """The maskable positions (every non-special piece, ascending) and, as offsets
        into them, where each word starts (plus their count at the end).

        With whole-word masking a non-start piece joins the previous word even across
        a `[SEP]` (as in the original), but a sequence's first maskable piece always
        starts a word. `starts`: the offsets of the sequences in `ids` (default: one).
        """
        positions = np.flatnonzero(~special)
        if not self.do_whole_word_mask:
            return positions, list(range(len(positions) + 1))
        word_start = self.is_start[ids[positions]]
        sequence = (np.zeros(len(positions), np.int64) if starts is None
                    else np.searchsorted(starts, positions, side="right") - 1)
        word_start[1:] |= sequence[1:] != sequence[:-1]
        word_start[:1] = True
        return positions, np.flatnonzero(word_start).tolist() + [len(positions)]

    def __call__(self, ids: np.ndarray, rng: np.random.Generator) -> MaskedSequence:
        """Masks one sequence (`[CLS] A [SEP] B [SEP]` ids) with draws from `rng`."""
        return self.mask_batch(np.asarray(ids), np.array([0, len(ids)]), rng).sequence(0)

    def mask_batch(self, ids: np.ndarray, starts: np.ndarray, rng: np.random.Generator
                   ) -> MaskedBatch:
        """Masks the concatenated sequences `ids[starts[k]:starts[k+1]]`, each as the
        original would, all at once (the per-sequence loop is the span choice only)."""
        starts = np.asarray(starts, np.int64)
        ids = np.asarray(ids, np.int32)
        boundary, special = self.token_boundary(ids)
        positions, word_starts = self.words(ids, special, starts)
        # Words of sequence k: word_offsets[k]..word_offsets[k+1].
        word_sequence = (np.searchsorted(starts, positions[word_starts[:-1]], side="right")
                         - 1)
        word_offsets = np.searchsorted(word_sequence, np.arange(len(starts)))
        budgets = np.minimum(self.max_predictions_per_seq, np.maximum(
            1, np.round(np.diff(starts) * self.masked_lm_prob))).astype(np.int64)
        if self.masked_lm_prob == 0:
            budgets[:] = 0
        # A random visiting order within each sequence, and an n for each visit.
        num_words = len(word_sequence)
        order = np.lexsort((rng.random(num_words), word_sequence)).tolist()
        lengths = draw_ngram_lengths(rng, self.ngram_probs, num_words).tolist()
        span_starts, span_ends = [], []
        offsets = word_offsets.tolist()
        for k, budget in enumerate(budgets.tolist()):
            first, end = offsets[k], offsets[k + 1]
            if budget == 0 or first == end:
                continue
            for a, b in choose_spans(word_starts, order[first:end], lengths[first:end],
                                     budget, first, end):
                span_starts.append(word_starts[a])
                span_ends.append(word_starts[b])
        chosen = np.sort(positions[_ranges(np.array(span_starts, np.int64),
                                           np.array(span_ends, np.int64))])
        sequence_of = np.searchsorted(starts, chosen, side="right") - 1
        output = ids.copy()
        labels = output[chosen]
        self.replace(output, chosen, rng)
        return MaskedBatch(
            starts=starts, input_ids=output, token_boundary=boundary,
            masked_starts=np.searchsorted(sequence_of, np.arange(len(starts))),
            masked_lm_positions=(chosen - starts[sequence_of]).astype(np.int32),
            masked_lm_ids=labels)

    def replace(self, ids: np.ndarray, chosen: np.ndarray, rng: np.random.Generator) -> None:
        """80% `[MASK]`, 10% unchanged, 10% a random vocabulary id, in place."""
        draw = rng.random(len(chosen))
        random_ids = self.replacement_ids[
            rng.integers(0, len(self.replacement_ids), len(chosen))]
        to_mask = draw < MASK_TOKEN_PROB
        to_random = draw >= MASK_TOKEN_PROB + KEEP_TOKEN_PROB
        ids[chosen[to_mask]] = self.mask_id
        ids[chosen[to_random]] = random_ids[to_random]
