"""`sim.util.jit.kernel`: numba compiles the function on its first call; the Python function
stays as the reference; `DCSIM_PURE=1` runs the Python function."""

from __future__ import annotations

import numpy as np
import pytest

from sim.util.jit import Kernel, helper, kernel


def _prefix_sum(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size + 1)
    out[0] = 0.0
    for i in range(values.size):
        out[i + 1] = out[i] + values[i]
    return out


def test_a_kernel_gives_the_bits_of_its_python_reference() -> None:
    summed = kernel(_prefix_sum)
    values = np.random.default_rng(3).uniform(-1e3, 1e3, 1000)
    assert np.array_equal(summed(values), summed.py_func(values))
    assert summed.py_func is _prefix_sum


@helper
def _twice_plus(x: float, y: float) -> float:
    return x * 2.0 + y


def _doubled_sums(values: np.ndarray) -> np.ndarray:
    out = _prefix_sum(values)
    for i in range(out.size):
        out[i] = _twice_plus(out[i], values[i - 1])
    return out


def test_a_kernel_calls_helpers_and_gives_the_bits_of_its_python_reference() -> None:
    helper(_prefix_sum)
    doubled = Kernel(_doubled_sums)
    values = np.random.default_rng(4).uniform(-1e3, 1e3, 100)
    assert np.array_equal(doubled(values), _doubled_sums(values))
    assert _twice_plus(1.0, 2.0) == 4.0  # still the Python function


def test_a_kernel_is_compiled_by_numba_on_its_first_call() -> None:
    import numba

    summed = Kernel(_prefix_sum)
    summed(np.ones(3))
    assert isinstance(summed.compiled(), numba.core.dispatcher.Dispatcher)


def test_pure_python_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DCSIM_PURE", "1")
    summed = Kernel(_prefix_sum)
    assert summed.compiled() is _prefix_sum
    assert summed(np.ones(2)).tolist() == [0.0, 1.0, 2.0]
