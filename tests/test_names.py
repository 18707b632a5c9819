"""albert_tf.names: the record and model-input vocabularies and the maps between them."""

import numpy as np

from albert_tf import names


def test_the_spellings_are_the_file_formats():
    # The original's TFRecords and the TF Model Garden / TF-Hub signatures: renaming
    # any of these would break reading old records or serving old clients.
    assert names.RECORD_SEQUENCES == ("input_ids", "input_mask", "segment_ids")
    assert names.MODEL_INPUTS == ("input_word_ids", "input_mask", "input_type_ids")


def test_record_sequences_map_onto_model_inputs_in_order():
    assert tuple(names.RECORD_TO_MODEL[n] for n in names.RECORD_SEQUENCES) == names.MODEL_INPUTS
    assert tuple(names.MODEL_TO_RECORD[n] for n in names.MODEL_INPUTS) == names.RECORD_SEQUENCES
    assert set(names.RECORD_TO_MODEL) == set(names.RECORD_SEQUENCES)
    assert len(set(names.RECORD_TO_MODEL.values())) == len(names.RECORD_TO_MODEL)  # 1:1


def test_renaming_both_ways_is_an_identity_and_passes_other_keys():
    features = {"input_ids": "ids", "input_mask": "mask", "segment_ids": "types",
                names.MASKED_LM_POSITIONS: "positions", names.LABEL_IDS: "label"}
    inputs = names.to_model_inputs(features)
    assert inputs == {"input_word_ids": "ids", "input_mask": "mask", "input_type_ids": "types",
                      "masked_lm_positions": "positions", "label_ids": "label"}
    assert list(names.to_record_features(inputs).items()) == list(features.items())
    assert list(features) == ["input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                              "label_ids"]  # the argument is not changed


def test_values_are_passed_not_copied():
    features = {name: np.zeros((2, 3), np.int32) for name in names.RECORD_SEQUENCES}
    inputs = names.to_model_inputs(features)
    assert all(inputs[names.RECORD_TO_MODEL[k]] is v for k, v in features.items())


def test_renaming_names_already_in_the_target_vocabulary_changes_nothing():
    inputs = {name: i for i, name in enumerate(names.MODEL_INPUTS)}
    assert names.to_model_inputs(inputs) == inputs
    features = {name: i for i, name in enumerate(names.RECORD_SEQUENCES)}
    assert names.to_record_features(features) == features
