"""A paragraph's SentencePiece pieces aligned to its raw characters, as the original.

The original `squad_utils.py` tokenizes the preprocessed paragraph, joins the pieces'
text (`▁` read as a space) and aligns it with the raw paragraph by a banded longest
common subsequence over characters, each raw character compared after the same
per-character preprocessing. Answer offsets (characters) become piece positions through
this alignment, and predicted pieces become text through its inverse.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import numpy as np

from albert_tf import tokenization

# The original reports a mismatch (and drops the paragraph's questions) when fewer than
# this share of the raw characters are matched.
MIN_MATCHED_SHARE = 0.8


@dataclasses.dataclass(frozen=True)
class ParagraphAlignment:
    """A paragraph's pieces and where each lies in the raw paragraph text.

    piece_ids: [num_pieces] ids of the paragraph's pieces.
    tok_start_to_orig_index / tok_end_to_orig_index: [num_pieces] character offsets in
      the raw paragraph of each piece's first / last character (the leading `▁` counts
      as a character).
    orig_to_chartok_index: [len(paragraph)] matched position in the pieces' text, -1
      when unmatched. chartok_to_tok_index: [len(pieces' text)] piece of each character.
    """

    piece_ids: np.ndarray
    tok_start_to_orig_index: np.ndarray
    tok_end_to_orig_index: np.ndarray
    orig_to_chartok_index: np.ndarray
    chartok_to_tok_index: np.ndarray

    def char_span_to_pieces(self, start: int, end: int) -> tuple[int, int]:
        """First and last piece of the raw characters start..end (inclusive)."""
        orig_to_chartok = self.orig_to_chartok_index.tolist()
        first = _convert_index(orig_to_chartok, start, is_start=True)
        last = _convert_index(orig_to_chartok, end, is_start=False)
        return int(self.chartok_to_tok_index[first]), int(self.chartok_to_tok_index[last])


def align_paragraph(paragraph_text: str, sp_model, lower: bool) -> ParagraphAlignment | None:
    """Pieces of a paragraph aligned to its raw characters as the original does, or None
    where the original reports a mismatch (under 80% of the characters matched)."""
    pieces = tokenization.encode_pieces(
        sp_model, tokenization.preprocess_text(paragraph_text, lower=lower))
    chartok_to_tok, tok_start_to_chartok, tok_end_to_chartok = _piece_characters(pieces)
    tok_text = "".join(pieces).replace(tokenization.SPIECE_UNDERLINE, " ")
    n, m = len(paragraph_text), len(tok_text)
    if n == 0 or m == 0:
        return None
    orig = np.array([_normalized_char(c, lower) for c in paragraph_text], np.int64)
    tok = np.array([ord(c) for c in tok_text], np.int64)

    # A narrow band first; twice as wide when too little of the paragraph matched.
    max_dist = abs(n - m) + 5
    for band in (max_dist, 2 * max_dist):
        score, back = _lcs_table(orig, tok, band)
        if score > MIN_MATCHED_SHARE * n:
            break
    orig_to_chartok, chartok_to_orig = _trace_back(back, n, m, band)
    if score < MIN_MATCHED_SHARE * n or all(v < 0 for v in orig_to_chartok):
        return None
    return ParagraphAlignment(
        piece_ids=np.array([sp_model.PieceToId(p) for p in pieces], np.int32),
        tok_start_to_orig_index=np.array(
            [_convert_index(chartok_to_orig, s, n, is_start=True)
             for s in tok_start_to_chartok], np.int32),
        tok_end_to_orig_index=np.array(
            [_convert_index(chartok_to_orig, e, n, is_start=False)
             for e in tok_end_to_chartok], np.int32),
        orig_to_chartok_index=np.array(orig_to_chartok, np.int32),
        chartok_to_tok_index=np.array(chartok_to_tok, np.int32))


def _piece_characters(pieces: Sequence[str]) -> tuple[list[int], list[int], list[int]]:
    """In the pieces' joined text: the piece of each character, and each piece's first
    and last character."""
    chartok_to_tok, tok_start_to_chartok, tok_end_to_chartok = [], [], []
    char_count = 0
    for i, piece in enumerate(pieces):
        piece_text = piece.replace(tokenization.SPIECE_UNDERLINE, " ")
        chartok_to_tok.extend([i] * len(piece_text))
        tok_start_to_chartok.append(char_count)
        char_count += len(piece_text)
        tok_end_to_chartok.append(char_count - 1)
    return chartok_to_tok, tok_start_to_chartok, tok_end_to_chartok


@functools.lru_cache(maxsize=65536)
def _normalized_char(char: str, lower: bool) -> int:
    """The code point `char` becomes under the original's per-character preprocessing,
    or -1 when it becomes no character or several (it then matches nothing)."""
    normalized = tokenization.preprocess_text(char, remove_space=False, lower=lower)
    return ord(normalized) if len(normalized) == 1 else -1


def _lcs_table(orig: np.ndarray, tok: np.ndarray, max_dist: int) -> tuple[int, np.ndarray]:
    """The original's banded longest common subsequence of two code-point arrays.

    Cell (i, j) exists for j in [i - max_dist, i + max_dist) and 0 <= j < m; every other
    cell counts 0. Returns f[n-1, m-1] and the back-pointers [n, 2 * max_dist], stored
    by band offset `j - i + max_dist`: 2 = match (diagonal), 1 = left (j - 1), 0 = up
    (i - 1), -1 = none, with the original's preference order (a match only when strictly
    longer, then left only when strictly longer than up).
    """
    n, m = len(orig), len(tok)
    width = 2 * max_dist
    back = np.full((n, width), -1, np.int8)
    prev = np.zeros(m + 1, np.int64)  # prev[j + 1] = f[i - 1, j]; prev[0] = 0
    for i in range(n):
        lo, hi = max(0, i - max_dist), min(m, i + max_dist)
        row_prev = np.zeros(m + 1, np.int64)
        if lo < hi:
            up = prev[lo + 1:hi + 1]
            diag_plus_one = prev[lo:hi] + 1
            match = tok[lo:hi] == orig[i]
            # f[i, j] = max(up, left, diag + 1 on a match); left is the running maximum.
            row = np.maximum.accumulate(np.where(match, np.maximum(up, diag_plus_one), up))
            left = np.concatenate(([0], row[:-1]))
            best_before_match = np.maximum(up, left)
            takes_match = match & (diag_plus_one > best_before_match)
            takes_left = ~takes_match & (left > up)
            back[i, lo - i + max_dist:hi - i + max_dist] = np.where(
                takes_match, 2, np.where(takes_left, 1, 0 if i > 0 else -1))
            row_prev[lo + 1:hi + 1] = row
        prev = row_prev
    return int(prev[m]), back


def _trace_back(back: np.ndarray, n: int, m: int, max_dist: int
                ) -> tuple[list[int], list[int]]:
    """Matched pairs along the back-pointers from (n-1, m-1): (orig -> chartok,
    chartok -> orig), -1 where unmatched."""
    orig_to_chartok = [-1] * n
    chartok_to_orig = [-1] * m
    i, j = n - 1, m - 1
    width = 2 * max_dist
    while i >= 0 and j >= 0:
        offset = j - i + max_dist
        if not 0 <= offset < width:
            break
        step = back[i, offset]
        if step < 0:
            break
        if step == 2:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif step == 1:
            j -= 1
        else:
            i -= 1
    return orig_to_chartok, chartok_to_orig


def _convert_index(index: Sequence[int], pos: int, m: int | None = None,
                   is_start: bool = True) -> int:
    """Maps `pos` through `index` (-1 = unmapped), taking the original's choice for an
    unmapped position from its nearest mapped neighbours on each side."""
    if index[pos] >= 0:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] < 0:
        rear += 1
    front = pos
    while front > 0 and index[front] < 0:
        front -= 1
    if index[front] < 0:  # nothing mapped before pos
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] < 0:  # nothing mapped after pos
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if index[rear] > index[front] + 1:
        return index[front] + 1 if is_start else index[rear] - 1
    return index[rear] if is_start else index[front]
