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
    assert plan == [(None, 0, a)] and load_plan_cycles(cfg, plan) == beats(a) and load_plan_writes(plan, n) == n * 40
    # nothing changed: no LOAD
    assert load_plan(cfg, [a] * n, [list(a)] * n) == []
    # different images: core after core on the shared host stream
    imgs = [a, b, c, _img(50, 4)]
    plan = load_plan(cfg, imgs, [None] * n)
    assert [(d, ad) for d, ad, _ in plan] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert load_plan_cycles(cfg, plan) == sum(beats(w) for w in imgs)
    # three cores share an image: broadcast it, then the odd core's own
    plan = load_plan(cfg, [b, a, a, a], [None] * n)
    assert plan == [(None, 0, a), (0, 0, b)] and load_plan_cycles(cfg, plan) == beats(a) + beats(b)
    assert load_plan_writes(plan, n) == n * 40 + 30
    # only core 1 changes: it alone
    assert load_plan(cfg, [a, b, a, a], [a, a, a, a]) == [(1, 0, b)]
    # a broadcast would overwrite two cores holding a long image: core by core is cheaper
    plan = load_plan(cfg, [b, b, c, c], [a, a, c, c])
    assert plan == [(0, 0, b), (1, 0, b)]


def _apply(plan, held):
    """The microcode each core holds after ``plan`` (a copy of ``held``, None: empty)."""
    mem = [list(h or []) for h in held]
    for dest, addr, w in plan:
        for k in range(len(mem)) if dest is None else (dest,):
            mem[k] += [None] * max(0, addr + len(w) - len(mem[k]))
            mem[k][addr:addr + len(w)] = w
    return mem


def test_load_plan_writes_only_the_words_that_differ():
    """Images that differ in a few words: one broadcast, then per core a LOAD per run of
    words in which its image differs (runs closer than a header's beats merged); every
    core ends up holding its image."""
    cfg, n = CHIP4, CHIP4.cores
    bpw = -(-instr_layout(cfg).size // cfg.host_width)
    base = _img(200, 7)
    imgs = []
    for k in range(n):
        w = list(base)
        w[5], w[150 + k] = 1000 + k, 2000 + k       # two per-core words far apart
        imgs.append(w)
    plan = load_plan(cfg, imgs, [None] * n)
    # the consensus broadcast (word 5 is no core's majority: core 0's wins the tie), then
    # core 0 writes its word 150 and every other core its words 5 and 150 + k
    assert plan[0] == (None, 0, base[:5] + [1000] + base[6:]) and len(plan) == 2 * n
    assert all(len(w) == 1 for d, _, w in plan[1:])
    assert load_plan_cycles(cfg, plan) == load_beat_count(cfg, 200) + (2 * n - 1) * (1 + bpw)
    mem = _apply(plan, [None] * n)
    assert all(mem[k][:200] == imgs[k] for k in range(n))
    # from what the cores hold: each core rewrites only its changed words
    nxt = [list(w) for w in imgs]
    for k in range(n):
        nxt[k][7:9] = [3000 + k, 3001]       # a run of two words
    nxt[2] = nxt[2] + [9, 9, 9]              # a longer image: the words past the old end too
    plan = load_plan(cfg, nxt, imgs)
    assert sorted((d, a, len(w)) for d, a, w in plan) == [(0, 7, 2), (1, 7, 2), (2, 7, 2), (2, 200, 3), (3, 7, 2)]
    mem = _apply(plan, imgs)
    assert all(mem[k][:len(nxt[k])] == nxt[k] for k in range(n))


def test_load_plan_consensus_broadcast():
    """No two cores share an image, but most words agree: the consensus image (per word
    the most common) is broadcast, then each core patches its own words."""
    cfg, n = CHIP4, CHIP4.cores
    base = _img(300, 11)
    imgs = []
    for k in range(n):
        w = list(base)
        w[10 * k:10 * k + 3] = [7000 + k] * 3
        imgs.append(w)
    plan = load_plan(cfg, imgs, [None] * n)
    assert plan[0] == (None, 0, base)
    assert [(d, a, len(w)) for d, a, w in plan[1:]] == [(k, 10 * k, 3) for k in range(n)]
    assert all(m == i for m, i in zip(_apply(plan, [None] * n), imgs))


def test_load_plan_broadcasts_only_the_span_that_changes():
    """Every core holds its own words at the bottom (a resident region, the same in
    every image) and a shared program above: a new program is broadcast from the first
    address that changes, the resident words never rewritten; a core whose old image ends
    below that address gets its words too, for fewer beats than core by core."""
    cfg, n = CHIP4, CHIP4.cores
    own = [_img(30, 20 + k) for k in range(n)]
    old, new = _img(80, 30), _img(70, 31)
    new[:5] = old[:5]                                   # the programs' first words agree
    plan = load_plan(cfg, [own[k] + new for k in range(n)], [own[k] + old for k in range(n)])
    assert plan == [(None, 35, new[5:])]
    assert load_plan_cycles(cfg, plan) == load_beat_count(cfg, 65)
    # core 2 held only part of its resident words: it writes from where its image ended
    held = [own[k] + old for k in range(n)]
    held[2] = own[2][:20]
    plan = load_plan(cfg, [own[k] + new for k in range(n)], held)
    assert plan[0][0] is None and load_plan_cycles(cfg, plan) < n * load_beat_count(cfg, 65)
    mem = _apply(plan, held)
    assert all(mem[k][:100] == own[k] + new for k in range(n))


def test_load_plan_random_images_end_up_loaded():
    """Random images with shared and private stretches, random starting contents: every
    core holds its image after the plan, and the plan never costs more than loading
    each changed core whole."""
    import random

    from tests.sw.test_train import _seed

    rng = random.Random(_seed())
    cfg, n = CHIP4, CHIP4.cores
    for _ in range(40):
        pool = [rng.randrange(1 << 20) for _ in range(6)]
        imgs = [[rng.choice(pool) for _ in range(rng.randrange(0, 60))] for _ in range(n)]
        held = [None if rng.random() < 0.3 else [rng.choice(pool) for _ in range(rng.randrange(0, 60))]
                for _ in range(n)]
        plan = load_plan(cfg, imgs, held)
        mem = _apply(plan, held)
        assert all(mem[k][:len(imgs[k])] == imgs[k] for k in range(n))
        whole = sum(load_beat_count(cfg, len(imgs[k])) for k in range(n) if held[k] != imgs[k])
        assert load_plan_cycles(cfg, plan) <= whole


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
    res, cyc = s.run([q, p, p, p])         # q's first word is p's: core 0 writes the halt at 1
    assert cyc == max(r.cycles for r in res) + load_beat_count(cfg, 1)
    assert s.loads.last_per_core == [1, 0, 0, 0]
    assert s.load([p] * n) == load_beat_count(cfg, 2) and s.load([p] * n) == 0     # core 0: words 1 and 2
    assert s.loads.cycles == load_beat_count(cfg, len(p)) + load_beat_count(cfg, 1) + load_beat_count(cfg, 2)
