"""Fine-tunes ALBERT on SQuAD v1.1, or v2.0 with --version_2_with_negative, with the
original scripts' flags; writes predictions.json, nbest_predictions.json (and
null_odds.json) and the official EM / F1.

    python run_squad.py --train_file=train-v1.1.json --predict_file=dev-v1.1.json \\
        --spm_model_file=albert_base/30k-clean.model \\
        --albert_config_file=albert_base/albert_config.json \\
        --init_checkpoint=albert_base/model.ckpt-best --output_dir=out \\
        --do_train --do_predict --max_seq_length=384 --doc_stride=128 \\
        --train_batch_size=48 --learning_rate=5e-5 --num_train_epochs=2

The work is `albert_tf.apps.squad.run`.
"""

from albert_tf.apps import runner, squad

squad.define_flags()
main = runner.app_main(squad)


def run():
    """The program (`python run_squad.py` and the installed `albert-run-squad`)."""
    runner.program(main, __doc__, required=("output_dir",))


if __name__ == "__main__":
    run()
