"""sim.step_measure's mapping options: those of another method are dropped, a name no
method takes is an error."""

import pytest

from sim.step_measure import MAPPING_OPTIONS, compile_method, mapping_options


def test_options_of_other_methods_are_dropped():
    opts = {"out_map": "rows", "backward": "fused", "overlap": True}
    assert mapping_options("mbgd", 4, opts) == {"out_map": "rows", "overlap": True}
    assert mapping_options("cp", 1, opts) == {"backward": "fused", "overlap": True}
    assert mapping_options("cp", 4, opts) == {}                 # minibatch CP takes none
    assert set(mapping_options("sgd", 1, opts)) <= set(MAPPING_OPTIONS["sgd"])


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match=r"unknown mapping option 'groups' \(known: backward, out_map"):
        mapping_options("cp", 1, {"groups": [1, 1]})
    with pytest.raises(ValueError, match="unknown mapping option 'outmap'"):
        compile_method("sgd", None, type("M", (), {"batch": 1})(), outmap="rows")
