"""LiteRT (TFLite) export: every kind's file, run by LiteRT's own interpreter with
XNNPACK, answers as the model and the SavedModel's `serving_default` do; float16 and
int8 files are smaller and close; the original TF1 checkpoint's numbers through the
script; bad arguments stop before anything is written."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR

from albert_tf.export import (
    ExportError,
    build_model,
    export_savedmodel,
    export_tflite,
    read_tflite_info,
    tflite_interpreter,
)
from tests.helpers.scripts import run_script
from tests.test_export import (
    CASES,
    _kind,
    _random_inputs,
    assert_refused,
    real_positions,
    run_classifier_refusing,
)

# The bar for a float32 file against the SavedModel (measured: ~1e-7).
TOLERANCE = 1e-4


def run_tflite(path, inputs: dict, signature: str = "serving_default") -> dict:
    """`signature` of the LiteRT file on `inputs` (LiteRT's default resolver: XNNPACK
    for the float ops; TF Text's kernels for a file with serve_text), with the dtypes
    the JSON beside it names."""
    specs = read_tflite_info(path)["signatures"][signature]["inputs"]
    runner = tflite_interpreter(path).get_signature_runner(signature)
    return runner(**{name: np.asarray(inputs[name], np.dtype(spec["dtype"])
                                      if spec["dtype"] != "string" else object)
                     for name, spec in specs.items()})


@pytest.fixture(scope="module")
def config():
    from tests.helpers.tiny import tiny_config

    return tiny_config()


@pytest.fixture(scope="module")
def models(config):
    """case -> the model of test_export's cases (same seed)."""
    return {case: build_model(_kind(case), config, seed=3, **model_kwargs)
            for case, (model_kwargs, _) in CASES.items()}


@pytest.fixture(scope="module")
def float32_files(models, tmp_path_factory):
    """case -> its float32 .tflite."""
    root = tmp_path_factory.mktemp("tflite")
    return {case: export_tflite(model, root / f"{case}.tflite", kind=_kind(case),
                                task_name=CASES[case][1].get("task_name"),
                                labels=CASES[case][1].get("labels"))
            for case, model in models.items()}


def assert_answers_as(got: dict, want: dict, mask) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        value = np.asarray(value)
        assert got[name].shape == value.shape, name
        if value.dtype.kind in "iu":
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        else:
            np.testing.assert_allclose(real_positions(got[name], mask),
                                       real_positions(value, mask),
                                       atol=TOLERANCE, rtol=TOLERANCE, err_msg=name)


def _requests(case, config):
    """A padded batch of three rows, one row without padding, and no rows."""
    batch = _random_inputs(case, config, np.random.default_rng(1))
    length = int(np.max(np.sum(batch["input_mask"][0], axis=-1)))
    full = {k: v[:1] if k == "masked_lm_positions" else v[:1, ..., :length]
            for k, v in batch.items()}
    return {"batch": batch, "one_row": full, "no_rows": {k: v[:0] for k, v in batch.items()}}


@pytest.mark.parametrize("case", list(CASES))
def test_float32_file_answers_as_the_model(models, float32_files, config, case):
    from albert_tf.export import serving_kinds
    from albert_tf.modeling import real_tokens

    model, path = models[case], float32_files[case]
    info = read_tflite_info(path)
    entry = serving_kinds()[_kind(case)]
    assert info["kind"] == entry.name and info["precision"] == "float32"
    assert list(info["inputs"]) == sorted(entry.input_names)
    assert sorted(info["outputs"]) == sorted(n for n in entry.outputs
                                             if n in info["outputs"])
    if case == "classifier":
        assert info["labels"] == ["0", "1"]
    for name, request in _requests(case, config).items():
        got = run_tflite(path, request)
        mask = np.asarray(request["input_mask"], bool)
        if name == "no_rows":
            assert all(v.shape[0] == 0 for v in got.values()), {
                k: v.shape for k, v in got.items()}
            continue
        with real_tokens.inference_graph():
            outputs = model({k: tf.constant(v) for k, v in request.items()
                             if k in entry.input_names}, training=False)
        # (every output the kind serves that the model has: regression no probabilities)
        assert_answers_as(got, {k: outputs[k] for k in entry.outputs if k in outputs}, mask)


@pytest.mark.parametrize("case", ["classifier", "squad_v2"])
def test_float32_file_answers_as_the_reloaded_savedmodel(models, float32_files, config,
                                                         case, tmp_path):
    export_dir = export_savedmodel(models[case], tmp_path / "serving", kind=_kind(case),
                                   max_seq_length=32, warmup_requests=False,
                                   **CASES[case][1])
    serving_default = tf.saved_model.load(export_dir).signatures["serving_default"]
    request = _requests(case, config)["batch"]
    want = serving_default(**{k: tf.constant(v, tf.float32 if k == "p_mask" else tf.int32)
                              for k, v in request.items()})
    assert_answers_as(run_tflite(float32_files[case], request),
                      {k: v.numpy() for k, v in want.items()},
                      np.asarray(request["input_mask"], bool))


def test_raw_text_answers_as_serve_text_in_the_file_and_packed_by_a_client(
        models, tmp_path):
    """The file's own serve_text (with_text=True: TF Text's tokenizer op inside), and a
    LiteRT client that tokenizes itself (FullTokenizer, packing.pack_batch to the JSON's
    max_seq_length) into serving_default, both answer as the SavedModel's serve_text on
    empty strings, over-long texts and an empty request, as issue 28 asks of every
    format."""
    import tensorflow_text  # noqa: F401  (serve_text's ops)

    from albert_tf.packing import pack_batch
    from albert_tf.tokenization import FullTokenizer
    from tests.test_export import SPM

    path = export_tflite(models["classifier"], tmp_path / "text.tflite", kind="classifier",
                         task_name="cola", max_seq_length=16, do_lower_case=True,
                         with_text=True, spm_model_file=SPM)
    info = read_tflite_info(path)
    assert sorted(info["signatures"]) == ["serve_text", "serving_default"]
    assert list(info["signatures"]["serve_text"]["inputs"]) == ["text_a"]  # CoLA: single
    assert info["custom_ops"] == ["TFText>FastSentencepieceTokenize"]
    export_dir = export_savedmodel(models["classifier"], tmp_path / "serving",
                                   kind="classifier", spm_model_file=SPM,
                                   max_seq_length=info["max_seq_length"],
                                   warmup_requests=False, task_name="cola")
    serve_text = tf.saved_model.load(export_dir).signatures["serve_text"]
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=info["do_lower_case"])
    texts = ["", "The quick brown fox jumps over the lazy dog. " * 8, "Hello, World!", " ",
             "In 1990, 2,000 Cafés"]
    for request in (texts, texts[:1], []):
        want = serve_text(text_a=tf.constant(request, tf.string))
        inputs = pack_batch([[tokenizer.encode(text)] for text in request],
                            info["max_seq_length"], cls_id=tokenizer.special_id("[CLS]"),
                            sep_id=tokenizer.special_id("[SEP]"))
        assert inputs["input_mask"].shape[1] <= 16
        for got in (run_tflite(path, inputs),
                    run_tflite(path, {"text_a": request}, "serve_text")):
            assert got["probabilities"].shape == (len(request), 2)
            np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(),
                                       atol=TOLERANCE)
            np.testing.assert_array_equal(got["predictions"], want["predictions"].numpy())


@pytest.mark.parametrize("case", ["classifier", "squad_v1"])
def test_float16_and_int8_files_are_smaller_and_close(models, float32_files, config, case,
                                                      tmp_path):
    reference = float32_files[case]
    request = _requests(case, config)["batch"]
    want = run_tflite(reference, request)
    size = os.path.getsize(reference)
    # (float16: every weight in half the bytes; int8: a quarter. Measured on this tiny
    # model: 52% and 29.5%, its 30k-row embedding table being most of it.)
    for precision, most, tolerance in (("float16", 0.55, 2e-3), ("int8", 0.30, 0.1)):
        path = export_tflite(models[case], tmp_path / f"{precision}.tflite",
                             kind=_kind(case), precision=precision)
        assert read_tflite_info(path)["precision"] == precision
        assert os.path.getsize(path) <= most * size, (precision, os.path.getsize(path), size)
        got = run_tflite(path, request)
        name = "probabilities" if case == "classifier" else "start_logits"
        np.testing.assert_allclose(got[name], want[name], atol=tolerance, err_msg=precision)


def test_script_writes_the_original_checkpoints_numbers(tmp_path, fixture_outputs,
                                                        fixture_inputs):
    """export_savedmodel.py --export_tflite alone, from the ORIGINAL code's checkpoint:
    the encoder's file gives the original's pooled and sequence outputs."""
    path = tmp_path / "albert.tflite"
    result = run_script("export_savedmodel.py", "--kind=encoder",
                        f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                        f"--checkpoint={FIXTURE_CHECKPOINT}", "--max_seq_length=20",
                        f"--export_tflite={path}", "--tflite_precision=float32")
    assert f"exported {path}" in result.stdout
    assert sorted(os.listdir(tmp_path)) == ["albert.tflite", "albert.tflite.json"]
    info = json.loads((tmp_path / "albert.tflite.json").read_text())
    assert info["kind"] == "encoder" and info["max_seq_length"] == 20
    got = run_tflite(path, {"input_word_ids": fixture_inputs["input_ids"],
                            "input_mask": fixture_inputs["input_mask"],
                            "input_type_ids": fixture_inputs["segment_ids"]})
    mask = fixture_inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(got["pooled_output"], fixture_outputs["pooled_output"],
                               atol=TOLERANCE)
    np.testing.assert_allclose(got["sequence_output"][mask],
                               fixture_outputs["sequence_output"][mask], atol=TOLERANCE)
    # A --max_seq_length given beyond the model's positions stops, as for a SavedModel
    # (left at its default, 512, it is the model's max_position_embeddings)
    longest = json.loads((FIXTURE_DIR / "albert_config.json").read_text())[
        "max_position_embeddings"]
    refused = run_script("export_savedmodel.py", "--kind=encoder",
                         f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                         f"--checkpoint={FIXTURE_CHECKPOINT}",
                         f"--max_seq_length={longest + 1}",
                         f"--export_tflite={tmp_path / 'long.tflite'}", check=False)
    assert_refused(refused, f"--max_seq_length={longest + 1} is longer than the model's "
                   f"max_position_embeddings ({longest}) in "
                   f"{FIXTURE_DIR / 'albert_config.json'}")
    assert not (tmp_path / "long.tflite").exists()


def test_bad_arguments_stop_before_anything_is_written(models, tmp_path, monkeypatch):
    model = models["classifier"]
    path = tmp_path / "out" / "model.tflite"
    bad = [
        (dict(kind="classifier", precision="int4"), "unknown LiteRT precision 'int4'"),
        (dict(kind="squad_v1"), "kind 'squad_v1' needs a AlbertSquadV1"),
        (dict(kind="nope"), "unknown kind 'nope'"),
        (dict(kind="classifier", max_seq_length=65), "max_position_embeddings 64"),
        (dict(kind="classifier", labels=["a", "b", "c"]), "3 labels given"),
    ]
    for kwargs, message in bad:
        with pytest.raises(ExportError, match=message):
            export_tflite(model, path, **kwargs)
    with pytest.raises(ExportError, match="is a directory"):
        export_tflite(model, tmp_path, kind="classifier")

    # An op LiteRT has no built-in kernel for (the attention bias as it was written
    # before: a StridedSlice that adds axes) is named, and nothing is written.
    from albert_tf.modeling import attention

    monkeypatch.setattr(attention, "attention_bias", lambda mask, dtype=tf.float32: (
        (1.0 - tf.cast(mask, dtype)) * attention.MASK_ADDER)[:, None, None, :])
    with pytest.raises(ExportError, match="StridedSlice") as raised:
        export_tflite(model, path, kind="classifier")
    assert "Flex delegate" in str(raised.value) and "--export_dir" in str(raised.value)
    assert "Traceback" not in str(raised.value)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_scripts_refuse_a_directory_before_training(tmp_path):
    from tests.helpers.scripts import SPM

    result = run_script("run_classifier.py", "--task_name=MRPC", "--do_train",
                        f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}",
                        f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                        f"--spm_model_file={SPM}", f"--export_tflite={tmp_path}",
                        check=False)
    assert result.returncode != 0
    assert f"--export_tflite: {tmp_path} is a directory" in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_existing_file_is_never_overwritten(models, tmp_path, monkeypatch):
    """A LiteRT file (or its .json) already at the path stops the export before any work,
    as an existing SavedModel version does: from Python, from export_savedmodel.py and
    from the run_* scripts (before training); one that appears during the export is
    not replaced either. The old file is unchanged and nothing else is written."""
    import re

    from albert_tf.export import tflite

    model = models["classifier"]
    old = tmp_path / "model.tflite"
    old.write_bytes(b"an older export")
    lone_json = tmp_path / "other.tflite.json"
    lone_json.write_text("{}\n")
    never = "a written LiteRT file is never overwritten: give a new path, or remove " \
        "the old file and its .json first"
    with pytest.raises(ExportError, match=re.escape(f"{old} exists; {never}")):
        export_tflite(model, old, kind="classifier")
    with pytest.raises(ExportError, match=re.escape(f"{lone_json} exists; {never}")):
        export_tflite(model, tmp_path / "other.tflite", kind="classifier")

    assert_refused(run_script("export_savedmodel.py", "--kind=encoder",
                              f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                              f"--checkpoint={FIXTURE_CHECKPOINT}", f"--export_tflite={old}",
                              f"--export_dir={tmp_path / 'serving'}", check=False),
                   f"--export_tflite: {old} exists; {never}")
    assert_refused(run_classifier_refusing(tmp_path, f"--export_tflite={old}"),
                   f"--export_tflite: {old} exists; {never}")
    # A path under a file
    assert_refused(run_classifier_refusing(tmp_path, f"--export_tflite={old}/x.tflite"),
                   f"--export_tflite: {old} is a file, not a directory to write "
                   f"{old}/x.tflite in")

    # One that appears while a run_* script trains: its export at the end says so in
    # one line too (session.export_if_asked).
    from albert_tf.apps.session import export_if_asked
    from albert_tf.errors import UsageError
    from albert_tf.tasks.options import RunOptions

    options = RunOptions(export_tflite=str(old), max_seq_length=32, do_lower_case=True)
    with pytest.raises(UsageError, match=re.escape(f"--export_tflite: {old} exists; {never}")):
        export_if_asked(options, tf.distribute.get_strategy(), model, "classifier")

    # Another writer's file that appears while the model is converted stays.
    convert = tflite._convert

    def convert_while_another_writes(*args, **kwargs):
        flatbuffer = convert(*args, **kwargs)
        (tmp_path / "late.tflite").write_bytes(b"another writer's")
        return flatbuffer

    monkeypatch.setattr(tflite, "_convert", convert_while_another_writes)
    with pytest.raises(ExportError, match=re.escape(
            f"{tmp_path / 'late.tflite'} appeared during the export; {never}")):
        export_tflite(model, tmp_path / "late.tflite", kind="classifier")
    assert (tmp_path / "late.tflite").read_bytes() == b"another writer's"
    assert old.read_bytes() == b"an older export"
    assert lone_json.read_text() == "{}\n"
    assert sorted(os.listdir(tmp_path)) == ["late.tflite", "model.tflite", "other.tflite.json"]
