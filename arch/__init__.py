"""The architecture's description: the leaf every other package builds on.

``arch`` holds what the hardware, the compiler and the simulators must agree on, as plain
Python (no Amaranth, no simulator): the frozen, validated :class:`arch.config.ArchConfig`
and its presets, number formats (:mod:`arch.fpformat`), the micro-op and instruction
encodings (:mod:`arch.microop`, :mod:`arch.isa`, bit layouts in :mod:`arch.layout`),
host command codes (:mod:`arch.host`), performance counter names (:mod:`arch.counters`)
and small file helpers (:mod:`arch.files`).
"""
