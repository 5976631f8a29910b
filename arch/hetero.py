"""Heterogeneous chips: groups of cores of different kinds on one ring.

A :class:`HeteroConfig` is an ordered tuple of :class:`CoreGroup`: ``count`` cores of one
kind (an :class:`~arch.config.ArchConfig`: ``nr``, ``fmt``, SRAM, scratchpad and every
other per-core parameter), placed one group after another around the ring (core ``0``
is the first core of group 0). The chip-level fields (:data:`SHARED_FIELDS`: clock,
ring FIFO depth, DRAM, counter width) must be equal in every group. Where two
neighbouring cores differ in ``nr`` or ``fmt``, the ring link between them goes through
a *crossing* (``docs/chip.md``, "Heterogeneous chips"; :class:`Crossing`): a gearbox
that collects or splits beats and a number-format converter.

Per-core configurations (:meth:`HeteroConfig.core_cfg`) are the group's kind with
``cores`` set to the chip's core count, so each core is built exactly as a core of a
homogeneous chip of that kind. Configs load from JSON
(``{"groups": [{"count": 2, "preset": "tiny"}, {"count": 2, "preset": "small"}]}``;
each group's other keys are :class:`~arch.config.ArchConfig` fields) and presets are in
:data:`HETERO_PRESETS`, derived from :data:`arch.config.PRESETS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from arch.config import PRESETS, ArchConfig, ConfigError

__all__ = ["CoreGroup", "HeteroConfig", "Crossing", "SHARED_FIELDS", "HETERO_PRESETS", "CROSSING_LATENCY",
           "hetero_from_arg", "mix_kind"]

#: fields every group must share: they are the chip's (one clock, one ring protocol, one
#: DRAM system, one host counter format)
SHARED_FIELDS = ("clock_mhz", "ring_fifo_depth", "dram_mib", "dram_gbps", "dram_latency", "counter_bits")

#: cycles a crossing adds to a beat's hop: the converter's output register (a beat a
#: ``rout`` sends in cycle ``t`` that completes a receiver beat can be taken in ``t + 4``)
CROSSING_LATENCY = 1


@dataclass(frozen=True)
class CoreGroup:
    """``count`` consecutive cores of the ring, all of kind ``cfg`` (its ``cores`` field
    is ignored: every core of a chip has the chip's core count)."""

    count: int
    cfg: ArchConfig

    def __post_init__(self):
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= 64:
            raise ConfigError(f"CoreGroup.count must be an integer in 1..64, got {self.count!r}")
        if not isinstance(self.cfg, ArchConfig):
            raise ConfigError(f"CoreGroup.cfg must be an ArchConfig, got {type(self.cfg).__name__}")


@dataclass(frozen=True)
class Crossing:
    """The ring link from core ``src`` (kind ``a``) to core ``dst`` (kind ``b``), where
    the kinds differ in ``nr`` or ``fmt``. ``ratio``: sender beats per receiver beat
    (``nr_b / nr_a`` when the receiver is wider, a gearbox *collecting* beats) or
    receiver beats per sender beat (``nr_a / nr_b``, *splitting*); 1 for a format change
    only."""

    src: int
    dst: int
    a: ArchConfig
    b: ArchConfig

    @property
    def widen(self) -> bool:
        """True when the receiver's beat is at least as wide (collect; ``ratio`` >= 1)."""
        return self.b.nr >= self.a.nr

    @property
    def ratio(self) -> int:
        return self.b.nr // self.a.nr if self.widen else self.a.nr // self.b.nr


def _shared_diff(a: ArchConfig, b: ArchConfig) -> list:
    return [f for f in SHARED_FIELDS if getattr(a, f) != getattr(b, f)]


@dataclass(frozen=True)
class HeteroConfig:
    """A chip of :class:`CoreGroup` s on one ring (in ring order).

    Raises :class:`~arch.config.ConfigError` (one line) for no group, a total core count
    that is not even in 2..64, groups that differ in a :data:`SHARED_FIELDS` field, a
    distribution stage (the crossing's timing is defined without it), or neighbouring
    kinds whose ``nr`` are not one a power-of-two multiple of the other.
    """

    groups: tuple

    def __post_init__(self):
        groups = tuple(self.groups) if isinstance(self.groups, (list, tuple)) else None
        if not groups:
            raise ConfigError("HeteroConfig.groups must be a non-empty list of CoreGroup")
        for i, g in enumerate(groups):
            if not isinstance(g, CoreGroup):
                raise ConfigError(f"HeteroConfig.groups[{i}] must be a CoreGroup, got {type(g).__name__}")
        object.__setattr__(self, "groups", groups)
        n = sum(g.count for g in groups)
        if not 2 <= n <= 64 or n % 2:
            raise ConfigError(f"HeteroConfig: {n} cores in all; a chip needs an even number in 2..64 (a 2 x C array)")
        base = groups[0].cfg
        for i, g in enumerate(groups):
            diff = _shared_diff(base, g.cfg)
            if diff:
                f = diff[0]
                raise ConfigError(f"HeteroConfig.groups[{i}].{f} = {getattr(g.cfg, f)!r} differs from group 0's "
                                  f"{getattr(base, f)!r}: {', '.join(SHARED_FIELDS)} are the chip's, shared by all groups")
            if g.cfg.dist_stage or g.cfg.fan_stage:
                raise ConfigError(f"HeteroConfig.groups[{i}] has a distribution stage: the ring crossing's timing is "
                                  f"defined without it (dist_stage=False)")
        for i, g in enumerate(groups):
            h = groups[(i + 1) % len(groups)]
            lo, hi = sorted((g.cfg.nr, h.cfg.nr))
            if hi % lo or (hi // lo) & (hi // lo - 1):
                raise ConfigError(f"HeteroConfig: groups {i} and {(i + 1) % len(groups)} have nr={g.cfg.nr} and "
                                  f"nr={h.cfg.nr}; neighbouring kinds need one nr a power-of-two multiple of the other "
                                  f"(the crossing's gearbox)")
        cfgs = tuple(g.cfg.replace(cores=n) for g in groups)
        object.__setattr__(self, "_cfgs", cfgs)

    # -- cores -------------------------------------------------------------------------------
    @property
    def cores(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def group_cfgs(self) -> tuple:
        """Per group, the configuration of its cores (``cores`` = the chip's)."""
        return self._cfgs

    def group_of(self, k: int) -> int:
        """The group holding core ``k``."""
        if not 0 <= k < self.cores:
            raise ValueError(f"core {k} does not exist (the chip has {self.cores})")
        for i, g in enumerate(self.groups):
            if k < g.count:
                return i
            k -= g.count
        raise AssertionError("unreachable")

    def core_cfg(self, k: int) -> ArchConfig:
        """The configuration core ``k`` is built with."""
        return self._cfgs[self.group_of(k)]

    @property
    def core_cfgs(self) -> list:
        return [self.core_cfg(k) for k in range(self.cores)]

    def crossing(self, k: int) -> Crossing | None:
        """The crossing on the link from core ``k`` to core ``k + 1`` (mod cores), or
        ``None`` where both cores are of one ``nr`` and ``fmt``."""
        j = (k + 1) % self.cores
        a, b = self.core_cfg(k), self.core_cfg(j)
        if a.nr == b.nr and a.fmt == b.fmt:
            return None
        return Crossing(k, j, a, b)

    @property
    def crossings(self) -> list:
        return [x for x in map(self.crossing, range(self.cores)) if x is not None]

    # -- chip-level fields ------------------------------------------------------------------
    @property
    def ring_fifo_depth(self) -> int:
        return self._cfgs[0].ring_fifo_depth

    @property
    def clock_mhz(self) -> float:
        return self._cfgs[0].clock_mhz

    @property
    def host_width(self) -> int:
        """The chip's AXI4-Stream ``tdata`` width: the widest core's; a narrower core
        uses the low bits (``docs/chip.md``, "Heterogeneous chips")."""
        return max(c.host_width for c in self._cfgs)

    # -- (de)serialization -------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"groups": [{"count": g.count, **{k: v for k, v in g.cfg.to_dict().items() if k != "cores"}}
                           for g in self.groups]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "HeteroConfig":
        if not isinstance(d, dict) or set(d) != {"groups"} or not isinstance(d["groups"], list):
            raise ConfigError('a heterogeneous chip is a JSON object {"groups": [{"count": N, ...ArchConfig '
                              'fields or "preset"}, ...]}')
        groups = []
        for i, g in enumerate(d["groups"]):
            if not isinstance(g, dict) or "count" not in g:
                raise ConfigError(f"HeteroConfig groups[{i}] must be an object with a 'count'")
            g = dict(g)
            count = g.pop("count")
            g.pop("cores", None)
            groups.append(CoreGroup(count, ArchConfig.from_dict(g)))
        return cls(tuple(groups))


def mix_kind(preset: str, **changes) -> ArchConfig:
    """Preset ``preset``'s core kind for a heterogeneous chip (one core). The ring's
    receive FIFO depth is the chip's, shared by every group, so a kind gets the default
    depth: the L preset's deeper FIFO serves its own SGD all-gathers, which the mixed
    chips' compilers (layers placed on groups) do not run."""
    return PRESETS[preset].replace(cores=1, ring_fifo_depth=ArchConfig.ring_fifo_depth, **changes)


#: presets: ``hetero-tiny`` (2 cores of preset ``tiny``'s 2 x 2 kind and 2 of ``small``'s
#: 4 x 4, binary16: quick in RTL simulation), ``hetero-tiny-fmt`` (the same with the 4 x 4
#: cores in binary32, a format crossing too), and S / L mixes of the reference design's kinds
#: (``S``'s 4 x 4 cores beside ``L``'s 16 x 16 ones)
HETERO_PRESETS: dict = {
    "hetero-tiny": HeteroConfig((CoreGroup(2, mix_kind("tiny")), CoreGroup(2, mix_kind("small")))),
    "hetero-tiny-fmt": HeteroConfig((CoreGroup(2, mix_kind("tiny")),
                                     CoreGroup(2, mix_kind("small", fmt="binary32",   # small's SRAM bytes
                                                        mem_a_words=PRESETS["small"].mem_a_words // 2,
                                                        mem_b_words=PRESETS["small"].mem_b_words // 2)))),
    # a chip of S-like area: 16 of S's cores and 2 of L's (each L core has 16x the PEs)
    "hetero-S": HeteroConfig((CoreGroup(16, mix_kind("S")), CoreGroup(2, mix_kind("L")))),
    # a chip of L-like area: 4 of L's cores and 32 of S's
    "hetero-L": HeteroConfig((CoreGroup(32, mix_kind("S")), CoreGroup(4, mix_kind("L")))),
}


def hetero_from_arg(arg: str) -> HeteroConfig:
    """A preset name of :data:`HETERO_PRESETS`, inline JSON or a JSON file path."""
    from pathlib import Path

    if arg in HETERO_PRESETS:
        return HETERO_PRESETS[arg]
    text = arg
    if not arg.lstrip().startswith("{"):
        p = Path(arg)
        if not p.is_file():
            raise ConfigError(f"{arg!r}: neither a heterogeneous preset ({', '.join(HETERO_PRESETS)}) nor a JSON file")
        text = p.read_text()
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"heterogeneous chip config is not valid JSON: {e}") from None
    return HeteroConfig.from_dict(d)
