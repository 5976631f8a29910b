"""The cocotb benches (``tb_*``: run by :func:`sim.harness.run_cocotb` under the module
name ``tests.benches.tb_<name>``) and the program modules and top-level wrappers they
share with the tests (``pe_top``, ``pe_programs``, ``seq_programs``)."""
