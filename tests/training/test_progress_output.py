"""What a step-planned run prints: Keras's in-place progress bar on a terminal, one line per
evaluation period in a log file or a pipe (Keras redraws its bar on Linux even there,
leaving every step's line of escape codes in the log)."""
import io
import re

from transformer_tf.training.fit import keras_verbosity


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_keeps_the_bar_a_file_gets_a_line_per_epoch_silence_stays():
    assert keras_verbosity(1, _Terminal()) == 1
    assert keras_verbosity(1, io.StringIO()) == 2
    assert keras_verbosity(1, object()) == 2  # a stream that cannot tell
    assert keras_verbosity(0, _Terminal()) == 0
    assert keras_verbosity(0, io.StringIO()) == 0


def test_a_step_planned_run_writes_one_clean_line_per_period_to_a_pipe(
        tiny_multi30k, tmp_path, capfd, gc_frozen):
    from transformer_tf.training.fit import TrainOptions, train

    with gc_frozen():
        train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path), preset="tiny",
            model_overrides={"num_layers": 1}, max_steps=6, eval_every=3,
            validation_sentences=0, verbose=1))
    out = capfd.readouterr().out
    assert "\r" not in out and "\x1b[" not in out
    # Keras's per-epoch lines: "3/3 - 1s - 300ms/step - loss: ...", one per 3 steps.
    period_lines = [line for line in out.splitlines() if re.match(r"3/3 - ", line)]
    assert len(period_lines) == 2, out
