"""Choosing the tf.distribute strategy: one device, all local GPUs, or many workers."""
from __future__ import annotations

import json
import os

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multiworker")


def split_cpu(num_logical_devices: int) -> None:
    """Split the CPU into `num_logical_devices` logical devices.

    Lets the mirrored path run on a machine without GPUs (for tests and smoke runs). Must
    run before TensorFlow initialises its devices; raises RuntimeError with advice if not.
    """
    if num_logical_devices < 1:
        raise ValueError(f"num_logical_devices must be >= 1, got {num_logical_devices}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    existing = tf.config.get_logical_device_configuration(cpu)
    if existing is not None and len(existing) == num_logical_devices:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_logical_devices)
    except RuntimeError as error:
        raise RuntimeError(
            f"cannot split the CPU into {num_logical_devices} devices after TensorFlow has "
            "initialised its devices; call split_cpu() first thing in the process") from error


def make_strategy(name: str = "default", devices: list[str] | None = None):
    """The strategy called `name`.

    Args:
      name: "default" (one device), "mirrored" (MirroredStrategy over `devices`, else all
        local GPUs, else all logical CPUs), "multiworker" (MultiWorkerMirroredStrategy,
        cluster from the TF_CONFIG environment variable).
      devices: explicit device list for "mirrored", e.g. ["/gpu:0", "/gpu:1"].

    Returns:
      A tf.distribute.Strategy.
    """
    if name == "default":
        if devices:
            raise ValueError("--devices only applies to --strategy mirrored")
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if not devices:
            gpus = tf.config.list_logical_devices("GPU")
            devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multiworker":
        config = os.environ.get("TF_CONFIG")
        if not config:
            raise ValueError(
                "strategy 'multiworker' needs the TF_CONFIG environment variable, e.g. "
                '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}')
        try:
            parsed = json.loads(config)
            parsed["cluster"]["worker"], parsed["task"]["index"]
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"TF_CONFIG is not a valid cluster description: {config!r}") from error
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"unknown strategy {name!r}; choose one of {STRATEGIES}")


def is_chief(strategy) -> bool:
    """Whether this worker writes checkpoints, logs and exports: the "chief" task if the
    cluster has one, else worker 0 (or the only process, without a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    cluster = resolver.cluster_spec().as_dict() if resolver is not None else {}
    if not cluster:
        return True
    if resolver.task_type in (None, "chief"):
        return True
    return (resolver.task_type == "worker" and resolver.task_id == 0
            and "chief" not in cluster)


def is_multi_worker(strategy) -> bool:
    """True for a MultiWorkerMirroredStrategy actually running over several workers."""
    extended = getattr(strategy, "extended", None)
    in_multi_worker_mode = getattr(extended, "_in_multi_worker_mode", None)
    return bool(
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and in_multi_worker_mode is not None
        and in_multi_worker_mode()
    )
