"""brightmart/albert_zh checkpoints: every output of brightmart's own code, to 1e-5.

`fixtures/brightmart_albert_zh_tiny` holds a checkpoint with brightmart's names (E=16,
H=32, one shared layer used 3 times) and what brightmart's `modeling.py` and the heads of
its `run_pretraining.py` compute for a padded batch. The checkpoint is read as the
Google-layout model with E = H whose word embeddings are W1 . W2
(`albert_tf.checkpoints.brightmart`).
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertClassifier,
    AlbertConfig,
    AlbertPretrainer,
    CheckpointError,
    ConfigError,
    load_tf1_checkpoint,
    losses,
    names,
    save_tf1_checkpoint,
)
from albert_tf.checkpoints import brightmart
from albert_tf.checkpoints.release import describe_checkpoint, find_release_files
from albert_tf.modeling import tf1_variables
from tests.helpers.layouts import BRIGHTMART, brightmart_release, load_npz, model_inputs

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return brightmart_release(tmp_path_factory.mktemp("zh") / "albert_tiny_zh")


@pytest.fixture(scope="module")
def model(release):
    return AlbertPretrainer.from_release(release)


@pytest.fixture(scope="module")
def computed(model):
    features = load_npz(BRIGHTMART, "inputs")
    inputs = model_inputs(features)
    inputs[names.MASKED_LM_POSITIONS] = features[names.MASKED_LM_POSITIONS]
    return features, model(inputs)


def test_release_is_recognized_and_read_whole(model, release):
    files = model.release_files
    assert files.layout == "brightmart"
    # Its checkpoint file names a path on brightmart's machine: the one index is used.
    assert files.checkpoint == str(release / "albert_model.ckpt")
    assert files.config_file == str(release / "albert_config_tiny.json")
    assert files.vocab_file == str(release / "vocab.txt") and files.spm_model_file is None
    report = model.load_report
    assert report.layout == "brightmart" and "brightmart" in str(report)
    assert report.missing == [] and report.unused == [] and len(report.loaded) == 30
    # The Google-layout equivalent: E = H, one group of one layer, ln_type dropped.
    config = model.config
    assert (config.embedding_size, config.hidden_size, config.num_hidden_groups,
            config.inner_group_num) == (32, 32, 1, 1)
    assert "ln_type" not in config.extra and config.extra["pooler_type"] == \
        "first_token_transform"


def test_every_output_matches_brightmarts_code(computed):
    features, outputs = computed
    expected = load_npz(BRIGHTMART, "outputs")
    np.testing.assert_allclose(outputs["embedding_output"], expected["embedding_output"],
                               atol=TOLERANCE)
    np.testing.assert_allclose(np.stack(outputs["encoder_outputs"]),
                               expected["all_encoder_layers"], atol=TOLERANCE)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[name], expected[name], atol=TOLERANCE)
    mlm_log_probs = tf.nn.log_softmax(outputs[names.MLM_LOGITS]).numpy()
    np.testing.assert_allclose(mlm_log_probs.reshape(expected["mlm_log_probs"].shape),
                               expected["mlm_log_probs"], atol=TOLERANCE)
    np.testing.assert_allclose(tf.nn.log_softmax(outputs[names.SOP_LOGITS]),
                               expected["nsp_log_probs"], atol=TOLERANCE)
    mlm_loss = losses.masked_lm_loss(outputs[names.MLM_LOGITS], features["masked_lm_ids"],
                                     features["masked_lm_weights"])
    nsp_loss = losses.sentence_order_loss(outputs[names.SOP_LOGITS],
                                          features["next_sentence_labels"])
    np.testing.assert_allclose(mlm_loss, expected["mlm_loss"], atol=TOLERANCE)
    np.testing.assert_allclose(nsp_loss, expected["nsp_loss"], atol=TOLERANCE)


def test_word_embeddings_are_the_product_of_the_two_tables(model):
    reader = tf.train.load_checkpoint(str(BRIGHTMART / "model.ckpt"))
    product = (reader.get_tensor(brightmart.WORD_EMBEDDINGS).astype(np.float64)
               @ reader.get_tensor(brightmart.PROJECTION).astype(np.float64))
    np.testing.assert_allclose(model.encoder.word_embeddings.numpy(), product, rtol=1e-6)
    block = "bert/encoder/transformer/group_0/inner_group_0/"
    by_name = {w.path: w.numpy() for w in model.weights}
    np.testing.assert_array_equal(
        by_name[block + "ffn_1/intermediate/output/dense/kernel"],
        reader.get_tensor("bert/encoder/layer_shared/output/dense/kernel"))
    # Every shared-layer variable of brightmart has one Google name.
    assert sorted(brightmart.BLOCK_NAMES) == sorted(
        n for n in tf1_variables.block_variables(model.config, 0, 0))


def test_saved_back_as_google_layout(model, tmp_path, computed):
    """What a model loaded this way saves: a Google-layout checkpoint (its config has
    E = H), which loads again to the same outputs with no conversion."""
    prefix = save_tf1_checkpoint(model, str(tmp_path / "model.ckpt"))
    model.config.to_json_file(tmp_path / "albert_config.json")
    assert describe_checkpoint(prefix).layout == "google"
    again = AlbertPretrainer.from_release(tmp_path)
    assert again.load_report.layout == "google"
    features, outputs = computed
    inputs = model_inputs(features)
    inputs[names.MASKED_LM_POSITIONS] = features[names.MASKED_LM_POSITIONS]
    np.testing.assert_array_equal(again(inputs)[names.MLM_LOGITS], outputs[names.MLM_LOGITS])


def test_a_model_of_brightmarts_own_config_is_told_what_to_build():
    config = AlbertConfig.from_json_file(BRIGHTMART / "albert_config.json")  # E = 16
    model = AlbertPretrainer(config)
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(CheckpointError) as error:
        load_tf1_checkpoint(model, str(BRIGHTMART / "model.ckpt"))
    message = str(error.value)
    assert "bert/embeddings/word_embeddings: model [97, 16], checkpoint [97, 32]" in message
    assert "brightmart" in message and "google_config" in message
    assert all(np.array_equal(b, w.numpy()) for b, w in zip(before, model.weights))


def test_preln_config_is_refused_with_its_file(tmp_path):
    values = json.loads((BRIGHTMART / "albert_config.json").read_text())
    path = tmp_path / "albert_config_xxlarge.json"
    path.write_text(json.dumps({**values, "ln_type": "preln"}))
    with pytest.raises(ConfigError, match=f"'ln_type' in {path} is 'preln'"):
        AlbertConfig.from_json_file(path)


def test_task_model_loads_the_encoder(release):
    """A fine-tuning model from a brightmart release: the encoder read, the head new."""
    model = AlbertClassifier.from_release(release, num_labels=3)
    report = model.load_report
    assert sorted(report.missing) == ["output_bias", "output_weights"]
    assert sorted(report.unused) == sorted(
        n for n in tf.train.load_checkpoint(str(BRIGHTMART / "model.ckpt"))
        .get_variable_to_shape_map() if n.startswith("cls/"))
    assert find_release_files(release).layout == "brightmart"


def test_export_reads_the_release_directory(release):
    """export_savedmodel.py's loader: brightmart's own config file and checkpoint."""
    from albert_tf.export import load_model_from_checkpoint

    model = load_model_from_checkpoint("mlm", str(release / "albert_config_tiny.json"),
                                       str(release))
    assert model.load_report.layout == "brightmart" and model.load_report.missing == []
    assert model.config.embedding_size == 32
