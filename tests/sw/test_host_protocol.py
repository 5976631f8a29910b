"""The host's microcode LOADs (:mod:`sw.host_protocol`): beats per image, the LOAD plan
of a phase (broadcast or core by core) and a step's steady-state reload, as the chip
session counts them."""

from __future__ import annotations

from arch.isa import instr_layout
from sw.asm import assemble
from sw.host_protocol import load_beat_count, load_beats, load_plan, load_plan_cycles, load_plan_writes, steady_reload
from tests.rtl.test_chip import CHIP4


def _img(n, seed):
    return [(seed * 7919 + i * 31) % (1 << 20) for i in range(n)]


def test_load_beat_count_matches_load_beats():
    cfg = CHIP4.replace(ucode_depth=8192)
    bpw = -(-instr_layout(cfg).size // cfg.host_width)
    for n in (0, 1, 5, 4095, 4096, 4097, 8192):
        assert len(load_beats(cfg, _img(n, 1))) == load_beat_count(cfg, n) == -(-n // 4096) + n * bpw


def test_load_plan_broadcast_and_per_core():
    cfg, n = CHIP4, CHIP4.cores
    a, b, c = _img(40, 1), _img(30, 2), _img(100, 3)
    beats = lambda w: load_beat_count(cfg, len(w))        # noqa: E731
    # every core takes the same image: one broadcast
    plan = load_plan(cfg, [a] * n, [None] * n)
    assert plan == [(None, a)] and load_plan_cycles(cfg, plan) == beats(a) and load_plan_writes(plan, n) == n * 40
    # nothing changed: no LOAD
    assert load_plan(cfg, [a] * n, [list(a)] * n) == []
    # different images: core after core on the shared host stream
    imgs = [a, b, c, _img(50, 4)]
    plan = load_plan(cfg, imgs, [None] * n)
    assert [d for d, _ in plan] == [0, 1, 2, 3] and load_plan_cycles(cfg, plan) == sum(beats(w) for w in imgs)
    # three cores share an image: broadcast it, then the odd core's own
    plan = load_plan(cfg, [b, a, a, a], [None] * n)
    assert plan == [(None, a), (0, b)] and load_plan_cycles(cfg, plan) == beats(a) + beats(b)
    assert load_plan_writes(plan, n) == n * 40 + 30
    # only core 1 changes: it alone
    assert load_plan(cfg, [a, b, a, a], [a, a, a, a]) == [(1, b)]
    # a broadcast would overwrite two cores holding a long image: core by core is cheaper
    plan = load_plan(cfg, [b, b, c, c], [a, a, c, c])
    assert plan == [(0, b), (1, b)]


def test_steady_reload_counts_the_switch_back_to_the_first_run():
    cfg, n = CHIP4, CHIP4.cores
    x, y = [_img(20, 5)] * n, [_img(60, 6)] * n
    beats = lambda w: load_beat_count(cfg, len(w))        # noqa: E731
    assert steady_reload(cfg, [x, x, x]) == (0, 0)
    assert steady_reload(cfg, [x, y]) == (beats(x[0]) + beats(y[0]), n * 80)
    assert steady_reload(cfg, [x, y, y, x]) == (beats(x[0]) + beats(y[0]), n * 80)   # x -> y, y -> x once each


def test_chip_session_counts_loads_in_phase_cycles():
    """:meth:`sim.sessions.ChipSession.run` returns the RUN's cycles plus the LOAD beats
    before it (:func:`load_plan`), recorded apart in ``loads``; an unchanged image costs
    nothing; ``load`` LOADs without a RUN."""
    from sim.sessions import ChipSession

    cfg, n = CHIP4, CHIP4.cores
    p = assemble("nop\nnop\nhalt", cfg).words()
    q = assemble("nop\nhalt", cfg).words()
    s = ChipSession(cfg, "fast")
    res, cyc = s.run([p] * n)
    assert s.loads.last_cycles == load_beat_count(cfg, len(p)) and cyc == res[0].cycles + s.loads.last_cycles
    assert s.loads.last_per_core == [len(p)] * n
    res, cyc = s.run([p] * n)
    assert s.loads.last_cycles == 0 and cyc == res[0].cycles
    res, cyc = s.run([q, p, p, p])
    assert cyc == max(r.cycles for r in res) + load_beat_count(cfg, len(q))
    assert s.loads.last_per_core == [len(q), 0, 0, 0]
    assert s.load([p] * n) == load_beat_count(cfg, len(p)) and s.load([p] * n) == 0     # core 0 alone
    assert s.loads.cycles == 2 * load_beat_count(cfg, len(p)) + load_beat_count(cfg, len(q))
