"""Batch-1 SGD on a heterogeneous chip, each layer's phases on the core group a
:class:`sw.train_hetero_place.Placement` names (``docs/hybrid.md``).

Layer ``l`` lives on one core ``c_l`` of its group (its padded weights in that core's PE
memories; consecutive layers of one group share a core while they fit). A step is a
sequence of RUNs, one core at a time, and between them the transfers of the vectors
from one layer's core to the next (``transfers="ring"``, the default: one RUN on every
core, over the ring and through its crossings, :mod:`sw.train_hetero_ring`; none between
two layers of one core) or through the host (``"host"``: unloaded by one core, loaded
into the next inside their phases):

```text
F_l  (l < L-1, core c_l):   [l = 0: load x (cols)]; z = W a_l; z = relu(z)      -> a_{l+1}
F_{L-1} (output core):      z = W a; load t; d = z - t; unload d (the loss);
                            e = W^T d; e = mask(e, a); W += -lr d a^T          -> g_{L-2}
B_l  (l = L-2 .. 0, c_l):   l >= 1: e = W^T g_l; e = mask(e, a_l); W += -lr g_l a_l^T  -> g_{l-1}
```

The kernels are those of the single-core compiler (:mod:`sw.train`; ``emit_gemv``,
``emit_relu``, ``emit_axpy``, ``emit_relu_mask``, ``emit_rank1``; the separate
backward step) at the core kind's ``nr``, with its layouts: a vector from the ring
arrives in the diag layout and the GEMV makes its cols copy. Over the ring a vector
keeps its padding (zero-extended to the receiver's); through the host it leaves with
its real length and is zero-padded to the next kind's ``nr``.
:class:`sw.golden_train_hetero.GoldenHetero` does the same operations in numpy. Loss: MSE.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sw.host_protocol import load_beat_count
from sw.layout import local_len, pack_matrix, unpack_matrix
from sw.mlp import MLP
from sw.train import _place, _split_ops
from sw.train_hetero_ops import allocate, load_regions, phase_ops
from sw.train_hetero_place import Placement, check_placement, layer_words
from sw.train_hetero_ring import padded_len, ring_path, transfer_lines, transfer_words
from sw.train_host import TrainCompileError, mse_loss, weight_bits
from sw.train_vectors import decode_diag_beats, vector_beats, vector_bits

TRANSFERS = ("ring", "host")

__all__ = ["compile_hetero", "HeteroTrainProgram", "HeteroStep", "assign_cores", "check_fit"]


def assign_cores(hcfg, mlp: MLP, placement: Placement, transfers: str = "ring") -> list:
    """Chip core of every layer: the placement's core, else the previous layer's core
    when it is in the same group and has room (a vector between two layers of one core
    needs no transfer), else the core of its group with the fewest weight words so far
    that has room (first fit; room: 90 % of the PE memories for the weights)."""
    check_placement(hcfg, mlp, placement, transfers)
    starts = [sum(g.count for g in hcfg.groups[:i]) for i in range(len(hcfg.groups))]
    used: dict = {}
    out = []
    for l, p in enumerate(placement.layers):
        g, cfg = p.forward, hcfg.group_cfgs[p.forward]
        m, n = mlp.shape(l)
        w = layer_words(cfg, m, n) // (cfg.nr * cfg.nr)
        cap = cfg.mem_a_words + cfg.mem_b_words
        cands = [starts[g] + i for i in range(hcfg.groups[g].count)]
        room = [k for k in cands if used.get(k, 0) + w <= cap * 0.9]
        if p.core is not None:
            k = starts[g] + p.core
        elif out and out[-1] in room:
            k = out[-1]
        else:
            k = min(room or cands, key=lambda k: (used.get(k, 0), k))
        used[k] = used.get(k, 0) + w
        out.append(k)
    return out


@dataclass
class HeteroStep:
    loss: float
    output: np.ndarray
    cycles: int                  #: the step's RUN cycles (one core at a time)
    runs: list                   #: per RUN: (phase, core, cycles)
    counters: list               #: per core, the step's counters


@dataclass
class HeteroTrainProgram:
    hcfg: object
    mlp: MLP
    placement: Placement
    cores: list                   #: per layer, its chip core
    allocs: dict                  #: core -> Allocator
    programs: dict                #: phase name -> [StepProgram] (on the phase's core)
    images: dict                  #: core -> microcode images
    phase_core: dict              #: phase name -> core
    order: list                   #: phase names of a step, in order
    neg_lr: int
    transfers: str = "ring"       #: vectors between layers over the ring or through the host
    rings: dict = field(default_factory=dict)   #: ring transfer -> {"origin", "cycles", "path"}
    meta: dict = field(default_factory=dict)

    # -- figures --------------------------------------------------------------------
    def cfg(self, k: int):
        return self.hcfg.core_cfg(k)

    def phase_cycles(self) -> dict:
        """Predicted cycles of each phase: its RUNs' instructions plus each RUN's overhead
        (a ring transfer: its longest core's program plus the overhead)."""
        loads = self.load_cycles()
        return {ph: self.rings[ph]["cycles"] if ph in self.rings else
                sum(p.instructions + self.cfg(self.phase_core[ph]).run_overhead for p in self.programs[ph])
                + loads[ph] for ph in self.order}

    def _end_images(self) -> dict:
        """Per core the image its last program of a step runs from."""
        end = {k: 0 for k in self.images}
        for ph in self.order:
            if ph not in self.rings:
                for p in self.programs[ph]:
                    end[self.phase_core[ph]] = p.image
        return end

    def load_cycles(self) -> dict:
        """Per phase the host stream cycles of the microcode LOADs before its RUNs, in
        steady state (a core LOADs an image, ``tdest`` = the core, whenever its next
        program needs another one than it holds: :func:`sw.host_protocol.load_beat_count`)."""
        cur, out = self._end_images(), {}
        for ph in self.order:
            out[ph] = 0
            if ph in self.rings:
                continue
            k = self.phase_core[ph]
            for p in self.programs[ph]:
                if cur[k] != p.image:
                    out[ph] += load_beat_count(self.cfg(k), len(self.images[k][p.image]))
                    cur[k] = p.image
        return out

    def step_cycles(self) -> int:
        return sum(self.phase_cycles().values())

    def reloads(self) -> int:
        """Microcode reloads per step (cores whose programs need more than one image)."""
        return sum(len(self.programs[ph]) for ph in self.order
                   if ph in self.phase_core and len(self.images[self.phase_core[ph]]) > 1)

    def describe(self) -> str:
        h = self.hcfg
        lines = [f"SGD step of {self.mlp.describe()} on a heterogeneous chip of {h.cores} cores "
                 f"({', '.join(f'group {i}: {g.count} x {c.nr}x{c.nr} {c.fmt}' for i, (g, c) in enumerate(zip(h.groups, h.group_cfgs)))})",
                 f"  placement {self.placement.short()}: " + ", ".join(
                     f"layer {l} on core {k} (group {h.group_of(k)})" for l, k in enumerate(self.cores))]
        pc = self.phase_cycles()
        for ph in self.order:
            if ph in self.rings:
                p = self.rings[ph]["path"]
                lines.append(f"  {ph:<6} ring {p[0]:>2} -> {p[-1]:>2} ({len(p) - 1} hops): {pc[ph]} cycles")
            else:
                lines.append(f"  {ph:<6} core {self.phase_core[ph]:>2}: {pc[ph]} cycles")
        lines.append(f"  {self.step_cycles()} cycles per step (RUNs one after another; vectors between layers "
                     f"{'over the ring' if self.transfers == 'ring' else 'through the host'})")
        return "\n".join(lines)

    # -- host side ------------------------------------------------------------------
    def init(self, model, weights) -> None:
        """Load every core's weights and scalars, and the microcode image a step ends with."""
        wb = None
        for k, al in self.allocs.items():
            cfg = self.cfg(k)
            wb = weight_bits(self.mlp, cfg.fmt, weights)
            items = []
            for l in [l for l, c in enumerate(self.cores) if c == k]:
                items.append((al.items[f"W{l}"].region, pack_matrix(wb[l], cfg.nr)))
            m1 = int(cfg.fmt.from_float(np.array([-1.0]))[0])
            for name, v in (("nlr", _neg_lr(cfg.fmt, self.mlp.lr)), ("m1", m1)):
                if name in al.items:
                    items.append((al.items[name].region, np.full((cfg.nr, cfg.nr, 1), v, dtype=cfg.fmt.np_uint)))
            load_regions(model, cfg, k, items)
        self._loaded = self._end_images()          # as a step leaves the cores: every step LOADs the same
        for k in self.images:
            model.load(self.images[k][self._loaded[k]], 0, core=k)

    def run_step(self, model, x, t, check_cycles: bool = True) -> HeteroStep:
        """One SGD step on ``model`` (a :class:`sim.chip_model.ChipModel` of ``hcfg``)."""
        mlp = self.mlp
        fmt = self.cfg(self.cores[-1]).fmt          # the output core's: t, d and the loss
        vec = {"a0": vector_bits(self.cfg(self.cores[0]).fmt, x, mlp.n_in), "t": vector_bits(fmt, t, mlp.n_out)}
        model.clear_counters()
        runs, pred, total = [], self.phase_cycles(), 0
        for ph in self.order:
            if ph in self.rings:
                cyc = model.run(self.rings[ph]["origin"]).cycles
                if check_cycles and cyc != pred[ph]:
                    raise AssertionError(f"transfer {ph}: {cyc} cycles, predicted {pred[ph]}")
                runs.append((ph, None, cyc))
                total += cyc
                continue
            k = self.phase_core[ph]
            cfg = self.cfg(k)
            cyc = 0
            for p in self.programs[ph]:
                if self._loaded[k] != p.image:
                    model.load(self.images[k][p.image], 0, core=k)
                    self._loaded[k] = p.image
                    cyc += load_beat_count(cfg, len(self.images[k][p.image]))
                data = []
                for op in p.loads():
                    data += vector_beats(cfg, vec[op.data], op.words)
                res = model.cores[k].run(p.origin, data, ring_in=())
                cyc += res.cycles
                pos = 0
                for op in p.unloads():
                    v = decode_diag_beats(cfg, res.out[pos:pos + op.words], op.words * cfg.nr)
                    vec[op.data] = v[:op.info["n"]].copy()
                    pos += op.words
            if check_cycles and cyc != pred[ph]:
                raise AssertionError(f"phase {ph} on core {k}: {cyc} cycles, predicted {pred[ph]}")
            runs.append((ph, k, cyc))
            total += cyc
        ctrs = model.counters
        for c in ctrs:
            if c.get("mem_conflict") or c.get("rf_conflict"):
                raise AssertionError(f"SRAM / register write conflicts: {c['mem_conflict']}, {c['rf_conflict']}")
        d = fmt.to_float(vec["d"])
        tf = fmt.to_float(vec["t"])
        return HeteroStep(mse_loss(d), d + tf, total, runs, ctrs)

    def weights(self, model, padded: bool = False, memory=None) -> list:
        """Every layer's weights read from its core's PE memories (global bit patterns).
        ``memory(k, bank)``: core ``k``'s bank as ``[nr, nr, words]`` (default: the fast
        engine's ``model.cores[k].memory(bank)``)."""
        memory = memory or (lambda k, b: model.cores[k].memory(b))
        out = []
        for l, k in enumerate(self.cores):
            cfg, it = self.cfg(k), self.allocs[k].items[f"W{l}"]
            local = memory(k, it.region.bank)[:, :, it.region.base:it.region.base + it.words]
            m, n = self.mlp.shape(l)
            if padded:
                m, n = local_len(m, cfg.nr) * cfg.nr, local_len(n, cfg.nr) * cfg.nr
            out.append(unpack_matrix(local, m, n))
        return out


def check_fit(hcfg, mlp: MLP, placement: Placement, transfers: str = "ring") -> list:
    """The cores :func:`compile_hetero` would use (memory checked, nothing assembled);
    raises :class:`PlacementError` or :class:`TrainCompileError` (one line)."""
    cores = assign_cores(hcfg, mlp, placement, transfers)
    allocate(hcfg, mlp, cores, transfers == "ring")
    return cores


def compile_hetero(hcfg, mlp: MLP, placement: Placement, transfers: str = "ring") -> HeteroTrainProgram:
    """Compile batch-1 SGD of ``mlp`` on ``hcfg`` with ``placement`` (see the module
    docstring); ``transfers``: the vectors between layers over the ring (``"ring"``)
    or through the host (``"host"``). Raises :class:`PlacementError` or
    :class:`TrainCompileError` (one line)."""
    nl = mlp.n_layers
    if transfers not in TRANSFERS:
        raise TrainCompileError(f"transfers {transfers!r}: one of {', '.join(TRANSFERS)}")
    if nl < 2:
        raise TrainCompileError("a heterogeneous step needs at least one hidden layer")
    if mlp.loss != "mse":
        raise TrainCompileError(f"loss {mlp.loss!r}: the heterogeneous compiler trains with MSE only")
    ring = transfers == "ring"
    cores = assign_cores(hcfg, mlp, placement, transfers)
    allocs = allocate(hcfg, mlp, cores, ring)
    order = []
    for l in range(nl):
        if ring and l >= 1 and cores[l] != cores[l - 1]:
            order.append(f"Ta{l}")
        order.append(f"F{l}")
    for l in range(nl - 2, -1, -1):
        if ring and cores[l] != cores[l + 1]:
            order.append(f"Tg{l}")
        order.append(f"B{l}")
    phase_core = {ph: cores[int(ph[1:])] for ph in order if ph[0] != "T"}
    programs, images = {}, {}
    for k, al in allocs.items():
        cfg = hcfg.core_cfg(k)
        named = []
        for ph in order:
            if phase_core.get(ph) != k:
                continue
            groups = _split_ops(cfg, phase_ops(cfg, mlp, al, int(ph[1:]), ph[0], ring))
            named += [(f"{ph}.{i}", ops) for i, ops in enumerate(groups)]
        progs, imgs = _place(cfg, named)
        if ring and len(imgs) > 1:
            raise TrainCompileError(f"core {k}: its programs need {len(imgs)} microcode images; ring transfers "
                                    f"need them in one (use transfers='host')")
        images[k] = imgs
        for (name, _), p in zip(named, progs):
            programs.setdefault(name.split(".")[0], []).append(p)
    rings = _ring_transfers(hcfg, mlp, cores, allocs, order, images) if ring else {}
    for fmt in {hcfg.core_cfg(k).fmt for k in cores}:
        if fmt.to_float(np.array([_neg_lr(fmt, mlp.lr)], dtype=fmt.np_uint))[0] == 0:
            raise TrainCompileError(f"learning rate {mlp.lr} rounds to zero in {fmt}")
    neg_lr = _neg_lr(hcfg.core_cfg(cores[0]).fmt, mlp.lr)
    return HeteroTrainProgram(hcfg, mlp, placement, cores, allocs, programs, images, phase_core, order, neg_lr,
                              transfers=transfers, rings=rings)


def _neg_lr(fmt, lr) -> int:
    return int(fmt.from_float(np.array([-lr]))[0])


def _ring_transfers(hcfg, mlp, cores, allocs, order, images) -> dict:
    """Assemble every ring transfer at one microcode address on every core, after the
    longest core's phases; extend each core's image with them (in place). Returns
    name -> {"origin", "cycles", "path"}."""
    n = hcfg.cores
    for k in range(n):
        images.setdefault(k, [[]])
    org = max(len(images[k][0]) for k in range(n))
    full = {k: list(images[k][0]) + [0] * (org - len(images[k][0])) for k in range(n)}
    out = {}
    for ph in order:
        if ph[0] != "T":
            continue
        l = int(ph[2:])
        if ph[1] == "a":              # a_l: layer l-1's output to layer l's core
            s, r, src, dst, size = cores[l - 1], cores[l], f"z{l - 1}", f"a{l}", mlp.sizes[l]
        else:                         # g_l: layer l+1's mask to layer l's core
            s, r, src, dst, size = cores[l + 1], cores[l], f"dm{l + 1}", f"g{l}", mlp.sizes[l + 1]
        rs, rd = allocs[s].items[src].region, allocs[r].items[dst].region
        lines = transfer_lines(hcfg, s, r, padded_len(hcfg, size), (rs.bank, rs.base), (rd.bank, rd.base))
        words, cyc = transfer_words(hcfg, lines, org)
        width = max(len(w) for w in words)
        for k in range(n):
            full[k] += list(words[k]) + [0] * (width - len(words[k]))
        out[ph] = {"origin": org, "cycles": cyc, "path": ring_path(hcfg, s, r)}
        org += width
    for k in range(n):
        depth = hcfg.core_cfg(k).ucode_depth
        if len(full[k]) > depth:
            raise TrainCompileError(f"core {k}: its phases and the ring transfers need {len(full[k])} microcode "
                                    f"words, it holds {depth} (use transfers='host')")
        images[k] = [full[k]]
    return out
