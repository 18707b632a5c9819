"""Long texts: `run_classifier.py --long_text=truncate` against `--long_text=windows`.

    python benchmarks/bench_long_text.py --data_dir=../shared/data --work_dir=/tmp/lt

The long-text set, built here (deterministic for `--data_seed`): documents of about
`--min_pieces` to `--max_pieces` SentencePiece pieces, each a passage of consecutive
sentences of a public-domain novel (`--filler_text`, default Pride and Prejudice,
../shared/data/text/gutenberg/pg1342.txt: sentences of 5 to 40 words, its first 80%
for the training documents, the rest for dev) with a block of `--label_sentences` SST-2
sentences of one label inserted between two of its sentences at a random place; the
document's label is theirs. Training documents draw their SST-2 sentences (of at least
`--min_words` words) from SST-2's train.tsv, dev documents from its dev.tsv (872
sentences, none shared); the novel says nothing of the label, so a document whose
block lies past what `--max_seq_length` keeps cannot be answered from its first window.
Labels are balanced; the files are `{train,dev,test}.jsonl` (`text`, `label`); test is
dev again, so that the run's predictions cover the dev texts.

For each of `--seeds` (the same steps, seed and data for all): `run_classifier.py
--task_name=classification` trains a small ALBERT from random weights (no pretrained
English ALBERT is reachable offline; `--config`), evaluates, predicts and exports a
SavedModel, for each of `--modes` (truncating, in windows), the windows once for each
of `--window_weights` (`--window_weight`: one, inverse) and of `--window_caps`
(`--max_windows_per_text`, 0: none). Printed: what truncation cuts (the
run's data_report.json: examples cut, pieces dropped), each run's dev accuracy (also on
the documents whose label block starts inside / past the first window), training
sequences/s (steady: between the run's first and last progress lines) and texts/s
(sequences/s over training windows per text), the export's `serve_text` texts/s on the dev texts
(batches of `--serve_batch`, best of `--serve_repeats` after an untimed pass) and the
largest |probability difference| between its answers and the run's predictions; for a
windows run, the dev accuracy of each text's answer pooled from its windows' logits
(the export's `serve_examples` on the run's dev window records) by the mean of their
logits (the run's own rule, checked to give its classes), the mean of their
probabilities, and the most confident window's class. One Markdown table and the
machine's CPU; the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import time

from absl import app, flags

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from benchmarks import children  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
# From random weights: trains in minutes on 2 CPU cores (bench_own_tasks.py's, English).
CONFIGS = {
    "small": dict(vocab_size=30000, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=512,
                  max_position_embeddings=512),
    "tiny": dict(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=32, max_position_embeddings=128),
}

flags.DEFINE_string("data_dir", str(DATA), "../shared/data: SST-2 and the novel below.")
flags.DEFINE_string("sst2_dir", None, "SST-2's train.tsv and dev.tsv (default "
                    "<data_dir>/glue/SST-2).")
flags.DEFINE_string("filler_text", None, "The public-domain text the passages come from "
                    "(default <data_dir>/text/gutenberg/pg1342.txt).")
flags.DEFINE_string("spm_model_file", str(
    ROOT / "tests" / "fixtures" / "spm" / "albert_en_30k_reconstructed.model"),
    "SentencePiece model.")
flags.DEFINE_string("work_dir", "/tmp/bench_long_text", "Where the data and runs go.")
flags.DEFINE_string("config", "small", f"One of {sorted(CONFIGS)}, or an "
                    "albert_config.json.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Seeds of the runs (weights, data order).")
flags.DEFINE_integer("train_steps", 1500, "Training steps of every run.")
flags.DEFINE_integer("batch_size", 32, "Training batch.")
flags.DEFINE_float("learning_rate", 3e-4, "Peak learning rate (10% warmup).")
flags.DEFINE_integer("max_seq_length", 128, "max_seq_length of every run.")
flags.DEFINE_integer("window_stride", None, "--window_stride (default: half the window).")
flags.DEFINE_integer("train_docs", 2000, "Training documents.")
flags.DEFINE_integer("dev_docs", 400, "Dev documents.")
flags.DEFINE_integer("min_pieces", 200, "A document's length is drawn from "
                     "[min_pieces, max_pieces] pieces (it ends at a sentence).")
flags.DEFINE_integer("max_pieces", 450, "See --min_pieces.")
flags.DEFINE_integer("label_sentences", 2, "SST-2 sentences (of one label) a document holds.")
flags.DEFINE_integer("min_words", 6, "SST-2 training sentences shorter than this are "
                     "not used (its train.tsv holds phrases too).")
flags.DEFINE_integer("data_seed", 0, "Seed of the documents.")
flags.DEFINE_integer("serve_batch", 32, "Texts per serve_text call.")
flags.DEFINE_integer("serve_repeats", 2, "Timed passes over the dev texts (the best kept).")
flags.DEFINE_list("modes", ["truncate", "windows"], "The --long_text modes run.")
flags.DEFINE_list("window_weights", ["one"], "The --window_weight of the windows runs "
                  "(one, inverse): a windows run for each.")
flags.DEFINE_list("window_caps", ["0"], "The --max_windows_per_text of the windows runs "
                  "(0: no cap): a windows run for each, with each --window_weights.")

FLAGS = flags.FLAGS
MODES = ("truncate", "windows")


# ----------------------------------------------------------------------- the data
def novel_sentences(path: pathlib.Path) -> list[str]:
    """The sentences of 5 to 40 words of a text (a Project Gutenberg header and footer
    dropped where marked), in order."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find("*** START OF"), text.find("*** END OF")
    if start >= 0:
        text = text[text.find("\n", start) + 1:end if end > start else None]
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return [s for p in paragraphs for s in re.split(r"(?<=[.!?])\s+", p)
            if 5 <= len(s.split()) <= 40]


def sst2_sentences(path: pathlib.Path, min_words: int) -> dict[int, list[str]]:
    """label -> SST-2 sentences of at least `min_words` words, in file order."""
    by_label: dict[int, list[str]] = {0: [], 1: []}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        sentence, label = line.rsplit("\t", 1)
        if len(sentence.split()) >= min_words:
            by_label[int(label)].append(sentence.strip())
    return by_label


def build_documents(count, labelled, fillers, pieces, rng) -> list[dict]:
    """`count` documents (balanced labels): a passage of `fillers` from a random
    sentence on, with --label_sentences sentences of `labelled[label]` (each drawn once
    before any is drawn again) inserted at a random sentence boundary. Each: text,
    label, and `label_at`: the pieces before its block."""
    labels = rng.permutation([i % 2 for i in range(count)])
    pools = {label: [] for label in labelled}
    documents = []
    for label in labels:
        block = []
        for _ in range(FLAGS.label_sentences):
            if not pools[label]:
                pools[label] = [labelled[label][i] for i in
                                rng.permutation(len(labelled[label]))]
            block.append(pools[label].pop())
        target = int(rng.integers(FLAGS.min_pieces, FLAGS.max_pieces + 1))
        length, passage = sum(pieces(s) for s in block), []
        at = int(rng.integers(len(fillers)))
        while length < target:
            passage.append(fillers[at % len(fillers)])
            length += pieces(passage[-1])
            at += 1
        where = int(rng.integers(len(passage) + 1))
        before = " ".join(passage[:where])
        documents.append({"text": " ".join(passage[:where] + block + passage[where:]),
                          "label": int(label), "label_at": pieces(before) if before else 0})
    return documents


def write_data(data: pathlib.Path) -> dict:
    """Builds the documents into `data/{train,dev,test}.jsonl`; returns their facts."""
    import numpy as np

    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file=None, do_lower_case=True,
                              spm_model_file=FLAGS.spm_model_file)

    def pieces(text):
        return len(tokenizer.tokenize(text))

    sst2 = pathlib.Path(FLAGS.sst2_dir or pathlib.Path(FLAGS.data_dir) / "glue" / "SST-2")
    filler = pathlib.Path(FLAGS.filler_text or pathlib.Path(FLAGS.data_dir) / "text" /
                          "gutenberg" / "pg1342.txt")
    for path in (sst2 / "train.tsv", sst2 / "dev.tsv", filler):
        if not path.exists():
            sys.exit(f"No {path}: give --data_dir (../shared/data), or --sst2_dir and "
                     "--filler_text.")
    novel = novel_sentences(filler)
    cut = int(len(novel) * 0.8)
    rng = np.random.default_rng(FLAGS.data_seed)
    splits = {"train": build_documents(FLAGS.train_docs,
                                       sst2_sentences(sst2 / "train.tsv", FLAGS.min_words),
                                       novel[:cut], pieces, rng),
              "dev": build_documents(FLAGS.dev_docs, sst2_sentences(sst2 / "dev.tsv", 1),
                                     novel[cut:], pieces, rng)}
    data.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), ("dev", "dev"), ("dev", "test")):
        with open(data / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for document in splits[split]:
                f.write(json.dumps({"text": document["text"],
                                    "label": document["label"]}) + "\n")
    facts = {}
    for split, documents in splits.items():
        lengths = [pieces(d["text"]) + 2 for d in documents]
        facts[split] = {
            "documents": len(documents), "mean_positions": float(np.mean(lengths)),
            "total_pieces": int(sum(lengths) - 2 * len(lengths)),
            # the block starts past the [CLS] + pieces a first window holds
            "label_past_first_window": [d["label_at"] > FLAGS.max_seq_length - 2
                                        for d in documents]}
    facts["dev_texts"] = [d["text"] for d in splits["dev"]]
    facts["dev_labels"] = [d["label"] for d in splits["dev"]]
    return facts


# ------------------------------------------------------------------------ the runs
def config_file(work: pathlib.Path) -> pathlib.Path:
    if FLAGS.config not in CONFIGS:
        return pathlib.Path(FLAGS.config)
    from albert_tf import AlbertConfig

    path = work / f"albert_config_{FLAGS.config}.json"
    AlbertConfig(**CONFIGS[FLAGS.config]).to_json_file(path)
    return path


PROGRESS = re.compile(r"(\d\d):(\d\d):(\d\d(?:\.\d+)?)\s.*\bstep (\d+)/\d+\s.*steps/s")


def steady_steps_per_second(log: str) -> float:
    """Steps/s between the run's first and last progress lines (the first loop's
    tracing left out); with one line, the rate it printed."""
    seen = [(int(h) * 3600 + int(m) * 60 + float(s), int(step))
            for h, m, s, step in PROGRESS.findall(log)]
    if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])
    rates = re.findall(r"([\d.]+) steps/s", log)
    return float(rates[-1]) if rates else float("nan")


def train(mode: str, weight: str, cap: str, seed: str, data: pathlib.Path,
          config: pathlib.Path, out: pathlib.Path) -> dict:
    steps = FLAGS.train_steps
    command = [
        sys.executable, str(ROOT / "run_classifier.py"), "--task_name=classification",
        f"--data_dir={data}", "--text_a_field=text", "--label_field=label",
        f"--long_text={mode}", f"--spm_model_file={FLAGS.spm_model_file}",
        f"--albert_config_file={config}", f"--output_dir={out}", "--do_train",
        "--do_eval", "--do_predict", f"--max_seq_length={FLAGS.max_seq_length}",
        f"--train_batch_size={FLAGS.batch_size}", "--eval_batch_size=64",
        "--predict_batch_size=64", f"--train_step={steps}",
        f"--warmup_step={steps // 10}", f"--save_checkpoints_steps={steps}",
        f"--iterations_per_loop={max(1, min(50, steps // 4))}",
        f"--learning_rate={FLAGS.learning_rate}", f"--seed={seed}",
        f"--export_dir={out / 'export'}",
        *([f"--window_stride={FLAGS.window_stride}"]
          if FLAGS.window_stride and mode == "windows" else []),
        *([f"--window_weight={weight}"] if weight not in ("-", "one") else []),
        *([f"--max_windows_per_text={cap}"] if cap not in ("-", "0") else [])]
    began = time.time()
    done = children.run(command, capture_output=True, text=True, cwd=ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode:
        sys.exit(f"run_classifier.py --long_text={mode} failed:\n{done.stderr[-3000:]}")
    results = {k: float(v) for k, v in (line.split(" = ") for line in
                                        (out / "eval_results.txt").read_text().splitlines())}
    report = json.loads((out / "data_report.json").read_text())["splits"]
    predicted = [json.loads(line) for line in
                 (out / "classification_predictions.jsonl").read_text().splitlines()]
    return {"accuracy": results["eval_accuracy"], "seconds": time.time() - began,
            "steps_per_second": steady_steps_per_second(done.stdout + done.stderr),
            "truncated": {s: report[s].get("truncated", {}) for s in ("train", "dev")},
            "probabilities": [row["probabilities"] for row in predicted],
            "prediction": [row["prediction"] for row in predicted],
            "export": out / "export" / "1"}


def serve(export: pathlib.Path, texts: list[str]):
    """(the export's probabilities on `texts`, its best texts/s)."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the ops serve_text needs)

    from albert_tf import names

    signature = tf.saved_model.load(str(export)).signatures["serve_text"]
    batches = [tf.constant(texts[i:i + FLAGS.serve_batch])
               for i in range(0, len(texts), FLAGS.serve_batch)]
    answers = np.concatenate([signature(text_a=b)[names.PROBABILITIES].numpy()
                              for b in batches])
    best = float("inf")
    for _ in range(FLAGS.serve_repeats):
        began = time.perf_counter()
        for batch in batches:
            signature(text_a=batch)[names.PROBABILITIES].numpy()
        best = min(best, time.perf_counter() - began)
    return answers, len(texts) / best


def window_logits(export: pathlib.Path, records: pathlib.Path):
    """(logits [W, C], example index [W]) of the export's `serve_examples` on a run's
    window records (its dev ones: each text's windows together, in order)."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import names

    signature = tf.saved_model.load(str(export)).signatures["serve_examples"]
    serialized = list(tf.data.TFRecordDataset(str(records)).as_numpy_iterator())
    logits = np.concatenate([
        signature(examples=tf.constant(serialized[i:i + 64]))[names.LOGITS].numpy()
        for i in range(0, len(serialized), 64)])
    index = np.array([tf.train.Example.FromString(record).features.feature[
        names.EXAMPLE_INDEX].int64_list.value[0] for record in serialized])
    return logits, index


def pooled_answers(logits, index) -> dict:
    """Each text's class by the pooling rules (`POOLINGS`) of its windows' logits."""
    import numpy as np

    shifted = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    texts = int(index.max()) + 1
    counts = np.bincount(index, minlength=texts)[:, None]
    mean_logits = np.zeros((texts, logits.shape[-1]))
    np.add.at(mean_logits, index, logits.astype(np.float64))
    mean_probabilities = np.zeros_like(mean_logits)
    np.add.at(mean_probabilities, index, probabilities)
    confident = np.full(texts, -1.0)
    most = np.zeros(texts, np.int64)
    for row, (text, p) in enumerate(zip(index, probabilities)):
        if p.max() > confident[text]:
            confident[text], most[text] = p.max(), p.argmax()
    return {"mean_logits": (mean_logits / counts).argmax(-1),
            "mean_probabilities": (mean_probabilities / counts).argmax(-1),
            "max_window": most}


# Pooling rules compared on each windows run (the run's own is the mean of logits).
POOLINGS = ("mean_logits", "mean_probabilities", "max_window")


def cpu_model() -> str:
    """The CPU's model name, count and flags (bench_own_tasks.py's choice of them)."""
    from benchmarks.bench_own_tasks import cpu_flags

    name = "?"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), name)
    return f"{name}, {os.cpu_count()} CPUs; CPU flags: {cpu_flags()}"


def main(argv) -> None:
    del argv
    import numpy as np

    if not set(FLAGS.modes) <= set(MODES) or not FLAGS.modes:
        sys.exit(f"--modes: some of {', '.join(MODES)}")
    work = pathlib.Path(FLAGS.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"Machine: {cpu_model()}")
    facts = write_data(work / "data")
    config = config_file(work)
    past = np.array(facts["dev"]["label_past_first_window"])
    labels = np.array(facts["dev_labels"])
    settings = [(mode, weight, cap) for mode in MODES if mode in FLAGS.modes
                for weight in (FLAGS.window_weights if mode == "windows" else ["-"])
                for cap in (FLAGS.window_caps if mode == "windows" else ["-"])]
    runs = {}
    for seed in FLAGS.seeds:
        for mode, weight, cap in settings:
            out = work / "_".join([mode, *([weight] if weight not in ("-", "one") else []),
                                   *([f"cap{cap}"] if cap not in ("-", "0") else []),
                                   f"seed{seed}"])
            run = train(mode, weight, cap, seed, work / "data", config, out)
            probabilities = np.array(run["probabilities"])
            right = probabilities.argmax(-1) == labels
            run["accuracy_inside"] = float(right[~past].mean()) if (~past).any() else 0.0
            run["accuracy_past"] = float(right[past].mean()) if past.any() else 0.0
            served, run["serve_texts_per_second"] = serve(run["export"], facts["dev_texts"])
            run["export_difference"] = float(np.abs(served - probabilities).max())
            if mode == "windows":
                answers = pooled_answers(*window_logits(
                    run["export"], out / "classification_eval.tf_record"))
                run["pooled"] = {rule: float((answer == labels).mean())
                                 for rule, answer in answers.items()}
                run["pooling_agrees"] = bool(np.array_equal(
                    answers["mean_logits"], probabilities.argmax(-1)))
            runs[seed, mode, weight, cap] = run

    seed = FLAGS.seeds[0]
    # each mode's first run, one without a cap where there is one (a cap's training
    # windows are fewer)
    firsts = {mode: min((((c not in ("-", "0"), c), run["truncated"])
                         for (s, m, _, c), run in runs.items() if s == seed and m == mode),
                        key=lambda pair: pair[0])
              for mode in FLAGS.modes}
    reports = {mode: report for mode, (_, report) in firsts.items()}
    texts = {split: next(iter(reports.values()))[split]["examples"]
             for split in ("train", "dev")}
    print(f"\nDocuments: {facts['train']['documents']} train, {facts['dev']['documents']} "
          f"dev; config {FLAGS.config}, {FLAGS.train_steps} steps of {FLAGS.batch_size}, "
          f"--max_seq_length={FLAGS.max_seq_length}")
    for split in ("train", "dev"):
        split_facts = facts[split]
        line = (f"{split}: longest {next(iter(reports.values()))[split]['longest']} "
                f"positions, mean {split_facts['mean_positions']:.0f}; label block past the "
                f"first window: {np.mean(split_facts['label_past_first_window']):.1%}")
        if "truncate" in reports:
            cut = reports["truncate"][split]
            line += (f"; {cut['examples_cut']} of {cut['examples']} cut "
                     f"({cut['examples_cut'] / cut['examples']:.1%}), {cut['pieces_dropped']} "
                     f"of {split_facts['total_pieces']} pieces dropped "
                     f"({cut['pieces_dropped'] / split_facts['total_pieces']:.1%})")
        if "windows" in reports:
            windows = reports["windows"][split].get("windows", 0)
            capped, cap = firsts["windows"][0]
            line += (f"; windows: {windows} ({windows / texts[split]:.2f} a text"
                     + (f", at most {cap} in training)" if capped and split == "train"
                        else ")"))
        print(line)
    print("\n| seed | long_text | window_weight | max_windows_per_text | dev accuracy "
          "| label in first window "
          "| label past it | train sequences/s | train texts/s | serve_text texts/s "
          "| export vs predictions, max abs | mean of logits | mean of probabilities "
          "| most confident window |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (seed, mode, weight, cap), run in runs.items():
        sequences = run["steps_per_second"] * FLAGS.batch_size
        train_report = run["truncated"]["train"]  # (a cap: the windows trained on)
        per_text = (train_report.get("windows") or train_report["examples"]) / \
            train_report["examples"]
        print(f"| {seed} | {mode} | {weight} | {cap} | {run['accuracy']:.3f} "
              f"| {run['accuracy_inside']:.3f} | {run['accuracy_past']:.3f} "
              f"| {sequences:.1f} | {sequences / per_text:.1f} "
              f"| {run['serve_texts_per_second']:.1f} | {run['export_difference']:.1e} | "
              + " | ".join(f"{run['pooled'][rule]:.3f}" if "pooled" in run else "-"
                           for rule in POOLINGS) + " |")
    for mode, weight, cap in settings:
        these = [runs[seed, mode, weight, cap] for seed in FLAGS.seeds]
        name = mode if weight == "-" else f"{mode} ({weight}" + (
            f", at most {cap} a text)" if cap != "0" else ")")
        accuracies = [run["accuracy"] for run in these]
        print(f"{name}: dev accuracy mean {np.mean(accuracies):.3f} (seeds: "
              f"{', '.join(f'{a:.3f}' for a in accuracies)}); minutes per run "
              f"{np.mean([run['seconds'] for run in these]) / 60:.1f}")
        for rule in POOLINGS if mode == "windows" else ():
            accuracies = [run["pooled"][rule] for run in these]
            print(f"  pooled by {rule}: dev accuracy mean {np.mean(accuracies):.3f} "
                  f"(seeds: {', '.join(f'{a:.3f}' for a in accuracies)})")
    if "windows" in FLAGS.modes:
        agrees = all(run["pooling_agrees"] for run in runs.values() if "pooled" in run)
        print(f"Mean of the export's window logits gives the runs' classes: "
              f"{'yes' if agrees else 'NO'}")
    worst = max(run["export_difference"] for run in runs.values())
    print(f"Exports' serve_text against the runs' predictions: max abs difference "
          f"{worst:.1e} ({'within' if worst <= 1e-5 else 'NOT within'} 1e-5)")


if __name__ == "__main__":
    app.run(main)
