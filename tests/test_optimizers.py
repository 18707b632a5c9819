"""LAMB and AdamW of the original google-research/albert: the schedule, the update, the TF1
optimizer state, TF2 checkpoints, tf.function / XLA and tf.distribute.

The reference is `fixtures/albert_tf1_tiny_grouped/after_2_steps_{lamb,adamw}`: what the
ORIGINAL `optimization.create_optimizer` reached after two steps on the fixture batch
from `model.ckpt` (zero slots, global_step 0), init_lr 1e-2, num_train_steps 10.
"""

import json
import os
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR, model_inputs

from albert_tf import (
    AlbertPretrainer,
    CheckpointError,
    load_tf1_checkpoint,
    losses,
    save_tf1_checkpoint,
)
from albert_tf.training.optimizers import (
    AdamWeightDecay,
    Lamb,
    WarmupPolynomialDecay,
    create_optimizer,
    tf1_optimizer_variables,
)
from tests.helpers.forked import run_python

# Slots are linear (m) or quadratic (v) in the clipped gradients: they match the original
# to ~3e-8. Weights go through Adam's m / (sqrt(v) + 1e-6), which gives a near-zero
# gradient (e.g. an attention key bias, mathematically zero) a step of lr times its float
# noise's sign: the original's own float32 weights are 1.3e-5 away from a float64 run of
# the same steps. We measure 9.6e-6 (AdamW) and 4.9e-6 (LAMB) here (oneDNN on; 3.8e-5 with
# TF_ENABLE_ONEDNN_OPTS=0), against weight changes of ~1e-2 per step.
SLOT_ATOL = 1e-6
LOSS_ATOL = 1e-5
WEIGHT_ATOL = 5e-5


def reference_schedule(step, init_lr, num_train_steps, num_warmup_steps=0,
                       start_warmup_step=0, poly_power=1.0):
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps) ** poly_power
    if num_warmup_steps and step - start_warmup_step < num_warmup_steps:
        return init_lr * max(step - start_warmup_step, 0) / num_warmup_steps
    return decayed


def train_step(model, optimizer, features):
    """One step as the original's train op: loss, gradients, (clip,) apply, step + 1."""
    with tf.GradientTape() as tape:
        total, _, _ = losses.pretraining_loss(
            model(model_inputs(features), training=True), features)
    grads = tape.gradient(total, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return float(total)


def fixture_model(tiny_config, name, **kwargs):
    model = AlbertPretrainer(tiny_config)
    optimizer = create_optimizer(1e-2, 10, 0, optimizer=name, **kwargs)
    report = load_tf1_checkpoint(model, FIXTURE_CHECKPOINT, strict=True, optimizer=optimizer)
    return model, optimizer, report


def max_differences(model, optimizer, expected_prefix):
    reader = tf.train.load_checkpoint(expected_prefix)
    names = set(reader.get_variable_to_shape_map())
    state = tf1_optimizer_variables(optimizer, model)
    ours = {w.path: w for w in model.weights} | state
    assert set(ours) == names  # every weight, every slot and the step: nothing else
    weights = max(np.abs(reader.get_tensor(w.path) - w.numpy()).max() for w in model.weights)
    slots = max(np.abs(reader.get_tensor(n) - np.asarray(v)).max()
                for n, v in state.items() if n != "global_step")
    return weights, slots, int(reader.get_tensor("global_step"))


# ------------------------------------------------------------------------ schedule
@pytest.mark.parametrize("kwargs", [
    dict(init_lr=1e-2, num_train_steps=10),
    dict(init_lr=1e-3, num_train_steps=20, num_warmup_steps=5),
    dict(init_lr=5e-4, num_train_steps=30, num_warmup_steps=6, start_warmup_step=4),
    dict(init_lr=2e-3, num_train_steps=12, num_warmup_steps=3, poly_power=2.0),
])
def test_schedule_is_the_originals_warmup_and_polynomial_decay(kwargs):
    schedule = WarmupPolynomialDecay(**kwargs)
    steps = range(0, kwargs["num_train_steps"] + 5)
    got = [float(schedule(tf.constant(s, tf.int64))) for s in steps]
    want = [reference_schedule(s, **kwargs) for s in steps]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    assert got[-1] == 0.0  # decayed to 0 and stays there
    if kwargs.get("num_warmup_steps"):
        start = kwargs.get("start_warmup_step", 0)
        assert got[start] == 0.0 and got[start + 1] > 0.0  # warmup starts at its step
        end = start + kwargs["num_warmup_steps"]
        assert got[end] == pytest.approx(reference_schedule(end, **kwargs), rel=1e-6)
    # Serializable, and the same schedule comes back.
    again = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert again.get_config() == schedule.get_config()
    assert float(again(tf.constant(3))) == got[3]


def test_schedule_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_train_steps"):
        WarmupPolynomialDecay(1e-3, 0)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        WarmupPolynomialDecay(1e-3, 10, -1)
    with pytest.raises(ValueError, match="init_lr"):
        WarmupPolynomialDecay(-1.0, 10)


def test_the_update_uses_the_rate_of_the_step_it_produces(tiny_config):
    # The original's global_step increment is not ordered after its learning-rate read,
    # and runs first: from step 0 its two updates used 9e-3 and 8e-3 (the fixture).
    optimizer = create_optimizer(1e-2, 10, 0)
    assert float(optimizer.learning_rate) == pytest.approx(9e-3, rel=1e-6)
    optimizer.iterations.assign(1)
    assert float(optimizer.learning_rate) == pytest.approx(8e-3, rel=1e-6)
    keras_convention = create_optimizer(1e-2, 10, 0, schedule_step_offset=0)
    assert float(keras_convention.learning_rate) == pytest.approx(1e-2, rel=1e-6)


# ----------------------------------------------------------------------- optimizers
def test_create_optimizer_settings_and_errors():
    lamb = create_optimizer(1e-3, 100, 10, optimizer="lamb")
    adamw = create_optimizer(1e-3, 100, 10)
    assert isinstance(lamb, Lamb) and isinstance(adamw, AdamWeightDecay)
    for optimizer in (lamb, adamw):
        config = optimizer.get_config()
        assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.999, 1e-6)
        assert config["weight_decay_rate"] == 0.01 and config["clip_norm"] == 1.0
        assert config["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]
        restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
        assert type(restored) is type(optimizer)
        assert restored.get_config() == config
    assert lamb.get_config()["exclude_from_layer_adaptation"] == [
        "LayerNorm", "layer_norm", "bias"]
    with pytest.raises(ValueError, match="unknown optimizer 'sgd': choose one of adamw, lamb"):
        create_optimizer(1e-3, 100, 10, optimizer="sgd")
    with pytest.raises(ValueError, match="weight_decay_rate"):
        AdamWeightDecay(1e-3, weight_decay=0.1)
    with pytest.raises(ValueError, match="clip_norm"):
        Lamb(1e-3, global_clipnorm=1.0)


def test_weight_decay_and_layer_adaptation_exclusions_by_tf1_name(tiny_config):
    model = AlbertPretrainer(tiny_config)
    lamb = create_optimizer(1e-3, 10, 0, optimizer="lamb")
    lamb.build(model.trainable_variables)
    decayed = {v.path for v in model.trainable_variables if lamb.uses_weight_decay(v)}
    adapted = {v.path for v in model.trainable_variables if lamb.uses_layer_adaptation(v)}
    excluded = {v.path for v in model.trainable_variables} - decayed
    assert decayed == adapted  # the original's LAMB default
    assert "bert/embeddings/word_embeddings" in decayed
    assert "cls/seq_relationship/output_weights" in decayed
    assert "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel" \
        in decayed
    assert "cls/predictions/output_bias" in excluded
    assert "bert/encoder/transformer/group_1/inner_group_1/LayerNorm_1/gamma" in excluded
    assert all("LayerNorm" in n or n.endswith("bias") for n in excluded)
    assert len(decayed) == 31 and len(excluded) == 49  # 24 + 3 + 4 matrices
    # Names alone, and a separate layer-adaptation list.
    custom = Lamb(1e-3, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"],
                  exclude_from_layer_adaptation=["pooler"])
    assert not custom.uses_weight_decay("bert/pooler/dense/bias")
    assert custom.uses_weight_decay("bert/pooler/dense/kernel")
    assert not custom.uses_layer_adaptation("bert/pooler/dense/kernel")
    assert custom.uses_layer_adaptation("cls/predictions/output_bias")
    assert not AdamWeightDecay(1e-3).uses_weight_decay("any/kernel")  # rate 0: no decay


def numpy_update(kind, w, g, m, v, lr, decay):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    update = m / (np.sqrt(v) + 1e-6) + (0.01 * w if decay else 0.0)
    ratio = 1.0
    if kind == "lamb" and decay:
        ratio = np.linalg.norm(w) / np.linalg.norm(update)
    return w - ratio * lr * update, m, v


@pytest.mark.parametrize("kind", ["adamw", "lamb"])
def test_one_update_equals_the_formula_with_clipping(kind):
    rng = np.random.default_rng(0)
    with keras.name_scope("layer", override_parent=""):
        kernel = keras.Variable(rng.normal(size=(4, 3)).astype("float32"), name="kernel")
        table = keras.Variable(rng.normal(size=(5, 3)).astype("float32"), name="table")
        with keras.name_scope("LayerNorm"):
            gamma = keras.Variable(rng.normal(size=(3,)).astype("float32") + 1, name="gamma")
    assert kernel.path == "layer/kernel" and gamma.path == "layer/LayerNorm/gamma"
    variables = [kernel, gamma, table]
    optimizer = create_optimizer(1e-2, 10, 0, optimizer=kind)
    optimizer.build(variables)
    slots = tf1_optimizer_variables(optimizer)
    start = {n: rng.normal(size=s.shape).astype("float32") for n, s in slots.items()
             if n != "global_step"}
    for name, value in start.items():
        slots[name].assign(np.abs(value) if name.endswith("adam_v") else value)
    optimizer.iterations.assign(3)
    # A gather gradient with a repeated row: the original clips on its slices.
    rows = tf.IndexedSlices(tf.constant(rng.normal(size=(3, 3)).astype("float32")),
                            tf.constant([1, 4, 1]), tf.constant([5, 3]))
    grads = [tf.constant(rng.normal(size=(4, 3)).astype("float32")),
             tf.constant(rng.normal(size=(3,)).astype("float32")), rows]
    before = {v.path: v.numpy() for v in variables}
    state = {n: s.numpy() for n, s in slots.items()}
    optimizer.apply_gradients(zip(grads, variables))

    norm = np.sqrt(sum(np.sum(np.square(tf.convert_to_tensor(
        g.values if isinstance(g, tf.IndexedSlices) else g).numpy())) for g in grads))
    assert norm > 1.0  # clipping is active
    lr = reference_schedule(4, 1e-2, 10)  # the step it produces
    for variable, grad in zip(variables, grads):
        name = variable.path
        dense = tf.convert_to_tensor(grad).numpy() / norm
        w, m, v = numpy_update(kind, before[name], dense, state[f"{name}/adam_m"],
                               state[f"{name}/adam_v"], lr, decay="LayerNorm" not in name)
        np.testing.assert_allclose(variable.numpy(), w, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(slots[f"{name}/adam_m"].numpy(), m, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(slots[f"{name}/adam_v"].numpy(), v, rtol=1e-6, atol=1e-9)
    assert int(optimizer.iterations) == 4


def test_a_variable_excluded_from_decay_is_not_decayed():
    with keras.name_scope("scope", override_parent=""):
        kernel = keras.Variable(np.full((2, 2), 0.5, "float32"), name="kernel")
        bias = keras.Variable(np.full((2,), 0.5, "float32"), name="bias")
    optimizer = AdamWeightDecay(0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"])
    optimizer.apply_gradients([(tf.zeros((2, 2)), kernel), (tf.zeros((2,)), bias)])
    np.testing.assert_allclose(kernel.numpy(), 0.5 - 0.1 * 0.01 * 0.5, rtol=1e-7)
    np.testing.assert_array_equal(bias.numpy(), 0.5)


# ----------------------------------------------------- the original's two steps
@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_two_steps_equal_the_original(tiny_config, fixture_inputs, name):
    model, optimizer, report = fixture_model(tiny_config, name)
    assert len(report.optimizer_loaded) == 2 * 80 + 1 and not report.optimizer_missing
    assert int(optimizer.iterations) == 0  # model.ckpt is at global_step 0
    got = [train_step(model, optimizer, fixture_inputs) for _ in range(2)]
    expected = np.load(FIXTURE_DIR / f"after_2_steps_{name}" / "losses.npz")["losses"]
    np.testing.assert_allclose(got, expected, atol=LOSS_ATOL, rtol=0)
    weights, slots, step = max_differences(
        model, optimizer, str(FIXTURE_DIR / f"after_2_steps_{name}" / "model.ckpt-2"))
    assert int(optimizer.iterations) == step == 2
    assert slots <= SLOT_ATOL, slots
    assert weights <= WEIGHT_ATOL, weights


def test_the_fixture_tells_the_learning_rate_and_the_clip_apart(tiny_config, fixture_inputs):
    # Learning rates 1e-2 then 9e-3 (the schedule at the step before each update), or
    # a clip on densified gradients, are far from what the original did.
    model, optimizer, _ = fixture_model(tiny_config, "adamw", schedule_step_offset=0)
    for _ in range(2):
        train_step(model, optimizer, fixture_inputs)
    prefix = str(FIXTURE_DIR / "after_2_steps_adamw" / "model.ckpt-2")
    weights, slots, _ = max_differences(model, optimizer, prefix)
    assert weights > 100 * WEIGHT_ATOL and slots > 100 * SLOT_ATOL

    model, optimizer, _ = fixture_model(tiny_config, "adamw")
    for _ in range(2):
        with tf.GradientTape() as tape:
            total, _, _ = losses.pretraining_loss(
                model(model_inputs(fixture_inputs), training=True), fixture_inputs)
        grads = tape.gradient(total, model.trainable_variables)
        grads = [tf.convert_to_tensor(g) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    weights, slots, _ = max_differences(model, optimizer, prefix)
    assert slots > 5 * SLOT_ATOL  # 1.3e-5: the norm counts each token type slice


# ------------------------------------------------------------ TF1 optimizer state
def test_tf1_optimizer_state_saves_and_loads_under_the_original_names(
        tiny_config, fixture_inputs, tmp_path):
    model, optimizer, _ = fixture_model(tiny_config, "lamb")
    train_step(model, optimizer, fixture_inputs)
    path = save_tf1_checkpoint(model, str(tmp_path / "model.ckpt-1"), optimizer=optimizer)
    saved = tf.train.load_checkpoint(path)
    # Exactly the layout of the original's checkpoints (names, shapes, int64 step).
    assert saved.get_variable_to_shape_map() == \
        tf.train.load_checkpoint(FIXTURE_CHECKPOINT).get_variable_to_shape_map()
    assert saved.get_variable_to_dtype_map()["global_step"] == tf.int64
    assert int(saved.get_tensor("global_step")) == 1
    np.testing.assert_array_equal(
        saved.get_tensor("bert/pooler/dense/kernel/adam_v"),
        tf1_optimizer_variables(optimizer)["bert/pooler/dense/kernel/adam_v"].numpy())

    fresh = AlbertPretrainer(tiny_config)
    fresh_optimizer = create_optimizer(1e-2, 10, 0, optimizer="lamb")
    report = load_tf1_checkpoint(fresh, path, strict=True, optimizer=fresh_optimizer)
    assert report.skipped == [] and len(report.optimizer_loaded) == 161
    assert "optimizer: loaded 161 entries, missing 0" in str(report)
    assert int(fresh_optimizer.iterations) == 1
    ours, theirs = tf1_optimizer_variables(optimizer), tf1_optimizer_variables(fresh_optimizer)
    for name in ours:
        np.testing.assert_array_equal(np.asarray(theirs[name]), np.asarray(ours[name]))
    # Both continue identically.
    train_step(model, optimizer, fixture_inputs)
    train_step(fresh, fresh_optimizer, fixture_inputs)
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_missing_optimizer_state_is_reported_or_refused(tiny_config, tmp_path):
    model = AlbertPretrainer(tiny_config)
    path = save_tf1_checkpoint(model, str(tmp_path / "weights-only"))  # no slots, no step
    optimizer = create_optimizer(1e-3, 10, 0)
    with pytest.raises(CheckpointError, match=r"lacks 161 variables that albert_pretrainer "
                                              r"and its optimizer need \(strict=True\)"):
        load_tf1_checkpoint(model, path, strict=True, optimizer=optimizer)
    report = load_tf1_checkpoint(model, path, optimizer=optimizer)
    assert len(report.loaded) == 80 and len(report.optimizer_missing) == 161
    assert "global_step" in report.optimizer_missing
    # Without optimizer=, slots and step stay skipped as before.
    plain = load_tf1_checkpoint(model, FIXTURE_CHECKPOINT)
    assert plain.optimizer_loaded == [] and len(plain.skipped) == 161
    with pytest.raises(TypeError, match="AdamWeightDecay or Lamb, not Adam"):
        tf1_optimizer_variables(keras.optimizers.Adam(), model)
    with pytest.raises(ValueError, match="not built"):
        tf1_optimizer_variables(create_optimizer(1e-3, 10, 0))


# ------------------------------------------------------------ TF2 checkpoints, XLA
def test_tf2_checkpoint_round_trip_continues_identically(tiny_config, fixture_inputs,
                                                         tmp_path):
    model, optimizer, _ = fixture_model(tiny_config, "adamw")
    train_step(model, optimizer, fixture_inputs)
    path = tf.train.Checkpoint(model=model, optimizer=optimizer).write(str(tmp_path / "ckpt"))
    saved = {n: np.asarray(v).copy() for n, v in tf1_optimizer_variables(optimizer).items()}
    assert np.abs(saved["bert/pooler/dense/kernel/adam_m"]).max() > 0
    train_step(model, optimizer, fixture_inputs)

    fresh = AlbertPretrainer(tiny_config)
    fresh_optimizer = create_optimizer(1e-2, 10, 0, optimizer="adamw")
    fresh_optimizer.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=fresh_optimizer).read(
        path).assert_existing_objects_matched()
    restored = tf1_optimizer_variables(fresh_optimizer)
    for name, value in saved.items():  # every slot and the step
        np.testing.assert_array_equal(np.asarray(restored[name]), value)
    assert int(fresh_optimizer.iterations) == 1
    train_step(fresh, fresh_optimizer, fixture_inputs)
    assert int(fresh_optimizer.iterations) == 2
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    ours, theirs = tf1_optimizer_variables(optimizer), tf1_optimizer_variables(fresh_optimizer)
    for name in ours:
        np.testing.assert_array_equal(np.asarray(theirs[name]), np.asarray(ours[name]))


def test_apply_inside_tf_function_and_with_xla_equals_eager(tiny_config, fixture_inputs):
    model = AlbertPretrainer(tiny_config)
    load_tf1_checkpoint(model, FIXTURE_CHECKPOINT, strict=True)
    with tf.GradientTape() as tape:
        total, _, _ = losses.pretraining_loss(
            model(model_inputs(fixture_inputs), training=True), fixture_inputs)
    grads = tape.gradient(total, model.trainable_variables)
    assert any(isinstance(g, tf.IndexedSlices) for g in grads)  # token types: a gather
    start = [v.numpy() for v in model.trainable_variables]
    results = {}
    for mode in ("eager", "tf.function", "jit_compile"):
        for variable, value in zip(model.trainable_variables, start):
            variable.assign(value)
        optimizer = create_optimizer(1e-2, 10, 0, optimizer="lamb")
        optimizer.build(model.trainable_variables)  # slots exist before tracing

        def apply(grads, optimizer=optimizer):
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        if mode != "eager":
            apply = tf.function(apply, jit_compile=mode == "jit_compile")
        for _ in range(2):
            apply(grads)
        assert int(optimizer.iterations) == 2
        results[mode] = [v.numpy() for v in model.trainable_variables] + [
            np.asarray(s) for s in tf1_optimizer_variables(optimizer).values()]
    assert max(np.abs(a - b).max() for a, b in zip(results["eager"], start)) > 1e-3
    for mode in ("tf.function", "jit_compile"):
        for eager, compiled in zip(results["eager"], results[mode]):
            np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- tf.distribute
MIRRORED_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf import AlbertConfig, AlbertPretrainer, losses, names
    from albert_tf.training.optimizers import create_optimizer, tf1_optimizer_variables

    fixture = sys.argv[1]
    # One transformer block (as few variables and ops as can be: tracing is the cost).
    config = AlbertConfig.from_json_file(os.path.join(fixture, "albert_config.json")).replace(
        num_hidden_layers=1, num_hidden_groups=1, inner_group_num=1)
    features = dict(np.load(os.path.join(fixture, "inputs.npz")))

    def inputs(f):
        wanted = (*names.MODEL_INPUTS, names.MASKED_LM_POSITIONS)
        return {k: v for k, v in names.to_model_inputs(f).items() if k in wanted}

    def state(model, optimizer):
        return [v.numpy() for v in model.weights] + [
            np.asarray(v) for v in tf1_optimizer_variables(optimizer, model).values()]

    out = {}
    for name in ("lamb", "adamw"):
        # One device, the whole batch.
        model = AlbertPretrainer(config, seed=1)
        optimizer = create_optimizer(1e-2, 10, 0, optimizer=name)
        for _ in range(2):
            with tf.GradientTape() as tape:
                total, _, _ = losses.pretraining_loss(
                    model(inputs(features), training=True), features)
            grads = tape.gradient(total, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        single = state(model, optimizer)

        # Two replicas: examples [0, 1] and [2]; each replica's loss divides by the
        # global denominators, so the replicas' gradients add up to the batch's.
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = AlbertPretrainer(config, seed=1)
            optimizer = create_optimizer(1e-2, 10, 0, optimizer=name)
            optimizer.build(model.trainable_variables)
        weight_sum = float(features["masked_lm_weights"].sum()) + 1e-5
        batch = float(len(features["input_ids"]))
        parts = [{k: v[:2] for k, v in features.items()},
                 {k: v[2:] for k, v in features.items()}]
        per_replica = strategy.experimental_distribute_values_from_function(
            lambda context: parts[context.replica_id_in_sync_group])

        def replica_step(f):
            with tf.GradientTape() as tape:
                outputs = model(inputs(f), training=True)
                log_probs = tf.nn.log_softmax(outputs["mlm_logits"])
                nll = -tf.gather(log_probs, f["masked_lm_ids"], batch_dims=2)
                mlm = tf.reduce_sum(f["masked_lm_weights"] * nll) / weight_sum
                sop_log_probs = tf.nn.log_softmax(outputs["sop_logits"])
                labels = tf.reshape(f["next_sentence_labels"], [-1])
                sop = -tf.reduce_sum(tf.gather(sop_log_probs, labels, batch_dims=1)) / batch
                loss = mlm + sop
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        @tf.function
        def step(f):
            strategy.run(replica_step, args=(f,))

        for _ in range(2):
            step(per_replica)
        mirrored = state(model, optimizer)
        n_weights = len(model.weights)
        diffs = [float(np.abs(a - b).max()) for a, b in zip(single, mirrored)]
        out[name] = {"replicas": strategy.num_replicas_in_sync,
                     "norm": float(tf.linalg.global_norm(grads)),
                     "weights": max(diffs[:n_weights]),
                     "slots": max(diffs[n_weights:]),
                     "step": int(optimizer.iterations.numpy())}
    print("RESULT" + json.dumps(out))
""")


def test_mirrored_strategy_on_two_devices_equals_one_device(tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(MIRRORED_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = run_python([script, FIXTURE_DIR], env=env, timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT"):])
    for name in ("lamb", "adamw"):
        assert result[name]["replicas"] == 2 and result[name]["step"] == 2
        assert result[name]["norm"] > 1.0  # the clip is active
        # Clipping after the all-reduce: a per-replica clip moves the slots by ~2e-2.
        assert result[name]["slots"] <= SLOT_ATOL, result
        assert result[name]["weights"] <= WEIGHT_ATOL, result
