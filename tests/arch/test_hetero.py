"""HeteroConfig: validation (one-line ConfigErrors), per-core kinds, crossings, JSON."""

import json

import pytest

from arch.config import PRESETS, ArchConfig, ConfigError
from arch.hetero import HETERO_PRESETS, CoreGroup, HeteroConfig, hetero_from_arg

TINY = PRESETS["tiny"]
SMALL = PRESETS["small"]


def test_presets_derive_from_arch_presets():
    h = HETERO_PRESETS["hetero-tiny"]
    assert h.cores == 4 and [c.nr for c in h.core_cfgs] == [2, 2, 4, 4]
    assert h.core_cfg(0) == TINY.replace(cores=4) and h.core_cfg(3) == SMALL.replace(cores=4)
    assert h.host_width == SMALL.host_width
    x0, x1 = h.crossings
    assert (x0.src, x0.dst, x0.widen, x0.ratio) == (1, 2, True, 2)
    assert (x1.src, x1.dst, x1.widen, x1.ratio) == (3, 0, False, 2)
    assert h.crossing(0) is None and h.crossing(2) is None
    s, l_ = HETERO_PRESETS["hetero-S"], HETERO_PRESETS["hetero-L"]
    assert s.core_cfg(0).nr == PRESETS["S"].nr and s.core_cfg(s.cores - 1).nr == PRESETS["L"].nr
    assert s.core_cfg(0).spad_kib == PRESETS["S"].spad_kib and l_.cores <= 64
    f = HETERO_PRESETS["hetero-tiny-fmt"]
    assert f.core_cfg(2).fmt.name == "binary32" and f.core_cfg(2).mem_a_words == SMALL.mem_a_words // 2


def test_json_round_trip():
    for h in HETERO_PRESETS.values():
        assert HeteroConfig.from_dict(json.loads(h.to_json())) == h
    h = HeteroConfig.from_dict({"groups": [{"count": 2, "preset": "tiny"}, {"count": 2, "preset": "small",
                                                                          "fmt": "bfloat16"}]})
    assert h.core_cfg(2).fmt.name == "bfloat16"
    assert hetero_from_arg("hetero-tiny") is HETERO_PRESETS["hetero-tiny"]
    assert hetero_from_arg(h.to_json()) == h


@pytest.mark.parametrize("build,msg", [
    (lambda: HeteroConfig(()), "non-empty"),
    (lambda: HeteroConfig((CoreGroup(0, TINY),)), "count must be"),
    (lambda: HeteroConfig((CoreGroup(1, TINY), CoreGroup(2, SMALL))), "even number"),
    (lambda: HeteroConfig((CoreGroup(40, TINY), CoreGroup(32, SMALL))), "72 cores"),
    (lambda: HeteroConfig((CoreGroup(2, TINY), CoreGroup(2, SMALL.replace(ring_fifo_depth=16)))), "ring_fifo_depth"),
    (lambda: HeteroConfig((CoreGroup(2, TINY), CoreGroup(2, SMALL.replace(clock_mhz=500)))), "clock_mhz"),
    (lambda: HeteroConfig((CoreGroup(2, TINY), CoreGroup(2, SMALL.replace(nr=3)))), "power-of-two multiple"),
    (lambda: HeteroConfig((CoreGroup(2, TINY), CoreGroup(2, SMALL.replace(nr=6)))), "power-of-two multiple"),
    (lambda: HeteroConfig((CoreGroup(2, TINY.replace(dist_stage=True)), CoreGroup(2, SMALL))), "distribution"),
    (lambda: HeteroConfig((CoreGroup(2, "tiny"),)), "must be an ArchConfig"),
    (lambda: HeteroConfig.from_dict({"groups": [{"preset": "tiny"}]}), "'count'"),
    (lambda: HeteroConfig.from_dict({"cores": 4}), "groups"),
    (lambda: HeteroConfig.from_dict({"groups": [{"count": 2, "nr": 99}]}), "nr"),
    (lambda: hetero_from_arg("{not json"), "not valid JSON"),
    (lambda: hetero_from_arg("no-such-preset"), "neither a heterogeneous preset"),
])
def test_bad_configs_one_line_errors(build, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        build()
    assert "\n" not in str(e.value)


def test_group_of_and_bounds():
    h = HeteroConfig((CoreGroup(3, TINY), CoreGroup(1, SMALL)))
    assert [h.group_of(k) for k in range(4)] == [0, 0, 0, 1]
    with pytest.raises(ValueError, match="does not exist"):
        h.group_of(4)
    one = HeteroConfig((CoreGroup(2, ArchConfig(nr=2)),))
    assert one.crossings == []
