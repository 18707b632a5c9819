"""The Keras model against the outputs of the ORIGINAL TF1 code, and its behaviour."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, model_inputs

from albert_tf import AlbertEncoder, AlbertPretrainer, load_tf1_checkpoint
from albert_tf.losses import masked_lm_loss, pretraining_loss, sentence_order_loss
from albert_tf.modeling import tf1_variables
from tests.helpers import tiny

ATOL = 1e-5
# This file's own models (beside the original's checkpoint): a 50-piece vocabulary.
VOCAB = 50
small_config = functools.partial(tiny.tiny_config, vocab_size=VOCAB, max_position_embeddings=16)


@pytest.fixture(scope="module")
def pretrainer(tiny_config):
    model = AlbertPretrainer(tiny_config)
    load_tf1_checkpoint(model, FIXTURE_CHECKPOINT, strict=True)
    return model


@pytest.fixture(scope="module")
def outputs(pretrainer, fixture_inputs):
    return pretrainer(model_inputs(fixture_inputs), training=False)


def test_embedding_output_matches_original(outputs, fixture_outputs):
    assert outputs["embedding_output"].shape == (3, 20, 16)
    np.testing.assert_allclose(outputs["embedding_output"],
                               fixture_outputs["embedding_output"], atol=ATOL, rtol=0)


def test_every_inner_block_output_matches_original(outputs, fixture_outputs):
    expected = fixture_outputs["all_encoder_layers"]
    assert len(outputs["encoder_outputs"]) == len(expected) == 12  # 6 layers x 2 inner
    for index, (ours, theirs) in enumerate(zip(outputs["encoder_outputs"], expected)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0,
                                   err_msg=f"encoder_outputs[{index}]")


def test_sequence_and_pooled_output_match_original(outputs, fixture_outputs):
    np.testing.assert_allclose(outputs["sequence_output"], fixture_outputs["sequence_output"],
                               atol=ATOL, rtol=0)
    np.testing.assert_allclose(outputs["pooled_output"], fixture_outputs["pooled_output"],
                               atol=ATOL, rtol=0)


def test_head_log_probabilities_match_original(outputs, fixture_outputs, tiny_config):
    assert outputs["mlm_logits"].shape == (3, 5, tiny_config.vocab_size)
    mlm = tf.nn.log_softmax(outputs["mlm_logits"]).numpy().reshape(-1, tiny_config.vocab_size)
    np.testing.assert_allclose(mlm, fixture_outputs["mlm_log_probs"], atol=ATOL, rtol=0)
    sop = tf.nn.log_softmax(outputs["sop_logits"]).numpy()
    np.testing.assert_allclose(sop, fixture_outputs["sop_log_probs"], atol=ATOL, rtol=0)


def test_losses_match_original(outputs, fixture_inputs, fixture_outputs):
    total, mlm, sop = pretraining_loss(outputs, fixture_inputs)
    np.testing.assert_allclose(mlm, fixture_outputs["mlm_loss"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(sop, fixture_outputs["sop_loss"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(total, fixture_outputs["total_loss"], atol=ATOL, rtol=0)


def test_mlm_loss_ignores_padded_predictions(outputs, fixture_inputs):
    ids, weights = fixture_inputs["masked_lm_ids"], fixture_inputs["masked_lm_weights"]
    changed = np.where(weights > 0, ids, (ids + 7) % 211)
    assert float(masked_lm_loss(outputs["mlm_logits"], changed, weights)) == pytest.approx(
        float(masked_lm_loss(outputs["mlm_logits"], ids, weights)))
    # ... and labels shaped [B] or [B, 1] give the same SOP loss.
    labels = fixture_inputs["next_sentence_labels"]
    assert float(sentence_order_loss(outputs["sop_logits"], labels[:, 0])) == pytest.approx(
        float(sentence_order_loss(outputs["sop_logits"], labels)))


def test_padding_does_not_change_real_positions(pretrainer, fixture_inputs, outputs):
    # Ten more padding columns: the attention mask must hide them completely.
    padded = {k: np.pad(v, [(0, 0), (0, 10)]) if k != "masked_lm_positions" else v
              for k, v in model_inputs(fixture_inputs).items()}
    longer = pretrainer(padded, training=False)
    mask = fixture_inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(longer["sequence_output"].numpy()[:, :20][mask],
                               outputs["sequence_output"].numpy()[mask], atol=ATOL, rtol=0)
    np.testing.assert_allclose(longer["pooled_output"], outputs["pooled_output"], atol=ATOL)


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_real_tokens_only_gives_the_originals_numbers_at_real_positions(
        pretrainer, fixture_inputs, fixture_outputs, traced):
    from albert_tf.modeling import real_tokens_only

    mask = fixture_inputs["input_mask"].astype(bool)
    assert 0 < mask.sum() < mask.size  # the fixture's rows end in padding
    call = lambda x: pretrainer(x, training=False)  # noqa: E731
    call = tf.function(call) if traced else call
    with real_tokens_only():
        out = call({k: tf.constant(v) for k, v in model_inputs(fixture_inputs).items()})
    expected = zip(out["encoder_outputs"], fixture_outputs["all_encoder_layers"])
    for index, (ours, theirs) in enumerate(expected):
        np.testing.assert_allclose(ours.numpy()[mask], theirs[mask], atol=ATOL, rtol=0,
                                   err_msg=f"encoder_outputs[{index}]")
    np.testing.assert_allclose(out["embedding_output"].numpy()[mask],
                               fixture_outputs["embedding_output"][mask], atol=ATOL)
    assert not out["sequence_output"].numpy()[~mask].any()  # nothing computed there
    np.testing.assert_allclose(out["pooled_output"], fixture_outputs["pooled_output"],
                               atol=ATOL, rtol=0)
    mlm = tf.nn.log_softmax(out["mlm_logits"]).numpy().reshape(len(
        fixture_outputs["mlm_log_probs"]), -1)
    np.testing.assert_allclose(mlm, fixture_outputs["mlm_log_probs"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(tf.nn.log_softmax(out["sop_logits"]),
                               fixture_outputs["sop_log_probs"], atol=ATOL, rtol=0)


def test_real_tokens_only_for_any_mask_first_token_heads_and_training():
    from albert_tf import AlbertClassifier
    from albert_tf.modeling import real_tokens_only

    model = AlbertClassifier(small_config(), num_labels=3, seed=0)
    inputs = tiny.random_inputs(VOCAB, batch=4, length=8, lengths=[8, 1, 5, 0],
                                second_segment_from=2)
    inputs["input_mask"][0, 3:5] = 0  # a hole: each position is masked on its own
    padded = model(inputs, training=False)
    with real_tokens_only():  # the classifier reads position 0 alone in its last block
        real = model(inputs, training=False)
        empty = model({k: v[:0] for k, v in inputs.items()}, training=False)
        trained = model(inputs, training=True)  # training computes every position
    kept = [0, 1, 2]  # (row 3 has no real token: its position 0 differs)
    np.testing.assert_allclose(real["logits"].numpy()[kept], padded["logits"].numpy()[kept],
                               atol=ATOL, rtol=0)
    assert empty["logits"].shape == (0, 3)
    assert trained["logits"].shape == (4, 3)
    encoder = model.encoder
    with real_tokens_only():
        sequence = encoder(inputs, training=True)["sequence_output"].numpy()
    assert sequence[~inputs["input_mask"].astype(bool)].any()


def test_encoder_alone_gives_the_same_numbers(tiny_config, fixture_inputs, fixture_outputs):
    encoder = AlbertEncoder(tiny_config)
    report = load_tf1_checkpoint(encoder, FIXTURE_CHECKPOINT, strict=True)
    heads = {**tf1_variables.masked_lm_variables(tiny_config),
             **tf1_variables.sentence_order_variables(tiny_config)}
    assert sorted(report.unused) == sorted(heads)  # the pretraining heads, 7 variables
    out = encoder(model_inputs(fixture_inputs, with_positions=False))
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs",
                        "embedding_output"}
    np.testing.assert_allclose(out["sequence_output"], fixture_outputs["sequence_output"],
                               atol=ATOL, rtol=0)


def test_xla_compiled_call_matches(pretrainer, fixture_inputs, outputs):
    compiled = tf.function(lambda x: pretrainer(x, training=False), jit_compile=True)
    result = compiled({k: tf.constant(v) for k, v in model_inputs(fixture_inputs).items()})
    np.testing.assert_allclose(result["sequence_output"], outputs["sequence_output"],
                               atol=ATOL, rtol=0)


def test_default_mask_and_type_ids_are_ones_and_zeros(pretrainer, fixture_inputs):
    ids = fixture_inputs["input_ids"][:1]
    explicit = pretrainer.encoder({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                                   "input_type_ids": np.zeros_like(ids)})
    implicit = pretrainer.encoder({"input_word_ids": ids.astype(np.int64)})
    np.testing.assert_allclose(implicit["sequence_output"], explicit["sequence_output"])


def test_dropout_only_in_training():
    model = AlbertEncoder(small_config(hidden_dropout_prob=0.3,
                                       attention_probs_dropout_prob=0.3), seed=3)
    inputs = tiny.random_inputs(VOCAB)
    first = model(inputs, training=False)["sequence_output"].numpy()
    np.testing.assert_array_equal(first, model(inputs)["sequence_output"].numpy())
    trained = model(inputs, training=True)["sequence_output"].numpy()
    assert np.abs(trained - first).max() > 1e-3


def test_dropout_masks_inside_random_draws_are_a_function_of_its_seed():
    """What makes a resumed run exact (the training loop's seed per step and replica):
    the same seed, the same masks, whatever was drawn before; another seed, other masks;
    every call of the shared layer its own mask; outside, Keras' generator moves on."""
    from albert_tf.modeling.common import random_draws

    model = AlbertEncoder(small_config(hidden_dropout_prob=0.3,
                                       attention_probs_dropout_prob=0.3), seed=3)
    inputs = tiny.random_inputs(VOCAB)

    def trained(seed=None):
        if seed is None:
            return model(inputs, training=True)["sequence_output"].numpy()
        with random_draws(tf.constant(seed)):
            return model(inputs, training=True)["sequence_output"].numpy()

    first = trained([1, 2])
    assert np.abs(first - model(inputs)["sequence_output"].numpy()).max() > 1e-3
    trained()  # the generator's draws do not shift the seeded ones
    np.testing.assert_array_equal(trained([1, 2]), first)
    assert np.abs(trained([1, 3]) - first).max() > 1e-3
    assert np.abs(trained() - trained()).max() > 1e-3
    # Every mask of a forward pass has a seed of its own: each call of the shared layer
    # too (2 layers, 3 dropouts each, plus the embeddings'), and so has the frame each
    # layer and each of its blocks draws in (what a recomputed unit replays from).
    from albert_tf.modeling import common

    seeds = []
    original = common._next_draw_seed

    def record(layer_seed):
        seed = original(layer_seed)
        seeds.append(tuple(seed.numpy()))
        return seed

    common._next_draw_seed = record
    try:
        trained([1, 2])
    finally:
        common._next_draw_seed = original
    assert len(seeds) == len(set(seeds)) == 1 + 2 * 3 + 2 * 2


def test_seed_fixes_initial_weights():
    a, b = AlbertEncoder(small_config(), seed=7), AlbertEncoder(small_config(), seed=7)
    c = AlbertEncoder(small_config(), seed=8)
    for wa, wb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    kernel = "bert/pooler/dense/kernel"
    weights = {m: {w.path: w.numpy() for w in m.weights} for m in (a, c)}
    assert not np.allclose(weights[a][kernel], weights[c][kernel])
    # Different variables get different draws.
    assert not np.allclose(weights[a]["bert/encoder/transformer/group_0/inner_group_0/"
                                      "attention_1/self/query/kernel"],
                           weights[a]["bert/encoder/transformer/group_0/inner_group_0/"
                                      "attention_1/self/key/kernel"])


def test_initializer_is_truncated_normal_with_initializer_range():
    model = AlbertEncoder(small_config(vocab_size=2000, initializer_range=0.05), seed=1)
    table = model.word_embeddings.numpy()
    assert np.abs(table).max() <= 2 * 0.05 + 1e-7
    assert 0.03 < table.std() < 0.05  # a normal truncated at 2 sigma has std 0.88 sigma


def test_sequence_longer_than_positions_is_refused():
    model = AlbertEncoder(small_config(max_position_embeddings=4))
    with pytest.raises(ValueError, match="sequence length 6 .* max_position_embeddings \\(4\\)"):
        model(tiny.random_inputs(VOCAB, length=6))


def test_missing_inputs_are_named():
    model = AlbertEncoder(small_config())
    with pytest.raises(KeyError, match="'input_word_ids'.*'segment_ids' is 'input_type_ids'"):
        model({"input_ids": np.ones((1, 3), np.int32)})
    with pytest.raises(TypeError, match="dict of int32 tensors"):
        model(np.ones((1, 3), np.int32))
    pretrainer = AlbertPretrainer(small_config())
    with pytest.raises(KeyError, match="masked_lm_positions"):
        pretrainer(tiny.random_inputs(VOCAB))


def test_functional_wrapping_keeps_tf1_names_and_trains():
    config = small_config()
    encoder = AlbertEncoder(config, seed=0)
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = keras.layers.Dense(2, name="classifier")(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    assert any(w.path == "bert/embeddings/word_embeddings" for w in model.weights)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = tiny.random_inputs(VOCAB, batch=8, seed=1)
    y = (x["input_word_ids"][:, 0] % 2).astype(np.int32)
    history = model.fit(x, y, epochs=15, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_model_config_round_trip():
    model = AlbertPretrainer(small_config(inner_group_num=2), seed=5)
    clone = AlbertPretrainer.from_config(model.get_config())
    assert clone.config == model.config
    for a, b in zip(model.weights, clone.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_mixed_precision_runs_in_bfloat16_with_float32_weights():
    model = AlbertPretrainer(small_config(), seed=0, dtype="mixed_bfloat16")
    inputs = dict(tiny.random_inputs(VOCAB),
                  masked_lm_positions=np.array([[1, 2], [3, 4]], np.int32))
    out = model(inputs)
    assert out["sequence_output"].dtype == tf.bfloat16
    assert all(w.dtype == "float32" for w in model.weights)
    reference = AlbertPretrainer(small_config(), seed=0)(inputs)
    np.testing.assert_allclose(tf.cast(out["mlm_logits"], tf.float32),
                               reference["mlm_logits"], atol=0.1)
