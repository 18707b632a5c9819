"""Fine-tunes ALBERT for token classification (NER) on CoNLL column files or CLUENER's
JSON lines, with the flags of the other run_* scripts.

    python run_ner.py --task_name=cluener --data_dir=cluener_public \\
        --vocab_file=albert_base_zh/vocab_chinese.txt \\
        --init_checkpoint=albert_base_zh --output_dir=out \\
        --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=5e-5 --num_train_epochs=3

`--train_file` / `--dev_file` / `--test_file` name the files directly (CoNLL: one token
per line, tag in the last column; CLUENER: `{"text", "label"}` lines). The labels are
the training file's tags (or `--labels`), saved as `labels.txt` in `--output_dir`;
`--do_eval` writes seqeval's entity-level scores to `eval_results.txt`, `--do_predict`
the test file back with the predicted tags. The work is `albert_tf.apps.ner.run`.
"""

from albert_tf.apps import ner, runner

ner.define_flags()
main = runner.app_main(ner)


def run():
    """The program (`python run_ner.py` and the installed `albert-run-ner`)."""
    runner.program(main, __doc__, required=("output_dir",))


if __name__ == "__main__":
    run()
