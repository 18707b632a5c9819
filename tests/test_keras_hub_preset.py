"""keras-hub ALBERT presets both ways: what keras-hub loads from ours computes the
original's numbers, what keras-hub writes reads back as it computes, its tokenizer gives
our ids, and what it cannot hold is refused by name. keras-hub is a test extra (pure
Python); albert_tf never imports it."""

import json
import re
import shutil

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")
import keras  # noqa: E402

from albert_tf import (  # noqa: E402
    AlbertClassifier,
    AlbertEncoder,
    AlbertSquadV2,
    CheckpointError,
    names,
)
from albert_tf.checkpoints.keras_hub_preset import (  # noqa: E402
    VOCABULARY_SPM,
    WEIGHTS,
    save_keras_hub_preset,
)
from albert_tf.config import ConfigError  # noqa: E402
from albert_tf.convert import convert  # noqa: E402
from albert_tf.tokenization import resplit_piece  # noqa: E402
from tests.conftest import FIXTURE_DIR  # noqa: E402
from tests.helpers.layouts import model_inputs  # noqa: E402
from tests.helpers.paths import REAL_TEXT, SHARED_DATA, SPM_MODEL, shared_sample  # noqa: E402
from tests.helpers.tiny import tiny_config  # noqa: E402


def theirs(inputs):
    """Our model inputs as keras-hub's backbone names them."""
    return {"token_ids": inputs[names.INPUT_WORD_IDS],
            "segment_ids": inputs[names.INPUT_TYPE_IDS],
            "padding_mask": inputs[names.INPUT_MASK]}


def assert_same_encoding(ours_out, theirs_out, mask, atol=1e-5):
    mask = np.asarray(mask).astype(bool)
    np.testing.assert_allclose(np.asarray(theirs_out["sequence_output"])[mask],
                               np.asarray(ours_out[names.SEQUENCE_OUTPUT])[mask], atol=atol)
    np.testing.assert_allclose(np.asarray(theirs_out["pooled_output"]),
                               np.asarray(ours_out[names.POOLED_OUTPUT]), atol=atol)


def test_google_release_as_a_keras_hub_preset_computes_the_originals_numbers(
        tmp_path, fixture_inputs, fixture_outputs):
    # The original's checkpoint (6 layers, 2 groups of 2 inner blocks, E 16 != H 32),
    # its pretraining heads left out: keras-hub's backbone gives the original's outputs.
    convert(FIXTURE_DIR, tmp_path / "preset", to="keras_hub", kind="encoder")
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "preset"))
    inputs = model_inputs(fixture_inputs)
    assert_same_encoding(fixture_outputs, backbone(theirs(inputs)), inputs[names.INPUT_MASK])
    # Read back, the weights are the checkpoint's, bit for bit.
    again = AlbertEncoder.from_release(tmp_path / "preset")
    original = AlbertEncoder.from_release(FIXTURE_DIR)
    assert again.load_report.layout == "keras_hub" and not again.load_report.unused
    for mine, read in zip(original.weights, again.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), read.numpy(), err_msg=mine.path)
    # A pretrainer's heads have no keras-hub counterpart that computes as the original:
    # its preset is the backbone's, said in the log.
    convert(FIXTURE_DIR, tmp_path / "pretrainer", to="keras_hub")
    assert sorted(p.name for p in (tmp_path / "pretrainer").iterdir()) == [
        "assets", "config.json", "metadata.json", WEIGHTS]


def test_a_preset_keras_hub_wrote_reads_as_it_computes(tmp_path):
    keras.utils.set_random_seed(3)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=120, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16,
        intermediate_dim=32, num_groups=2, num_inner_repetitions=2, max_sequence_length=32,
        num_segments=3)
    backbone.save_to_preset(str(tmp_path / "theirs"))
    encoder = AlbertEncoder.from_release(tmp_path / "theirs")
    assert (encoder.config.num_hidden_groups, encoder.config.inner_group_num,
            encoder.config.type_vocab_size) == (2, 2, 3)
    rng = np.random.default_rng(0)
    inputs = {names.INPUT_WORD_IDS: rng.integers(0, 120, (2, 9)).astype(np.int32),
              names.INPUT_MASK: np.array([[1] * 9, [1] * 6 + [0] * 3], np.int32),
              names.INPUT_TYPE_IDS: rng.integers(0, 3, (2, 9)).astype(np.int32)}
    assert_same_encoding(encoder(inputs), backbone(theirs(inputs)), inputs[names.INPUT_MASK])
    # E = H: the original has no projection, keras-hub always one. Ours is written as
    # the identity (keras-hub computes our numbers); a trained one cannot be read.
    model = AlbertEncoder(tiny_config(vocab_size=120, embedding_size=16), seed=1)
    save_keras_hub_preset(model, tmp_path / "square")
    square = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "square"))
    assert_same_encoding(model(inputs | {names.INPUT_TYPE_IDS: inputs[names.INPUT_TYPE_IDS] % 2}),
                         square(theirs(inputs | {
                             names.INPUT_TYPE_IDS: inputs[names.INPUT_TYPE_IDS] % 2})),
                         inputs[names.INPUT_MASK])
    keras.utils.set_random_seed(4)
    keras_hub.models.AlbertBackbone(
        vocabulary_size=120, num_layers=2, num_heads=2, embedding_dim=16, hidden_dim=16,
        intermediate_dim=32).save_to_preset(str(tmp_path / "projected"))
    with pytest.raises(CheckpointError, match="embedding_projection is not the identity"):
        AlbertEncoder.from_release(tmp_path / "projected")


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    model = AlbertClassifier(tiny_config(num_hidden_layers=4, num_hidden_groups=2), 3,
                             seed=7)
    # A trained head is not near zero: move it, so that a transposed kernel shows.
    for weight in model.weights:
        if weight.path in ("output_weights", "output_bias"):
            weight.assign(np.random.default_rng(1).normal(0, 1, weight.shape))
    directory = tmp_path_factory.mktemp("khp") / "classifier"
    convert_input = directory.parent / "tf1"
    from albert_tf.checkpoints import save_tf1_checkpoint

    convert_input.mkdir()
    model.config.to_json_file(convert_input / "albert_config.json")
    save_tf1_checkpoint(model, str(convert_input / "model.ckpt"), update_state_file=True)
    shutil.copy(SPM_MODEL, convert_input / "30k-clean.model")
    convert(convert_input, directory, to="keras_hub", kind="classifier")
    return model, directory


def test_a_classifier_preset_classifies_raw_text_as_we_do(classifier_preset, spm_tokenizer):
    model, directory = classifier_preset
    task = keras_hub.models.AlbertTextClassifier.from_preset(str(directory))
    # (texts without a digit before a comma: the re-split is the next test's)
    texts = [line for line in REAL_TEXT if not re.search(r"\d,", line)][:6] + [
        "Hello WORLD: café, naïve; ÉCOLE"]
    logits = task.predict(texts, verbose=0)
    cls, sep = spm_tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    rows = [[cls] + spm_tokenizer.encode(t)[:62] + [sep] for t in texts]
    ids = np.zeros((len(rows), 64), np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    outputs = model({names.INPUT_WORD_IDS: ids, names.INPUT_MASK: (ids > 0).astype(np.int32),
                     names.INPUT_TYPE_IDS: np.zeros_like(ids)})
    np.testing.assert_allclose(logits, outputs[names.LOGITS], atol=1e-5)
    assert np.abs(logits).max() > 0.3  # the head as moved, not its near-zero start
    # Back: the head too, its size read from the preset.
    again = AlbertClassifier.from_release(directory, num_labels=3)
    assert not again.load_report.missing and not again.load_report.unused
    for mine, read in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), read.numpy(), err_msg=mine.path)


def keras_hub_ids_against_ours(tokenizer, directory, texts):
    """(texts whose ids differ, texts whose ids differ once the original's re-split of
    pieces such as ▁1990, is applied to keras-hub's pieces)."""
    theirs = keras_hub.models.AlbertTokenizer.from_preset(str(directory))
    differ, after_resplit = [], []
    for text, ids in zip(texts, theirs(texts), strict=True):
        mine = tokenizer.encode(text)
        ids = [int(i) for i in np.asarray(ids)]
        if ids != mine:
            differ.append(text)
            pieces = [q for i in ids for q in resplit_piece(
                tokenizer.sp_model, theirs.id_to_token(i))]
            if tokenizer.convert_tokens_to_ids(pieces) != mine:
                after_resplit.append(text)
    return differ, after_resplit


def test_keras_hubs_tokenizer_gives_our_ids_but_for_the_resplit(classifier_preset,
                                                                 spm_tokenizer):
    # The preset's SentencePiece model holds the original's preprocess_text
    # (lowercasing, accents); keras-hub's tokenizer lacks only the re-split of a
    # piece that ends in a digit and a comma, which a SentencePiece model cannot hold.
    _, directory = classifier_preset
    texts = REAL_TEXT + ["Hello WORLD, café naïve", "In 1990, 2,000 people came."]
    differ, after_resplit = keras_hub_ids_against_ours(spm_tokenizer, directory, texts)
    assert after_resplit == []
    assert "In 1990, 2,000 people came." in differ
    assert "Hello WORLD, café naïve" not in differ
    assert not (directory / "assets" / "tokenizer" / "vocabulary.spm").read_bytes() == (
        SPM_MODEL.read_bytes())


@pytest.mark.skipif(not (SHARED_DATA / "glue").is_dir(), reason="../shared absent")
def test_keras_hubs_tokenizer_on_real_glue_texts(classifier_preset, spm_tokenizer):
    # Every 8th text of SST-2, MRPC and RTE dev; all with ALBERT_TF_ALL_SHARED=1.
    _, directory = classifier_preset
    texts = []
    for task, columns in (("SST-2", (0,)), ("MRPC", (3, 4)), ("RTE", (1, 2))):
        lines = (SHARED_DATA / "glue" / task / "dev.tsv").read_text(
            encoding="utf-8").splitlines()[1:]
        texts += [line.split("\t")[c] for line in lines for c in columns]
    sample = shared_sample(texts)
    differ, after_resplit = keras_hub_ids_against_ours(spm_tokenizer, directory, sample)
    assert after_resplit == [] and all(any(ch.isdigit() for ch in t) for t in differ)
    if len(sample) == len(texts):  # the README's figures
        assert (len(texts), len(differ)) == (2242, 67)


def test_what_a_preset_cannot_hold_or_does_not_hold_is_refused_by_name(tmp_path):
    keras.utils.set_random_seed(5)
    keras_hub.models.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
                                  hidden_dim=8, intermediate_dim=16).save_to_preset(
        str(tmp_path / "bert"))
    with pytest.raises(CheckpointError, match=r"bert/config.json is a keras-hub preset of "
                                              r"BertBackbone, not of ALBERT"):
        AlbertEncoder.from_release(tmp_path / "bert")
    model = AlbertEncoder(tiny_config(), seed=0)
    save_keras_hub_preset(model, tmp_path / "albert")
    (tmp_path / "albert" / WEIGHTS).unlink()
    with pytest.raises(CheckpointError, match=r"preset .*albert has no model.weights.h5"):
        AlbertEncoder.from_release(tmp_path / "albert")
    # Weights of another config: the layer each group holds is checked by name.
    save_keras_hub_preset(AlbertEncoder(tiny_config(num_hidden_layers=4,
                                                    num_hidden_groups=2), seed=0),
                          tmp_path / "two_groups")
    config = json.loads((tmp_path / "two_groups" / "config.json").read_text())
    config["config"]["num_inner_repetitions"] = 2
    config["config"]["num_groups"] = 1
    (tmp_path / "two_groups" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="is keras-hub's layer 'group_1_inner_layer_0', "
                                              "where its AlbertBackbone of this config has "
                                              "'group_0_inner_layer_1'"):
        AlbertEncoder.from_release(tmp_path / "two_groups")
    # What keras-hub cannot compute or has no task for.
    with pytest.raises(ConfigError, match="tanh GELU"):
        save_keras_hub_preset(AlbertEncoder(tiny_config(hidden_act="gelu_exact")),
                              tmp_path / "exact")
    with pytest.raises(ConfigError, match=r"num_hidden_layers \(3\) divisible by "
                                          r"num_hidden_groups \(2\)"):
        save_keras_hub_preset(AlbertEncoder(tiny_config(num_hidden_layers=3,
                                                        num_hidden_groups=2)),
                              tmp_path / "uneven")
    with pytest.raises(CheckpointError, match=r"keras-hub has no ALBERT task for "
                                              r"\(squad_v2\).*--kind=encoder"):
        save_keras_hub_preset(AlbertSquadV2(tiny_config()), tmp_path / "squad")
    assert not (tmp_path / "exact").exists() and not (tmp_path / "squad").exists()


def test_a_preset_is_an_init_checkpoint(classifier_preset):
    from albert_tf.apps.model_files import complete_model_files, load_config
    from albert_tf.tasks.options import RunOptions

    _, directory = classifier_preset
    options = complete_model_files(RunOptions(init_checkpoint=str(directory)))
    assert (options.init_files.layout, options.albert_config_file,
            options.spm_model_file) == ("keras_hub", str(directory / "config.json"),
                                        str(directory / VOCABULARY_SPM))
    assert load_config(options.albert_config_file).num_hidden_groups == 2


def test_a_chinese_models_preset_keeps_its_wordpiece_vocabulary_for_us(tmp_path):
    # brightmart's albert_tiny_zh (read as its Google-layout equivalent, E = H): keras-hub
    # has no WordPiece ALBERT tokenizer, so the preset holds the weights, and vocab.txt
    # for albert_tf, which reads the preset with it.
    from tests.helpers.layouts import BRIGHTMART, brightmart_release, load_npz

    convert(brightmart_release(tmp_path / "albert_tiny_zh"), tmp_path / "preset",
            to="keras_hub")
    assert not (tmp_path / "preset" / "tokenizer.json").exists()
    encoder = AlbertEncoder.from_release(tmp_path / "preset")
    assert encoder.release_files.vocab_file == str(
        tmp_path / "preset" / "assets" / "tokenizer" / "vocab.txt")
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "preset"))
    inputs = model_inputs(load_npz(BRIGHTMART, "inputs"))
    assert_same_encoding(encoder(inputs), backbone(theirs(inputs)), inputs[names.INPUT_MASK])
