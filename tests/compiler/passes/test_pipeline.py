"""Pipeline text: round trips, presets, and errors naming the unknown pass or option."""

from __future__ import annotations

import pytest

from compiler import CompileError, list_pipelines
from compiler.passes import REGISTRY, load_passes
from compiler.passes.pipeline import (
    ONNX_PASSES,
    PRESETS,
    PassGroup,
    expand_pipeline,
    parse_pipeline,
)

load_passes()


@pytest.mark.parametrize("text", [
    ONNX_PASSES,
    "unroll-rnn",
    "inline-control-flow{max-rounds=2},fold-constants",
    "fixed-point{max-iterations=3}(resolve-sequences,inline-control-flow),bound-outputs,fold-constants",
    ONNX_PASSES + ",fold-constants,fuse-ops{max-group-size=16}",
    ONNX_PASSES + ",fold-constants{max-bytes=1024},eliminate-dead-code,fuse-ops{max-group-size=8},"
                  "plan-memory{alignment=128}",
    ONNX_PASSES + ",simplify,simplify,eliminate-common-subexpressions",
    ONNX_PASSES + ",fixed-point(fold-constants,simplify),fuse-ops",
])
def test_canonical_text_round_trips(text: str) -> None:
    p = parse_pipeline(text)
    assert p.text() == text
    assert parse_pipeline(p.text()) == p


@pytest.mark.parametrize("text", ["", "fold-constants", "simplify,fuse-ops{max-group-size=16}"])
def test_a_pipeline_without_onnx_level_passes_starts_with_onnx_passes(text: str) -> None:
    p = parse_pipeline(text)
    assert p.text() == ",".join(x for x in (ONNX_PASSES, text) if x)
    assert [i.level for i in p.passes] == ["onnx"] * 4 + ["graph"] * len(p.level("graph").passes)
    assert parse_pipeline(p.text()) == p


def test_non_canonical_text_prints_canonically() -> None:
    assert parse_pipeline(" fold-constants , fuse-ops{ max-group-size=016 } ").level("graph").text() == \
        "fold-constants,fuse-ops{max-group-size=16}"
    assert parse_pipeline("fixed-point{ max-iterations=08 }( unroll-rnn , expand-functions )").text() == \
        "fixed-point{max-iterations=8}(unroll-rnn,expand-functions)".replace("{max-iterations=8}", "")


def test_options_are_typed() -> None:
    p = parse_pipeline("fuse-ops{max-group-size=16}").level("graph")
    assert p.passes[0].options == (("max-group-size", 16),)
    assert p.passes[0].effective_options()["max-group-size"] == 16
    group = parse_pipeline("fixed-point{max-iterations=3}(unroll-rnn)").passes[0]
    assert isinstance(group, PassGroup) and group.max_iterations == 3 and group.passes[0].name == "unroll-rnn"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_expand_to_valid_text(name: str) -> None:
    text = expand_pipeline(name)
    assert text == PRESETS[name] and text.startswith(ONNX_PASSES)
    assert parse_pipeline(text).text() == text
    assert {"name": name, "text": text} in list_pipelines()


def test_o2_has_the_issue_passes_in_order() -> None:
    p = parse_pipeline("O2")
    assert [s.name for s in p.level("onnx").specs()] == [
        "resolve-sequences", "inline-control-flow", "unroll-rnn", "expand-functions", "resolve-sequences",
        "legalize-narrow-types", "bound-outputs"]
    assert [s.name for s in p.level("graph").specs()] == [
        "fold-qdq", "fold-constants", "simplify", "fold-batchnorm", "eliminate-common-subexpressions",
        "eliminate-dead-code", "fuse-siblings", "fuse-layer-norm", "fuse-ops", "plan-memory"]
    assert isinstance(p.passes[0], PassGroup) and p.passes[0].max_iterations == 8
    assert parse_pipeline("O0").text() == ONNX_PASSES


@pytest.mark.parametrize("text,words", [
    ("fold-constants,unroll-rnn", "must come before the graph passes; it follows 'fold-constants'"),
    ("fixed-point(unroll-rnn,fold-constants)", "passes of one level"),
    ("fixed-point(fixed-point(unroll-rnn))", "cannot hold a group"),
    ("fixed-point{max-iterations=0}(unroll-rnn)", "at least 1"),
    ("fixed-point{rounds=2}(unroll-rnn)", "unknown option 'rounds' for fixed-point; valid options: max-iterations"),
    ("fixed-point(unroll-rnn", "unbalanced"),
    ("fixed-point(unroll-rnn)x", "text after the closing ')'"),
])
def test_malformed_groups_and_levels(text: str, words: str) -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline(text)
    assert info.value.stage == "request" and words in info.value.message


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


BAD_VALUES = [  # (pipeline, pass, what the error says): the allowed values as each pass documents them
    ("quantize{dtype=int4}", "quantize", "option 'dtype' = int4 is not one of: int8, bf16, fp16"),
    ("O2,quantize{calibration=kl}", "quantize",
     "option 'calibration' = kl is not one of: minmax, percentile, entropy"),
    ("quantize{activation=u16}", "quantize", "option 'activation' = u16 is not one of: u8, s8"),
    ("quantize{reduce-range=maybe}", "quantize", "option 'reduce-range' = maybe is not one of: auto, true, false"),
    ("quantize{calibration=percentile percentile=101}", "quantize",
     "option 'percentile' = 101.0 must be at least 0.0 and at most 100.0"),
    ("quantize{min-top1=1.5}", "quantize", "option 'min-top1' = 1.5 must be at least 0.0 and at most 1.0"),
    ("fuse-ops{max-group-size=0}", "fuse-ops", "option 'max-group-size' = 0 must be at least 1"),
    ("plan-memory{alignment=48}", "plan-memory", "option 'alignment' = 48 must be a power of two"),
    ("plan-memory{alignment=0}", "plan-memory", "option 'alignment' = 0 must be a power of two"),
    ("fuse-siblings{min-siblings=1}", "fuse-siblings", "option 'min-siblings' = 1 must be at least 2"),
    ("convert-layout{block=-8}", "convert-layout", "option 'block' = -8 must be at least 0"),
    ("fixed-point(inline-control-flow{max-rounds=0})", "inline-control-flow",
     "option 'max-rounds' = 0 must be at least 1"),
]


@pytest.mark.parametrize("text,pass_name,words", BAD_VALUES)
def test_a_bad_option_value_is_refused_at_parse_naming_pass_option_value_and_allowed(text, pass_name, words) -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline(text)
    err = info.value
    assert err.stage == "request" and err.pass_name == pass_name
    assert err.message == f"pass {pass_name!r}: {words}"


def test_a_bad_group_option_value_is_refused() -> None:
    with pytest.raises(CompileError) as info:
        parse_pipeline("fixed-point{max-iterations=0}(unroll-rnn)")
    assert info.value.message == "fixed-point: option 'max-iterations' = 0 must be at least 1"


@pytest.mark.parametrize("text", ["quantize{dtype=bf16}", "quantize{dtype=fp16 calibration=entropy}",
                                  "quantize{percentile=100 min-top1=1 reduce-range=false activation=s8}",
                                  "plan-memory{alignment=1}", "fuse-ops{max-group-size=1}", "convert-layout{block=0}"])
def test_allowed_values_at_the_bounds_parse(text: str) -> None:
    assert parse_pipeline(parse_pipeline(text).text()).text() == parse_pipeline(text).text()


def test_a_pass_built_directly_checks_its_option_values_too() -> None:
    with pytest.raises(ValueError, match="pass 'quantize': option 'dtype' = int4 is not one of: int8, bf16, fp16"):
        REGISTRY["quantize"](dtype="int4")


def test_listed_options_say_what_is_allowed() -> None:
    from compiler import list_passes

    opts = {p["name"]: {o["name"]: o for o in p["options"]} for p in list_passes()}
    assert opts["quantize"]["dtype"]["allowed"] == "int8, bf16, fp16"
    assert opts["plan-memory"]["alignment"]["allowed"] == "a power of two"
    assert opts["quantize"]["exclude"]["allowed"] == "any str"


def test_a_preset_in_a_list_expands_in_place_and_quantize_runs_before_fusion() -> None:
    text = parse_pipeline("O2,quantize{dtype=int8}").text()
    names = [p.name for p in parse_pipeline(text).level("graph").passes]
    assert names[-3:] == ["quantize", "fuse-ops", "plan-memory"] and names[0] == "fold-qdq"
    assert parse_pipeline(text).text() == text  # the canonical text prints back to itself
    with pytest.raises(CompileError, match="must come before the graph passes"):  # O1 starts with ONNX_PASSES
        parse_pipeline("fold-constants,O1")
