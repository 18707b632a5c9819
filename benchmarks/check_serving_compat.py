"""Do our exports load, and answer the same, under the op set of the latest TF Serving?

TF Serving 2.20 (the latest release) links TensorFlow 2.20 and TensorFlow Text 2.20.0
(tensorflow/serving `tensorflow_serving/workspace.bzl`); we export with TensorFlow 2.21
and TensorFlow Text 2.21. A newer op, or a newer attribute of an op, in an export makes
a server of an older TensorFlow refuse it at load time. This check exports every
serving kind of `albert_tf.export` (the task modules' kinds included), float32 and
bfloat16, from a tiny model with the English SentencePiece model (and the classifier
with a Chinese WordPiece vocabulary too), the TF Hub preprocessors, and Keras' own
export of a classifier (`model.export`), as it is and after Keras' `model.quantize`
("int8"; `--keras_quantize`); then one runner
script calls every signature of every export (`serving_default`, `serve_examples`,
`serve_text`), the Reusable SavedModel's `__call__` (and `mlm`) and the preprocessors'
`tokenize` and `bert_pack_inputs`, on the same inputs, in two processes:

- this interpreter (the building TensorFlow), and
- `--serving_python`: an interpreter whose environment has only `tensorflow==2.20.*`
  and `tensorflow-text==2.20.0` (`benchmarks/requirements-serving-compat.txt`; no
  albert_tf: a server has none of our code either), e.g.

      python3 -m venv .venv-serving
      .venv-serving/bin/pip install -r benchmarks/requirements-serving-compat.txt
      python benchmarks/check_serving_compat.py --serving_python=.venv-serving/bin/python

Loading in Python goes through the same op registry and attribute checks as
`tensorflow_model_server`'s loader (both refuse an op or attribute the binary does not
know). Printed: one Markdown row per export and callable (outputs compared, the largest
difference of float outputs; integers and strings must be equal), the versions on both
sides and the machine's CPU flags. Exit status 1 when anything fails to load, to run or
to agree (float outputs within `--atol`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPM = ROOT / "tests" / "fixtures" / "spm" / "albert_en_30k_reconstructed.model"
VOCAB_ZH = ROOT / "tests" / "fixtures" / "ner" / "vocab_chinese.txt"
TEXTS = ["Hello world, this is a test.", "", "Who wrote Pride and Prejudice in 1813?"]
TEXTS_ZH = ["这部电影非常好看，我很喜欢。", "", "ALBERT 中文模型 and English。"]
TINY = dict(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
MAX_SEQ = 32

# The runner: only TensorFlow, TensorFlow Text and NumPy (no albert_tf), as a server.
RUNNER = r"""
import base64, json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the text ops)
work = sys.argv[1]
calls = json.load(open(f"{work}/calls.json"))
arrays = np.load(f"{work}/inputs.npz", allow_pickle=False)
results, strings, errors, loaded = {}, {}, {}, {}

def tensor(index, name, spec):
    if spec == "strings":
        shape, values = calls[index]["strings"][name]
        texts = np.array([base64.b64decode(v) for v in values], dtype=object)
        return tf.constant(texts.reshape(shape), dtype=tf.string)
    return tf.constant(arrays[f"{index}/{name}"])

def keep(index, name, value):
    if isinstance(value, tf.RaggedTensor):
        keep(index, name + ".values", value.flat_values)
        keep(index, name + ".row_lengths", value.row_lengths())
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            keep(index, f"{name}.{i}", v)
        return
    value = value.numpy()
    if value.dtype == object:
        strings[f"{index}/{name}"] = [list(value.shape),
                                      [base64.b64encode(x).decode() for x in value.ravel()]]
    else:
        results[f"{index}/{name}"] = value

for index, call in enumerate(calls):
    try:
        if call["path"] not in loaded:
            loaded[call["path"]] = tf.saved_model.load(call["path"])
        obj = loaded[call["path"]]
        inputs = {n: tensor(index, n, s) for n, s in call["inputs"].items()}
        what = call["callable"]
        if what.startswith("signatures/"):
            outputs = obj.signatures[what.split("/", 1)[1]](**inputs)
        elif what == "tokenize":
            outputs = {"ids": obj.tokenize(inputs["texts"])}
        elif what == "bert_pack_inputs":
            outputs = obj.bert_pack_inputs(
                [obj.tokenize(inputs["text_a"]), obj.tokenize(inputs["text_b"])],
                seq_length=call["seq_length"])
        else:  # __call__, mlm
            function = obj if what == "__call__" else getattr(obj, what)
            outputs = function(inputs, training=False)
        for name, value in outputs.items():
            keep(index, name, value)
    except Exception as e:  # reported per call
        errors[str(index)] = f"{type(e).__name__}: {str(e)[:500]}"
np.savez(f"{work}/results.npz", **results)
json.dump({"strings": strings, "errors": errors,
           "versions": {"tensorflow": tf.__version__,
                        "tensorflow_text": tensorflow_text.__version__}},
          open(f"{work}/outputs.json", "w"))
"""


# ------------------------------------------------------------------ the exports
def model_cases():
    """(label, kind, build_model kwargs, export kwargs) of every serving kind."""
    from albert_tf import tasks

    arguments = {"num_labels": 3, "num_choices": 2}
    cases = []
    for name, kind in tasks.serving_kinds().items():  # the package's tasks' and encoder
        model_kwargs = {a: arguments[a] for a in kind.model_arguments}
        export_kwargs = {"spm_model_file": str(SPM), "max_query_length": 8}
        if name == "squad_v2":
            model_kwargs.update(start_n_top=3, end_n_top=2)
        cases.append((name, name, model_kwargs, export_kwargs))
    cases.append(("classifier (WordPiece, Chinese)", "classifier", {"num_labels": 2},
                  {"vocab_file": str(VOCAB_ZH)}))
    return cases


KERAS_EXPORT = "classifier (Keras' model.export)"
PREPROCESSORS = (("preprocessor (SentencePiece)", {"spm_model_file": str(SPM)}),
                 ("preprocessor (WordPiece, Chinese)", {"vocab_file": str(VOCAB_ZH)}))


def export_all(work: pathlib.Path, precisions, wanted=None,
               keras_modes=("float32", "int8")) -> list[dict]:
    """Writes every export (of the labels `wanted`, default all; Keras' export of a
    classifier in each of `keras_modes`: "float32", or a mode of Keras' `quantize`);
    returns [{label, precision, path, kind, info, chinese}]."""
    from albert_tf import AlbertConfig
    from albert_tf.export import (
        build_model,
        export_preprocessor,
        export_savedmodel,
        read_export_info,
    )

    config = AlbertConfig(**TINY)
    exports = []
    for index, (label, kind, model_kwargs, export_kwargs) in enumerate(model_cases()):
        if wanted and label not in wanted:
            continue
        model = build_model(kind, config, seed=index, **model_kwargs)
        for precision in precisions:
            path = export_savedmodel(model, work / f"{index}_{precision}", kind=kind,
                                     max_seq_length=MAX_SEQ, serving_precision=precision,
                                     **export_kwargs)
            exports.append({"label": label, "precision": precision, "path": path,
                            "kind": kind, "info": read_export_info(path),
                            "chinese": "vocab_file" in export_kwargs})
    for mode in keras_modes if not wanted or KERAS_EXPORT in wanted else ():
        model = build_model("classifier", config, seed=0, num_labels=3)
        if mode != "float32":
            model.quantize(mode)
        path = work / f"keras_{mode}"
        model.export(path, verbose=False)
        exports.append({"label": KERAS_EXPORT, "precision": mode, "path": str(path),
                        "kind": "keras", "info": {}, "chinese": False})
    for index, (label, files) in enumerate(PREPROCESSORS):
        if wanted and label not in wanted:
            continue
        path = export_preprocessor(work / f"preprocessor_{index}", seq_length=16,
                                   max_seq_length=TINY["max_position_embeddings"], **files)
        exports.append({"label": label, "precision": "-", "path": path,
                        "kind": "preprocessor", "info": {},
                        "chinese": "vocab_file" in files})
    return exports


# ------------------------------------------------------------------ the calls
def _numbers(spec: dict, name: str, rng) -> np.ndarray:
    """An input of the signature spec (dtype and shape, None: batch 2, length 7)."""
    shape = [2 if i == 0 else (s or 7) for i, s in enumerate(spec["shape"])]
    if name == "input_word_ids":
        return rng.integers(5, 1000, size=shape).astype(np.int32)
    if name == "input_mask":
        return np.ones(shape, np.int32)
    if name == "masked_lm_positions":
        return rng.integers(1, 6, size=shape).astype(np.int32)
    return np.zeros(shape, spec["dtype"])


def _examples(inputs: dict) -> np.ndarray:
    import tensorflow as tf

    from albert_tf.names import MODEL_TO_RECORD

    rows = []
    for i in range(len(inputs["input_word_ids"])):
        # Every feature an int64 list, as in the records (p_mask too).
        feature = {MODEL_TO_RECORD.get(name, name): tf.train.Feature(
            int64_list=tf.train.Int64List(value=value[i].ravel().astype(np.int64).tolist()))
            for name, value in inputs.items()}
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        rows.append(example.SerializeToString())
    return np.array(rows, dtype=object)


def _texts(spec: dict, chinese: bool) -> np.ndarray:
    texts = TEXTS_ZH if chinese else TEXTS
    if len(spec["shape"]) == 2:  # choices [B, N]
        return np.array([[t, t[::-1]] for t in texts], dtype=object)
    return np.array(texts, dtype=object)


def calls_of(export: dict, rng) -> list[dict]:
    """Every callable of one export with its inputs ({name: array})."""
    calls = []
    if export["kind"] == "preprocessor":
        texts = np.array(TEXTS_ZH if export["chinese"] else TEXTS, dtype=object)
        calls.append({"callable": "signatures/serving_default", "inputs": {"text_a": texts}})
        calls.append({"callable": "tokenize", "inputs": {"texts": texts}})
        calls.append({"callable": "bert_pack_inputs", "seq_length": 12,
                      "inputs": {"text_a": texts, "text_b": texts[::-1].copy()}})
        return calls
    if export["kind"] == "keras":  # its serving_default: the model's id inputs
        from albert_tf.names import MODEL_INPUTS

        spec = {"shape": [None, None], "dtype": "int32"}
        calls.append({"callable": "signatures/serving_default", "inputs": {
            name: _numbers(spec, name, rng) for name in MODEL_INPUTS}})
        return calls
    signatures = export["info"]["signatures"]
    default = {name: _numbers(spec, name, rng)
               for name, spec in signatures["serving_default"]["inputs"].items()}
    calls.append({"callable": "signatures/serving_default", "inputs": default})
    calls.append({"callable": "signatures/serve_examples",
                  "inputs": {"examples": _examples(default)}})
    if "serve_text" in signatures:
        calls.append({"callable": "signatures/serve_text", "inputs": {
            name: _texts(spec, export["chinese"])
            for name, spec in signatures["serve_text"]["inputs"].items()}})
    if export["kind"] in ("encoder", "mlm"):  # the Reusable SavedModel
        sequences = {n: default[n] for n in ("input_word_ids", "input_mask",
                                             "input_type_ids")}
        calls.append({"callable": "__call__", "inputs": sequences})
        if export["kind"] == "mlm":
            calls.append({"callable": "mlm", "inputs": default})
    return calls


def write_calls(work: pathlib.Path, calls: list[dict]) -> None:
    manifest, numeric = [], {}
    for index, call in enumerate(calls):
        entry = {k: v for k, v in call.items() if k != "inputs"}
        entry["inputs"], entry["strings"] = {}, {}
        for name, value in call["inputs"].items():
            if value.dtype == object:
                raw = [v.encode() if isinstance(v, str) else v for v in value.ravel()]
                entry["strings"][name] = [list(value.shape),
                                          [base64.b64encode(v).decode() for v in raw]]
                entry["inputs"][name] = "strings"
            else:
                numeric[f"{index}/{name}"] = value
                entry["inputs"][name] = "numbers"
        manifest.append(entry)
    (work / "calls.json").write_text(json.dumps(manifest))
    np.savez(work / "inputs.npz", **numeric)


def run_calls(python: str, work: pathlib.Path, side: str) -> dict:
    """Runs the runner in `python` on the calls of `work`; its outputs."""
    out = work / side
    out.mkdir(exist_ok=True)
    for name in ("calls.json", "inputs.npz"):
        (out / name).write_bytes((work / name).read_bytes())
    result = subprocess.run([python, "-c", RUNNER, str(out)], cwd=out, text=True,
                            capture_output=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if result.returncode != 0:
        raise SystemExit(f"the runner failed in {python}:\n{result.stderr[-3000:]}")
    with np.load(out / "results.npz", allow_pickle=False) as saved:
        numbers = {name: saved[name] for name in saved.files}
    outputs = json.loads((out / "outputs.json").read_text())
    return {"numbers": numbers, **outputs}


def compare(calls, built: dict, served: dict, atol: float,
            bf16_atol: float | None = None) -> list[dict]:
    """One row per call: status and the largest float difference (within `atol`; a
    bfloat16 export's within `bf16_atol`, default `atol`)."""
    rows = []
    for index, call in enumerate(calls):
        key = str(index)
        limit = bf16_atol if call.get("precision") == "bfloat16" and bf16_atol else atol
        row = {"call": call, "status": "same", "max_diff": 0.0}
        if key in built["errors"] or key in served["errors"]:
            row["status"] = "; ".join(
                f"{side}: {' '.join(result['errors'][key].split())}" for side, result
                in (("built", built), ("served", served)) if key in result["errors"])
            rows.append(row)
            continue
        prefix = f"{index}/"
        names = sorted({n for n in built["numbers"] if n.startswith(prefix)} |
                       {n for n in served["numbers"] if n.startswith(prefix)})
        string_names = sorted({n for n in built["strings"] if n.startswith(prefix)} |
                              {n for n in served["strings"] if n.startswith(prefix)})
        for name in names:
            a, b = built["numbers"].get(name), served["numbers"].get(name)
            if a is None or b is None or a.shape != b.shape:
                row["status"] = f"{name[len(prefix):]}: missing or another shape"
            elif a.dtype.kind == "f":
                diff = float(np.max(np.abs(a - b))) if a.size else 0.0
                row["max_diff"] = max(row["max_diff"], diff)
                if not diff <= limit:
                    row["status"] = f"{name[len(prefix):]} differs by {diff:.2e}"
            elif not np.array_equal(a, b):
                row["status"] = f"{name[len(prefix):]} differs"
        for name in string_names:
            if built["strings"].get(name) != served["strings"].get(name):
                row["status"] = f"{name[len(prefix):]} differs"
        row["outputs"] = len(names) + len(string_names)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serving_python", default=str(ROOT / ".venv-serving" / "bin" /
                                                        "python"),
                        help="An interpreter with tensorflow==2.20.* and "
                             "tensorflow-text==2.20.0 (and NumPy) only.")
    parser.add_argument("--work_dir", default=None,
                        help="Where the exports go (default: a temporary folder).")
    parser.add_argument("--precisions", default="float32,bfloat16",
                        help="Serving precisions of the model exports.")
    parser.add_argument("--kinds", default="",
                        help="Only the exports of these labels, as the table names them "
                             "(separated by ';'; default: all).")
    parser.add_argument("--keras_quantize", default="float32,int8",
                        help="The Keras exports of a classifier: float32 (as it is) and "
                             "the modes of Keras' model.quantize (separated by ',').")
    parser.add_argument("--atol", type=float, default=1e-5,
                        help="Largest difference of float outputs that still agrees.")
    parser.add_argument("--bf16_atol", type=float, default=2 ** -8,
                        help="The same for the bfloat16 exports: one bfloat16 rounding "
                             "of a value of magnitude 1 (2^-8). Two TensorFlow versions "
                             "may round a bfloat16 matmul differently (their oneDNN; on "
                             "a CPU without bfloat16 instructions, emulated).")
    args = parser.parse_args(argv)
    # Absolute (not resolved: a venv's python is a link), as the runner starts elsewhere.
    args.serving_python = os.path.abspath(args.serving_python)
    if not os.path.exists(args.serving_python):
        raise SystemExit(f"--serving_python {args.serving_python} does not exist; make it "
                         "with benchmarks/requirements-serving-compat.txt (see --help)")
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="serving_compat_"))
    work.mkdir(parents=True, exist_ok=True)
    wanted = set(args.kinds.split(";")) if args.kinds else None
    exports = export_all(work, args.precisions.split(","), wanted,
                         [m for m in args.keras_quantize.split(",") if m])
    rng = np.random.default_rng(0)
    calls = []
    for export in exports:
        for call in calls_of(export, rng):
            calls.append({**call, "path": str(export["path"]), "export": export["label"],
                          "precision": export["precision"]})
    write_calls(work, [{k: v for k, v in c.items() if k not in ("export", "precision")}
                       for c in calls])
    built = run_calls(sys.executable, work, "built")
    served = run_calls(args.serving_python, work, "served")
    rows = compare(calls, built, served, args.atol, args.bf16_atol)
    from bench_own_tasks import cpu_flags  # (bench_own_tasks defines no flags)

    print(f"CPU flags: {cpu_flags()}")
    print(f"built with TensorFlow {built['versions']['tensorflow']}, TensorFlow Text "
          f"{built['versions']['tensorflow_text']}; served with TensorFlow "
          f"{served['versions']['tensorflow']}, TensorFlow Text "
          f"{served['versions']['tensorflow_text']} ({args.serving_python})")
    print()
    print("| export | precision | callable | outputs | largest float difference | result |")
    print("|---|---|---|---:|---:|---|")
    for row in rows:
        call = row["call"]
        print(f"| {call['export']} | {call['precision']} | "
              f"{call['callable'].replace('signatures/', '')} | {row.get('outputs', '-')} | "
              f"{row['max_diff']:.1e} | {row['status']} |")
    failed = [row for row in rows if row["status"] != "same"]
    print()
    print(f"{len(rows) - len(failed)} of {len(rows)} calls the same"
          + (f"; {len(failed)} FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
