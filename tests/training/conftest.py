"""Shared set-up of the training tests."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def write_checkpointed_run():
    """A function (directory, model_config, steps, average_last) -> directory that writes a
    run directory (run_config.json) with training checkpoints ckpt-<step> for each of
    `steps`, of model and Adam state, each with different random weights (seeded)."""
    from transformer_tf.config import DecodingConfig, TrainingConfig
    from transformer_tf.training import checkpoints, model_dir as model_dir_lib
    from transformer_tf.training.fit import build_model_and_optimizer

    def write(directory, model_config, steps, average_last):
        training = TrainingConfig(keep_checkpoints=10, average_last=average_last)
        model_dir_lib.write_run_config(directory, model_dir_lib.RunConfig(
            model=model_config, training=training, decoding=DecodingConfig(),
            data_dir="unused", preset="tiny"))
        model = build_model_and_optimizer(model_config, training)
        manager = checkpoints.make_manager(model.network, model.optimizer, directory,
                                           max_to_keep=10)
        rng = np.random.default_rng(0)
        for step in steps:
            for weight in model.weights:
                weight.assign(rng.normal(size=weight.shape).astype(np.float32))
            model.optimizer.iterations.assign(step)
            manager.save(checkpoint_number=step)
        return directory

    return write
