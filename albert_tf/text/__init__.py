"""In-graph ALBERT tokenization (tensorflow-text) and packing of segments.

`AlbertTextTokenizer` turns raw strings into the ids that the Python
`FullTokenizer.encode` gives (`preprocess`, `tokenize`, `convert_tokens_to_ids`), inside
tf.data or a SavedModel: no Python in the loop. Packing the ids into model inputs is
`albert_tf.packing` (`pack_inputs`, re-exported here).

The character classes it reads (Python's whitespace, combining marks, control
characters, punctuation) are `albert_tf.text.unicode_classes`, built from Python's own
`unicodedata`, so the graph makes the same decisions as the Python tokenizer for every
code point (`python -m albert_tf.text` stores them); where each piece lies in the raw
text (`tokenize_with_offsets`) is computed with `albert_tf.text.offsets`.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import fileio
from albert_tf.packing import pack_inputs, pair_lengths, take_first  # noqa: F401 (public)
from albert_tf.text.offsets import (
    gather_rows,
    piece_units,
    preprocessed_lengths,
    row_cumsum,
    search_rows,
    to_their_bytes,
    units_of_unknowns,
)
from albert_tf.text.unicode_classes import character_classes
from albert_tf.tokenization import (
    CLS,
    MASK,
    SEP,
    SPIECE_UNDERLINE,
    UNK,
    FullTokenizer,
    TokenizerError,
)

truncated_lengths = pair_lengths  # the name this module gave it before albert_tf.packing


# ------------------------------------------------------------------- preprocessing
def _valid_utf8(texts):
    # Python decodes bytes with errors="ignore": drop invalid sequences the same way.
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")


def preprocess_text(texts, lower: bool):
    """In-graph `tokenization.preprocess_text(text, lower=lower)` on a string tensor."""
    c = character_classes()
    texts = _valid_utf8(texts)
    texts = tf.strings.regex_replace(texts, f"^{c['space']}+|{c['space']}+$", "")
    texts = tf.strings.regex_replace(texts, f"{c['space']}+", " ")
    texts = tf_text.normalize_utf8(texts, "NFKD")
    texts = tf.strings.regex_replace(texts, f"{c['combining']}+", "")
    if lower:
        texts = tf.strings.lower(texts, encoding="utf-8")
    return texts


# ------------------------------------------------------------------------ tokenizer
def _check_unigram(model: bytes, path: str) -> None:
    """The in-graph op segments as the Python package for unigram models (ALBERT's) only;
    a BPE model would silently come out differently."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    kind = proto.trainer_spec.model_type
    if kind != sentencepiece_model_pb2.TrainerSpec.UNIGRAM:
        name = sentencepiece_model_pb2.TrainerSpec.ModelType.Name(kind)
        raise TokenizerError(
            f"{path} is a {name} SentencePiece model; the in-graph tokenizer reproduces "
            "the Python one for UNIGRAM models (ALBERT's) only")


class _EagerFunctions:
    """The tokenizer's compiled functions for eager callers. A plain object, so that
    `tf.Module` does not track them: a SavedModel holding the tokenizer would otherwise
    trace them again while saving, and store them, for no signature's use."""

    def __init__(self, tokenize, offsets, python: FullTokenizer):
        self.tokenize = tokenize
        self.offsets = offsets
        self.python = python  # its word start table, made when first asked for


class AlbertTextTokenizer(tf.Module):
    """Raw text -> ALBERT ids in the graph, equal to `FullTokenizer.encode`.

    Built from the same files as `FullTokenizer`: a SentencePiece model
    (`spm_model_file`) or a WordPiece vocabulary (`vocab_file`), and `do_lower_case`.
    `tokenize(texts)` maps a string scalar to int32 ids [(T)], a vector [N] to [N, (T)].
    With `with_offsets` (SentencePiece only), `tokenize_with_offsets(texts)` also gives
    where each piece lies in the raw text.
    """

    def __init__(self, *, spm_model_file: str | None = None, vocab_file: str | None = None,
                 do_lower_case: bool = True, with_offsets: bool = False,
                 name: str | None = None):
        super().__init__(name=name)
        # The Python tokenizer validates the files and gives the special ids.
        python = FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                               spm_model_file=spm_model_file)
        self.do_lower_case = do_lower_case
        self.vocab_size = python.vocab_size
        self.cls_id, self.sep_id = python.special_id(CLS), python.special_id(SEP)
        self.pad_id = python.special_id("pad")
        self.mask_id = python.vocab.get(MASK, python.special_id("pad"))
        if spm_model_file:
            self._build_sentencepiece(python, os.fspath(spm_model_file), with_offsets)
        else:
            self._build_wordpiece(python, os.fspath(vocab_file), with_offsets)
        self.with_offsets = with_offsets
        spec = [tf.TensorSpec([None], tf.string)]
        # Plain TensorFlow ops: traced without AutoGraph's source conversion (faster).
        self._eager = _EagerFunctions(
            tokenize=tf.function(self._tokenize_vector, input_signature=spec,
                                 autograph=False),
            offsets=tf.function(self._tokenize_with_offsets_vector, input_signature=spec,
                                autograph=False) if with_offsets else None,
            python=python)

    def _build_sentencepiece(self, python: FullTokenizer, path: str, with_offsets: bool):
        self.spm_model_file = path
        self._asset = tf.saved_model.Asset(path)
        model = fileio.read_bytes(path)
        _check_unigram(model, path)
        # The fast tokenizer breaks ties between equal-score segmentations as the
        # Python sentencepiece package does; the older op does not (3 in 105,116
        # SQuAD/GLUE texts came out with the same pieces in another order).
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(model)
        pieces = [python.sp_model.IdToPiece(i) for i in range(python.vocab_size)]
        self._id_to_piece = tf.constant(pieces)
        self._piece_to_id = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                pieces, tf.range(len(pieces), dtype=tf.int32)),
            default_value=python.sp_model.unk_id())
        self._comma_id = python.sp_model.PieceToId(",")
        self.unk_id = python.sp_model.unk_id()
        self._wordpiece = None
        # The older op gives byte offsets of its pieces (see tokenize_with_offsets).
        self._offset_pieces = tf_text.SentencepieceTokenizer(
            model, out_type=tf.string) if with_offsets else None

    def _build_wordpiece(self, python: FullTokenizer, path: str, with_offsets: bool):
        if with_offsets:
            raise TokenizerError(
                "piece offsets are available for SentencePiece models only (the "
                f"original reads SQuAD with spm_model_file); got vocab_file {path}")
        if UNK not in python.vocab:
            raise TokenizerError(f"vocab file {path} has no {UNK} token")
        self.vocab_file = path
        self._asset = tf.saved_model.Asset(path)
        self.unk_id = python.vocab[UNK]
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                list(python.vocab), tf.constant(list(python.vocab.values()), tf.int64)),
            default_value=-1)
        self._wordpiece = tf_text.WordpieceTokenizer(
            table, suffix_indicator="##", max_bytes_per_word=200,
            token_out_type=tf.int64, unknown_token=UNK)
        self._sentencepiece = None
        self._offset_pieces = None

    def tokenize(self, texts) -> tf.RaggedTensor:
        texts = tf.convert_to_tensor(texts, tf.string)
        if texts.shape.rank not in (0, 1):
            raise ValueError(
                f"tokenize takes a string scalar or vector, got shape {texts.shape}")
        flat = tf.reshape(texts, [-1])
        # Eager callers get the traced function (one call instead of many small ops).
        tokenize = self._eager.tokenize if tf.executing_eagerly() else \
            self._tokenize_vector
        ids = tokenize(flat)  # [N, (T)]
        return ids[0] if texts.shape.rank == 0 else ids

    __call__ = tokenize

    def word_starts(self, ids):
        """bool of the shape of int `ids` (ragged or not): whether each piece begins a
        word, where `--long_text=windows` may cut a text
        (`FullTokenizer.word_start_table`, a constant of the graph)."""
        table = tf.constant(self._eager.python.word_start_table())
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(tf.gather(table, ids.flat_values))
        return tf.gather(table, ids)

    def tokenize_with_offsets(self, texts):
        """`tokenize(texts)` and, for every piece, the range [start, end) of code points
        of the raw text it comes from: `text[start:end]` is the piece's text before
        preprocessing, without the space a leading `▁` stands for (empty for a lone
        `▁`). These are the spans the original's SQuAD alignment gives, up to
        surrounding whitespace. Returns (ids, starts, ends), int32, shaped as `tokenize`.
        """
        if not self.with_offsets:
            raise TokenizerError("this tokenizer was built without with_offsets=True")
        texts = tf.convert_to_tensor(texts, tf.string)
        if texts.shape.rank not in (0, 1):
            raise ValueError(
                f"tokenize_with_offsets takes a string scalar or vector, got shape "
                f"{texts.shape}")
        run = self._eager.offsets if tf.executing_eagerly() else \
            self._tokenize_with_offsets_vector
        outputs = run(tf.reshape(texts, [-1]))
        return tuple(o[0] for o in outputs) if texts.shape.rank == 0 else outputs

    def _tokenize_vector(self, texts):
        if self._sentencepiece is not None:
            return self._tokenize_sentencepiece(texts)
        return self._tokenize_wordpiece(texts)

    # -- SentencePiece: preprocess_text, pieces, the digit-comma re-split.
    def _tokenize_sentencepiece(self, texts):
        texts = preprocess_text(texts, lower=self.do_lower_case)
        return self._resplit_digit_commas(self._encode(texts))

    def _encode(self, texts):
        """SentencePiece ids, [N] -> [N, (P)] int32 with int64 row splits."""
        ids = self._sentencepiece.tokenize(texts)
        return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)

    def _resplit_digit_commas(self, ids):
        """Pieces such as `▁1990,` become `▁1990` `,`, exactly as
        `tokenization.encode_pieces`. ids: [N, (P)] -> [N, (P')].

        In flat ops (gathers, a cumulative sum, one stitch): each piece's place in the
        output is computed and every output id written there, instead of regrouping
        ragged rows (about a tenth of the ops to trace and to run per request)."""
        flat_ids = ids.flat_values  # [F]
        flat = tf.gather(self._id_to_piece, flat_ids)
        # Python's str.isdigit() is wider than RE2's \d (Unicode Nd); after NFKD the
        # difference is limited to a few digit-like symbols.
        needs_split = tf.logical_and(
            tf.strings.length(flat, unit="UTF8_CHAR") > 1,
            tf.strings.regex_full_match(flat, r".*\d,"))
        split_at = tf.where(needs_split)[:, 0]  # [K] positions in `flat`
        keep_at = tf.where(tf.logical_not(needs_split))[:, 0]
        to_split = tf.gather(flat, split_at)  # [K]
        text = tf.strings.regex_replace(
            tf.strings.regex_replace(to_split, ",$", ""), SPIECE_UNDERLINE, "")
        resplit = self._encode(text)  # [K, (Q)]
        # When the piece did not start with ▁ but its re-encoding does, drop that ▁
        # (the whole first piece when it is just ▁). Rows are never empty: the text
        # re-encoded ends with a digit.
        row_starts = resplit.row_starts()
        first = tf.gather(self._id_to_piece, tf.gather(resplit.flat_values, row_starts))
        fix = tf.logical_and(
            tf.logical_not(tf.strings.regex_full_match(to_split, f"{SPIECE_UNDERLINE}.*")),
            tf.strings.regex_full_match(first, f"{SPIECE_UNDERLINE}.*"))  # [K]
        stripped = tf.strings.regex_replace(first, f"^{SPIECE_UNDERLINE}", "")
        dropped = tf.cast(tf.logical_and(fix, tf.equal(stripped, "")), tf.int64)  # [K]
        row_of = resplit.value_rowids()  # [V]
        index_in_row = tf.range(tf.size(row_of, tf.int64)) - tf.gather(row_starts, row_of)
        is_first = tf.equal(index_in_row, 0)
        values = tf.where(tf.logical_and(is_first, tf.gather(fix, row_of)),
                          tf.gather(self._piece_to_id.lookup(stripped), row_of),
                          resplit.flat_values)
        dropped_in_row = tf.gather(dropped, row_of)  # [V]
        kept = tf.logical_not(tf.logical_and(is_first, dropped_in_row > 0))
        # Output ids per input piece: itself, or its kept re-split pieces and a comma.
        split_lengths = resplit.row_lengths() - dropped + 1  # [K]
        lengths = tf.tensor_scatter_nd_update(
            tf.ones_like(flat_ids, tf.int64), split_at[:, tf.newaxis], split_lengths)
        ends = tf.cumsum(lengths)  # [F]
        starts = ends - lengths
        split_starts = tf.gather(starts, split_at)  # [K]
        output = tf.dynamic_stitch(
            [tf.cast(tf.gather(starts, keep_at), tf.int32),
             tf.cast(tf.boolean_mask(tf.gather(split_starts, row_of) + index_in_row
                                     - dropped_in_row, kept), tf.int32),
             tf.cast(tf.gather(ends, split_at) - 1, tf.int32)],
            [tf.gather(flat_ids, keep_at), tf.boolean_mask(values, kept),
             tf.fill(tf.shape(split_at), tf.constant(self._comma_id, flat_ids.dtype))])
        row_splits = tf.gather(tf.concat([[0], ends], axis=0), ids.row_splits)
        return tf.RaggedTensor.from_row_splits(output, row_splits, validate=False)

    # -- Offsets: where each piece comes from in the raw text.
    def _tokenize_with_offsets_vector(self, texts):
        """[N] -> ids, starts, ends [N, (P)].

        Three maps are composed. (1) Raw code points -> bytes of the preprocessed text:
        `preprocess_text` acts on each code point on its own except for whitespace runs,
        so each code point's share of the output is computed
        (`preprocessed_lengths`). (2) Preprocessed bytes -> SentencePiece pieces:
        tensorflow-text's older SentencepieceTokenizer gives these offsets, through
        SentencePiece's own normalization (NFKC, dropped zero-width characters). (3)
        Its pieces -> ours: both are a segmentation of the same normalized text (they
        differ only in the order of equal-score pieces, and ours re-split digit
        commas), so a boundary of ours is located by its position in that text.
        """
        texts = _valid_utf8(texts)
        processed = preprocess_text(texts, lower=self.do_lower_case)
        ids = self._resplit_digit_commas(self._encode(processed))  # [N, (F)]
        pieces, byte_starts, byte_ends = self._offset_pieces.tokenize_with_offsets(processed)
        byte_starts = tf.cast(byte_starts, tf.int64)
        byte_ends = tf.cast(byte_ends, tf.int64)
        # Positions in the normalized text, counting bytes with ▁ as one space.
        their_units = piece_units(pieces)
        their_ends = row_cumsum(their_units)  # [N, (O)]
        our_pieces = tf.gather(self._id_to_piece, ids)
        our_units = piece_units(our_pieces)
        # An unknown piece's text is not its vocabulary entry: take its length from the
        # same-ranked unknown piece of the older op's row.
        their_unknown = tf.equal(self._piece_to_id.lookup(pieces), self.unk_id)
        our_units = units_of_unknowns(ids == self.unk_id, our_units, their_unknown,
                                      their_units)
        # From here on dense [N, F]; padding positions are dropped at the end.
        leading_space = tf.cast(tf.logical_and(
            tf.strings.regex_full_match(our_pieces, f"{SPIECE_UNDERLINE}.*"),
            our_units > 0), tf.int64).to_tensor()
        our_ends = row_cumsum(our_units).to_tensor()
        our_starts = our_ends - our_units.to_tensor() + leading_space
        start_bytes = to_their_bytes(our_starts, their_ends, byte_starts, byte_ends,
                                     side="right")
        end_bytes = to_their_bytes(our_ends, their_ends, byte_starts, byte_ends,
                                   side="left")
        end_bytes = tf.maximum(end_bytes, start_bytes)
        # Preprocessed bytes -> raw code points.
        lengths, attached = preprocessed_lengths(texts, self.do_lower_case)
        char_ends = row_cumsum(lengths)
        # A piece starts at the code point that gives its first byte and ends after the
        # one that gives its last byte, and after the non-space code points next to
        # that which give no byte (a detached combining mark). Pieces inside one code
        # point's bytes ("½" -> "1⁄2") all get it.
        starts = search_rows(char_ends, start_bytes, side="right")
        ends = search_rows(char_ends, end_bytes - 1, side="right") + 1
        positions = tf.ragged.range(attached.row_lengths())
        stops = tf.ragged.boolean_mask(positions, tf.logical_not(attached))
        stops = tf.concat([stops, attached.row_lengths()[:, tf.newaxis]], axis=1)
        ends = gather_rows(stops, search_rows(stops, ends, side="left"))
        ends = tf.where(end_bytes > start_bytes, ends, starts)

        def ragged(dense):
            return tf.RaggedTensor.from_tensor(tf.cast(dense, tf.int32),
                                               lengths=ids.row_lengths())
        return ids, ragged(starts), ragged(ends)

    # -- WordPiece: BERT's basic tokenizer, then greedy longest-match.
    def _tokenize_wordpiece(self, texts):
        c = character_classes()
        texts = _valid_utf8(texts)
        texts = tf.strings.regex_replace(texts, f"{c['control']}+", "")
        texts = tf.strings.regex_replace(texts, c["bert_space"], " ")
        texts = tf.strings.regex_replace(texts, f"({c['cjk']})", r" \1 ")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, f"{c['nonspacing']}+", "")
        delimiters = f"{c['space']}+|{c['punctuation']}"
        words = tf_text.regex_split(texts, delimiters, keep_delim_regex_pattern=c["punctuation"])
        ids = self._wordpiece.tokenize(words)  # [N, (W), (P)]
        return tf.cast(ids.merge_dims(1, 2), tf.int32)
