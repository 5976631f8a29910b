"""The power and area report of a heterogeneous chip (:class:`arch.hetero.HeteroConfig`).

Every group is reported by :func:`sim.power.report_from_counters` with its own kind's
configuration (its counters summed over its cores, the chip's cycles, its core count for
area and leakage), so every counter is charged at its core's kind's per-event energy;
the chip's figures are the groups' sums plus the ring crossings (``docs/power.md``,
"Heterogeneous chips"). A homogeneous chip's report is unchanged: this module only adds.

Crossing energy, per sender beat through a crossing (the sender's ``ring_out_beats``):

* the gearbox register (collect register or split queue) is written and read once per
  lane, at the ring receive FIFO's convention (:mod:`sim.power`: two register-file
  accesses per lane, ``rf_pj_per_16b x width / 16``, at the receiver's width);
* where the formats differ, one conversion per lane, charged as an FP add of the wider
  format (:data:`CONVERT_PJ`; a conversion is an add's rounding step without its
  alignment and carry-propagate adder, so this overstates it);
* no extra wire: the hop's wire is the sender's ring beat, already in ``ring`` (a
  collected or split beat carries the same bits over the same core pitch).

Crossing area (:func:`crossing_area_mm2`), from the per-block areas the cores use
(``sim/tech/45nm.json``):

* ``registers``: the state bits of :class:`rtl.ring_crossing.RingCrossing`
  (:func:`crossing_register_bits`: the collect and output registers, or the split
  queue's beats and pointers, and the gearbox counters) at the register file's area per
  bit, ``rf_area_mm2_per_16x16b / 256`` (256 flip-flops with read muxes, NanGate 45 nm
  DFF_X1);
* ``converters``: where the formats differ, one per sender lane, each at the FPU area
  (``fpu_area_mm2``) of the larger of the two kinds' FPUs: a fused multiply-add's area
  for a conversion (an add's rounding step, without the multiplier, the alignment and
  the adder), so this overstates it.

The crossings' area is in the chip's ``area_mm2`` (``crossings``, and in ``total``) and
leaks at the logic density over the chip's time (in ``leakage``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sim.power import COMPARED, DEFAULT_TECH, TechTable, report_from_counters

__all__ = ["HeteroReport", "hetero_report", "CONVERT_PJ", "crossing_pj_per_beat", "crossing_register_bits",
           "crossing_area_mm2", "crossings_area_mm2"]

#: pJ per converted lane, by the wider format's width in bits: an FP add at 45 nm,
#: 0.4 pJ (16 bits) and 0.9 pJ (32 bits) (Horowitz, "Computing's energy problem",
#: ISSCC 2014)
CONVERT_PJ = {16: 0.4, 32: 0.9}


def crossing_pj_per_beat(x, tech: TechTable = DEFAULT_TECH) -> float:
    """Energy in pJ of one sender beat through crossing ``x`` (:class:`arch.hetero.Crossing`)."""
    wb = x.b.fmt.width
    pj = x.a.nr * 2 * tech.rf_pj_per_16b * wb / 16
    if x.a.fmt != x.b.fmt:
        wide = max(x.a.fmt.width, wb)
        pj += x.a.nr * CONVERT_PJ[16 if wide <= 16 else 32]
    return pj


def crossing_register_bits(x) -> int:
    """State bits of crossing ``x``'s RTL (:class:`rtl.ring_crossing.RingCrossing`).
    Collecting ``k`` sender beats (``k = nr_b / nr_a``, 1 for a format change only): the
    collect register of ``(k - 1) nr_a`` lanes, the output register of ``nr_b`` lanes
    and its valid bit, the beat counter. Splitting (``k = nr_a / nr_b``): the queue of
    ``ceil(depth / k)`` sender beats (``nr_a`` lanes at the receiver's width) with its
    read and write pointers and level, the slice counter. Lanes are ``width_b`` bits
    (converted before they are stored)."""
    a, b, k = x.a, x.b, x.ratio
    wb = b.fmt.width
    count = (k - 1).bit_length()
    if x.widen:
        return (k - 1) * a.nr * wb + b.nr * wb + 1 + count
    dq = -(-a.ring_fifo_depth // k)
    return dq * a.nr * wb + 2 * (dq - 1).bit_length() + dq.bit_length() + count


def crossing_area_mm2(x, tech: TechTable = DEFAULT_TECH) -> dict:
    """Area in mm^2 of crossing ``x``: ``registers`` (:func:`crossing_register_bits` at
    the register file's area per bit), ``converters`` (``nr_a`` lanes where the formats
    differ, each at the larger kind's FPU area) and ``total``."""
    regs = crossing_register_bits(x) * tech.rf_area_mm2_per_16x16b / 256
    conv = 0.0
    if x.a.fmt != x.b.fmt:
        conv = x.a.nr * max(tech.fpu_area_mm2[x.a.fmt.name], tech.fpu_area_mm2[x.b.fmt.name])
    return {"registers": regs, "converters": conv, "total": regs + conv}


def crossings_area_mm2(hcfg, tech: TechTable = DEFAULT_TECH) -> float:
    """Area in mm^2 of all the crossings of the chip ``hcfg``."""
    return sum(crossing_area_mm2(x, tech)["total"] for x in hcfg.crossings)


@dataclass
class HeteroReport:
    """Figures of one run of a heterogeneous chip. Energies in pJ, power in W, area in
    mm^2; ``groups``: each group's :class:`sim.power.Report` as a dict."""

    cycles: int
    seconds: float
    pes: int
    cores: int
    flops: int
    gflops: float
    energy_pj: dict             #: by category, summed over the groups, plus ``crossing``
    crossing_pj: list           #: per crossing: src, dst, beats, pJ, area_mm2
    watts: float
    gflops_per_w_compared: float
    gflops_per_w_all: float
    area_mm2: dict              #: per group (``group0`` ...), ``crossings`` and ``total``
    gflops_per_mm2: float
    groups: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def table(self) -> str:
        lines = [f"cycles {self.cycles:,}; {self.cores} cores, {self.pes} PEs; GFLOPS {self.gflops:.2f}",
                 f"GFLOPS/W compared {self.gflops_per_w_compared:.1f}, everything {self.gflops_per_w_all:.1f} "
                 f"({self.watts:.4g} W)",
                 f"area {self.area_mm2['total']:.3f} mm^2 ({self.gflops_per_mm2:.2f} GFLOPS/mm^2)"]
        for k, v in self.energy_pj.items():
            lines.append(f"  {k:<10} {v:>16.1f} pJ")
        for i, g in enumerate(self.groups):
            c = g["config"]
            lines.append(f"  group {i}: {g['cores']} x {c['nr']}x{c['nr']} {c['fmt']}: "
                         f"{sum(g['energy_pj'].values()):.1f} pJ, {g['area_mm2']['total']:.3f} mm^2")
        if self.crossing_pj:
            regs = sum(x["area_mm2"]["registers"] for x in self.crossing_pj)
            conv = sum(x["area_mm2"]["converters"] for x in self.crossing_pj)
            lines.append(f"  crossings: {len(self.crossing_pj)}: {self.energy_pj['crossing']:.1f} pJ, "
                         f"{self.area_mm2['crossings']:.4f} mm^2 (registers {regs:.4f}, converters {conv:.4f})")
        return "\n".join(lines)


def hetero_report(hcfg, core_counters: list, cycles: int, *, flops: int | None = None,
                  tech: TechTable = DEFAULT_TECH) -> HeteroReport:
    """The report of one run: ``core_counters[k]`` core ``k``'s counters, ``cycles`` the
    chip's; ``flops``: the workload's FLOPs (default: two per FPU issue, summed over the
    kinds)."""
    if len(core_counters) != hcfg.cores:
        raise ValueError(f"counters of {len(core_counters)} cores for a chip of {hcfg.cores}")
    reps = []
    k0 = 0
    for g, cfg in zip(hcfg.groups, hcfg.group_cfgs):
        tot: dict = {}
        for c in core_counters[k0:k0 + g.count]:
            for name, v in c.items():
                tot[name] = tot.get(name, 0) + int(v)
        tot["cycles"] = int(cycles)
        reps.append(report_from_counters(cfg, tot, tech=tech, n_cores=g.count))
        k0 += g.count
    energy: dict = {}
    for r in reps:
        for name, v in r.energy_pj.items():
            energy[name] = energy.get(name, 0.0) + v
    xings = []
    for x in hcfg.crossings:
        beats = int(core_counters[x.src].get("ring_out_beats", 0))
        xings.append({"src": x.src, "dst": x.dst, "beats": beats, "pj": beats * crossing_pj_per_beat(x, tech),
                      "area_mm2": crossing_area_mm2(x, tech)})
    energy["crossing"] = sum(x["pj"] for x in xings)
    seconds = reps[0].seconds
    x_area = sum(x["area_mm2"]["total"] for x in xings)
    energy["leakage"] += x_area * tech.leakage_mw_per_mm2_logic * 1e-3 * seconds * 1e12
    if flops is None:
        flops = sum(r.flops for r in reps)
    total = sum(energy.values())
    compared = sum(energy[k] for k in COMPARED)
    area = {f"group{i}": r.area_mm2["total"] for i, r in enumerate(reps)}
    area["crossings"] = x_area
    area["total"] = sum(area.values())
    gflops = flops / seconds / 1e9 if seconds else 0.0
    return HeteroReport(
        cycles=int(cycles), seconds=seconds, pes=sum(r.pes for r in reps), cores=hcfg.cores, flops=int(flops),
        gflops=gflops, energy_pj=energy, crossing_pj=xings, watts=total * 1e-12 / seconds if seconds else 0.0,
        gflops_per_w_compared=flops / compared * 1e3 if compared else 0.0,
        gflops_per_w_all=flops / total * 1e3 if total else 0.0, area_mm2=area,
        gflops_per_mm2=gflops / area["total"] if area["total"] else 0.0, groups=[r.to_dict() for r in reps])
