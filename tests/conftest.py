"""Shared pytest configuration for the RTL test suites.

``SIM_PARAMS`` parametrizes a test over the simulators; :func:`require_sim` fails the
test with the install instruction when a simulator is missing (``make test`` installs
both, so a missing one is an environment defect, not a reason to skip). Set
``ALLOW_MISSING_SIM=1`` to skip instead (e.g. on a machine without a C++ toolchain).
"""

import os

import pytest

from sim.harness import SimulatorMissing, find_simulator

SIM_PARAMS = ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)]


def require_sim(sim: str) -> None:
    try:
        find_simulator(sim)
    except SimulatorMissing as e:
        if os.environ.get("ALLOW_MISSING_SIM", "") not in ("", "0"):
            pytest.skip(str(e))
        raise
