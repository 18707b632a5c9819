"""Pretrains ALBERT (masked LM + sentence order) with the original script's flags.

    python run_pretraining.py --input_file='records/*.tfrecord' \\
        --albert_config_file=configs/albert_base_v2.json --output_dir=out \\
        --do_train --do_eval --train_batch_size=4096 --num_train_steps=125000 \\
        --optimizer=lamb --learning_rate=0.00176 --max_seq_length=512

Or, with dynamic masking from raw text: `--input_text='corpus/*.txt'
--spm_model_file=30k-clean.model`. The work is `albert_tf.apps.pretraining.run`.
"""

from albert_tf.apps import pretraining, runner

pretraining.define_flags()
main = runner.app_main(pretraining)


def run():
    """The program (`python run_pretraining.py` and the installed `albert-run-pretraining`)."""
    runner.program(main, __doc__, required=("output_dir",))


if __name__ == "__main__":
    run()
