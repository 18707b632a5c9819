"""Where the time of one request goes in a SavedModel export: each op type's count and
time per request (TensorFlow's profiler), beside the request's p50 latency.

A classifier of `--config` (random weights, seed 0) is exported once
(`albert_tf.export.export_savedmodel`, `--serving_precision`). Each entry of
`--environments` then gets a fresh process (oneDNN reads its settings once per process)
that loads the export as TF Serving would, sends the first `--examples` dev texts of
`--data_dir` one per request (after an untimed pass) to `serve_text` and, on the ids
that serve_text's tokenizer packs, to `serving_default`, each signature freshly loaded,
its first `--profiled_requests` requests sent once and then profiled (TensorFlow's
executor stops tracing the ops it finds cheap after some calls): printed per signature,
the p50 latency, the ops run per request and the ops that take the most time, summed
over the request (a matmul's time includes the threads it waits for). Op time is the
executor's; the rest of a request's latency is the eager call around the function, the
executor's scheduling and the profiler's own cost.

    python benchmarks/profile_request.py --config=benchmarks/albert_tiny_zh_shape.json \\
        --spm_model_file=../shared/data/spm/albert_en_30k_reconstructed.model \\
        --data_dir=../shared/data/glue/SST-2 \\
        --environments=,TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1,TF_ENABLE_ONEDNN_OPTS=0

An entry of `--environments` is `NAME=value` settings joined by `+` (empty: the
process as started).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import time

from absl import app, flags

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)
from benchmarks import children  # noqa: E402

flags.DEFINE_string("config", os.path.join(REPOSITORY, "benchmarks",
                                           "albert_tiny_zh_shape.json"), "ALBERT config.")
flags.DEFINE_string("spm_model_file", os.path.join(
    REPOSITORY, "tests", "fixtures", "spm", "albert_en_30k_reconstructed.model"),
    "SentencePiece model.")
flags.DEFINE_string("data_dir", None, "A GLUE task folder (its dev.tsv is read).")
flags.DEFINE_integer("examples", 100, "Dev texts sent, one per request.")
flags.DEFINE_integer("max_seq_length", 128, "serve_text's max_seq_length.")
flags.DEFINE_enum("serving_precision", "float32", ["float32", "bfloat16"],
                  "The export's precision.")
flags.DEFINE_list("environments", [""], "Settings of each process: NAME=value joined by "
                  "'+' ('' for none).")
flags.DEFINE_integer("profiled_requests", 10, "Requests of the profiled pass (the "
                     "profiler drops events of longer passes).")
flags.DEFINE_integer("top", 12, "Op types listed per signature.")
flags.DEFINE_string("json_output", None, "Also write the results to this file.")
flags.DEFINE_string("child", None, "Internal: the export this process profiles.")

FLAGS = flags.FLAGS
SIGNATURES = ("serve_text", "serving_default")
# Events of the profiler's host planes that are not ops (the executor's own work).
NOT_OPS = {"Process", "ParallelFor", "StartRegion", "StopRegion", "Record",
           "MemoryAllocation", "MemoryDeallocation", "ExecutorDoneCallback"}


def texts() -> tuple[list[str], list[str] | None]:
    """The first --examples dev texts of --data_dir (text_b too for a pair task)."""
    from albert_tf.data import glue

    task = glue.get_task(os.path.basename(FLAGS.data_dir.rstrip("/")))
    examples = glue.GlueProcessor(task).get_dev_examples(
        os.path.dirname(FLAGS.data_dir.rstrip("/")))[:FLAGS.examples]
    return [e.text_a for e in examples], \
        [e.text_b for e in examples] if task.is_pair else None


def op_times(xspace_path: str, requests: int) -> tuple[float, dict]:
    """(ops per request, {op type: (count, µs) per request}) from a profile's XSpace:
    the TensorFlow op events of its host plane."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as f:
        space.ParseFromString(f.read())
    counts, micros = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = {key: m.name for key, m in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute") and line.name != "python":
                continue
            for event in line.events:
                name = names.get(event.metadata_id, "")
                if ":" not in name:  # ops are "node name:OpType"
                    continue
                op = name.rsplit(":", 1)[1]
                if op in NOT_OPS:
                    continue
                counts[op] += 1
                micros[op] += event.duration_ps / 1e6
    per_request = {op: (counts[op] / requests, micros[op] / requests) for op in counts}
    return sum(counts.values()) / requests, per_request


def profile_child(export_dir: str) -> None:
    import glob

    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (serve_text's ops)

    from albert_tf import names
    from albert_tf.packing import pack_inputs
    from albert_tf.text import AlbertTextTokenizer

    texts_a, texts_b = texts()
    requests = {"serve_text": [
        {names.TEXT_A: tf.constant([a]), **({} if texts_b is None else
                                            {names.TEXT_B: tf.constant([b])})}
        for a, b in zip(texts_a, texts_b or [None] * len(texts_a))]}
    # serving_default gets the ids serve_text's tokenizer packs (a classifier's
    # serve_text does not return them)
    tokenizer = AlbertTextTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    requests["serving_default"] = [pack_inputs(
        [tokenizer.tokenize(t) for t in r.values()], FLAGS.max_seq_length,
        cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id)
        for r in requests["serve_text"]]
    results = {}
    for signature in SIGNATURES:
        # Freshly loaded: TensorFlow's executor stops tracing the ops it has found cheap
        # after some calls, so the profiled pass comes second, right after one warm pass.
        function = tf.saved_model.load(export_dir).signatures[signature]
        calls = requests[signature]
        profiled = calls[:FLAGS.profiled_requests]
        for request in profiled:
            function(**request)
        with tempfile.TemporaryDirectory(prefix="profile_request_") as logdir:
            tf.profiler.experimental.start(logdir, options=tf.profiler.experimental.
                                           ProfilerOptions(host_tracer_level=3))
            for request in profiled:
                function(**request)
            tf.profiler.experimental.stop()
            (path,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
            ops, per_op = op_times(path, len(profiled))
        for request in calls:
            function(**request)
        seconds = []
        for request in calls:
            start = time.perf_counter()
            function(**request)
            seconds.append(time.perf_counter() - start)
        results[signature] = {"p50_ms": float(np.percentile(seconds, 50) * 1e3),
                              "ops_per_request": ops,
                              "op_micros_per_request": sum(t for _, t in per_op.values()),
                              "ops": per_op}
    print("RESULT " + json.dumps(results))


def settings(entry: str) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in entry.split("+") if item]
    bad = [item for item in pairs if len(item) != 2]
    if bad:
        raise app.UsageError(f"--environments entry {entry!r}: NAME=value joined by '+'")
    return dict(pairs)


def main(argv):
    del argv
    if FLAGS.child:
        profile_child(FLAGS.child)
        return
    if not FLAGS.data_dir:
        raise app.UsageError("--data_dir: a GLUE task folder (e.g. ../shared/data/glue/SST-2)")
    environments = [(entry, settings(entry)) for entry in FLAGS.environments or [""]]
    sys.path.insert(0, os.path.join(REPOSITORY, "benchmarks"))
    from bench_own_tasks import cpu_flags  # (bench_own_tasks defines no flags)

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.data import glue
    from albert_tf.export import export_savedmodel

    task = glue.get_task(os.path.basename(FLAGS.data_dir.rstrip("/")))
    results = {}
    with tempfile.TemporaryDirectory(prefix="profile_request_") as root:
        model = AlbertClassifier(AlbertConfig.from_json_file(FLAGS.config),
                                 len(task.labels), seed=0)
        export_dir = export_savedmodel(
            model, os.path.join(root, "export"), kind="classifier",
            spm_model_file=FLAGS.spm_model_file, task_name=task.name,
            max_seq_length=FLAGS.max_seq_length, warmup_requests=False,
            serving_precision=FLAGS.serving_precision)
        for entry, extra in environments:
            done = children.run(
                [sys.executable, os.path.abspath(__file__), f"--child={export_dir}",
                 *[f"--{name}={getattr(FLAGS, name)}" for name in (
                     "data_dir", "examples", "spm_model_file", "max_seq_length",
                     "profiled_requests")]],
                capture_output=True, text=True,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **extra))
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"the process with {entry or 'no settings'} failed:\n"
                         f"{done.stderr[-3000:]}")
            results[entry] = json.loads(lines[-1][len("RESULT "):])
    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs; config "
          f"{os.path.relpath(FLAGS.config, REPOSITORY)}, {FLAGS.serving_precision} export; "
          f"{FLAGS.examples} {task.dir_name} dev texts, one per request")
    for signature in SIGNATURES:
        print()
        print(f"{signature}: | settings | p50 ms | ops per request | op time per request, ms "
              f"| top op types (per request: count, ms) |")
        print("|---|---:|---:|---:|---|")
        for entry, result in results.items():
            r = result[signature]
            top = sorted(r["ops"].items(), key=lambda item: -item[1][1])[:FLAGS.top]
            listed = ", ".join(f"{op} {count:.1f} {micros / 1e3:.2f}"
                               for op, (count, micros) in top)
            print(f"| {entry or '(none)'} | {r['p50_ms']:.2f} | {r['ops_per_request']:.0f} | "
                  f"{r['op_micros_per_request'] / 1e3:.2f} | {listed} |")
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    app.run(main)
