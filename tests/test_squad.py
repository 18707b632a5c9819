"""The SQuAD package as a whole (albert_tf.data.squad): its public names, and a few
hundred questions of the real dev sets from JSON to answer text when ../shared is
present. Each step has its own tests: test_squad_examples.py, test_squad_alignment.py,
test_squad_features.py, test_squad_records.py, test_squad_cache.py."""

import json

import pytest

from albert_tf.data import squad
from tests.helpers.squad_data import SHARED_SQUAD, convert, sentencepiece_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return sentencepiece_tokenizer()


@pytest.mark.skipif(not SHARED_SQUAD.is_dir(), reason="../shared/data/squad is absent")
@pytest.mark.parametrize("name", ["dev-v1.1.json", "dev-v2.0-half.json"])
def test_real_dev_questions_recover_their_answers(tokenizer, tmp_path, name):
    """A few hundred questions of the official files: every answer is in a window and
    the predicted span of its gold positions reads back as the answer."""
    data = json.loads((SHARED_SQUAD / name).read_text("utf-8"))
    # One paragraph from each article in turn, until 300 questions.
    kept, count = [], 0
    for article in data["data"]:
        for paragraph in article["paragraphs"][:3]:
            kept.append({"title": article["title"], "paragraphs": [paragraph]})
            count += len(paragraph["qas"])
        if count >= 300:
            break
    path = tmp_path / name
    path.write_text(json.dumps({"version": data["version"], "data": kept}))
    examples, features = convert(tokenizer, path, is_training=True)
    assert len(examples) == count
    answerable = {i for i, e in enumerate(examples) if not e.is_impossible}
    covered, exact, positive = set(), 0, 0
    for feature in features:
        if feature.is_impossible:
            continue
        example = examples[feature.example_index]
        text = squad.span_text(feature, example.paragraph_text, feature.start_position,
                               feature.end_position)
        assert example.orig_answer_text in text
        covered.add(feature.example_index)
        positive += 1
        exact += text == example.orig_answer_text
    assert covered == answerable
    # The rest are answers that end inside a piece ("2" of "2½"): the span reads "2½".
    assert exact >= 0.95 * positive


# The public names of albert_tf/data/squad.py before it became a package.
MODULE_NAMES = [
    "FEATURE_FORMAT_VERSION", "FIRST_UNIQUE_ID", "META_SUFFIX", "ORIGINAL_TRAIN_SHUFFLE_SEED",
    "PADDING_VALUES", "RECORD_LAYOUT", "SEQUENCE_FEATURES", "ParagraphAlignment",
    "SquadError", "SquadExample", "SquadFeature", "SquadFeatureFile", "align_paragraph",
    "convert_examples_to_features", "doc_spans", "feature_to_record", "iter_features",
    "load_or_build_features", "max_context_span", "read_feature_records",
    "read_squad_examples", "record_feature_names", "record_spec", "shuffle_examples",
    "span_text", "squad_dataset", "validate_settings", "write_features",
]


def test_the_module_names_are_the_packages():
    assert set(MODULE_NAMES) <= set(squad.__all__)
    for name in squad.__all__:
        assert getattr(squad, name) is not None, name
    from albert_tf.data.squad import cache, features
    assert squad.load_or_build_features is cache.load_or_build_features
    assert squad.SquadFeature is features.SquadFeature
