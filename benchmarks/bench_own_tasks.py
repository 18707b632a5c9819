"""Does a small model fine-tuned by run_ner.py / run_classifier.py learn the real tasks?

Trains a small ALBERT from random weights (no pretrained Chinese checkpoint is
available offline) for a fixed number of steps on real data, and compares its dev
scores with the trivial baselines:
- CLUENER2020 (run_ner.py, characters, 10 types): entity F1 against all-"O" (F1 0);
- C3 (run_classifier.py --task_name=c3, 2-4 choices): accuracy against always picking
  the most frequent answer position of the dev set;
- WNUT-17 (run_ner.py, English CoNLL, SentencePiece) when an SentencePiece model is given;
- multi-label classification (run_classifier.py --task_name=multi_label, JSON lines) on
  real text: which of CLUENER2020's 10 entity types each sentence mentions (its own
  annotation, read as labels of the sentence), micro F1 against the best constant
  answer (the one label set that scores best on the dev set, found by trying every
  prefix of the labels by training frequency).

    python benchmarks/bench_own_tasks.py --data=../shared/data \\
        --vocab_file=../shared/data/vocab/vocab_chinese.txt --work_dir=/tmp/bench_tasks

Prints one Markdown table (and the machine's CPU flags); the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks import children  # noqa: E402

# A small model: trains in minutes on 2 CPU cores.
SMALL = dict(vocab_size=21128, embedding_size=64, hidden_size=128, num_hidden_layers=2,
             num_attention_heads=2, intermediate_size=512, max_position_embeddings=256,
             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def cpu_flags() -> str:
    """The CPU flags that decide our speed (what /proc/cpuinfo lists of them)."""
    from albert_tf.export.savedmodel import cpu_flags as all_flags

    flags = all_flags()
    if flags is None:
        return platform.processor() or "?"
    wanted = ("fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    return " ".join(f for f in wanted if f in flags)


def results(path: pathlib.Path) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split(" = ") for line in
                                     path.read_text().splitlines())}


def run(script: str, *args) -> float:
    began = time.time()
    children.run([sys.executable, str(ROOT / script), *map(str, args)], check=True,
                   cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.time() - began


def head(source: pathlib.Path, target: pathlib.Path, lines: int) -> pathlib.Path:
    text = source.read_text(encoding="utf-8").splitlines()[:lines]
    target.write_text("\n".join(text) + "\n", encoding="utf-8")
    return target


def entity_type_rows(source: pathlib.Path, target: pathlib.Path, lines: int) -> list:
    """CLUENER JSON lines -> {"text", "labels": [the entity types it mentions]} lines;
    returns the label lists."""
    rows = []
    for line in source.read_text(encoding="utf-8").splitlines()[:lines]:
        row = json.loads(line)
        rows.append({"text": row["text"], "labels": sorted(row.get("label", {}))})
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                      encoding="utf-8")
    return [r["labels"] for r in rows]


def best_constant(train_labels: list, dev_labels: list) -> tuple[float, list]:
    """The label set that, answered for every dev text, has the best micro F1 among the
    prefixes of the labels ordered by training frequency (and the empty set), scored
    as run_classifier.py scores (`albert_tf.tasks.multi_label.scores`)."""
    import numpy as np

    from albert_tf.tasks.multi_label import scores

    order = [label for label, _ in collections.Counter(
        label for labels in train_labels for label in labels).most_common()]
    # (a dev label never in training is a column too: missed by every answer)
    columns = order + sorted({label for labels in dev_labels for label in labels}
                             - set(order))
    gold = np.array([[label in labels for label in columns] for labels in dev_labels])

    def micro_f1(k):  # the first k labels, answered for every dev text
        answered = np.zeros_like(gold, np.float32)
        answered[:, :k] = 1
        return scores(answered, gold, 0.5, columns)["micro_f1"]
    return max((micro_f1(k), order[:k]) for k in range(len(order) + 1))


def training_flags(config, out, steps, batch, learning_rate):
    return [f"--albert_config_file={config}", f"--output_dir={out}", "--do_train",
            "--do_eval", f"--train_step={steps}", f"--train_batch_size={batch}",
            "--eval_batch_size=32", f"--learning_rate={learning_rate}",
            f"--warmup_step={steps // 10}", f"--save_checkpoints_steps={steps}",
            "--iterations_per_loop=100", "--seed=1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="../shared/data")
    parser.add_argument("--vocab_file", required=True, help="the Chinese vocab.txt")
    parser.add_argument("--spm_model_file", default=None, help="English 30k-clean.model")
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--ner_steps", type=int, default=1500)
    parser.add_argument("--c3_steps", type=int, default=1000)
    parser.add_argument("--multi_label_steps", type=int, default=1500)
    parser.add_argument("--skip", default="",
                        help="Rows not to run: comma-separated of cluener, wnut, c3, "
                             "multi_label.")
    # From random weights, 1e-3 stalls at the label prior (tried); 3e-4 learns.
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--ner_train_lines", type=int, default=10748)
    parser.add_argument("--ner_dev_lines", type=int, default=1343)
    args = parser.parse_args()

    from albert_tf import AlbertConfig
    from albert_tf.data import multiple_choice

    data, work = pathlib.Path(args.data), pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    config = work / "albert_config.json"
    AlbertConfig(**SMALL).to_json_file(config)
    skip = set(filter(None, args.skip.split(",")))
    rows, notes = [], []

    # CLUENER: entity F1 against all-O (0 by definition).
    cluener = data / "ner" / "cluener"
    ner = work / "cluener"
    ner.mkdir(exist_ok=True)
    if "cluener" not in skip:
        train = head(cluener / "train.json", ner / "train.json", args.ner_train_lines)
        dev = head(cluener / "dev.json", ner / "dev.json", args.ner_dev_lines)
        seconds = run("run_ner.py", f"--train_file={train}", f"--dev_file={dev}",
                      f"--vocab_file={args.vocab_file}", "--max_seq_length=64",
                      *training_flags(config, work / "ner_out", args.ner_steps, 32,
                                      args.learning_rate))
        scores = results(work / "ner_out" / "eval_results.txt")
        rows.append(("CLUENER2020 dev (entity F1)", args.ner_steps, 32, scores["f1"], 0.0,
                     "all O", seconds))
        types = sorted(k[:-3] for k in scores if k.endswith("_f1"))
        notes.append("CLUENER per type F1: " + ", ".join(
            f"{t} {scores[t + '_f1']:.2f}" for t in types))

    if args.spm_model_file and "wnut" not in skip:
        english = work / "albert_config_en.json"
        AlbertConfig(**{**SMALL, "vocab_size": 30000}).to_json_file(english)
        wnut = data / "ner" / "wnut17"
        seconds = run("run_ner.py", f"--train_file={wnut / 'wnut17train.conll'}",
                      f"--dev_file={wnut / 'emerging.dev.conll'}",
                      f"--spm_model_file={args.spm_model_file}", "--max_seq_length=64",
                      *training_flags(english, work / "wnut_out", args.ner_steps, 32,
                                      args.learning_rate))
        wnut_scores = results(work / "wnut_out" / "eval_results.txt")
        rows.append(("WNUT-17 dev (entity F1)", args.ner_steps, 32, wnut_scores["f1"], 0.0,
                     "all O", seconds))

    # C3: accuracy against the most frequent answer position of the dev set.
    if "c3" not in skip:
        c3 = data / "multiple_choice" / "c3"
        dev_examples = multiple_choice.read_c3(multiple_choice.c3_files(c3, "dev"))
        positions = collections.Counter(e.label for e in dev_examples)
        majority = positions.most_common(1)[0][1] / len(dev_examples)
        seconds = run("run_classifier.py", "--task_name=c3", f"--data_dir={c3}",
                      f"--vocab_file={args.vocab_file}", "--max_seq_length=96",
                      "--max_qa_length=32",
                      *training_flags(config, work / "c3_out", args.c3_steps, 16,
                                      args.learning_rate))
        c3_scores = results(work / "c3_out" / "eval_results.txt")
        rows.append(("C3 dev (accuracy)", args.c3_steps, 16, c3_scores["eval_accuracy"],
                     majority, f"answer position {positions.most_common(1)[0][0]}",
                     seconds))

    # Multi-label: the entity types each CLUENER sentence mentions, from its text.
    if "multi_label" not in skip:
        train_labels = entity_type_rows(cluener / "train.json", ner / "types_train.jsonl",
                                        args.ner_train_lines)
        dev_labels = entity_type_rows(cluener / "dev.json", ner / "types_dev.jsonl",
                                      args.ner_dev_lines)
        constant, constant_set = best_constant(train_labels, dev_labels)
        seconds = run("run_classifier.py", "--task_name=multi_label",
                      f"--train_file={ner / 'types_train.jsonl'}",
                      f"--dev_file={ner / 'types_dev.jsonl'}", "--text_a_field=text",
                      "--label_field=labels", "--tune_threshold",
                      f"--vocab_file={args.vocab_file}", "--max_seq_length=64",
                      *training_flags(config, work / "multi_label_out",
                                      args.multi_label_steps, 32, args.learning_rate))
        ml_scores = results(work / "multi_label_out" / "eval_results.txt")
        rows.append(("CLUENER2020 dev, entity types mentioned (multi-label micro F1)",
                     args.multi_label_steps, 32, ml_scores["micro_f1"], constant,
                     f"always {{{', '.join(constant_set)}}}", seconds))
        notes.append(f"multi-label: macro F1 {ml_scores['macro_f1']:.3f}, subset accuracy "
                     f"{ml_scores['subset_accuracy']:.3f}, {len(dev_labels)} dev texts, "
                     f"{sum(map(len, dev_labels)) / len(dev_labels):.2f} types each")

    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs; model "
          f"{json.dumps({k: SMALL[k] for k in ('hidden_size', 'num_hidden_layers')})}")
    print()
    print("| task | steps | batch | score | trivial baseline | baseline is | minutes |")
    print("|---|---|---|---|---|---|---|")
    for name, steps, batch, score, baseline, what, seconds in rows:
        print(f"| {name} | {steps} | {batch} | {score:.3f} | {baseline:.3f} | {what} | "
              f"{seconds / 60:.1f} |")
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
