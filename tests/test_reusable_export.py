"""TF Hub's way (`albert_tf.export.reusable`): an encoder export is a Reusable SavedModel
that `hub.KerasLayer(path, trainable=True)` fine-tunes in a Keras model, an mlm export
too; the preprocessor SavedModel tokenizes as our tokenizer and packs as
`albert_tf.packing`, in English (SentencePiece, GLUE texts) and Chinese (WordPiece)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub  # a test extra, as tf_keras
import tensorflow_text  # noqa: F401  (the preprocessor's ops)
import tf_keras

from albert_tf import names, packing
from albert_tf.data.glue import GlueProcessor
from albert_tf.export import ExportError, build_model, export_preprocessor, export_savedmodel
from albert_tf.tokenization import FullTokenizer
from tests.helpers.paths import FIXTURES, SHARED_DATA, SPM_MODEL
from tests.helpers.scripts import run_script
from tests.helpers.tiny import random_inputs, tiny_config, write_tiny_config
from tests.test_export import assert_refused

VOCAB_ZH = FIXTURES / "ner" / "vocab_chinese.txt"
SEQ_LENGTH = 24
HUB_OUTPUTS = {"pooled_output", "sequence_output", "encoder_outputs", "default"}


@pytest.fixture(scope="module")
def config():
    # Dropout on, to see `training` reach it.
    return tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def exports(config, tmp_path_factory):
    root = tmp_path_factory.mktemp("reusable")
    encoder = build_model("encoder", config, seed=3)
    pretrainer = build_model("mlm", config, seed=4)
    # (No tokenizer, so no serve_text: test_export serves text; this saves time.)
    paths = {
        "encoder": export_savedmodel(encoder, root / "encoder", kind="encoder",
                                     max_seq_length=32),
        "mlm": export_savedmodel(pretrainer, root / "mlm", kind="mlm", max_seq_length=32),
        "preprocessor": export_preprocessor(
            root / "preprocessor", spm_model_file=SPM_MODEL, seq_length=SEQ_LENGTH,
            max_seq_length=config.max_position_embeddings),
    }
    return {"encoder": encoder, "mlm": pretrainer, "paths": paths}


@pytest.fixture(scope="module")
def loaded(exports):
    return {name: tf.saved_model.load(path) for name, path in exports["paths"].items()}


def _inputs(config):
    return {k: tf.constant(v) for k, v in
            random_inputs(config, batch=3, length=9, seed=5, min_length=3).items()}


def _names(variables):
    """The TensorFlow names (Keras variables: of the tf.Variable they hold)."""
    return sorted((v.value if isinstance(v, keras.Variable) else v).name for v in variables)


def test_call_is_the_encoder_and_its_variables_are_listed(config, exports, loaded):
    model, hub_encoder = exports["encoder"], loaded["encoder"]
    inputs = _inputs(config)
    expected = model(inputs, training=False)
    for outputs in (hub_encoder(inputs), hub_encoder(inputs, training=False)):
        assert set(outputs) == HUB_OUTPUTS
        np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"],
                                   atol=1e-6)
        np.testing.assert_allclose(outputs["sequence_output"],
                                   expected["sequence_output"], atol=1e-6)
        assert len(outputs["encoder_outputs"]) == config.num_hidden_layers
        np.testing.assert_array_equal(outputs["encoder_outputs"][-1],
                                      outputs["sequence_output"])
        np.testing.assert_array_equal(outputs["default"], outputs["pooled_output"])
    # The serving signatures are still there, computing the same.
    served = hub_encoder.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(served["pooled_output"], expected["pooled_output"],
                               atol=1e-5)
    assert _names(hub_encoder.variables) == _names(model.variables)
    assert _names(hub_encoder.trainable_variables) == _names(model.trainable_variables)
    assert list(hub_encoder.regularization_losses) == []


def test_dropout_is_on_only_with_training(config, loaded):
    hub_encoder, inputs = loaded["encoder"], _inputs(config)
    first, second = (hub_encoder(inputs, training=True)["pooled_output"] for _ in range(2))
    inference = hub_encoder(inputs, training=False)["pooled_output"]
    assert not np.allclose(first, second) and not np.allclose(first, inference)
    np.testing.assert_array_equal(inference,
                                  hub_encoder(inputs, training=False)["pooled_output"])


def test_mlm_export_is_reusable_with_its_heads(config, exports, loaded):
    model, hub_mlm = exports["mlm"], loaded["mlm"]
    inputs = {k: tf.constant(v) for k, v in random_inputs(
        config, batch=2, length=9, seed=6, masked_lm_predictions=3).items()}
    expected = model(inputs, training=False)
    outputs = hub_mlm.mlm(inputs)
    assert set(outputs) == HUB_OUTPUTS | {"mlm_logits", "sop_logits"}
    for name in ("mlm_logits", "sop_logits", "pooled_output"):
        np.testing.assert_allclose(outputs[name], expected[name], atol=1e-5)
    encoder_only = {k: v for k, v in inputs.items() if k != names.MASKED_LM_POSITIONS}
    np.testing.assert_allclose(hub_mlm(encoder_only)["sequence_output"],
                               expected["sequence_output"], atol=1e-6)
    # The root is the encoder's (its heads would get no gradient); mlm holds them all.
    assert _names(hub_mlm.trainable_variables) == \
        _names(model.encoder.trainable_variables)
    assert _names(hub_mlm.mlm.trainable_variables) == _names(model.trainable_variables)
    # hub.KerasLayer fine-tunes it too: gradients reach the encoder and both heads.
    layer = hub.KerasLayer(hub_mlm.mlm, trainable=True)
    with tf.GradientTape() as tape:
        outputs = layer(inputs, training=True)
        loss = tf.reduce_sum(outputs["mlm_logits"]) + tf.reduce_sum(outputs["sop_logits"])
    gradients = tape.gradient(loss, layer.trainable_weights)
    assert len(gradients) == len(model.trainable_variables)
    assert [w.name for w, g in zip(layer.trainable_weights, gradients) if g is None] == []


def test_hub_keras_layer_fine_tunes_every_encoder_variable(exports, tmp_path):
    """TF Hub's pattern for text pairs: tokenize, bert_pack_inputs with a seq_length
    argument, the encoder trainable, a head on `pooled_output`; fit, save, reload."""
    paths = exports["paths"]
    examples = [e for split in ("train", "dev")
                for e in GlueProcessor("mrpc").get_examples(FIXTURES / "glue", split)]
    first = tf.constant([e.text_a for e in examples])
    second = tf.constant([e.text_b for e in examples])
    labels = tf.constant([int(e.label) for e in examples])

    preprocessor = tf.saved_model.load(paths["preprocessor"])
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments={"seq_length": 20})
    encoder = hub.KerasLayer(paths["encoder"], trainable=True)
    text_a = tf_keras.layers.Input(shape=(), dtype=tf.string)
    text_b = tf_keras.layers.Input(shape=(), dtype=tf.string)
    pooled = encoder(pack([tokenize(text_a), tokenize(text_b)]))["pooled_output"]
    head = tf_keras.layers.Dense(2, kernel_initializer=tf_keras.initializers.GlorotUniform(0))
    model = tf_keras.Model([text_a, text_b], head(pooled))
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(encoder.trainable_weights) == len(exports["encoder"].trainable_variables)
    with tf.GradientTape() as tape:
        loss = model.compiled_loss(labels, model([first, second], training=True))
    gradients = tape.gradient(loss, encoder.trainable_weights)
    assert all(g is not None for g in gradients)
    before = [w.numpy().copy() for w in encoder.trainable_weights]

    # The loss without dropout (the encoder's is 0.1), before and after 30 steps (8 left
    # it 0.009 lower in one CI run, within dropout's noise; 30: 0.693 -> 0.583).
    loss_before = model.evaluate([first, second], labels, verbose=0)
    model.fit([first, second], labels, epochs=30, batch_size=len(examples), verbose=0)
    loss_after = model.evaluate([first, second], labels, verbose=0)
    assert loss_after < loss_before - 0.01, (loss_before, loss_after)
    unchanged = [w.name for w, old in zip(encoder.trainable_weights, before)
                 if np.array_equal(w.numpy(), old)]
    assert not unchanged
    model.save(tmp_path / "fine_tuned")
    reloaded = tf_keras.models.load_model(tmp_path / "fine_tuned",
                                          custom_objects={"KerasLayer": hub.KerasLayer})
    np.testing.assert_allclose(reloaded.predict([first, second], verbose=0),
                               model.predict([first, second], verbose=0), atol=1e-5)


# ------------------------------------------------------------------ the preprocessor
def _glue_rows(glue_root, splits=("train", "dev")):
    """(text_a, text_b or None) of CoLA, MRPC, RTE and SST-2 under `glue_root`."""
    return [(e.text_a, e.text_b) for task in ("cola", "mrpc", "rte", "sst-2")
            for split in splits for e in GlueProcessor(task).get_examples(glue_root, split)]


def _assert_packs_as_packing(preprocessor, tokenizer, rows, seq_length=SEQ_LENGTH):
    """tokenize = FullTokenizer.encode; bert_pack_inputs([a, b]) and __call__(a) =
    `packing.pack` at seq_length."""
    a = [row[0] for row in rows]
    ids_a = preprocessor.tokenize(tf.constant(a))
    assert ids_a.to_list() == [tokenizer.encode(text) for text in a]
    special = {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()}
    ids = dict(cls_id=special["start_of_sequence_id"],
               sep_id=special["end_of_segment_id"], pad_id=special["padding_id"])
    pairs = [row for row in rows if row[1] is not None]
    if pairs:
        packed = preprocessor.bert_pack_inputs(
            [preprocessor.tokenize(tf.constant([r[0] for r in pairs])),
             preprocessor.tokenize(tf.constant([r[1] for r in pairs]))],
            seq_length=seq_length)
        for i, (x, y) in enumerate(pairs):
            expected = packing.pack([tokenizer.encode(x), tokenizer.encode(y)], seq_length,
                                    **ids)
            for name, value in expected.items():
                np.testing.assert_array_equal(packed[name][i], value, err_msg=f"{x!r}")
    packed = preprocessor(tf.constant(a))
    for i, text in enumerate(a):
        for name, value in packing.pack([tokenizer.encode(text)], SEQ_LENGTH,
                                        **ids).items():
            np.testing.assert_array_equal(packed[name][i], value)


def test_preprocessor_packs_glue_texts_as_packing(loaded):
    rows = _glue_rows(FIXTURES / "glue")
    rows += [("", ""), ("", None), (" ".join(["a long sentence"] * 20), "Short.")]
    tokenizer = FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)
    _assert_packs_as_packing(loaded["preprocessor"], tokenizer, rows)


@pytest.mark.skipif(not (SHARED_DATA / "glue").exists(), reason="shared GLUE data absent")
def test_preprocessor_packs_the_shared_glue_dev_texts_as_packing(loaded):
    rows = _glue_rows(SHARED_DATA / "glue", splits=("dev",))
    tokenizer = FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)
    _assert_packs_as_packing(loaded["preprocessor"], tokenizer, rows, seq_length=64)


def test_empty_strings_pack_as_cls_sep(loaded):
    packed = loaded["preprocessor"](tf.constant(["", "  "]))
    special = loaded["preprocessor"].tokenize.get_special_tokens_dict()
    row = [int(special["start_of_sequence_id"]), int(special["end_of_segment_id"])]
    for i in range(2):
        assert packed["input_word_ids"][i, :2].numpy().tolist() == row
        assert packed["input_mask"][i].numpy().sum() == 2
    assert packed["input_word_ids"].shape == (2, SEQ_LENGTH)


def test_preprocessor_refuses_what_it_cannot_pack(loaded, config, tmp_path):
    preprocessor = loaded["preprocessor"]
    ids = preprocessor.tokenize(tf.constant(["one", "two"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="at most 2 segments"):
        preprocessor.bert_pack_inputs([ids, ids, ids])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"at most {config.max_position_embeddings}"):
        preprocessor.bert_pack_inputs([ids], seq_length=config.max_position_embeddings + 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="leave room"):
        preprocessor.bert_pack_inputs([ids, ids], seq_length=2)
    # Arguments are checked before anything is written.
    target = tmp_path / "refused"
    for kwargs, message in (
            ({"spm_model_file": SPM_MODEL, "vocab_file": VOCAB_ZH}, "one"),
            ({"spm_model_file": SPM_MODEL, "seq_length": 600}, "exceeds max_seq_length"),
            ({"vocab_file": VOCAB_ZH, "seq_length": 2}, "seq_length must be")):
        with pytest.raises(ExportError, match=message):
            export_preprocessor(target, **kwargs)
        assert not target.exists()


def test_script_writes_a_chinese_preprocessor_that_packs_cluener_texts(tmp_path):
    """`export_savedmodel.py --kind=preprocessor` with albert_zh's kind of vocab.txt
    (the README runs --export_preprocessor beside an encoder)."""
    config_file = write_tiny_config(tmp_path)
    run_script("export_savedmodel.py", "--kind=preprocessor", f"--vocab_file={VOCAB_ZH}",
               f"--max_seq_length={SEQ_LENGTH}", f"--albert_config_file={config_file}",
               f"--export_dir={tmp_path / 'zh'}")
    version = tmp_path / "zh" / "1"
    info = json.loads((version / "assets.extra" / "export_info.json").read_text())
    assert (info["kind"], info["tokenizer"], info["seq_length"], info["max_seq_length"]) \
        == ("preprocessor", "wordpiece", SEQ_LENGTH, tiny_config().max_position_embeddings)
    with open(FIXTURES / "ner" / "cluener_dev.json", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:60]
    rows = [(texts[i], texts[i + 1]) for i in range(0, len(texts) - 1, 2)]
    rows += [("ALBERT 中文模型，全角ＡＢＣ和 English mixed。", None), ("", "")]
    tokenizer = FullTokenizer(vocab_file=str(VOCAB_ZH), do_lower_case=True)
    _assert_packs_as_packing(tf.saved_model.load(str(version)), tokenizer, rows)
    result = run_script("export_savedmodel.py", "--kind=preprocessor",
                        f"--checkpoint={tmp_path / 'model.ckpt'}", f"--vocab_file={VOCAB_ZH}",
                        f"--export_dir={tmp_path / 'refused'}", check=False)
    assert result.returncode != 0 and "no --checkpoint" in result.stderr
    assert not (tmp_path / "refused").exists()


def test_script_refuses_a_preprocessor_length_beyond_the_model(tmp_path):
    """--max_seq_length given beyond the config's max_position_embeddings stops the
    preprocessor's export (--kind=preprocessor, or --export_preprocessor beside a model)
    with one line naming the flag, the value, the limit and its config file, before any
    work, as the model's exports stop; without a config the limit is 512. (Left at its
    default, it is cut to the model: test_export.py's test_script_exports_a_checkpoint.)"""
    from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR

    config_file = write_tiny_config(tmp_path)
    longest = tiny_config().max_position_embeddings
    too_long = f"--max_seq_length={longest + 1}"
    beyond = f"{too_long} is longer than the model's max_position_embeddings ({longest})"
    assert_refused(run_script("export_savedmodel.py", "--kind=preprocessor", too_long,
                              f"--spm_model_file={SPM_MODEL}",
                              f"--albert_config_file={config_file}",
                              f"--export_dir={tmp_path / 'preprocess'}", check=False),
                   f"{beyond} in {config_file}")
    assert_refused(run_script("export_savedmodel.py", "--kind=preprocessor",
                              "--max_seq_length=513", f"--vocab_file={VOCAB_ZH}",
                              f"--export_dir={tmp_path / 'preprocess'}", check=False),
                   "--max_seq_length=513 is longer than 512, the longest the preprocessor "
                   "packs without --albert_config_file (give the model's config: its "
                   "max_position_embeddings)")
    fixture_config = FIXTURE_DIR / "albert_config.json"
    fixture_longest = json.loads(fixture_config.read_text())["max_position_embeddings"]
    assert_refused(run_script("export_savedmodel.py", "--kind=encoder",
                              f"--max_seq_length={fixture_longest + 1}",
                              f"--albert_config_file={fixture_config}",
                              f"--checkpoint={FIXTURE_CHECKPOINT}",
                              f"--spm_model_file={SPM_MODEL}",
                              f"--export_preprocessor={tmp_path / 'preprocess'}",
                              check=False),
                   f"--max_seq_length={fixture_longest + 1} is longer than the model's "
                   f"max_position_embeddings ({fixture_longest}) in {fixture_config}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["albert_config.json"]
