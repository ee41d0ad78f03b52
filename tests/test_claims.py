"""Claimed but not done / done but not told, on hand-written transcripts."""
import pytest

from lobeval.claims import family_of, find_claims

TOOLS = {"create_ticket": {"effect": "write"}, "update_ticket": {"effect": "write"},
         "get_ticket": {"effect": "read"}, "cancel_order": {"effect": "write"}}


def call(name, result=None, error=None, turn=1, **arguments):
    return {"functionName": name, "arguments": arguments, "result": result, "error": error, "turn": turn}


def transcript(*messages):
    """messages: (role, text) or (role, text, [calls])."""
    built = [{"role": m[0], "content": m[1], **({"function_calls": m[2]} if len(m) > 2 else {})} for m in messages]
    return {"messages": built, "function_calls": [c for m in built for c in m.get("function_calls", [])]}


def test_a_told_successful_write_is_clean():
    conv = transcript(("user", "Create a ticket for the printer"),
                      ("assistant", "Done: created ticket TKT-12.", [call("create_ticket", {"id": "TKT-12"})]))
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_a_claim_without_any_call():
    conv = transcript(("user", "Create a ticket for the printer"),
                      ("assistant", "I've created the ticket for you. Anything else?"))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == [
        {"message_index": 1, "claim": "create", "text": "I've created the ticket for you."}]


def test_a_claim_backed_only_by_a_failed_call_or_a_read():
    conv = transcript(("user", "Raise the priority of TKT-3"),
                      ("assistant", "The ticket has been updated.",
                       [call("get_ticket", {"id": "TKT-3"}), call("update_ticket", error="permission denied")]))
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["update"]


def test_a_claim_of_the_wrong_family_is_not_backed():
    conv = transcript(("user", "Cancel order ORD-77"),
                      ("assistant", "Your order has been cancelled.", [call("update_ticket", {"id": "ORD-77"})]))
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["cancel"]


def test_questions_negations_and_echoed_words_are_not_claims():
    conv = transcript(
        ("user", "Open a ticket: our registered trademark expires"),
        ("assistant", "Should the ticket be created now?"),
        ("user", "hmm"),
        ("assistant", "The ticket was not created yet. Title: our registered trademark expires."))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == []


def test_a_status_read_from_data_is_not_a_claim():
    conv = transcript(("user", "Show ORD-5"),
                      ("assistant", "ORD-5: Cancelled, shipped to Oslo.", [call("get_ticket", {"status": "Cancelled",
                                                                                              "id": "ORD-5"})]))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == []


def test_an_identifier_nobody_produced_is_a_claim():
    conv = transcript(("user", "What's the status of my ticket?"),
                      ("assistant", "Your ticket TKT-999 is in progress."))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == [
        {"message_index": 1, "claim": "TKT-999", "text": "Your ticket TKT-999 is in progress."}]


def test_a_write_the_user_was_never_told_about():
    conv = transcript(("user", "Look at TKT-3 please"),
                      ("assistant", "Here it is: printer jams, High priority.",
                       [call("get_ticket", {"id": "TKT-3"}), call("update_ticket", {"id": "TKT-3"})]))
    assert find_claims(conv, TOOLS)["done_not_told"] == [{"actual_index": 1, "functionName": "update_ticket", "turn": 1}]


def test_telling_later_or_by_the_returned_id_counts():
    conv = transcript(("user", "Make a ticket"),
                      ("assistant", "One moment.", [call("create_ticket", {"id": "TKT-5"})]),
                      ("user", "And?"),
                      ("assistant", "Your new ticket is TKT-5."))
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_imported_transcripts_with_calls_only_at_the_top_level():
    conv = {"messages": [{"role": "user", "content": "Create a ticket"}, {"role": "assistant", "content": "Created it."}],
            "function_calls": [call("create_ticket", {"id": "TKT-1"}, turn=1)]}
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}
    conv["function_calls"] = []
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["create"]


@pytest.mark.parametrize("name, family", [("create_support_ticket", "create"), ("Plugin-UpdateOrder", "update"),
                                          ("cancelBooking", "cancel"), ("get_ticket", None)])
def test_function_families(name, family):
    assert family_of(name) == family


def test_without_tools_json_names_decide_the_effect():
    conv = transcript(("user", "hi"), ("assistant", "Hello.", [call("search_tickets", []), call("book_room", {})]))
    assert find_claims(conv, {})["done_not_told"] == [{"actual_index": 1, "functionName": "book_room", "turn": 1}]
