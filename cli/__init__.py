"""The ``caterpillar`` command line (:mod:`cli.main`) and ``make demo`` (:mod:`cli.demo`):
the top layer, which may use every package below it."""
