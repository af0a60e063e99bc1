"""What a step-planned run prints: Keras's in-place progress bar on a terminal; in a log file
or a pipe (where Keras redraws its bar on Linux even so, leaving every step's line of escape
codes, or else writes nothing between evaluations) our own plain progress lines."""
import re


def test_a_step_planned_run_writes_clean_progress_lines_to_a_pipe(
        tiny_multi30k, tmp_path, capfd, gc_frozen):
    from transformer_tf.training.fit import TrainOptions, train

    with gc_frozen():
        train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path), preset="tiny",
            model_overrides={"num_layers": 1}, max_steps=6, eval_every=3,
            validation_sentences=0, verbose=1))
    out = capfd.readouterr().out
    assert "\r" not in out and "\x1b[" not in out
    assert "Epoch 1/" not in out and not re.search(r"^3/3 - ", out, re.M), out
    # One line at the end of each evaluation period (3 steps), counting steps of the plan.
    assert re.search(r"^step 3 of 6 \(50%\) · loss \d", out, re.M), out
    assert re.search(r"^step 6 of 6 \(100%\) · loss \d", out, re.M), out
