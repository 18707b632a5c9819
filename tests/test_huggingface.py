"""Hugging Face directories in and out: transformers' own outputs to 1e-5, the written
files against what transformers wrote, and one clear error for what cannot be read.

`fixtures/hf_albert_tiny_grouped` is a transformers 5.23 `AlbertForPreTraining` (2 groups
of 2 inner layers, E=16 != H=32, gelu_new) saved by `save_pretrained`, with its outputs
for a padded batch. Loading it into a model built with transformers and comparing
outputs is `test_transformers_interop.py` (where transformers is installed).
"""

import dataclasses
import json
import math

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from albert_tf import (
    AlbertClassifier,
    AlbertConfig,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSquadV1,
    AlbertSquadV2,
    CheckpointError,
    ConfigError,
    names,
)
from albert_tf.checkpoints import huggingface
from albert_tf.checkpoints.release import describe_checkpoint, find_release_files, load_checkpoint
from albert_tf.modeling import common
from tests.helpers.layouts import (
    BERT,
    BRIGHTMART,
    HF,
    bert_state_dict,
    brightmart_release,
    hf_release,
    load_npz,
    write_bert_directory,
)
from tests.helpers.layouts import model_inputs as fixture_model_inputs
from tests.helpers.paths import SPM_MODEL
from tests.helpers.tiny import random_inputs, tiny_config

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    return hf_release(tmp_path_factory.mktemp("hf") / "albert_tiny_hf")


@pytest.fixture(scope="module")
def pretrainer(hf_dir):
    return AlbertPretrainer.from_release(hf_dir)


def tensors_of(path):
    with safe_open(str(path), framework="np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def weights(model):
    return {w.path: w.numpy().copy() for w in model.weights}


# --------------------------------------------------------------------------- config
@pytest.mark.parametrize("theirs, ours", [
    ("gelu_new", "gelu"), ("gelu_pytorch_tanh", "gelu"), ("gelu", "gelu_exact"),
    ("relu", "relu")])
def test_config_activations(theirs, ours):
    values = json.loads((HF / "config.json").read_text())
    config = AlbertConfig.from_hf_dict({**values, "hidden_act": theirs})
    assert config.hidden_act == ours
    assert AlbertConfig.from_hf_dict(config.to_hf_dict()) == config


def test_config_fields_and_round_trip():
    config = AlbertConfig.from_json_file(HF / "config.json")  # recognized by model_type
    assert (config.vocab_size, config.embedding_size, config.hidden_size,
            config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num,
            config.hidden_act, config.extra) == (113, 16, 32, 6, 2, 2, "gelu", {})
    written = config.to_hf_dict()
    fixture = json.loads((HF / "config.json").read_text())
    for field, value in written.items():
        assert fixture[field] == value, field


@pytest.mark.parametrize("change, words", [
    ({"model_type": "roberta"}, ["model_type 'roberta'", "expected 'albert' or 'bert'"]),
    ({"layer_norm_eps": 1e-5}, ["'layer_norm_eps'", "1e-05", "1e-12"]),
    ({"position_embedding_type": "relative_key"}, ["'position_embedding_type'",
                                                   "'relative_key'", "'absolute'"]),
    ({"hidden_act": "silu"}, ["'hidden_act'", "'silu'", "gelu_new"]),
])
def test_config_that_cannot_be_computed_is_refused(tmp_path, change, words):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((HF / "config.json").read_text()), **change}))
    with pytest.raises(ConfigError) as error:
        AlbertConfig.from_json_file(path)
    for word in [str(path), *words]:
        assert word in str(error.value)


def test_gelu_exact_is_the_erf_form():
    x = np.linspace(-4, 4, 81).astype(np.float32)
    expected = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)]
    np.testing.assert_allclose(common.get_activation("gelu_exact")(x), expected, atol=1e-6)
    assert np.max(np.abs(common.get_activation("gelu")(x) - np.asarray(expected))) > 1e-4


# ---------------------------------------------------------------------------- reading
def test_every_output_matches_transformers(pretrainer):
    report = pretrainer.load_report
    assert report.layout == "huggingface" and report.missing == [] and report.unused == []
    features = load_npz(HF, "inputs")
    inputs = fixture_model_inputs(features)
    batch, length = features["input_ids"].shape
    inputs[names.MASKED_LM_POSITIONS] = np.tile(np.arange(length), (batch, 1))
    outputs = pretrainer(inputs)
    expected = load_npz(HF, "outputs")
    np.testing.assert_allclose(np.stack(outputs["encoder_outputs"]), expected["hidden_states"],
                               atol=TOLERANCE)
    mapping = pretrainer.encoder.encoder.embedding_hidden_mapping_in
    np.testing.assert_allclose(mapping(outputs["embedding_output"]),
                               expected["embedding_hidden"], atol=TOLERANCE)
    for ours, theirs in (("sequence_output", "sequence_output"),
                         ("pooled_output", "pooled_output"),
                         (names.MLM_LOGITS, "prediction_logits"),
                         (names.SOP_LOGITS, "sop_logits")):
        np.testing.assert_allclose(outputs[ours], expected[theirs], atol=TOLERANCE)


def test_release_files_and_tokenizer(hf_dir, tmp_path):
    files = find_release_files(hf_dir)
    assert (files.layout, files.checkpoint, files.config_file, files.spm_model_file,
            files.vocab_file, files.do_lower_case) == (
        "huggingface", str(hf_dir / "model.safetensors"), str(hf_dir / "config.json"),
        str(hf_dir / "spiece.model"), None, True)
    tokenizer = files.tokenizer()
    assert tokenizer.tokenize(tokenizer.preprocess("Hello World")) == ["▁hello", "▁world"]
    wordpiece = find_release_files(hf_release(tmp_path / "zh", tokenizer="wordpiece"))
    assert (wordpiece.spm_model_file, wordpiece.do_lower_case) == (None, False)
    assert wordpiece.vocab_file.endswith("vocab.txt")
    # The weights file alone, or the directory: the same layout.
    assert describe_checkpoint(hf_dir / "model.safetensors").layout == "huggingface"


# ---------------------------------------------------------------------------- writing
def test_written_directory_is_what_transformers_wrote(pretrainer, tmp_path):
    out = huggingface.save_hf_checkpoint(pretrainer, tmp_path / "out",
                                         spm_model_file=SPM_MODEL, do_lower_case=True)
    written, fixture = tensors_of(tmp_path / "out" / "model.safetensors"), tensors_of(
        HF / "model.safetensors")
    assert sorted(written) == sorted(fixture)
    for key, value in fixture.items():
        assert written[key].dtype == value.dtype and written[key].shape == value.shape, key
        np.testing.assert_array_equal(written[key], value, err_msg=key)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    expected = json.loads((HF / "config.json").read_text())
    assert {k: v for k, v in config.items() if k != "transformers_version"} == {
        k: v for k, v in expected.items() if k != "transformers_version"}
    settings = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert settings["tokenizer_class"] == "AlbertTokenizer" and settings["do_lower_case"]
    assert (tmp_path / "out" / "spiece.model").read_bytes() == SPM_MODEL.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left
    with pytest.raises(FileExistsError, match="not empty"):
        huggingface.save_hf_checkpoint(pretrainer, out)


@pytest.mark.parametrize("make, architecture, head_keys", [
    (lambda c: AlbertClassifier(c, 3, seed=1), "AlbertForSequenceClassification",
     {"classifier.weight": (3, 16), "classifier.bias": (3,)}),
    (lambda c: AlbertMultipleChoice(c, 4, seed=1), "AlbertForMultipleChoice",
     {"classifier.weight": (1, 16), "classifier.bias": (1,)}),
    (lambda c: AlbertSquadV1(c, seed=1), "AlbertForQuestionAnswering",
     {"qa_outputs.weight": (2, 16), "qa_outputs.bias": (2,)}),
    (lambda c: AlbertEncoder(c, seed=1), "AlbertModel", {}),
])
def test_task_models_round_trip(tmp_path, make, architecture, head_keys):
    config = tiny_config(vocab_size=50, num_hidden_groups=2)
    model = make(config)
    huggingface.save_hf_checkpoint(model, tmp_path / "out", labels=(
        ["a", "b", "c"] if architecture == "AlbertForSequenceClassification" else None))
    written = tensors_of(tmp_path / "out" / "model.safetensors")
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["architectures"] == [architecture]
    for key, shape in head_keys.items():
        assert written[key].shape == shape
    base = "" if architecture == "AlbertModel" else "albert."
    assert f"{base}embeddings.word_embeddings.weight" in written
    assert (f"{base}pooler.weight" in written) == (architecture != "AlbertForQuestionAnswering")
    if architecture == "AlbertForSequenceClassification":
        assert saved["id2label"] == {"0": "a", "1": "b", "2": "c"}
    kwargs = {"AlbertForSequenceClassification": {"num_labels": 3},
              "AlbertForMultipleChoice": {"num_choices": 4}}.get(architecture, {})
    again = type(model).from_release(tmp_path / "out", **kwargs)
    expected = weights(model)
    for name, value in weights(again).items():
        if name.startswith("bert/pooler/") and architecture == "AlbertForQuestionAnswering":
            continue  # transformers' question answering has no pooler
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_a_model_without_counterpart_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="model.encoder"):
        huggingface.save_hf_checkpoint(AlbertSquadV2(tiny_config(vocab_size=50)),
                                       tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_equal_widths_are_written_with_an_identity_mapping(tmp_path):
    """brightmart's models read as E = H: transformers maps E -> H always, so the
    mapping written is the identity, read back as no mapping."""
    model = AlbertPretrainer.from_release(brightmart_release(tmp_path / "zh"))
    huggingface.save_hf_checkpoint(model, tmp_path / "out", vocab_file=tmp_path / "zh" /
                                   "vocab.txt")
    written = tensors_of(tmp_path / "out" / "model.safetensors")
    mapping = "albert.encoder.embedding_hidden_mapping_in"
    np.testing.assert_array_equal(written[f"{mapping}.weight"], np.eye(32))
    assert not written[f"{mapping}.bias"].any()
    assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())[
        "tokenizer_class"] == "BertTokenizer"
    again = AlbertPretrainer.from_release(tmp_path / "out")
    assert again.load_report.unused == []
    inputs = fixture_model_inputs(load_npz(BRIGHTMART, "inputs"))
    inputs[names.MASKED_LM_POSITIONS] = np.zeros((3, 2), np.int32)
    np.testing.assert_array_equal(again(inputs)[names.MLM_LOGITS],
                                  model(inputs)[names.MLM_LOGITS])
    # A mapping that is not the identity cannot be dropped: refused.
    written[f"{mapping}.bias"] = np.full(32, 0.5, np.float32)
    save_file(written, str(tmp_path / "out" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="not the identity"):
        AlbertPretrainer.from_release(tmp_path / "out")


# -------------------------------------------------------------------------- bad input
def test_pickle_is_refused_with_how_to_convert(tmp_path):
    directory = tmp_path / "torch_only"
    directory.mkdir()
    (directory / "config.json").write_text((HF / "config.json").read_text())
    (directory / "pytorch_model.bin").write_bytes(b"\x80\x04not opened")
    for path in (directory, directory / "pytorch_model.bin"):
        with pytest.raises(CheckpointError) as error:
            describe_checkpoint(path)
        message = str(error.value)
        assert "pytorch_model.bin" in message and "pickle" in message
        assert "save_pretrained" in message and "safe_serialization=True" in message


def test_weights_of_another_size_are_refused_before_assignment(hf_dir):
    model = AlbertPretrainer(AlbertConfig.from_json_file(HF / "config.json").replace(
        vocab_size=100))
    before = weights(model)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(model, hf_dir)
    message = str(error.value)
    assert str(hf_dir / "model.safetensors") in message
    assert "bert/embeddings/word_embeddings: model [100, 16], checkpoint [113, 16]" in message
    assert "cls/predictions/output_bias: model [100], checkpoint [113]" in message
    assert all(np.array_equal(v, before[k]) for k, v in weights(model).items())


def test_unreadable_and_unrecognized_files(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="cannot read .*model.safetensors as safetensors"):
        load_checkpoint(AlbertEncoder(tiny_config(vocab_size=50)), tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.npz").write_bytes(b"")
    with pytest.raises(CheckpointError, match=f"no TF1 checkpoint in directory {other}"):
        describe_checkpoint(other)


def test_untied_decoder_is_refused(tmp_path, hf_dir):
    directory = tmp_path / "untied"
    directory.mkdir()
    tensors = tensors_of(hf_dir / "model.safetensors")
    tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text((HF / "config.json").read_text())
    tied = AlbertPretrainer.from_release(directory)  # equal: tied, and not "unused"
    assert tied.load_report.unused == []
    tensors["predictions.decoder.weight"] = tensors["predictions.decoder.weight"] + 1.0
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(CheckpointError, match="predictions.decoder.weight differs"):
        AlbertPretrainer.from_release(directory)


def test_group_rule_that_differs_from_transformers_is_refused(tmp_path):
    # 22 layers in 22 groups: the original's float rule skips group 21, transformers'
    # does not; such a model computes differently in each.
    config = tiny_config(vocab_size=50, num_hidden_layers=22, num_hidden_groups=22)
    with pytest.raises(CheckpointError, match="num_hidden_groups=22"):
        huggingface.save_hf_checkpoint(AlbertEncoder(config), tmp_path / "out")


def test_random_inputs_through_a_written_and_read_model(tmp_path, pretrainer):
    """Our model, written and read back: bit-identical outputs on other inputs too."""
    huggingface.save_hf_checkpoint(pretrainer, tmp_path / "out")
    again = AlbertPretrainer.from_release(tmp_path / "out")
    inputs = random_inputs(pretrainer.config, batch=2, length=9, seed=3, min_length=4,
                           masked_lm_predictions=2)
    for name in ("sequence_output", names.MLM_LOGITS, names.SOP_LOGITS):
        np.testing.assert_array_equal(again(inputs)[name], pretrainer(inputs)[name])


def test_tf1_checkpoint_of_no_known_layout(tmp_path):
    import tensorflow as tf

    prefix = str(tmp_path / "bert_model.ckpt")
    names = ["bert/encoder/layer_0/attention/self/query/kernel", "bert/pooler/dense/bias"]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=["", ""],
                      tensors=[tf.zeros([4, 4]), tf.zeros([4])])
    with pytest.raises(CheckpointError) as error:
        describe_checkpoint(prefix)
    message = str(error.value)
    assert message.startswith(f"{prefix} is not an ALBERT checkpoint of a known layout")
    assert "bert/encoder/transformer/group_0/" in message and "layer_shared" in message
    assert "BERT checkpoint" in message


def test_bfloat16_weights_are_refused_by_name(tmp_path, hf_dir):
    import ml_dtypes

    tensors = tensors_of(hf_dir / "model.safetensors")
    key = "albert.pooler.weight"
    tensors[key] = tensors[key].astype(ml_dtypes.bfloat16)
    directory = tmp_path / "bf16"
    directory.mkdir()
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text((HF / "config.json").read_text())
    model = AlbertPretrainer(AlbertConfig.from_json_file(HF / "config.json"))
    before = weights(model)
    with pytest.raises(CheckpointError, match=f"{key} in .* is bfloat16.*float32"):
        load_checkpoint(model, directory)
    assert all(np.array_equal(v, before[k]) for k, v in weights(model).items())


def test_sharded_weights_read_through_their_index(tmp_path, pretrainer):
    """`model.safetensors.index.json` and its shards, as transformers writes large models."""
    tensors = tensors_of(HF / "model.safetensors")
    keys = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": keys[::2],
              "model-00002-of-00002.safetensors": keys[1::2]}
    directory = tmp_path / "sharded"
    directory.mkdir()
    weight_map = {}
    for name, part in shards.items():
        save_file({k: tensors[k] for k in part}, str(directory / name))
        weight_map.update(dict.fromkeys(part, name))
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))
    (directory / "config.json").write_text((HF / "config.json").read_text())
    assert find_release_files(directory).checkpoint == str(
        directory / "model.safetensors.index.json")
    again = AlbertPretrainer.from_release(directory)
    expected = weights(pretrainer)
    assert all(np.array_equal(v, expected[k]) for k, v in weights(again).items())


# ------------------------------------------------------------------------------ BERT
def numpy_bert(w: dict, config: dict, inputs: dict, base: str = "") -> tuple:
    """BERT's forward pass (Devlin et al. 2019, as transformers' BertModel computes it:
    post-LayerNorm blocks, erf GELU, tanh pooler) in float64 NumPy, from the state dict:
    (the sequence output, the pooled output)."""
    w = {k[len(base):]: v.astype(np.float64) for k, v in w.items() if k.startswith(base)}
    ids, mask, types = (inputs[names.INPUT_WORD_IDS], inputs[names.INPUT_MASK],
                        inputs[names.INPUT_TYPE_IDS])
    heads = config["num_attention_heads"]

    def linear(x, name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def split(x):  # [B, T, H] -> [B, heads, T, H / heads]
        return x.reshape(*x.shape[:2], heads, -1).transpose(0, 2, 1, 3)

    gelu = np.vectorize(lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))))
    x = norm(w["embeddings.word_embeddings.weight"][ids] +
             w["embeddings.position_embeddings.weight"][np.arange(ids.shape[1])] +
             w["embeddings.token_type_embeddings.weight"][types], "embeddings.LayerNorm")
    for n in range(config["num_hidden_layers"]):
        layer = f"encoder.layer.{n}"
        q, k, v = (split(linear(x, f"{layer}.attention.self.{p}"))
                   for p in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
        scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = norm(x + linear(context, f"{layer}.attention.output.dense"),
                 f"{layer}.attention.output.LayerNorm")
        hidden = gelu(linear(x, f"{layer}.intermediate.dense"))
        x = norm(x + linear(hidden, f"{layer}.output.dense"), f"{layer}.output.LayerNorm")
    return x, np.tanh(linear(x[:, 0], "pooler.dense"))


def test_a_bert_directory_reads_as_the_albert_of_one_group_per_layer(tmp_path):
    """A BERT (BertModel's keys, no prefix) is the ALBERT of one group per layer, one
    inner group, E = H and erf GELU: its outputs are a NumPy BERT's (1e-5), every weight
    is read, and the position buffer is not reported; a classifier of
    BertForSequenceClassification's keys ("bert." and "classifier") keeps its head."""
    config = AlbertConfig.from_hf_dict(BERT)
    assert (config.num_hidden_groups, config.inner_group_num, config.embedding_size,
            config.hidden_act) == (3, 1, 16, "gelu_exact")
    tensors = bert_state_dict(BERT, base="")
    directory = write_bert_directory(tmp_path / "bert", BERT, tensors, "BertModel")
    encoder = AlbertEncoder.from_release(directory)
    report = encoder.load_report
    assert report.layout == "huggingface" and report.missing == [] and report.unused == []
    inputs = random_inputs(config, batch=3, length=7, seed=1, min_length=2,
                           second_segment_from=4)
    sequence, pooled = numpy_bert(tensors, BERT, inputs)
    outputs = encoder(inputs)
    np.testing.assert_allclose(outputs[names.SEQUENCE_OUTPUT], sequence, atol=TOLERANCE)
    np.testing.assert_allclose(outputs[names.POOLED_OUTPUT], pooled, atol=TOLERANCE)
    files = find_release_files(directory)
    assert files.tokenizer().tokenize("The CAFÉ, unable 中文") == [
        "the", "cafe", ",", "un", "##able", "中", "文"]

    head = {"classifier.weight": np.random.default_rng(2).normal(size=(3, 16)).astype(
        np.float32), "classifier.bias": np.array([0.1, -0.2, 0.3], np.float32)}
    task = {**bert_state_dict(BERT, base="bert."), **head}
    directory = write_bert_directory(tmp_path / "bert_sst", BERT, task,
                                     "BertForSequenceClassification")
    classifier = AlbertClassifier.from_release(directory, num_labels=3)
    assert classifier.load_report.missing == [] and classifier.load_report.unused == []
    _, pooled = numpy_bert(task, BERT, inputs, base="bert.")
    np.testing.assert_allclose(classifier(inputs)[names.LOGITS],
                               pooled @ head["classifier.weight"].T + head["classifier.bias"],
                               atol=TOLERANCE)


def test_bert_weights_that_do_not_fit_are_refused(tmp_path):
    """A BERT's weights under an ALBERT config that shares groups: one error naming the
    family's rule; a BertForMaskedLM (heads of other names) is not a class read here."""
    tensors = bert_state_dict(BERT, base="")
    directory = write_bert_directory(tmp_path / "bert", BERT, tensors, "BertModel")
    shared = dataclasses.replace(AlbertConfig.from_hf_dict(BERT), num_hidden_groups=1)
    with pytest.raises(CheckpointError, match="one group per layer, one inner group"):
        load_checkpoint(AlbertEncoder(shared), directory)
    with pytest.raises(CheckpointError, match="no Hugging Face class 'BertForMaskedLM'"):
        huggingface.hf_class("BertForMaskedLM")
