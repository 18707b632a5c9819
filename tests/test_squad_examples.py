"""SQuAD JSON -> examples (albert_tf.data.squad.examples): reading, validation and the
skip log, the original training order."""

import json
import logging

import pytest

from albert_tf.data import squad
from tests.helpers.squad_data import V1_EXCERPT, V2_EXCERPT, questions


@pytest.mark.parametrize("path", [V1_EXCERPT, V2_EXCERPT])
def test_read_examples_training_and_eval(path):
    file_questions = questions(path)
    train = squad.read_squad_examples(path, is_training=True)
    evaluation = squad.read_squad_examples(str(path), is_training=False)
    assert [e.qas_id for e in train] == [qa["id"] for _, qa in file_questions]
    assert [e.qas_id for e in evaluation] == [qa["id"] for _, qa in file_questions]
    for example, (context, qa) in zip(train, file_questions):
        assert example.paragraph_text == context
        assert example.question_text == qa["question"]
        assert example.is_impossible == qa.get("is_impossible", False)
        if example.is_impossible:
            assert (example.orig_answer_text, example.start_position) == ("", -1)
            assert example.answers == ()
        else:
            first = qa["answers"][0]
            assert example.orig_answer_text == first["text"]
            assert example.start_position == first["answer_start"]
            assert example.answers == tuple(a["text"] for a in qa["answers"])
    for example in evaluation:
        assert example.start_position is None and example.orig_answer_text is None
    if path == V2_EXCERPT:
        assert any(e.is_impossible for e in train) and not all(e.is_impossible for e in train)


def test_shuffled_training_order_is_the_original_seeded_one():
    examples = squad.read_squad_examples(V1_EXCERPT, is_training=True)
    shuffled = squad.shuffle_examples(examples)
    assert sorted(e.qas_id for e in shuffled) == sorted(e.qas_id for e in examples)
    assert [e.qas_id for e in shuffled] != [e.qas_id for e in examples]
    assert [e.qas_id for e in squad.shuffle_examples(examples, 12345)] == [
        e.qas_id for e in shuffled]


# ---------------------------------------------------------------------------- bad input
def _squad_bytes(paragraphs) -> bytes:
    return json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]},
                      ensure_ascii=False).encode("utf-8")


def test_bad_questions_are_skipped_naming_file_and_id(tmp_path, caplog):
    context = "The cat sat on the mat in 1990."
    good = {"id": "good", "question": "Where did the cat sit?",
            "answers": [{"text": "the mat", "answer_start": 15}]}
    paragraphs = [{"context": context, "qas": [
        good,
        {"id": "bad-offset", "question": "When?",
         "answers": [{"text": "1990", "answer_start": 3}]},
        {"id": "no-question", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "bad-start", "question": "Who?",
         "answers": [{"text": "cat", "answer_start": "4"}]},
        {"id": "no-answer", "question": "Who?", "answers": []},
        {"id": "good", "question": "Again?",
         "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "impossible", "question": "Why?", "answers": [], "is_impossible": True},
        {"question": "no id", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "NONUTF8", "question": "Who?",
         "answers": [{"text": "cat", "answer_start": 4}]},
    ]}, {"context": "NONUTF8 context", "qas": [{"id": "in-bad-context", "question": "?",
                                                 "answers": []}]}]
    raw = _squad_bytes(paragraphs)
    # Raw bytes that are not UTF-8 in one question's text and in one context.
    raw = raw.replace(b'"question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]}, '
                      b'{"id": "NONUTF8"', b'"question": "Who?", "answers": [{"text": "cat", '
                      b'"answer_start": 4}]}, {"id": "NONUTF8"', 1)
    raw = raw.replace(b'"id": "NONUTF8", "question": "Who?"',
                      b'"id": "bad-bytes", "question": "Wh\xff\xfeo?"')
    raw = raw.replace(b'"context": "NONUTF8 context"', b'"context": "caf\xe9 context"')
    path = tmp_path / "bad.json"
    path.write_bytes(raw)

    with caplog.at_level(logging.WARNING):
        examples = squad.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["good", "impossible"]
    for qid in ["bad-offset", "no-question", "bad-start", "no-answer", "bad-bytes",
                "in-bad-context"]:
        assert f"question id '{qid}'" in caplog.text, qid
    assert str(path) in caplog.text
    assert "not at offset 3" in caplog.text and "duplicate" in caplog.text
    assert "qas[7]" in caplog.text  # the question without an id, by position
    assert "skipped 8 of 10" in caplog.text

    # Without training, answers are not needed.
    evaluation = squad.read_squad_examples(path, is_training=False)
    assert [e.qas_id for e in evaluation] == ["good", "bad-offset", "bad-start", "no-answer",
                                              "impossible"]


def test_nothing_usable_or_no_file_is_a_clear_error(tmp_path):
    path = tmp_path / "all_bad.json"
    path.write_bytes(_squad_bytes([{"context": "Some text.", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "nope", "answer_start": 0}]}]}]))
    with pytest.raises(squad.SquadError, match=f"{path}.*no usable question"):
        squad.read_squad_examples(path, is_training=True)
    assert len(squad.read_squad_examples(path, is_training=False)) == 1
    missing = tmp_path / "missing.json"
    with pytest.raises(squad.SquadError, match=f"{missing} does not exist"):
        squad.read_squad_examples(missing, is_training=False)
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [')
    with pytest.raises(squad.SquadError, match=f"{broken}:1: not valid JSON .Expecting value"):
        squad.read_squad_examples(broken, is_training=False)
    broken.write_text('{"version": "1.1"}')
    with pytest.raises(squad.SquadError, match="not a SQuAD file"):
        squad.read_squad_examples(broken, is_training=False)
