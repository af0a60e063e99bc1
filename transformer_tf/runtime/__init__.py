"""Process set-up that runs before TensorFlow loads: the console (console.py) and the
CPU's flags and the choices that follow from them (cpu.py)."""
