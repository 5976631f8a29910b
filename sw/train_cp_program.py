"""The host side of a compiled CP pipeline step (:class:`ChipCPProgram`): its cycle
figures and description, running a step, loading and reading back the weights; and
:func:`_kit`, the builders and program class of the network's CP flavour."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sw.asm import Builder
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.train import _gaps
from sw.train_chip_program import PhaseLog, load_per_core
from sw.train_cp_ops import (Kit, _allocate, _count, _head_ops, _host_programs, _ring_rw, _streams, _tail_ops,
                             _vec_ring_text)
from sw.train_host import StepResult, mse_loss, one_hot, softmax_ce_loss, weight_bits
from sw.train_cp_map import cp_core_layers
from sw.train_cp_shared import LayerView
from sw.train_cp_dram import cp_dram_init, cp_dram_read, cp_dram_unload, cp_tier_lines, head_dma
from sw.train_dram import DramPanel
from sw.train_paging import spad_image, spad_local
from sw.train_softmax import softmax_const_items
from sw.train_vectors import decode_diag_beats, vector_beats, vector_bits

__all__ = ["ChipCPProgram"]


@dataclass
class ChipCPProgram:
    """A compiled CP pipeline step (see :mod:`sw.train_cp`)."""

    cfg: object
    mlp: MLP
    groups: list                  #: cores per layer
    stages: list                  #: per core: (layer, index in group) or None
    P: list
    N: list
    V: int                        #: tail variants (history slots)
    allocs: list                  #: per core: Allocator
    head: list                    #: per core: ops of the head RUN
    tails: list                   #: per variant, per core: ops of the tail RUN
    image: list                   #: per core: microcode words
    origins: dict                 #: "head", ("tail", j), ["chains",] "in", "out" -> origin
    instructions: dict            #: "head" / "tail" [/ "chains"] -> instructions issued per RUN (every core)
    neg_lr: int
    softmax: str | None = None
    fused: list = field(default_factory=list)   #: per layer: backward step fused (emit_gemv_t_rank1)
    chains: object = None         #: the sw.chain.ChainSchedule of the tail
    #: the chains are a RUN of their own (the tails with a copy each did not fit the microcode)
    split_chains: bool = False
    meta: dict = field(default_factory=dict)
    step_index: int = 0           #: the next step's number (selects the tail variant)
    #: layer -> :class:`sw.train_chip.SpadPanel`: the panels of the layer's cores kept in
    #: their scratchpads (:func:`sw.train_cp.cp_spad_plan`)
    spad: dict = field(default_factory=dict)
    #: the layers on the core of the layer before (:mod:`sw.train_cp_shared`)
    shared: tuple = ()

    # -- layout -------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return self.mlp.n_layers

    @property
    def core_layers(self) -> list:
        """Per core its stages ``(layer, index in its group)`` (several on a shared core)."""
        return cp_core_layers(self.groups, self.cfg.cores, self.shared)

    @property
    def out_core(self) -> int:
        return self.cores_of(self.n_layers - 1)[0]

    def regions(self, k: int, l: int | None = None) -> dict:
        """Core ``k``'s regions (``l``: layer ``l``'s, under their plain names)."""
        if l is not None:
            return LayerView(self.allocs[k], l).regions()
        return {n: v.region for n, v in self.allocs[k].items.items()}

    def cores_of(self, l: int) -> list:
        return [k for k, sts in enumerate(self.core_layers) if any(st[0] == l for st in sts)]

    def _index(self, k: int, l: int) -> int:
        """Core ``k``'s index in the group of layer ``l``."""
        return next(i for ll, i in self.core_layers[k] if ll == l)

    # -- figures ------------------------------------------------------------------------
    def run_cycles(self, what: str) -> int:
        return self.instructions[what] + self.cfg.run_overhead

    def host_phase_cycles(self) -> list:
        cfg = self.cfg
        run = cfg.run_overhead
        xw, so = local_len(self.N[0], cfg.nr), self.P[-1] // cfg.nr
        return [("in", (xw + run) + (so + run)), ("out", so + run)]

    def chip_runs(self) -> list:
        """The chip RUNs of a step: head, tail (and chains)."""
        return ["head", "tail"] + (["chains"] if self.split_chains else [])

    def step_cycles(self) -> int:
        return sum(self.run_cycles(w) for w in self.chip_runs()) + sum(c for _, c in self.host_phase_cycles())

    def host_cycles(self, host_latency: int = 0) -> int:
        """Host turnaround cycles per step (as :meth:`sw.train_chip.ChipSGDProgram.host_cycles`):
        none; the softmax runs on the output core, and the host phases are part of
        :meth:`step_cycles`."""
        return 0

    def dram_per_step(self, k: int | None = None) -> dict:
        """Core ``k``'s DMA per step (its head's, :func:`sw.train_dram.dma_timeline`):
        ``stall``, ``tail`` (exposed cycles), ``busy``, ``hidden``, ``rd`` / ``wr`` (DRAM
        beats); ``k=None``: the core whose engine is busiest (the cores stream different
        panels)."""
        per = self.meta.get("head_dma") or [head_dma(self.cfg, [])] * self.cfg.cores
        return per[k] if k is not None else max(per, key=lambda d: (d["busy"], d["rd"]))

    def latency_steps(self) -> int:
        """Steps from a sample's input to its loss: ``L`` (forward through every group;
        the host's load is one step ahead)."""
        return self.n_layers

    def breakdown(self, k: int | None = None) -> list:
        """``(op, kind, instructions)`` of the chip RUNs on core ``k`` (default: the core
        of the group with the longest compute), alignment NOPs included."""
        k = self.meta["critical_core"] if k is None else k
        out = []
        halt = ("halt+drain", "halt", self.cfg.run_overhead)
        for ops in (self.head[k], self.tails[0][k]):
            for op, g in zip(ops, _gaps(self.cfg, ops)):
                if g:
                    out.append(("gap", "nop", g))
                out.append((op.name, op.kind, _count(self.cfg, op)))
            out.append(halt)
        if self.split_chains:
            out += [("chains", "ring", self.chains.slots), halt]
        return out

    def describe(self) -> str:
        cfg = self.cfg
        lines = [f"CP pipeline step of {self.mlp.describe()} on {cfg.cores} cores of {cfg.nr}x{cfg.nr} {cfg.fmt} PEs",
                 f"  cores per layer {self.groups} (row panels of {self.P} rows; inputs {self.N}); "
                 f"{self.V} tail variants; {self.step_cycles()} cycles per step (head {self.run_cycles('head')}, "
                 + (f"tail {self.run_cycles('tail')}, chains {self.run_cycles('chains')}; host " if self.split_chains
                    else f"tail {self.run_cycles('tail')} of which chains {self.chains.slots}; host ")
                 + ", ".join(f"{n} {c}" for n, c in self.host_phase_cycles()) + ")"
                 + (f"; softmax gradient on the array (output core {self.out_core})" if self.softmax else ""),
                 "  backward step per layer: " + ", ".join(f"{l} {'fused' if f else 'separate'}"
                                                           for l, f in enumerate(self.fused) if l),
                 f"  microcode per core: {max(len(w) for w in self.image)} of {cfg.ucode_depth} words",
                 "  " + self._chains_line()]
        lines += self._placement_lines()
        lines += ["  " + ln for ln in cp_tier_lines(cfg, self.P, self.N, self.groups, self.spad,
                                                    [self.dram_per_step(k) for k in range(cfg.cores)],
                                                    self.stages, self.step_cycles())]
        for l in range(self.n_layers):
            k = self.cores_of(l)[0]
            ls = [ll for ll, _ in self.core_layers[k]]
            if len(ls) > 1 and l == ls[0]:
                lines += ["", f"core {k} (layers {', '.join(map(str, ls))} on one core; regions of layer l > {l} "
                          f"named name@l):", self.allocs[k].table()]
            elif len(ls) == 1:
                lines += ["", f"core {k} (layer {l}, {len(self.cores_of(l))} core(s)):", self.allocs[k].table()]
        lines += ["", f"critical core {self.meta['critical_core']}:"]
        lines += [f"{'op':<14} {'kind':<10} {'cycles':>7}"] + [f"{n:<14} {kd:<10} {i:>7}"
                                                               for n, kd, i in self.breakdown()]
        return "\n".join(lines)

    def _chains_line(self) -> str:
        """Where the chains run: the schedule chosen (``compile_chip_cp(chain_overlap=)``)."""
        sch = self.meta.get("head_chains")
        if sch is None:
            why = self.meta.get("chain_overlap_off") or "off"
            return f"chains: every chain in the tail, after every core's kernels (chain_overlap: {why})"
        rows = {}
        for k, n in enumerate(self.meta["rows_merged"]):
            if self.stages[k] is not None:
                rows.setdefault(self.stages[k][0], set()).add(n)
        per = ", ".join(f"layer {l} {'/'.join(map(str, sorted(v)))}" for l, v in sorted(rows.items()))
        return (f"chains: the deltas' at the head's start ({sch.slots} slots) beside the forward GEMV's first "
                f"local rows ({per}), the activations' in the tail ({self.chains.slots} slots) (chain_overlap)")

    def _placement_lines(self) -> list:
        """Which layers share a core and why: the cost model's step compute (longest head
        plus longest tail, without the chains) of each placement the compiler tried."""
        tried = self.meta.get("placements") or []
        runs = [ls for ls in ([l for l, _ in sts] for sts in self.core_layers) if len(ls) > 1]
        name = lambda sh: "every layer on its own cores" if not sh else "layers " + "+".join(    # noqa: E731
            str(x) for x in [sh[0] - 1] + list(sh)) + " on one core"
        head = ("  placement: " + ("; ".join(f"layers {'+'.join(map(str, ls))} on core {self.cores_of(ls[0])[0]}"
                                             for ls in runs) if runs else "every layer on its own cores"))
        if len(tried) < 2:
            return [head]
        opts = sorted(tried, key=lambda t: (t[3], len(t[0])))
        return [head + f", the shortest step compute of {len(tried)} placements (cost model, cycles):"] + [
            f"    {name(sh)}: groups {g}, {'fused ' + ''.join('FT'[x] for x in f)}, {c}" for sh, g, f, c in opts]

    # -- running ------------------------------------------------------------------------
    def _vec(self, v, n):
        if v is None:
            return np.zeros(n, dtype=self.cfg.fmt.np_uint)
        return vector_bits(self.cfg.fmt, v, n)

    def _target(self, t):
        no, fmt = self.mlp.n_out, self.cfg.fmt
        if t is None:
            return None, np.zeros(no, dtype=fmt.np_uint)
        if self.mlp.loss == "softmax_ce" and np.ndim(t) == 0:
            t = one_hot(no, t)
        tb = np.asarray(t)
        tf = fmt.to_float(tb) if tb.dtype == fmt.np_uint else tb.astype(np.float64)
        if tf.shape != (no,):
            raise ValueError(f"target must have {no} values, got shape {tf.shape}")
        return tf, self._vec(t, no)

    def _runs(self, session, data: list, log: PhaseLog):
        """A step's RUNs: the host's input phase (``data``: per core its beats), the chip
        RUNs, the output phase; returns the output core's result of the last."""
        cfg = self.cfg
        act = sorted({0, self.out_core})
        res, cyc = session.run([self.image[k] for k in range(cfg.cores)], data, "cp-in", self.origins["in"],
                               active=act)
        log.note("in", "host", res, cyc)
        self._run_chip(session, log)
        res, cyc = session.run([self.image[k] for k in range(cfg.cores)], None, "cp-out", self.origins["out"],
                               active=[self.out_core])
        log.note("out", "host", res, cyc)
        return res[self.out_core]

    def _run_chip(self, session, log: PhaseLog, runs=None) -> None:
        """The step's chip RUNs (head, the tail of this step's variant; ``runs``: some of
        :meth:`chip_runs`), each checked: cycles as predicted on every core, no SRAM or
        register write conflict, no stall but the predicted DMA stalls."""
        cfg = self.cfg
        for what in (self.chip_runs() if runs is None else runs):
            org = self.origins[("tail", self.step_index % self.V) if what == "tail" else what]
            res, cyc = session.run([self.image[k] for k in range(cfg.cores)], None, f"cp-{what}", org)
            exp = self.run_cycles(what)
            for k, r in enumerate(res):
                ctr = r.counters
                dma = self.dram_per_step(k)["stall"] if what == "head" else 0   # the engine's, predicted
                if (r.cycles != exp or ctr.get("mem_conflict") or ctr.get("rf_conflict")
                        or ctr.get("stall_cycles", 0) != dma):
                    raise AssertionError(f"CP {what} RUN on core {k}: {r.cycles} cycles (predicted {exp}), "
                                         f"{ctr.get('mem_conflict')} SRAM / {ctr.get('rf_conflict')} register write "
                                         f"conflicts, {ctr.get('stall_cycles')} stall cycles")
            log.note(what, "chip", res, cyc)

    def run_step(self, session, x, t) -> StepResult:
        """One pipeline step: ``x`` enters (None: zeros, to drain), ``t`` is the target of
        the sample now at the output layer (the one that entered ``L`` steps earlier;
        None while the pipeline fills). Returns that sample's loss (None without ``t``)
        and output, with the step's cycles and every core's counters."""
        cfg, fmt, mlp = self.cfg, self.cfg.fmt, self.mlp
        tf, tb = self._target(t)
        xb = self._vec(x, mlp.n_in)
        log = PhaseLog(cfg.cores, session)
        data = [[] for _ in range(cfg.cores)]
        data[0] = vector_beats(cfg, xb, local_len(self.N[0], cfg.nr))
        if mlp.loss == "mse" or self.softmax == "array":
            data[self.out_core] += vector_beats(cfg, tb, self.P[-1] // cfg.nr)
        out = self._runs(session, data, log)
        raw = decode_diag_beats(cfg, out.out, mlp.n_out)
        v = fmt.to_float(raw)
        self.step_index += 1
        if tf is None:
            loss, out = None, v
        elif mlp.loss == "mse":
            loss, out = mse_loss(v), v + tf
        else:
            loss, out = softmax_ce_loss(v, tf), v
        return log.result(loss, out, 0, {"out": raw})

    # -- weights ------------------------------------------------------------------------
    def _panel_rows(self, l: int, i: int) -> slice:
        return slice(i * self.P[l], (i + 1) * self.P[l])

    def init(self, session, weights) -> None:
        """Load every core's weight panel (into its scratchpad when paged) and scalars,
        and zero the pipeline's vectors (host phases); resets the step counter."""
        from sw.transfer import emit_spad_fill

        cfg, nr, fmt = self.cfg, self.cfg.nr, self.cfg.fmt
        items = [[] for _ in range(cfg.cores)]
        spad = [[] for _ in range(cfg.cores)]              # per core the scratchpad beats of a paged panel
        for l, W in enumerate(weight_bits(self.mlp, fmt, weights)):
            m, n = self.mlp.shape(l)
            G = np.zeros((self.groups[l] * self.P[l], self.N[l]), dtype=fmt.np_uint)
            G[:m, :n] = W
            for k in self.cores_of(l):
                local = pack_matrix(G[self._panel_rows(l, self._index(k, l))], nr)
                if l in self.spad:
                    sp = self.spad[l]
                    spad[k] = spad_image(cfg, sp, local)
                    if sp.res:                                 # the resident rows
                        items[k].append((self.regions(k)["WR"], local[:, :, :sp.res * sp.ncols]))
                    if sp.resb:                                # and those in bank B
                        items[k].append((self.regions(k)["WB"], local[:, :, sp.res * sp.ncols:sp.lead * sp.ncols]))
                else:
                    items[k].append((self.regions(k, l)["W"], local))
        scalars = {"nlr": self.neg_lr, "m1": int(fmt.from_float(np.array([-1.0]))[0]),
                   "one": int(fmt.from_float(np.array([1.0]))[0])}
        for k in range(cfg.cores):
            R = self.regions(k)
            for name, it in self.allocs[k].items.items():
                base = name.split("@")[0]
                if base not in ("W", "WR", "WB") and not base.startswith("smx_"):
                    items[k].append((R[name], np.full((nr, nr, it.words), scalars.get(base, 0), dtype=fmt.np_uint)))
            if self.softmax == "array" and k == self.out_core:
                items[k] += softmax_const_items(cfg, self.regions(k, self.n_layers - 1), self.mlp.n_out)
        load_per_core(session, cfg, items, "cp-init")
        dram = [self._paged(k) if isinstance(self._paged(k), DramPanel) else None for k in range(cfg.cores)]
        if any(dram):
            cp_dram_init(session, cfg, dram, spad, "cp-init-dram")
            spad = [[] if dram[k] else spad[k] for k in range(cfg.cores)]
        if any(spad):
            imgs = []
            for k in range(cfg.cores):
                b = Builder(cfg)
                if spad[k]:
                    emit_spad_fill(b, cfg, 0, len(spad[k]))
                b.halt()
                imgs.append(b.build().words())
            session.run(imgs, spad, "cp-init-spad")
        hist = [self.allocs[k].meta.get("hist_spad") for k in range(cfg.cores)]
        if any(h is not None for h in hist):             # the input history in the scratchpad: zeros
            imgs, data = [], []
            for k in range(cfg.cores):
                b = Builder(cfg)
                n = 0 if hist[k] is None else cfg.spad_depth - hist[k]
                if n:
                    emit_spad_fill(b, cfg, hist[k], n)
                b.halt()
                imgs.append(b.build().words())
                data.append([0] * n)
            session.run(imgs, data, "cp-init-hist")
        if hasattr(session, "load"):            # the step's image, so no step starts with its LOAD
            session.load([self.image[k] for k in range(cfg.cores)])
        self.step_index = 0

    def _paged(self, k: int, l: int | None = None):
        """Core ``k``'s :class:`sw.train_chip.SpadPanel` (of its layer ``l``), or None when
        its panel is in PE memory."""
        st = self.stages[k]
        return None if st is None else self.spad.get(st[0] if l is None else l)

    def weights_from_session(self, session, padded: bool = False) -> list:
        """The global weights as they are in the cores' memories (bit patterns)."""

        dram = [self._paged(k) if isinstance(self._paged(k), DramPanel) else None for k in range(self.cfg.cores)]
        beats = cp_dram_read(session, self.cfg, dram) if any(dram) else None

        def paged(k, sp):
            if isinstance(sp, DramPanel):
                return spad_local(self.cfg, sp, beats[k])
            return spad_local(self.cfg, sp, session.scratchpad(k, sp.base, sp.beats(self.cfg.nr)))

        def local(k, l, sp):
            if sp is not None:
                out = paged(k, sp)
                lead = []
                for name, n in (("WR", sp.res), ("WB", sp.resb)):
                    if n:
                        reg = self.regions(k)[name]
                        lead.append(session.memory(k, reg.bank)[:, :, reg.base:reg.base + n * sp.ncols])
                return np.concatenate(lead + [out], axis=2) if lead else out
            reg, words = self.regions(k, l)["W"], self._w_words(k, l)
            return session.memory(k, reg.bank)[:, :, reg.base:reg.base + words]

        return self._assemble(local, padded)

    def _assemble(self, local_of, padded: bool) -> list:
        """The global weights from each core's local panel words ``local_of(k, paged panel or
        None)``."""
        out = []
        for l in range(self.n_layers):
            G = np.zeros((self.groups[l] * self.P[l], self.N[l]), dtype=self.cfg.fmt.np_uint)
            for k in self.cores_of(l):
                local = local_of(k, l, self._paged(k, l))
                G[self._panel_rows(l, self._index(k, l))] = unpack_matrix(local, self.P[l], self.N[l])
            m, n = self.mlp.shape(l)
            out.append(G if padded else G[:m, :n])
        return out

    def _w_words(self, k: int, l: int) -> int:
        """Words per PE of core ``k``'s panel of layer ``l`` (in PE memory)."""
        return LayerView(self.allocs[k], l).items["W"].words

    def unload_weights_phases(self) -> list:
        """One chip phase unloading every core's weight panel: ``[(images, name)]``;
        decode its per-core results with :meth:`decode_weights`."""
        from sw.transfer import emit_spad_drain, emit_unload

        cfg = self.cfg
        imgs = []
        for k in range(cfg.cores):
            b = Builder(cfg)
            sp = self._paged(k)
            if isinstance(sp, DramPanel):
                imgs.append(cp_dram_unload(cfg, sp))
                continue
            if sp is not None and sp.pages:    # (no page: every row resident, unloaded below)
                emit_spad_drain(b, cfg, sp.base, sp.beats(cfg.nr))
            elif sp is None and "W" in self.allocs[k].items:
                ls = [l for l, _ in self.core_layers[k]]
                for l in ls:                   # every layer's panel on a shared core, first to last
                    reg = self.regions(k, l)["W"]
                    emit_unload(b, cfg, reg.bank, reg.base, self._w_words(k, l), loop=f"uw{l}_", last=l == ls[-1])
            b.halt()
            imgs.append(b.build().words())
        out = [(imgs, "cp-unload-W")]
        for name in self._lead_regions():              # the resident rows of the paged panels
            imgs = []
            for k in range(cfg.cores):
                b = Builder(cfg)
                if name in self.allocs[k].items:
                    reg = self.regions(k)[name]
                    emit_unload(b, cfg, reg.bank, reg.base, self.allocs[k].items[name].words, loop="ur")
                b.halt()
                imgs.append(b.build().words())
            out.append((imgs, f"cp-unload-{name}"))
        return out

    def _lead_regions(self) -> list:
        """The regions of resident rows of paged panels some core has (``WR``, ``WB``), in
        the order of :meth:`unload_weights_phases`' phases after the first."""
        return [n for n in ("WR", "WB") if any(n in al.items for al in self.allocs)]

    def decode_weights(self, results, padded: bool = False) -> list:
        """Global weights from the per-core results of :meth:`unload_weights_phases`."""
        from sw.transfer import decode_unload

        per_core = results[0]

        def local(k, l, sp):
            if sp is not None:
                out = spad_local(self.cfg, sp, [x.data if hasattr(x, "data") else int(x) for x in per_core[k].data])
                lead = [decode_unload(self.cfg, results[1 + i][k].data, self.allocs[k].items[n].words)
                        for i, n in enumerate(self._lead_regions()) if n in self.allocs[k].items]
                return np.concatenate(lead + [out], axis=2) if lead else out
            ls = [ll for ll, _ in self.core_layers[k]]
            at = self.cfg.nr * sum(self._w_words(k, ll) for ll in ls[:ls.index(l)])
            return decode_unload(self.cfg, per_core[k].data[at:at + self.cfg.nr * self._w_words(k, l)],
                                 self._w_words(k, l))

        return self._assemble(local, padded)


def _kit(mlp: MLP) -> Kit:
    if mlp.batch > 1:
        from sw.train_cp_mb import MB_KIT

        return MB_KIT
    return Kit(_allocate, _head_ops, _tail_ops, _streams, _ring_rw, _host_programs, _vec_ring_text,
               ChipCPProgram)
