"""In-graph ALBERT tokenization (tensorflow-text) and packing of segments.

`AlbertTextTokenizer` turns raw strings into the ids that the Python
`FullTokenizer.encode` gives (`preprocess`, `tokenize`, `convert_tokens_to_ids`), inside
tf.data or a SavedModel: no Python in the loop. Packing the ids into model inputs is
`albert_tf.packing` (`pack_inputs`, re-exported here).

The character classes below (Python's whitespace, combining marks, control characters,
punctuation) are built from Python's own `unicodedata`, so the graph makes the same
decisions as the Python tokenizer for every code point.
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import fileio
from albert_tf.packing import pack_inputs, pair_lengths, take_first  # noqa: F401 (public)
from albert_tf.tokenization import CLS, MASK, SEP, UNK, FullTokenizer, TokenizerError

_SPIECE_UNDERLINE = "▁"
truncated_lengths = pair_lengths  # the name this module gave it before albert_tf.packing


# --------------------------------------------------------------- character classes
def _ranges_class(predicate) -> str:
    """An RE2 character class of every code point for which `predicate(char)` holds."""
    ranges, start, previous = [], None, None
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in UTF-8 text
            continue
        if predicate(chr(cp)):
            if start is None:
                start = cp
            elif cp != previous + 1:
                ranges.append((start, previous))
                start = cp
            previous = cp
    if start is not None:
        ranges.append((start, previous))
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


# `computed_character_classes()` for the Unicode versions of the Pythons we run on, by
# `unicodedata.unidata_version`: computing them takes seconds (every code point through
# each rule), which every process that builds a tokenizer graph would pay. Checked by
# tests/test_text.py; `python -m albert_tf.text` adds the running Python's version.
CHARACTER_CLASSES_FILE = os.path.join(os.path.dirname(__file__), "character_classes.json")


@functools.lru_cache(maxsize=None)
def character_classes() -> dict[str, str]:
    """RE2 classes of the Python tokenizers' character rules, by name: `space`
    (str.isspace), `combining`, `control`, `bert_space`, `nonspacing`, `punctuation`,
    `cjk` (`computed_character_classes()`, read from `CHARACTER_CLASSES_FILE` when it
    holds those of this Python's Unicode version)."""
    import json

    with open(CHARACTER_CLASSES_FILE, encoding="utf-8") as f:
        stored = json.load(f).get(unicodedata.unidata_version)
    return stored if stored is not None else computed_character_classes()


def computed_character_classes() -> dict[str, str]:
    """`character_classes()` computed from this Python's `unicodedata`."""
    from albert_tf.tokenization import _is_chinese_char, _is_control, _is_punctuation

    return {
        # str.split() / str.strip() whitespace.
        "space": _ranges_class(str.isspace),
        # What `preprocess_text` drops after NFKD.
        "combining": _ranges_class(lambda c: unicodedata.combining(c) != 0),
        # What BERT's basic tokenizer drops and turns into spaces.
        "control": _ranges_class(lambda c: ord(c) in (0, 0xFFFD) or _is_control(c)),
        "bert_space": _ranges_class(lambda c: c in " \t\n\r" or unicodedata.category(c) == "Zs"),
        "nonspacing": _ranges_class(lambda c: unicodedata.category(c) == "Mn"),
        "punctuation": _ranges_class(_is_punctuation),
        "cjk": _ranges_class(lambda c: _is_chinese_char(ord(c))),
    }


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

    def __init__(self, tokenize, offsets):
        self.tokenize = tokenize
        self.offsets = offsets


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
                                autograph=False) if with_offsets else None)

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
            tf.strings.regex_replace(to_split, ",$", ""), _SPIECE_UNDERLINE, "")
        resplit = self._encode(text)  # [K, (Q)]
        # When the piece did not start with ▁ but its re-encoding does, drop that ▁
        # (the whole first piece when it is just ▁). Rows are never empty: the text
        # re-encoded ends with a digit.
        row_starts = resplit.row_starts()
        first = tf.gather(self._id_to_piece, tf.gather(resplit.flat_values, row_starts))
        fix = tf.logical_and(
            tf.logical_not(tf.strings.regex_full_match(to_split, f"{_SPIECE_UNDERLINE}.*")),
            tf.strings.regex_full_match(first, f"{_SPIECE_UNDERLINE}.*"))  # [K]
        stripped = tf.strings.regex_replace(first, f"^{_SPIECE_UNDERLINE}", "")
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
        (`_preprocessed_lengths`). (2) Preprocessed bytes -> SentencePiece pieces:
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
        their_units = _piece_units(pieces)
        their_ends = _row_cumsum(their_units)  # [N, (O)]
        our_pieces = tf.gather(self._id_to_piece, ids)
        our_units = _piece_units(our_pieces)
        # An unknown piece's text is not its vocabulary entry: take its length from the
        # same-ranked unknown piece of the older op's row.
        their_unknown = tf.equal(self._piece_to_id.lookup(pieces), self.unk_id)
        our_units = _units_of_unknowns(ids == self.unk_id, our_units, their_unknown,
                                       their_units)
        # From here on dense [N, F]; padding positions are dropped at the end.
        leading_space = tf.cast(tf.logical_and(
            tf.strings.regex_full_match(our_pieces, f"{_SPIECE_UNDERLINE}.*"),
            our_units > 0), tf.int64).to_tensor()
        our_ends = _row_cumsum(our_units).to_tensor()
        our_starts = our_ends - our_units.to_tensor() + leading_space
        start_bytes = _to_their_bytes(our_starts, their_ends, byte_starts, byte_ends,
                                      side="right")
        end_bytes = _to_their_bytes(our_ends, their_ends, byte_starts, byte_ends,
                                    side="left")
        end_bytes = tf.maximum(end_bytes, start_bytes)
        # Preprocessed bytes -> raw code points.
        lengths, attached = _preprocessed_lengths(texts, self.do_lower_case)
        char_ends = _row_cumsum(lengths)
        # A piece starts at the code point that gives its first byte and ends after the
        # one that gives its last byte, and after the non-space code points next to
        # that which give no byte (a detached combining mark). Pieces inside one code
        # point's bytes ("½" -> "1⁄2") all get it.
        starts = _search_rows(char_ends, start_bytes, side="right")
        ends = _search_rows(char_ends, end_bytes - 1, side="right") + 1
        positions = tf.ragged.range(attached.row_lengths())
        stops = tf.ragged.boolean_mask(positions, tf.logical_not(attached))
        stops = tf.concat([stops, attached.row_lengths()[:, tf.newaxis]], axis=1)
        ends = _gather_rows(stops, _search_rows(stops, ends, side="left"))
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


# ------------------------------------------------------------------------- offsets
_BIG = tf.int64.max


def _row_cumsum(ragged):
    """Inclusive cumulative sum within each row of a ragged [N, (T)] int tensor."""
    values = tf.cast(ragged.flat_values, tf.int64)
    running = tf.cumsum(values)
    before = tf.concat([[0], running], 0)
    row_offset = tf.gather(before, ragged.row_starts())
    return ragged.with_flat_values(running - tf.gather(row_offset, ragged.value_rowids()))


def _search_rows(sorted_rows, values, side: str):
    """Row-wise `searchsorted`: for each value of row i of dense [N, K] `values`, its
    index in row i of ragged `sorted_rows` [N, (O)]."""
    sequence = sorted_rows.to_tensor(default_value=_BIG)
    # A row of `sorted_rows` may be empty, and a batch may have no rows: searchsorted
    # wants at least one column on both sides (a 0 x 0 batch would not reshape).
    sequence = tf.pad(sequence, [[0, 0], [0, 1]], constant_values=_BIG)
    index = tf.searchsorted(sequence, tf.pad(values, [[0, 0], [0, 1]]), side=side,
                            out_type=tf.int64)
    return index[:, :-1]


def _gather_rows(ragged, index):
    """ragged[i][index[i, k]] for ragged [N, (O)] and dense index [N, K], the index
    clipped to the row (0 for an empty row)."""
    table = tf.pad(ragged.to_tensor(default_value=0), [[0, 0], [0, 1]])
    last = tf.maximum(ragged.row_lengths() - 1, 0)
    return tf.gather(table, tf.minimum(index, last[:, tf.newaxis]), batch_dims=1)


def _piece_units(pieces):
    """Length of each piece's text in bytes, `▁` counting as the one space it stands
    for."""
    return tf.strings.length(
        tf.strings.regex_replace(pieces, _SPIECE_UNDERLINE, " "))


def _units_of_unknowns(ours_unknown, our_units, theirs_unknown, their_units):
    """`our_units` where our k-th unknown piece of a row takes the length of the k-th
    unknown piece of that row of theirs."""
    def keys(unknown):  # row * 2^32 + rank among the row's unknowns, for each unknown
        flat = tf.cast(unknown.flat_values, tf.int64)
        rank = _row_cumsum(unknown.with_flat_values(flat)).flat_values - 1
        key = unknown.value_rowids() * (1 << 32) + rank
        return tf.boolean_mask(key, unknown.flat_values)

    their_keys = keys(theirs_unknown)
    their_lengths = tf.boolean_mask(tf.cast(their_units.flat_values, tf.int64),
                                    theirs_unknown.flat_values)
    our_keys = keys(ours_unknown)
    at = tf.minimum(tf.searchsorted(their_keys, our_keys, out_type=tf.int64),
                    tf.maximum(tf.size(their_keys, tf.int64) - 1, 0))
    padded_keys = tf.concat([their_keys, [-1]], 0)
    padded_lengths = tf.concat([their_lengths, [0]], 0)
    matched = tf.gather(padded_keys, at) == our_keys
    lengths = tf.where(matched, tf.gather(padded_lengths, at), 0)
    units = tf.cast(our_units.flat_values, tf.int64)
    positions = tf.where(ours_unknown.flat_values)
    units = tf.tensor_scatter_nd_update(units, positions, lengths)
    return our_units.with_flat_values(units)


def _to_their_bytes(positions, their_ends, byte_starts, byte_ends, side: str):
    """Byte offsets in the preprocessed text of `positions` (in the normalized text) by
    the piece of theirs that holds them: a piece start (`side="right"`) falls in the
    piece ending after it, a piece end (`"left"`) in the piece ending at or after it.
    Counted back from that piece's end, so a leading ▁ the text lacks (the first piece
    of a text) does not shift it."""
    index = _search_rows(their_ends, positions, side=side)
    start = _gather_rows(byte_starts, index)
    end = _gather_rows(byte_ends, index)
    return tf.clip_by_value(end - (_gather_rows(their_ends, index) - positions), start, end)


def _preprocessed_lengths(texts, lower: bool):
    """For each code point of `texts` [N], the number of bytes it becomes in
    `preprocess_text(texts, lower)`, and whether it is a non-space that becomes
    nothing (so belongs to the code point before): [N, (C)] int64 and bool.

    Whitespace: the first of a run between two non-space characters becomes one space,
    the rest nothing; other characters are normalized on their own (NFKD, combining marks dropped,
    lower-cased), which equals normalizing the whole text because the only
    characters NFKD moves across each other are combining marks, and those are dropped.
    """
    c = character_classes()
    chars = tf.strings.unicode_split(texts, "UTF-8")  # [N, (C)]
    flat = chars.flat_values
    rows = chars.value_rowids()
    index = tf.range(tf.size(flat, tf.int64))
    row_start = tf.gather(chars.row_starts(), rows)
    at_row_start = tf.equal(index, row_start)

    def previous(flags):  # the flag of the previous character of the row, else False
        shifted = tf.concat([[False], flags[:-1]], 0)
        return tf.logical_and(shifted, tf.logical_not(at_row_start))

    normalized = tf_text.normalize_utf8(flat, "NFKD")
    normalized = tf.strings.regex_replace(normalized, f"{c['combining']}+", "")
    if lower:
        normalized = tf.strings.lower(normalized, encoding="utf-8")
    lengths = tf.cast(tf.strings.length(normalized), tf.int64)

    is_space = tf.strings.regex_full_match(flat, c["space"])
    non_space = chars.with_flat_values(tf.cast(tf.logical_not(is_space), tf.int64))
    seen = _row_cumsum(non_space).flat_values
    after = tf.gather(seen, tf.gather(chars.row_limits() - 1, rows)) - seen
    kept_space = tf.logical_and(
        tf.logical_and(is_space, tf.logical_not(previous(is_space))),
        tf.logical_and(tf.logical_not(at_row_start), after > 0))
    lengths = tf.where(is_space, tf.cast(kept_space, tf.int64), lengths)

    attached = tf.logical_and(tf.equal(lengths, 0), tf.logical_not(is_space))
    return chars.with_flat_values(lengths), chars.with_flat_values(attached)


def _store_character_classes() -> None:
    """Adds this Python's `computed_character_classes()` to `CHARACTER_CLASSES_FILE`."""
    import json

    with open(CHARACTER_CLASSES_FILE, encoding="utf-8") as f:
        stored = json.load(f)
    stored[unicodedata.unidata_version] = computed_character_classes()
    fileio.write_text_atomically(CHARACTER_CLASSES_FILE,
                                 json.dumps(stored, indent=1, sort_keys=True) + "\n")
    print(f"{CHARACTER_CLASSES_FILE}: Unicode {', '.join(sorted(stored))}")


if __name__ == "__main__":
    _store_character_classes()
