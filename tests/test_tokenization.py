"""The Python tokenizers (`albert_tf.tokenization`): the original's behaviour."""

import unicodedata

import pytest

from albert_tf.tokenization import (
    FullTokenizer,
    TokenizerError,
    preprocess_text,
)
from tests.helpers.paths import SHARED_DATA
from tests.helpers.text_cases import ORIGINAL_PIECES, make_wordpiece_vocab


def test_preprocess_text_rules():
    assert preprocess_text("  a \t b\n\nc  ") == "a b c"
    assert preprocess_text("``hi''") == "``hi''"  # quotes as they are (the original)
    assert preprocess_text("Café Ångström") == "Cafe Angstrom"
    assert preprocess_text("Café", keep_accents=True) == unicodedata.normalize("NFC", "Café")
    assert preprocess_text("Café ABC", lower=True) == "cafe abc"
    assert preprocess_text("  a  b ", remove_space=False) == "  a  b "
    assert preprocess_text(b"bytes \xff ok") == "bytes ok"  # invalid UTF-8 dropped


def test_sentencepiece_matches_googles_model(spm_tokenizer):
    text = spm_tokenizer.preprocess("This is a test")
    assert text == "this is a test"
    assert spm_tokenizer.tokenize(text) == ["▁this", "▁is", "▁a", "▁test"]
    assert spm_tokenizer.encode("This is a test") == [48, 25, 21, 1289]
    assert spm_tokenizer.convert_ids_to_tokens([48, 25, 21, 1289]) == [
        "▁this", "▁is", "▁a", "▁test"]
    assert len(spm_tokenizer.vocab) == 30000
    assert [spm_tokenizer.special_id(s) for s in ("[CLS]", "[SEP]", "[MASK]", "pad")] == [
        2, 3, 4, 0]


def test_pieces_ending_in_digit_comma_are_resplit(spm_tokenizer):
    raw = spm_tokenizer.sp_model.EncodeAsPieces("in 1990, or 2,5, then")
    assert "▁1990," in raw and "▁2," in raw  # what SentencePiece alone gives
    pieces = spm_tokenizer.tokenize("in 1990, or 2,5, then")
    assert pieces == ["▁in", "▁1990", ",", "▁or", "▁2", ",", "5", ",", "▁then"]
    assert "".join(pieces).replace("▁", " ").strip() == "in 1990, or 2,5, then"


def test_wordpiece_is_berts(tmp_path):
    vocab = make_wordpiece_vocab(tmp_path / "vocab.txt", [], extra=[
        "un", "##aff", "##able", "hello", "中", "国", ",", "!"])
    tokenizer = FullTokenizer(vocab_file=vocab, do_lower_case=True)
    assert tokenizer.tokenize("UnAffable") == ["un", "##aff", "##able"]
    assert tokenizer.tokenize("Héllo, 中国!") == ["hello", ",", "中", "国", "!"]
    assert tokenizer.tokenize("unknownword") == ["[UNK]"]
    assert tokenizer.tokenize("un" * 101) == ["[UNK]"]  # over 200 characters
    ids = tokenizer.convert_tokens_to_ids(["un", "##aff"])
    assert tokenizer.convert_ids_to_tokens(ids) == ["un", "##aff"]
    assert tokenizer.preprocess("Keep Case") == "Keep Case"  # its basic tokenizer lowercases
    cased = FullTokenizer(vocab_file=vocab, do_lower_case=False)
    assert cased.tokenize("Hello") == ["[UNK]"]


def test_tokenizer_files_are_checked(tmp_path):
    with pytest.raises(TokenizerError, match="needs a spm_model_file or a vocab_file"):
        FullTokenizer()
    with pytest.raises(TokenizerError, match=f"vocab file {tmp_path}/none.txt does not exist"):
        FullTokenizer(vocab_file=str(tmp_path / "none.txt"))
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(TokenizerError, match=f"{tmp_path}/bad.model is not a SentencePiece"):
        FullTokenizer(spm_model_file=str(tmp_path / "bad.model"))
    (tmp_path / "words.txt").write_text("a\nb\n")
    with pytest.raises(TokenizerError, match=r"has no \[CLS\] or \[SEP\] token"):
        FullTokenizer(vocab_file=str(tmp_path / "words.txt"))


# ------------------------------------------------- the original's pieces (golden)
ORIGINAL = ORIGINAL_PIECES


def test_quotes_give_the_originals_pieces(spm_tokenizer):
    """Made by google-research/albert's own tokenization.py (see fixtures/text/README.md):
    ``` `` ``` and `''` are kept, never turned into `"`."""
    for case in ORIGINAL["texts"]:
        text = spm_tokenizer.preprocess(case["text"])
        assert spm_tokenizer.tokenize(text) == case["pieces"], case["text"]
        assert spm_tokenizer.encode(case["text"]) == case["ids"], case["text"]
    wanted = next(c for c in ORIGINAL["texts"] if c["text"] == "wanted ''to see")
    assert wanted["pieces"] == ["▁wanted", "▁", "'", "'", "to", "▁see"]
    assert preprocess_text("``hi'' “there” it’s") == "``hi'' “there” it’s"


@pytest.mark.skipif(not (SHARED_DATA / "glue" / "MRPC" / "dev.tsv").exists(),
                    reason="the shared GLUE data are not beside the repo")
def test_every_mrpc_dev_text_gives_the_originals_ids(spm_tokenizer):
    from albert_tf.data.glue import get_processor

    examples = get_processor("mrpc", spm_tokenizer).get_examples(
        SHARED_DATA / "glue", "dev")
    got = [[spm_tokenizer.convert_tokens_to_ids(spm_tokenizer.tokenize(e.text_a)),
            spm_tokenizer.convert_tokens_to_ids(spm_tokenizer.tokenize(e.text_b))]
           for e in examples]
    assert len(got) == len(ORIGINAL["mrpc_dev_ids"]) == 408
    different = [n + 1 for n, (g, w) in enumerate(zip(got, ORIGINAL["mrpc_dev_ids"]))
                 if g != w]
    assert not different, f"MRPC dev rows {different[:5]} differ from the original"
