"""The architecture configuration: one frozen, validated object read by every layer.

RTL generators, the compiler (``sw``), the cycle-exact fast model and the power model
all take an :class:`ArchConfig`; nothing else carries architecture parameters.
Invalid values fail at construction with a :class:`ConfigError` naming the field and
its allowed range.

Configs can be built in Python, picked by preset name (:data:`PRESETS`) or loaded from a
JSON file (:func:`load_config`), e.g. ``{"preset": "default", "fmt": "binary32", "nr": 2}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from arch.fpformat import FPFormat, get_format
from arch.errors import UsageError

__all__ = ["ArchConfig", "ConfigError", "PRESETS", "load_config", "config_from_arg", "RING_HOP_CYCLES",
           "MIN_MUL_LATENCY", "MIN_ADD_LATENCY"]

#: a ``rout`` issued in cycle t can feed a ``rin`` issuing in cycle t + RING_HOP_CYCLES on
#: the next core (operand stage t + 2, one cycle on the link)
RING_HOP_CYCLES = 3

# Minimum pipeline depths the FP units are built with (see pe/fp_mul.py, pe/fp_add.py).
MIN_MUL_LATENCY = 2
MIN_ADD_LATENCY = 3


class ConfigError(UsageError):
    """An architecture parameter is out of its allowed range."""


#: the DRAM fields' defaults (left out of :meth:`ArchConfig.to_dict` when DRAM is off)
_DRAM_DEFAULTS = {"dram_mib": 0, "dram_gbps": 25.6, "dram_latency": 80}


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"ArchConfig.{name} must be an integer in {lo}..{hi}, got {value!r}")


def _check_bool(cfg, name):
    """Validate the flag ``name`` (true / false or 1 / 0) and store it as a bool."""
    value = getattr(cfg, name)
    if not isinstance(value, int) or value not in (0, 1):
        raise ConfigError(f"ArchConfig.{name} must be true or false, got {value!r}")
    object.__setattr__(cfg, name, bool(value))


@dataclass(frozen=True)
class ArchConfig:
    """Architecture parameters of a CATERPILLAR-style core/chip.

    Parameters
    ----------
    fmt : FPFormat or str
        Arithmetic format of the whole datapath (``binary16`` default, ``bfloat16``,
        ``binary32``).
    nr : int
        The core is ``nr x nr`` PEs (1..16; the reference design uses 4 and 16).
    n_regs : int
        PE register-file entries (4..16). Accumulators live here.
    n_ar : int
        PE address registers (each with its own stride register), 1..4.
    mem_a_words, mem_b_words : int
        Words (one ``fmt`` element each) in the PE's local SRAM banks A and B.
        Default: 8 KiB per bank (16 KiB per PE, as in the reference design).
    mul_latency, add_latency : int
        Pipeline depth of the FP multiplier and adder in cycles.
    exec_stage : bool
        Add an execute stage after the PE's operand stage, with a bypass
        (``docs/architecture.md``, "The execute stage"): every source value a micro-op
        reads, bus values included, is registered, and the move unit, SRAM writes and the
        multiplier act one cycle later, so no path runs from a source over a bus, or
        through the move unit, into a register file, SRAM or the multiplier in one cycle
        (FPGA clock rates). Operand reads see the register file as the current cycle's
        move leaves it, and an SRAM read sees the operand-stage write landing in its cycle,
        so programs see the same move and SRAM distances as without the stage; the FMA
        write-back (:attr:`fpu_latency`) and a HALT's drain are one cycle later. Off by
        default (the reference design's ASIC timing).
    bus_stage : bool
        Add a bus-transfer stage between the operand and execute stages (requires
        :attr:`exec_stage`; ``docs/architecture.md``, "The bus stage"): the value a PE
        drives onto a row or column bus is registered at the driver and crosses the bus
        in the next cycle into the receivers' execute-stage registers, while every other
        source value waits in a register for that cycle. No path then runs from an SRAM
        or register-file read over a bus in one cycle (the FPGA's critical path). The
        move unit, SRAM writes and the multiplier act one cycle later again; the move and
        SRAM bypasses cover the two writes in flight, so programs see the same move and
        SRAM distances, except that a bus driver's source sees a move result from the
        micro-op two later (:attr:`mv_drive_distance`). The FMA write-back
        (:attr:`fpu_latency`) and a HALT's drain are one cycle later. Off by default.
    dist_stage : bool
        Add a micro-op distribution stage (``docs/core.md``, "The distribution stage"):
        a register per PE (and one for the core's stream lanes) between the sequencer's
        issue register and the PEs, so that no path runs from one sequencer flip-flop into
        the issue-stage logic of PEs spread over an FPGA. The whole PE side (PEs, buses,
        host / ring / scratchpad lanes) runs one cycle behind the sequencer; a ``rin``
        pops the ring FIFO one cycle after its issue (its availability check counts a
        beat arriving in the decision cycle) and a core reports its ring FIFO level net of
        that pop, so programs see the same ring timing (:data:`RING_HOP_CYCLES`)
        and credit rule as without the stage. A RUN lasts one cycle longer
        (:attr:`run_overhead`). Off by default.
    fan_stage : bool
        Make the micro-op distribution two register levels (requires :attr:`dist_stage`
        and a lone core, ``cores == 1``; ``docs/core.md``, "The distribution stage"): the
        copies of the micro-op shared by each pair of PEs in a row load the sequencer's
        micro-op register instead of its next value, and each PE's distribution register
        loads from them, so the micro-op crosses the die in two register-to-register hops
        and no path runs from the sequencer's issue logic to a PE pair's copy. The PE side
        runs two cycles behind the sequencer; a RUN lasts one more cycle
        (:attr:`run_overhead`). Programs see the same distances and stream timing. The
        ring timing with two levels is not implemented (a ``rin`` would have to count a
        beat arriving the cycle after its decision), hence the lone core. Off by default.
    fetch_stage : bool
        Add a fetch stage to the sequencer (``docs/core.md``, "The fetch stage"): the
        instruction at the head is held in a register loaded from the microcode RAM, so
        the issue decision (stream needs, credit checks, the issue registers' loads)
        starts from flip-flops instead of the RAM's output (an FPGA block RAM's 5-6 ns
        clock-to-output). The next pc of the instruction behind the head is computed
        with the loop state as the head's issue leaves it, so loops and nested loop ends
        still issue one instruction per cycle; a start waits one more cycle
        (:attr:`run_overhead`) and a ``JUMP`` is followed by one cycle without an issue
        (:attr:`jump_delay`). Off by default.
    addr_stage : bool
        Load the microcode RAM's read address from a register (requires
        :attr:`fetch_stage`; ``docs/core.md``, "The address stage"): the loop-end scan
        decides the successor of the instruction two ahead of the head, so no path runs
        from the scan into the RAM's address. Loops still issue one instruction per
        cycle; a start waits one more cycle (:attr:`run_overhead`), a ``JUMP`` is
        followed by two cycles without an issue (:attr:`jump_delay`), and three
        improperly nested ``LOOP`` placements the assembler never produces are not
        defined (:class:`sim.seq_model.ProgramError`). Off by default.
    rx_stage : bool
        Register each bus at its receivers (requires :attr:`bus_stage`;
        ``docs/architecture.md``, "The receive stage"): every PE registers the values of
        its row and column buses as they come off the bus, and they join the other source
        values one cycle later, so a bus runs from the drivers' registers through the OR
        of the drivers into a flip-flop at each receiver, with nothing after it in that
        cycle. The move unit, SRAM writes and the multiplier act one cycle later again;
        the move bypass has a third point (the move executing in the reader's receive
        stage), so moves are read by the next micro-op as before, but a bus driver's
        source sees a move result from the micro-op three later
        (:attr:`mv_drive_distance`) and an SRAM read sees a ``wa`` / ``wb`` write issued
        three before it or earlier (:attr:`sram_read_distance`: the SRAM bypass keeps two
        points). The FMA write-back (:attr:`fpu_latency`) and a HALT's drain are one
        cycle later. Off by default.
    read_stage : bool
        Register each SRAM bank's read data right after the block RAM (requires
        :attr:`bus_stage`; ``docs/architecture.md``, "The read stage"): a value read from
        SRAM joins the other source values in the bus stage instead of the operand stage
        (a bus driver's SRAM value crosses the bus from that register), so no path runs
        from a block RAM's clock-to-output (5-6 ns on an ECP5) through the SRAM bypass
        and the source select in one cycle. A pure retiming: programs see the same cycle
        behaviour, latencies and distances as with the bus stage alone. Off by default.
    clock_mhz : float
        Clock frequency used to turn cycles into time (reference: 1 GHz).
    ucode_depth : int
        Sequencer microcode memory entries (power of two, 16..65536).
    n_loops : int
        Zero-overhead hardware loop levels of the sequencer (3..8).
    n_agus : int
        Sequencer address generators (1..7), each affine in the loop indices.
    loop_bits : int
        Width of loop trip counts and AGU base/stride immediates (8..24).
    counter_bits : int
        Width of the core's performance counters (32..64).
    cores : int
        Cores of the chip, connected as a unidirectional ring (1 = a lone core; else an
        even number 2..64: the reference design's ``2 x C`` array, ``cores = 2C``).
    ring_fifo_depth : int
        Beats of each core's ring receive FIFO (4..64; 4 sustains one beat per cycle).
    spad_kib : int
        KiB of the core's off-core scratchpad SRAM (0 = none, else a power of two in
        1..16384; the reference design has 512 KiB per core, preset ``S``). A scratchpad
        word is one *beat* of ``nr`` values, so it holds :attr:`spad_depth` beats.
        0 by default: a 512 KiB SRAM in every RTL simulation and FPGA build of an ad-hoc
        configuration would cost more than the rest of the core (``docs/core.md``).
    dram_mib : int
        MiB of external DRAM behind the core's DMA engine (0 = none, the default: no
        ``dma`` instructions, no DRAM counters; else a power of two in 1..65536, needs a
        scratchpad). Addresses are in beats (``nr`` values, :attr:`spad_beat_bytes`).
    dram_gbps : float
        DRAM bandwidth per core in GB/s (default 25.6: one 64-bit DDR4-3200 channel,
        3200 MT/s x 8 bytes, JEDEC JESD79-4). At most one beat per cycle moves.
    dram_latency : int
        The fixed cycles of a DMA transfer, 1..4096: an ``n``-beat transfer keeps the
        engine busy ``dram_latency`` + ``n`` beats at ``dram_gbps`` (+ 1 for a store)
        cycles (:meth:`dma_cycles`). Default 80: about 80 ns at 1 GHz, a DDR4 row miss
        (tRCD + CL = 27.5 ns at DDR4-3200 CL22, JESD79-4) plus a memory controller and
        interconnect (est.). cocotbext-axi's ``AxiRam`` is 3 (``docs/core.md``).
    dma_queue : int
        Transfers the DMA engine holds, 1..64: the one it moves and those waiting in its
        descriptor queue behind it, done one after another. A ``dma load`` / ``dma
        store`` stalls only while ``dma_queue`` transfers are outstanding (a ``dma wait``
        until none is). Default 1: one transfer at a time.
    """

    fmt: FPFormat | str = "binary16"
    nr: int = 4
    n_regs: int = 16
    n_ar: int = 4
    mem_a_words: int | None = None
    mem_b_words: int | None = None
    mul_latency: int = 2
    add_latency: int = 3
    exec_stage: bool = False
    bus_stage: bool = False
    dist_stage: bool = False
    fan_stage: bool = False
    fetch_stage: bool = False
    addr_stage: bool = False
    read_stage: bool = False
    rx_stage: bool = False
    clock_mhz: float = 1000.0
    ucode_depth: int = 1024
    n_loops: int = 4
    n_agus: int = 4
    loop_bits: int = 16
    counter_bits: int = 48
    cores: int = 1
    ring_fifo_depth: int = 8
    spad_kib: int = 0
    dram_mib: int = 0
    dram_gbps: float = 25.6
    dram_latency: int = 80
    dma_queue: int = 1

    def __post_init__(self):
        try:
            fmt = get_format(self.fmt)
        except ValueError as e:
            raise ConfigError(f"ArchConfig.fmt: {e}") from None
        object.__setattr__(self, "fmt", fmt)
        default_words = 8192 * 8 // fmt.width
        for bank in ("mem_a_words", "mem_b_words"):
            if getattr(self, bank) is None:
                object.__setattr__(self, bank, default_words)
        _check_int("nr", self.nr, 1, 16)
        _check_int("n_regs", self.n_regs, 4, 16)
        _check_int("n_ar", self.n_ar, 1, 4)
        for bank in ("mem_a_words", "mem_b_words"):
            words = getattr(self, bank)
            _check_int(bank, words, 16, 1 << 16)
            if words & (words - 1):
                raise ConfigError(f"ArchConfig.{bank} must be a power of two in 16..65536, got {words}")
        _check_int("mul_latency", self.mul_latency, MIN_MUL_LATENCY, 8)
        _check_int("add_latency", self.add_latency, MIN_ADD_LATENCY, 8)
        for flag in ("exec_stage", "bus_stage", "dist_stage", "fan_stage", "fetch_stage", "addr_stage",
                     "read_stage", "rx_stage"):
            _check_bool(self, flag)
        if self.addr_stage and not self.fetch_stage:
            raise ConfigError("ArchConfig.addr_stage requires fetch_stage=True (the address register "
                              "runs one instruction ahead of the fetch stage)")
        if self.fan_stage and not self.dist_stage:
            raise ConfigError("ArchConfig.fan_stage requires dist_stage=True (it is the distribution "
                              "stage's second register level)")
        if self.bus_stage and not self.exec_stage:
            raise ConfigError("ArchConfig.bus_stage requires exec_stage=True (the bus stage sits between "
                              "the operand stage and the execute stage)")
        if self.read_stage and not self.bus_stage:
            raise ConfigError("ArchConfig.read_stage requires bus_stage=True (the registered SRAM data "
                              "join the source values in the bus stage)")
        if self.rx_stage and not self.bus_stage:
            raise ConfigError("ArchConfig.rx_stage requires bus_stage=True (the receivers register what "
                              "the drivers' registers put on the bus)")
        _check_int("ucode_depth", self.ucode_depth, 16, 1 << 16)
        if self.ucode_depth & (self.ucode_depth - 1):
            raise ConfigError(f"ArchConfig.ucode_depth must be a power of two in 16..65536, got {self.ucode_depth}")
        _check_int("n_loops", self.n_loops, 3, 8)
        _check_int("n_agus", self.n_agus, 1, 7)
        _check_int("loop_bits", self.loop_bits, 8, 24)
        if self.loop_bits < self.addr_bits:
            raise ConfigError(f"ArchConfig.loop_bits must be >= addr_bits ({self.addr_bits}) so AGU "
                              f"immediates span an SRAM bank, got {self.loop_bits}")
        _check_int("counter_bits", self.counter_bits, 32, 64)
        _check_int("cores", self.cores, 1, 64)
        if self.cores != 1 and self.cores % 2:
            raise ConfigError(f"ArchConfig.cores must be 1 or an even number in 2..64 (a 2 x C chip), "
                              f"got {self.cores}")
        if self.fan_stage and self.cores != 1:
            raise ConfigError(f"ArchConfig.fan_stage needs a lone core (cores=1), got cores={self.cores}: the "
                              f"ring timing with two distribution levels is not implemented")
        _check_int("ring_fifo_depth", self.ring_fifo_depth, 4, 64)
        _check_int("spad_kib", self.spad_kib, 0, 16384)
        if self.spad_kib & (self.spad_kib - 1):
            raise ConfigError(f"ArchConfig.spad_kib must be 0 or a power of two in 1..16384, got {self.spad_kib}")
        if self.spad_kib and self.spad_addr_bits > self.loop_bits + self.pc_bits:
            raise ConfigError(f"ArchConfig.spad_kib={self.spad_kib} needs {self.spad_addr_bits}-bit scratchpad "
                              f"addresses, more than loop_bits + pc_bits = {self.loop_bits + self.pc_bits} "
                              f"(the immediate of 'spad rd/wr = N'): use a smaller scratchpad or raise loop_bits / "
                              f"ucode_depth")
        if not isinstance(self.clock_mhz, (int, float)) or not 1 <= self.clock_mhz <= 10000:
            raise ConfigError(f"ArchConfig.clock_mhz must be a number in 1..10000, got {self.clock_mhz!r}")
        self._check_dram()

    def _check_dram(self):
        _check_int("dram_mib", self.dram_mib, 0, 65536)
        if self.dram_mib & (self.dram_mib - 1):
            raise ConfigError(f"ArchConfig.dram_mib must be 0 or a power of two in 1..65536, got {self.dram_mib}")
        _check_int("dram_latency", self.dram_latency, 1, 4096)
        _check_int("dma_queue", self.dma_queue, 1, 64)
        if (isinstance(self.dram_gbps, bool) or not isinstance(self.dram_gbps, (int, float))
                or not 0.01 <= self.dram_gbps <= 100000):
            raise ConfigError(f"ArchConfig.dram_gbps must be a number in 0.01..100000, got {self.dram_gbps!r}")
        if not self.dram_mib:
            return
        if not self.spad_kib:
            raise ConfigError(f"ArchConfig.dram_mib={self.dram_mib} needs a scratchpad (spad_kib > 0): the DMA "
                              f"engine copies between DRAM and the scratchpad")
        if self.dist_stage:
            raise ConfigError("ArchConfig.dram_mib needs dist_stage=False (the DMA engine starts from the "
                              "sequencer's issue register; with distribution stages a store would race the "
                              "sout writes still in flight)")
        bb = self.spad_beat_bytes
        if self.nr * self.fmt.width % 8 or bb & (bb - 1):
            raise ConfigError(f"ArchConfig.dram_mib needs a beat of a power of two of bytes (an AXI4 data "
                              f"width), got nr={self.nr} x {self.fmt.width} bits")
        if self.dram_addr_bits > self.loop_bits + self.pc_bits:
            raise ConfigError(f"ArchConfig.dram_mib={self.dram_mib} needs {self.dram_addr_bits}-bit DRAM beat "
                              f"addresses, more than loop_bits + pc_bits = {self.loop_bits + self.pc_bits} "
                              f"(the immediate of 'dma dram = N'): use less DRAM or raise loop_bits / ucode_depth")

    # -- derived quantities ------------------------------------------------------------
    @property
    def n_pes(self) -> int:
        return self.nr * self.nr

    @property
    def addr_bits(self) -> int:
        """Width of PE SRAM addresses, address registers, strides and offsets."""
        return max(self.mem_a_words, self.mem_b_words).bit_length() - 1

    @property
    def sel_bits(self) -> int:
        """Width of a PE row/column index field in the micro-op."""
        return max(1, (self.nr - 1).bit_length())

    @property
    def uop_key(self) -> tuple:
        """The arguments of :func:`arch.microop.uop_layout` for this configuration:
        ``(addr_bits, sel_bits, write predicate)``; cores with a scratchpad have the write
        predicate (``wp.en``, their page loads' gate), the others not."""
        return (self.addr_bits, self.sel_bits, self.spad_kib > 0)

    @property
    def fpu_latency(self) -> int:
        """Cycles from micro-op issue to the FMA result being in the RF (micro-ops issued
        ``fpu_latency - 1`` cycles after the FMA or later read it)."""
        return 2 + self.exec_delay + self.mul_latency + self.add_latency

    @property
    def dist_delay(self) -> int:
        """Cycles from the sequencer's issue register to the PEs' issue stage (0; 1 with
        :attr:`dist_stage`; 2 with :attr:`fan_stage` too)."""
        return int(self.dist_stage) + int(self.fan_stage)

    @property
    def fetch_delay(self) -> int:
        """Cycles the sequencer's fetch and address stages add between a start and the
        first issue (0; 1 with :attr:`fetch_stage`; 2 with :attr:`addr_stage` too)."""
        return int(self.fetch_stage) + int(self.addr_stage)

    @property
    def jump_delay(self) -> int:
        """Cycles without an issue after each ``JUMP`` issues (0; 1 with
        :attr:`fetch_stage`: the jump is resolved at the head and the head refills from
        its target; 2 with :attr:`addr_stage` too: the target goes through the address
        register first). Hand-written programs pay it; the compilers emit ``JUMP`` only
        where it is 0 (the alignment of reloaded chip programs, :mod:`sw.train_chip_place`)."""
        return self.fetch_delay

    @property
    def start_latency(self) -> int:
        """Cycles from the sequencer's ``start`` pulse to its first ``issue`` (2; 3 with
        :attr:`fetch_stage`; 4 with :attr:`addr_stage` too)."""
        return 2 + self.fetch_delay

    @property
    def run_overhead(self) -> int:
        """Cycles of a RUN beyond its instructions before the HALT: the HALT itself, the
        start-latency cycle, the fetch and distribution stages and the drain of the FP
        pipelines (a RUN of ``n`` instructions and a HALT, without stalls, lasts
        ``n + run_overhead`` cycles)."""
        return 1 + self.fpu_latency + 2 + self.fetch_delay + self.dist_delay

    @property
    def exec_delay(self) -> int:
        """Cycles from a micro-op's operand stage to its execution (0; 1 with
        :attr:`exec_stage`; 2 with :attr:`bus_stage` too; 3 with :attr:`rx_stage` too)."""
        return int(self.exec_stage) + int(self.bus_stage) + int(self.rx_stage)

    @property
    def mv_read_distance(self) -> int:
        """Minimum issue distance from a move to a micro-op that reads its result (1 with
        either timing: the execute stage bypasses the move result to the next micro-op).
        A bus driver's source is the exception with :attr:`bus_stage`, see
        :attr:`mv_drive_distance`."""
        return 1

    @property
    def drive_op_sampled(self) -> bool:
        """Whether a core uses the PEs' operand-stage drive values (``PE.row_op`` /
        ``col_op``). Without :attr:`bus_stage` they are the bus drive itself; with it the
        buses carry the registered drive and only the ring lane (``cores > 1``) and the
        scratchpad lane (``spad_kib > 0``) sample the operand-stage values, so a lone core
        without a scratchpad leaves them unused (``rtl/core.py``, ``rtl/pe_harness.py``)."""
        return not self.bus_stage or self.cores > 1 or bool(self.spad_kib)

    @property
    def mv_drive_distance(self) -> int:
        """Minimum issue distance from a move to a micro-op that drives its result onto a
        bus (``rdrv.src`` / ``cdrv.src``): :attr:`mv_read_distance`, or 2 with
        :attr:`bus_stage`, 3 with :attr:`rx_stage` (the driven value is registered at
        the end of the driver's operand stage, before the moves of the one or two
        micro-ops before it execute)."""
        return 1 + int(self.bus_stage) + int(self.rx_stage)

    @property
    def sram_read_distance(self) -> int:
        """Minimum issue distance from an SRAM write (by ``wa``/``wb``) to a read that
        sees it (2 with the reference timing, the execute stage and the bus stage: with
        those the write lands one or two cycles later and the SRAM bypass gives its word
        to the reads issued in those cycles; 3 with :attr:`rx_stage`, whose write lands
        three cycles later while the bypass keeps its two points)."""
        return 3 if self.rx_stage else 2

    @property
    def acc_reuse_distance(self) -> int:
        """Minimum issue distance between two MACs that accumulate into the same register.

        A kernel keeps the MAC busy every cycle by interleaving at least this many
        independent accumulators.
        """
        return self.add_latency + 1

    @property
    def pc_bits(self) -> int:
        return self.ucode_depth.bit_length() - 1

    @property
    def host_width(self) -> int:
        """AXI4-Stream ``tdata`` width of the core's host ports: one lane per bus, >= 32."""
        return max(32, self.nr * self.fmt.width)

    @property
    def spad_beat_bytes(self) -> int:
        """Bytes of one scratchpad word: a beat of ``nr`` values."""
        return self.nr * self.fmt.width // 8

    @property
    def spad_depth(self) -> int:
        """Scratchpad words (beats of ``nr`` values): the largest power of two of beats
        that fits in ``spad_kib`` KiB (exactly ``spad_kib * 1024 / (nr * bytes per
        value)`` when ``nr`` is a power of two); 0 without a scratchpad."""
        if not self.spad_kib:
            return 0
        beats = self.spad_kib * 1024 * 8 // (self.nr * self.fmt.width)
        return 1 << (beats.bit_length() - 1)

    @property
    def spad_addr_bits(self) -> int:
        """Width of the scratchpad read / write pointers (0 without a scratchpad)."""
        return self.spad_depth.bit_length() - 1 if self.spad_kib else 0

    @property
    def dram_depth(self) -> int:
        """DRAM capacity in beats (0 without DRAM)."""
        return self.dram_mib * (1 << 20) // self.spad_beat_bytes if self.dram_mib else 0

    @property
    def dram_addr_bits(self) -> int:
        """Width of the DMA engine's DRAM beat address (0 without DRAM)."""
        return self.dram_depth.bit_length() - 1 if self.dram_mib else 0

    @property
    def dram_page_beats(self) -> int:
        """Beats of a 4 KiB DRAM page: a transfer must stay inside one (an AXI4 burst
        does not cross a 4 KiB boundary)."""
        return max(1, 4096 // self.spad_beat_bytes)

    def dma_cycles(self, n: int, store: bool = False) -> int:
        """Cycles the DMA engine is busy with an ``n``-beat transfer (``docs/core.md``,
        "The DMA engine"): ``dram_latency`` plus the beats at the DRAM bandwidth, at most
        one per cycle (``max(n, ceil(n * beat bytes / bytes per cycle))``, exact), plus
        one for a store (its first scratchpad read)."""
        from fractions import Fraction

        per = Fraction(self.spad_beat_bytes) * Fraction(str(self.clock_mhz)) / (Fraction(str(self.dram_gbps)) * 1000)
        return self.dram_latency + max(n, -(-(n * per.numerator) // per.denominator)) + int(bool(store))

    @property
    def pe_sram_bytes(self) -> int:
        return (self.mem_a_words + self.mem_b_words) * self.fmt.width // 8

    # -- (de)serialization ---------------------------------------------------------------
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["fmt"] = self.fmt.name
        if not self.dram_mib:     # without DRAM its fields change nothing: the dict of before
            for k in ("dram_mib", "dram_gbps", "dram_latency"):
                if d[k] == _DRAM_DEFAULTS[k]:
                    del d[k]
        if d["dma_queue"] == 1:   # one transfer at a time: the dict of before
            del d["dma_queue"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "ArchConfig":
        d = dict(d)
        preset = d.pop("preset", None)
        base = PRESETS[_preset_name(preset)].to_dict() if preset is not None else {}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown ArchConfig field(s) {unknown}; allowed: {sorted(known)}")
        base.update(d)
        if preset is not None and ("fmt" in d) and not {"mem_a_words", "mem_b_words"} & set(d):
            # keep the preset's byte budget when only the format changes
            base.pop("mem_a_words", None)
            base.pop("mem_b_words", None)
        return cls(**base)

    def replace(self, **changes) -> "ArchConfig":
        d = self.to_dict()
        if "fmt" in changes and not {"mem_a_words", "mem_b_words"} & set(changes):
            d.pop("mem_a_words")
            d.pop("mem_b_words")
        d.update(changes)
        return ArchConfig(**d)


PRESETS: dict[str, ArchConfig] = {
    "default": ArchConfig(),
    # small configurations for fast RTL tests (small memories keep simulators quick)
    # (2 KiB scratchpads: 512 / 256 beats, cheap in RTL simulation)
    "tiny": ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, spad_kib=2),
    "small": ArchConfig(nr=4, mem_a_words=1024, mem_b_words=1024, spad_kib=2),
    # chips (cores on a ring): small ones for RTL tests, and the reference design's
    # configurations S and L below (4096 / 16384-word microcodes, which hold a training
    # step's programs in most cases measured: the reference design does not give its
    # microcode size)
    "chip-tiny": ArchConfig(nr=2, mem_a_words=256, mem_b_words=256, cores=2, spad_kib=1),
    "chip-small": ArchConfig(nr=4, mem_a_words=1024, mem_b_words=1024, cores=4, spad_kib=2),
    # configuration S: 2 x 16 cores of 4 x 4 PEs = 512 PEs, 512 KiB scratchpad per core
    "S": ArchConfig(nr=4, cores=32, spad_kib=512, ucode_depth=4096),
    # configuration L: 2 x 4 cores of 16 x 16 PEs = 2048 PEs; a 24-beat ring receive FIFO
    # (charged in the area model) holds a 20-beat segment of an SGD all-gather run inside
    # the GEMV that consumes it (sw.ring.gemv_ring_check)
    "L": ArchConfig(nr=16, cores=8, spad_kib=512, ucode_depth=16384, ring_fifo_depth=24),
    # the default core with the FPGA timing (docs/fpga.md, "Timing"): the execute, bus, receive
    # and read stages keep SRAM and register-file reads, bus crossings and the block RAMs'
    # clock-to-output in cycles of their own; the two distribution levels carry the micro-op
    # across the die; the sequencer's fetch and address stages start the issue decision and the
    # microcode RAM's address from flip-flops; 4 / 5-cycle FP pipelines
    "fpga": ArchConfig(exec_stage=True, bus_stage=True, rx_stage=True, read_stage=True, dist_stage=True,
                       fan_stage=True, fetch_stage=True, addr_stage=True, mul_latency=4, add_latency=5),
}


def _preset_name(name) -> str:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    return name


def load_config(path: str | os.PathLike) -> ArchConfig:
    """Load a JSON config file (fields of :class:`ArchConfig`, optional ``preset``)."""
    from arch.errors import InputError
    from arch.files import read_text

    p = Path(path)
    try:
        d = json.loads(read_text(p, "config file"))
    except InputError as e:
        raise ConfigError(str(e)) from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"config file {p} is not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise ConfigError(f"config file {p} must hold a JSON object")
    return ArchConfig.from_dict(d)


def config_from_arg(arg: str | None) -> ArchConfig:
    """``--config`` argument: a preset name, a JSON file path, or inline JSON."""
    if arg is None:
        return PRESETS["default"]
    if arg in PRESETS:
        return PRESETS[arg]
    if arg.lstrip().startswith("{"):
        try:
            d = json.loads(arg)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--config: inline JSON is not valid: {e}") from None
        if not isinstance(d, dict):
            raise ConfigError("--config: inline JSON must be an object of ArchConfig fields")
        return ArchConfig.from_dict(d)
    if not Path(arg).exists():
        raise ConfigError(f"--config {arg!r}: neither a preset ({', '.join(PRESETS)}) nor an existing JSON file")
    return load_config(arg)
