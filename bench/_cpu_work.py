"""The CPU-bound work both sides of ``bench/cpu_tools.py`` run: stdlib only, pure Python.

Imported by the raytroupe tool sandboxes (as the function tool ``spin``) and by the AutoGen
script in its own virtual environment, so both run exactly this code.
"""

from __future__ import annotations


def spin(iterations: int, seed: int = 1) -> int:
    """Step a linear congruential generator ``iterations`` times; return its last state.

    Pure-Python busy work (it holds the GIL throughout), deterministic for a given input.
    """
    state = seed
    for _ in range(iterations):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
    return state
