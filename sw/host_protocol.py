"""Host side of the core's AXI4-Stream protocol (``docs/core.md``, "Host interface"):
build command beat streams and decode what the core sends back."""

from __future__ import annotations

import numpy as np

from arch.host import Cmd
from arch.counters import counter_names
from arch.isa import instr_layout
from arch.errors import InputError

__all__ = ["header", "load_beats", "load_beat_count", "load_plan", "load_plan_cycles", "load_plan_writes",
           "steady_reload", "run_beats", "counters_beats", "clear_beats", "decode_counters", "ProtocolError"]


class ProtocolError(InputError):
    """A command does not fit the protocol, or a reply is malformed."""


def header(cmd: int, arg0: int = 0, arg1: int = 0) -> int:
    if not 0 <= arg0 < (1 << 16) or not 0 <= arg1 < (1 << 12):
        raise ProtocolError(f"header arguments out of range: arg0={arg0} (16 bits), arg1={arg1} (12 bits)")
    return (cmd & 0xF) | (arg0 << 4) | (arg1 << 20)


#: the most words one LOAD command carries (its length field: 12 bits, 0 meaning 4096)
LOAD_CHUNK = 4096


def _beats_per_word(cfg) -> int:
    return -(-instr_layout(cfg).size // cfg.host_width)


def load_beats(cfg, words, addr: int = 0) -> list[int]:
    """LOAD commands for microcode ``words`` (ints) at ``addr`` (split into
    <= :data:`LOAD_CHUNK`-word chunks)."""
    words = [int(w) for w in words]
    bits = instr_layout(cfg).size
    hw = cfg.host_width
    bpw = _beats_per_word(cfg)
    if addr < 0 or addr + len(words) > cfg.ucode_depth:
        raise ProtocolError(f"program of {len(words)} words at {addr} does not fit the "
                            f"{cfg.ucode_depth}-word microcode memory")
    out = []
    for start in range(0, len(words), LOAD_CHUNK):
        chunk = words[start:start + LOAD_CHUNK]
        out.append(header(Cmd.LOAD, addr + start, len(chunk) % LOAD_CHUNK))
        for wd in chunk:
            if not 0 <= wd < (1 << bits):
                raise ProtocolError(f"microcode word {wd:#x} is wider than {bits} bits")
            out += [(wd >> (k * hw)) & ((1 << hw) - 1) for k in range(bpw)]
    return out


def load_beat_count(cfg, n_words: int) -> int:
    """Beats (host stream cycles, one beat per cycle) of :func:`load_beats` for
    ``n_words`` words: one header per <=4096-word chunk, ``ceil(instr_bits /
    host_width)`` beats per word."""
    return -(-n_words // LOAD_CHUNK) + n_words * _beats_per_word(cfg)


def _same(a, b) -> bool:
    return a is b or (a is not None and b is not None and list(a) == list(b))


def _runs(cfg, idx) -> tuple:
    """The runs ``(starts, ends)`` (inclusive) of positions ``idx`` (ascending) one LOAD
    each writes: two runs are merged across a gap of equal words when re-sending the
    gap costs no more beats than a header; and their beats."""
    if len(idx) == 0:
        return idx, idx, 0
    brk = np.flatnonzero((np.diff(idx) - 1) * _beats_per_word(cfg) > 1)
    starts = idx[np.concatenate(([0], brk + 1))]
    ends = idx[np.concatenate((brk, [len(idx) - 1]))]
    lens = ends - starts + 1
    return starts, ends, int((-(-lens // LOAD_CHUNK)).sum() + lens.sum() * _beats_per_word(cfg))


def _diff(base, target):
    """Positions of ``target`` (word keys, :func:`_keys`) a core holding ``base`` (word
    keys, or None: unknown) must be written at."""
    if base is None:
        return np.arange(len(target))
    m = min(len(base), len(target))
    d = np.ones(len(target), dtype=bool)
    d[:m] = base[:m] != target[:m]
    return np.flatnonzero(d)


#: per image object (by identity, the image kept alive beside it) its word keys
_KEYS: dict = {}


def _keys(words, limbs: int) -> np.ndarray:
    """The image ``words`` as a 1-D array of ``8 limbs``-byte keys, equal where the words
    are (numpy compares them elementwise)."""
    hit = _KEYS.get((id(words), limbs))
    if hit is not None and hit[0] is words:
        return hit[1]
    raw = b"".join(int(w).to_bytes(8 * limbs, "little") for w in words)
    keys = np.frombuffer(raw, dtype=np.dtype((np.void, 8 * limbs)))
    if len(_KEYS) > 4096:
        _KEYS.clear()
    _KEYS[(id(words), limbs)] = (words, keys)
    return keys


def _consensus(images, keys) -> list:
    """Per position the word most cores' images hold (positions past an image's end
    hold nothing; a tie goes to the lowest core)."""
    n, width = len(keys), max(len(k) for k in keys)
    _, ids = np.unique(np.concatenate(keys), return_inverse=True)
    mat = np.full((n, width), -1, dtype=np.int64)
    pos = 0
    for k, a in enumerate(keys):
        mat[k, :len(a)] = ids[pos:pos + len(a)]
        pos += len(a)
    counts = np.stack([np.where(mat[j] >= 0, (mat == mat[j]).sum(axis=0), -1) for j in range(n)])
    holder = counts.argmax(axis=0)
    return [images[holder[i]][i] for i in range(width)]


def load_plan(cfg, images, loaded) -> list:
    """The LOADs that take every core ``k`` from microcode ``loaded[k]`` (None:
    unknown) to ``images[k]`` (from address 0): ``[(dest, addr, words)]``, ``dest`` a
    core or None for a broadcast (``tdest`` all ones, ``docs/chip.md``). The cores
    share one host stream, so the LOADs go one after another; the plan is the one with
    the fewest beats of these: every changed core writes the words in which its image
    differs from what it holds; or one image is broadcast first (one a changed core
    takes, or the consensus image: per word the one most cores' images hold), over the
    span of addresses some core must change when every core's contents are known (else
    from address 0), and then every core writes the words in which its image differs
    from what it then holds. A core writes a run of words with one LOAD (a header beat);
    words past the end of a core's image are never compared (they are not its
    program's)."""
    n = len(images)
    need = [k for k in range(n) if not _same(loaded[k], images[k])]
    if not need:
        return []
    limbs = max(1, -(-instr_layout(cfg).size // 64))
    tgt = [_keys(images[k], limbs) for k in range(n)]
    held = [None if loaded[k] is None else _keys(loaded[k], limbs) for k in range(n)]

    def patches(ks, base):
        """Per core of ``ks`` its runs from ``base(k)``, and their beats in all."""
        runs = {k: _runs(cfg, _diff(base(k), tgt[k])) for k in ks}
        return runs, sum(r[2] for r in runs.values())

    best_head = None
    best_runs, best_cost = patches(need, lambda k: held[k])
    cands: dict = {}
    for k in need:
        cands.setdefault(tgt[k].tobytes(), (images[k], tgt[k]))
    if len(need) > 1:
        cons = _consensus(images, tgt)
        ck = _keys(cons, limbs)
        cands.setdefault(ck.tobytes(), (cons, ck))
    lo, hi = _span(best_runs) if all(h is not None for h in held) else (0, None)
    for words, ids in cands.values():
        ids = ids[lo:hi]
        head = load_beat_count(cfg, len(ids))
        if head >= best_cost or not len(ids):
            continue
        runs, cost = patches(range(n), lambda k: _overlay(held[k], ids, lo))
        if head + cost < best_cost:
            best_head, best_runs, best_cost = words[lo:lo + len(ids)], runs, head + cost
    plan = [] if best_head is None else [(None, lo, [int(x) for x in best_head])]
    for k, (starts, ends, _) in best_runs.items():
        plan += [(k, int(s), [int(x) for x in images[k][s:e + 1]]) for s, e in zip(starts, ends)]
    return plan


def _span(runs: dict) -> tuple:
    """``(lo, hi)``: the addresses from the first to past the last word the cores'
    ``runs`` (:func:`_runs` per core) write."""
    st = [int(r[0][0]) for r in runs.values() if len(r[0])]
    en = [int(r[1][-1]) + 1 for r in runs.values() if len(r[1])]
    return (min(st), max(en)) if st else (0, 0)


def _overlay(held, ids, lo: int):
    """Word keys a core holds after a broadcast of ``ids`` at address ``lo``: ``held``
    with them written over (None: unknown, so only a broadcast from address 0 is known;
    ``held`` itself when it ends before ``lo``: the words between are unknown, so from its
    end every word is compared as different, :func:`_diff`)."""
    if held is None:
        return ids if lo == 0 else None
    if len(held) < lo:
        return held
    out = held.copy() if len(held) >= lo + len(ids) else np.concatenate([held[:lo], ids])
    out[lo:lo + len(ids)] = ids
    return out


def load_plan_cycles(cfg, plan) -> int:
    """Host stream cycles of a :func:`load_plan` (one beat per cycle)."""
    return sum(load_beat_count(cfg, len(w)) for _, _, w in plan)


def load_plan_writes(plan, cores: int) -> int:
    """Microcode words a :func:`load_plan` writes, summed over the cores (a broadcast
    writes every core)."""
    return sum(len(w) * (cores if dest is None else 1) for dest, _, w in plan)


def steady_reload(cfg, runs) -> tuple[int, int]:
    """``(host stream cycles, microcode words written summed over the cores)`` of the
    LOADs of one step in steady state: ``runs`` are the per-core images of the step's
    RUNs in order, and the step after it starts where this one ends (so the last RUN's
    images are loaded when the first RUN begins)."""
    cycles = words = 0
    loaded = list(runs[-1]) if runs else []
    for imgs in runs:
        plan = load_plan(cfg, imgs, loaded)
        cycles += load_plan_cycles(cfg, plan)
        words += load_plan_writes(plan, len(imgs))
        loaded = list(imgs)
    return cycles, words


def run_beats(pc: int = 0, data=()) -> list[int]:
    """A RUN command followed by the data beats its ``hin`` instructions consume."""
    return [header(Cmd.RUN, pc)] + [int(d) for d in data]


def counters_beats() -> list[int]:
    return [header(Cmd.COUNTERS)]


def clear_beats() -> list[int]:
    return [header(Cmd.CLEAR)]


def decode_counters(cfg, beats) -> dict:
    """Counter values from the beats of a COUNTERS reply (ints or (data, last) pairs)."""
    names = counter_names(cfg)
    hw = cfg.host_width
    per = -(-64 // hw)
    data = [b[0] if isinstance(b, (tuple, list)) else int(getattr(b, "data", b)) for b in beats]
    if len(data) != per * len(names):
        raise ProtocolError(f"expected {per * len(names)} counter beats, got {len(data)}")
    out = {}
    for i, name in enumerate(names):
        v = 0
        for k in range(per):
            v |= data[i * per + k] << (k * hw)
        out[name] = v & ((1 << 64) - 1)
    return out
