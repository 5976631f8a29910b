"""Shared pytest configuration and fixtures.

* A test parametrized over ``sim`` (``"icarus"`` or ``"verilator"``) needs that
  simulator: :func:`_simulator_of_sim_parameter` requires it before the test runs (a
  missing simulator fails the test with the install instruction; ``ALLOW_MISSING_SIM=1``
  skips it instead). A test whose simulator is fixed asks for :func:`require_simulator`
  and calls it with the name. The parameter lists (``SIM_PARAMS``, ``sim_matrix`` ...)
  are in ``tests/simulators.py``.
* Verilator builds compile their C++ at ``-O0`` here unless ``VERILATOR_OPT`` says
  otherwise: every RTL test simulates for a few seconds, while a build at Verilator's
  default ``-Os`` takes minutes (the 4-core chip: 207 s of C++ against 37 s at -O0).
"""

import os

import pytest

from tests.simulators import SIMULATORS, require_sim

os.environ.setdefault("VERILATOR_OPT", "-O0")


@pytest.fixture(autouse=True)
def _simulator_of_sim_parameter(request):
    """Require the simulator a test's ``sim`` parameter names (other values: nothing)."""
    callspec = getattr(request.node, "callspec", None)
    sim = callspec.params.get("sim") if callspec is not None else None
    if sim in SIMULATORS:
        require_sim(sim)


@pytest.fixture
def require_simulator():
    """``require_simulator("icarus")``: fail (or skip, ``ALLOW_MISSING_SIM=1``) unless
    that simulator is installed."""
    return require_sim
