"""Your own multiple-choice and classification data: C3, SWAG and JSON lines
(`albert_tf.data.multiple_choice`), CSV / TSV / JSONL tables (`albert_tf.data.tabular`);
padded choices in the records."""

import json

import numpy as np
import pytest

from albert_tf.data import choice_records, multiple_choice, tabular
from tests.helpers.paths import SHARED_DATA
from tests.helpers.scripts import FIXTURES

C3 = FIXTURES / "c3"


def test_c3_questions_ids_and_answers():
    paths = multiple_choice.c3_files(C3, "dev")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["c3-d-dev.json", "c3-m-dev.json"]
    examples = multiple_choice.read_c3(paths)
    documents = [(part, d) for part, p in zip("dm", paths)
                 for d in json.loads(open(p, encoding="utf-8").read())]
    questions = [(part, d, i, q) for part, d in documents for i, q in enumerate(d[1])]
    assert len(examples) == len(questions)
    for example, (part, document, index, question) in zip(examples, questions):
        assert example.example_id == f"{part}-{document[2]}-{index}"
        assert example.context == " ".join(document[0])
        assert example.endings == [f"{question['question']} {c}" for c in question["choice"]]
        assert question["choice"][example.label] == question["answer"]


def test_bad_c3_items_are_skipped_and_named(tmp_path, caplog):
    documents = [[["s"], [{"question": "q", "choice": ["a", "b"], "answer": "c"},
                          {"question": "q", "choice": ["a", "b", "c", "d", "e"],
                           "answer": "a"},
                          {"question": "q", "choice": ["a", "b"], "answer": "b"}], "7-1"],
                 "not a document"]
    path = tmp_path / "c3-d-train.json"
    path.write_text(json.dumps(documents))
    with caplog.at_level("WARNING"):
        examples = multiple_choice.read_c3([str(path)])
    assert [(e.example_id, e.label) for e in examples] == [("d-7-1-2", 1)]
    # a file not named as released: its name tells its ids apart
    other = tmp_path / "mine.json"
    other.write_text(json.dumps(documents))
    with caplog.at_level("WARNING"):
        assert [e.example_id for e in multiple_choice.read_c3([str(other)])] == [
            "mine-7-1-2"]
    assert "document 0 (7-1) question 0: answer 'c' is neither a choice" in caplog.text
    assert "question 1: 'choice' must be a list of 1 to 4 texts" in caplog.text
    assert "document 1: not [sentences, questions, id]" in caplog.text
    assert "skipped 3 of 4 C3 question" in caplog.text
    with pytest.raises(FileNotFoundError, match="c3-d-test.json and/or c3-m-test.json"):
        multiple_choice.c3_files(tmp_path, "test")


def test_swag_needs_its_columns(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("sent1,sent2,ending0\na,b,c\n")
    with pytest.raises(multiple_choice.ChoiceDataError, match="no column.*ending1"):
        multiple_choice.read_swag(str(path))


def test_padded_choices_are_zero_and_never_predicted():
    """Two of four choices: the record's last two choices are zeros; the model gives
    them probability 0 whatever their score would be."""
    from albert_tf import AlbertMultipleChoice
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.tiny import tiny_config

    tokenizer = FullTokenizer(spm_model_file=str(FIXTURES / "spm" /
                                                 "albert_en_30k_reconstructed.model"))
    example = multiple_choice.ChoiceExample("x", "a cat sat", ["on a mat", "in a hat"], 1)
    features = choice_records.convert_single_example(example, 16, 8, tokenizer, num_choices=4)
    mask = np.array(features.input_mask)
    assert mask[:2].sum(-1).min() > 0 and not mask[2:].any()
    assert not np.array(features.input_ids)[2:].any()
    model = AlbertMultipleChoice(tiny_config(initializer_range=1.0), num_choices=4, seed=1)
    inputs = {"input_word_ids": np.array([features.input_ids], np.int32),
              "input_mask": mask[None].astype(np.int32),
              "input_type_ids": np.array([features.segment_ids], np.int32)}
    outputs = model(inputs, training=False)
    probabilities = np.asarray(outputs["probabilities"])[0]
    assert probabilities[2:].tolist() == [0, 0]
    assert probabilities[:2].sum() == pytest.approx(1, abs=1e-6)
    with pytest.raises(choice_records.ChoiceDataError, match="has 5 endings, expected 1 to 4"):
        choice_records.convert_single_example(multiple_choice.ChoiceExample("y", "c", ["e"] * 5, 0),
                                    16, 8, tokenizer)


@pytest.mark.skipif(not (SHARED_DATA / "multiple_choice" / "c3").exists(),
                    reason="shared C3 data absent")
def test_real_c3_dev_reads_every_question():
    c3 = SHARED_DATA / "multiple_choice" / "c3"
    examples = multiple_choice.read_c3(multiple_choice.c3_files(c3, "dev"))
    assert len(examples) == 1825 + 1991  # the README of ../shared
    assert {len(e.endings) for e in examples} == {2, 3, 4}
    # the d and m files share 26 document ids ("10-74", ...): the ids stay unique
    assert len({e.example_id for e in examples}) == len(examples)


# ------------------------------------------------------------------------ tables
def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_csv_with_quotes_names_and_indices(tmp_path):
    path = write(tmp_path / "train.csv",
                 'id,text,label\n1,"Hello, world",pos\n2,"say ""hi""",neg\n3,only two\n')
    fields = tabular.Fields("text", label="label")
    examples = tabular.read_examples(path, fields, split="train", labels=None,
                                     regression=False)
    assert [(e.text_a, e.label) for e in examples] == [("Hello, world", "pos"),
                                                       ('say "hi"', "neg")]
    assert tabular.labels_of(examples) == ["neg", "pos"]
    by_index = tabular.read_examples(path, tabular.Fields("1", label="2"), split="train",
                                     labels=["pos"], regression=False)
    assert [e.text_a for e in by_index] == ["Hello, world"]  # "neg" is not a label
    with pytest.raises(tabular.TableDataError, match=r"--text_a_field=txt is neither a "
                                                     r"column of the header \(id, text, label"):
        tabular.read_examples(path, tabular.Fields("txt"), split="train", labels=None,
                              regression=False)


def test_tsv_keeps_quotes_and_jsonl_reads_numbers(tmp_path):
    tsv = write(tmp_path / "dev.tsv", 'text\tscore\n"quoted" text\t0.5\nbad\tx\n')
    examples = tabular.read_examples(tsv, tabular.Fields("text", label="score"),
                                     split="dev", labels=None, regression=True)
    assert [(e.text_a, e.label) for e in examples] == [('"quoted" text', 0.5)]
    jsonl = write(tmp_path / "test.jsonl", json.dumps({"t": "a", "label": 1}) + "\n{oops\n")
    test = tabular.read_examples(jsonl, tabular.Fields("t", label="label"), split="test",
                                 labels=["0", "1"], regression=False)
    assert [(e.text_a, e.label) for e in test] == [("a", None)]  # test: no label read
    train = tabular.read_examples(jsonl, tabular.Fields("t", label="label"), split="train",
                                  labels=None, regression=False)
    assert train[0].label == "1"
    with pytest.raises(tabular.TableDataError, match="cannot tell the format"):
        tabular.file_format("data.xlsx")
    with pytest.raises(tabular.TableDataError, match="no usable train row"):
        tabular.read_examples(write(tmp_path / "e.jsonl", "{oops\n"), tabular.Fields("t"),
                              split="train", labels=None, regression=False)
