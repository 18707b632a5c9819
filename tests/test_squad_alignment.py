"""A paragraph's pieces aligned to its raw characters (albert_tf.data.squad.alignment):
the original's banded LCS, cell by cell, and the neighbours rule for unmatched
characters; quotes keep their own pieces and align."""

import numpy as np
import pytest

from albert_tf.data import squad
from albert_tf.data.squad import alignment
from albert_tf.tokenization import encode_pieces, preprocess_text
from tests.helpers.squad_data import V1_EXCERPT, V2_EXCERPT, questions, sentencepiece_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


def _literal_lcs(orig, tok, max_dist):
    """The original's recurrence, cell by cell, with a dict of back-pointers."""
    n, m = len(orig), len(tok)
    f, g = {}, {}
    for i in range(n):
        for j in range(i - max_dist, i + max_dist):
            if j < 0 or j >= m:
                continue
            value = 0
            if i > 0:
                g[i, j] = 0
                value = f.get((i - 1, j), 0)
            if j > 0 and f.get((i, j - 1), 0) > value:
                g[i, j] = 1
                value = f[i, j - 1]
            diagonal = f.get((i - 1, j - 1), 0) if i > 0 and j > 0 else 0
            if orig[i] == tok[j] and diagonal + 1 > value:
                g[i, j] = 2
                value = diagonal + 1
            f[i, j] = value
    return f.get((n - 1, m - 1), 0), g


@pytest.mark.parametrize("seed", range(4))
def test_lcs_back_pointers_equal_the_literal_recurrence(seed):
    # Small alphabets: many ties between "up", "left" and "match", where the original's
    # order of preference decides the path.
    rng = np.random.default_rng(seed)
    orig = rng.integers(-1, 3, size=int(rng.integers(5, 60))).tolist()
    tok = rng.integers(0, 3, size=int(rng.integers(5, 60))).tolist()
    for max_dist in (2, abs(len(orig) - len(tok)) + 5, 70):
        score, back = alignment._lcs_table(np.array(orig), np.array(tok), max_dist)
        literal_score, g = _literal_lcs(orig, tok, max_dist)
        assert score == literal_score
        table = {(i, j): int(back[i, j - i + max_dist]) for i in range(len(orig))
                 for j in range(i - max_dist, i + max_dist)
                 if 0 <= j < len(tok) and back[i, j - i + max_dist] >= 0}
        assert table == g


def _literal_align(paragraph, tokenizer):
    pieces = encode_pieces(tokenizer.sp_model, preprocess_text(paragraph, lower=True))
    tok_text = "".join(pieces).replace("▁", " ")
    orig = [preprocess_text(c, remove_space=False, lower=True) for c in paragraph]
    orig = [c if len(c) == 1 else None for c in orig]
    n, m = len(paragraph), len(tok_text)
    for max_dist in (abs(n - m) + 5, 2 * (abs(n - m) + 5)):
        score, g = _literal_lcs(orig, tok_text, max_dist)
        if score > 0.8 * n:
            break
    orig_to_tok, tok_to_orig = [-1] * n, [-1] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in g:
        if g[i, j] == 2:
            orig_to_tok[i], tok_to_orig[j] = j, i
            i, j = i - 1, j - 1
        elif g[i, j] == 1:
            j -= 1
        else:
            i -= 1
    return score, orig_to_tok, tok_to_orig


ALIGNMENT_CASES = [
    "  Hello   ``World''  café naïve — 1,000,000 people, in 1990, x  ",
    "The ﬁrst ﬂoor: Ｆｕｌｌ width, ½ cup and e\u0301 here.",
    # Ligatures widen the pieces' text, combining marks shrink it: the first band is too
    # narrow and the original's second pass (twice as wide) is needed.
    "\ufb01" * 8 + " hello there my friend, this is a normal sentence"
    + "e\u0301" * 8 + " end of the text here",
]


@pytest.mark.parametrize("case", range(len(ALIGNMENT_CASES) + 2))
def test_alignment_equals_the_literal_recurrence(tokenizer, case):
    if case < len(ALIGNMENT_CASES):
        paragraph = ALIGNMENT_CASES[case]
    else:
        paragraph = questions([V1_EXCERPT, V2_EXCERPT][case - len(ALIGNMENT_CASES)])[-1][0]
    score, orig_to_tok, tok_to_orig = _literal_align(paragraph, tokenizer)
    alignment = squad.align_paragraph(paragraph, tokenizer.sp_model, lower=True)
    assert score > 0.8 * len(paragraph) and alignment is not None
    assert alignment.orig_to_chartok_index.tolist() == orig_to_tok
    pieces = tokenizer.tokenize(tokenizer.preprocess(paragraph))
    assert alignment.piece_ids.tolist() == tokenizer.convert_tokens_to_ids(pieces)
    # Each piece's first / last character: mapped directly where the piece's own first /
    # last character was matched.
    position = 0
    for k, piece in enumerate(pieces):
        first, last = position, position + len(piece) - 1
        if tok_to_orig[first] >= 0:
            assert alignment.tok_start_to_orig_index[k] == tok_to_orig[first]
        if tok_to_orig[last] >= 0:
            assert alignment.tok_end_to_orig_index[k] == tok_to_orig[last]
        position += len(piece)


def test_convert_index_takes_the_neighbours():
    index = [-1, 2, -1, 5, -1]
    assert alignment._convert_index(index, 1) == 2
    # Nothing mapped before: start at 0, end just before the first mapped position.
    assert alignment._convert_index(index, 0, is_start=True) == 0
    assert alignment._convert_index(index, 0, is_start=False) == 1
    # Between 2 and 5: the positions strictly between them.
    assert alignment._convert_index(index, 2, is_start=True) == 3
    assert alignment._convert_index(index, 2, is_start=False) == 4
    # Nothing mapped after: up to m - 1 when m is known.
    assert alignment._convert_index(index, 4, m=10, is_start=True) == 6
    assert alignment._convert_index(index, 4, m=10, is_start=False) == 9
    assert alignment._convert_index(index, 4, is_start=True) == 5
    # Adjacent neighbours leave no room: start takes the right one, end the left one.
    assert alignment._convert_index([1, -1, 2], 1, is_start=True) == 2
    assert alignment._convert_index([1, -1, 2], 1, is_start=False) == 1


# The original keeps `` and '' as they are (its preprocess_text does not rewrite them
# into "): `` is its own piece (unknown to this vocabulary), '' two ' pieces.
QUOTED_PARAGRAPH = ("He called it ``the big one'' in 1990, and \u201cCurly\u201d said "
                    "it\u2019s ''fine'' now.")


def test_quotes_keep_their_pieces_and_align(tokenizer):
    sp_model = tokenizer.sp_model
    result = alignment.align_paragraph(QUOTED_PARAGRAPH, sp_model, lower=True)
    pieces = encode_pieces(sp_model, preprocess_text(QUOTED_PARAGRAPH, lower=True))
    assert result.piece_ids.tolist() == [sp_model.PieceToId(p) for p in pieces]
    assert "``" in pieces and pieces.count("'") == 6
    assert not {'"', '▁"'} & set(pieces)
    assert sp_model.PieceToId("'") in result.piece_ids.tolist()
    assert sp_model.PieceToId('"') not in result.piece_ids.tolist()
    # Every quote character is matched: the pieces' text holds the same characters
    # (with the rewriting, each `` and '' pair met a single ").
    tok_text = "".join(pieces).replace("▁", " ")
    for k, char in enumerate(QUOTED_PARAGRAPH):
        if char in "`'\u201c\u201d\u2019":
            matched = int(result.orig_to_chartok_index[k])
            assert matched >= 0 and tok_text[matched] == char, (k, char)
