import pytest

from ampbench.errors import AmpbenchError
from ampbench.precision import aliases_of, get, list_precisions, resolve

EXPECTED = {
    "fp32": ["O0", "32-true"],
    "tf32": [],
    "amp-fp16": ["O1", "16-mixed"],
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
