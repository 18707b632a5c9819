"""Serving benchmark: raw text in, predictions out, from the exported SavedModel loaded in
a fresh process, as TF Serving runs it; beside the peers, in the same run.

For each GLUE dev set (`--data_dir`, e.g. ../shared/data/glue/SST-2,../shared/data/glue/MRPC)
a classifier of `--config` with random weights (seeded) is exported by
`albert_tf.export.export_savedmodel`. A fresh process (`import tensorflow_text`,
`tf.saved_model.load`) sends the dev set in file order, as callers' requests arrive
(requests cannot be sorted across callers), in requests of each of `--batch_sizes` texts
to `serve_text`, one request at a time: sequences/s over the pass and p50 / p90 / p99
latency per request. Each pass follows an untimed one (every request shape seen once, as
a warm server has seen them). Rows:

- `SavedModel`: the export as it is (`albert_tf.modeling.real_tokens`: computation on the
  real tokens of each request only);
- `SavedModel, padded`: the same export traced with real-token inference switched off
  (every text of a request padded to the request's longest and computed there: the
  export before real-token inference);
- `SavedModel, bfloat16`: the same weights exported with `serving_precision="bfloat16"`
  (matmuls in bfloat16: faster only where the CPU has AVX512_BF16 or AMX; the export
  warns elsewhere; its agreement with float32: bench_precision_agreement.py), served as it is
  and served in a process with the environment its export_info.json names
  (`serving_environment`: TensorFlow's MatMuls keep their weights in the layout they
  multiply in, `albert_tf.export.SERVING_ENVIRONMENTS`);
- `in process, sorted`: ours in process with XLA, the whole dev set sorted by length and
  padded per batch of the largest `--batch_sizes` (`bench_models.LengthSortedPredictor`):
  the figure the export aims at, though no server can sort its callers' requests;
- `LiteRT float32` / `LiteRT int8`: the same weights written by
  `albert_tf.export.export_tflite` (float32, and int8 dynamic-range quantization), run by
  LiteRT's interpreter (`ai_edge_litert`, XNNPACK, a thread per CPU) in a fresh process,
  the texts tokenized in Python (`FullTokenizer`) and packed by `albert_tf.packing.pack_batch`
  (each request padded to its longest text, computed on its real tokens); and the same
  files' `serve_text` (`export_tflite(with_text=True)`: raw text in, tokenized inside the
  file by TF Text's LiteRT kernels, `--ours=litert_float32_text,litert_int8_text`);
- `Keras float32` / `Keras int8`: Keras' own export of the same model
  (`model.export(format="tf_saved_model")`: its `serve` endpoint on token ids), and of
  the model after Keras' `model.quantize("int8")` (int8 kernels of the dense layers,
  float32 embeddings, LayerNorm and Dropout, which Keras does not quantize), served in a
  fresh process on the texts tokenized and packed in Python as the LiteRT rows;
- `--peers=onnxruntime`: the CPU runtime users would pick instead. transformers'
  `AlbertForSequenceClassification` loads the same weights (our model written by
  `save_hf_checkpoint`), `torch.onnx.export` writes it, ONNX Runtime's transformer
  optimizer fuses it (float32) and `quantize_dynamic` makes the int8 model from that;
  CPU provider, a thread per CPU, transformers' fast tokenizer, `padding="longest"` per
  request;
- keras-hub `AlbertTextClassifier` (`predict_on_batch` per request: its preprocessor,
  padding to `--max_seq_length`, then the model) and transformers `AlbertForSequenceClassification`
  (fast tokenizer, `padding="longest"` per request, torch inference mode), where they
  import (benchmarks/requirements-peers.txt).

"positions / token" is what each computes in the per-token layers (the embeddings,
projections, FFN and LayerNorms: nearly all FLOPs) for each real token. For batch 1 the
in-graph tokenizer's cost per call and `serving_default`'s latency on the same request's
ids (the model without the tokenizer) are printed too. The machine's fp32 and bf16
matmul peaks and its CPU flags are printed, and the FLOP bound of each request size: the
p50 request's matmul FLOPs on its real tokens (`bench_models.model_flops`) at those
peaks, the least time any runtime computing them needs.

    .venv-bench/bin/python benchmarks/bench_serving.py \\
        --data_dir=../shared/data/glue/SST-2,../shared/data/glue/MRPC

It shares bench_models.py's flags (--config, --spm_model_file, --max_seq_length,
--e2e_max_examples for a seeded subset kept in file order, --peers, --rounds, --seed,
--wait_idle, --json_output); `--ours` picks our rows (all by default). For one text per
request the LiteRT and ONNX Runtime rows also give the model's p50 alone on the packed
ids, and after the table each row's p50 and rate are set against ONNX Runtime float32's.
`benchmarks/albert_tiny_zh_shape.json` is albert_tiny_zh's shape (4 layers, H 312,
E 128, FFN 1248, 12 heads) with the English vocabulary, for `--config`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models as bm  # noqa: E402  (its flags are this script's too)
from bench_own_tasks import cpu_flags  # noqa: E402

from benchmarks import children  # noqa: E402

flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Texts per request.")
flags.DEFINE_string("export_root", None, "Internal: where the export child writes.")
flags.DEFINE_string("exports", None, "Internal: JSON {task: {variant: SavedModel dir}}.")

FLAGS = flags.FLAGS
VARIANTS = ("real_tokens", "padded", "bfloat16")
TFLITE_VARIANTS = ("float32", "int8")
KERAS_MODES = ("float32", "int8")  # Keras' export, as the model is and after quantize
LABELS = {"litert_float32": "ours, LiteRT float32 (Python tokenizer)",
          "litert_int8": "ours, LiteRT int8 (Python tokenizer)",
          "litert_float32_text": "ours, LiteRT float32 (raw text, tokenized in the file)",
          "litert_int8_text": "ours, LiteRT int8 (raw text, tokenized in the file)",
          "keras_float32": "ours, Keras export float32 (Python tokenizer)",
          "keras_int8": "ours, Keras export after quantize(\"int8\") (Python tokenizer)",
          "ort_float32": "ONNX Runtime float32, transformers' model, optimized (fast tokenizer)",
          "ort_int8": "ONNX Runtime int8 (quantize_dynamic), transformers' model (fast "
                      "tokenizer)",
          "real_tokens": "ours, SavedModel serve_text",
          "padded": "ours, SavedModel serve_text, padded (real-token inference off)",
          "bfloat16": "ours, SavedModel serve_text, bfloat16 export",
          "bfloat16_env": "ours, SavedModel serve_text, bfloat16 export, served in its "
                          "serving_environment"}


def batch_sizes() -> list[int]:
    return [int(b) for b in FLAGS.batch_sizes]


def requests(texts_a, texts_b, size: int):
    """The dev set in file order, `size` texts per request: (texts_a, texts_b or None)."""
    for start in range(0, len(texts_a), size):
        yield (texts_a[start:start + size],
               None if texts_b is None else texts_b[start:start + size])


def percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values) * 1e3, q))


def timed_passes(batches, call) -> list[float]:
    """One untimed pass over `batches`, then the seconds of each call of a timed one."""
    for batch in batches:
        call(batch)
    seconds = []
    for batch in batches:
        start = time.perf_counter()
        call(batch)
        seconds.append(time.perf_counter() - start)
    return seconds


def add_row(rec, task: str, variant: str, size: int, seconds: list[float], *,
            examples: int, tokens: int, positions: int, **extra) -> None:
    rec.add(f"serving:{task}", variant, examples / sum(seconds), "sequences/s",
            batch=size, p50_ms=percentile(seconds, 50), p90_ms=percentile(seconds, 90),
            p99_ms=percentile(seconds, 99), examples=examples, tokens=tokens,
            positions=positions, **extra)


# ------------------------------------------------------------------- ours: the exports
def export_models(output_dir: str) -> dict:
    """Writes each dev set's classifier as exported, as exported before real-token
    inference and exported in bfloat16; returns {task: {variant: version dir}}."""
    from unittest import mock

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.checkpoints.huggingface import save_hf_checkpoint
    from albert_tf.export import export_savedmodel, export_tflite

    config = AlbertConfig.from_json_file(FLAGS.config)
    paths = {}
    for task_dir in FLAGS.data_dir:
        name, _, _, num_labels = bm.read_dev_set(task_dir, 1, FLAGS.seed)
        model = AlbertClassifier(config, num_labels, seed=FLAGS.seed)
        for precision in TFLITE_VARIANTS:  # the same weights as LiteRT files, ...
            paths.setdefault(name, {})[f"litert_{precision}"] = export_tflite(
                model, os.path.join(output_dir, name, f"{precision}.tflite"),
                kind="classifier", precision=precision, task_name=name,
                max_seq_length=FLAGS.max_seq_length, do_lower_case=True, with_text=True,
                spm_model_file=FLAGS.spm_model_file)
        paths[name]["hf"] = os.path.join(output_dir, name, "hf")  # ... and for transformers
        save_hf_checkpoint(model, paths[name]["hf"], spm_model_file=FLAGS.spm_model_file,
                           do_lower_case=True)
        for variant in exported_variants():
            switch = mock.patch("albert_tf.modeling.real_tokens.enabled_now",
                                return_value=False) if variant == "padded" \
                else contextlib.nullcontext()
            with switch:
                paths.setdefault(name, {})[variant] = export_savedmodel(
                    model, os.path.join(output_dir, name, variant), kind="classifier",
                    spm_model_file=FLAGS.spm_model_file, task_name=name,
                    max_seq_length=FLAGS.max_seq_length, warmup_requests=False,
                    serving_precision="bfloat16" if variant == "bfloat16" else "float32")
        for mode in KERAS_MODES:  # last: quantize changes the model in place
            if mode != "float32":
                model.quantize(mode)
            paths[name][f"keras_{mode}"] = os.path.join(output_dir, name, f"keras_{mode}")
            model.export(paths[name][f"keras_{mode}"], format="tf_saved_model",
                         verbose=False)
    return paths


def exported_variants() -> list[str]:
    """The SavedModel variants that the children of `--ours` serve."""
    served = {"savedmodel": "real_tokens", "savedmodel_padded": "padded",
              "savedmodel_bf16": "bfloat16", "savedmodel_bf16_env": "bfloat16"}
    return [v for v in VARIANTS if v in {served.get(name) for name in FLAGS.ours}]


def packed_lengths(tokenizer, texts_a, texts_b):
    """Each example's packed length ([CLS] A [SEP] (B [SEP]), cut to max_seq_length)."""
    import tensorflow as tf

    from albert_tf.packing import packed_length

    segments = [tokenizer.tokenize(tf.constant(t)) for t in (texts_a, texts_b) if t]
    return packed_length([s.row_lengths() for s in segments], FLAGS.max_seq_length).numpy()


def serve(rec, variant: str, label: str | None = None) -> None:
    """A fresh process loads the SavedModel of `variant` and serves every dev set; its
    rows are labelled `label` (default: the variant's)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the ops serve_text needs)

    from albert_tf import names
    from albert_tf.export import serving_environment_now
    from albert_tf.text import AlbertTextTokenizer

    environment = serving_environment_now()  # in each row
    rec.versions.update(tensorflow=tf.__version__)
    rec.matmul_gflops = bm.tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats)
    rec.bf16_matmul_gflops = bm.tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats,
                                               dtype=tf.bfloat16)
    tokenizer = AlbertTextTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    exports = json.loads(FLAGS.exports)
    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, _ = bm.read_dev_set(task_dir, FLAGS.e2e_max_examples,
                                                    FLAGS.seed)
        lengths = packed_lengths(tokenizer, texts_a, texts_b)
        loaded = tf.saved_model.load(exports[name][variant])
        serve_text = loaded.signatures["serve_text"]

        def call(request):
            a, b = request
            inputs = {names.TEXT_A: tf.constant(a)}
            if b is not None:
                inputs[names.TEXT_B] = tf.constant(b)
            return serve_text(**inputs)[names.PREDICTIONS].numpy()

        for size in batch_sizes():
            batches = list(requests(texts_a, texts_b, size))
            seconds = timed_passes(batches, call)
            starts = range(0, len(lengths), size)
            padded = sum(len(lengths[s:s + size]) * lengths[s:s + size].max() for s in starts)
            extra = one_text_costs(loaded, tokenizer, batches) if size == 1 else {}
            add_row(rec, name, label or LABELS[variant], size, seconds,
                    examples=len(texts_a), tokens=int(lengths.sum()),
                    positions=int(padded if variant == "padded" else lengths.sum()),
                    environment=environment, **extra)
        del loaded


def one_text_costs(loaded, tokenizer, batches) -> dict:
    """For one text per request: the in-graph tokenizer's p50 per call (tokenizing and
    packing, as serve_text does) and serving_default's p50 on the packed ids."""
    import tensorflow as tf

    from albert_tf import names
    from albert_tf.packing import pack_inputs

    @tf.function
    def tokenize(*texts):
        return pack_inputs([tokenizer.tokenize(t) for t in texts], FLAGS.max_seq_length,
                           cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                           pad_id=tokenizer.pad_id)

    def texts(request):
        return [tf.constant(t) for t in request if t is not None]

    tokenize_seconds = timed_passes(batches, lambda r: {
        k: v.numpy() for k, v in tokenize(*texts(r)).items()})
    packed = [tokenize(*texts(r)) for r in batches]
    serving_default = loaded.signatures["serving_default"]
    model_seconds = timed_passes(packed, lambda inputs: serving_default(
        **inputs)[names.PREDICTIONS].numpy())
    return {"tokenizer_p50_ms": percentile(tokenize_seconds, 50),
            "model_p50_ms": percentile(model_seconds, 50)}


def in_process(rec) -> None:
    """Ours in process, sorted by length, XLA: bench_models' end-to-end pipeline."""
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.text import AlbertTextTokenizer

    rec.versions.update(tensorflow=tf.__version__)
    config = AlbertConfig.from_json_file(FLAGS.config)
    tokenizer = AlbertTextTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    size = max(batch_sizes())
    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, num_labels = bm.read_dev_set(
            task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
        model = AlbertClassifier(config, num_labels, seed=FLAGS.seed)
        pipeline = bm.LengthSortedPredictor(model, tokenizer, FLAGS.max_seq_length, size,
                                            xla=True, length_multiple=FLAGS.length_multiple)
        seconds = timed_passes([None], lambda _: pipeline.predict(texts_a, texts_b))
        rec.add(f"serving:{name}", f"ours in process, XLA, the whole set sorted by length, "
                f"padded per batch (to a multiple of {FLAGS.length_multiple})",
                len(texts_a) / seconds[0], "sequences/s", batch=size,
                examples=len(texts_a), tokens=pipeline.stats["tokens"],
                positions=pipeline.stats["computed_tokens"])


def python_requests(tokenizer):
    """Each request's texts tokenized in Python and packed (`packing.pack_batch`)."""
    from albert_tf.packing import pack_batch

    return lambda request: pack_batch(
        [[tokenizer.encode(text) for text in row if text is not None]
         for row in zip(request[0], request[1] or [None] * len(request[0]))],
        FLAGS.max_seq_length, cls_id=tokenizer.special_id("[CLS]"),
        sep_id=tokenizer.special_id("[SEP]"))


def packed_rows(rec, name: str, label: str, texts_a, texts_b, pack, model,
                count, model_alone: bool = True) -> None:
    """The rows of one runtime that takes packed inputs: each of `--batch_sizes`, the
    requests' texts `pack`ed then run by `model` (one text per request, with
    `model_alone`: also `model`'s p50 alone on the packed inputs). `count(packed
    requests)`: (real tokens, positions computed)."""
    for size in batch_sizes():
        batches = list(requests(texts_a, texts_b, size))
        seconds = timed_passes(batches, lambda request: model(pack(request)))
        packed = [pack(request) for request in batches]
        extra = {"model_p50_ms": percentile(timed_passes(packed, model), 50)} \
            if size == 1 and model_alone else {}
        tokens, positions = count(packed)
        add_row(rec, name, label, size, seconds, examples=len(texts_a), tokens=tokens,
                positions=positions, **extra)


def real_token_counts(packed) -> tuple[int, int]:
    """(real tokens, positions computed) of packed requests that a runtime computes on
    their real tokens only: both the count of the input masks' ones."""
    import numpy as np

    from albert_tf import names

    tokens = int(sum(np.sum(p[names.INPUT_MASK]) for p in packed))
    return tokens, tokens


def litert(rec, precision: str, in_file: bool = False) -> None:
    """A fresh process runs each dev set's LiteRT file of `precision`: `serving_default`
    on the texts tokenized in Python, or (`in_file`) `serve_text` on the raw texts."""
    import numpy as np

    from albert_tf import names
    from albert_tf.export import tflite_interpreter
    from albert_tf.tokenization import FullTokenizer

    rec.versions.update(ai_edge_litert=_version("ai-edge-litert"))
    python_pack = python_requests(FullTokenizer(spm_model_file=FLAGS.spm_model_file,
                                                do_lower_case=True))
    exports = json.loads(FLAGS.exports)

    def texts(request):  # serve_text's inputs
        a, b = request
        inputs = {names.TEXT_A: np.array(a, object)}
        if b is not None:
            inputs[names.TEXT_B] = np.array(b, object)
        return inputs

    def count(packed):
        if in_file:
            packed = [python_pack((list(p[names.TEXT_A]), list(p[names.TEXT_B])
                                   if names.TEXT_B in p else None)) for p in packed]
        return real_token_counts(packed)

    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, _ = bm.read_dev_set(task_dir, FLAGS.e2e_max_examples,
                                                    FLAGS.seed)
        path = exports[name][f"litert_{precision}"]
        rec.notes.append(f"{name} LiteRT {precision} file: "
                         f"{os.path.getsize(path) / 1e6:.2f} MB")
        runner = tflite_interpreter(path, num_threads=os.cpu_count()).get_signature_runner(
            "serve_text" if in_file else "serving_default")
        packed_rows(rec, name, LABELS[f"litert_{precision}" + ("_text" if in_file else "")],
                    texts_a, texts_b, texts if in_file else python_pack,
                    lambda inputs: runner(**inputs)[names.PREDICTIONS], count,
                    model_alone=not in_file)


def keras_export(rec, mode: str) -> None:
    """A fresh process serves each dev set's Keras export of `mode` (`serve` on the
    texts tokenized in Python and packed, as the LiteRT rows)."""
    import tensorflow as tf

    from albert_tf import names
    from albert_tf.tokenization import FullTokenizer

    rec.versions.update(tensorflow=tf.__version__)
    pack = python_requests(FullTokenizer(spm_model_file=FLAGS.spm_model_file,
                                         do_lower_case=True))
    exports = json.loads(FLAGS.exports)

    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, _ = bm.read_dev_set(task_dir, FLAGS.e2e_max_examples,
                                                    FLAGS.seed)
        path = exports[name][f"keras_{mode}"]
        size = sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(os.path.join(path, "variables"))
                   for f in files)
        rec.notes.append(f"{name} Keras export {mode}: variables {size / 1e6:.2f} MB")
        loaded = tf.saved_model.load(path)  # kept: its `serve` reads its variables
        packed_rows(rec, name, LABELS[f"keras_{mode}"], texts_a, texts_b, pack,
                    lambda inputs: loaded.serve(inputs)[names.PREDICTIONS].numpy(),
                    real_token_counts)  # (AlbertModel.export traces on real tokens)


def _version(distribution: str) -> str:
    from importlib import metadata

    return metadata.version(distribution)


# ------------------------------------------------------------------------------ peers
def onnxruntime(rec) -> None:
    """transformers' model with our weights, through torch.onnx, ORT's optimizer and
    quantize_dynamic; served by ONNX Runtime's CPU provider."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    import transformers as hf
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AlbertForSequenceClassification

    from albert_tf import AlbertConfig

    rec.versions.update(onnxruntime=ort.__version__, torch=torch.__version__,
                        transformers=hf.__version__)
    config = AlbertConfig.from_json_file(FLAGS.config)
    tokenizer, kind = bm.transformers_tokenizer(FLAGS.spm_model_file)
    exports = json.loads(FLAGS.exports)
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    rec.notes.append(f"ONNX Runtime: CPUExecutionProvider, {os.cpu_count()} intra-op "
                     f"threads; transformers {kind} tokenizer")
    inputs = ("input_ids", "attention_mask", "token_type_ids")

    def pack(request):
        a, b = request
        encoded = tokenizer(a, *([] if b is None else [b]), padding="longest",
                            truncation=True, max_length=FLAGS.max_seq_length,
                            return_tensors="np", return_token_type_ids=True)
        return {k: encoded[k].astype(np.int64) for k in inputs}

    def count(packed):  # every position of each request, padded to its longest
        return 0, int(sum(p["input_ids"].size for p in packed))

    with tempfile.TemporaryDirectory(prefix="bench_ort_") as work:
        for task_dir in FLAGS.data_dir:
            name, texts_a, texts_b, _ = bm.read_dev_set(task_dir, FLAGS.e2e_max_examples,
                                                        FLAGS.seed)
            model = AlbertForSequenceClassification.from_pretrained(
                exports[name]["hf"], attn_implementation="eager").eval()
            example = tokenizer(["a text"], return_tensors="pt", return_token_type_ids=True)
            onnx_path = os.path.join(work, f"{name}.onnx")
            torch.onnx.export(
                model, tuple(example[k] for k in inputs), onnx_path, input_names=list(inputs),
                output_names=["logits"], opset_version=17, dynamo=False,
                dynamic_axes={k: {0: "batch", 1: "length"} for k in inputs})
            optimized = os.path.join(work, f"{name}.optimized.onnx")
            optimizer.optimize_model(onnx_path, model_type="bert",
                                     num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size).save_model_to_file(optimized)
            quantized = os.path.join(work, f"{name}.int8.onnx")
            # (the fused ops' outputs have no inferred type: float, as they are)
            quantize_dynamic(optimized, quantized, weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            for variant, path in (("float32", optimized), ("int8", quantized)):
                session = ort.InferenceSession(path, options,
                                               providers=["CPUExecutionProvider"])
                packed_rows(rec, name, LABELS[f"ort_{variant}"], texts_a, texts_b, pack,
                            lambda feed: session.run(["logits"], feed)[0].argmax(-1), count)


def keras_hub(rec) -> None:
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig

    rec.versions.update(tensorflow=tf.__version__, keras=keras.__version__,
                        keras_hub=keras_hub.__version__)
    config = AlbertConfig.from_json_file(FLAGS.config)
    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, num_labels = bm.read_dev_set(
            task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
        backbone = bm.keras_hub_backbone(config, FLAGS.seed)  # (seeding before the
        preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(  # tokenizer)
            keras_hub.models.AlbertTokenizer(proto=FLAGS.spm_model_file),
            sequence_length=FLAGS.max_seq_length)
        classifier = keras_hub.models.AlbertTextClassifier(
            backbone, num_classes=num_labels, preprocessor=preprocessor)

        def call(request):
            a, b = request
            x = np.array(a) if b is None else (np.array(a), np.array(b))
            return np.argmax(classifier.predict_on_batch(x), axis=-1)  # preprocesses

        for size in batch_sizes():
            seconds = timed_passes(list(requests(texts_a, texts_b, size)), call)
            add_row(rec, name, f"keras-hub AlbertTextClassifier.predict_on_batch, "
                    f"preprocessor sequence_length={FLAGS.max_seq_length}", size, seconds,
                    examples=len(texts_a), tokens=0,
                    positions=len(texts_a) * FLAGS.max_seq_length)


def transformers(rec) -> None:
    import torch
    import transformers as hf
    from transformers import AlbertForSequenceClassification

    from albert_tf import AlbertConfig

    rec.versions.update(torch=torch.__version__, transformers=hf.__version__)
    rec.notes.append(f"torch threads: {torch.get_num_threads()}")
    config = AlbertConfig.from_json_file(FLAGS.config)
    tokenizer, kind = bm.transformers_tokenizer(FLAGS.spm_model_file)
    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, num_labels = bm.read_dev_set(
            task_dir, FLAGS.e2e_max_examples, FLAGS.seed)
        torch.manual_seed(FLAGS.seed)
        model = AlbertForSequenceClassification(
            bm.transformers_config(config, num_labels=num_labels)).eval()
        positions = []

        def call(request):
            a, b = request
            encoded = tokenizer(a, *([] if b is None else [b]), padding="longest",
                                truncation=True, max_length=FLAGS.max_seq_length,
                                return_tensors="pt")
            positions.append(encoded["input_ids"].numel())
            with torch.inference_mode():
                return model(**encoded).logits.argmax(-1).numpy()

        for size in batch_sizes():
            seconds = timed_passes(list(requests(texts_a, texts_b, size)), call)
            computed = sum(positions[len(positions) // 2:])  # the timed pass
            positions.clear()
            add_row(rec, name, f"transformers AlbertForSequenceClassification, {kind} "
                    "tokenizer, padding=\"longest\"", size, seconds,
                    examples=len(texts_a), tokens=0, positions=computed)


CHILDREN = {"savedmodel": lambda rec: serve(rec, "real_tokens"),
            "savedmodel_padded": lambda rec: serve(rec, "padded"),
            "savedmodel_bf16": lambda rec: serve(rec, "bfloat16"),
            "savedmodel_bf16_env": lambda rec: serve(rec, "bfloat16",
                                                     LABELS["bfloat16_env"]),
            "litert_float32": lambda rec: litert(rec, "float32"),
            "litert_int8": lambda rec: litert(rec, "int8"),
            "litert_float32_text": lambda rec: litert(rec, "float32", in_file=True),
            "litert_int8_text": lambda rec: litert(rec, "int8", in_file=True),
            "keras_float32": lambda rec: keras_export(rec, "float32"),
            "keras_int8": lambda rec: keras_export(rec, "int8"),
            "in_process": in_process, "keras_hub": keras_hub, "transformers": transformers,
            "onnxruntime": onnxruntime}
OURS = ("savedmodel", "savedmodel_padded", "savedmodel_bf16", "savedmodel_bf16_env",
        "litert_float32", "litert_int8", "litert_float32_text", "litert_int8_text",
        "keras_float32", "keras_int8", "in_process")
PEERS = ("keras_hub", "transformers", "onnxruntime")
# What each child needs importable (a peer that is not is skipped).
IMPORTS = {"keras_hub": ("keras_hub",), "transformers": ("transformers", "torch"),
           "onnxruntime": ("onnxruntime", "onnx", "torch", "transformers"),
           **{name: ("ai_edge_litert",) for name in (
               "litert_float32", "litert_int8", "litert_float32_text", "litert_int8_text")}}
flags.DEFINE_list("ours", list(OURS), "Our rows to measure.")


def run_child(name: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if name == "export":
        print("RESULT " + json.dumps(export_models(FLAGS.export_root)))
        return
    rec = bm.Recorder(name)
    rec.bf16_matmul_gflops = None
    try:
        for module in IMPORTS.get(name, ("albert_tf",)):
            __import__(module)
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        print("SKIP " + json.dumps(f"{name} is not importable here "
                                   f"({type(e).__name__}: {e})"))
        return
    CHILDREN[name](rec)
    print("RESULT " + json.dumps({**rec.result(), "bf16_matmul_gflops":
                                  rec.bf16_matmul_gflops}))


def serving_environment(exports: str, variant: str) -> dict:
    """The environment that the exports of `variant` ask to be served in (their
    export_info.json's `serving_environment`; one for all the dev sets' exports). Read
    here as JSON, not by `albert_tf.export.read_export_info`: this process, which times
    nothing, stays without TensorFlow while its children are timed."""
    found = set()
    for paths in json.loads(exports).values():
        with open(os.path.join(paths[variant], "assets.extra", "export_info.json")) as f:
            found.add(json.dumps(json.load(f)["serving_environment"], sort_keys=True))
    (environment,) = found
    return json.loads(environment)


def _child(name: str, exports: str = "", export_root: str = "",
           environment: dict | None = None) -> dict | str:
    """Runs child `name` in a fresh process (its environment updated with
    `environment`); its RESULT, or the SKIP reason."""
    args = [f"--{n}={','.join(v) if isinstance(v, list) else v}" for n, v in (
        (n, getattr(FLAGS, n)) for n in (
            "config", "spm_model_file", "data_dir", "max_seq_length", "e2e_max_examples",
            "length_multiple", "batch_sizes", "repeats", "matmul_size", "seed", "ours"))]
    command = [sys.executable, os.path.abspath(__file__), f"--child={name}",
               f"--exports={exports}", f"--export_root={export_root}", *args]
    done = children.run(command, stdout=subprocess.PIPE, text=True, cwd=bm.REPOSITORY,
                          timeout=FLAGS.child_timeout,
                          env={**os.environ, **(environment or {})})
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("SKIP "):
            return json.loads(line[5:])
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.exit(f"{name} failed (exit status {done.returncode})")


def flop_bounds(fp32_gflops: float, bf16_gflops: float) -> list[dict]:
    """Per dev set and request size: the matmul FLOPs of the p50 request (its texts'
    real tokens, `bench_models.model_flops` of each packed sequence, as the Python
    tokenizer packs them) and the time they take at the measured fp32 and bf16 matmul
    peaks: no runtime answers that request faster at those peaks."""
    import numpy as np

    from albert_tf import AlbertConfig
    from albert_tf.packing import packed_length
    from albert_tf.tokenization import FullTokenizer

    config = AlbertConfig.from_json_file(FLAGS.config)
    tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    bounds = []
    for task_dir in FLAGS.data_dir:
        name, texts_a, texts_b, _ = bm.read_dev_set(task_dir, FLAGS.e2e_max_examples,
                                                    FLAGS.seed)
        flops = [bm.model_flops(config, packed_length(
            [len(tokenizer.encode(t)) for t in row if t is not None], FLAGS.max_seq_length))
            for row in zip(texts_a, texts_b or [None] * len(texts_a))]
        for size in batch_sizes():
            p50 = float(np.percentile([sum(flops[start:start + size])
                                       for start in range(0, len(flops), size)], 50))
            bounds.append({"benchmark": f"serving:{name}", "batch": size, "gflop": p50 / 1e9,
                           "fp32_ms": p50 / fp32_gflops / 1e6 if fp32_gflops else None,
                           "bf16_ms": p50 / bf16_gflops / 1e6 if bf16_gflops else None})
    return bounds


def format_table(rows: list[dict]) -> list[str]:
    """One Markdown table per task and batch: rate, ours (SavedModel) / this, latency."""
    ours = {(r["benchmark"], r["batch"]): r["rate"] for r in rows
            if r["variant"] == LABELS["real_tokens"]}
    lines = ["| task | batch | implementation | sequences/s | SavedModel / this | p50 ms "
             "| p90 ms | p99 ms | positions / token |", "|---|---|---|---|---|---|---|---|---|"]
    tokens = {r["benchmark"]: r["tokens"] for r in rows if r.get("tokens")}
    for r in sorted(rows, key=lambda r: (r["benchmark"], r["batch"], -r["rate"])):
        mine = ours.get((r["benchmark"], r["batch"]))
        ratio = f"{mine / r['rate']:.2f}x" if mine else ""
        latency = [f"{r[k]:.1f}" if k in r else "" for k in ("p50_ms", "p90_ms", "p99_ms")]
        per_token = r["positions"] / tokens[r["benchmark"]] \
            if tokens.get(r["benchmark"]) else 0
        lines.append(f"| {r['benchmark'].split(':')[1]} | {r['batch']} | {r['variant']} | "
                     f"{bm._fmt(r['rate'])} | {ratio} | "
                     f"{' | '.join(latency)} | {per_token:.2f} |")
    return lines


def main(argv):
    del argv
    if FLAGS.child:
        run_child(FLAGS.child)
        return
    if not FLAGS.data_dir:
        raise app.UsageError("--data_dir: one GLUE task folder or more (e.g. "
                             "../shared/data/glue/SST-2)")
    for flag, known in (("ours", OURS), ("peers", PEERS)):
        unknown = [n for n in getattr(FLAGS, flag) if n and n not in known]
        if unknown:
            raise app.UsageError(f"unknown --{flag} {unknown}; choose from {', '.join(known)}")
    names = [n for n in FLAGS.ours if n] + [p for p in FLAGS.peers if p]
    started = time.time()
    best, results, skipped, loads = {}, [], {}, []
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as root:
        exports = json.dumps(_child("export", export_root=root))
        environments = {"savedmodel_bf16_env": serving_environment(exports, "bfloat16")} \
            if "savedmodel_bf16_env" in names else {}
        for round_index in range(FLAGS.rounds):
            for name in names:
                if name in skipped:
                    continue
                busy = bm.wait_for_idle(FLAGS.wait_idle) if FLAGS.wait_idle else None
                loads.append(bm._load_average() + ("" if busy is None else f" ({busy:.0%})"))
                print(f"round {round_index + 1}/{FLAGS.rounds}: {name}", file=sys.stderr,
                      flush=True)
                result = _child(name, exports, environment=environments.get(name))
                if isinstance(result, str):
                    skipped[name] = result
                    continue
                results.append(result)
                for row in result["rows"]:
                    key = (row["benchmark"], row["variant"], row["batch"])
                    if key not in best or row["rate"] > best[key]["rate"]:
                        best[key] = row
    versions = {k: v for r in results for k, v in r["versions"].items()}
    fp32 = max((r["matmul_gflops"] or 0 for r in results), default=0)
    bf16 = max((r.get("bf16_matmul_gflops") or 0 for r in results), default=0)
    if not fp32:  # no SavedModel row measured them: this process does (no child runs)
        import tensorflow as tf

        fp32 = bm.tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats)
        bf16 = bm.tf_matmul_peak(FLAGS.matmul_size, FLAGS.repeats, dtype=tf.bfloat16)
    print(f"Machine: {bm._cpu_model()}, {os.cpu_count()} CPUs; CPU flags: {cpu_flags()}; "
          + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    print(f"Matmul peak (TensorFlow, {FLAGS.matmul_size}^2): fp32 {fp32:.0f} GFLOP/s, "
          f"bf16 {bf16:.0f} GFLOP/s")
    print(f"Config: {os.path.relpath(FLAGS.config, bm.REPOSITORY)}, float32, random "
          f"weights (seed {FLAGS.seed}); max_seq_length {FLAGS.max_seq_length}; best of "
          f"{FLAGS.rounds} rounds; load average at each process: {' | '.join(loads)}; "
          f"{time.time() - started:.0f} s")
    for why in skipped.values():
        print(f"Skipped: {why}")
    for note in {n for r in results for n in r["notes"]}:
        print(f"Note: {note}")
    rows = list(best.values())
    for r in rows:
        if r["variant"] in (LABELS["bfloat16"], LABELS["bfloat16_env"]):
            other = best.get((r["benchmark"], LABELS["real_tokens"], r["batch"]))
            if other:
                how = ", in its serving_environment," * (
                    r["variant"] == LABELS["bfloat16_env"])
                print(f"{r['benchmark']} batch {r['batch']}: the bfloat16 export{how} "
                      f"serves {r['rate'] / other['rate']:.2f}x the float32 export's "
                      "sequences/s")
    for r in sorted(rows, key=lambda r: (r["benchmark"], r["batch"], r["variant"])):
        anchor = best.get((r["benchmark"], LABELS["ort_float32"], r["batch"]))
        if anchor and r is not anchor:
            print(f"{r['benchmark']} batch {r['batch']}, {r['variant']}: p50 "
                  f"{r['p50_ms'] / anchor['p50_ms']:.2f}x ONNX Runtime float32's, "
                  f"{r['rate'] / anchor['rate']:.2f}x its sequences/s")
    for r in rows:
        if "model_p50_ms" in r and "tokenizer_p50_ms" not in r:
            print(f"{r['benchmark']} {r['variant']}, one text per request: p50 "
                  f"{r['p50_ms']:.2f} ms, the model alone on its ids {r['model_p50_ms']:.2f} ms")
        elif r["batch"] == 1 and r["variant"] in (LABELS["litert_float32_text"],
                                                  LABELS["litert_int8_text"]):
            print(f"{r['benchmark']} {r['variant']}, one text per request: p50 "
                  f"{r['p50_ms']:.2f} ms, its tokenizing included")
    for r in rows:
        if "tokenizer_p50_ms" in r:
            print(f"{r['benchmark']} {r['variant']}, one text per request: p50 "
                  f"{r['p50_ms']:.1f} ms = in-graph tokenizer {r['tokenizer_p50_ms']:.2f} "
                  f"ms + serving_default on its ids {r['model_p50_ms']:.1f} ms (p50s)")
    bounds = flop_bounds(fp32, bf16)
    print()
    print("FLOP bound of the p50 request (matmul FLOPs on its real tokens, at the measured "
          "peaks above):")
    print()
    print("| task | batch | GFLOP | at the fp32 peak, ms | at the bf16 peak, ms |")
    print("|---|---|---|---|---|")
    for b in bounds:
        at = [f"{b[k]:.2f}" if b[k] else "" for k in ("fp32_ms", "bf16_ms")]
        print(f"| {b['benchmark'].split(':')[1]} | {b['batch']} | {b['gflop']:.3f} | "
              f"{' | '.join(at)} |")
    print()
    for line in format_table(rows):
        print(line)
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w") as f:
            json.dump({"rows": rows, "fp32_gflops": fp32, "bf16_gflops": bf16,
                       "flop_bounds": bounds,
                       "versions": versions, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    app.run(main)
