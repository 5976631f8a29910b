"""Simulator parameters for the RTL tests.

``SIM_PARAMS`` parametrizes a test over the simulators (``REPLAY_SIM_PARAMS``: Verilator
marked ``slow``, for the long training-program replays; :func:`sim_matrix`: over
configurations and simulators, Verilator in ``make test`` for chosen configurations
only). :func:`require_sim` fails the test with the install instruction when a simulator
is missing (``make test`` installs both, so a missing one is an environment defect, not
a reason to skip); set ``ALLOW_MISSING_SIM=1`` to skip instead (e.g. on a machine
without a C++ toolchain).

Tests do not call :func:`require_sim` themselves: ``tests/conftest.py`` requires the
simulator named by a test's ``sim`` parameter before the test runs, and its
``require_simulator`` fixture requires one by name.
"""

import os

import pytest

from sim.harness import SIMULATORS, SimulatorMissing, find_simulator

__all__ = ["SIMULATORS", "SIM_PARAMS", "REPLAY_SIM_PARAMS", "sim_matrix", "engine_matrix", "require_sim"]

SIM_PARAMS = ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)]
#: Icarus in ``make test``, Verilator ``slow``: replays of whole training programs and
#: other long runs whose Verilator twin repeats on the same RTL what the Icarus run
#: checks (the Verilator build itself is covered by the unit-level tests' ``SIM_PARAMS``)
REPLAY_SIM_PARAMS = ["icarus", pytest.param("verilator", marks=[pytest.mark.verilator, pytest.mark.slow])]


def sim_matrix(cases, verilator: set | frozenset, slow: set | frozenset = frozenset()) -> list:
    """``(case, sim)`` parameters for a test over configurations and simulators: every
    case on Icarus; on Verilator the cases in ``verilator`` in ``make test`` and the
    others ``slow`` (``make test-all``); the cases in ``slow`` are ``slow`` on both. A
    slow Verilator pair repeats on the second simulator what its Icarus twin checks on
    the same RTL in ``make test``, and the Verilator build and its cocotb harness are
    checked by the kept cases (``verilator`` may be empty where other families check the
    same RTL on Verilator).
    (Most of a Verilator case's time is its C++ build.)"""
    cases = list(cases)
    unknown = (set(verilator) | set(slow)) - set(cases)
    if unknown:
        raise ValueError(f"sim_matrix: {sorted(unknown)} are not among the cases {cases}")
    return [pytest.param(c, s, id=f"{c}-{s}",
                         marks=([] if s == "icarus" else [pytest.mark.verilator])
                         + ([pytest.mark.slow] if c in slow or (s == "verilator" and c not in verilator) else []))
            for c in cases for s in ("icarus", "verilator")]


def engine_matrix(cases: dict, slow_model=frozenset()) -> list:
    """``(*case, backend)`` parameters for a test over named cases and the two chip
    engines (``fast``, then ``model``), with ids ``<name>-<backend>``; the per-cycle
    engine (``model``) of the cases named in ``slow_model`` is ``slow``: a fast-engine
    twin stays in ``make test``, and an engines-agree test or an RTL replay runs the
    per-cycle engine on the same path."""
    unknown = set(slow_model) - set(cases)
    if unknown:
        raise ValueError(f"engine_matrix: {sorted(unknown)} are not among the cases {list(cases)}")
    return [pytest.param(*case, backend, id=f"{name}-{backend}",
                         marks=[pytest.mark.slow] if backend == "model" and name in slow_model else [])
            for backend in ("fast", "model") for name, case in cases.items()]


def golden_matrix(cases: dict, model_kept: tuple) -> list:
    """``(*case, loss, backend, out_map)`` parameters of a chip trainer's golden test:
    every named case, loss, chip engine and output mapping, ids
    ``<name>-<loss>-<backend>-<out_map>``; the per-cycle engine (``model``, many times
    slower than the fast one) of the cases whose name starts with ``small`` is ``slow``
    but for the one ``(name, loss, out_map)`` in ``model_kept`` (the fast-engine twins
    stay, and the trainer's engines-agree test runs the per-cycle engine)."""
    out = []
    for name, case in cases.items():
        for loss in ("mse", "softmax_ce"):
            for backend in ("fast", "model"):
                for out_map in ("rows", "cols"):
                    slow = backend == "model" and name.startswith("small") and (name, loss, out_map) != model_kept
                    out.append(pytest.param(*case, loss, backend, out_map, id=f"{name}-{loss}-{backend}-{out_map}",
                                            marks=[pytest.mark.slow] if slow else []))
    return out


def require_sim(sim: str) -> None:
    """Fail (``ALLOW_MISSING_SIM=1``: skip) unless simulator ``sim`` is installed."""
    try:
        find_simulator(sim)
    except SimulatorMissing as e:
        if os.environ.get("ALLOW_MISSING_SIM", "") not in ("", "0"):
            pytest.skip(str(e))
        raise
