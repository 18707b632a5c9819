"""TF Serving warmup requests for SavedModel exports.

TF Serving replays `<version_dir>/assets.extra/tf_serving_warmup_requests` (a TFRecord
file of `PredictionLog` protos) when it loads a model version, so the first real request
does not pay for graph tracing / kernel initialisation. See
https://www.tensorflow.org/tfx/serving/saved_model_warmup

Needs the `tensorflow-serving-api` package (imported lazily, only here).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from albert_tf import fileio

WARMUP_DIR = "assets.extra"
WARMUP_FILENAME = "tf_serving_warmup_requests"


def _serving_apis():
    try:
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Writing TF Serving warmup requests needs the 'tensorflow-serving-api' package "
            "(pip install 'tensorflow-serving-api>=2.21,<2.22')."
        ) from e
    return predict_pb2, prediction_log_pb2


def warmup_path(version_dir) -> str:
    """`<version_dir>/assets.extra/tf_serving_warmup_requests`."""
    return os.path.join(os.fspath(version_dir), WARMUP_DIR, WARMUP_FILENAME)


def write_warmup_requests(
    version_dir,
    signature_name: str,
    inputs: dict[str, np.ndarray],
    model_name: str = "albert",
    num_records: int = 1,
) -> str:
    """Writes `num_records` identical PredictLog warmup records for `signature_name`.

    `version_dir` is the SavedModel version directory (the one holding `saved_model.pb`).
    `inputs` maps the signature's input names to arrays (strings become DT_STRING
    tensors). The file is written under a temporary name and renamed into place, so a
    server never sees a partial file. Returns the file's path.
    """
    if not inputs:
        raise ValueError("inputs must name at least one tensor")
    if num_records < 1:
        raise ValueError(f"num_records must be >= 1, got {num_records}")
    predict_pb2, prediction_log_pb2 = _serving_apis()

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )
    serialized = log.SerializeToString(deterministic=True)  # the same file every time

    path = warmup_path(version_dir)
    with fileio.atomic_path(path) as tmp_path, tf.io.TFRecordWriter(tmp_path) as writer:
        for _ in range(num_records):
            writer.write(serialized)
    return path


def read_warmup_requests(path) -> list:
    """Parses a warmup file back into a list of `PredictionLog` protos."""
    _, prediction_log_pb2 = _serving_apis()
    logs = []
    for record in tf.data.TFRecordDataset(os.fspath(path)).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(record))
    return logs
