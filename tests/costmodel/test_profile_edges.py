"""Profile files at their edges (costmodel/profile.py, docs/cost-models.md "Profile file"),
written to kill the mutants bench/mutation.sh left alive there: the JSON a profile writes
(one-space indent, the `schema` alias, no nulls), validation messages without pydantic's
prefix, and the errors of a missing or unreadable file naming the file and what is shipped."""

import json

import pytest
from test_fitted import make_profile

from prefixsim.costmodel import profile as profile_module
from prefixsim.costmodel.profile import load_profile, profile_from_mapping, shipped_profiles
from prefixsim.errors import InputError


def test_a_profile_writes_one_space_indented_json_with_its_schema_and_no_nulls():
    text = make_profile().to_json()
    assert text.startswith('{\n "schema": "prefixsim-profile/1",\n "provenance": {\n  "')
    assert "null" not in text and '"bandwidth"' not in text and "schema_" not in text
    assert text.endswith("}\n")


def test_validation_messages_lose_pydantics_prefix():
    data = json.loads(make_profile().to_json())
    data["heldout"].pop("layer")
    with pytest.raises(InputError) as raised:
        profile_from_mapping(data, source="p.json")
    assert (raised.value.message, raised.value.file) == ("heldout lacks layer", "p.json")


def test_a_missing_profile_lists_the_shipped_ones(monkeypatch):
    shipped = sorted(shipped_profiles())
    assert len(shipped) >= 2
    with pytest.raises(InputError) as raised:
        load_profile("no-such-profile")
    assert raised.value.message == (
        f"no such file or shipped profile (shipped: {', '.join(shipped)})")
    assert raised.value.file == "no-such-profile"
    monkeypatch.setattr(profile_module, "shipped_profiles", dict)
    with pytest.raises(InputError) as raised:
        load_profile("no-such-profile")
    assert raised.value.message == "no such file or shipped profile (shipped: none)"


def test_a_profile_that_is_not_json_names_its_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_profile(path)
    assert raised.value.file == str(path)
    assert raised.value.message.startswith("not valid JSON (")
