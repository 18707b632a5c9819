"""NER data: CoNLL and CLUENER files read, windows of first-piece labels, predictions
written back in the input's own format (`albert_tf.data.ner`)."""

import json

import numpy as np
import pytest

from albert_tf import names
from albert_tf.data import ner
from albert_tf.tokenization import FullTokenizer
from tests.helpers.layouts import write_vocab
from tests.helpers.paths import SHARED_DATA

CONLL = """-DOCSTART- -X- O O

EU\tB-ORG
rejects\tO
German\tB-MISC
call\tO
\t
Peter\tB-PER
Blackburn\tI-PER

-DOCSTART- -X- O O
BRUSSELS\tB-LOC
"""
CLUENER = [
    {"text": "彭小军认为，国内银行在台湾", "label": {"name": {"彭小军": [[0, 2]]},
                                              "address": {"台湾": [[11, 12]]}}},
    {"text": "温格的球队", "label": {"name": {"温格": [[0, 1]]}}},
]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def wordpiece(tmp_path):
    chars = "".join(item["text"] for item in CLUENER)
    vocab = write_vocab(tmp_path / "vocab.txt", 60, chars)
    with open(vocab, "a", encoding="utf-8") as f:
        f.write("eu\nrejects\ngerman\ncall\npeter\nblack\n##burn\nbrussels\n")
    return FullTokenizer(vocab_file=str(vocab), do_lower_case=True)


def test_conll_sentences_tags_and_write_back(tmp_path):
    path = write(tmp_path, "train.conll", CONLL)
    data = ner.read_ner_file(path)
    assert data.format == "conll" and data.has_tags
    assert [s.words for s in data.sentences] == [
        ["EU", "rejects", "German", "call"], ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert [s.tags for s in data.sentences][1] == ["B-PER", "I-PER"]
    assert [s.line for s in data.sentences] == [3, 8, 12]
    assert ner.labels_of([data]) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    predicted = [["O"] * len(s.words) for s in data.sentences]
    predicted[1] = ["B-PER", "B-PER"]
    out = ner.predictions_text(data, predicted).splitlines()
    lines = CONLL.splitlines()
    assert len(out) == len(lines)
    assert out[0] == lines[0] and out[6] == lines[6] and out[9] == lines[9]  # kept
    assert out[7] == "Peter\tB-PER\tB-PER" and out[8] == "Blackburn\tI-PER\tB-PER"
    assert out[11] == "BRUSSELS\tB-LOC\tO"


@pytest.mark.parametrize("text, words", [
    ("EU B-ORG\nrejects FOO\n", ["bad.conll:2", "'FOO'", "B-/I-/E-/S-"]),
    ("EU B-ORG\nrejects\n", ["bad.conll:2", "1 column(s)", "a tag"]),
])
def test_bad_conll_sentences_are_skipped_and_named(tmp_path, text, words, caplog):
    """A bad line skips its sentence with a warning naming file and line; the other
    sentences are read, and their lines written back (the bad one's unchanged); a file
    with nothing left is an error."""
    path = write(tmp_path, "bad.conll", text + "\nBRUSSELS B-LOC\n")
    with caplog.at_level("WARNING"):
        data = ner.read_conll(path)
    for word in [path, *words]:
        assert word in caplog.text
    assert [s.words for s in data.sentences] == [["BRUSSELS"]]
    written = ner.predictions_text(data, [["O"]]).splitlines()
    assert written[-1] == "BRUSSELS B-LOC O"
    assert written[:-1] == text.splitlines() + [""]
    for nothing_left in (text, "\n\n"):
        with pytest.raises(ner.NerDataError, match="holds no usable sentence"):
            ner.read_conll(write(tmp_path, "worse.conll", nothing_left))


def test_untagged_conll_is_a_test_file(tmp_path):
    data = ner.read_conll(write(tmp_path, "test.conll", "EU\nrejects\n\nPeter\n"))
    assert not data.has_tags and [s.words for s in data.sentences] == [["EU", "rejects"],
                                                                        ["Peter"]]


def test_cluener_tags_and_round_trip(tmp_path):
    path = write(tmp_path, "dev.json",
                 "\n".join(json.dumps(i, ensure_ascii=False) for i in CLUENER) + "\n")
    data = ner.read_ner_file(path)
    assert data.format == "cluener"
    assert data.sentences[0].tags == ["B-name", "I-name", "I-name"] + ["O"] * 8 + [
        "B-address", "I-address"]
    # Gold tags written back give the file's own labels.
    out = [json.loads(line) for line in ner.predictions_text(
        data, [s.tags for s in data.sentences]).splitlines()]
    assert out == CLUENER


@pytest.mark.parametrize("label, words", [
    ({"name": {"彭小": [[0, 2]]}}, ["bad.json:1", "name '彭小' at [0, 2]", "inclusive"]),
    ({"name": {"彭小军": [[0, 2]]}, "x": {"小军": [[1, 2]]}}, ["bad.json:1", "overlaps"]),
    ({"name": [0, 2]}, ["bad.json:1", "malformed label"]),
])
def test_bad_cluener_lines_are_skipped_whole_and_named(tmp_path, label, words, caplog):
    """A span that is not its entity's text, or overlaps another (CLUENER's train file
    has one such line): the line is skipped whole (none of its entities learned, none
    left out of it), with a warning naming file, line and entity."""
    good = {"text": "他说", "label": {"name": {"他": [[0, 0]]}}}
    path = write(tmp_path, "bad.json", json.dumps({"text": "彭小军认为", "label": label},
                                                  ensure_ascii=False) + "\n"
                 + json.dumps(good, ensure_ascii=False) + "\n")
    with caplog.at_level("WARNING"):
        data = ner.read_cluener(path)
    for word in [path, *words]:
        assert word in caplog.text
    assert "skipped 1 of 2" in caplog.text
    assert [s.words for s in data.sentences] == [["他", "说"]]
    assert data.sentences[0].line == 2 and data.objects == [good]


def test_first_piece_carries_the_tag_and_windows_split_at_words(tmp_path, wordpiece):
    data = ner.read_conll(write(tmp_path, "train.conll", CONLL))
    labels = ner.labels_of([data])
    features = ner.file_features(data, wordpiece, 8, labels)
    second = [f for f in features if f.sentence == 1]
    assert len(second) == 1
    pieces = wordpiece.convert_ids_to_tokens(second[0].inputs[names.INPUT_WORD_IDS][:5])
    assert pieces == ["[CLS]", "peter", "black", "##burn", "[SEP]"]
    assert list(second[0].words[:5]) == [-1, 0, 1, -1, -1]
    assert list(second[0].label_ids[:5]) == [ner.IGNORE, labels.index("B-PER"),
                                             labels.index("I-PER"), ner.IGNORE, ner.IGNORE]
    # 4 pieces of sentence 0 in windows of 8 - 2 = 6 pieces: one window; with 4
    # positions (2 pieces each), windows of whole words ("black ##burn" alone).
    assert len([f for f in features if f.sentence == 0]) == 1
    short = ner.file_features(data, wordpiece, 4, labels)
    assert [list(f.words[1:3]) for f in short if f.sentence == 0] == [[0, 1], [2, 3]]
    assert [list(f.words[1:3]) for f in short if f.sentence == 1] == [[0, -1], [1, -1]]
    # Gold label ids back through the windows give the gold tags.
    arrays = ner.feature_arrays(short)
    gold = np.where(arrays["label_ids"] >= 0, arrays["label_ids"], 0)
    assert ner.word_predictions(data, short, gold, labels) == [
        s.tags for s in data.sentences]


def test_unknown_tags_are_not_scored_and_named(tmp_path, wordpiece, caplog):
    """A tag outside the label list: a warning names the file's line and the count; the
    word is not scored (IGNORE). A file with no known tag left is an error."""
    data = ner.read_conll(write(tmp_path, "dev.conll",
                                "EU\tB-ORG\nrejects\tB-NEW\n\ncall\tO\n"))
    with caplog.at_level("WARNING"):
        features = ner.file_features(data, wordpiece, 16, ["O", "B-ORG"])
    assert "dev.conll, line 1: tags ['B-NEW']" in caplog.text
    assert "1 of 2 sentences have tags outside the label list (B-NEW)" in caplog.text
    assert features[0].label_ids[1:3].tolist() == [1, ner.IGNORE]
    with pytest.raises(ner.NerDataError, match="no word has a tag among the labels"):
        ner.file_features(data, wordpiece, 16, ["B-X"])


def test_an_i_tag_that_opens_an_entity_is_read_as_seqeval_reads_it(tmp_path, caplog):
    data = ner.read_conll(write(tmp_path, "iob1.conll",
                                "a\tO\nb\tI-PER\n\nc\tB-LOC\nd\tI-LOC\n\n"
                                "e\tB-LOC\nf\tI-PER\n"))
    with caplog.at_level("WARNING"):
        assert ner.warn_about_unopened_entities(data) == 2
    assert "iob1.conll: 2 sentences have an I- tag that opens an entity (first in the " \
        "sentence at line 1)" in caplog.text
    assert ner.spans_of(data.sentences[0].tags) == [("PER", 1, 1)]  # seqeval's reading
    assert ner.spans_of(data.sentences[2].tags) == [("LOC", 0, 0), ("PER", 1, 1)]


@pytest.mark.parametrize("text, word_split, words", [
    ("EU rejects  German\tcall", "whitespace",
     [("EU", 0, 2), ("rejects", 3, 10), ("German", 12, 18), ("call", 19, 23)]),
    ("在北京 Google公司2019年", "whitespace",
     [("在", 0, 1), ("北", 1, 2), ("京", 2, 3), ("Google", 4, 10), ("公", 10, 11),
      ("司", 11, 12), ("2019", 12, 16), ("年", 16, 17)]),
    ("北京 ab", "characters", [("北", 0, 1), ("京", 1, 2), ("a", 3, 4), ("b", 4, 5)]),
    ("   ", "whitespace", []),
])
def test_split_words_of_raw_text(text, word_split, words):
    assert ner.split_words(text, word_split) == words


def test_word_split_follows_the_training_words(tmp_path):
    assert ner.word_split_of(ner.read_cluener(write(
        tmp_path, "c.json", "\n".join(json.dumps(x, ensure_ascii=False) for x in CLUENER)))) \
        == "characters"
    assert ner.word_split_of(ner.read_conll(write(tmp_path, "w.conll", CONLL))) == "whitespace"


def normalized(item):
    return {**item, "label": {t: {e: sorted(spans) for e, spans in entities.items()}
                              for t, entities in item["label"].items()}}


@pytest.mark.skipif(not (SHARED_DATA / "ner").exists(), reason="shared NER data absent")
def test_real_files_read_and_write_back_exactly():
    cluener = ner.read_ner_file(str(SHARED_DATA / "ner" / "cluener" / "dev.json"))
    assert len(cluener.sentences) == 1343
    written = ner.predictions_text(cluener, [s.tags for s in cluener.sentences]).splitlines()
    original = (SHARED_DATA / "ner" / "cluener" / "dev.json").read_text(
        encoding="utf-8").splitlines()
    # The same entities; spans written in text order (the file lists a few otherwise).
    assert [normalized(json.loads(w)) for w in written] == [
        normalized(json.loads(o)) for o in original if o.strip()]
    assert len(ner.labels_of([cluener])) == 21  # O + B-/I- of 10 types
    train = ner.read_ner_file(str(SHARED_DATA / "ner" / "wnut17" / "wnut17train.conll"))
    dev = ner.read_ner_file(str(SHARED_DATA / "ner" / "wnut17" / "emerging.dev.conll"))
    assert (len(train.sentences), len(dev.sentences)) == (3394, 1009)
    assert ner.labels_of([train]) == ner.labels_of([dev])


def test_metrics_are_conllevals_entity_counts():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-LOC"]]
    results = ner.ner_metrics(gold, predicted)
    # Gold entities: PER, LOC, ORG; predicted: PER, ORG (at LOC's place), ORG, LOC.
    # Correct: PER and the second sentence's ORG: precision 2/4, recall 2/3.
    assert results["precision"] == pytest.approx(0.5)
    assert results["recall"] == pytest.approx(2 / 3)
    assert results["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert (results["PER_f1"], results["LOC_f1"], results["ORG_precision"]) == (1.0, 0.0, 0.5)
    assert results["accuracy"] == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match="counts"):
        ner.ner_metrics(gold, predicted[:1])
