import pytest

from ampbench.errors import AmpbenchError
from ampbench.precision import aliases_of, get, list_precisions, resolve

EXPECTED = {
    "fp32": ["O0", "32-true"],
    "tf32": [],
    "amp-fp16": ["O1", "16-mixed", "fp16"],  # (fp16 as HF Trainer's --fp16: it was "Did you mean 'bf16'?")
    "amp-bf16": ["bf16-mixed"],
    "master-fp16": ["O2"],
    "master-bf16": [],
    "pure-fp16": ["O3", "16-true"],
    "pure-bf16": ["bf16-true"],
    "fp8-tensorwise": ["fp8"],
    "fp8-rowwise": [],
    "fp8-rowwise-gw-hp": [],
}


def test_all_modes_registered_in_order():
    assert list_precisions() == list(EXPECTED)


@pytest.mark.parametrize("name,aliases", EXPECTED.items())
def test_every_alias_resolves(name, aliases):
    assert resolve(name) == name
    for a in aliases:
        assert a in aliases_of(name)
        assert resolve(a) == name
        assert resolve(a.lower()) == name  # case-insensitive
    assert get(name).name == name


def test_unknown_name_lists_valid_names_and_aliases():
    with pytest.raises(AmpbenchError) as e:
        resolve("amp-fp61")
    msg = str(e.value)
    assert "unknown precision 'amp-fp61'" in msg
    assert "Did you mean 'amp-fp16'" in msg
    for name, aliases in EXPECTED.items():
        assert name in msg
        for a in aliases:
            assert a in msg


def test_the_fp8_modes_and_the_advisor_preference() -> None:
    from ampbench.precision import Fp8Options, is_fp8, list_precisions, preference

    assert [p for p in list_precisions() if is_fp8(p)] == ["fp8-tensorwise", "fp8-rowwise", "fp8-rowwise-gw-hp"]
    assert is_fp8("fp8") and not is_fp8("bf16") and not is_fp8("fp17")  # aliases resolve; unknown names are not
    assert sorted(list_precisions(), key=preference) == [
        "amp-bf16", "amp-fp16", "master-bf16", "master-fp16", "fp8-tensorwise", "fp8-rowwise", "fp8-rowwise-gw-hp",
        "pure-bf16", "pure-fp16", "tf32", "fp32"]
    assert preference("fp17") > preference("fp32")
    assert Fp8Options.from_strings(" head, lm_head ,", None) == Fp8Options(("head", "lm_head"), "auto")
    with pytest.raises(AmpbenchError, match="fp8_filter='all': choose auto"):
        Fp8Options.from_strings(None, "all")
    with pytest.raises(AmpbenchError, match="fp8_filter='x'"):
        Fp8Options(filter="x")


def test_fp8_recipes_are_built_with_their_options() -> None:
    from ampbench import MixedPrecision
    from ampbench.precision import Fp8Options, get

    assert get("fp8").options == Fp8Options()
    mp = MixedPrecision("fp8-rowwise", fp8=Fp8Options(("head",), "dims"))
    assert mp.recipe.options == Fp8Options(("head",), "dims") and not mp.recipe.fsdp_all_gather
    assert MixedPrecision("fp8", fp8_skip=["a"], fp8_filter="dims").recipe.options == Fp8Options(("a",), "dims")
    with pytest.raises(AmpbenchError, match="apply to the fp8 modes, not 'amp-bf16'"):
        MixedPrecision("amp-bf16", fp8=Fp8Options())
