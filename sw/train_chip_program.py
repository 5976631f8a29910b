"""The host side of a compiled SGD step across cores (:class:`ChipSGDProgram`): cycle
figures and description, the host programs, running a step, loading and reading back
the weights; :class:`PhaseLog` records the phases of a step for every chip trainer."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from arch.lanes import LaneBeats
from sw.asm import Builder
from sw.host_protocol import steady_reload
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.ring import ring_text
from sw.train import _gaps
from sw.train_alloc import Allocator
from sw.train_chip_map import PanelMap
from sw.train_chip_place import ChipPart
from sw.train_host import HOST_LATENCY_CYCLES, StepResult, host_softmax_grad, mse_loss, one_hot, softmax_ce_loss
from sw.train_ops import breakdown_lines, ops_breakdown
from sw.train_dram import DramPanel, dma_timeline, dram_init, dram_read, dram_traffic, dram_unload_program, tier_lines
from sw.train_paging import spad_image, spad_local
from sw.train_softmax import softmax_const_items
from sw.train_vectors import decode_diag_beats, emit_load_vector, emit_unload_diag, vector_beats, vector_bits
from sw.transfer import decode_unload, emit_load, emit_spad_drain, emit_spad_fill, emit_unload, load_lanes_for

__all__ = ["ChipSGDProgram", "ChipStepResult", "PhaseLog", "load_per_core"]


@dataclass
class ChipStepResult(StepResult):
    #: per phase: (name, "chip" or "host", cycles counted for the step)
    phases: list = field(default_factory=list)
    #: per core: its counters summed over the step's phases (``cycles``: the step's;
    #: ``ucode_wr_words``: microcode words the step's LOADs wrote, when there were any)
    core_counters: list = field(default_factory=list)


class PhaseLog:
    """The phases of one chip step as they run: :meth:`note` each phase's per-core
    results and the cycles the session counted for it, :meth:`result` the
    :class:`ChipStepResult` (every core's counters summed over the phases, ``cycles``
    the step's). With ``session``, the microcode LOADs before a phase (the session's
    ``loads``, :class:`sim.sessions.ChipSession`) are a phase of kind ``"load"`` of
    their own and their words a per-core count ``ucode_wr_words``."""

    def __init__(self, cores: int, session=None):
        self.phases: list = []
        self.per_core = [dict() for _ in range(cores)]
        self.loads = getattr(session, "loads", None)

    def note(self, name, kind, res, cyc):
        """``cyc``: the cycles the session returned for the phase (its LOADs included)."""
        lc = self.loads.last_cycles if self.loads is not None else 0
        if lc:
            self.phases.append((f"load {name}", "load", lc))
            for k, w in enumerate(self.loads.last_per_core):
                if w:
                    self.per_core[k]["ucode_wr_words"] = self.per_core[k].get("ucode_wr_words", 0) + w
        self.phases.append((name, kind, cyc - lc))
        for k, r in enumerate(res):
            for key, v in r.counters.items():
                self.per_core[k][key] = self.per_core[k].get(key, 0) + v

    def result(self, loss, out, host_cycles: int, raw: dict) -> ChipStepResult:
        cyc = sum(c for _, _, c in self.phases)
        for pc in self.per_core:
            pc["cycles"] = cyc
        return ChipStepResult(loss, out, list(self.per_core), cyc, host_cycles, raw,
                              load_cycles=sum(c for _, k, c in self.phases if k == "load"),
                              phases=self.phases, core_counters=self.per_core)


def load_per_core(session, cfg, items: list, name: str) -> None:
    """Host phases writing ``items[k]`` (``(Region, (nr, nr, n) local words)`` pairs)
    into core ``k`` (:func:`sw.transfer.emit_load`), as many per phase as the microcode
    holds."""
    chunk = max(1, (cfg.ucode_depth - 1) // (1 + 3 * cfg.nr))
    for start in range(0, max(len(it) for it in items), chunk):
        imgs, data, built = [], [], {}
        for k in range(cfg.cores):
            part = items[k][start:start + chunk]
            shape = tuple((reg.bank, reg.base, local.shape[2]) for reg, local in part)
            if shape not in built:      # cores loading the same regions share one image
                b = Builder(cfg)
                for j, (bank, base, n) in enumerate(shape):
                    emit_load(b, cfg, bank, base, n, loop=f"w{j}_")
                b.halt()
                built[shape] = b.build().words()
            imgs.append(built[shape])
            data.append(LaneBeats.concat([load_lanes_for(cfg, local) for _, local in part]))
        session.run(imgs, data, f"{name}{start}")


@dataclass
class ChipSGDProgram(PanelMap):
    """A compiled SGD step across the cores (see :mod:`sw.train_chip`)."""

    cfg: object
    mlp: MLP
    wbanks: list
    alloc: Allocator
    P: list                       #: panel rows per layer
    N: list                       #: columns of each layer's panel (n_0, then c p_{l-1})
    parts: dict                   #: "step" (MSE) or "forward"/"backward" (softmax), "predict": [ChipPart]
    images: list                  #: per image, per core: words
    neg_lr: int
    meta: dict = field(default_factory=dict)
    #: host phase -> (image, origin) of its programs (:meth:`_place_host`)
    host_at: dict = field(default_factory=dict)
    #: ``"rows"`` or ``"cols"``: how the output layer is split (:func:`sw.train_chip.chip_shapes`)
    out_map: str = "rows"
    #: softmax_ce: ``"array"`` (core 0, :mod:`sw.softmax`) or ``"host"``
    softmax: str | None = None
    #: per layer: backward step fused (:func:`sw.kernels.emit_gemv_t_rank1`)
    fused: list = field(default_factory=list)
    #: layer -> :class:`sw.train_paging.SpadPanel`: panels kept in the scratchpad (:func:`sw.train_paging.plan_panels`)
    spad: dict = field(default_factory=dict)

    # -- figures ------------------------------------------------------------------------
    @property
    def regions(self) -> dict:
        return {k: v.region for k, v in self.alloc.items.items()}

    @property
    def out_cores(self) -> int:
        """Cores holding rows of the output layer (the others hold only padding)."""
        return local_len(self.mlp.n_out, self.P[-1])

    @property
    def host_in(self) -> bool:
        """Whether the step's chip programs take the host input and send the output
        themselves (``x`` in core 0's first GEMV, the target before it, the output panels
        as soon as they are final): no ``in`` and no ``unload`` host phase."""
        return bool(self.meta.get("host_in"))

    @property
    def one_run(self) -> bool:
        """Whether the step is one chip phase (MSE, or the softmax on the array)."""
        return self.mlp.loss == "mse" or self.softmax == "array"

    def chip_parts(self) -> list:
        """The chip programs (RUNs) of a step, in order."""
        names = ["step"] if self.one_run else ["forward", "backward"]
        return [p for n in names for p in self.parts[n]]

    def part_cycles(self, part: ChipPart) -> int:
        d = self.part_dma(part)
        return part.instructions + self.cfg.run_overhead + d["stall"] + d["tail"]

    def part_dma(self, part: ChipPart) -> dict:
        """The DMA of a chip program (:func:`sw.train_dram.dma_timeline`): stalls, busy and
        hidden cycles, DRAM beats read and written."""
        if not any("dma" in op.info for op in part.ops):
            return {"stall": 0, "busy": 0, "hidden": 0, "rd": 0, "wr": 0, "tail": 0}
        cache = self.__dict__.setdefault("_dma_cache", {})
        if part.name not in cache:
            cache[part.name] = dma_timeline(self.cfg, part.ops, _gaps(self.cfg, part.ops), part.jumps, part.calls)
        return cache[part.name]

    def dram_per_step(self) -> dict:
        """The DMA of a step's chip programs summed (per core): ``stall`` (exposed
        cycles), ``busy``, ``hidden``, ``rd`` / ``wr`` (DRAM beats)."""
        return dram_traffic([(p.ops, _gaps(self.cfg, p.ops), p.jumps, p.calls) for p in self.chip_parts()], self.cfg)

    def host_phase_cycles(self) -> list:
        """``(name, cycles)`` of the step's host phases: the RUNs of their active cores,
        back to back (one instruction per beat, plus HALT, start latency and drain)."""
        cfg = self.cfg
        run = cfg.run_overhead
        so, K = self.P[-1] // cfg.nr, self.out_cores
        xin = local_len(self.N[0], cfg.nr) + 2            # address-register setup, one beat per word
        g = [("g", K * (so + run))]
        if self.host_in:
            return [] if self.one_run else g
        if self.one_run:
            return [("in", xin + K * (so + run)), ("d" if self.mlp.loss == "mse" else "logits", K * (so + run))]
        return [("in", xin + run), ("logits", K * (so + run))] + g

    def host_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        return host_latency if self.softmax == "host" else 0

    def step_cycles(self, host_latency: int = HOST_LATENCY_CYCLES) -> int:
        return (sum(self.part_cycles(p) for p in self.chip_parts()) + sum(c for _, c in self.host_phase_cycles())
                + self.reload_cycles() + self.host_cycles(host_latency))

    def step_runs(self) -> list:
        """Per RUN of a step, in order, the per-core microcode images it runs from."""
        imgs = lambda what: self._host_images(what)[0]          # noqa: E731
        part = lambda p: [self.images[p.image][k] for k in range(self.cfg.cores)]   # noqa: E731
        pin, pout = ([], []) if self.host_in else ([imgs("in")], [imgs("unload")])
        if self.one_run:
            return pin + [part(p) for p in self.parts["step"]] + pout
        return (pin + [part(p) for p in self.parts["forward"]] + pout + [imgs("g")]
                + [part(p) for p in self.parts["backward"]])

    def _reload(self) -> tuple:
        if "_reload_cache" not in self.__dict__:
            self.__dict__["_reload_cache"] = steady_reload(self.cfg, self.step_runs())
        return self.__dict__["_reload_cache"]

    def reload_cycles(self) -> int:
        """Host stream cycles of the microcode LOADs of a step (steady state: the step
        after another, :func:`sw.host_protocol.steady_reload`); 0 when the step's
        programs share one image."""
        return self._reload()[0]

    def _resume(self, session) -> None:
        """Leave the cores holding the images a step ends with (after the weights'
        loading, a prediction or a read-back), so every step reloads the same words."""
        if hasattr(session, "load"):
            session.load(self.step_runs()[-1])

    def breakdown(self) -> list:
        """``(op, kind, instructions)`` of the chip phases of a step (core 0)."""
        return ops_breakdown(self.cfg, [(p.ops, _gaps(self.cfg, p.ops), p.jumps, p.calls) for p in self.chip_parts()])

    def _title(self) -> str:
        return "SGD step"

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"{self._title()} of {self.mlp.describe()} on {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs",
                 f"  panel rows per core {self.P}, columns {self.N} (output layer "
                 f"{'split by columns, reduced onto core 0' if self.out_map == 'cols' else 'by row panels'}); "
                 f"weights in bank(s) {', '.join(b.upper() for b in self.wbanks)}; "
                 f"{self.step_cycles()} cycles per step (chip phases "
                 f"{', '.join(str(self.part_cycles(p)) for p in self.chip_parts())}; "
                 + (f"host phases {', '.join(f'{n} {c}' for n, c in self.host_phase_cycles())}"
                    if self.host_phase_cycles() else "no host phase")
                 + (f"; host turnaround {self.host_cycles()}" if self.host_cycles() else "") + ")"
                 + (f"; softmax gradient on the {'array (core 0)' if self.softmax == 'array' else 'host'}"
                    if self.softmax else ""),
                 "", self.alloc.table()]
        if self.reload_cycles():
            lines.append(f"the step's programs do not fit the {cfg.ucode_depth}-word microcode together: the host "
                         f"LOADs microcode images between RUNs every step, {self._reload()[1]} words written over "
                         f"the cores ({self.reload_words_per_step()} words of the images a core uses), "
                         f"{self.reload_cycles()} cycles in the step's (a larger ArchConfig.ucode_depth avoids it)")
            if self._resident_base():
                calls = sorted({op.name for p in self.chip_parts() for i, op in enumerate(p.ops) if i in p.calls})
                lines.append(f"resident region: microcode words 0..{self._resident_base() - 1}, loaded once, every "
                             f"image holds it: {', '.join(calls)} (mostly each core's own code) run there, a JUMP "
                             f"there and one back")
        for o in self.meta.get("overlap", []):
            lines.append(f"reduce-scatter of W{o['layer']}^T d ({o['ring_slots']} slots) with {o['rows_merged']} of "
                         f"the {o['rows']} local rows of W{o['layer']}'s update in its free slots: "
                         f"{o['instructions']} instructions")
        if self.meta.get("bcast_in"):
            lines.append("broadcast of x inside W0's forward GEMV: each core loads x's beats from the ring (core 0 "
                         f"from {'the host stream' if self.host_in else 'its diagonal'}) 3 cycles after its "
                         "predecessor and sends them on")
        if self.host_in:
            takes = "the target and x" if self.one_run else "x"
            sends = "d panels" if self.mlp.loss == "mse" else "logits"
            lines.append(f"host input and output inside the chip programs: core 0 takes {takes} from the host "
                         f"stream as the step needs them, the output cores send the {sends} as soon as they are final")
        if self.meta.get("out_reduce"):
            lines.append(f"output layer's partials reduced onto core 0 by the {self.meta['out_reduce']}")
        for l in self.meta.get("ring_in", []):
            lines.append(f"all-gather of a{l} inside W{l}'s forward GEMV: its beats loaded from the ring as the "
                         f"stream reaches them, sent on as they are loaded")
        lines += tier_lines(cfg, self.P, self.N, self.spad, self.dram_per_step(), self.step_cycles())
        lines += [""] + breakdown_lines(self.breakdown())
        return "\n".join(lines)

    # -- host programs ------------------------------------------------------------------
    def _place_host(self) -> None:
        """Put the host-phase programs into the microcode image after the chip programs
        when they fit (no reload between phases); else into an image of their own at the
        top of the microcode, below them the words of the first (else the last) chip
        image (so a switch between the two LOADs only the words the host programs cover),
        or, when both are shorter, each into an image of its own (above the resident region
        of reloaded programs, :meth:`_resident_base`)."""
        cfg = self.cfg
        phases = ((() if self.host_in else ("in", "in_x", "unload"))
                  + (("g",) if self.softmax == "host" else ()))
        if not phases:
            self.host_at = {}
            return
        progs = {w: self._host_programs(w, 0) for w in phases}
        sizes = {w: max(len(x) for x in p) for w, p in progs.items()}
        used = max(len(x) for x in self.images[-1])
        top = cfg.ucode_depth - sum(sizes.values())
        self.host_at = {}
        if len(self.images) == 1 and used + sum(sizes.values()) <= cfg.ucode_depth:
            org = used
            for w in phases:
                ws = self._host_programs(w, org)
                for k in range(cfg.cores):
                    self.images[0][k].extend(ws[k] + [0] * (sizes[w] - len(ws[k])))
                self.host_at[w] = (0, org)
                org += sizes[w]
        elif top >= (low := self._resident_base()) and any(all(len(x) >= top for x in im)
                                                          for im in (self.images[0], self.images[-1])):
            base = next(im for im in (self.images[0], self.images[-1]) if all(len(x) >= top for x in im))
            img, org = [list(x[:top]) for x in base], top
            for w in phases:
                ws = self._host_programs(w, org)
                for k in range(cfg.cores):
                    img[k].extend(ws[k] + [0] * (sizes[w] - len(ws[k])))
                self.host_at[w] = (len(self.images), org)
                org += sizes[w]
            self.images.append(img)
        else:                  # above the resident region (:func:`sw.train_chip_place._resident`)
            for w in phases:
                ws = progs[w] if not low else self._host_programs(w, low)
                self.images.append([self.images[0][k][:low] + ws[k] for k in range(cfg.cores)])
                self.host_at[w] = (len(self.images) - 1, low)

    def _resident_base(self) -> int:
        """Where the programs of the reloaded images begin: above the resident region that
        every image holds unchanged (0 without one)."""
        return min((p.origin for ps in self.parts.values() for p in ps), default=0) if len(self.images) > 1 else 0

    def reload_words_per_step(self) -> int:
        """Microcode words per core of the images a step uses: 0 when the step's chip
        and host programs share one image, else the sum of the images' sizes, the
        resident region that every image holds counted once (the session reloads an
        image whenever the next RUN needs another; the cycles of those LOADs are
        :meth:`reload_cycles`, in :meth:`step_cycles`)."""
        used = {p.image for p in self.chip_parts()} | {i for i, _ in self.host_at.values()}
        if len(used) <= 1:
            return 0
        low = self._resident_base()
        return low + sum(max(len(x) for x in self.images[i]) - low for i in used)

    def _host_images(self, what: str) -> tuple:
        """``(per-core images, start pc)`` of a host phase."""
        i, org = self.host_at[what]
        return self.images[i], org

    def _host_programs(self, what: str, origin: int) -> list:
        """Per core the program of a host phase at ``origin``: ``in`` (x on core 0, t
        panels on the output cores), ``in_x`` (x only), ``unload`` (z / d panels of the
        output cores), ``g`` (gradient panels)."""
        cfg, R = self.cfg, self.regions
        L = lambda n: local_len(n, cfg.nr)           # noqa: E731
        so = self.P[-1] // cfg.nr
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg, origin=origin)
            out = k < self.out_cores
            if what in ("in", "in_x") and k == 0:
                x = R["x"]
                b.text(ring_text(cfg, [f"ar1 = {x.base}", "stride ar1 = 1"]
                                 + [f"hin row | @diag=0 | wr{x.bank} [ar1]++ = row"] * L(self.N[0]), loop="ldx"))
            if what == "in" and out and self.one_run:
                emit_load_vector(b, cfg, R["t"], so, "rows", "ldt")
            if what == "g" and out:
                emit_load_vector(b, cfg, R["g"], so, "rows", "ldg")
            if what == "unload" and out:
                emit_unload_diag(b, cfg, R["z"], so, "ulz")
            b.halt()
            imgs.append(b.build().words())
        return imgs

    def _active(self, what):
        if what == "in_x" or (what == "in" and not self.one_run):
            return [0]
        return list(range(max(self.out_cores, 1 if what == "in" else 0)))

    # -- host data ----------------------------------------------------------------------
    def _vec(self, x, n):
        return vector_bits(self.cfg.fmt, x, n)

    def _panel(self, v, k):
        p = self.P[-1]
        pad = np.zeros(self.cfg.cores * p, dtype=np.uint64)
        pad[:len(v)] = np.asarray(v, dtype=np.uint64)
        return pad[k * p:(k + 1) * p]

    def _run_host(self, session, what, vecs=None, name=""):
        cfg = self.cfg
        so = self.P[-1] // cfg.nr
        data = [[] for _ in range(cfg.cores)]
        for k in self._active(what):
            if what in ("in", "in_x") and k == 0:
                data[k] += vector_beats(cfg, vecs["x"], local_len(self.N[0], cfg.nr))
            if what == "in" and self.one_run and k < self.out_cores:
                data[k] += vector_beats(cfg, self._panel(vecs["t"], k), so)
            if what == "g":
                data[k] += vector_beats(cfg, self._panel(vecs["g"], k), so)
        imgs, org = self._host_images(what)
        return session.run(imgs, data, name, org, active=self._active(what))

    def _in_data(self, vecs, part: ChipPart) -> list | None:
        """Per core the host beats a chip program takes (:attr:`host_in`): core 0's, for
        its ops marked ``info["host_in"]`` in order (``"t"``: the target panel, ``"x"``:
        the sample); None when it takes none."""
        cfg = self.cfg
        so = self.P[-1] // cfg.nr
        beats = {"t": lambda: vector_beats(cfg, self._panel(vecs["t"], 0), so),
                 "x": lambda: vector_beats(cfg, vecs["x"], local_len(self.N[0], cfg.nr))}
        want = [op.info["host_in"] for op in part.ops if op.info.get("host_in")]
        if not want:
            return None
        return [[b for w in want for b in beats[w]()]] + [[] for _ in range(cfg.cores - 1)]

    def _run_chip(self, session, parts, vecs, note=None) -> list:
        """Run the chip programs ``parts`` in order, each with the host beats it takes
        (:meth:`_in_data`); ``note(name, kind, res, cycles)`` each. Returns per core the
        host beats they sent."""
        out = [[] for _ in range(self.cfg.cores)]
        for part in parts:
            res, cyc = self._run_part(session, part, part.name, self._in_data(vecs, part))
            if note is not None:
                note(part.name, "chip", res, cyc)
            for k, r in enumerate(res):
                out[k] += list(r.out)
        return out

    def _run_part(self, session, part: ChipPart, name, data=None):
        imgs = [self.images[part.image][k] for k in range(self.cfg.cores)]
        res, cyc = session.run(imgs, None, name, part.origin, run_data=data)
        exp = self.part_cycles(part)
        for k, r in enumerate(res):
            if r.cycles != exp:
                raise AssertionError(f"{name}: core {k} ran {r.cycles} cycles, predicted {exp}")
            c = r.counters
            if c.get("stall_cycles", 0) and c.get("stall_cycles") == c.get("dma_stall_cycles"):
                c = {**c, "stall_cycles": 0}         # the DMA stalls, predicted in the cycles
            if c.get("mem_conflict") or c.get("rf_conflict") or c.get("stall_cycles"):
                raise AssertionError(f"{name}: core {k}: {c.get('mem_conflict')} SRAM / {c.get('rf_conflict')} "
                                     f"register write conflicts, {c.get('stall_cycles')} stall cycles")
        return res, cyc

    def _outputs(self, res) -> np.ndarray:
        """The output vector from the output cores' beats (``res``: per core a RunResult
        or a list of beats)."""
        cfg = self.cfg
        vals = [decode_diag_beats(cfg, getattr(res[k], "out", res[k]), self.P[-1]) for k in range(self.out_cores)]
        return np.concatenate(vals)[:self.mlp.n_out]

    # -- steps --------------------------------------------------------------------------
    def run_step(self, session, x, t, *, host_latency: int = HOST_LATENCY_CYCLES) -> ChipStepResult:
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        no = mlp.n_out
        if mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        if tf.shape != (no,):
            raise ValueError(f"target must have {no} values, got shape {tf.shape}")
        vecs = {"x": self._vec(x, mlp.n_in)}
        if self.one_run:
            vecs["t"] = self._vec(t, no)
        log = PhaseLog(cfg.cores, session)
        note = log.note

        if not self.host_in:
            note("in", "host", *self._run_host(session, "in", vecs, "step-in"))
        raw = {}
        if self.one_run:
            sent = self._run_chip(session, self.parts["step"], vecs, note)
            what = "d" if mlp.loss == "mse" else "logits"
            if not self.host_in:
                sent, cyc = self._run_host(session, "unload", name="step-out")
                note(what, "host", sent, cyc)
            raw[what] = self._outputs(sent)
            v = fmt.to_float(raw[what])
            loss, out = (mse_loss(v), v + tf) if mlp.loss == "mse" else (softmax_ce_loss(v, tf), v)
        else:
            sent = self._run_chip(session, self.parts["forward"], vecs, note)
            if not self.host_in:
                sent, cyc = self._run_host(session, "unload", name="logits")
                note("logits", "host", sent, cyc)
            raw["logits"] = self._outputs(sent)
            vecs["g"] = host_softmax_grad(fmt, raw["logits"], tf)
            note("g", "host", *self._run_host(session, "g", vecs, "g"))
            for part in self.parts["backward"]:
                note(part.name, "chip", *self._run_part(session, part, part.name))
            z = fmt.to_float(raw["logits"])
            loss, out = softmax_ce_loss(z, tf), z
        return log.result(loss, out, self.host_cycles(host_latency), raw)

    def predict(self, session, x) -> np.ndarray:
        vecs = {"x": self._vec(x, self.mlp.n_in)}
        if not self.host_in:
            self._run_host(session, "in_x", vecs, "predict-in")
        sent = self._run_chip(session, self.parts["predict"], vecs)
        if not self.host_in:
            sent, _ = self._run_host(session, "unload", name="predict-out")
        self._resume(session)
        return self.cfg.fmt.to_float(self._outputs(sent))

    # -- weights ------------------------------------------------------------------------
    def init(self, session, weights) -> None:
        """Load the weights (per core its panels) and the scalars: host phases."""
        cfg, nr, fmt = self.cfg, self.cfg.nr, self.cfg.fmt
        per = self.core_weights(weights)
        scal = {"nlr": self.neg_lr}
        if self.mlp.loss == "mse":
            scal["m1"] = int(fmt.from_float(np.array([-1.0]))[0])
        if "one" in self.regions:                      # the paged W^T d's accumulation
            scal["one"] = int(fmt.from_float(np.array([1.0]))[0])
        smx = softmax_const_items(cfg, self.regions, self.mlp.n_out) if self.softmax == "array" else []
        items = [[(self.regions[f"W{l}"], pack_matrix(per[k][l], nr)) for l in range(self.mlp.n_layers)
                  if l not in self.spad]
                 + [(self.regions[n], np.full((nr, nr, 1), v, dtype=fmt.np_uint)) for n, v in scal.items()]
                 + (smx if k == 0 else [])
                 for k in range(cfg.cores)]
        load_per_core(session, cfg, items, "init")
        for l, sp in self.spad.items():
            if isinstance(sp, DramPanel):
                dram_init(session, cfg, sp, [spad_image(cfg, sp, pack_matrix(per[k][l], nr)) for k in range(cfg.cores)],
                          f"init-dram-W{l}")
                continue
            b = Builder(cfg)
            emit_spad_fill(b, cfg, sp.base, sp.beats(nr))
            b.halt()
            img = b.build().words()
            session.run([img] * cfg.cores, [spad_image(cfg, sp, pack_matrix(per[k][l], nr)) for k in range(cfg.cores)],
                        f"init-spad-W{l}")
        self._resume(session)

    def unload_weights_phases(self) -> list:
        """Host phases unloading every weight panel: per layer ``(images, name)`` (one
        image per core); decode the phases' results with :meth:`decode_weights`."""
        cfg = self.cfg
        out = []
        for l in range(self.mlp.n_layers):
            if isinstance(self.spad.get(l), DramPanel):
                out.append(([dram_unload_program(cfg, self.spad[l])] * cfg.cores, f"unload-W{l}"))
                continue
            b = Builder(cfg)
            if l in self.spad:
                emit_spad_drain(b, cfg, self.spad[l].base, self.spad[l].beats(cfg.nr))
            else:
                reg, n = self.regions[f"W{l}"], self.alloc.items[f"W{l}"].words
                emit_unload(b, cfg, reg.bank, reg.base, n, loop="uw")
            b.halt()
            out.append(([b.build().words()] * cfg.cores, f"unload-W{l}"))
        return out

    def decode_weights(self, results, padded: bool = False) -> list:
        """Global weights from the per-core results (objects with ``.data``: the output
        beats) of each :meth:`unload_weights_phases` phase."""
        cfg, c = self.cfg, self.cfg.cores

        def local(l, res):
            if l in self.spad:
                return spad_local(cfg, self.spad[l], [x.data if hasattr(x, "data") else int(x) for x in res.data])
            return decode_unload(cfg, res.data, self.alloc.items[f"W{l}"].words)
        return [self.join_panels(l, [unpack_matrix(local(l, per_core[k]), self.P[l], self.N[l]) for k in range(c)],
                                 padded)
                for l, per_core in enumerate(results)]

    def weights_from_session(self, session, padded: bool = False) -> list:
        """The global weights as they are in the cores' memories (bit patterns;
        ``padded``: the cores' padded panels together, padding included)."""
        out = []
        for l in range(self.mlp.n_layers):
            if isinstance(self.spad.get(l), DramPanel):
                local = [spad_local(self.cfg, self.spad[l], x) for x in dram_read(session, self.cfg, self.spad[l])]
            elif l in self.spad:
                sp = self.spad[l]
                local = [spad_local(self.cfg, sp, session.scratchpad(k, sp.base, sp.beats(self.cfg.nr)))
                         for k in range(self.cfg.cores)]
            else:
                reg, words = self.regions[f"W{l}"], self.alloc.items[f"W{l}"].words
                local = [session.memory(k, reg.bank)[:, :, reg.base:reg.base + words] for k in range(self.cfg.cores)]
            out.append(self.join_panels(l, [unpack_matrix(x, self.P[l], self.N[l]) for x in local], padded))
        return out
