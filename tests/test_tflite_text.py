"""Raw text inside a LiteRT file (`export_tflite(with_text=True)`,
`albert_tf.export.tflite_text`): the tokenizer LiteRT runs gives `FullTokenizer`'s ids,
with a SentencePiece model (English) and a WordPiece vocabulary (Chinese); the file's
serve_text packs them as `packing` does and answers as its serving_default on those
ids; what LiteRT cannot pack is refused before anything is written."""

import json

import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR

from albert_tf.export import ExportError, build_model, export_tflite, read_tflite_info
from albert_tf.export.tflite_text import LiteTextTokenizer, ResplitTable
from albert_tf.packing import pack_batch
from albert_tf.tokenization import FullTokenizer
from tests.helpers.paths import (
    FIXTURES,
    REAL_TEXT,
    SHARED_DATA,
    SPM_MODEL,
    shared_sample,
)
from tests.helpers.scripts import run_script
from tests.helpers.text_cases import EDGE_CASES, ORIGINAL_PIECES
from tests.test_tflite import TOLERANCE, run_tflite

SPM = str(SPM_MODEL)
VOCAB_ZH = str(FIXTURES / "ner" / "vocab_chinese.txt")  # albert_zh's 21,128 entries
TEXTS = REAL_TEXT + EDGE_CASES + [case["text"] for case in ORIGINAL_PIECES["texts"]]
MIXED = ["ALBERT 中文模型，全角ＡＢＣ和 English mixed。", "Hello, WORLD 中国，Ｃａｆé ✓✓x",
         "ok😀好", "a\u2581b", "𠀀中", "ΟΔΟ Σ", "İstanbul ǅ ﬁ", "……（）！？", "tab\tnew\nline"]


def cluener_texts(path=FIXTURES / "ner" / "cluener_dev.json"):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def lite_ids(tokenizer, texts) -> list[list[int]]:
    values, splits = tokenizer.tokenize(tf.constant(texts, tf.string))
    return [row.tolist() for row in np.split(values.numpy(), splits.numpy()[1:-1])] \
        if texts else []


@pytest.mark.parametrize("lower", [True, False])
def test_lite_tokenizer_gives_the_python_ids(lower):
    """SentencePiece: real text, the edge cases (whitespace of every kind, accents,
    ligatures, CJK, control characters, numbers with commas) and the original's quote
    cases, lowercased and not."""
    tokenizer = LiteTextTokenizer(spm_model_file=SPM, do_lower_case=lower)
    python = FullTokenizer(spm_model_file=SPM, do_lower_case=lower)
    texts = TEXTS + MIXED
    got = lite_ids(tokenizer, texts)
    mismatches = [(t, g) for t, g in zip(texts, got) if g != python.encode(t)]
    assert not mismatches, mismatches[:3]
    assert sum(map(len, got)) > 9_000  # real work was compared
    # The original's re-split at a digit and a comma is exercised: the model's own
    # pieces of "in 1990, then" hold "▁1990,", the original's "▁1990" "," (one of the
    # 141 pieces this model has to re-split).
    assert "▁1990," in python.sp_model.EncodeAsPieces("in 1990, then")
    assert python.sp_model.PieceToId("▁1990,") not in lite_ids(tokenizer, ["in 1990, then"])[0]
    assert len(ResplitTable.of(python.sp_model).counts) - 1 == 141


def test_lite_wordpiece_tokenizer_gives_the_python_ids():
    """WordPiece with albert_zh's vocabulary: CLUENER2020 texts, mixed Chinese and
    English, full-width forms, emoji, characters no entry holds, and the edge cases."""
    tokenizer = LiteTextTokenizer(vocab_file=VOCAB_ZH, do_lower_case=True)
    python = FullTokenizer(vocab_file=VOCAB_ZH, do_lower_case=True)
    texts = cluener_texts() + MIXED + EDGE_CASES + REAL_TEXT[:100]
    got = lite_ids(tokenizer, texts)
    mismatches = [(t, python.convert_ids_to_tokens(g)) for t, g in zip(texts, got)
                  if g != python.encode(t)]
    assert not mismatches, mismatches[:3]
    assert python.special_id("[UNK]") in got[texts.index("ok😀好")]  # unknowns compared
    assert sum(map(len, got)) > 5_000


@pytest.mark.skipif(not (SHARED_DATA / "squad" / "dev-v1.1.json").exists(),
                    reason="the shared SQuAD and GLUE data are not beside the repo")
def test_lite_tokenizer_gives_the_python_ids_on_the_shared_texts():
    """Every SQuAD v1.1 dev context and question and the GLUE dev texts (15,922) with
    the English model; every CLUENER2020 dev text and C3's dialogues, questions and
    choices (100,708) with the Chinese vocabulary (an eighth of each unless
    ALBERT_TF_ALL_SHARED=1: `shared_sample`)."""
    squad = json.loads((SHARED_DATA / "squad" / "dev-v1.1.json").read_text())
    english = []
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            english.append(paragraph["context"])
            english += [qa["question"] for qa in paragraph["qas"]]
    for task, columns in (("SST-2", [0]), ("RTE", [1, 2]), ("MRPC", [3, 4]),
                          ("CoLA", [3])):
        lines = (SHARED_DATA / "glue" / task / "dev.tsv").read_text(
            encoding="utf-8").splitlines()
        start = 0 if task == "CoLA" else 1  # CoLA's dev.tsv has no header
        english += [line.split("\t")[c] for line in lines[start:] for c in columns]
    chinese = cluener_texts(SHARED_DATA / "ner" / "cluener" / "dev.json")
    for path in sorted((SHARED_DATA / "multiple_choice" / "c3").glob("*.json")):
        for dialogue, questions, _ in json.loads(path.read_text(encoding="utf-8")):
            chinese += dialogue
            for question in questions:
                chinese += [question["question"], *question["choice"]]
    for files, texts, least in (({"spm_model_file": SPM}, english, 15_900),
                                ({"vocab_file": VOCAB_ZH}, chinese, 100_000)):
        assert len(texts) > least
        texts = shared_sample(texts)
        python = FullTokenizer(do_lower_case=True, **files)
        got = lite_ids(LiteTextTokenizer(do_lower_case=True, **files), texts)
        mismatches = [t for t, g in zip(texts, got) if g != python.encode(t)]
        assert not mismatches, mismatches[:3]


@pytest.fixture(scope="module", params=["sentencepiece", "wordpiece"])
def mlm_file(request, tmp_path_factory):
    """An MLM model's float32 file with serve_text (it returns the packed ids), its
    tokenizer's files and its text pairs: the English model on GLUE pairs, the Chinese
    vocabulary on CLUENER texts."""
    from tests.helpers.tiny import tiny_config

    files = {"spm_model_file": SPM} if request.param == "sentencepiece" else \
        {"vocab_file": VOCAB_ZH}
    pairs = _glue_pairs() if request.param == "sentencepiece" else _chinese_pairs()
    model = build_model("mlm", tiny_config(), seed=5)
    path = export_tflite(model, tmp_path_factory.mktemp("lite") / "mlm.tflite", kind="mlm",
                         max_seq_length=24, do_lower_case=True, with_text=True, **files)
    return path, files, pairs


def _chinese_pairs():
    texts = cluener_texts()[:40] + MIXED
    return list(zip(texts[::2], texts[1::2])) + [("", ""), ("", "只有乙")]


def _glue_pairs():
    from albert_tf.data.glue import GlueProcessor

    pairs = [(e.text_a, e.text_b) for task in ("mrpc", "rte")
             for e in GlueProcessor(task).get_examples(FIXTURES / "glue", "dev")]
    return pairs + [("", ""), ("", "B only"), ("It cost 1,000, in 1990, then", ""),
                    (" ".join(["a long sentence"] * 20), "Short."),
                    ("Short.", " ".join(["a long sentence"] * 20))]


def test_file_packs_pairs_as_packing_and_answers_as_serving_default(mlm_file):
    """serve_text's packed ids (returned by the mlm kind) are `pack_batch` of the
    Python ids, cut longest-first to max_seq_length; its logits are serving_default's on
    those ids; one row and no rows too."""
    path, files, pairs = mlm_file
    info = read_tflite_info(path)
    assert list(info["signatures"]["serve_text"]["inputs"]) == ["text_a", "text_b"]
    assert info["op_registerers"] == (
        ["AddFastSentencepieceTokenize"] if "spm_model_file" in files else
        ["AddFastSentencepieceTokenize", "AddFastSentencepieceDetokenize",
         "AddFastWordpieceTokenize"])
    assert len(info["custom_ops"]) == len(info["op_registerers"])
    python = FullTokenizer(do_lower_case=True, **files)
    for rows in (pairs, pairs[:1], []):
        got = run_tflite(path, {"text_a": [a for a, _ in rows],
                                "text_b": [b for _, b in rows]}, "serve_text")
        want = pack_batch([[python.encode(a), python.encode(b)] for a, b in rows], 24,
                          cls_id=python.special_id("[CLS]"),
                          sep_id=python.special_id("[SEP]"))
        np.testing.assert_array_equal(got["input_word_ids"], want["input_word_ids"])
        np.testing.assert_array_equal(got["input_mask"], want["input_mask"])
        assert got["mlm_logits"].shape[:2] == want["input_word_ids"].shape
        if not rows:
            continue
        width = want["input_word_ids"].shape[1]
        ids = run_tflite(path, {**want, "masked_lm_positions": np.tile(
            np.arange(width, dtype=np.int32), [len(rows), 1])})
        mask = want["input_mask"].astype(bool)
        np.testing.assert_allclose(got["mlm_logits"][mask], ids["mlm_logits"][mask],
                                   atol=TOLERANCE)
        np.testing.assert_allclose(got["sop_logits"], ids["sop_logits"], atol=TOLERANCE)


def test_what_litert_cannot_tokenize_is_refused_before_anything_is_written(tmp_path):
    from tests.helpers.tiny import tiny_config

    path = tmp_path / "out" / "model.tflite"
    squad = build_model("squad_v1", tiny_config(), seed=1)
    with pytest.raises(ExportError, match="squad_v1's serve_text needs string ops"):
        export_tflite(squad, path, kind="squad_v1", with_text=True, spm_model_file=SPM)
    classifier = build_model("classifier", tiny_config(), seed=1, num_labels=2)
    with pytest.raises(ExportError, match="needs the model's tokenizer: give "
                                          "spm_model_file or vocab_file"):
        export_tflite(classifier, path, kind="classifier", with_text=True)
    assert not [p for p in tmp_path.rglob("*")]
    # The scripts check it before any work: no model is loaded, nothing is written.
    result = run_script("export_savedmodel.py", "--kind=squad_v1",
                        f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                        f"--checkpoint={FIXTURE_CHECKPOINT}",
                        f"--spm_model_file={SPM}", f"--export_tflite={path}",
                        "--tflite_text", check=False)
    assert result.returncode != 0
    assert "--tflite_text: raw text in a LiteRT file is offered for the kinds" in \
        result.stderr
    assert not path.parent.exists()
