"""Power and area model: performance counters of a run -> GFLOPS, watts, GFLOPS/W, mm^2.

Every figure is computed from the counters of one run (RTL or fast model; the counter
set is :func:`rtl.perf_counters.counter_names`) and a technology table
(:data:`DEFAULT_TECH`, ``sim/tech/45nm.json``; users can pass their own JSON file).
Nothing is estimated from the program text.

Energy categories
-----------------
``fpu``      FMA issues x energy per multiply-add of the format
``sram``     PE SRAM reads + writes x energy per access (scaled by width and bank size)
``rf``       register-file reads + writes x energy per access (scaled by width)
``bus``      row/column bus activity in PE pitches (hops) x width x pitch x wire energy per bit-mm
``ring``     ring beats x nr lanes x width x core pitch x wire energy per bit-mm, plus the
             receive FIFO (two register-file accesses per lane)
``control``  microcode fetch (instruction bits) + micro-op broadcast over the core
``spad``     off-core scratchpad beats read + written (``spad_rd_beats + spad_wr_beats``)
             x nr lanes x energy per 16-bit access scaled by width
``leakage``  leakage power x area x time (0 by default, as in the reference design)

The reference design reports FPU and SRAM energy (broadcast "left out as negligible").
:attr:`Report.gflops_per_w_reference_scope` uses that same scope (fpu + sram + spad), so
comparisons with its 177-211 GFLOPS/W are like for like; :attr:`Report.gflops_per_w`
includes every category.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["TechTable", "TechError", "load_tech", "DEFAULT_TECH", "Report", "report_from_counters",
           "area_of_core", "sram_pj_per_access", "plot_breakdown"]

TECH_DIR = Path(__file__).resolve().parent / "tech"
_REQUIRED = {
    "fpu_pj_per_fma": dict, "fpu_area_mm2": dict, "local_sram_pj_per_16b": dict,
    "local_sram_area_mm2_per_16kib": dict, "spad_pj_per_16b": dict, "spad_area_mm2_per_512kib": dict,
    "rf_pj_per_16b": dict, "rf_area_mm2_per_16x16b": dict, "wire_pj_per_bit_mm": dict,
    "ucode_pj_per_bit": dict, "ucode_area_mm2_per_16kib": dict, "leakage_mw_per_mm2": dict,
    "local_sram_ref_bank_bytes": dict, "local_sram_size_exponent": dict,
}


class TechError(ValueError):
    """A technology table is malformed."""


@dataclass(frozen=True)
class TechTable:
    """Validated technology numbers (values only; sources stay in the JSON file)."""

    name: str
    node_nm: float
    fpu_pj_per_fma: dict
    fpu_area_mm2: dict
    local_sram_pj_per_16b: float
    local_sram_area_mm2_per_16kib: float
    spad_pj_per_16b: float
    spad_area_mm2_per_512kib: float
    rf_pj_per_16b: float
    rf_area_mm2_per_16x16b: float
    wire_pj_per_bit_mm: float
    ucode_pj_per_bit: float
    ucode_area_mm2_per_16kib: float
    leakage_mw_per_mm2: float
    local_sram_ref_bank_bytes: float
    local_sram_size_exponent: float
    sources: dict = field(default_factory=dict, compare=False)


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
        d = json.loads(p.read_text())
    except FileNotFoundError:
        raise TechError(f"technology file {p} does not exist") from None
    except json.JSONDecodeError as e:
        raise TechError(f"technology file {p} is not valid JSON: {e}") from None
    missing = sorted(set(_REQUIRED) - set(d))
    if missing:
        raise TechError(f"{p}: missing entries {missing}")
    vals, sources = {}, {}
    for key in _REQUIRED:
        entry = d[key]
        if key in ("fpu_pj_per_fma", "fpu_area_mm2"):
            if not isinstance(entry, dict) or not entry:
                raise TechError(f"{p}: '{key}' must map format names to numbers")
            vals[key] = {fmt: _num(p, f"{key}.{fmt}", e) for fmt, e in entry.items()}
            sources[key] = {fmt: e["source"] for fmt, e in entry.items()}
        else:
            vals[key] = _num(p, key, entry)
            sources[key] = entry["source"]
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


def area_of_core(cfg, tech: TechTable = DEFAULT_TECH) -> dict:
    """Area in mm^2 of one core, by block."""
    w = cfg.fmt.width
    pe_fpu = _fmt_entry(tech, "fpu_area_mm2", cfg.fmt.name)
    pe_sram = tech.local_sram_area_mm2_per_16kib * cfg.pe_sram_bytes / 16384
    pe_rf = tech.rf_area_mm2_per_16x16b * (cfg.n_regs * w) / 256
    from sw.isa import instr_layout

    ucode_bits = cfg.ucode_depth * instr_layout(cfg).size
    ucode = tech.ucode_area_mm2_per_16kib * ucode_bits / (16384 * 8)
    n = cfg.nr * cfg.nr
    out = {"fpu": n * pe_fpu, "sram": n * pe_sram, "rf": n * pe_rf, "ucode": ucode,
           "pe": pe_fpu + pe_sram + pe_rf}
    if cfg.spad_kib:     # the off-core scratchpad, scaled linearly from the 512 KB figure
        out["spad"] = tech.spad_area_mm2_per_512kib * cfg.spad_kib / 512
    return out


@dataclass
class Report:
    """Figures of one run. Energies in pJ, power in W, area in mm^2."""

    config: dict
    tech: str
    cycles: int
    seconds: float
    pes: int
    fma: int
    flops: int
    flops_source: str
    utilization: float          #: FPU issues / (cycles x PEs)
    mac_utilization: float      #: useful MACs (flops / 2) / (cycles x PEs)
    gflops: float
    energy_pj: dict
    watts: float
    gflops_per_w: float
    gflops_per_w_reference_scope: float
    pj_per_flop: dict
    area_mm2: dict
    gflops_per_mm2: float
    geometry: dict

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        lines = [
            f"cycles               {self.cycles:>14,}   ({self.seconds * 1e6:.3f} us at {self.config['clock_mhz']:.0f} MHz)",
            f"PEs                  {self.pes:>14}",
            f"FMA issues           {self.fma:>14,}",
            f"FLOPs                {self.flops:>14,}   ({self.flops_source})",
            f"MAC utilization      {self.mac_utilization * 100:>13.2f}%   (useful MACs = FLOPs / 2)",
            f"FPU issue rate       {self.utilization * 100:>13.2f}%   (FMA issues, reduction adds included)",
            f"GFLOPS               {self.gflops:>14.2f}",
            f"power                {self.watts:>14.4f} W",
            f"GFLOPS/W             {self.gflops_per_w:>14.1f}   (all categories)",
            f"GFLOPS/W, ref. scope {self.gflops_per_w_reference_scope:>14.1f}   (FPU + SRAM + scratchpad, as the reference design)",
            f"area                 {self.area_mm2['total']:>14.4f} mm^2   ({self.gflops_per_mm2:.1f} GFLOPS/mm^2)",
            "",
            f"{'energy':<12} {'pJ':>14} {'pJ/FLOP':>10} {'share':>8}",
        ]
        total = sum(self.energy_pj.values()) or 1.0
        for k, v in self.energy_pj.items():
            lines.append(f"{k:<12} {v:>14.1f} {self.pj_per_flop[k]:>10.3f} {v / total * 100:>7.1f}%")
        lines.append(f"{'total':<12} {total:>14.1f} {self.pj_per_flop['total']:>10.3f}")
        return "\n".join(lines)


def report_from_counters(cfg, counters: dict, *, tech: TechTable = DEFAULT_TECH, flops: int | None = None,
                         n_cores: int = 1, spad_accesses: int = 0) -> Report:
    """Turn one run's counters into a :class:`Report`.

    Parameters
    ----------
    cfg : ArchConfig
    counters : dict
        Counter name -> value, names of :func:`rtl.perf_counters.counter_names` (for a
        chip: the sum over cores, with ``cycles`` the chip's cycle count).
    flops : int, optional
        FLOPs of the workload's mathematics (e.g. ``2*m*n`` for a GEMV). Default: two
        per FMA issue, the reference design's convention.
    n_cores : int
        Cores the counters cover (for PE count and area).
    spad_accesses : int
        Extra off-core scratchpad accesses of fmt-width words, beside the counters'
        ``spad_rd_beats`` / ``spad_wr_beats`` (beats of ``nr`` words each).
    """
    from sw.isa import instr_layout
    from pe.microop import uop_layout

    missing = [k for k in ("cycles", "instructions", "mv", "mem_a_rd", "mem_a_wr", "mem_b_rd",
                           "mem_b_wr", "rf_rd", "rf_wr") if k not in counters]
    if missing:
        raise ValueError(f"counters are missing {missing}")
    w = cfg.fmt.width
    scale = w / 16
    nr = cfg.nr
    pes = nr * nr * n_cores
    cycles = int(counters["cycles"])
    seconds = cycles / (cfg.clock_mhz * 1e6)
    fma = sum(int(v) for k, v in counters.items() if k.startswith("fma["))
    if flops is None:
        flops, flops_source = 2 * fma, "2 per FMA issue"
    else:
        flops_source = "workload mathematics"
    area = area_of_core(cfg, tech)
    pitch = math.sqrt(area["pe"])
    bus_len = nr * pitch
    acc_a = int(counters["mem_a_rd"]) + int(counters["mem_a_wr"])
    acc_b = int(counters["mem_b_rd"]) + int(counters["mem_b_wr"])
    rf_acc = int(counters["rf_rd"]) + int(counters["rf_wr"])
    bus_hops = sum(int(v) for k, v in counters.items() if k.startswith(("row_hops[", "col_hops[")))
    instr_bits = instr_layout(cfg).size
    uop_bits = uop_layout(cfg.addr_bits, cfg.sel_bits).size
    instrs = int(counters["instructions"])
    # micro-op broadcast: an H-tree over the core, ~ 1.5 x the core side; if the run
    # counted toggled micro-op bits use them, else assume half the bits switch.
    toggles = counters.get("uop_toggles")
    uop_bit_events = int(toggles) if toggles is not None else instrs * uop_bits / 2
    energy = {
        "fpu": fma * _fmt_entry(tech, "fpu_pj_per_fma", cfg.fmt.name),
        "sram": (acc_a * sram_pj_per_access(cfg, "a", tech) + acc_b * sram_pj_per_access(cfg, "b", tech)),
        "rf": rf_acc * tech.rf_pj_per_16b * scale,
        "bus": bus_hops * w * pitch * tech.wire_pj_per_bit_mm,
        "control": instrs * instr_bits * tech.ucode_pj_per_bit
        + uop_bit_events * 1.5 * bus_len * tech.wire_pj_per_bit_mm,
        # a scratchpad beat is nr words of width w: nr * w / 16 accesses of 16 bits
        "spad": (spad_accesses + nr * (int(counters.get("spad_rd_beats", 0)) + int(counters.get("spad_wr_beats", 0))))
        * tech.spad_pj_per_16b * scale,
        # ring links: a beat of nr lanes crosses one core pitch (the 2 x C ring is folded,
        # so every hop, the wrap included, joins neighbouring cores); the receive FIFO is
        # written and read once per lane (register-file energy)
        "ring": int(counters.get("ring_out_beats", 0)) * nr * w * bus_len * tech.wire_pj_per_bit_mm
        + int(counters.get("ring_in_beats", 0)) * nr * 2 * tech.rf_pj_per_16b * scale,
    }
    total_area = n_cores * (area["fpu"] + area["sram"] + area["rf"] + area["ucode"] + area.get("spad", 0.0))
    energy["leakage"] = tech.leakage_mw_per_mm2 * 1e-3 * total_area * seconds * 1e12
    total_pj = sum(energy.values())
    ref_pj = energy["fpu"] + energy["sram"] + energy["spad"]
    watts = total_pj * 1e-12 / seconds if seconds else 0.0
    gflops = flops / seconds / 1e9 if seconds else 0.0
    pj_per_flop = {k: (v / flops if flops else 0.0) for k, v in energy.items()}
    pj_per_flop["total"] = total_pj / flops if flops else 0.0
    area_out = {k: n_cores * v for k, v in area.items() if k != "pe"}
    area_out["total"] = total_area
    return Report(
        config=cfg.to_dict(), tech=tech.name, cycles=cycles, seconds=seconds, pes=pes, fma=fma,
        flops=int(flops), flops_source=flops_source,
        utilization=fma / (cycles * pes) if cycles else 0.0,
        mac_utilization=(flops / 2) / (cycles * pes) if cycles else 0.0, gflops=gflops, energy_pj=energy,
        watts=watts, gflops_per_w=(flops / total_pj * 1e3) if total_pj else 0.0,
        gflops_per_w_reference_scope=(flops / ref_pj * 1e3) if ref_pj else 0.0,
        pj_per_flop=pj_per_flop, area_mm2=area_out,
        gflops_per_mm2=gflops / total_area if total_area else 0.0,
        geometry={"pe_pitch_mm": pitch, "bus_length_mm": bus_len, "instr_bits": instr_bits,
                  "uop_bits": uop_bits},
    )


def plot_breakdown(reports: dict, path) -> None:
    """Save a PNG: pJ per FLOP by energy category, one stacked bar per named report.

    ``reports`` maps a label (e.g. a kernel name) to a :class:`Report`. Written atomically.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(reports)
    cats = [k for k in next(iter(reports.values())).energy_pj if any(r.energy_pj[k] for r in reports.values())]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.4 * len(labels) + 2.5), 4.2))
    bottom = [0.0] * len(labels)
    for cat in cats:
        vals = [reports[lab].pj_per_flop[cat] for lab in labels]
        ax.bar(labels, vals, bottom=bottom, label=cat)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, lab in enumerate(labels):
        r = reports[lab]
        ax.text(i, bottom[i], f"{r.gflops_per_w:.0f} GFLOPS/W\n{r.mac_utilization * 100:.0f}% MAC util.",
                ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("energy per FLOP (pJ)")
    ax.set_ylim(0, max(bottom) * 1.3)
    first = next(iter(reports.values()))
    ax.set_title(f"Energy per FLOP by category\n{first.tech}, {first.config['fmt']}, {first.pes} PEs", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    from sim.harness import atomic_savefig

    atomic_savefig(fig, path, dpi=120)
