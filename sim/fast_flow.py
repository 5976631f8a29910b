"""Layer 2 of the fast model: the loop-level dataflow engine.

A *region* is a window of cycles ``[0, n)`` of the RUN state (a loop nest, some
iterations of one, straight-line code), entered with the exact machine state of
:class:`~sim.fast_common.VecState` (including the micro-op in its operand stage and
the FMAs in flight) and left with the exact state at cycle ``n`` in the same form, so
regions and the per-cycle engine (:mod:`sim.fast_cycle`) can follow each other at any
cycle.

A region is *compiled* into a :class:`Plan`, then the plan is *executed*:

Compilation (depends only on the instruction trace and on the address-register and
pipeline *structure* at entry, never on data):

1. Every instruction address (pc) occurring in the region is one instruction; its
   occurrences are handled together. The address registers' trajectory over the whole
   region (cumulative sums of increments, reset at ``SET``s, strides forward-filled;
   per PE only when predicates differ) gives every SRAM address of every occurrence.
2. *Value nodes*: per instruction, its SRAM reads (``ra``/``rb``), its move result,
   its FMA product and FMA result, its SRAM write data. Every operand read of every
   occurrence is resolved to the write that produced its value, by the timing rules of
   ``docs/architecture.md``: a read in cycle ``u`` sees the writes of cycles ``< u``; the
   FMA write-back wins over a move in the same cycle; the FMA's ``c`` is read
   ``mul_latency`` cycles after the operand stage; an FMA write-back into SRAM drops the
   operand-stage write of that bank; bus values are the driver's operand read (or the
   host lane). Register and read-port writes are resolved by a sorted search over the
   region's writes, per group of PEs with the same predicate/gate masks; SRAM words by
   a search keyed on (PE, address, cycle).
3. The resolved reads form a dependency graph over the value nodes. Its strongly
   connected components are ordered; the only cycles accepted are *accumulation chains*
   (FMAs whose late ``c`` operand is the previous result of the chain: ``mac r += a*b``,
   also interleaved or ping-pong chains). Any other cycle (a register swap, a product
   recurrence, an SRAM word read back by the loop that writes it) raises
   :class:`FlowFail` and the caller falls back to the per-cycle engine.
4. All values of the region live in one table ``V`` [rows, PEs]: a row per occurrence of
   every value node, plus rows for the state at entry (registers, read ports,
   constants, host lanes, FMAs in flight). Every read becomes an index into ``V``. Nodes
   are grouped by dependency level and kind into *batches*: one numpy gather + one
   arithmetic operation for all occurrences of all instructions of the batch;
   accumulation chains of equal length are evaluated with one ``np.add.accumulate``
   along the chain, in its sequential order (bit-exact: each partial sum is rounded to
   the format; checked against sequential :func:`pe.fp_golden.add_bits` by the tests).
5. Counters are counted from the static structure (events per occurrence and PE mask),
   the exit state (register file, read ports, SRAM words, address registers, operand
   stage, FMAs in flight at cycle ``n``) is a list of gathers from ``V``.

Execution binds the entry values (register file, read ports, SRAM, host data, the
FMAs in flight) and runs the batches. Plans are cached by :class:`FlowRunner` (key: the
region's trace and entry structure), so a program run again (a training loop, or the
iterations of an outer loop) skips compilation.

This module cuts a run into regions and caches their plans (:class:`FlowRunner`). The
engine's other parts: the compile-time structures (:mod:`sim.fast_flow_graph`), the
compiler (:mod:`sim.fast_flow_compile`, with the value nodes in
:mod:`sim.fast_flow_nodes`, the resolution of reads and the dependency levels in
:mod:`sim.fast_flow_resolve`, the rows and batches in :mod:`sim.fast_flow_batches`) and
the execution of a plan (:mod:`sim.fast_flow_plan`).
"""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np

from sim.fast_common import ar_columns
from sim.fast_flow_compile import Compiler
from sim.fast_flow_graph import FlowFail
from sim.fast_flow_plan import Plan

__all__ = ["FlowRunner", "FlowFail", "RegionMismatch", "Compiler", "Plan", "state_diff", "clear_plan_cache",
           "clip_spans"]


class RegionMismatch(AssertionError):
    """Verification mode: a region's result differs from the per-cycle engine's."""


def state_diff(a, b, P):
    """First difference between two VecStates as text (None: equal)."""
    for name in ("rf", "mem_a", "mem_b", "rd_a", "rd_b", "ar", "stride", "s1_pred"):
        x, y = getattr(a, name), getattr(b, name)
        if not np.array_equal(x, y):
            idx = tuple(int(i) for i in np.argwhere(np.asarray(x) != np.asarray(y))[0])
            what = {"mem_a": "SRAM A [PE, address]", "mem_b": "SRAM B [PE, address]", "rf": "RF [PE, register]",
                    "ar": "AR [PE, index]", "stride": "stride [PE, index]"}.get(name, name)
            return f"{what} {idx}: per-cycle {np.asarray(x)[idx]}, region {np.asarray(y)[idx]}"
    if a.s1.key != b.s1.key or any(not np.array_equal(np.broadcast_to(u, (P,)), np.broadcast_to(v, (P,)))
                                   for u, v in zip(a.s1_addr, b.s1_addr)):
        return "operand-stage micro-op or its addresses"
    if (a.op_hin, a.op_hout, a.op_hlast) != (b.op_hin, b.op_hout, b.op_hlast) or \
            (a.op_hin and not np.array_equal(a.op_lanes, b.op_lanes)):
        return "operand-stage host lanes"
    for pipe in ("mp", "ap"):
        for i, (e, f) in enumerate(zip(getattr(a, pipe), getattr(b, pipe))):
            if (e is None) != (f is None):
                return f"FMA pipeline {pipe}[{i}]: {'empty' if e is None else 'busy'} vs {'empty' if f is None else 'busy'}"
            if e is None:
                continue
            if not np.array_equal(e.valid, f.valid):
                return f"FMA pipeline {pipe}[{i}].valid"
            va = e.valid
            for fld in e.__slots__:
                if fld == "valid":
                    continue
                u, v = getattr(e, fld), getattr(f, fld)
                if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                    u = np.broadcast_to(np.asarray(u), (P,))[va]     # lanes of PEs without the FMA
                    v = np.broadcast_to(np.asarray(v), (P,))[va]     # are never used
                if not np.array_equal(np.asarray(u), np.asarray(v)):
                    return f"FMA pipeline {pipe}[{i}].{fld}"
    return None


# -----------------------------------------------------------------------------------------
# region planning
# -----------------------------------------------------------------------------------------
#: compiled plans per configuration (process-wide, LRU)
_PLANS: dict = {}
#: bytes of plans kept per configuration: a minibatch GD step of the small network at S
#: runs about 450 plans of about 1.4 MB each, so a smaller cache evicts every plan before
#: the next step reuses it (and recompiles them all, 3x the step's time)
PLAN_CACHE_BYTES = 1 << 31
#: bytes of the plans in each cache of _PLANS (by id)
_PLAN_BYTES: dict = {}


def clear_plan_cache() -> None:
    """Forget every compiled plan (benchmarks of cold runs)."""
    for c in _PLANS.values():
        c.clear()
    _PLAN_BYTES.clear()


def clip_spans(spans, a, b) -> list:
    """The loop spans (absolute starts) restricted to cycles ``[a, b)``: a span inside is
    kept, the whole iterations of one crossing ``a`` or ``b`` are kept as a span, and a
    partial iteration is replaced by its inner loops, restricted the same way."""
    from sim.fast_trace import Span

    out = []
    for s in spans:
        if s.end <= a or s.start >= b:
            continue
        if a <= s.start and s.end <= b:
            out.append(s)
            continue
        L = s.iter_len
        i0 = max(0, -(-(a - s.start) // L))                  # the first whole iteration in [a, b)
        i1 = min(s.n_iter, (b - s.start) // L)                # ... and the end of the whole ones

        def inner(it):
            s0 = s.start + it * L
            return clip_spans([FlowRunner._shift(c, s0) for c in s.children], a, b)

        if i1 <= i0:                                          # [a, b) within one iteration (or two partial ones)
            for it in sorted({(a - s.start) // L, (b - 1 - s.start) // L}):
                if 0 <= it < s.n_iter:
                    out += inner(it)
            continue
        if i0 > 0 and s.start + i0 * L > a:
            out += inner(i0 - 1)
        out.append(Span(s.start + i0 * L, i1 - i0, L, s.level, s.children))
        if i1 < s.n_iter and s.start + i1 * L < b:
            out += inner(i1)
    return out


class FlowRunner:
    """Cuts a run into regions along the trace's loop spans; runs each on the dataflow
    engine (compiled plans, cached), falling back to the per-cycle engine for regions
    it rejects."""

    def __init__(self, model, max_elems: int = 1 << 22, cut=None, cache_size: int = 1 << 16, verify: bool = False,
                 cache_bytes: int = PLAN_CACHE_BYTES):
        self.m = model
        self.max_elems = max_elems
        self.cut = cut          # tests: optional callable(x, y) -> list of cut points
        self.verify = verify    # diagnosis: re-run every region on the per-cycle engine and compare
        # plans are shared by every model of the same configuration in the process (the
        # same program on several cores compiles once)
        self.cache = _PLANS.setdefault(model.cfg.to_json(), OrderedDict())
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes      # plans kept per configuration: at most this many bytes
        self.last_fail = None

    def run(self, trace, allpcs, offs, lanes, lane_of, ctr, out):
        """Execute every cycle of a run; returns the statistics."""
        self.begin(trace, allpcs, offs, lanes, lane_of, ctr, out)
        self.advance(0, len(allpcs))
        return self.stats

    def begin(self, trace, allpcs, offs, lanes, lane_of, ctr, out):
        """Start a run (then :meth:`advance` over consecutive windows of its cycles)."""
        self.args = (allpcs, offs, lanes, lane_of, ctr, out)
        self.stats = {"flow_cycles": 0, "cycle_engine_cycles": 0, "regions": 0, "fallbacks": 0,
                      "plans_compiled": 0, "plans_reused": 0}
        from sim.core_model import pe_start_cycles

        sh = pe_start_cycles(self.m.cfg)
        self.spans = [self._shift(s, sh) for s in trace.spans]

    def advance(self, a, b):
        """Execute cycles ``[a, b)`` of the run (regions never cross ``a`` or ``b``: the
        loop spans are cut there, :func:`clip_spans`)."""
        self._seq(a, b, clip_spans(self.spans, a, b))

    @staticmethod
    def _shift(span, d):
        from sim.fast_trace import Span

        return Span(span.start + d, span.n_iter, span.iter_len, span.level, span.children)

    def _limit(self):
        return max(1, self.max_elems // self.m.P)

    def _parts(self, a, b, spans):
        parts = []
        x = a
        for s in sorted(spans, key=lambda s: s.start):
            if s.start > x:
                parts.append(("straight", x, s.start, None))
            parts.append(("loop", s.start, s.end, s))
            x = s.end
        if x < b:
            parts.append(("straight", x, b, None))
        return parts

    def _seq(self, a, b, spans):
        lim = self._limit()
        group = []
        glen = 0

        def flush():
            nonlocal group, glen
            if not group:
                return
            x0, y0 = group[0][1], group[-1][2]
            if len(group) == 1 or not self._try(x0, y0):
                for p in group:
                    self._part(p)
            group, glen = [], 0

        for p in self._parts(a, b, spans):
            n = p[2] - p[1]
            if n > lim:
                flush()
                self._part(p)
                continue
            if glen + n > lim:
                flush()
            group.append(p)
            glen += n
        flush()

    def _part(self, p):
        kind, x, y, span = p
        lim = self._limit()
        if kind == "straight":
            for a in range(x, y, lim):
                self._straight(a, min(y, a + lim))
            return
        self._iters(span, 0, span.n_iter)

    def _iters(self, span, i, j):
        """Iterations [i, j) of a loop span: one region if possible; otherwise groups
        that fit, halves (a cycle through SRAM written and read back far apart in time
        disappears when the region is cut between them), single iterations split into
        their parts (a dependency carried from one iteration to the next), or the
        per-cycle engine (a recurrence inside an innermost loop)."""
        lim = self._limit()
        L = span.iter_len
        a, b = span.start + i * L, span.start + j * L
        if b - a > lim:
            per = max(1, lim // L)
            if per < j - i and L <= lim:
                for k in range(i, j, per):
                    self._iters(span, k, min(j, k + per))
                return
        elif self._try(a, b):
            return
        fail = self.last_fail
        if j - i > 1 and (b - a > lim or (fail is not None and fail.memory)):
            h = (i + j) // 2
            self._iters(span, i, h)
            self._iters(span, h, j)
        elif span.children:
            for it in range(i, j):
                s0 = span.start + it * L
                self._seq(s0, s0 + L, [self._shift(c, s0) for c in span.children])
        elif b - a > lim:
            for k in range(a, b, lim):
                self._straight(k, min(b, k + lim))
        else:
            self._cycles(a, b)

    def _straight(self, x, y):
        """Steps without loop structure (e.g. loops the trace had to step): halves until
        accepted, the per-cycle engine below 32 cycles."""
        if self._try(x, y):
            return
        if y - x <= 32:
            self._cycles(x, y)
            return
        h = (x + y) // 2
        self._straight(x, h)
        self._straight(h, y)

    def _try(self, x, y) -> bool:
        self.last_fail = None
        sp = self.m._spad_run
        if self.cut is not None or (sp is not None and sp.cut_points(x, y)):
            # test cuts, and the scratchpad reads that see a write of the same run
            # (FastModel._SpadRun: a region never holds one after its first cycle)
            cuts = [c for c in self.cut(x, y) if x < c < y] if self.cut is not None else []
            if sp is not None:
                cuts += sp.cut_points(x, y)
            if cuts:
                pts = [x] + sorted(set(cuts)) + [y]
                for a, b in zip(pts[:-1], pts[1:]):
                    if not self._try_one(a, b):
                        # no cut point inside [a, b): its loops and straight parts are
                        # split as any region's, the per-cycle engine the last resort
                        self._seq(a, b, clip_spans(self.spans, a, b))
                return True
        return self._try_one(x, y)

    def _key(self, x, y):
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        st = self.m.state
        mp = tuple(None if e is None else (e.valid.tobytes(), e.dst, e.c_rf, e.c if e.c_rf else None, e.wb,
                                           np.asarray(e.waddr).tobytes()) for e in st.mp)
        ap = tuple(None if e is None else (e.valid.tobytes(), e.dst, e.wb, np.asarray(e.waddr).tobytes())
                   for e in st.ap)
        s1 = (None if st.s1.nop else (st.s1.key, st.s1_pred.tobytes(),
                                        b"".join(np.asarray(a).tobytes() for a in st.s1_addr)))
        # what the region executes: the micro-op template of each of its instructions (in
        # the order of their addresses) and which cycles issue which; not the addresses
        # themselves, nor the rest of the image (a plan depends on neither), so the cores
        # share the plans of their common code wherever it sits in their images
        tkeys, inv, cols = self._code(allpcs[x:y], st.ar.shape[1])
        return (tkeys, inv, offs[x:y].tobytes(), tuple(cols),
                st.ar[:, cols].tobytes(), st.stride[:, cols].tobytes(), s1, st.op_hin, st.op_hout, st.op_hlast,
                mp, ap)

    def _code(self, pcs, n_ar):
        """``(template keys, issue pattern, address registers named)`` of the
        instructions ``pcs``: a function of the image and ``pcs`` alone, memoized per
        image (the regions of a run and of the runs after it repeat their windows)."""
        memo = self.m._shared().setdefault("region_code", {})
        raw = pcs.tobytes()
        hit = memo.get(raw)
        if hit is None:
            upcs, inv = np.unique(pcs, return_inverse=True)
            tm = self.m._pc_tables()[0]
            us = [tm[p] for p in upcs.tolist()]
            # of the address registers, only the ones the region names (Plan.ar_cols)
            hit = (tuple(u.key for u in us), inv.astype(np.int32).tobytes(), ar_columns(us, n_ar))
            if len(memo) >= 1 << 16:
                memo.clear()
            memo[raw] = hit
        return hit

    def _try_one(self, x, y) -> bool:
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        key = self._key(x, y)
        plan = self.cache.get(key)
        self.last_fail = None
        if plan is None:
            try:
                plan = Compiler(self.m, allpcs, offs, lane_of, x, y).compile()
            except FlowFail as e:
                # cached without its traceback: the frames would keep the compiler's whole
                # dependency graph alive (gigabytes over a long run)
                plan = e.with_traceback(None)
                plan.__context__ = plan.__cause__ = None
            self.cache[key] = plan
            size = _PLAN_BYTES.get(id(self.cache), 0) + getattr(plan, "nbytes", 0)
            while len(self.cache) > 1 and (len(self.cache) > self.cache_size or size > self.cache_bytes):
                _, old = self.cache.popitem(last=False)
                size -= getattr(old, "nbytes", 0)
            _PLAN_BYTES[id(self.cache)] = size
            self.stats["plans_compiled"] += 1
        else:
            self.cache.move_to_end(key)
            self.stats["plans_reused"] += 1
        if isinstance(plan, FlowFail):
            self.stats["fallbacks"] += 1
            self.last_fail = plan
            return False
        if self.m._spad_run is not None:
            self.m._spad_run.sync(x, y)
        if self.verify:
            ref_state, ref_ctr, ref_out = copy.deepcopy((self.m.state, ctr, out))
        commit = plan.run(self.m, self.m.state, lanes, lane_of, x)
        commit(ctr, out)
        if self.verify:
            self._verify(x, y, ref_state, ref_ctr, ref_out, ctr, out)
        self.stats["flow_cycles"] += y - x
        self.stats["regions"] += 1
        return True

    def _verify(self, x, y, st0, ctr0, out0, ctr, out):
        """Run cycles [x, y) on the per-cycle engine from the region's entry state and
        raise :class:`RegionMismatch` naming the first difference from the region's result."""
        allpcs, offs, lanes, lane_of, _, _ = self.args
        m = self.m
        saved = m.state
        m.state = st0
        try:
            m._run_cycles(x, y, allpcs, offs, lanes, lane_of, ctr0, out0, sync=False)
        finally:
            m.state = saved
        diff = state_diff(st0, saved, m.P)
        if diff is None and out0 != out:
            k = next(i for i, (a, b) in enumerate(zip(out0 + [None], out + [None])) if a != b)
            diff = f"output beat {k}: per-cycle {out0[k] if k < len(out0) else None}, region " \
                   f"{out[k] if k < len(out) else None}"
        if diff is None:
            a, b = ctr0.as_dict(), ctr.as_dict()
            bad = [k for k in a if a[k] != b[k] and k not in ("cycles", "instructions")]
            if bad:
                diff = f"counter {bad[0]}: per-cycle {a[bad[0]]}, region {b[bad[0]]}"
        if diff is not None:
            raise RegionMismatch(f"region of cycles [{x}, {y}) (RUN cycles from the start latency): {diff}")

    def _cycles(self, a, b):
        allpcs, offs, lanes, lane_of, ctr, out = self.args
        self.m._run_cycles(a, b, allpcs, offs, lanes, lane_of, ctr, out)
        self.stats["cycle_engine_cycles"] += b - a
