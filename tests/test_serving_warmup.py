"""TF Serving warmup-request files (fast; no SavedModel needed)."""

import os

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")

from albert_tf.export.warmup import read_warmup_requests, write_warmup_requests  # noqa: E402
from tests.helpers.tiny import random_inputs  # noqa: E402


def _check(path, version_dir, model_name, signature_name, inputs, num_records):
    from tensorflow_serving.apis import prediction_log_pb2

    assert path == os.path.join(str(version_dir), "assets.extra", "tf_serving_warmup_requests")
    assert os.listdir(os.path.join(str(version_dir), "assets.extra")) == [
        "tf_serving_warmup_requests"
    ]  # no temporary file left behind
    logs = read_warmup_requests(path)
    assert len(logs) == num_records
    for log in logs:
        assert isinstance(log, prediction_log_pb2.PredictionLog)
        assert log.WhichOneof("log_type") == "predict_log"
        request = log.predict_log.request
        assert request.model_spec.name == model_name
        assert request.model_spec.signature_name == signature_name
        assert set(request.inputs) == set(inputs)
        for name, value in inputs.items():
            got = tf.make_ndarray(request.inputs[name])
            assert got.shape == value.shape
            assert got.dtype == value.dtype
            np.testing.assert_array_equal(got, value)


def test_string_input(tmp_path):
    version_dir = tmp_path / "albert_classifier" / "1"
    inputs = {"text_a": np.array([b"hello world", "caf\u00e9 na\u00efve".encode()], dtype=object)}
    path = write_warmup_requests(version_dir, "serving_default", inputs, num_records=3)
    _check(path, version_dir, "albert", "serving_default", inputs, 3)


def test_int32_inputs_and_overwrite(tmp_path):
    version_dir = tmp_path / "1"
    inputs = random_inputs(30000, batch=2, length=16)
    write_warmup_requests(version_dir, "other", {"x": np.zeros((1,), np.int32)})
    path = write_warmup_requests(version_dir, "encode", inputs, model_name="albert_base")
    _check(path, version_dir, "albert_base", "encode", inputs, 1)


def test_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        write_warmup_requests(tmp_path, "serving_default", {})
    with pytest.raises(ValueError):
        write_warmup_requests(tmp_path, "serving_default", {"x": np.zeros(1)}, num_records=0)
