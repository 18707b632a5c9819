"""ALBERT tokenization in Python, identical to the original `tokenization.py`.

- `preprocess_text`: what the original scripts apply to text before a SentencePiece
  model sees it (whitespace, accents, optional lowercasing).
- `FullTokenizer`: the original class and interface. With `spm_model_file` it splits
  with SentencePiece (re-splitting pieces that end in a digit and a comma, as the
  original); with only `vocab_file` it is BERT's WordPiece (basic tokenizer with CJK
  characters split, then greedy longest-match), as Google's Chinese ALBERT models use.

Truncation and packing of the ids are `albert_tf.packing` (`truncate_seq_pair` is
re-exported here, where the original has it).

The in-graph tokenizer that produces the same ids is in `albert_tf.text`.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
import unicodedata

import numpy as np

from albert_tf import fileio
from albert_tf.errors import UserError
from albert_tf.packing import truncate_seq_pair  # noqa: F401 (the original's place)

SPIECE_UNDERLINE = "▁"
# Control symbols of Google's SentencePiece models and of BERT WordPiece vocabularies.
CLS, SEP, MASK, UNK = "[CLS]", "[SEP]", "[MASK]", "[UNK]"
PAD_PIECES = ("<pad>", "[PAD]")


class TokenizerError(UserError):
    """A vocabulary or model file that cannot serve as an ALBERT tokenizer."""


def convert_to_unicode(text) -> str:
    """`str` as is; `bytes` decoded as UTF-8, dropping invalid bytes (as the original)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


def printable_text(text) -> str:
    return convert_to_unicode(text)


def preprocess_text(text, remove_space: bool = True, lower: bool = False,
                    keep_accents: bool = False) -> str:
    """Normalizes text the way the original `tokenization.preprocess_text` does before
    SentencePiece: collapses runs of whitespace (and strips the ends), applies NFKD and
    drops combining marks unless `keep_accents`, lowercases when `lower`.

    Quotes are kept as they are: ``` `` ``` and `''` are NOT turned into `"` (XLNet's
    and Hugging Face's preprocessing do that; ALBERT's does not, and Google's models
    were pretrained on the pieces of ``` `` ``` and `''`).
    """
    outputs = convert_to_unicode(text)
    if remove_space:
        outputs = " ".join(outputs.strip().split())
    # NFKD and combining marks change nothing in ASCII text (a fast path for corpora).
    if not keep_accents and not outputs.isascii():
        outputs = unicodedata.normalize("NFKD", outputs)
        outputs = "".join(c for c in outputs if not unicodedata.combining(c))
    if lower:
        outputs = outputs.lower()
    return outputs


def encode_pieces(sp_model, text: str) -> list[str]:
    """SentencePiece pieces, with pieces like `▁1990,` split into `▁1990` `,` as the
    original does (so that numbers followed by a comma tokenize consistently)."""
    new_pieces = []
    for piece in sp_model.EncodeAsPieces(text):
        new_pieces.extend(resplit_piece(sp_model, piece))
    return new_pieces


def resplit_piece(sp_model, piece: str) -> list[str]:
    """What `encode_pieces` makes of one piece: `[piece]`, or, for a piece of more than
    one character ending in a digit and a comma, its text before the comma encoded again
    (without the leading `▁` the piece did not have) and the comma."""
    if not (len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()):
        return [piece]
    cur_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
    if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
        if len(cur_pieces[0]) == 1:
            cur_pieces = cur_pieces[1:]
        else:
            cur_pieces[0] = cur_pieces[0][1:]
    cur_pieces.append(piece[-1])
    return cur_pieces


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
    for char in characters():
        text = " " if char.isspace() else preprocess_text(char, lower=do_lower_case)
        normalized = own.normalize(text) if text else ""
        if normalized != char:
            rules.append((char, normalized))
    model.normalizer_spec.name = "albert_preprocess_text"
    model.normalizer_spec.precompiled_charsmap = compiled_charsmap(rules)
    model.normalizer_spec.normalization_rule_tsv = ""
    return model.SerializeToString()


def compiled_charsmap(rules) -> bytes:
    """SentencePiece's compiled character map of `rules` ((from, to) strings)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    compiled = sentencepiece_model_pb2.NormalizerSpec()
    compiled.ParseFromString(
        spm.SentencePieceNormalizer(norm_map=sorted(rules)).serialized_normalizer_spec())
    return compiled.precompiled_charsmap


def characters(also=lambda code: False):
    """The code points a rule may change: every assigned one but NUL (no character map
    key), and those unassigned for which `also(code)` holds. Unassigned code points
    (Unicode's Cn, three quarters of them) have no case, decomposition or class a rule
    here reads, so they stay as they are (checked: no rule of either map touched one
    when every code point was visited, but the CJK blocks' unassigned ones, which BERT
    splits by their range)."""
    import unicodedata

    for code in range(1, sys.maxunicode + 1):
        char = chr(code)
        if not 0xD800 <= code <= 0xDFFF and (
                unicodedata.category(char) != "Cn" or also(code)):
            yield char


def load_vocab(vocab_file: str) -> collections.OrderedDict:
    """A WordPiece `vocab.txt`: one token a line (first field), ids in line order."""
    vocab = collections.OrderedDict()
    with fileio.open_binary(vocab_file) as reader:
        for raw in reader:
            line = convert_to_unicode(raw)
            token = line.strip().split()[0] if line.strip() else " "
            if token not in vocab:
                vocab[token] = len(vocab)
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    text = text.strip()
    return text.split() if text else []


class FullTokenizer:
    """The original ALBERT `FullTokenizer`: SentencePiece or WordPiece.

    Args:
      vocab_file: WordPiece vocabulary (used when there is no `spm_model_file`).
      do_lower_case: lowercase (WordPiece: in the basic tokenizer; SentencePiece: in
        `preprocess`, which the data processors call, as in the original).
      spm_model_file: a SentencePiece model such as Google's `30k-clean.model`.
    """

    def __init__(self, vocab_file: str | None = None, do_lower_case: bool = True,
                 spm_model_file: str | None = None):
        self.do_lower_case = do_lower_case
        self.vocab_file = os.fspath(vocab_file) if vocab_file else None
        self.spm_model_file = os.fspath(spm_model_file) if spm_model_file else None
        self.sp_model = None
        if self.spm_model_file:
            import sentencepiece as spm

            proto = fileio.read_bytes(self.spm_model_file)
            self.sp_model = spm.SentencePieceProcessor()
            try:
                self.sp_model.LoadFromSerializedProto(proto)
            except (RuntimeError, OSError) as e:
                raise TokenizerError(
                    f"{self.spm_model_file} is not a SentencePiece model: {e}") from None
            self.vocab = {self.sp_model.IdToPiece(i): i
                          for i in range(self.sp_model.GetPieceSize())}
        elif self.vocab_file:
            if not fileio.is_url(self.vocab_file) and not os.path.exists(self.vocab_file):
                raise TokenizerError(f"vocab file {self.vocab_file} does not exist")
            self.vocab = load_vocab(self.vocab_file)
            self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
            self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        else:
            raise TokenizerError("FullTokenizer needs a spm_model_file or a vocab_file")
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self._word_starts = None  # `word_start_table`, once asked for
        missing = [s for s in (CLS, SEP) if s not in self.vocab]
        if missing:
            raise TokenizerError(
                f"{self.spm_model_file or self.vocab_file} has no {' or '.join(missing)} "
                "token: it is not an ALBERT/BERT vocabulary")

    @classmethod
    def from_scratch(cls, vocab_file, do_lower_case, spm_model_file):
        return cls(vocab_file, do_lower_case, spm_model_file)

    # ----------------------------------------------------------- the original API
    def tokenize(self, text) -> list[str]:
        if self.sp_model is not None:
            return encode_pieces(self.sp_model, convert_to_unicode(text))
        return [sub_token
                for token in self.basic_tokenizer.tokenize(text)
                for sub_token in self.wordpiece_tokenizer.tokenize(token)]

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        if self.sp_model is not None:
            return [self.sp_model.PieceToId(printable_text(t)) for t in tokens]
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids) -> list[str]:
        if self.sp_model is not None:
            return [self.sp_model.IdToPiece(int(i)) for i in ids]
        return [self.inv_vocab[int(i)] for i in ids]

    # ------------------------------------------------------------------ additions
    def preprocess(self, text) -> str:
        """What the original data processors do to raw text before `tokenize`:
        `preprocess_text(lower=do_lower_case)` with SentencePiece; nothing with
        WordPiece (its basic tokenizer lowercases and strips accents itself)."""
        if self.sp_model is not None:
            return preprocess_text(text, lower=self.do_lower_case)
        return convert_to_unicode(text)

    def encode(self, text) -> list[int]:
        """Raw text -> ids: `preprocess`, `tokenize`, `convert_tokens_to_ids`."""
        return self.convert_tokens_to_ids(self.tokenize(self.preprocess(text)))

    def special_id(self, token: str) -> int:
        """The id of `[CLS]`, `[SEP]`, `[MASK]` or the padding token."""
        if token == "pad":
            for piece in PAD_PIECES:
                if piece in self.vocab:
                    return self.vocab[piece]
            return 0
        if token not in self.vocab:
            raise TokenizerError(f"{token} is not in the vocabulary")
        return self.vocab[token]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def word_start_table(self):
        """bool [largest id + 1]: whether the piece of each id begins a word, where
        `--long_text=windows` may cut a long text (`albert_tf.packing.window_spans`):
        a SentencePiece piece that starts with `▁` (and its control and unknown
        pieces), a WordPiece piece that does not start with `##`, and with either a
        piece that starts with a Chinese character (each is a word). Made once."""
        if self._word_starts is None:
            table = np.zeros(max(self.vocab.values()) + 1, bool)
            for piece, index in self.vocab.items():
                table[index] = starts_word(piece, sentencepiece=self.sp_model is not None)
            if self.sp_model is not None:
                for index in range(self.sp_model.GetPieceSize()):
                    if self.sp_model.IsControl(index) or self.sp_model.IsUnknown(index):
                        table[index] = True
            self._word_starts = table
        return self._word_starts


def starts_word(piece: str, sentencepiece: bool) -> bool:
    """Whether `piece` begins a word (`FullTokenizer.word_start_table`): SentencePiece's
    pieces that start with `▁`, WordPiece's that do not start with `##`, and any piece
    whose first character (after those marks) is a Chinese character."""
    core = piece[2:] if piece.startswith("##") else piece.lstrip(SPIECE_UNDERLINE)
    if core and _is_chinese_char(ord(core[0])):
        return True
    return piece.startswith(SPIECE_UNDERLINE) if sentencepiece else \
        not piece.startswith("##")


class BasicTokenizer:
    """BERT's basic tokenizer: cleans text, splits CJK characters and punctuation,
    lowercases and strips accents when `do_lower_case`."""

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text) -> list[str]:
        text = _clean_text(convert_to_unicode(text))
        text = _tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = _strip_accents(token.lower())
            split_tokens.extend(_split_on_punctuation(token))
        return whitespace_tokenize(" ".join(split_tokens))


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece; words longer than
    `max_input_chars_per_word` characters, or with no match, become `[UNK]`."""

    def __init__(self, vocab, unk_token: str = UNK, max_input_chars_per_word: int = 200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text) -> list[str]:
        output_tokens = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            if len(token) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            sub_tokens, start = [], 0
            while start < len(token):
                end, current = len(token), None
                while start < end:
                    substr = token[start:end] if start == 0 else "##" + token[start:end]
                    if substr in self.vocab:
                        current = substr
                        break
                    end -= 1
                if current is None:
                    sub_tokens = None
                    break
                sub_tokens.append(current)
                start = end
            output_tokens.extend(sub_tokens if sub_tokens is not None else [self.unk_token])
        return output_tokens


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # Every non-letter, non-digit ASCII character counts as punctuation.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


# The CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_chinese_char(cp: int) -> bool:
    # Called for every character of every text, and for every code point when an
    # export builds its character map: a plain loop, after the one test most characters
    # fail (no generator: 13x faster on a text of English and Chinese).
    if cp < 0x3400:
        return False
    for low, high in CJK_RANGES:
        if low <= cp <= high:
            return True
    return False


def _clean_text(text: str) -> str:
    output = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            continue
        output.append(" " if _is_whitespace(char) else char)
    return "".join(output)


def _tokenize_chinese_chars(text: str) -> str:
    return "".join(f" {c} " if _is_chinese_char(ord(c)) else c for c in text)


def _strip_accents(text: str) -> str:
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _split_on_punctuation(text: str) -> list[str]:
    output: list[list[str]] = []
    start_new_word = True
    for char in text:
        if _is_punctuation(char):
            output.append([char])
            start_new_word = True
        else:
            if start_new_word:
                output.append([])
            start_new_word = False
            output[-1].append(char)
    return ["".join(x) for x in output]
