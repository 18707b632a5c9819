"""Keras' own conventions on the package's models: the `.keras` file format
(`model.save` / `keras.models.load_model`) for every kind of model and a task file's
own, with weights, dtype policy, `recompute` and the optimizer's state; every layer's
`get_config` / `from_config`."""

import pathlib

import keras
import numpy as np
import pytest

from albert_tf import tasks
from albert_tf.errors import UserError
from albert_tf.modeling import common
from tests.helpers.tiny import random_inputs, tiny_config

CONFIG = tiny_config()
EXAMPLE_TASK = pathlib.Path(__file__).parent.parent / "examples" / "mean_pool_classifier.py"

# kind -> the model's arguments beyond the config: every registered model, regression
# (a one-label classifier) too.
KINDS = {
    "encoder": {}, "mlm": {}, "classifier": {"num_labels": 3},
    "regression": {"num_labels": 1}, "multi_label": {"num_labels": 4, "threshold": 0.3},
    "multiple_choice": {"num_choices": 2}, "squad_v1": {},
    "squad_v2": {"start_n_top": 3, "end_n_top": 2}, "token_classifier": {"num_labels": 5},
}


def model_inputs(kind, seed=0):
    inputs = random_inputs(CONFIG, 2, 7, seed, min_length=4, second_segment_from=3,
                           num_choices=2 if kind == "multiple_choice" else None,
                           masked_lm_predictions=2 if kind == "mlm" else None)
    if kind == "squad_v2":  # no answer in the question or the padding
        inputs["p_mask"] = (1 - inputs["input_mask"]).astype(np.float32)
        inputs["p_mask"][:, :3] = 1
    return inputs


def build(kind, **kwargs):
    """A model of `kind` without a seed (so that rebuilding it from its config cannot
    give its weights back), its weights moved off their initial values."""
    name = "classifier" if kind == "regression" else kind
    model = tasks.models()[name](CONFIG, **KINDS[kind], **kwargs)
    rng = np.random.default_rng(7)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.05, variable.shape).astype(
            variable.numpy().dtype))
    return model


def outputs(model, inputs):
    """The model's outputs as NumPy (lists of tensors flattened in order)."""
    out = {}
    for name, value in model(inputs).items():
        for i, v in enumerate(value if isinstance(value, list) else [value]):
            out[f"{name}/{i}"] = np.asarray(v)
    return out


def assert_same_model(a, b):
    assert type(a) is type(b) and a.get_config() == b.get_config()
    assert [v.path for v in a.weights] == [v.path for v in b.weights]
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_round_trips_through_a_keras_file(kind, tmp_path):
    model = build(kind)
    inputs = model_inputs(kind)
    expected = outputs(model, inputs)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert_same_model(model, loaded)
    got = outputs(loaded, inputs)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6,
                                   err_msg=name)


FRESH_LOAD = """
import json, sys
import numpy as np
import albert_tf  # noqa: F401  (and nothing else of the package)
import keras

folder = sys.argv[1]
for kind in json.loads(sys.argv[2]):
    model = keras.models.load_model(f"{folder}/{kind}.keras")
    inputs = dict(np.load(f"{folder}/{kind}_inputs.npz"))
    expected = np.load(f"{folder}/{kind}_outputs.npz")
    for name, value in model(inputs).items():
        for i, v in enumerate(value if isinstance(value, list) else [value]):
            np.testing.assert_allclose(np.asarray(v), expected[f"{name}/{i}"], rtol=0,
                                       atol=1e-6, err_msg=f"{kind}: {name}/{i}")
    print(kind, type(model).__name__)
"""


def test_every_kinds_keras_file_loads_in_a_fresh_process(tmp_path):
    # `import albert_tf` registers every model of the task registry with Keras: no
    # custom objects, no import of a task module (a new interpreter, nothing preloaded).
    import json

    # (and a classifier quantized by Keras: its int8 layers made again when loaded)
    import warnings

    from tests.helpers.forked import run_python

    files = [*KINDS, "classifier_int8"]
    for name in files:
        kind = name.removesuffix("_int8")
        model = build(kind)
        if name != kind:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.quantize("int8")
        inputs = model_inputs(kind)
        np.savez(tmp_path / f"{name}_inputs.npz", **inputs)
        np.savez(tmp_path / f"{name}_outputs.npz", **outputs(model, inputs))
        model.save(tmp_path / f"{name}.keras")
    done = run_python(["-c", FRESH_LOAD, tmp_path, json.dumps(files)], fresh=True,
                      timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = dict(line.split() for line in done.stdout.splitlines())
    assert sorted(loaded) == sorted(files) and loaded["multi_label"] == \
        "AlbertMultiLabelClassifier" and loaded["classifier_int8"] == "AlbertClassifier"


def test_dtype_policy_recompute_and_optimizer_state_come_back(tmp_path):
    """A classifier recomputing each layer, compiled with the original's AdamW and
    trained a step: loaded from its file it has the same `recompute` and optimizer (its
    slots and step) and, trained one more step on the same batch, the weights of the
    model that was saved (no dropout: its masks are drawn from each model's own
    generator). A mixed_bfloat16 model comes back with its policy and its outputs."""
    from albert_tf.training.optimizers import AdamWeightDecay

    model = build("classifier", recompute="layer", dropout_rate=0.0)
    inputs, labels = model_inputs("classifier"), {"logits": np.array([0, 2])}
    model.compile(optimizer=AdamWeightDecay(1e-2, weight_decay_rate=0.01),
                  loss={"logits": keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True)})
    model.fit(inputs, labels, epochs=1, verbose=0)
    model.save(tmp_path / "trained.keras")
    loaded = keras.models.load_model(tmp_path / "trained.keras")
    assert loaded.recompute == "layer" and type(loaded.optimizer) is AdamWeightDecay
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    assert int(loaded.optimizer.iterations.numpy()) == 1
    assert_same_model(model, loaded)
    slots = {v.path: v.numpy() for v in model.optimizer.variables}
    assert len(slots) > 2 * len(model.trainable_weights)
    assert sorted(v.path for v in loaded.optimizer.variables) == sorted(slots)
    for variable in loaded.optimizer.variables:
        np.testing.assert_array_equal(variable.numpy(), slots[variable.path],
                                      err_msg=variable.path)
    model.fit(inputs, labels, epochs=1, verbose=0)
    loaded.fit(inputs, labels, epochs=1, verbose=0)
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=1e-6, err_msg=a.path)

    mixed = build("classifier", dtype="mixed_bfloat16")
    expected = outputs(mixed, inputs)
    mixed.save(tmp_path / "mixed.keras")
    loaded = keras.models.load_model(tmp_path / "mixed.keras")
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    assert {w.dtype for w in loaded.weights} == {"float32"}
    assert_same_model(mixed, loaded)
    for name, value in outputs(loaded, inputs).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_a_task_files_own_model_round_trips_once_the_file_is_loaded(tmp_path):
    """examples/mean_pool_classifier.py's model: registered when its class is defined
    (under its module's name), loaded back from a .keras file once the task file is."""
    task = tasks.load_task_module(EXAMPLE_TASK)
    model_class = task.serving_kinds[0].model_class
    assert keras.saving.get_registered_name(model_class) == \
        "albert_tf_user_task_mean_pool_classifier>MeanPoolClassifier"
    model = model_class(CONFIG, num_labels=2)
    inputs = model_inputs("classifier")
    expected = outputs(model, inputs)
    model.save(tmp_path / "mean_pool.keras")
    loaded = keras.models.load_model(tmp_path / "mean_pool.keras")
    assert_same_model(model, loaded)
    for name, value in outputs(loaded, inputs).items():
        np.testing.assert_allclose(value, expected[name], rtol=0, atol=1e-6)


def test_a_keras_file_is_read_wherever_a_release_is(tmp_path):
    """`from_release`, `--init_checkpoint` and `convert --input` take a model's .keras
    file (tokenizer files beside it), whose model's arguments it holds (`num_labels`, a
    multi-label threshold); a release with the model's head gives its number of labels;
    another package's is refused by name."""
    import shutil

    from albert_tf import AlbertClassifier, AlbertEncoder
    from albert_tf.apps.model_files import complete_model_files, load_config
    from albert_tf.config import ConfigError
    from albert_tf.convert import convert
    from albert_tf.tasks.options import RunOptions
    from tests.helpers.paths import SPM_MODEL

    model = build("classifier")
    model.save(tmp_path / "classifier.keras")
    shutil.copy(SPM_MODEL, tmp_path / "30k-clean.model")
    again = AlbertClassifier.from_release(tmp_path / "classifier.keras")  # 3 labels
    assert again.load_report.layout == "keras" and not again.load_report.unused
    for x, y in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)
    encoder = AlbertEncoder.from_release(tmp_path / "classifier.keras", strict=False)
    assert encoder.load_report.unused == ["output_bias", "output_weights"]
    options = complete_model_files(RunOptions(init_checkpoint=str(
        tmp_path / "classifier.keras")))
    assert (options.init_files.layout, options.spm_model_file) == (
        "keras", str(tmp_path / "30k-clean.model"))
    assert load_config(options.albert_config_file) == CONFIG
    convert(tmp_path / "classifier.keras", tmp_path / "hf")
    hf = AlbertClassifier.from_release(tmp_path / "hf")  # its head's 3 labels
    assert hf.num_labels == 3
    for x, y in zip(model.weights, hf.weights, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)
    tagged = build("multi_label")
    tagged.save(tmp_path / "multi_label.keras")
    from albert_tf import AlbertMultiLabelClassifier

    kept = AlbertMultiLabelClassifier.from_release(tmp_path / "multi_label.keras")
    assert (kept.num_labels, kept.threshold) == (4, 0.3)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    other.save(tmp_path / "other.keras")
    with pytest.raises(ConfigError, match=r"other.keras is a .keras file of "
                                          r"keras.*Sequential, not of an albert_tf model"):
        AlbertEncoder.from_release(tmp_path / "other.keras")


def layers_of(model):
    """Every layer of the package inside `model` (Keras' Dense and friends excluded)."""
    return [layer for layer in model._flatten_layers(include_self=False)
            if isinstance(layer, (common.AlbertLayer, common.LayerNorm, common.Dropout))]


def test_every_layer_is_registered_and_made_again_from_its_config():
    """Each layer of the pretrainer (embeddings, transformer, its groups, blocks,
    attention and FFN, the two heads, LayerNorm, Dropout) is a registered serializable
    whose config makes a layer with the same config; an AlbertLayer made from its
    config draws the same seeds, so it builds the same initial weights."""
    from albert_tf import AlbertPretrainer

    config = tiny_config(hidden_dropout_prob=0.1)
    model = AlbertPretrainer(config, seed=3)
    layers = layers_of(model)
    names = {type(layer).__name__ for layer in layers}
    assert names >= {"AlbertEmbeddings", "AlbertTransformer", "AlbertLayerGroup",
                     "AlbertBlock", "AlbertAttention", "AlbertFeedForward",
                     "MaskedLMHead", "SentenceOrderHead", "LayerNorm", "Dropout"}
    for layer in layers:
        registered = keras.saving.get_registered_name(type(layer))
        assert registered == f"albert_tf>{type(layer).__name__}"
        assert keras.saving.get_registered_object(registered) is type(layer)
        serialized = keras.saving.serialize_keras_object(layer)
        again = keras.saving.deserialize_keras_object(serialized)
        assert type(again) is type(layer) and again.get_config() == layer.get_config()
    embeddings = next(la for la in layers if type(la).__name__ == "AlbertEmbeddings")
    assert embeddings.get_config()["seeds"] == [3, 0]  # the model's first draws
    transformer = next(la for la in layers if type(la).__name__ == "AlbertTransformer")
    again = type(transformer).from_config(transformer.get_config())
    again.build()
    assert [w.shape for w in again.weights] == [w.shape for w in transformer.weights]
    for a, b in zip(again.weights, transformer.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# Keras' own export of each input and output shape: the encoder (its list of layer
# outputs), the pretrainer (masked_lm_positions), multiple choice ([B, C, S]), SQuAD
# v2.0 (a float p_mask; top-k outputs).
EXPORTED = ("encoder", "mlm", "multiple_choice", "squad_v2")


def export_case(model, kind):
    """Inputs of another batch size and length than any before, and the model's
    outputs on them (list outputs one per entry, `tensor_outputs`) computed on the real
    tokens, as every export of the package is traced."""
    from albert_tf.modeling import real_tokens
    from albert_tf.modeling.base import tensor_outputs

    inputs = random_inputs(CONFIG, 3, 11, 5, min_length=5, second_segment_from=4,
                           num_choices=2 if kind == "multiple_choice" else None,
                           masked_lm_predictions=3 if kind == "mlm" else None)
    if kind == "squad_v2":
        inputs["p_mask"] = (1 - inputs["input_mask"]).astype(np.float32)
    with real_tokens.inference_graph():
        expected = {k: np.asarray(v) for k, v in tensor_outputs(model(inputs)).items()}
    return inputs, expected


@pytest.mark.parametrize("kind", EXPORTED)
def test_keras_export_answers_as_the_model(kind, tmp_path):
    """`model.export(path)` (Keras' tf_saved_model) and `model.export(path.tflite,
    format="litert")` on a model never called: each serves the model's outputs (a list
    output as one per entry, `encoder_outputs_0`, ...; computed on the real tokens, as
    every export of the package) on inputs of another batch size and length than any
    before."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    model = build(kind)
    model.export(tmp_path / "saved", verbose=False)
    model.export(tmp_path / "model.tflite", format="litert", verbose=False)
    inputs, expected = export_case(model, kind)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))  # kept: .serve reads its variables
    served = loaded.serve(inputs)
    runner = Interpreter(model_path=str(tmp_path / "model.tflite")).get_signature_runner()
    for got in ({k: np.asarray(v) for k, v in served.items()}, runner(**inputs)):
        assert sorted(got) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("kind", EXPORTED)
def test_keras_onnx_export_answers_as_the_model(kind, tmp_path):
    """`model.export(path.onnx, format="onnx")` (Keras' exporter, through tf2onnx) run by
    ONNX Runtime: the model's outputs to 1e-6. Neither is a dependency of albert_tf:
    the test runs where they are installed (benchmarks/requirements-peers.txt)."""
    for module in ("tf2onnx", "onnx", "onnxruntime"):
        pytest.importorskip(module)
    import onnxruntime

    model = build(kind)
    model.export(tmp_path / "model.onnx", format="onnx", verbose=False)
    inputs, expected = export_case(model, kind)
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"))
    got = session.run(None, {i.name: inputs[i.name] for i in session.get_inputs()})
    names = [o.name for o in session.get_outputs()]
    assert sorted(names) == sorted(expected)
    for name, value in zip(names, got):
        np.testing.assert_allclose(value, expected[name], rtol=0, atol=1e-6, err_msg=name)


def test_keras_int8_quantization_keeps_the_models_answers():
    """`model.quantize("int8")`: every dense kernel int8 with a scale per output, the
    shared blocks multiplying the dequantized kernels (`common.float_kernel`), the
    outputs within the int8 rounding of the float model's; a mode the shared blocks
    cannot read is refused by name."""
    import warnings

    import keras

    keras.utils.set_random_seed(3)  # unseeded, one build in five went past 2%
    model = build("classifier")
    inputs = model_inputs("classifier")
    expected = model(inputs)["logits"].numpy()
    with warnings.catch_warnings():  # LayerNorm and Dropout: nothing to quantize
        warnings.simplefilter("ignore")
        model.quantize("int8")
    kernels = [v for v in model.weights if v.path.endswith("/kernel")]
    assert kernels and all(v.dtype == "int8" for v in kernels)
    got = model(inputs)["logits"].numpy()
    # (the weights' int8 rounding, and Keras' own int8 arithmetic in the projection:
    # 0.2% to 2.2% of the largest logit over 15 unseeded builds)
    np.testing.assert_allclose(got, expected, rtol=0, atol=0.05 * np.abs(expected).max())
    assert not np.array_equal(got, expected)
    with pytest.raises(UserError, match="quantized by Keras .* has no LiteRT export"):
        model.export("never.tflite", format="litert")
    four_bits = build("classifier")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        four_bits.quantize("int4")
    with pytest.raises(ValueError, match="quantization mode 'int4' is not supported"):
        four_bits(inputs)


def test_fit_on_mrpc_ends_with_the_weights_run_classifier_ends_with(tmp_path):
    """`driver.keras_data` (an MRPC-format training split of 240 pairs as the scripts
    batch it: 30 batches, shuffled, so the order counts), the model and optimizer it
    builds as the scripts do, the task's objective as Keras' loss: `model.fit` for the
    run's steps (dropout 0, warmup, decay, clipping, weight decay) ends with the weights
    of `run_classifier.py` on the same options, to float rounding, and so does the
    text classifier's `fit` on the file's strings; `predict` on dev gives its dev
    accuracy."""
    import random

    import tensorflow as tf

    from albert_tf import save_tf1_checkpoint
    from albert_tf.apps import driver
    from albert_tf.tasks.classification import ClassificationTask
    from tests.helpers.scripts import SPM, run_script
    from tests.helpers.tiny import write_tiny_config
    from tests.test_run_classifier import easy_rows

    mrpc = tmp_path / "glue" / "MRPC"
    mrpc.mkdir(parents=True)
    rng = random.Random(5)
    for split, count in (("train", 240), ("dev", 40)):
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i, ((a, label), (b, _)) in enumerate(zip(easy_rows(count, rng),
                                                     easy_rows(count, rng))):
            rows.append(f"{int(label == 'pos')}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}")
        (mrpc / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    options = {"task_name": "MRPC", "data_dir": str(tmp_path / "glue"),
               "spm_model_file": SPM, "albert_config_file": str(write_tiny_config(tmp_path)),
               "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 8,
               "train_step": 30, "warmup_step": 3, "learning_rate": 1e-2,
               "dropout_prob": 0.0, "seed": 3, "save_checkpoints_steps": 30,
               "do_train": True, "do_eval": True}
    script = tmp_path / "script"
    run_script("run_classifier.py", f"--output_dir={script}",
               *(f"--{k}={v}" for k, v in options.items()))
    data = driver.keras_data(ClassificationTask, {**options, "output_dir": str(
        tmp_path / "keras")})
    assert data.train_steps == 30 and data.warmup_steps == 3 and \
        data.num_examples["train"] == 240
    assert set(data.datasets) == {"train", "dev"}
    # (read off its spec: each new iterator of the training split is a new shuffle, as
    # a new epoch of the run's is, and the first is the run's, which fit takes)
    inputs, features = data.datasets["train"].element_spec
    assert sorted(inputs) == ["input_mask", "input_type_ids", "input_word_ids"]
    assert "label_ids" in features and inputs["input_word_ids"].shape[0] == 8
    model = data.build_model()
    model.compile(optimizer=data.optimizer(), loss=data.task.objective())
    model.fit(data.datasets["train"], steps_per_epoch=data.train_steps, verbose=0)
    save_tf1_checkpoint(model, str(tmp_path / "fit" / "model.ckpt"))
    fitted = tf.train.load_checkpoint(str(tmp_path / "fit" / "model.ckpt"))
    trained = tf.train.load_checkpoint(str(script / "model.ckpt-30"))
    shapes = trained.get_variable_to_shape_map()
    names = [n for n in shapes if n != "global_step"]
    assert len(names) > 20 and set(names) <= set(fitted.get_variable_to_shape_map())
    initial = data.build_model()  # a fresh model: the run's initial weights
    moved = 0
    # Float rounding: Adam's normalised steps (30 of up to lr = 1e-2 each) carry the
    # gradients' float32 rounding (other kernels, another summation order) into small
    # differences; a wrong step, schedule, clip or order of batches differs by 1e-3
    # and more.
    for name in names:
        np.testing.assert_allclose(fitted.get_tensor(name), trained.get_tensor(name),
                                   rtol=0, atol=1e-5, err_msg=name)
    for variable in initial.weights:
        moved += not np.allclose(variable.numpy(), trained.get_tensor(variable.path))
    assert moved > 10  # training changed them
    # The text classifier, from a release of the run's initial weights, `fit` on the
    # training file's strings: the script's weights too.
    import shutil

    from albert_tf.text_models import AlbertTextClassifier

    release = tmp_path / "release"
    release.mkdir()
    shutil.copy(options["albert_config_file"], release / "albert_config.json")
    shutil.copy(SPM, release / "30k-clean.model")
    save_tf1_checkpoint(initial, str(release / "model.ckpt"))
    text_model = AlbertTextClassifier.from_release(
        release, num_classes=2, sequence_length=32, seed=3, dropout_rate=0.0,
        learning_rate=1e-2)
    rows = [line.split("\t") for line in
            (mrpc / "train.tsv").read_text().splitlines()[1:]]
    text_model.fit(([r[3] for r in rows], [r[4] for r in rows]), [int(r[0]) for r in rows],
                   batch_size=8, verbose=0)
    assert int(text_model.optimizer.iterations) == 30
    save_tf1_checkpoint(text_model.model, str(tmp_path / "text" / "model.ckpt"))
    from_text = tf.train.load_checkpoint(str(tmp_path / "text" / "model.ckpt"))
    for name in names:
        np.testing.assert_allclose(from_text.get_tensor(name), trained.get_tensor(name),
                                   rtol=0, atol=1e-5, err_msg=name)
    # dev: Keras' predict gives the script's accuracy; evaluate the objective's loss
    from tests.helpers.scripts import read_results

    predicted = model.predict(data.datasets["dev"], verbose=0)["predictions"]
    labels = np.concatenate([f["label_ids"].numpy() for _, f in data.datasets["dev"]])
    assert len(labels) == data.num_examples["dev"] == len(predicted)
    assert np.mean(predicted == labels) == pytest.approx(
        read_results(script / "eval_results.txt")["eval_accuracy"])
    assert 0 < float(np.atleast_1d(model.evaluate(data.datasets["dev"], verbose=0))[0])


def lora_classifier(seed=5, **lora):
    from albert_tf import AlbertClassifier

    model = AlbertClassifier(CONFIG, num_labels=3, seed=seed, dropout_rate=0.0)
    model.enable_lora(2, **lora)
    return model


def test_lora_trains_the_adapters_and_the_head_and_merges_for_serving(tmp_path):
    """`enable_lora(2)`: the query and value adapters (A and B), their biases and the
    head train, every other weight is frozen and stays bit for bit; the model starts
    with the base's outputs (B is zero). Trained, `merge_lora()` gives a model of the
    base's weights alone with its outputs; the .keras file keeps them; the adapter file
    (`save_lora_weights`) loads onto the same base and gives them too."""
    from albert_tf import AlbertClassifier
    from albert_tf.training.optimizers import AdamWeightDecay

    base = AlbertClassifier(CONFIG, num_labels=3, seed=5, dropout_rate=0.0)
    inputs = model_inputs("classifier")
    model = lora_classifier()
    assert model.lora_rank == 2
    before = outputs(model, inputs)
    for name, value in outputs(base, inputs).items():
        np.testing.assert_array_equal(before[name], value)
    group = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self"
    assert sorted(w.path for w in model.trainable_weights) == sorted(
        ["output_weights", "output_bias"] + [f"{group}/{dense}/{name}" for dense in (
            "query", "value") for name in ("bias", "lora_kernel_a", "lora_kernel_b")])
    with_ffn = lora_classifier(ffn=True)
    assert len(with_ffn.trainable_weights) == 14  # + the FFN's two
    # The adapters run beside the frozen kernels ((x @ A) @ B, the query's and value's
    # B in their columns of the query-key-value matmul): what the merged kernels give.
    rng = np.random.default_rng(0)
    for weight in with_ffn.trainable_weights:
        if "lora_kernel_b" in weight.path:
            weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    merged_ffn = outputs(with_ffn.merge_lora(), inputs)
    changed = outputs(with_ffn, inputs)
    assert np.abs(changed["logits/0"] - before["logits/0"]).max() > 1e-3
    for name, value in changed.items():
        np.testing.assert_allclose(value, merged_ffn[name], rtol=0, atol=1e-5, err_msg=name)
    frozen = {w.path: w.numpy() for w in model.non_trainable_weights}
    model.compile(optimizer=AdamWeightDecay(1e-2), loss={
        "logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    model.fit(inputs, {"logits": np.array([2, 0])}, epochs=3, verbose=0)
    for weight in model.non_trainable_weights:
        np.testing.assert_array_equal(weight.numpy(), frozen[weight.path],
                                      err_msg=weight.path)
    trained = outputs(model, inputs)
    assert np.abs(trained["logits/0"] - before["logits/0"]).max() > 1e-3

    merged = model.merge_lora()
    assert merged.lora_rank is None and "lora" not in merged.get_config()
    assert [w.path for w in merged.weights] == [w.path for w in base.weights]
    keras_file = tmp_path / "lora.keras"
    model.save(keras_file)
    reloaded = keras.models.load_model(keras_file)
    assert reloaded.lora_rank == 2
    adapter = tmp_path / "adapter.npz"
    model.save_lora_weights(adapter)
    assert adapter.stat().st_size * 20 < sum(w.numpy().nbytes for w in base.weights)
    onto_base = AlbertClassifier(CONFIG, num_labels=3, seed=5, dropout_rate=0.0)
    onto_base.load_lora_weights(adapter)  # enables LoRA as the file says
    assert onto_base.lora_rank == 2
    for other in (merged, reloaded, onto_base):
        for name, value in outputs(other, inputs).items():
            np.testing.assert_allclose(value, trained[name], rtol=0, atol=1e-6,
                                       err_msg=name)


@pytest.mark.parametrize("recompute", [None, "layer"])
def test_lora_beside_the_frozen_kernel_has_the_folded_kernels_gradients(recompute):
    """The adapters added beside the frozen kernels ((x @ A) @ B) give the loss and the
    gradients of every trained weight that Keras' folded kernel (W + A @ B) gives, with
    the FFN's adapters, recomputed layers or not."""
    import contextlib
    from unittest import mock

    import tensorflow as tf

    from albert_tf import AlbertClassifier
    from albert_tf.modeling import common

    inputs = model_inputs("classifier")

    def step(folded: bool):
        model = AlbertClassifier(CONFIG, num_labels=3, seed=5, dropout_rate=0.0,
                                 recompute=recompute)
        model.enable_lora(2, ffn=True)
        for weight in model.trainable_weights:  # B away from zero: A's gradient too
            if "lora_kernel_b" in weight.path:
                weight.assign(np.random.default_rng(2).normal(0, 0.5, weight.shape))
        switch = mock.patch.object(common, "_lora_on", lambda layer: False) if folded \
            else contextlib.nullcontext()
        with switch, tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.constant([2, 0]), logits))
        grads = tape.gradient(loss, model.trainable_weights)
        return float(loss), {w.path: g.numpy() for w, g in zip(model.trainable_weights, grads)}

    loss, grads = step(folded=False)
    folded_loss, folded_grads = step(folded=True)
    assert loss == pytest.approx(folded_loss, rel=1e-5)
    assert sorted(grads) == sorted(folded_grads) and len(grads) == 14
    for name, value in grads.items():
        assert np.abs(value).max() > 0, name
        np.testing.assert_allclose(value, folded_grads[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_lora_refuses_what_does_not_fit(tmp_path):
    from albert_tf.errors import UserError

    model = lora_classifier()
    adapter = tmp_path / "adapter.npz"
    model.save_lora_weights(adapter)
    with pytest.raises(UserError, match=r"adapter\.npz: a LoRA adapter of another base "
                                        r"checkpoint"):
        lora_classifier(seed=6).load_lora_weights(adapter)
    with pytest.raises(UserError, match=r"adapter\.npz: an adapter of LoRA .*'ffn': "
                                        r"False.*'ffn': True"):
        lora_classifier(ffn=True).load_lora_weights(adapter)
    with pytest.raises(UserError, match="no such LoRA adapter file"):
        model.load_lora_weights(tmp_path / "missing.npz")
    (tmp_path / "notes.npz").write_text("not an adapter\n")
    with pytest.raises(UserError, match=r"notes\.npz: not a LoRA adapter file"):
        model.load_lora_weights(tmp_path / "notes.npz")
    for rank in (0, 1.5, True):
        with pytest.raises(ValueError, match="LoRA rank must be an integer >= 1"):
            tasks.models()["encoder"](CONFIG).enable_lora(rank)
    with pytest.raises(ValueError, match="LoRA is enabled already"):
        model.enable_lora(4)


def test_lora_rank_on_run_classifier_keeps_the_adapter_and_merged_checkpoints(tmp_path):
    """run_classifier.py --lora_rank=2 from a pretrained checkpoint: the encoder's frozen
    weights end as they began, the best checkpoint holds plain ALBERT names (merged),
    the adapter beside it loads onto the base and answers as that checkpoint, the test
    predictions are the merged model's; a rank below 1 and --lora_ffn alone are one-line
    errors."""
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertPretrainer, save_tf1_checkpoint
    from albert_tf.checkpoints import load_tf1_checkpoint
    from tests.helpers.scripts import FIXTURES, SPM, one_line_error, run_script
    from tests.helpers.tiny import write_tiny_config

    config_file = write_tiny_config(tmp_path)
    base = str(tmp_path / "base" / "model.ckpt")
    save_tf1_checkpoint(AlbertPretrainer(CONFIG, seed=0), base)
    out = tmp_path / "out"
    flags = [f"--spm_model_file={SPM}", f"--albert_config_file={config_file}",
             f"--init_checkpoint={base}", f"--output_dir={out}", "--task_name=MRPC",
             f"--data_dir={FIXTURES / 'glue'}", "--max_seq_length=64",
             "--train_batch_size=4", "--train_step=4", "--save_checkpoints_steps=2",
             "--learning_rate=1e-2", "--dropout_prob=0"]
    for bad, message in ((["--lora_rank=0"], "--lora_rank must be an integer >= 1"),
                         (["--lora_ffn"], "--lora_ffn needs --lora_rank")):
        assert message in one_line_error(run_script("run_classifier.py", *flags, "--do_train",
                                                    *bad, check=False))
    run_script("run_classifier.py", *flags, "--do_train", "--do_eval", "--do_predict",
               "--lora_rank=2")
    best = tf.train.load_checkpoint(str(out / "model.ckpt-best"))
    names = best.get_variable_to_shape_map()
    assert not [n for n in names if "lora" in n] and "output_weights" in names
    start = tf.train.load_checkpoint(base)
    query = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"
    np.testing.assert_array_equal(best.get_tensor("bert/embeddings/word_embeddings"),
                                  start.get_tensor("bert/embeddings/word_embeddings"))
    assert not np.allclose(best.get_tensor(query), start.get_tensor(query))  # merged
    merged = AlbertClassifier(CONFIG, num_labels=2)
    load_tf1_checkpoint(merged, str(out / "model.ckpt-best"), strict=True)
    adapted = AlbertClassifier(CONFIG, num_labels=2, seed=12345)  # the run's --seed
    load_tf1_checkpoint(adapted, base, strict=False)
    adapted.load_lora_weights(out / "lora_adapter.npz")
    inputs = model_inputs("classifier")
    for name, value in outputs(adapted, inputs).items():
        np.testing.assert_allclose(value, outputs(merged, inputs)[name], rtol=0,
                                   atol=1e-6, err_msg=name)
    predicted = np.loadtxt(out / "test_results.tsv", ndmin=2)
    assert predicted.shape[1] == 2 and np.allclose(predicted.sum(axis=1), 1, atol=1e-4)
