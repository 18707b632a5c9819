"""The token classification (NER) model: its head's variables and math, its loss, and
its Hugging Face counterpart `AlbertForTokenClassification`."""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open

from albert_tf import AlbertTokenClassifier, losses, names
from albert_tf.checkpoints import huggingface
from albert_tf.convert import convert
from albert_tf.modeling import tf1_variables
from tests.helpers.tiny import random_inputs, tiny_config


@pytest.fixture(scope="module")
def model():
    return AlbertTokenClassifier(tiny_config(vocab_size=50), num_labels=5, seed=3)


def test_variables_and_math(model):
    names_and_shapes = {w.path: tuple(w.shape) for w in model.weights}
    head = tf1_variables.token_classification_variables(model.config, 5)
    assert {n: s for n, s in names_and_shapes.items() if not n.startswith("bert/")} == head
    inputs = random_inputs(model.config, batch=2, length=7, seed=0, min_length=3)
    outputs = model(inputs)
    sequence = model.encoder(inputs)["sequence_output"].numpy()
    expected = sequence @ model.output_weights.numpy().T + model.output_bias.numpy()
    np.testing.assert_allclose(outputs[names.LOGITS], expected, atol=1e-5)
    assert outputs[names.PREDICTIONS].shape == (2, 7)
    np.testing.assert_array_equal(outputs[names.PREDICTIONS], expected.argmax(-1))
    # Dropout only in training.
    trained = model(inputs, training=True)[names.LOGITS]
    assert not np.allclose(trained, outputs[names.LOGITS])


def test_loss_counts_labelled_positions_only():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 4, 3)).astype(np.float32)
    labels = np.array([[-1, 2, 0, -1], [-1, 1, -1, -1]], np.int32)
    log_probs = tf.nn.log_softmax(logits).numpy()
    terms = [-log_probs[0, 1, 2], -log_probs[0, 2, 0], -log_probs[1, 1, 1]]
    assert float(losses.token_classification_loss(logits, labels)) == pytest.approx(
        sum(terms) / 3, rel=1e-6)
    per_example = losses.token_classification_loss(logits, labels, per_example=True)
    np.testing.assert_allclose(per_example, [(terms[0] + terms[1]) / 2, terms[2]], rtol=1e-6)
    none = losses.token_classification_loss(logits, np.full((2, 4), -1, np.int32))
    assert float(none) == 0.0


def test_hugging_face_counterpart_round_trip(tmp_path, model):
    tags = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    huggingface.save_hf_checkpoint(model, tmp_path / "hf", labels=tags)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForTokenClassification"]
    assert config["id2label"] == dict(zip("01234", tags))
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), framework="np") as f:
        keys = set(f.keys())
        assert f.get_slice("classifier.weight").get_shape() == [5, 16]
    assert "albert.pooler.weight" not in keys  # transformers' token classifier has none
    again = AlbertTokenClassifier.from_release(tmp_path / "hf", num_labels=5)
    inputs = random_inputs(model.config, batch=2, length=6, seed=1)
    np.testing.assert_array_equal(again(inputs)[names.LOGITS], model(inputs)[names.LOGITS])
    convert(tmp_path / "hf", tmp_path / "google", to="google")
    names_there = dict(tf.train.list_variables(str(tmp_path / "google" / "model.ckpt")))
    assert names_there["cls/ner/output_weights"] == [5, 16]
