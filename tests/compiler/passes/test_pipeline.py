"""Pipeline text: round trips, presets, and errors naming the unknown pass or option."""

from __future__ import annotations

import pytest

from compiler import CompileError, list_pipelines
from compiler.passes import REGISTRY, load_passes
from compiler.passes.pipeline import PRESETS, expand_pipeline, parse_pipeline

load_passes()


@pytest.mark.parametrize("text", [
    "",
    "fold-constants",
    "fold-constants,fuse-ops{max-group-size=16}",
    "fold-constants{max-bytes=1024},eliminate-dead-code,fuse-ops{max-group-size=8},plan-memory{alignment=128}",
    "simplify,simplify,eliminate-common-subexpressions",
])
def test_canonical_text_round_trips(text: str) -> None:
    p = parse_pipeline(text)
    assert p.text() == text
    assert parse_pipeline(p.text()) == p


def test_non_canonical_text_prints_canonically() -> None:
    assert parse_pipeline(" fold-constants , fuse-ops{ max-group-size=016 } ").text() == \
        "fold-constants,fuse-ops{max-group-size=16}"


def test_options_are_typed() -> None:
    p = parse_pipeline("fuse-ops{max-group-size=16}")
    assert p.passes[0].options == (("max-group-size", 16),)
    assert p.passes[0].effective_options()["max-group-size"] == 16


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_expand_to_valid_text(name: str) -> None:
    text = expand_pipeline(name)
    assert text == PRESETS[name]
    assert parse_pipeline(text).text() == text
    assert {"name": name, "text": text} in list_pipelines()


def test_o2_has_the_issue_passes_in_order() -> None:
    names = [p.name for p in parse_pipeline("O2").passes]
    assert names == ["fold-qdq", "fold-constants", "simplify", "fold-batchnorm", "eliminate-common-subexpressions",
                     "eliminate-dead-code", "fuse-siblings", "fuse-layer-norm", "fuse-ops", "plan-memory"]
    assert parse_pipeline("O0").passes == ()


def test_unknown_pass_is_named_with_valid_list() -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline("fold-constants,fuse-everything")
    err = info.value
    assert err.stage == "request" and err.pass_name == "fuse-everything"
    assert "'fuse-everything'" in err.message
    for name in REGISTRY:
        assert name in err.message


def test_unknown_option_is_named_with_valid_options() -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline("fuse-ops{max-size=3}")
    assert "'max-size'" in info.value.message and "max-group-size" in info.value.message


@pytest.mark.parametrize("text,words", [
    ("fuse-ops{max-group-size=big}", "expects int"),
    ("fuse-ops{max-group-size}", "needs a value"),
    ("fuse-ops{max-group-size=1", "unbalanced"),
    ("fold-constants,,simplify", "empty entry"),
    ("fuse-ops{max-group-size=1 max-group-size=2}", "given twice"),
])
def test_malformed_pipelines(text: str, words: str) -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline(text)
    assert info.value.stage == "request" and words in info.value.message


def test_a_preset_in_a_list_expands_in_place_and_quantize_runs_before_fusion() -> None:
    text = parse_pipeline("O2,quantize{dtype=int8}").text()
    names = [p.name for p in parse_pipeline(text).passes]
    assert names[-3:] == ["quantize", "fuse-ops", "plan-memory"] and names[0] == "fold-qdq"
    assert parse_pipeline(text).text() == text  # the canonical text prints back to itself
    assert [p.name for p in parse_pipeline("fold-constants,O1").passes] == ["fold-constants", "fold-constants",
                                                                            "simplify", "eliminate-dead-code"]
