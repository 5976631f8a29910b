"""What the FPGA build adds to a design's netlist: signals on a global network of the
ECP5 (:func:`global_net`) and the Yosys commands run after reading the design that keep
the PEs' flip-flops and the sequencer's enable copies apart and declare synchronous
memory reads collision-free.
"""

from __future__ import annotations

__all__ = ["global_net", "keep_pe_ffs", "keep_enable_copies", "sram_reads_collision_free", "PE_PARTS"]

#: The PE's sub-components with flip-flops of the PE's own (:class:`pe.pe.PE`'s
#: submodules: SRAM banks, register file; not its FP units, and the move unit's
#: datapath ``mv`` has none)
PE_PARTS = ("sram", "rf")


def global_net(m, platform, sig, name: str):
    """``sig`` on a global network of an ECP5 device (``platform`` a
    ``LatticeECP5Platform``): through a ``DCCA`` (``CE`` = 1, a buffer), so nextpnr routes
    it on a clock network, which also reaches the fabric's enable, reset and LUT inputs;
    ``sig`` itself otherwise (simulation, other targets). nextpnr-ecp5 has 8 such
    networks that may drive the fabric (the board's reset takes one)."""
    from amaranth.hdl import Instance, Signal
    from amaranth.vendor import LatticeECP5Platform

    if not isinstance(platform, LatticeECP5Platform):
        return sig
    out = Signal(name=f"{name}_global")
    m.submodules[f"{name}_gbuf"] = Instance("DCCA", i_CLKI=sig, i_CE=1, o_CLKO=out)
    return out


def _modules(design: str, pattern: str) -> list[str]:
    """Names of the modules of ``design`` (RTLIL, or Verilog as Amaranth writes it: an
    escaped ``\\name`` or a plain name, then the port list) whose hierarchical name
    matches ``pattern``."""
    import re

    return re.findall(rf"^module \\?({pattern})(?=\s*$|\s*\()", design, re.M)


def keep_pe_ffs(rtlil: str) -> str:
    """A Yosys command putting ``keep`` on the flip-flops (``$dff`` cells) of every PE
    module of ``rtlil`` (modules named ``... .pe_<row>_<col>``, its parts
    ``... .pe_<row>_<col>.sram`` / ``.rf`` (:data:`PE_PARTS`), ``..._dist``, a
    PE's distribution register with :attr:`~arch.config.ArchConfig.dist_stage`,
    ``..._vis`` and ``..._hen``, its copies of the buses' visibility flags and host
    enables with :attr:`~arch.config.ArchConfig.bus_stage`, and
    ``... .uop_fan_<r>_<k>``, the copies of the sequencer's micro-op register the
    distribution registers load from; the PEs' FP units' modules, ``.mul`` / ``.add``,
    are not included).
    Every PE registers the same broadcast micro-op, so without it ``opt_merge`` keeps one
    copy of each register whose input does not depend on the PE (the operand-stage
    micro-op, pipeline destinations, source selects) and that one flip-flop drives all
    PEs (docs/fpga-timing.md)."""
    mods = _modules(rtlil, r"\S*\.(?:pe_\d+_\d+(?:_dist|_vis|_hen|\.(?:%s))?|uop_fan_\d+_\d+)" % "|".join(PE_PARTS))
    if not mods:
        return "# (no PE modules: nothing to keep)"
    return "setattr -set keep 1 " + " ".join(f"{m}/t:$dff" for m in mods)


def keep_enable_copies(rtlil: str) -> str:
    """A Yosys command keeping the copies of the sequencer's load enables (modules
    ``... .seq.head_en<k>``, :attr:`rtl.sequencer.Sequencer.HEAD_CHUNK`, and
    ``... .seq.go_en<k>``, :attr:`rtl.sequencer.Sequencer.GO_CHUNK`) as separate modules
    (``keep_hierarchy``): identical gates, which synthesis would otherwise merge back
    into one gate driving every head bit or every loop and AGU register. (On an ECP5
    board each enable is one gate, ``head_en0`` / ``go_en0``, driving a global network:
    :func:`global_net`.)"""
    mods = _modules(rtlil, r"\S*\.seq\.(?:head|go)_en\d+")
    if not mods:
        return "# (no head-enable copies: nothing to keep)"
    return "setattr -mod -set keep_hierarchy 1 " + " ".join(mods)


def sram_reads_collision_free(design: str, extra: tuple[str, ...] = (), pe: bool = True) -> str:
    """A Yosys command declaring synchronous memory read ports of ``design`` (RTLIL or
    Verilog) collision-undefined (``COLLISION_X_MASK``): those of every PE module
    (``... .pe_<row>_<col>``, the lone PE ``... .pe`` of the board's scan harness, and
    their SRAM banks ``... .sram``; with ``pe``), of every performance-counter bank (``... .counters``, always), of every
    sequencer (``... .seq``: its microcode RAM, always) and of the modules named in
    ``extra`` and their ``.sram`` children (e.g. a PE that is the top: its SRAM banks;
    the register file's reads are asynchronous).

    Exact where it is declared: Yosys would otherwise add soft logic making a read
    during a write of the same address return the old word (the ECP5's block RAM
    promises nothing across its ports): a delayed write and a compare of the read
    address, 92 flip-flops and 142 LUT4 per preset PE (docs/fpga-timing.md).

    * PEs, for configurations with the execute stage only (``pe``): there the PE's SRAM
      bypass replaces the block RAM's word whenever a write lands on the read's address
      in the read's cycle (an operand write or an FMA write-back, docs/architecture.md),
      so what the block RAM returns then is never used.
    * The counter bank (:class:`rtl.perf_counters.PerfCounters`): its sweep never reads
      the word it writes in that cycle (the write lands three cycles after the visit, the
      sweep's period is the number of counters, more than three), and the readout reads
      only while no write is in flight (``ready``).
    * The sequencer (:class:`rtl.sequencer.Sequencer`): its microcode is written only
      while it reads none (the host interface takes a ``LOAD`` only between runs, the
      read enable is off until a start, and a start reads a cycle after the last write
      at the earliest; ``tests/rtl/test_core.py::test_core_microcode_written_only_while_unread``
      checks it cycle by cycle).

    The read ports must be synchronous already (``CLK_ENABLE``): true of Amaranth's
    RTLIL; from Verilog, after ``memory_dff`` (:func:`rtl.synth.collision_free_prepare`)."""
    import re

    pat = r"(?:pe_\d+_\d+|pe)(?:\.sram)?|counters|seq" if pe else r"counters|seq"
    mods = _modules(design, rf"\S*\.(?:{pat})")
    for e in extra:     # the module and its SRAM banks (a lone PE's)
        mods += [e] + _modules(design, re.escape(e) + r"\.sram")
    if not mods:
        return "# (no PE, counter or sequencer modules: no memory read ports to declare)"
    # per module: its read ports AND its synchronous cells (%i takes the top two of
    # Yosys's selection stack; the pairs are joined at the end)
    return "setparam -set COLLISION_X_MASK 1'1 " + " ".join(f"{m}/t:$memrd_v2 {m}/r:CLK_ENABLE=1 %i" for m in mods)
