"""The signal contract of training.stop_signal, in this process: the first SIGTERM or
SIGINT is only noted and ends training at the next step's end; a second one gets the
handler that was there before; the handlers are put back afterwards. (A real run stopped
by SIGTERM, saved and resumed: tests/training/test_training_run.py.)"""
from __future__ import annotations

import signal
import threading

import pytest

from transformer_tf.training.stop_signal import StopOnSignal, StopRequested


@pytest.fixture
def recorded_handlers():
    """SIGINT and SIGTERM handlers that record what they got (the "before")."""
    got = []
    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    for number in before:
        signal.signal(number, lambda n, frame: got.append(n))
    yield got
    for number, handler in before.items():
        signal.signal(number, handler)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_stops_at_the_step_end_and_the_second_acts_as_before(
        number, recorded_handlers):
    stop = StopOnSignal()
    with stop.listening():
        stop.on_train_batch_end(0)  # nothing received: goes on
        signal.raise_signal(number)
        assert recorded_handlers == [] and stop.received == number
        with pytest.raises(StopRequested) as raised:
            stop.on_train_batch_end(1)
        signal.raise_signal(number)
        assert recorded_handlers == [number]  # the handler from before, at once
    assert raised.value.exit_status == 128 + number  # 143 for SIGTERM, 130 for SIGINT
    raised.value.saved(37, "m/checkpoints/ckpt-37")
    assert str(raised.value) == (f"stopped by {signal.Signals(number).name} at step 37 "
                                 "(checkpoint m/checkpoints/ckpt-37 saved); the same command "
                                 "resumes the run from there")
    signal.raise_signal(number)  # after the block: the old handlers again
    assert recorded_handlers == [number, number]


def test_a_stop_during_the_validation_ends_with_it(recorded_handlers):
    stop = StopOnSignal()
    with stop.listening():
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(StopRequested):
            stop.on_epoch_end(0)


def test_a_stop_is_a_keyboard_interrupt_not_a_failure():
    # Jobs that go on past a failed row (`except Exception`) must not go on past a stop.
    assert not isinstance(StopRequested(signal.SIGTERM), Exception)
    assert isinstance(StopRequested(signal.SIGTERM), KeyboardInterrupt)


def test_nothing_is_installed_outside_the_main_thread(recorded_handlers):
    seen = []

    def listen():
        with StopOnSignal().listening():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=listen)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGTERM)]


def test_the_command_says_where_it_saved_and_exits_with_the_signal_status(capsys):
    from transformer_tf.cli.errors import run_command

    def stopped():
        error = StopRequested(signal.SIGTERM)
        error.saved(12, "m/checkpoints/ckpt-12")
        raise error

    assert run_command(stopped) == 143
    assert "stopped by SIGTERM at step 12 (checkpoint m/checkpoints/ckpt-12 saved)" in (
        capsys.readouterr().err)

    def interrupted():
        raise KeyboardInterrupt

    assert run_command(interrupted) == 130
    assert capsys.readouterr().err == "interrupted\n"
