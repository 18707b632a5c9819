"""Raw text inside a LiteRT file: the `serve_text` signature of `export_tflite(...,
with_text=True)`, tokenized by TensorFlow Text ops that LiteRT can run.

`serve_text` in a SavedModel tokenizes with the in-graph tokenizer of `albert_tf.text`:
regular expressions, Unicode normalization, lowercasing, hash tables and ragged ops, all
outside LiteRT's built-in operators. Here the same ids come from TensorFlow Text's
tokenizer ops that TF Text ships LiteRT kernels for (custom ops the app's runtime
registers), with built-in operators around them. The text rules of both tokenizers
(whitespace, control characters, accents, lowercasing, CJK characters) act on one
character at a time, so they become the character map of a SentencePiece normalizer,
which `FastSentencepieceTokenize` applies:

- SentencePiece models (Google's English ALBERT): `preprocess_text` folded into the
  model's own normalizer (`folded_sentencepiece_model`: each character's preprocessed
  text, normalized as the model normalizes, is one rule), then the original's re-split
  of pieces such as `▁1990,` (`tokenization.resplit_piece`), which depends on the piece
  alone and so is a table lookup (`ResplitTable`). One custom op.
- WordPiece vocabularies (the Chinese models): BERT's cleaning, lowercasing and accent
  stripping as the character map of a one-character-per-piece SentencePiece model
  (`wordpiece_normalizer_model`), whose pieces `FastSentencepieceDetokenize` joins back
  into the normalized text, which `FastWordpieceTokenize` splits (whitespace,
  punctuation, CJK characters, as BERT's basic tokenizer) and tokenizes (greedy
  longest-match). Three custom ops.

Packing is `packing.pack_dense` (gathers and selects). The ids equal `FullTokenizer
.encode`'s (tests/test_tflite_text.py: English and Chinese texts, the edge cases; with
../shared, 15,922 SQuAD and GLUE dev texts and 100,708 CLUENER2020 and C3 texts all the
same), except where a character's rule depends on its neighbours, which a character map
cannot see: Python lowercases a capital sigma ending a word to ς (here σ), and a
character outside both the vocabulary and the Basic Multilingual Plane's CJK blocks
that touches a letter or digit becomes one word with it ([UNK]) where BERT would split
a supplementary-plane CJK character off; WordPiece's longest word (200) counts bytes here,
characters in Python. Text must be valid UTF-8 (invalid bytes, which the Python
tokenizer drops, become unknown pieces here).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
import tensorflow as tf

from albert_tf import fileio, packing
from albert_tf.export import serving_text
from albert_tf.tokenization import (
    CLS,
    SEP,
    UNK,
    FullTokenizer,
    TokenizerError,
    characters,
    compiled_charsmap,
    folded_sentencepiece_model,
    resplit_piece,
)

# The custom ops a text file may hold, and the TF Text functions that register their
# kernels with a LiteRT interpreter (`tensorflow_text.tflite_registrar`), by op.
REGISTERERS = {
    "TFText>FastSentencepieceTokenize": "AddFastSentencepieceTokenize",
    "TFText>FastSentencepieceDetokenize": "AddFastSentencepieceDetokenize",
    "FastWordpieceTokenizeWithOffsets": "AddFastWordpieceTokenize",
}
CUSTOM_OPS = tuple(REGISTERERS)


# Stand-ins the WordPiece normalizer writes for characters that no vocabulary entry holds
# (first of each list absent from the vocabulary): a punctuation character (BERT splits
# there), a letter (a word with it is [UNK]) and a CJK character (a word of its own).
_PUNCTUATION_STAND_INS = "\u2e3a\u2e3b\u2e40"
_LETTER_STAND_INS = "\ua7fb\ua7fc\ua7fd"
_CJK_STAND_INS = "".join(chr(c) for c in range(0x9FA5, 0x9F00, -1))


@dataclasses.dataclass(frozen=True)
class WordpieceNormalizer:
    """The serialized SentencePiece model of BERT's normalization (`model`) and the
    ids its pieces need: `unknown_id`, and `letter_id`, the stand-in letter's piece,
    which replaces it before the pieces are joined (`FastSentencepieceDetokenize`
    writes an unknown piece as " ⁇ ", spaces that would split a word); `space_id` and
    `piece_bytes`, to join rows and find them again."""

    model: bytes
    unknown_id: int
    letter_id: int
    space_id: int                # the piece of a space ("▁")
    piece_bytes: np.ndarray      # [pieces] int32: the UTF-8 bytes each piece writes


@functools.lru_cache(maxsize=4)
def wordpiece_normalizer_model(vocab_file: str, do_lower_case: bool) -> WordpieceNormalizer:
    """BERT's basic tokenizer's character rules (`tokenization.BasicTokenizer`: control
    characters dropped, whitespace as a space, lowercasing and accent stripping with
    `do_lower_case`), as a SentencePiece unigram model of one piece per character of the
    vocabulary: tokenizing and detokenizing with it gives the normalized text, in which
    a character no vocabulary entry holds is a stand-in of its kind (`_*_STAND_INS`), as
    WordPiece treats them alike. CJK characters are split by `FastWordpieceTokenize`."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    from albert_tf.tokenization import (
        _is_chinese_char,
        _is_control,
        _is_punctuation,
        _is_whitespace,
        _strip_accents,
        load_vocab,
    )

    alphabet = set()
    for token in load_vocab(vocab_file):
        alphabet.update(token[2:] if token.startswith("##") else token)
    alphabet.discard(" ")

    def absent(candidates, kind):
        for char in candidates:
            if char not in alphabet:
                return char
        raise TokenizerError(f"{vocab_file} holds every stand-in {kind} this export "
                             f"knows ({candidates}); its text cannot be tokenized in "
                             "LiteRT")

    punctuation = absent(_PUNCTUATION_STAND_INS, "punctuation")
    letter = absent(_LETTER_STAND_INS, "letter")
    cjk = absent(_CJK_STAND_INS, "CJK character")
    rules = []
    for char in characters(also=_is_chinese_char):
        code = ord(char)
        if code == 0xFFFD or _is_control(char):
            text = ""
        elif _is_whitespace(char):
            text = " "
        elif _is_chinese_char(code):
            text = char if char in alphabet or code > 0xFFFF else cjk
        else:
            text = _strip_accents(char.lower()) if do_lower_case else char
            text = "".join(c if c in alphabet or c == " " else
                           punctuation if _is_punctuation(c) else
                           letter if c == "\u2581" else c for c in text)
        if text != char:
            rules.append((char, text))
    model = model_pb2.ModelProto()
    model.trainer_spec.model_type = model_pb2.TrainerSpec.UNIGRAM
    for piece, kind in (("<unk>", model_pb2.ModelProto.SentencePiece.UNKNOWN),
                        ("<s>", model_pb2.ModelProto.SentencePiece.CONTROL),
                        ("</s>", model_pb2.ModelProto.SentencePiece.CONTROL)):
        model.pieces.add(piece=piece, type=kind, score=0.0)
    pieces = sorted(alphabet | {"\u2581", punctuation, letter, cjk})
    for piece in pieces:
        model.pieces.add(piece=piece, score=-1.0)
    model.trainer_spec.vocab_size = len(model.pieces)
    spec = model.normalizer_spec
    spec.name = "bert_basic_tokenizer"
    spec.precompiled_charsmap = compiled_charsmap(rules)
    spec.add_dummy_prefix = False
    spec.remove_extra_whitespaces = False
    spec.escape_whitespaces = True
    written = [len(piece.piece.replace("\u2581", " ").encode()) for piece in model.pieces]
    return WordpieceNormalizer(model.SerializeToString(), unknown_id=0,
                               letter_id=3 + pieces.index(letter),
                               space_id=3 + pieces.index("\u2581"),
                               piece_bytes=np.array(written, np.int32))


@dataclasses.dataclass(frozen=True)
class ResplitTable:
    """`tokenization.resplit_piece` for every id, as arrays: `row[id]` is 0 for a piece
    kept as it is, else its row r >= 1 of `pieces` [R + 1, K] (its ids, padded with
    0), `counts[r]` how many (`counts[0]` = 1)."""

    row: np.ndarray
    pieces: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, sp_model) -> "ResplitTable":
        size = sp_model.GetPieceSize()
        row = np.zeros([size], np.int32)
        splits = [[]]
        for i in range(size):
            pieces = resplit_piece(sp_model, sp_model.IdToPiece(i))
            if pieces != [sp_model.IdToPiece(i)]:
                row[i] = len(splits)
                splits.append([sp_model.PieceToId(p) for p in pieces])
        width = max(len(s) for s in splits) if len(splits) > 1 else 1
        table = np.zeros([len(splits), width], np.int32)
        for r, ids in enumerate(splits):
            table[r, :len(ids)] = ids
        counts = np.array([1] + [len(s) for s in splits[1:]], np.int32)
        return cls(row, table, counts)

    def apply(self, values, row_splits):
        """Flat ids [F] and row splits [B + 1] -> the same after the re-split."""
        rows = tf.gather(tf.constant(self.row), values)  # [F]
        pieces = tf.gather(tf.constant(self.pieces), rows)  # [F, K]
        pieces = tf.concat([tf.where(rows == 0, values, pieces[:, 0])[:, None],
                            pieces[:, 1:]], axis=1)
        counts = tf.gather(tf.constant(self.counts), rows)  # [F]
        keep = tf.range(tf.shape(pieces)[1])[None, :] < counts[:, None]
        new_values = tf.gather_nd(pieces, tf.where(keep))
        ends = tf.concat([[0], tf.cumsum(counts)], axis=0)  # piece i's ids start at ends[i]
        return new_values, tf.gather(ends, tf.cast(row_splits, tf.int32))


class LiteTextTokenizer:
    """Raw text -> `FullTokenizer.encode`'s ids with ops LiteRT runs (see the module
    docstring), from a SentencePiece model (`spm_model_file`; a non-unigram one raises
    `TokenizerError`) or a WordPiece vocabulary (`vocab_file`). `custom_ops`: the TF
    Text ops its graph holds."""

    def __init__(self, *, spm_model_file=None, vocab_file=None, do_lower_case: bool = True):
        import tensorflow_text as tf_text

        python = FullTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
        self.cls_id, self.sep_id = python.special_id(CLS), python.special_id(SEP)
        self.pad_id = python.special_id("pad")
        if spm_model_file:
            from albert_tf.text import _check_unigram

            path = os.fspath(spm_model_file)
            _check_unigram(fileio.read_bytes(path), path)
            self._sentencepiece = tf_text.FastSentencepieceTokenizer(
                folded_sentencepiece_model(path, bool(do_lower_case)))
            self._resplit = ResplitTable.of(python.sp_model)
            self._wordpiece = None
            self.custom_ops = ("TFText>FastSentencepieceTokenize",)
            return
        path = os.fspath(vocab_file)
        self._normalizer = wordpiece_normalizer_model(path, bool(do_lower_case))
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(self._normalizer.model)
        # Entries that are whitespace (blank lines) would match spaces: they keep their
        # ids under names no text holds.
        vocab = [token if token.strip() else f"[albert_tf blank line {i}]"
                 for i, token in enumerate(python.vocab)]
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab, suffix_indicator="##", max_bytes_per_word=python.wordpiece_tokenizer
            .max_input_chars_per_word, token_out_type=tf.int32, unknown_token=UNK,
            no_pretokenization=False, support_detokenization=False)
        self.custom_ops = ("TFText>FastSentencepieceTokenize",
                           "TFText>FastSentencepieceDetokenize",
                           "FastWordpieceTokenizeWithOffsets")

    @property
    def registerers(self) -> list[str]:
        """The `tensorflow_text.tflite_registrar` functions of `custom_ops`."""
        return [REGISTERERS[op] for op in self.custom_ops]

    def tokenize(self, texts):
        """[B] strings -> (ids int32 [F], row_splits [B + 1]): row b's ids are
        ids[row_splits[b]:row_splits[b + 1]]."""
        pieces = self._sentencepiece.tokenize(texts)
        if self._wordpiece is None:
            return self._resplit.apply(tf.cast(pieces.flat_values, tf.int32),
                                       pieces.row_splits)
        return self._tokenize_normalized(pieces)

    def _tokenize_normalized(self, pieces):
        """WordPiece ids of the texts the normalizer's pieces [B, (P)] spell.

        TF Text's LiteRT kernel of `FastSentencepieceDetokenize` writes one string
        correctly and overruns its output with more (it keeps the output's one-string
        shape), so the rows are joined into one text, each followed by a space, and
        every WordPiece token goes back to the row its byte offset lies in."""
        values = tf.where(pieces.flat_values == self._normalizer.unknown_id,
                          self._normalizer.letter_id, pieces.flat_values)
        splits = tf.cast(pieces.row_splits, tf.int32)  # [B + 1]
        rows = tf.size(splits) - 1
        separators = splits[1:] + tf.range(rows)  # [B]: where each row's space goes
        size = tf.size(values) + rows
        is_separator = tf.scatter_nd(separators[:, None], tf.ones_like(separators),
                                     size[None])  # [N]
        before = tf.cumsum(is_separator, exclusive=True)  # separators before each place
        # A piece's place less the separators before it is its index in `values` (a
        # separator's, at most one past the end, reads the value appended: unused).
        joined = tf.where(is_separator > 0, self._normalizer.space_id, tf.gather(
            tf.concat([values, [0]], axis=0), tf.range(size) - before))
        text = self._sentencepiece.detokenize(
            tf.RaggedTensor.from_row_splits(joined, tf.stack([0, size])))  # [1]
        ids, starts, _ = self._wordpiece.tokenize_with_offsets(text)  # [1, (T)] each
        ends = tf.cumsum(tf.gather(tf.constant(self._normalizer.piece_bytes), joined))
        row_ends = tf.gather(ends, separators)  # [B]: the bytes up to each row's end
        # Tokens starting before each byte of the text (their starts are distinct):
        # row b's tokens end where the text's row b ends.
        starts = tf.cast(starts.flat_values, tf.int32)  # [T]
        flags = tf.scatter_nd(starts[:, None], tf.ones_like(starts),
                              (tf.reduce_sum(tf.concat([ends[-1:], [0]], 0)) + 1)[None])
        before = tf.cumsum(flags, exclusive=True)
        return tf.cast(ids.flat_values, tf.int32), \
            tf.concat([[0], tf.gather(before, row_ends)], axis=0)


def pack_sentences(tokenizer: LiteTextTokenizer, settings: serving_text.TextSettings,
                   texts: dict) -> serving_text.PackedText:
    """`serving_text.pack_sentences` in LiteRT's ops."""
    return serving_text.PackedText(packing.pack_dense(
        [tokenizer.tokenize(t) for t in texts.values()], settings.max_seq_length,
        cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id))


def pack_sentences_for_mlm(tokenizer: LiteTextTokenizer,
                           settings: serving_text.TextSettings,
                           texts: dict) -> serving_text.PackedText:
    """`serving_text.pack_sentences_for_mlm` in LiteRT's ops."""
    return serving_text.mlm_at_every_position(pack_sentences(tokenizer, settings, texts))
