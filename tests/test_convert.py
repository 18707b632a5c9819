"""`python -m albert_tf.convert`: any layout in, Hugging Face or Google's out, the same
numbers."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertPretrainer, CheckpointError, names
from albert_tf.checkpoints import save_tf1_checkpoint
from albert_tf.convert import convert, load
from albert_tf.release import find_release_files
from tests.helpers.layouts import BRIGHTMART, brightmart_release, load_npz, model_inputs
from tests.helpers.tiny import tiny_config


def test_brightmart_to_hugging_face_to_google_keeps_the_numbers(tmp_path):
    release = brightmart_release(tmp_path / "albert_tiny_zh")
    convert(release, tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "google", to="google")
    files = find_release_files(tmp_path / "google")
    assert files.layout == "google" and files.vocab_file == str(tmp_path / "google" /
                                                                "vocab.txt")
    assert tf.train.latest_checkpoint(str(tmp_path / "google")).endswith("model.ckpt")
    model = AlbertPretrainer.from_release(tmp_path / "google")
    features = load_npz(BRIGHTMART, "inputs")
    inputs = model_inputs(features)
    inputs[names.MASKED_LM_POSITIONS] = features[names.MASKED_LM_POSITIONS]
    expected = load_npz(BRIGHTMART, "outputs")
    log_probs = tf.nn.log_softmax(model(inputs)[names.MLM_LOGITS]).numpy()
    np.testing.assert_allclose(log_probs.reshape(expected["mlm_log_probs"].shape),
                               expected["mlm_log_probs"], atol=1e-5)
    with pytest.raises(FileExistsError, match="not overwritten"):
        convert(release, tmp_path / "hf")


def test_a_one_output_head_needs_the_model_named(tmp_path):
    config = tiny_config(vocab_size=50)
    (tmp_path / "in").mkdir()
    config.to_json_file(tmp_path / "in" / "albert_config.json")
    regression = AlbertClassifier(config, 1, seed=0)
    save_tf1_checkpoint(regression, str(tmp_path / "in" / "model.ckpt"))
    with pytest.raises(CheckpointError, match="--model=classifier .* --model=multiple_choice"):
        load(tmp_path / "in")
    model, _ = load(tmp_path / "in", model="classifier")
    assert model.num_labels == 1 and model.load_report.missing == []
    convert(tmp_path / "in", tmp_path / "hf", model="classifier")
    again = AlbertClassifier.from_release(tmp_path / "hf", num_labels=1)
    np.testing.assert_array_equal(again.output_weights.numpy(),
                                  regression.output_weights.numpy())
