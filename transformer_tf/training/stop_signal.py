"""A run stopped with SIGTERM or Ctrl-C ends on a step and saves it.

Schedulers stop or preempt a job with SIGTERM (Kubernetes, SLURM, a machine shutting
down), and a user stops a run with Ctrl-C. By default either ends the process mid-step: the steps
since the last periodic checkpoint (10 minutes of training by default) are lost. While
`listening()` holds, the first SIGTERM or SIGINT is only noted; the `StopOnSignal`
callback then raises `StopRequested` at the end of the current step (or of the
validation under way), and `fit` saves a checkpoint of that step before the error
reaches the command, which exits with 128 + the signal's number (130, 143) and says how
to resume. A second signal acts at once, as it would without us.

Only where one process trains: with several workers, one that stopped on its own would
leave the others waiting for it in their collective ops, so multi-worker runs keep the
default behaviour (and resume from their last periodic checkpoint).
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

import keras

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(KeyboardInterrupt):
    """Training ended on a step boundary because the process got `signal_number`.

    A KeyboardInterrupt, so that `except Exception` in a job does not take it for a
    failed row or run and go on. `fit` completes the message with the step and the
    checkpoint it saved (`saved`); `exit_status` is the shell's 128 + signal number."""

    def __init__(self, signal_number: int):
        super().__init__()
        self.signal_number = signal_number
        self.signal_name = signal.Signals(signal_number).name
        self.exit_status = 128 + signal_number
        self.step = self.checkpoint = None

    def saved(self, step: int, checkpoint: str | None) -> None:
        self.step, self.checkpoint = step, checkpoint

    def __str__(self) -> str:
        if self.step is None:
            return f"stopped by {self.signal_name}"
        where = (f"checkpoint {self.checkpoint} saved" if self.checkpoint
                 else "no checkpoint saved")
        return (f"stopped by {self.signal_name} at step {self.step} ({where}); the same "
                "command resumes the run from there")


class StopOnSignal(keras.callbacks.Callback):
    """Raises `StopRequested` at the first step or validation end after a signal arrived
    while `listening()`. Put it after the callbacks that must see the step (the
    checkpoint callback counts the batches the step consumed)."""

    def __init__(self):
        super().__init__()
        self.received: int | None = None

    @contextlib.contextmanager
    def listening(self):
        """Notes the first SIGTERM / SIGINT in `self.received`; a second one gets the
        handler that was there before (the default: the process ends or, for SIGINT,
        KeyboardInterrupt). Installs nothing outside the main thread (Python delivers
        signals there only)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {number: signal.getsignal(number) for number in SIGNALS}

        def restore():
            for number, handler in previous.items():
                signal.signal(number, handler)

        def note(number, frame):
            if self.received is not None:  # the second: act as before, at once
                restore()
                handler = previous[number]
                if callable(handler):
                    handler(number, frame)
                elif handler == signal.SIG_DFL:
                    os.kill(os.getpid(), number)
                return
            self.received = number
            logger.warning("%s: stopping after this step and saving a checkpoint (send it "
                           "again to stop at once, without saving)",
                           signal.Signals(number).name)

        for number in SIGNALS:
            signal.signal(number, note)
        try:
            yield self
        finally:
            restore()

    def _stop_if_asked(self):
        if self.received is not None:
            raise StopRequested(self.received)

    def on_train_batch_end(self, batch, logs=None):
        self._stop_if_asked()

    def on_epoch_end(self, epoch, logs=None):
        self._stop_if_asked()
