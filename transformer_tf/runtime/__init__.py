"""Process-wide set-up: what runs before TensorFlow loads, the console (console.py) and the
CPU's flags and the choices that follow from them (cpu.py); and, between the stages of a
long process, keeping the garbage collector off the objects it has accumulated
(gc_freeze.py)."""
