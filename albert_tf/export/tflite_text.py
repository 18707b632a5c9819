"""Raw text inside a LiteRT file: the `serve_text` signature of `export_tflite(...,
with_text=True)`, tokenized by one TensorFlow Text op that LiteRT can run.

`serve_text` in a SavedModel tokenizes with the in-graph tokenizer of `albert_tf.text`:
regular expressions, Unicode normalization, lowercasing, hash tables and ragged ops, all
outside LiteRT's built-in operators. Here the same ids come from one custom op,
TensorFlow Text's `FastSentencepieceTokenize` (which TF Text ships a LiteRT kernel for),
and built-in operators around it:

- `preprocess_text` (whitespace, NFKD without combining marks, lowercasing) is folded
  into the SentencePiece model's own normalizer (`folded_sentencepiece_model`): every
  character's preprocessed text, normalized as the model normalizes, becomes one rule of
  the model's character map, so the op's normalization does both steps at once;
- the original's re-split of pieces such as `▁1990,` (`tokenization.resplit_piece`)
  depends on the piece alone, so it is a table lookup (`ResplitTable`);
- packing is `packing.pack_dense` (gathers and selects).

The ids equal `FullTokenizer.encode`'s (tests/test_tflite_text.py; on the 89,371 GLUE
and SQuAD texts of ../shared all the same). WordPiece vocabularies (the Chinese models)
are not offered: BERT's lowercasing and accent stripping have no LiteRT kernel
(README, "Serving on phones and CPUs").
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

import numpy as np
import tensorflow as tf

from albert_tf import fileio, packing
from albert_tf.export import serving_text
from albert_tf.tokenization import (
    CLS,
    SEP,
    FullTokenizer,
    preprocess_text,
    resplit_piece,
)

# The custom op a text file holds, and the TF Text function that registers its kernel
# with a LiteRT interpreter (`tensorflow_text.tflite_registrar`).
CUSTOM_OPS = ("TFText>FastSentencepieceTokenize",)
REGISTERERS = ("AddFastSentencepieceTokenize",)


@functools.lru_cache(maxsize=4)
def folded_sentencepiece_model(spm_model_file: str, do_lower_case: bool) -> bytes:
    """The serialized SentencePiece model of `spm_model_file` whose normalizer applies
    `tokenization.preprocess_text(text, lower=do_lower_case)` before its own rules.

    Both steps are per character (whitespace becomes one space, which the model's
    `remove_extra_whitespaces` collapses and strips as `preprocess_text` does; NFKD
    without combining marks and lowercasing map each character on its own), so the
    character map of the composition is, for every code point, the model's
    normalization of its preprocessed text: one rule per character it changes.
    """
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(fileio.read_bytes(spm_model_file))
    own = spm.SentencePieceNormalizer(
        model_proto=model.SerializeToString(), add_dummy_prefix=False,
        escape_whitespaces=False, remove_extra_whitespaces=False)
    rules = []
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:  # surrogates never occur in UTF-8 text
            continue
        char = chr(code)
        text = " " if char.isspace() else preprocess_text(char, lower=do_lower_case)
        normalized = own.normalize(text) if text else ""
        if normalized != char:
            rules.append((char, normalized))
    compiled = sentencepiece_model_pb2.NormalizerSpec()
    compiled.ParseFromString(
        spm.SentencePieceNormalizer(norm_map=rules).serialized_normalizer_spec())
    model.normalizer_spec.name = "albert_preprocess_text"
    model.normalizer_spec.precompiled_charsmap = compiled.precompiled_charsmap
    model.normalizer_spec.normalization_rule_tsv = ""
    return model.SerializeToString()


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
    """Raw text -> `FullTokenizer.encode`'s ids with ops LiteRT runs: TF Text's
    `FastSentencepieceTokenize` on the folded model, then the re-split table. Built from
    a SentencePiece model (a non-unigram one raises `TokenizerError`)."""

    def __init__(self, *, spm_model_file, do_lower_case: bool = True):
        import tensorflow_text as tf_text

        from albert_tf.text import _check_unigram

        path = os.fspath(spm_model_file)
        _check_unigram(fileio.read_bytes(path), path)
        python = FullTokenizer(spm_model_file=path, do_lower_case=do_lower_case)
        self.cls_id, self.sep_id = python.special_id(CLS), python.special_id(SEP)
        self.pad_id = python.special_id("pad")
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(
            folded_sentencepiece_model(path, bool(do_lower_case)))
        self._resplit = ResplitTable.of(python.sp_model)

    def tokenize(self, texts):
        """[B] strings -> (ids int32 [F], row_splits [B + 1]): row b's ids are
        ids[row_splits[b]:row_splits[b + 1]]."""
        ids = self._sentencepiece.tokenize(texts)
        return self._resplit.apply(tf.cast(ids.flat_values, tf.int32), ids.row_splits)


def pack_sentences(tokenizer: LiteTextTokenizer, settings: serving_text.TextSettings,
                   texts: dict) -> serving_text.PackedText:
    """`serving_text.pack_sentences` in LiteRT's ops."""
    return serving_text.PackedText(packing.pack_dense(
        [tokenizer.tokenize(t) for t in texts.values()], settings.max_seq_length,
        cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id))


# serve_text's packing of a kind -> the same in LiteRT's ops. Kinds packed otherwise
# (SQuAD's offsets, multiple choice's blanks, NER's words need string ops) keep token
# ids in.
LITE_PACKERS = {
    serving_text.pack_sentences: pack_sentences,
    serving_text.pack_sentences_for_mlm: lambda tokenizer, settings, texts:
        serving_text.mlm_at_every_position(pack_sentences(tokenizer, settings, texts)),
}


def packer_for(kind):
    """The LiteRT packing of `kind` (an `albert_tf.export.kinds.ServingKind`), or None."""
    return LITE_PACKERS.get(kind.pack_text)
