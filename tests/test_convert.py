"""`python -m albert_tf.convert`: any layout in, Hugging Face or Google's out, the same
numbers."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertClassifier,
    AlbertPretrainer,
    AlbertSquadV2,
    AlbertTokenClassifier,
    CheckpointError,
    names,
    task_heads,
    tasks,
)
from albert_tf.checkpoints import save_tf1_checkpoint, tf1_name
from albert_tf.checkpoints.huggingface import save_hf_checkpoint
from albert_tf.checkpoints.release import describe_checkpoint, find_release_files
from albert_tf.convert import convert, detect_model, load
from albert_tf.tasks.classification import CLASSIFIER
from tests.helpers.forked import run_python
from tests.helpers.layouts import BRIGHTMART, brightmart_release, load_npz, model_inputs
from tests.helpers.scripts import one_line_error
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


def _regression_release(directory):
    config = tiny_config(vocab_size=50)
    directory.mkdir()
    config.to_json_file(directory / "albert_config.json")
    regression = AlbertClassifier(config, 1, seed=0)
    save_tf1_checkpoint(regression, str(directory / "model.ckpt"))
    return regression


def test_a_one_output_head_needs_the_kind_named(tmp_path):
    regression = _regression_release(tmp_path / "in")
    with pytest.raises(CheckpointError, match="--kind=classifier .* --kind=multiple_choice"):
        load(tmp_path / "in")
    model, _ = load(tmp_path / "in", kind="classifier")
    assert model.num_labels == 1 and model.load_report.missing == []
    convert(tmp_path / "in", tmp_path / "hf", kind="classifier")
    again = AlbertClassifier.from_release(tmp_path / "hf", num_labels=1)
    np.testing.assert_array_equal(again.output_weights.numpy(),
                                  regression.output_weights.numpy())


def test_model_the_former_name_of_kind_still_works_and_warns(tmp_path):
    _regression_release(tmp_path / "in")
    with pytest.warns(DeprecationWarning, match=r"model='classifier' is deprecated: use "
                                                r"kind='classifier'"):
        model, _ = load(tmp_path / "in", model="classifier")
    assert model.num_labels == 1
    with pytest.raises(ValueError, match="--kind=classifier and --model=multiple_choice "
                                         "name two kinds"):
        convert(tmp_path / "in", tmp_path / "x", kind="classifier", model="multiple_choice")

    def command(*flags):
        return run_python(["-m", "albert_tf.convert", f"--input={tmp_path / 'in'}",
                           "--to=google", *flags], cwd=tmp_path)

    # The command: --kind, and --model, which logs one line saying it is deprecated.
    for flag, output in (("--kind", "by_kind"), ("--model", "by_model")):
        result = command(f"{flag}=classifier", f"--output={tmp_path / output}")
        assert result.returncode == 0, result.stderr[-3000:]
        assert AlbertClassifier.from_release(tmp_path / output, num_labels=1).num_labels == 1
        warned = [line for line in result.stderr.splitlines() if "--model" in line]
        assert len(warned) == (flag == "--model"), result.stderr[-3000:]
    assert warned[0].endswith("--model is deprecated: use --kind=classifier (the same names)")
    refused = command("--kind=classifier", "--model=multiple_choice",
                      f"--output={tmp_path / 'both'}")
    assert one_line_error(refused) == ("error: --kind=classifier and "
                                       "--model=multiple_choice name two kinds: give "
                                       "--kind alone")
    assert not (tmp_path / "both").exists()


def _release_of(model, directory):
    directory.mkdir()
    model.config.to_json_file(directory / "albert_config.json")
    save_tf1_checkpoint(model, str(directory / "model.ckpt"))
    return directory


def test_the_model_is_told_by_the_head_tables(tmp_path):
    config = tiny_config(vocab_size=50)
    for name, model in [("squad_v2", AlbertSquadV2(config, seed=0)),
                        ("token_classifier", AlbertTokenClassifier(config, 5, seed=0)),
                        ("classifier", AlbertClassifier(config, 3, seed=0))]:
        assert detect_model(describe_checkpoint(_release_of(model, tmp_path / name))) == name
        loaded, _ = load(tmp_path / name)
        assert type(loaded) is type(model) and loaded.load_report.missing == []
        assert getattr(loaded, "num_labels", None) == getattr(model, "num_labels", None)
    # The size of a head, where its table sizes it: [num_labels, H] or [H, num_labels].
    assert task_heads.num_outputs(task_heads.TOKEN_CLASSIFIER, config,
                                  {"cls/ner/output_weights": [5, 16]}) == 5
    assert task_heads.num_outputs(task_heads.SQUAD_V1, config, {}) is None
    assert task_heads.num_outputs(task_heads.MASKED_LM, config, {}) is None


# A head of a task module's own under its own TF1 names, with the keys of transformers'
# sequence classifier; its model and task registered once, as a task module does.
OWN_HEAD = task_heads.Head("test_own_pooled", (
    task_heads.Variable("cls/own/output_weights", lambda config, n: (n, config.hidden_size),
                        "classifier.weight", "weights"),
    task_heads.Variable("cls/own/output_bias", lambda config, n: (n,), "classifier.bias",
                        "zeros"),
    task_heads.Dropout("cls/own/dropout")))


class OwnPooledClassifier(AlbertClassifier):
    heads = (OWN_HEAD,)
    detectable = False


OWN_KIND = dataclasses.replace(CLASSIFIER, name="test_own_pooled",
                               model_class=OwnPooledClassifier)


@tasks.register
class OwnPooledTask(tasks.Task):
    name = "test_own_pooled"
    metric = "eval_accuracy"
    serving_kinds = (OWN_KIND,)


def test_a_head_of_your_own_reaches_hugging_face_under_its_keys(tmp_path):
    config = tiny_config(vocab_size=50)
    model = OwnPooledClassifier(config, 3, seed=0)
    assert {tf1_name(v) for v in model.weights} >= {"cls/own/output_weights",
                                                    "cls/own/output_bias"}
    directory = save_hf_checkpoint(model, tmp_path / "hf")
    from safetensors.numpy import load_file

    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    np.testing.assert_array_equal(tensors["classifier.weight"], model.output_weights.numpy())
    # Read back as this model (its names) and as the package's classifier (the same keys).
    again, _ = load(directory, kind="test_own_pooled")
    np.testing.assert_array_equal(again.output_weights.numpy(), model.output_weights.numpy())
    assert again.load_report.missing == [] and again.load_report.unused == []
    assert detect_model(describe_checkpoint(directory)) == "classifier"  # the package's first
    builtin, _ = load(directory)
    np.testing.assert_array_equal(builtin.output_weights.numpy(), model.output_weights.numpy())



def test_one_registration_refuses_what_would_make_a_name_mean_two_things():
    assert tasks.models()["test_own_pooled"] is OwnPooledClassifier
    assert tasks.register(OwnPooledTask) is OwnPooledTask  # the module loaded again

    class Another(OwnPooledTask):
        pass

    with pytest.raises(tasks.TaskModuleError, match="'test_own_pooled' is already "
                                                    "registered: OwnPooledTask"):
        tasks.register(Another)

    class SameKind(OwnPooledTask):
        name = "test_same_kind"
        serving_kinds = (dataclasses.replace(OWN_KIND, name="classifier"),)

    with pytest.raises(tasks.TaskModuleError, match="serving kind 'classifier' has the "
                                                    "name of another task's kind"):
        tasks.register(SameKind)
    with pytest.raises(tasks.TaskModuleError, match="takes an albert_tf.tasks.Task subclass"):
        tasks.register(dict)
    with pytest.raises(tasks.TaskModuleError, match="serving_kinds must be a tuple"):
        tasks.register(type("NoKind", (tasks.Task,), {"name": "no_kind", "metric": "m"}))
    assert "test_same_kind" not in tasks.registered() and "no_kind" not in tasks.registered()
