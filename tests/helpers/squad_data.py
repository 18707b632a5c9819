"""The SQuAD fixtures and the steps the SQuAD tests share (reading a fixture, converting
it with the reconstructed English SentencePiece model)."""

import functools
import json
import pathlib

from albert_tf.data import squad
from albert_tf.tokenization import FullTokenizer
from tests.helpers.paths import FIXTURES, SHARED_DATA, SPM_MODEL

# A few paragraphs (questions capped at 8 per paragraph) of the official dev-v1.1 and
# dev-v2.0 files.
V1_EXCERPT = FIXTURES / "squad" / "dev-v1.1-excerpt.json"
V2_EXCERPT = FIXTURES / "squad" / "dev-v2.0-excerpt.json"
SHARED_SQUAD = SHARED_DATA / "squad"
CLS_ID, SEP_ID = 2, 3


@functools.cache
def sentencepiece_tokenizer() -> FullTokenizer:
    return FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


def questions(path) -> list[tuple[str, dict]]:
    """(context, qa) of every question of a SQuAD file, in order."""
    data = json.loads(pathlib.Path(path).read_text("utf-8"))["data"]
    return [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]


def convert(tokenizer, path, is_training, **settings):
    """(examples, features) of a file, with the original scripts' default lengths unless
    `settings` say otherwise."""
    examples = squad.read_squad_examples(path, is_training=is_training)
    settings = {"max_seq_length": 384, "doc_stride": 128, "max_query_length": 64, **settings}
    features = squad.convert_examples_to_features(
        examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
        settings["max_query_length"], is_training)
    return examples, features
