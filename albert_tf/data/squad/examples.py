"""SQuAD JSON -> `SquadExample`s: one question on one paragraph, validated.

Where we differ from the original, only on input it could not handle: bad questions (an
answer that is not at its offset, malformed entries, text that is not UTF-8, duplicate
ids) are skipped with a warning naming the file and question id instead of crashing or
producing wrong positions; a training question with several answers (the dev sets) uses
the first one instead of raising.
"""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Iterator, Sequence

from albert_tf import fileio
from albert_tf.data import rows
from albert_tf.data.errors import DataError
from albert_tf.data.report import SkipLog

# run_squad_v1.py / run_squad_v2.py shuffle the training examples with
# random.Random(12345) before converting them.
ORIGINAL_TRAIN_SHUFFLE_SEED = 12345


class SquadError(DataError):
    """A SQuAD file or setting that cannot be used."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one paragraph.

    `orig_answer_text` / `start_position` (a character offset in `paragraph_text`) are
    the training answer (the first one), as in the original: set when reading for
    training, `""` / -1 for unanswerable questions, None otherwise. `answers` holds every
    gold answer text, whatever the mode, for evaluation.
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: str | None = None
    start_position: int | None = None
    is_impossible: bool = False
    answers: tuple[str, ...] = ()


def read_squad_examples(input_file, is_training: bool) -> list[SquadExample]:
    """Reads a SQuAD v1.1 or v2.0 JSON file into `SquadExample`s, in file order.

    With `is_training`, each question needs an answer whose text is at its
    `answer_start`, unless v2's `is_impossible` is true. Questions that cannot be used are
    skipped with a warning naming the file and question id; a file with no usable
    question, a missing file, or one that is not SQuAD JSON raise `SquadError`.
    """
    path = os.fspath(input_file)
    return examples_from_bytes(read_squad_bytes(path), path, is_training)


def read_squad_bytes(path: str) -> bytes:
    """The file's bytes (the cache hashes exactly what was parsed)."""
    if not fileio.exists(path):
        raise SquadError(f"SQuAD file {path} does not exist")
    return fileio.read_bytes(path)


def shuffle_examples(examples: Sequence[SquadExample],
                     seed: int = ORIGINAL_TRAIN_SHUFFLE_SEED) -> list[SquadExample]:
    """The examples in the order run_squad_v1/v2.py convert them for training."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    return shuffled


# ------------------------------------------------------------------- file -> questions
def examples_from_bytes(raw: bytes, path: str, is_training: bool) -> list[SquadExample]:
    """`read_squad_examples` on a file's bytes; `path` names it in messages."""
    skips = SkipLog("SQuAD question", path)
    examples: list[SquadExample] = []
    seen_ids: set[str] = set()
    for where, context, qa in _questions(_parse_squad_json(raw, path), path, skips):
        if qa is None:  # a paragraph or article without questions, already logged
            continue
        example = _example(qa, context, where, path, is_training, seen_ids, skips)
        if example is not None:
            seen_ids.add(example.qas_id)
            examples.append(example)
            skips.keep()
    skips.summary()
    if not examples:
        raise SquadError(f"{path} has no usable question: {skips.describe()}")
    return examples


def _parse_squad_json(raw: bytes, path: str) -> list:
    # Bytes that are not UTF-8 become lone surrogates, so that only the questions that
    # contain them are lost, not the file.
    document = rows.parse_json_document(raw, path, SquadError)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise SquadError(f"{path} is not a SQuAD file: expected an object with a 'data' list")
    return document["data"]


def _questions(data: list, path: str, skips: SkipLog
               ) -> Iterator[tuple[str, object, dict | None]]:
    """(where, context, qa) for every question of every paragraph, in file order; a
    malformed article or paragraph is skipped here and yields qa None (it counts as one
    question in the summary, as nothing tells how many it held)."""
    for article_index, article in enumerate(data):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            skips.skip(f"{path}, data[{article_index}]", "malformed article",
                       "no 'paragraphs' list")
            yield "", None, None
            continue
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{path}, data[{article_index}].paragraphs[{paragraph_index}]"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                skips.skip(where, "malformed paragraph", "no 'qas' list")
                yield where, None, None
                continue
            for qa_index, qa in enumerate(qas):
                yield f"{where}.qas[{qa_index}]", paragraph.get("context"), qa


def _example(qa, context, where: str, path: str, is_training: bool, seen_ids: set[str],
             skips: SkipLog) -> SquadExample | None:
    """The example of one question, or None (logged) when it cannot be used."""
    qas_id = qa.get("id") if isinstance(qa, dict) else None
    if isinstance(qas_id, int) and not isinstance(qas_id, bool):
        qas_id = str(qas_id)
    if not isinstance(qas_id, str) or not qas_id or rows.text_problem(qas_id):
        skips.skip(where, "no question id", "no usable question 'id'")
        return None
    problem = _text_problem(context, "context") or _text_problem(qa.get("question"),
                                                                 "question")
    if problem is None and qas_id in seen_ids:
        problem = ("duplicate question id", qas_id)
    is_impossible = qa.get("is_impossible", False)
    if problem is None and not isinstance(is_impossible, bool):
        problem = ("malformed question", f"'is_impossible' is {is_impossible!r}, not "
                                         "true/false")
    answer: tuple[str | None, int | None] | tuple[str, str] = (None, None)
    if problem is None and is_training:
        answer = ("", -1) if is_impossible else _training_answer(qa, context)
        if isinstance(answer[1], str):
            problem = answer
    if problem is not None:
        skips.skip(f"{path}, question id {qas_id!r}", *problem)
        return None
    answer_text, start_position = answer
    return SquadExample(
        qas_id=qas_id,
        question_text=qa["question"],
        paragraph_text=context,
        orig_answer_text=answer_text,
        start_position=start_position,
        is_impossible=is_impossible,
        answers=() if is_impossible else _answer_texts(qa.get("answers")))


def _text_problem(value, name: str) -> tuple[str, str] | None:
    """(reason, detail) of a text that cannot be used, else None."""
    if not isinstance(value, str):
        return "missing text", f"no '{name}' text"
    problem = rows.text_problem(value)
    if problem:
        return problem[0], f"'{name}': {problem[1]}"
    if not value.strip():
        return "missing text", f"empty '{name}'"
    return None


def _answer_texts(answers) -> tuple[str, ...]:
    if not isinstance(answers, list):
        return ()
    return tuple(a["text"] for a in answers if isinstance(a, dict)
                 and isinstance(a.get("text"), str) and not rows.text_problem(a["text"]))


def _training_answer(qa: dict, context: str) -> tuple[str, int] | tuple[str, str]:
    """(text, start) of the first answer, or (reason, detail) of why there is none
    usable (its second item a str)."""
    answers = qa.get("answers")
    if not isinstance(answers, list) or not answers:
        return "no answer", "no answer (and not 'is_impossible')"
    answer = answers[0]
    if not isinstance(answer, dict):
        return "malformed answer", f"answers[0] is {answer!r}"
    text, start = answer.get("text"), answer.get("answer_start")
    problem = _text_problem(text, "answers[0].text")
    if problem:
        return problem
    if not isinstance(start, int) or isinstance(start, bool):
        return "malformed answer", f"answer_start {start!r} is not an integer"
    if start < 0 or context[start:start + len(text)] != text:
        found = context[max(start, 0):max(start, 0) + len(text)]
        return "answer not at its offset", (f"answer text {text!r} is not at offset "
                                            f"{start} of the context (found {found!r})")
    return text, start
