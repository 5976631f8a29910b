"""ArchConfig validation, presets, file loading; FPFormat; micro-op encoding."""

import json
import random

import pytest

from arch.fpformat import BFLOAT16, BINARY16, BINARY32, FPFormat, get_format
from arch.microop import MicroOp, Src, uop_fields, uop_layout
from arch.config import ArchConfig, ConfigError, PRESETS, config_from_arg, load_config


def test_defaults_match_reference_design():
    c = ArchConfig()
    assert c.fmt is BINARY16 and c.nr == 4
    assert c.pe_sram_bytes == 16 * 1024  # 16 KB of local SRAM per PE
    assert c.fpu_latency == 2 + c.mul_latency + c.add_latency
    assert c.acc_reuse_distance == c.add_latency + 1


def test_binary32_keeps_byte_budget():
    c = ArchConfig(fmt="binary32")
    assert c.mem_a_words == 2048 and c.pe_sram_bytes == 16 * 1024
    assert PRESETS["default"].replace(fmt="fp32").pe_sram_bytes == 16 * 1024


@pytest.mark.parametrize("field,value,needle", [
    ("nr", 0, "nr must be an integer in 1..16"),
    ("nr", 17, "nr must be an integer in 1..16"),
    ("nr", 2.0, "nr must be an integer"),
    ("n_regs", 3, "n_regs"),
    ("n_regs", 32, "n_regs"),
    ("mem_a_words", 1000, "power of two"),
    ("mem_b_words", 8, "mem_b_words"),
    ("mul_latency", 1, "mul_latency must be an integer in 2..8"),
    ("add_latency", 2, "add_latency must be an integer in 3..8"),
    ("fmt", "binary8", "unknown floating-point format 'binary8'"),
    ("clock_mhz", 0, "clock_mhz"),
    ("exec_stage", 2, "exec_stage must be true or false, got 2"),
    ("exec_stage", 1.0, "exec_stage must be true or false"),
    ("exec_stage", "yes", "exec_stage must be true or false"),
    ("dist_stage", 2, "dist_stage must be true or false, got 2"),
    ("dist_stage", "no", "dist_stage must be true or false"),
    ("fan_stage", 2, "fan_stage must be true or false, got 2"),
    ("fan_stage", True, "fan_stage requires dist_stage=True"),
    ("fetch_stage", 2, "fetch_stage must be true or false, got 2"),
    ("fetch_stage", "yes", "fetch_stage must be true or false"),
    ("addr_stage", 2, "addr_stage must be true or false, got 2"),
    ("addr_stage", True, "addr_stage requires fetch_stage=True"),
    ("bus_stage", 2, "bus_stage must be true or false, got 2"),
    ("bus_stage", True, "bus_stage requires exec_stage=True"),
    ("read_stage", True, "read_stage requires bus_stage=True"),
    ("rx_stage", 2, "rx_stage must be true or false, got 2"),
    ("rx_stage", True, "rx_stage requires bus_stage=True"),
])
def test_invalid_parameters_name_field_and_range(field, value, needle):
    with pytest.raises(ConfigError, match=needle):
        ArchConfig(**{field: value})


def test_fan_stage_needs_a_lone_core():
    with pytest.raises(ConfigError, match=r"fan_stage needs a lone core \(cores=1\), got cores=2"):
        ArchConfig(dist_stage=True, fan_stage=True, cores=2)
    x = ArchConfig(dist_stage=True, fan_stage=True)
    # two distribution levels: the PE side two cycles behind, a RUN one cycle longer
    assert (ArchConfig().dist_delay, ArchConfig(dist_stage=True).dist_delay, x.dist_delay) == (0, 1, 2)
    assert x.run_overhead == ArchConfig(dist_stage=True).run_overhead + 1


def test_config_is_frozen():
    with pytest.raises(Exception):
        ArchConfig().nr = 8


def test_json_roundtrip_and_presets(tmp_path):
    c = ArchConfig(fmt="bfloat16", nr=2, mem_a_words=256, mem_b_words=512, add_latency=4)
    assert ArchConfig.from_dict(json.loads(c.to_json())) == c
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"preset": "tiny", "fmt": "binary32"}))
    lc = load_config(p)
    assert lc.nr == 2 and lc.fmt is BINARY32
    assert config_from_arg("tiny") == PRESETS["tiny"]
    assert config_from_arg('{"nr": 8}').nr == 8
    assert config_from_arg(None) == PRESETS["default"]
    x = config_from_arg('{"preset": "fpga", "nr": 2}')
    assert x.exec_stage is True and x.nr == 2 and (x.mul_latency, x.add_latency) == (4, 5)
    assert ArchConfig.from_dict(json.loads(x.to_json())) == x
    assert ArchConfig(exec_stage=1).exec_stage is True and ArchConfig(exec_stage=0) == ArchConfig()
    assert x.dist_stage is True and ArchConfig(dist_stage=0) == ArchConfig()
    assert x.fetch_stage is True and ArchConfig(fetch_stage=0) == ArchConfig()
    assert x.bus_stage is True and ArchConfig(exec_stage=True, bus_stage=0) == ArchConfig(exec_stage=True)
    assert x.rx_stage is True and x.read_stage is True
    assert x.addr_stage is True
    assert (ArchConfig().start_latency, x.start_latency) == (2, 4)
    assert (ArchConfig().jump_delay, x.jump_delay) == (0, 2)
    # the address stage: one more cycle to the first issue and after a JUMP
    a = ArchConfig(fetch_stage=True, addr_stage=True)
    assert (a.fetch_delay, a.start_latency, a.jump_delay) == (2, 4, 2)
    assert a.run_overhead == ArchConfig(fetch_stage=True).run_overhead + 1
    # operand stage -> execution: 0 (default), 1 (execute stage), 2 (and the bus stage),
    # 3 (and the receive stage, preset fpga); a bus driver's source sees a move later with
    # the bus stage, and with the receive stage later again, as does an SRAM read a write
    bus = x.replace(rx_stage=False)
    assert (ArchConfig().exec_delay, ArchConfig(exec_stage=True).exec_delay, bus.exec_delay) == (0, 1, 2)
    assert (ArchConfig(exec_stage=True).mv_drive_distance, bus.mv_drive_distance) == (1, 2)
    assert bus.mv_read_distance == 1 and bus.sram_read_distance == 2
    assert (x.exec_delay, x.mv_drive_distance, x.mv_read_distance, x.sram_read_distance) == (3, 3, 1, 3)
    assert x.fpu_latency == bus.fpu_latency + 1 and x.run_overhead == bus.run_overhead + 1
    # a RUN of n instructions + HALT lasts n + run_overhead cycles: HALT, start latency,
    # fpu_latency of drain, one more cycle each with the fetch and address stages and one per
    # distribution level
    assert ArchConfig().run_overhead == 1 + 7 + 2
    assert PRESETS["fpga"].run_overhead == 1 + (2 + 3 + 4 + 5) + 2 + 2 + 2


def test_bad_config_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nr: 4")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(bad)
    bad.write_text('{"nr": 4, "colour": "red"}')
    with pytest.raises(ConfigError, match="unknown ArchConfig field"):
        load_config(bad)
    bad.write_text('{"preset": "huge"}')
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config(bad)


def test_formats():
    assert (BINARY16.width, BINARY16.bias, BINARY16.qnan) == (16, 15, 0x7E00)
    assert (BFLOAT16.width, BFLOAT16.qnan) == (16, 0x7FC0)
    assert (BINARY32.qnan, BINARY32.one) == (0x7FC00000, 0x3F800000)
    assert get_format("fp16") is BINARY16 and get_format("BF16") is BFLOAT16
    with pytest.raises(ValueError, match="exp_bits"):
        FPFormat("x", 1, 10)
    assert BINARY16.to_float(BINARY16.from_float(1.5)) == 1.5


@pytest.mark.parametrize("cfg", [PRESETS["default"], PRESETS["tiny"], ArchConfig(nr=16, fmt="binary32")])
def test_microop_encode_decode_roundtrip(cfg):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    fields = uop_fields(*cfg.uop_key)
    assert sum(w for _, _, w in fields) == uop_layout(*cfg.uop_key).size
    for _ in range(200):
        m = MicroOp(**{n: rng.randrange(1 << w) for n, _, w in fields})
        word = m.encode(*cfg.uop_key)
        assert MicroOp.decode(word, *cfg.uop_key) == m, f"seed {seed}"


def test_microop_errors():
    c = PRESETS["default"]
    with pytest.raises(ValueError, match="unknown micro-op field"):
        MicroOp(fpu_bogus=1).encode(c.addr_bits, c.sel_bits)
    with pytest.raises(ValueError, match="does not fit"):
        MicroOp(fpu_a=32).encode(c.addr_bits, c.sel_bits)
    # negative offsets are two's complement
    w = MicroOp(ra_off=-1).encode(c.addr_bits, c.sel_bits)
    assert MicroOp.decode(w, c.addr_bits, c.sel_bits).ra_off == (1 << c.addr_bits) - 1
    assert Src.is_valid(Src.MEMA, 16) and not Src.is_valid(20, 16) and not Src.is_valid(9, 8)


def test_drive_op_sampled_only_where_a_lane_reads_it():
    # the PEs' operand-stage drive values are the bus drive without the bus stage; with it
    # only the ring (chip) and scratchpad lanes sample them
    base = ArchConfig()
    bus = base.replace(exec_stage=True, bus_stage=True)
    assert base.drive_op_sampled
    assert not bus.drive_op_sampled
    assert bus.replace(cores=2).drive_op_sampled
    assert bus.replace(spad_kib=1).drive_op_sampled
    assert not PRESETS["fpga"].drive_op_sampled     # what `caterpillar build` puts on a board
