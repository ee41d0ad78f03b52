"""The expected-value operators ($ref, $oneOf, $match) of SPEC §3, function by function."""
import subprocess
import sys

import pytest

from lobeval.core.operators import (DEFAULT_THRESHOLD, MATCH_MODES, MISSING, concrete, first_literal, follow, literals,
                               options, problems, refs, resolver, split_ref, text_match)

REF = {"$ref": "create_ticket.result.ticket_id"}


@pytest.mark.parametrize("value, found", [
    ("plain", []), ({"title": "x", "tags": ["a"]}, []), (REF, []),
    ({"$ref": "TicketPlugin-Create_Ticket.result.ticket.id"}, []),     # compared by function key
    ({"$ref": "create_ticket.ticket_id"}, ["$ref 'create_ticket.ticket_id' must look like '<function>.result.<path>'"]),
    ({"$ref": 7}, ["$ref 7 must look like '<function>.result.<path>'"]),
    ({"$ref": "create_action.result.id"},
     ["$ref to 'create_action', which is not an earlier expected call of this scenario"]),
    ({"$oneOf": ["High", "Urgent"]}, []),
    ({"$oneOf": []}, ["$oneOf must be a non-empty list of values"]),
    ({"$oneOf": "High"}, ["$oneOf must be a non-empty list of values"]),
    ({"$match": "fuzzy", "value": "x", "threshold": 0.9}, []), ({"$match": "any"}, []),
    ({"$match": "roughly", "value": "x"}, ["$match must be one of exact, fuzzy, semantic, any"]),
    ({"$match": "exact"}, ["$match needs a 'value'"]),
    ({"$match": "fuzzy", "value": "x", "threshold": 0}, ["$match threshold must be a number in (0, 1]"]),
    ({"$match": "fuzzy", "value": "x", "threshold": "high"}, ["$match threshold must be a number in (0, 1]"]),
    # Operators nest: inside an option, an object's field, a list's item, each problem found.
    ({"$oneOf": [{"$ref": "nowhere"}, {"$oneOf": []}]},
     ["$ref 'nowhere' must look like '<function>.result.<path>'", "$oneOf must be a non-empty list of values"]),
    ({"owner": {"$match": "fuzzy"}, "ids": [{"$ref": "get_user.result.id"}]},
     ["$match needs a 'value'", "$ref to 'get_user', which is not an earlier expected call of this scenario"]),
])
def test_problems(value, found):
    assert problems(value, earlier={"create_ticket"}) == found


@pytest.mark.parametrize("value, values", [
    ("High", ["High"]), (None, [None]), ({"a": 1}, [{"a": 1}]), (REF, []),
    ({"$oneOf": ["High", {"$oneOf": ["Low"]}, REF]}, ["High", "Low"]),
    ({"$match": "fuzzy", "value": "Printer jams"}, ["Printer jams"]), ({"$match": "any"}, []),
])
def test_literals(value, values):
    assert literals(value) == values


@pytest.mark.parametrize("value, literal", [
    ("High", "High"), (REF, None), ({"$match": "any", "value": "x"}, None),
    ({"$oneOf": [REF, {"$match": "exact", "value": "Low"}, "High"]}, "Low"), ({"$oneOf": []}, None),
])
def test_first_literal(value, literal):
    assert first_literal(value) == literal


def test_refs_finds_every_reference_in_order():
    value = {"a": REF, "b": [{"$oneOf": ["x", {"$ref": "f.result.0"}]}], "c": {"$match": "exact", "value": "y"}}
    assert refs(value) == ["create_ticket.result.ticket_id", "f.result.0"]
    assert refs("plain") == [] and refs(None) == []


@pytest.mark.parametrize("ref, parts", [
    ("create_ticket.result.ticket_id", ("create_ticket", ["ticket_id"])),
    ("search.result.items.0.id", ("search", ["items", "0", "id"])),
    ("create_ticket.result", ("create_ticket", [])),
])
def test_split_ref(ref, parts):
    assert split_ref(ref) == parts


def test_follow_walks_keys_and_list_indices():
    result = {"items": [{"id": "A"}, {"id": "B"}], "count": 2}
    assert follow(result, ["items", "1", "id"]) == "B"
    assert follow(result, []) is result
    assert follow(result, ["items", "2"]) is MISSING          # index out of range
    assert follow(result, ["items", "first"]) is MISSING      # a list has no keys
    assert follow(result, ["count", "x"]) is MISSING          # a number has no fields
    assert follow(result, ["missing"]) is MISSING


def test_resolver_uses_the_latest_successful_call_before_the_limit():
    calls = [{"functionName": "create_ticket", "result": {"ticket_id": "TKT-1"}, "error": None},
             {"functionName": "TicketPlugin-Create_Ticket", "result": {"ticket_id": "TKT-2"}, "error": None},
             {"functionName": "create_ticket", "result": None, "error": "invalid"},
             {"functionName": "search", "result": {"items": [{"id": "A"}]}}]
    assert resolver(calls)("create_ticket.result.ticket_id") == "TKT-2"      # the failed one does not count
    assert resolver(calls, 1)("create_ticket.result.ticket_id") == "TKT-1"
    assert resolver(calls, 0)("create_ticket.result.ticket_id") is MISSING   # no call before
    assert resolver(calls)("search.result.items.0.id") == "A"
    assert resolver(calls)("search.result.items.1.id") is MISSING
    assert resolver(calls)("create_action.result.id") is MISSING


def test_options_and_text_match_split_the_operators_for_scoring():
    resolve = resolver([{"functionName": "create_ticket", "result": {"ticket_id": "TKT-1"}}])
    assert options(REF, resolve) == ["TKT-1"]
    assert options({"$ref": "create_ticket.result.nope"}, resolve) == []
    assert options({"$oneOf": ["a", "b"]}, resolve) == ["a", "b"]
    assert options("a", resolve) is None and options({"$match": "any"}, resolve) is None
    assert text_match({"$match": "fuzzy", "value": "x", "threshold": 0.9}) == ("fuzzy", "x", 0.9)
    assert text_match({"$match": "exact", "value": "x"}) == ("exact", "x", DEFAULT_THRESHOLD)
    assert text_match({"$oneOf": ["x"]}) is None and text_match("x") is None
    assert MATCH_MODES == ("exact", "fuzzy", "semantic", "any")


def test_concrete_is_what_a_perfect_agent_sends():
    resolve = resolver([{"functionName": "create_ticket", "result": {"ticket_id": "TKT-1"}}])
    value = {"ticket_id": REF, "owner": {"$ref": "get_user.result.id"}, "priority": {"$oneOf": ["High", "Low"]},
             "title": {"$match": "fuzzy", "value": "Printer jams"}, "tags": [{"$oneOf": [{"$ref": REF["$ref"]}]}],
             "none": {"$oneOf": []}, "hours": 4}
    assert concrete(value, resolve) == {"ticket_id": "TKT-1", "owner": "<get_user.result.id>", "priority": "High",
                                        "title": "Printer jams", "tags": ["TKT-1"], "none": None, "hours": 4}


@pytest.mark.slow
def test_operators_import_no_heavy_libraries():
    code = "import sys, lobeval.core.operators; print(sorted({'numpy', 'scipy', 'pandas'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
