"""Fine-tunes ALBERT on a GLUE task or RACE with the original script's flags.

    python run_classifier.py --task_name=MRPC --data_dir=glue_data \\
        --spm_model_file=albert_base/30k-clean.model \\
        --albert_config_file=albert_base/albert_config.json \\
        --init_checkpoint=albert_base/model.ckpt-best --output_dir=out \\
        --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=2e-5 --train_step=800 --warmup_step=200

`--data_dir` is the GLUE root (the task adds MRPC/), or the folder holding RACE/ with
`--task_name=race`. The work is `albert_tf.apps.classifier.run`.
"""

from albert_tf.apps import classifier, runner

classifier.define_flags()
main = runner.app_main(classifier)


def run():
    """The program (`python run_classifier.py` and the installed `albert-run-classifier`)."""
    runner.program(main, __doc__, required=("output_dir",))


if __name__ == "__main__":
    run()
