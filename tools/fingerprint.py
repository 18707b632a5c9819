"""Fingerprints of what the scripts write, at two revisions, compared: the proof that a
restructuring changed no behaviour (issue 29: "flags, records, caches, checkpoints,
exports and predictions stay identical on the fixtures").

    python tools/fingerprint.py --base=main~3            # base against the working tree
    python tools/fingerprint.py --base=REV --cases=squad_v1,ner --keep_dir=/tmp/fp

Each case runs one script end to end on the test fixtures (a tiny model, a few steps,
fixed seeds: train, evaluate, predict, export), once with the code of `--base` (a
temporary `git worktree`) and once with the working tree's, in fresh processes of this
Python, both on the same input files. Every file written is fingerprinted by SHA-256:
records and their cache settings, object-based and TF1 checkpoints, results,
predictions, export_info.json and the export's assets and variables. Left out, as they
differ between any two runs: TensorBoard events, lock files and the SavedModels' graph
protos (`saved_model.pb`, `fingerprint.pb`: function names carry unique ids; the
variables beside them are compared). Paths that hold the run's own directory are
compared with it replaced by `<out>`.

Prints one line per case (same / which files differ, appear or go) and exits 1 when any
differ. Both runs must be on the same machine: results and checkpoints carry float
numbers that differ between CPUs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPM = FIXTURES / "spm" / "albert_en_30k_reconstructed.model"
VOCAB_ZH = FIXTURES / "ner" / "vocab_chinese.txt"
ALICE = ROOT / "demo_app" / "text" / "alice_excerpt.txt"
# What differs between any two runs of the same code.
SKIPPED_NAMES = ("saved_model.pb", "fingerprint.pb")
SKIPPED_PARTS = ("events.out.tfevents", ".lock")

TINY = dict(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
STEPS = ["--train_batch_size=4", "--save_checkpoints_steps=2", "--iterations_per_loop=2",
         "--learning_rate=1e-3", "--seed=7"]
EVAL, PREDICT = "--eval_batch_size=4", "--predict_batch_size=4"


def cases(config: str, config_zh: str) -> dict[str, list[str]]:
    """Case name -> the script and its flags (`{out}`: the case's output directory)."""
    squad = FIXTURES / "squad"
    ner = FIXTURES / "ner"
    model = [f"--albert_config_file={config}", f"--spm_model_file={SPM}"]
    model_zh = [f"--albert_config_file={config_zh}", f"--vocab_file={VOCAB_ZH}"]
    classifier = ["run_classifier.py", "--do_train", "--do_eval", "--do_predict",
                  "--export_dir={out}/export", "--train_step=4", EVAL, PREDICT, *STEPS]
    squad_args = ["run_squad.py", "--do_train", "--do_predict", "--export_dir={out}/export",
                  "--max_seq_length=96", "--doc_stride=48", "--max_query_length=24",
                  "--num_train_epochs=1", PREDICT, *model, *STEPS]
    return {
        "mrpc": [*classifier, "--task_name=MRPC", f"--data_dir={FIXTURES / 'glue'}",
                 "--max_seq_length=64", *model],
        "race": [*classifier, "--task_name=race", f"--data_dir={FIXTURES / 'race'}",
                 "--max_seq_length=128", "--max_qa_length=32", *model],
        "c3": [*classifier, "--task_name=c3", f"--data_dir={FIXTURES / 'c3'}",
               f"--test_file={FIXTURES / 'c3' / 'c3-m-dev.json'}", "--max_seq_length=96",
               *model_zh],
        "squad_v1": [*squad_args, f"--train_file={squad / 'dev-v1.1-excerpt.json'}",
                     f"--predict_file={squad / 'dev-v1.1-excerpt.json'}"],
        "squad_v2": [*squad_args, "--version_2_with_negative",
                     f"--train_file={squad / 'dev-v2.0-excerpt.json'}",
                     f"--predict_file={squad / 'dev-v2.0-excerpt.json'}"],
        "ner": ["run_ner.py", "--do_train", "--do_eval", "--do_predict",
                "--export_dir={out}/export", "--train_step=4", "--max_seq_length=64",
                f"--train_file={ner / 'cluener_train.json'}",
                f"--dev_file={ner / 'cluener_dev.json'}",
                f"--test_file={ner / 'cluener_dev.json'}", EVAL, PREDICT, *model_zh,
                *STEPS],
        "pretraining_text": ["run_pretraining.py", "--do_train", "--do_eval",
                             f"--input_text={ALICE}", "--max_seq_length=64",
                             "--max_predictions_per_seq=10", "--num_train_steps=4",
                             "--num_warmup_steps=1", "--max_eval_steps=2",
                             "--export_dir={out}/export", EVAL, *model, *STEPS],
        "create_pretraining_data": ["create_pretraining_data.py", f"--input_file={ALICE}",
                                    "--output_file={out}/records.tfrecord",
                                    f"--spm_model_file={SPM}", "--max_seq_length=64",
                                    "--max_predictions_per_seq=10", "--dupe_factor=2"],
    }


def fingerprint(directory: pathlib.Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file under `directory` (see the module
    docstring for what is left out); `directory` itself written as `<out>` inside
    files; TFRecord files by their records' canonical bytes (`_records_digest`), their
    cache settings without the SHA-256 of the files' bytes (written by revisions that
    serialized records in a process's own order), the checkpoint state file without its
    timestamps."""
    found = {}
    marker = str(directory).encode()
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if not path.is_file() or path.name in SKIPPED_NAMES or any(
                part in relative for part in SKIPPED_PARTS):
            continue
        if _is_tfrecord(path):
            found[relative] = _records_digest(path, marker)
            continue
        data = path.read_bytes().replace(marker, b"<out>")
        if path.name.endswith(".meta.json"):  # the records are compared as records
            settings = json.loads(data)
            settings.pop("records_sha256", None)
            data = json.dumps(settings, sort_keys=True).encode()
        if path.name == "checkpoint":  # CheckpointState: when, besides which
            data = b"\n".join(line for line in data.splitlines()
                               if b"timestamp" not in line)
        found[relative] = hashlib.sha256(data).hexdigest()
    return found


def _is_tfrecord(path: pathlib.Path) -> bool:
    return path.name == "tf_serving_warmup_requests" or \
        path.suffix in (".tf_record", ".tfrecord")


def _records_digest(path: pathlib.Path, marker: bytes) -> str:
    """SHA-256 of a TFRecord file's records, each a tf.train.Example (a TF Serving
    PredictionLog in the warmup file) serialized deterministically: their feature and
    input maps are written in an order that changes from process to process."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    kind = prediction_log_pb2.PredictionLog if path.name == "tf_serving_warmup_requests" \
        else tf.train.Example
    digest = hashlib.sha256()
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        message = kind.FromString(record)
        digest.update(message.SerializeToString(deterministic=True).replace(marker, b"<out>"))
    return digest.hexdigest()


def run_case(code: pathlib.Path, name: str, args: list[str], out: pathlib.Path) -> dict:
    """One case with the code under `code` (its scripts and its albert_tf); the
    fingerprint of what it wrote."""
    script, *flags = args
    command = [sys.executable, str(code / script), f"--output_dir={out}",
               *(f.replace("{out}", str(out)) for f in flags)]
    if script == "create_pretraining_data.py":
        command.remove(f"--output_dir={out}")
        out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(code), TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode:
        raise SystemExit(f"{name} failed with the code at {code}:\n{done.stderr[-3000:]}")
    return fingerprint(out)


def compare(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two fingerprints, one phrase per file."""
    changes = [f"{p} differs" for p in sorted(before.keys() & after.keys())
               if before[p] != after[p]]
    changes += [f"{p} is new" for p in sorted(after.keys() - before.keys())]
    changes += [f"{p} is gone" for p in sorted(before.keys() - after.keys())]
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare with")
    parser.add_argument("--cases", default="", help="comma-separated; default: all")
    parser.add_argument("--keep_dir", default=None,
                        help="keep the outputs here (default: a temporary directory)")
    parser.add_argument("--json_output", default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fingerprint_") as temporary:
        work = pathlib.Path(args.keep_dir or temporary)
        work.mkdir(parents=True, exist_ok=True)
        for name, changes in (("tiny", {}), ("tiny_zh", {"vocab_size": 21128})):
            (work / f"{name}.json").write_text(json.dumps({**TINY, **changes}, indent=2))
        table = cases(str(work / "tiny.json"), str(work / "tiny_zh.json"))
        chosen = [c for c in args.cases.split(",") if c] or list(table)
        unknown = [c for c in chosen if c not in table]
        if unknown:
            raise SystemExit(f"unknown --cases {unknown}; choose from {', '.join(table)}")
        base = work / "base_code"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base],
                       cwd=ROOT, check=True, capture_output=True)
        results, differing = {}, 0
        try:
            for name in chosen:
                prints = {side: run_case(code, name, table[name], work / side / name)
                          for side, code in (("base", base), ("now", ROOT))}
                changes = compare(prints["base"], prints["now"])
                differing += bool(changes)
                results[name] = {"files": len(prints["now"]), "changes": changes}
                print(f"{name}: {len(prints['now'])} files, "
                      + ("the same" if not changes else "; ".join(changes)), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           capture_output=True)
        if args.json_output:
            pathlib.Path(args.json_output).write_text(json.dumps(results, indent=1))
    if differing:
        raise SystemExit(f"{differing} of {len(chosen)} cases differ from {args.base}")


if __name__ == "__main__":
    main()
