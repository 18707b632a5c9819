"""TF1 name-based checkpoints: finding them, loading with a report, errors, saving."""

import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR, model_inputs

from albert_tf import (
    AlbertConfig,
    AlbertEncoder,
    AlbertPretrainer,
    CheckpointError,
    find_release_files,
    load_checkpoint,
    load_tf1_checkpoint,
    save_tf1_checkpoint,
)
from albert_tf.checkpoints import list_checkpoint_variables, resolve_checkpoint
from albert_tf.modeling import tf1_variables

DATA = ".data-00000-of-00001"


def copy_checkpoint(directory, prefix_name="model.ckpt-best"):
    os.makedirs(directory, exist_ok=True)
    for suffix in (".index", DATA):
        shutil.copy(FIXTURE_CHECKPOINT + suffix, os.path.join(directory, prefix_name + suffix))
    return os.path.join(directory, prefix_name)


def write_raw_checkpoint(prefix, tensors):
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    return prefix


def fixture_tensors(rename=lambda name: name):
    reader = tf.train.load_checkpoint(FIXTURE_CHECKPOINT)
    return {rename(name): reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()}


def weights(model):
    return {w.path: w.numpy().copy() for w in model.weights}


# ------------------------------------------------------------------ finding files
def test_resolve_accepts_every_way_of_naming_a_checkpoint(tmp_path):
    prefix = copy_checkpoint(tmp_path / "one")
    assert resolve_checkpoint(prefix) == prefix
    assert resolve_checkpoint(prefix + ".index") == prefix
    assert resolve_checkpoint(prefix + DATA) == prefix
    assert resolve_checkpoint(tmp_path / "one") == prefix  # a directory with one .index
    # A directory with a `checkpoint` state file names its latest checkpoint.
    copy_checkpoint(tmp_path / "one", "model.ckpt-10")
    (tmp_path / "one" / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-10"\n')
    assert resolve_checkpoint(tmp_path / "one") == str(tmp_path / "one" / "model.ckpt-10")
    # A SavedModel / TF-Hub module keeps variables/variables.*.
    hub = copy_checkpoint(tmp_path / "hub" / "variables", "variables")
    assert resolve_checkpoint(tmp_path / "hub") == hub


def test_missing_or_ambiguous_checkpoints_name_the_path(tmp_path):
    with pytest.raises(CheckpointError, match=f"no checkpoint at {tmp_path}/nope.*"
                                              f"{tmp_path}/nope.index does not exist"):
        resolve_checkpoint(tmp_path / "nope")
    copy_checkpoint(tmp_path, "a.ckpt")
    copy_checkpoint(tmp_path, "b.ckpt")
    with pytest.raises(CheckpointError, match=r"several checkpoints \(a.ckpt.index, "
                                              r"b.ckpt.index\)"):
        resolve_checkpoint(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=f"no TF1 checkpoint in directory "
                                              f"{tmp_path}/empty"):
        resolve_checkpoint(tmp_path / "empty")


# ------------------------------------------------------------------ loading
def test_load_report_of_a_pretraining_checkpoint(tiny_config):
    model = AlbertPretrainer(tiny_config)
    report = load_tf1_checkpoint(model, FIXTURE_CHECKPOINT)
    assert sorted(report.loaded) == sorted(tf1_variables.pretrainer_variables(tiny_config))
    assert report.missing == [] and report.unused == [] and report.prefix == ""
    # Optimizer slots and the step counter are recognised and skipped.
    assert "global_step" in report.skipped
    assert "bert/pooler/dense/kernel/adam_m" in report.skipped
    assert len(report.skipped) == 2 * len(report.loaded) + 1
    assert "loaded 80 variables" in str(report)
    reader = tf.train.load_checkpoint(FIXTURE_CHECKPOINT)
    for w in model.weights:
        np.testing.assert_array_equal(w.numpy(), reader.get_tensor(w.path))


def test_tf_hub_module_scope_is_detected(tmp_path, tiny_config, fixture_inputs,
                                         fixture_outputs):
    # TF-Hub module layout: assets/ + variables/variables with a leading `module/` scope.
    (tmp_path / "variables").mkdir()
    (tmp_path / "assets").mkdir()
    write_raw_checkpoint(str(tmp_path / "variables" / "variables"),
                         fixture_tensors(lambda n: "module/" + n))
    shutil.copy(FIXTURE_DIR / "albert_config.json", tmp_path / "assets")
    model = AlbertEncoder.from_release(tmp_path)
    assert model.load_report.prefix == "module/"
    out = model(model_inputs(fixture_inputs, with_positions=False))
    np.testing.assert_allclose(out["pooled_output"], fixture_outputs["pooled_output"],
                               atol=1e-5, rtol=0)
    # An explicit prefix works too, and a wrong one finds nothing.
    load_tf1_checkpoint(model, tmp_path / "variables" / "variables", prefix="module/")
    with pytest.raises(CheckpointError, match="holds none of the"):
        load_tf1_checkpoint(model, tmp_path / "variables" / "variables", prefix="other/")


def test_checkpoint_of_another_size_lists_every_mismatch(tiny_config):
    bigger = tiny_config.replace(intermediate_size=48, vocab_size=300)
    model = AlbertPretrainer(bigger, seed=0)
    before = weights(model)
    with pytest.raises(CheckpointError) as error:
        load_tf1_checkpoint(model, FIXTURE_CHECKPOINT)
    message = str(error.value)
    assert f"checkpoint {FIXTURE_CHECKPOINT} does not fit albert_pretrainer" in message
    assert "bert/embeddings/word_embeddings: model [300, 16], checkpoint [211, 16]" in message
    assert "cls/predictions/output_bias: model [300], checkpoint [211]" in message
    # 4 blocks x (intermediate kernel, bias, output kernel) + 2 vocab-sized variables.
    assert "14 variables differ" in message and message.count("checkpoint [") == 14
    after = weights(model)  # nothing was assigned
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_strict_mode_fails_on_missing_variables(tmp_path, tiny_config):
    encoder_only = save_tf1_checkpoint(AlbertEncoder(tiny_config, seed=1),
                                       str(tmp_path / "encoder.ckpt"))
    model = AlbertPretrainer(tiny_config)
    with pytest.raises(CheckpointError, match=r"lacks 7 variables that albert_pretrainer "
                                              r"needs \(strict=True\)") as error:
        load_tf1_checkpoint(model, encoder_only, strict=True)
    assert "\n  cls/predictions/transform/dense/kernel\n" in str(error.value)
    report = load_tf1_checkpoint(model, encoder_only)
    assert sorted(report.missing) == sorted({**tf1_variables.masked_lm_variables(tiny_config),
                                             **tf1_variables.sentence_order_variables(tiny_config)})


def test_corrupt_checkpoints_give_a_clear_error(tmp_path, tiny_config):
    model = AlbertPretrainer(tiny_config, seed=0)
    before = weights(model)
    bad_index = copy_checkpoint(tmp_path / "bad_index")
    with open(bad_index + ".index", "wb") as f:
        f.write(b"this is not a tensor bundle index")
    with pytest.raises(CheckpointError, match=f"cannot read checkpoint {bad_index}"):
        load_tf1_checkpoint(model, bad_index)
    truncated = copy_checkpoint(tmp_path / "truncated")
    size = os.path.getsize(truncated + DATA)
    with open(truncated + DATA, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(CheckpointError, match=f"from checkpoint {truncated}"):
        load_tf1_checkpoint(model, truncated)
    flipped = copy_checkpoint(tmp_path / "flipped")  # same size, bits flipped
    with open(flipped + DATA, "r+b") as f:
        data = bytearray(f.read())
        for offset in range(0, size, 257):
            data[offset] ^= 0xFF
        f.seek(0)
        f.write(data)
    with pytest.raises(CheckpointError, match=f"checkpoint {flipped}"):
        load_tf1_checkpoint(model, flipped)
    after = weights(model)  # none of the failed loads touched the model
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_unrelated_checkpoint_is_refused(tmp_path, tiny_config):
    other = write_raw_checkpoint(str(tmp_path / "other"), {"foo/bar": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match="holds none of the .* variables"):
        load_tf1_checkpoint(AlbertEncoder(tiny_config), other)


# ------------------------------------------------------------------ saving
def test_save_load_round_trip_gives_identical_outputs(tmp_path, tiny_config, fixture_inputs):
    source = AlbertPretrainer(tiny_config, seed=11)
    path = save_tf1_checkpoint(source, str(tmp_path / "out" / "model.ckpt-5"), global_step=5)
    assert sorted(os.listdir(tmp_path / "out")) == ["model.ckpt-5" + DATA,
                                                   "model.ckpt-5.index"]
    saved = list_checkpoint_variables(path)
    assert saved.pop("global_step") == []
    expected = tf1_variables.pretrainer_variables(tiny_config)
    assert {n: tuple(s) for n, s in saved.items()} == expected
    assert int(tf.train.load_checkpoint(path).get_tensor("global_step")) == 5

    target = AlbertPretrainer(tiny_config, seed=12)
    report = load_tf1_checkpoint(target, path, strict=True)
    assert report.skipped == ["global_step"]
    inputs = model_inputs(fixture_inputs)
    expected, actual = source(inputs), target(inputs)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_array_equal(actual[key], expected[key])


def test_saved_checkpoint_is_readable_by_name_like_the_originals(tmp_path, tiny_config):
    model = AlbertPretrainer(tiny_config)
    load_tf1_checkpoint(model, FIXTURE_CHECKPOINT)
    path = save_tf1_checkpoint(model, str(tmp_path / "model.ckpt"), update_state_file=True)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    ours, original = tf.train.load_checkpoint(path), tf.train.load_checkpoint(
        FIXTURE_CHECKPOINT)
    for name in tf1_variables.pretrainer_variables(tiny_config):
        np.testing.assert_array_equal(ours.get_tensor(name), original.get_tensor(name))


# ------------------------------------------------------------------ release directories
def test_release_directory_loads_in_one_call(tmp_path, fixture_inputs, fixture_outputs):
    # The layout of e.g. albert_base_v2.tar.gz: albert_base/{albert_config.json,
    # 30k-clean.model, 30k-clean.vocab, model.ckpt-best.*}.
    release = tmp_path / "albert_base"
    copy_checkpoint(release)
    shutil.copy(FIXTURE_DIR / "albert_config.json", release)
    (release / "30k-clean.model").write_bytes(b"placeholder")
    (release / "30k-clean.vocab").write_text("<pad>\t0\n")
    files = find_release_files(release)
    assert files.checkpoint == str(release / "model.ckpt-best")
    assert files.spm_model_file == str(release / "30k-clean.model")
    assert files.vocab_file == str(release / "30k-clean.vocab")

    model = AlbertPretrainer.from_release(release)
    assert model.config == AlbertConfig.from_json_file(FIXTURE_DIR / "albert_config.json")
    out = model(model_inputs(fixture_inputs))
    log_probs = tf.nn.log_softmax(out["mlm_logits"]).numpy().reshape(-1, 211)
    np.testing.assert_allclose(log_probs, fixture_outputs["mlm_log_probs"], atol=1e-5, rtol=0)
    assert model.load_report.missing == []


def test_chinese_release_layout_finds_the_wordpiece_vocab(tmp_path):
    release = tmp_path / "albert_base_zh"
    copy_checkpoint(release)
    shutil.copy(FIXTURE_DIR / "albert_config.json", release)
    (release / "vocab_chinese.txt").write_text("[PAD]\n[UNK]\n")
    files = find_release_files(release)
    assert files.vocab_file == str(release / "vocab_chinese.txt")
    assert files.spm_model_file is None


def test_release_directory_errors(tmp_path):
    with pytest.raises(CheckpointError, match=f"release directory {tmp_path}/x does not"):
        find_release_files(tmp_path / "x")
    copy_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="has no albert_config.json"):
        find_release_files(tmp_path)


def test_tf2_object_checkpoints_restore_every_weight(tmp_path, tiny_config):
    # Training checkpoints are object-based (tf.train.Checkpoint): every group and inner
    # group must be reachable from the model, not only through Keras' own tracking.
    source = AlbertPretrainer(tiny_config, seed=1)
    path = tf.train.Checkpoint(model=source).save(str(tmp_path / "ckpt"))
    target = AlbertPretrainer(tiny_config, seed=2)
    tf.train.Checkpoint(model=target).restore(path).assert_consumed()
    for a, b in zip(source.weights, target.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


# ------------------------------------------------------------------ optimizer state
class SlotNamingOptimizer:
    """Any object that names its TF1 state: all the checkpoint code asks of an optimizer
    (this module knows nothing of albert_tf.training)."""

    def __init__(self, model):
        kernel = next(w for w in model.weights if w.path == "bert/pooler/dense/kernel")
        self.variables = {
            "bert/pooler/dense/kernel/adam_m": keras.Variable(np.zeros(kernel.shape)),
            "bert/pooler/dense/kernel/adam_v": keras.Variable(np.zeros(kernel.shape)),
            "global_step": keras.Variable(0, dtype="int64"),
        }

    def tf1_variables(self, model):
        return dict(self.variables)


class Wrapper:
    """Like keras.optimizers.LossScaleOptimizer: the real optimizer inside."""

    def __init__(self, inner):
        self.inner_optimizer = inner


def test_optimizer_state_comes_from_the_optimizers_own_names(tmp_path, tiny_config):
    model = AlbertPretrainer(tiny_config)
    report = load_tf1_checkpoint(model, FIXTURE_CHECKPOINT,
                                 optimizer=Wrapper(SlotNamingOptimizer(model)))
    assert report.optimizer_loaded == ["bert/pooler/dense/kernel/adam_m",
                                       "bert/pooler/dense/kernel/adam_v", "global_step"]
    assert len(report.skipped) == 161 - 3 and report.optimizer_missing == []
    original = tf.train.load_checkpoint(FIXTURE_CHECKPOINT)
    optimizer = SlotNamingOptimizer(model)
    load_tf1_checkpoint(model, FIXTURE_CHECKPOINT, optimizer=optimizer)
    np.testing.assert_array_equal(optimizer.variables["bert/pooler/dense/kernel/adam_v"],
                                  original.get_tensor("bert/pooler/dense/kernel/adam_v"))
    step = int(original.get_tensor("global_step"))
    assert int(optimizer.variables["global_step"].numpy()) == step

    path = save_tf1_checkpoint(model, str(tmp_path / "model.ckpt"), optimizer=optimizer)
    saved = list_checkpoint_variables(path)
    assert "bert/pooler/dense/kernel/adam_m" in saved and "global_step" in saved
    assert int(tf.train.load_checkpoint(path).get_tensor("global_step")) == step
    with pytest.raises(TypeError, match="names its slots with tf1_variables.*not object"):
        load_tf1_checkpoint(model, FIXTURE_CHECKPOINT, optimizer=object())


def test_a_failed_save_leaves_no_files(tmp_path, tiny_config, monkeypatch):
    model = AlbertPretrainer(tiny_config)
    save = tf.raw_ops.SaveV2

    def save_then_fail(**kwargs):  # both files written under the temporary name
        save(**kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", save_then_fail)
    with pytest.raises(OSError, match="disk full"):
        save_tf1_checkpoint(model, str(tmp_path / "model.ckpt"))
    assert os.listdir(tmp_path) == []


def test_a_training_runs_directory_gives_the_tf1_checkpoint_it_kept(tmp_path, tiny_config):
    """A run's output_dir names its object-based ckpt-N (for resuming); as weights to
    start from (pretraining, then fine-tuning on its directory) it gives the TF1
    checkpoint the run kept: model.ckpt-best, else the newest model.ckpt-<step>."""
    from albert_tf.checkpoints import describe_checkpoint

    run = tmp_path / "run"
    model = AlbertPretrainer(tiny_config, seed=0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run), 3)
    manager.save(checkpoint_number=20)
    with pytest.raises(CheckpointError, match="object-based checkpoint .* use the run's "
                                              "model.ckpt"):
        describe_checkpoint(run)  # nothing TF1 kept beside it
    for step in (10, 20):
        save_tf1_checkpoint(model, str(run / f"model.ckpt-{step}"))
    assert describe_checkpoint(run).checkpoint == str(run / "model.ckpt-20")
    save_tf1_checkpoint(model, str(run / "model.ckpt-best"))
    files = describe_checkpoint(run)
    assert (files.checkpoint, files.layout) == (str(run / "model.ckpt-best"), "google")
    report = load_checkpoint(AlbertPretrainer(tiny_config, seed=1), run)
    assert report.missing == [] and report.checkpoint == str(run / "model.ckpt-best")
