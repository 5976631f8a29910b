"""Power and area model: performance counters of a run -> GFLOPS, watts, GFLOPS/W, mm^2.

Every figure is computed from the counters of one run (RTL or fast model; the counter
set is :func:`rtl.perf_counters.counter_names`) and a technology table
(:data:`DEFAULT_TECH`, ``sim/tech/45nm.json``; users can pass their own JSON file).
Nothing is estimated from the program text.

Energy categories
-----------------
``fpu``      FPU issues x FLOPs per issue (2: every issue is a multiply-add) x energy per FLOP
``sram``     PE SRAM reads + writes x energy per access (scaled by width and bank size)
``spad``     off-core scratchpad beats read + written x nr lanes x energy per 16-bit access
``bus``      row/column bus activity in PE pitches (hops) x width x pitch x wire energy per bit-mm
``rf``       register-file reads + writes x energy per access (scaled by width)
``ring``     ring beats x nr lanes x width x core pitch x wire energy, plus the receive FIFO
``control``  microcode fetch (instruction bits, store-size scaled) + micro-op broadcast
``leakage``  leakage power density x block area x time, per block type (logic, SRAM)
``dram``     (cores with DRAM only) DRAM beats read + written x nr x width / 64 x energy per
             64-bit access (Horowitz, ISSCC 2014); in the *everything* scope only

Scopes (:data:`COMPARED`, :data:`EVERYTHING`): the *compared* scope holds every energy
the reference design counted (FPU, SRAM, scratchpad) and every energy our dataflow
spends in place of SRAM accesses that the reference design's did not (the buses);
:attr:`Report.gflops_per_w_compared` is the figure to set beside the reference design's.
*Everything* adds register files, ring, control and leakage
(:attr:`Report.gflops_per_w_all`). docs/power.md states the convention.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import asdict, dataclass, field
from pathlib import Path
from arch.errors import InputError

__all__ = ["TechTable", "TechError", "load_tech", "DEFAULT_TECH", "Report", "report_from_counters",
           "area_of_core", "core_area", "sram_pj_per_access", "ucode_pj_per_bit", "plot_breakdown", "COMPARED",
           "EVERYTHING", "MEMORY", "LOGIC_BLOCKS", "SRAM_BLOCKS", "scope_note", "RUN_FORMAT", "run_record",
           "read_run_record", "partition_energy"]

TECH_DIR = Path(__file__).resolve().parent / "tech"

#: energy categories of the compared scope (the reference design's FPU + SRAM + scratchpad,
#: and the bus energy our dataflow spends instead of SRAM reads)
COMPARED = ("fpu", "sram", "spad", "bus")
#: every energy category, in report order
EVERYTHING = COMPARED + ("rf", "ring", "control", "leakage")
#: the categories the reference design's "memory energy" covers (its Table 1 memories)
MEMORY = ("sram", "spad")
#: area blocks that leak at the logic density, and those at the SRAM density
LOGIC_BLOCKS = ("fpu", "rf", "pe_logic", "dma", "ring")
SRAM_BLOCKS = ("sram", "spad", "ucode")

_PER_FORMAT = ("fpu_pj_per_flop", "fpu_area_mm2")
_SCALARS = ("flops_per_fpu_issue", "local_sram_pj_per_16b", "local_sram_area_mm2_per_16kib", "spad_pj_per_16b",
            "spad_area_mm2_per_512kib", "rf_pj_per_16b", "rf_area_mm2_per_16x16b", "pe_logic_area_mm2",
            "wire_pj_per_bit_mm", "ucode_pj_per_bit", "ucode_ref_bytes", "ucode_area_mm2_per_16kib",
            "uop_switching_fraction", "uop_wire_core_sides", "leakage_mw_per_mm2_logic",
            "leakage_mw_per_mm2_sram", "local_sram_ref_bank_bytes", "local_sram_size_exponent", "dram_pj_per_64b",
            "dma_area_mm2")


class TechError(InputError):
    """A technology table is malformed."""


@dataclass(frozen=True)
class TechTable:
    """Validated technology numbers (values; their sources in :attr:`sources`)."""

    name: str
    node_nm: float
    fpu_pj_per_flop: dict
    fpu_area_mm2: dict
    flops_per_fpu_issue: float
    local_sram_pj_per_16b: float
    local_sram_area_mm2_per_16kib: float
    spad_pj_per_16b: float
    spad_area_mm2_per_512kib: float
    rf_pj_per_16b: float
    rf_area_mm2_per_16x16b: float
    pe_logic_area_mm2: float
    wire_pj_per_bit_mm: float
    ucode_pj_per_bit: float
    ucode_ref_bytes: float
    ucode_area_mm2_per_16kib: float
    uop_switching_fraction: float
    uop_wire_core_sides: float
    leakage_mw_per_mm2_logic: float
    leakage_mw_per_mm2_sram: float
    local_sram_ref_bank_bytes: float
    local_sram_size_exponent: float
    dram_pj_per_64b: float
    dma_area_mm2: float
    sources: dict = field(default_factory=dict, compare=False)

    def replace(self, **changes) -> "TechTable":
        """A copy with some values changed (e.g. another FPU energy for a labelled
        alternative convention); ``sources`` of changed entries say so."""
        from dataclasses import replace

        src = dict(self.sources)
        for k in changes:
            src[k] = "changed from the table's value"
        return replace(self, sources=src, **changes)


def _num(path, key, entry):
    if not isinstance(entry, dict) or "value" not in entry:
        raise TechError(f"{path}: '{key}' must be an object with 'value' and 'source'")
    if "source" not in entry or not str(entry["source"]).strip():
        raise TechError(f"{path}: '{key}' has no 'source' (every number must cite one)")
    v = entry["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise TechError(f"{path}: '{key}' value must be a finite number >= 0, got {v!r}")
    return float(v)


def load_tech(path: str | Path | None = None) -> TechTable:
    """Load and validate a technology table (default: ``sim/tech/45nm.json``)."""
    p = Path(path) if path is not None else TECH_DIR / "45nm.json"
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TechError(f"technology file {p} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TechError(f"technology file {p} is not valid JSON: {e}") from None
    except OSError as e:
        raise TechError(f"cannot read technology file {p}: {e.strerror}") from None
    if not isinstance(d, dict):
        raise TechError(f"{p}: a technology table is a JSON object")
    missing = sorted(set(_PER_FORMAT + _SCALARS) - set(d))
    if missing:
        raise TechError(f"{p}: missing entries {missing}")
    vals, sources = {}, {}
    for key in _PER_FORMAT:
        entry = d[key]
        if not isinstance(entry, dict) or not entry:
            raise TechError(f"{p}: '{key}' must map format names to numbers")
        vals[key] = {fmt: _num(p, f"{key}.{fmt}", e) for fmt, e in entry.items()}
        sources[key] = {fmt: e["source"] for fmt, e in entry.items()}
    for key in _SCALARS:
        vals[key] = _num(p, key, d[key])
        sources[key] = d[key]["source"]
    if vals["flops_per_fpu_issue"] <= 0:
        raise TechError(f"{p}: 'flops_per_fpu_issue' must be > 0")
    return TechTable(name=str(d.get("name", p.stem)), node_nm=float(d.get("node_nm", 0)), sources=sources, **vals)


DEFAULT_TECH = load_tech()


def _fmt_entry(tech: TechTable, table: str, fmt_name: str) -> float:
    t = getattr(tech, table)
    if fmt_name not in t:
        raise TechError(f"technology '{tech.name}' has no {table} entry for format {fmt_name!r}; "
                        f"it has {sorted(t)}")
    return t[fmt_name]


def sram_pj_per_access(cfg, bank: str, tech: TechTable = DEFAULT_TECH) -> float:
    """Energy of one access to PE SRAM bank ``bank`` (one ``fmt`` word): the reference
    energy per 16 bits, scaled linearly in width and by ``(bank bytes / reference bank
    bytes) ** exponent`` in capacity."""
    words = cfg.mem_a_words if bank == "a" else cfg.mem_b_words
    bank_bytes = words * cfg.fmt.width / 8
    size = (bank_bytes / tech.local_sram_ref_bank_bytes) ** tech.local_sram_size_exponent
    return tech.local_sram_pj_per_16b * (cfg.fmt.width / 16) * size


def _ucode_words(cfg, ucode_words) -> int:
    if ucode_words is None:
        return cfg.ucode_depth
    if isinstance(ucode_words, bool) or not isinstance(ucode_words, numbers.Integral) or ucode_words <= 0:
        raise InputError(f"ucode_words must be a positive number of microcode words, got {ucode_words!r}")
    return ucode_words


def ucode_pj_per_bit(cfg, tech: TechTable = DEFAULT_TECH, ucode_words: int | None = None) -> float:
    """Energy per bit of a microcode fetch from a store of ``ucode_words`` instructions
    (default ``cfg.ucode_depth``), scaled from the reference SRAM like the local SRAM."""
    from arch.isa import instr_layout

    store_bytes = _ucode_words(cfg, ucode_words) * instr_layout(cfg).size / 8
    return tech.ucode_pj_per_bit * (store_bytes / tech.ucode_ref_bytes) ** tech.local_sram_size_exponent


def area_of_core(cfg, tech: TechTable = DEFAULT_TECH, ucode_words: int | None = None) -> dict:
    """Area in mm^2 of one core, by block, and ``pe``: the area of one PE.

    ``ucode_words``: the microcode store's size in instructions (default
    ``cfg.ucode_depth``; pass the words a program needs to size the store from it).
    ``dma`` (a core with DRAM): the engine, plus its ``dma_queue - 1`` queued
    descriptors (:func:`arch.isa.dma_descriptor_bits` each) at the register file's area
    per bit. ``ring`` (a core of a chip): the receive FIFO, ``ring_fifo_depth`` beats of
    ``nr`` lanes, at the register file's area per bit (the links are wires).
    ``pe`` is one PE's area, not a block: the core is the sum of the other entries
    (:func:`core_area`).
    """
    from arch.isa import dma_descriptor_bits, instr_layout

    w = cfg.fmt.width
    pe = {"fpu": _fmt_entry(tech, "fpu_area_mm2", cfg.fmt.name),
          "sram": tech.local_sram_area_mm2_per_16kib * cfg.pe_sram_bytes / 16384,
          "rf": tech.rf_area_mm2_per_16x16b * (cfg.n_regs * w) / 256,
          "pe_logic": tech.pe_logic_area_mm2}
    ucode_bits = _ucode_words(cfg, ucode_words) * instr_layout(cfg).size
    n = cfg.nr * cfg.nr
    out = {k: n * v for k, v in pe.items()}
    out["ucode"] = tech.ucode_area_mm2_per_16kib * ucode_bits / (16384 * 8)
    if cfg.spad_kib:     # the off-core scratchpad, scaled linearly from the 512 KB figure
        out["spad"] = tech.spad_area_mm2_per_512kib * cfg.spad_kib / 512
    if cfg.dram_mib:     # the DMA engine (the DRAM itself is off chip) and its queue's flip-flops
        queue_bits = (cfg.dma_queue - 1) * dma_descriptor_bits(cfg)
        out["dma"] = tech.dma_area_mm2 + queue_bits * tech.rf_area_mm2_per_16x16b / 256
    if cfg.cores > 1:
        fifo_bits = cfg.ring_fifo_depth * cfg.nr * w
        out["ring"] = fifo_bits * tech.rf_area_mm2_per_16x16b / 256
    out["pe"] = sum(pe.values())
    return out


def core_area(cfg, tech: TechTable = DEFAULT_TECH, ucode_words: int | None = None) -> float:
    """One core's area in mm^2: the blocks of :func:`area_of_core` (not its ``pe``)."""
    return sum(v for k, v in area_of_core(cfg, tech, ucode_words).items() if k != "pe")


@dataclass
class Report:
    """Figures of one run. Energies in pJ, power in W, area in mm^2."""

    config: dict
    tech: str
    cycles: int
    seconds: float
    pes: int
    cores: int
    fma: int
    flops: int
    flops_source: str
    utilization: float          #: FPU issues / (cycles x PEs)
    mac_utilization: float      #: useful MACs (flops / 2) / (cycles x PEs)
    gflops: float
    energy_pj: dict
    watts: float                #: everything counted
    watts_compared: float       #: the compared scope
    gflops_per_w_compared: float
    gflops_per_w_all: float
    pj_per_flop: dict
    area_mm2: dict
    gflops_per_mm2: float
    convention: dict
    geometry: dict
    counters: dict = field(default_factory=dict, repr=False)   #: the run's counters (summed over cores)

    @property
    def memory_over_fpu(self) -> float:
        """The reference design's energy split: memory (SRAM + scratchpad) over FPU."""
        fpu = self.energy_pj["fpu"]
        return sum(self.energy_pj[k] for k in MEMORY) / fpu if fpu else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["memory_over_fpu"] = self.memory_over_fpu
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        conv = self.convention
        lines = [
            f"cycles               {self.cycles:>14,}   ({self.seconds * 1e6:.3f} us at {self.config['clock_mhz']:.0f} MHz)",
            f"PEs                  {self.pes:>14}   ({self.cores} core{'s' if self.cores > 1 else ''})",
            f"FPU issues           {self.fma:>14,}",
            f"FLOPs                {self.flops:>14,}   ({self.flops_source})",
            f"MAC utilization      {self.mac_utilization * 100:>13.2f}%   (useful MACs = FLOPs / 2)",
            f"FPU issue rate       {self.utilization * 100:>13.2f}%   (FPU issues, reduction adds included)",
            f"GFLOPS               {self.gflops:>14.2f}",
            f"GFLOPS/W compared    {self.gflops_per_w_compared:>14.1f}   ({' + '.join(COMPARED)}; "
            f"{self.watts_compared:.4g} W)",
            f"GFLOPS/W everything  {self.gflops_per_w_all:>14.1f}   (+ {' + '.join(EVERYTHING[len(COMPARED):])}; "
            f"{self.watts:.4g} W)",
            f"memory / FPU energy  {self.memory_over_fpu:>14.2f}   (SRAM + scratchpad over FPU)",
            f"convention           FPU {conv['fpu_pj_per_flop']} pJ per FLOP, {conv['flops_per_fpu_issue']:g} FLOPs "
            f"per FPU issue; leakage {conv['leakage_mw_per_mm2_logic']:g} / {conv['leakage_mw_per_mm2_sram']:g} "
            f"mW/mm^2 (logic / SRAM)",
            f"area                 {self.area_mm2['total']:>14.3f} mm^2   ({self.gflops_per_mm2:.2f} GFLOPS/mm^2)",
            "",
            f"{'energy':<12} {'pJ':>16} {'pJ/FLOP':>10} {'share':>8}  scope",
        ]
        total = sum(self.energy_pj.values()) or 1.0
        for k, v in self.energy_pj.items():
            lines.append(f"{k:<12} {v:>16.1f} {self.pj_per_flop[k]:>10.3f} {v / total * 100:>7.1f}%  "
                         f"{'compared' if k in COMPARED else 'everything'}")
        lines.append(f"{'total':<12} {total:>16.1f} {self.pj_per_flop['total']:>10.3f}")
        lines += ["", f"{'area':<12} {'mm^2':>16} {'share':>8}"]
        for k, v in self.area_mm2.items():
            if k != "total":
                lines.append(f"{k:<12} {v:>16.3f} {v / self.area_mm2['total'] * 100:>7.1f}%")
        lines.append(f"{'total':<12} {self.area_mm2['total']:>16.3f}")
        return "\n".join(lines)


def report_from_counters(cfg, counters: dict, *, tech: TechTable = DEFAULT_TECH, flops: int | None = None,
                         n_cores: int = 1, spad_accesses: int = 0, ucode_words: int | None = None) -> Report:
    """Turn one run's counters into a :class:`Report`.

    Parameters
    ----------
    cfg : ArchConfig
    counters : dict
        Counter name -> value, names of :func:`rtl.perf_counters.counter_names` (for a
        chip: the sum over cores, with ``cycles`` the chip's cycle count).
    flops : int, optional
        FLOPs of the workload's mathematics (e.g. ``2*m*n`` for a GEMV). Default: two
        per FPU issue.
    n_cores : int
        Cores the counters cover (for PE count, area and leakage).
    spad_accesses : int
        Extra off-core scratchpad accesses of fmt-width words, beside the counters'
        ``spad_rd_beats`` / ``spad_wr_beats`` (beats of ``nr`` words each).
    ucode_words : int, optional
        Microcode store size in instructions for its area, leakage and fetch energy
        (default ``cfg.ucode_depth``).
    """
    from arch.microop import uop_layout
    from arch.isa import instr_layout

    missing = [k for k in ("cycles", "instructions", "mv", "mem_a_rd", "mem_a_wr", "mem_b_rd",
                           "mem_b_wr", "rf_rd", "rf_wr") if k not in counters]
    if missing:
        raise InputError(f"counters are missing {missing}")
    if isinstance(n_cores, bool) or not isinstance(n_cores, int) or n_cores < 1:
        raise InputError(f"n_cores must be a positive integer, got {n_cores!r}")
    bad = [k for k, v in counters.items() if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0]
    if bad:
        raise InputError(f"counters must be non-negative integers: {bad[:3]}")
    w = cfg.fmt.width
    scale = w / 16
    nr = cfg.nr
    pes = nr * nr * n_cores
    cycles = int(counters["cycles"])
    seconds = cycles / (cfg.clock_mhz * 1e6)
    fma = sum(int(v) for k, v in counters.items() if k.startswith("fma["))
    if flops is None:
        flops, flops_source = int(round(tech.flops_per_fpu_issue * fma)), f"{tech.flops_per_fpu_issue:g} per FPU issue"
    else:
        if isinstance(flops, bool) or not isinstance(flops, numbers.Integral) or flops < 0:
            raise InputError(f"flops must be a non-negative integer, got {flops!r}")
        flops_source = "workload mathematics"
    area = area_of_core(cfg, tech, ucode_words)
    pitch = math.sqrt(area["pe"])
    bus_len = nr * pitch
    acc_a = int(counters["mem_a_rd"]) + int(counters["mem_a_wr"])
    acc_b = int(counters["mem_b_rd"]) + int(counters["mem_b_wr"])
    rf_acc = int(counters["rf_rd"]) + int(counters["rf_wr"])
    bus_hops = sum(int(v) for k, v in counters.items() if k.startswith(("row_hops[", "col_hops[")))
    instr_bits = instr_layout(cfg).size
    uop_bits = uop_layout(*cfg.uop_key).size
    instrs = int(counters["instructions"])
    # micro-op broadcast: if the run counted toggled micro-op bits use them, else assume
    # a fraction of the bits switch
    toggles = counters.get("uop_toggles")
    uop_bit_events = int(toggles) if toggles is not None else instrs * uop_bits * tech.uop_switching_fraction
    fpu_pj_flop = _fmt_entry(tech, "fpu_pj_per_flop", cfg.fmt.name)
    energy = {
        "fpu": fma * tech.flops_per_fpu_issue * fpu_pj_flop,
        "sram": (acc_a * sram_pj_per_access(cfg, "a", tech) + acc_b * sram_pj_per_access(cfg, "b", tech)),
        # a scratchpad beat is nr words of width w: nr * w / 16 accesses of 16 bits
        "spad": (spad_accesses + nr * (int(counters.get("spad_rd_beats", 0)) + int(counters.get("spad_wr_beats", 0))))
        * tech.spad_pj_per_16b * scale,
        "bus": bus_hops * w * pitch * tech.wire_pj_per_bit_mm,
        "rf": rf_acc * tech.rf_pj_per_16b * scale,
        # ring links: a beat of nr lanes crosses one core pitch (the 2 x C ring is folded,
        # so every hop, the wrap included, joins neighbouring cores); the receive FIFO is
        # written and read once per lane (register-file energy)
        "ring": int(counters.get("ring_out_beats", 0)) * nr * w * bus_len * tech.wire_pj_per_bit_mm
        + int(counters.get("ring_in_beats", 0)) * nr * 2 * tech.rf_pj_per_16b * scale,
        # microcode fetch, and the words the host's LOADs write (``ucode_wr_words``, a
        # count the sessions report: the hardware has no counter for it) at the same
        # per-bit access energy; the LOAD beats' host link is not modelled
        "control": (instrs + int(counters.get("ucode_wr_words", 0))) * instr_bits
        * ucode_pj_per_bit(cfg, tech, ucode_words)
        + uop_bit_events * tech.uop_wire_core_sides * bus_len * tech.wire_pj_per_bit_mm,
    }
    blocks = {k: v for k, v in area.items() if k != "pe"}
    total_area = n_cores * sum(blocks.values())
    leak_mw = n_cores * (tech.leakage_mw_per_mm2_logic * sum(blocks.get(k, 0.0) for k in LOGIC_BLOCKS)
                         + tech.leakage_mw_per_mm2_sram * sum(blocks.get(k, 0.0) for k in SRAM_BLOCKS))
    energy["leakage"] = leak_mw * 1e-3 * seconds * 1e12
    if cfg.dram_mib:     # external DRAM: every beat moved, nr * w / 64 accesses of 64 bits (not compared)
        energy["dram"] = ((int(counters.get("dram_rd_beats", 0)) + int(counters.get("dram_wr_beats", 0)))
                          * nr * w / 64 * tech.dram_pj_per_64b)
    assert tuple(energy) == EVERYTHING + (("dram",) if cfg.dram_mib else ())
    total_pj = sum(energy.values())
    compared_pj = sum(energy[k] for k in COMPARED)
    gflops = flops / seconds / 1e9 if seconds else 0.0
    pj_per_flop = {k: (v / flops if flops else 0.0) for k, v in energy.items()}
    pj_per_flop["total"] = total_pj / flops if flops else 0.0
    area_out = {k: n_cores * v for k, v in blocks.items()}
    area_out["total"] = total_area
    return Report(
        config=cfg.to_dict(), tech=tech.name, cycles=cycles, seconds=seconds, pes=pes, cores=n_cores, fma=fma,
        flops=int(flops), flops_source=flops_source,
        utilization=fma / (cycles * pes) if cycles else 0.0,
        mac_utilization=(flops / 2) / (cycles * pes) if cycles else 0.0, gflops=gflops, energy_pj=energy,
        watts=total_pj * 1e-12 / seconds if seconds else 0.0,
        watts_compared=compared_pj * 1e-12 / seconds if seconds else 0.0,
        gflops_per_w_compared=(flops / compared_pj * 1e3) if compared_pj else 0.0,
        gflops_per_w_all=(flops / total_pj * 1e3) if total_pj else 0.0,
        pj_per_flop=pj_per_flop, area_mm2=area_out,
        gflops_per_mm2=gflops / total_area if total_area else 0.0,
        convention={"fpu_pj_per_flop": fpu_pj_flop, "flops_per_fpu_issue": tech.flops_per_fpu_issue,
                    "compared_scope": list(COMPARED), "everything": list(EVERYTHING),
                    "leakage_mw_per_mm2_logic": tech.leakage_mw_per_mm2_logic,
                    "leakage_mw_per_mm2_sram": tech.leakage_mw_per_mm2_sram,
                    "ucode_words": _ucode_words(cfg, ucode_words)},
        geometry={"pe_pitch_mm": pitch, "bus_length_mm": bus_len, "instr_bits": instr_bits,
                  "uop_bits": uop_bits},
        counters={k: int(v) for k, v in counters.items()},
    )


#: the ``format`` tag of a run record (:func:`run_record`)
RUN_FORMAT = "caterpillar-run/1"


def run_record(rep: Report) -> dict:
    """What ``caterpillar report`` needs to report a run again: the full configuration,
    the cores covered, the counters (summed over cores) and the FLOPs."""
    return {"format": RUN_FORMAT, "config": rep.config, "n_cores": rep.cores, "counters": rep.counters,
            "flops": rep.flops if rep.flops_source == "workload mathematics" else None,
            "ucode_words": rep.convention["ucode_words"]}


def read_run_record(d, where: str = "run") -> dict:
    """Validate a run record (a dict, e.g. parsed JSON); one-line ``ValueError`` naming
    what is wrong. A dict with a ``run`` entry (``caterpillar train --json``) is read
    through it."""
    if isinstance(d, dict) and isinstance(d.get("run"), dict) and "counters" not in d:
        d = d["run"]
    if not isinstance(d, dict):
        raise InputError(f"{where}: a run record is a JSON object, got a {type(d).__name__}")
    if "counters" not in d:
        raise InputError(f"{where}: no 'counters' (write one with `caterpillar run --json` or `train --json`)")
    ctr = d["counters"]
    if not isinstance(ctr, dict) or not ctr:
        raise InputError(f"{where}: 'counters' must be an object of counter names to integers")
    bad = [k for k, v in ctr.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad:
        raise InputError(f"{where}: counter {bad[0]!r} is not a non-negative integer ({ctr[bad[0]]!r})")
    n = d.get("n_cores", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"{where}: 'n_cores' must be a positive integer, got {n!r}")
    flops = d.get("flops")
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int) or flops < 0):
        raise InputError(f"{where}: 'flops' must be a non-negative integer, got {flops!r}")
    words = d.get("ucode_words")
    if words is not None and (isinstance(words, bool) or not isinstance(words, int) or words < 1):
        raise InputError(f"{where}: 'ucode_words' must be a positive integer, got {words!r}")
    cfg = d.get("config")
    if cfg is not None and not isinstance(cfg, dict):
        raise InputError(f"{where}: 'config' must be an object of ArchConfig fields")
    return {"config": cfg, "counters": ctr, "n_cores": n, "flops": flops, "ucode_words": words}


def scope_note(tech: TechTable = DEFAULT_TECH, fmt: str = "binary16") -> str:
    """One sentence stating the energy convention, for tables and benchmark notes."""
    return (f"GFLOPS/W 'compared' = {' + '.join(COMPARED)} (the reference design's FPU and memory energies, and "
            f"the bus energy our dataflow spends in place of SRAM reads); 'everything' adds "
            f"{', '.join(EVERYTHING[len(COMPARED):])}; FPU {_fmt_entry(tech, 'fpu_pj_per_flop', fmt):g} pJ per FLOP, "
            f"{tech.flops_per_fpu_issue:g} FLOPs per FPU issue, leakage {tech.leakage_mw_per_mm2_logic:g} / "
            f"{tech.leakage_mw_per_mm2_sram:g} mW/mm^2 (logic / SRAM) (docs/power.md)")


def plot_breakdown(reports: dict, path, title: str | None = None) -> None:
    """Save a PNG: pJ per FLOP by energy category, one horizontal stacked bar per named
    report, the compared scope's categories first (solid) and the rest hatched, each
    segment of at least 6.5 % of the longest bar labelled with its value, and each bar's
    GFLOPS/W in both scopes at its end. Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arch.files import atomic_savefig

    labels = list(reports)
    reps = [reports[k] for k in labels]
    cats = [k for k in EVERYTHING if any(r.pj_per_flop[k] for r in reps)]
    longest = max(r.pj_per_flop["total"] for r in reps) or 1.0
    fig, ax = plt.subplots(figsize=(11, 2.4 + 0.75 * len(labels)))
    colors = plt.get_cmap("tab10").colors
    left = [0.0] * len(labels)
    for i, cat in enumerate(cats):
        vals = [r.pj_per_flop[cat] for r in reps]
        bars = ax.barh(range(len(labels)), vals, left=left, color=colors[i % 10],
                       hatch=None if cat in COMPARED else "//", edgecolor="white",
                       label=f"{cat} ({'compared' if cat in COMPARED else 'everything'})")
        for j, (b, v) in enumerate(zip(bars, vals)):
            if v >= 0.065 * longest:
                ax.text(left[j] + v / 2, j, f"{v:.2f}", ha="center", va="center", fontsize=7, color="black")
        left = [a + v for a, v in zip(left, vals)]
    for j, r in enumerate(reps):
        cmp = sum(r.pj_per_flop[k] for k in COMPARED)
        ax.plot([cmp, cmp], [j - 0.42, j + 0.42], color="black", lw=1.5)
        ax.text(left[j] + 0.02 * longest, j, f"{r.gflops_per_w_compared:.0f} GFLOPS/W compared\n"
                f"{r.gflops_per_w_all:.0f} everything, {r.mac_utilization * 100:.0f}% MAC util.",
                va="center", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, longest * 1.45)
    ax.set_xlabel("energy per FLOP (pJ); black tick: end of the compared scope")
    first = reps[0]
    ax.set_title(title or f"Energy per FLOP by category ({first.tech}, {first.config['fmt']}, "
                 f"FPU {first.convention['fpu_pj_per_flop']} pJ/FLOP)", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, frameon=False)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)


def partition_energy(cfg, jobs, makespan: int, *, tech: TechTable = DEFAULT_TECH) -> dict:
    """Energy of a partitioned chip (``docs/chip.md``, "Partitions") attributed per job.

    ``jobs``: per job ``(counters, n_cores, flops)``, its counters summed over its group's
    cores with ``cycles`` its own run time. Rule: a job is charged its cores' dynamic
    energy and the leakage of its ``n_cores`` cores over its run time
    (:func:`report_from_counters` with ``n_cores``); the chip's leakage over cores and
    time no job holds (``cfg.cores x makespan`` minus every job's ``n_cores x cycles``:
    idle cores, groups finished early) is ``idle_leakage_pj``, in the total. Returns
    ``{"jobs": [Report...], "idle_leakage_pj", "total_pj", "flops", "gflops_per_w"}``."""
    from arch.counters import counter_names

    zero = {n: 0 for n in counter_names(cfg)}
    zero["cycles"] = 1_000_000
    leak = report_from_counters(cfg, zero, tech=tech, n_cores=1).energy_pj["leakage"] / 1e6
    reps = [report_from_counters(cfg, c, tech=tech, flops=f, n_cores=k) for c, k, f in jobs]
    held = sum(k * int(c["cycles"]) for c, k, _ in jobs)
    idle = leak * max(0, cfg.cores * int(makespan) - held)
    total = sum(sum(r.energy_pj.values()) for r in reps) + idle
    flops = sum(int(f) for _, _, f in jobs)
    return {"jobs": reps, "idle_leakage_pj": idle, "total_pj": total, "flops": flops,
            "gflops_per_w": flops / total * 1e3 if total else 0.0}
