"""Claimed but not done / done but not told, on hand-written transcripts."""
import pytest

from lobeval.scoring.claims import find_claims, function_of

TOOLS = {"create_ticket": {"effect": "write"}, "update_ticket": {"effect": "write"},
         "get_ticket": {"effect": "read"}, "cancel_order": {"effect": "write"}, "cancel_ticket": {"effect": "write"}}
SUPPORT_TOOLS = {name: {"effect": "write", "function": {"name": name}} for name in
                 ("create_support_ticket", "update_support_ticket", "create_action_item", "update_action_item")}


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
        {"message_index": 1, "claim": "created", "text": "I've created the ticket for you.", "basis": "no_call"}]


def test_a_claim_backed_only_by_a_failed_call_or_a_read():
    conv = transcript(("user", "Raise the priority of TKT-3"),
                      ("assistant", "The ticket has been updated.",
                       [call("get_ticket", {"id": "TKT-3"}), call("update_ticket", error="permission denied")]))
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["updated"]


def test_a_claim_of_the_wrong_family_is_not_backed():
    conv = transcript(("user", "Cancel order ORD-77"),
                      ("assistant", "Your order has been cancelled.", [call("update_ticket", {"id": "ORD-77"})]))
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["cancelled"]


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
        {"message_index": 1, "claim": "TKT-999", "text": "Your ticket TKT-999 is in progress.", "basis": "identifier"}]


def test_a_write_the_user_was_never_told_about():
    conv = transcript(("user", "Look at TKT-3 please"),
                      ("assistant", "Here it is: printer jams, High priority.",
                       [call("get_ticket", {"id": "TKT-3"}), call("update_ticket", {"id": "TKT-3"})]))
    assert find_claims(conv, TOOLS)["done_not_told"] == [{"actual_index": 1, "functionName": "update_ticket", "turn": 1}]


def test_telling_in_a_later_message_counts():
    conv = transcript(("user", "Make a ticket"),
                      ("assistant", "One moment.", [call("create_ticket", {"id": "TKT-5"})]),
                      ("user", "And?"),
                      ("assistant", "Your ticket TKT-5 has been created."))
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_reading_out_the_id_alone_does_not_tell_what_was_done():
    conv = transcript(("user", "What about my ticket TKT-3?"),
                      ("assistant", "TKT-3: printer jams, High priority.",
                       [call("cancel_ticket", {"ok": True}, ticket_id="TKT-3")]),
                      ("user", "Thanks"),
                      ("assistant", "Your new ticket is TKT-5.", [call("create_ticket", {"id": "TKT-5"}, turn=2)]))
    assert find_claims(conv, TOOLS)["done_not_told"] == [
        {"actual_index": 0, "functionName": "cancel_ticket", "turn": 1},
        {"actual_index": 1, "functionName": "create_ticket", "turn": 2}]


def test_a_statement_of_the_action_about_the_id_tells_it():
    conv = transcript(("user", "Cancel TKT-3"),
                      ("assistant", "TKT-3 has been cancelled.",
                       [call("cancel_ticket", {"ok": True}, ticket_id="TKT-3")]))
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}


@pytest.mark.parametrize("sentence", [
    "Please give its id (e.g. ACT-5017).",
    "Please provide the action item id, for example ACT-5017.",
    "Action item ids look like ACT-5017.",
    "Give me the id of a ticket such as TKT-1042.",
    "Enter the id of the ticket you created.",
    "Now tell me which action item was updated.",
    "Could you send the ids of the tickets I created yesterday.",
])
def test_examples_and_requests_are_not_claims(sentence):
    conv = transcript(("user", "Update an action item"), ("assistant", f"Sure. {sentence}"))
    assert find_claims(conv, SUPPORT_TOOLS)["claimed_not_done"] == []


@pytest.mark.parametrize("text", ["I'd like to confirm that TKT-9 has been created.",
                                  "Ticket TKT-9 has been created, please tell me if you need anything else."])
def test_a_claim_next_to_like_or_a_request_is_still_a_claim(text):
    conv = transcript(("user", "Open a ticket"), ("assistant", text))
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["created", "TKT-9"]


def test_a_claim_is_backed_only_by_a_write_on_the_entity_it_names():
    conv = transcript(("user", "Open a ticket and an action item"),
                      ("assistant", "Done: created ticket TKT-5.",
                       [call("create_support_ticket", {"ticket_id": "TKT-5"})]),
                      ("user", "And the action item?"),
                      ("assistant", "The action item has been created."))
    assert find_claims(conv, SUPPORT_TOOLS) == {
        "claimed_not_done": [{"message_index": 3, "claim": "created", "text": "The action item has been created.",
                              "basis": "no_call"}],
        "done_not_told": []}
    conv["messages"][3]["function_calls"] = [call("create_action_item", {"action_item_id": "ACT-7"}, turn=2)]
    assert find_claims(conv, SUPPORT_TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_a_claim_about_one_entity_does_not_tell_a_write_on_another():
    conv = transcript(("user", "Open a ticket and an action item"),
                      ("assistant", "The action item has been created.",
                       [call("create_support_ticket", {"ticket_id": "TKT-5"}),
                        call("create_action_item", {"action_item_id": "ACT-7"})]))
    assert find_claims(conv, SUPPORT_TOOLS) == {
        "claimed_not_done": [],
        "done_not_told": [{"actual_index": 0, "functionName": "create_support_ticket", "turn": 1}]}


def test_a_claim_with_an_id_is_backed_only_by_a_write_with_that_id():
    conv = transcript(("user", "Open an action item for TKT-5"),
                      ("assistant", "Action item ACT-9 has been created.",
                       [call("create_action_item", {"action_item_id": "ACT-8"}, parent_ticket_id="TKT-5")]))
    assert [c["claim"] for c in find_claims(conv, SUPPORT_TOOLS)["claimed_not_done"]] == ["created", "ACT-9"]
    conv["messages"][1]["content"] = "Action item ACT-8 has been created for ticket TKT-5."
    assert find_claims(conv, SUPPORT_TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_imported_transcripts_with_calls_only_at_the_top_level():
    conv = {"messages": [{"role": "user", "content": "Create a ticket"}, {"role": "assistant", "content": "Created it."}],
            "function_calls": [call("create_ticket", {"id": "TKT-1"}, turn=1)]}
    assert find_claims(conv, TOOLS) == {"claimed_not_done": [], "done_not_told": []}
    conv["function_calls"] = []
    assert [c["claim"] for c in find_claims(conv, TOOLS)["claimed_not_done"]] == ["created"]


@pytest.mark.parametrize("name, actions, entities", [
    ("create_action_item", {"create"}, {"action", "item"}), ("Plugin-UpdateOrder", {"update"}, {"order"}),
    ("cancelBooking", {"cancel"}, {"booking"}), ("submit_leave_request", {"submit"}, {"leave", "request"})])
def test_what_a_function_does_and_acts_on(name, actions, entities):
    function = function_of(name, {})
    assert (function.actions, function.entities) == (actions, entities)


def test_without_tools_json_names_decide_the_effect():
    conv = transcript(("user", "hi"), ("assistant", "Hello.", [call("search_tickets", []), call("book_room", {})]))
    assert find_claims(conv, {})["done_not_told"] == [{"actual_index": 1, "functionName": "book_room", "turn": 1}]


def test_a_new_state_stated_after_the_write_failed_is_claimed_but_not_done():
    failed = call("update_ticket", error="permission denied", id="TKT-1001", priority="Critical")
    conv = transcript(("user", "Make TKT-1001 critical please"),
                      ("assistant", "Done. TKT-1001 is now Critical.", [failed]))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == [
        {"message_index": 1, "claim": "set", "text": "TKT-1001 is now Critical.", "basis": "failed_call"}]


@pytest.mark.parametrize("text, calls", [
    # the same words after the update succeeded
    ("TKT-1001 is now Critical.", [call("update_ticket", {"ok": True}, id="TKT-1001", priority="Critical")]),
    # after a failure then a retry that worked
    ("TKT-1001 is now Critical.", [call("update_ticket", error="timeout", id="TKT-1001", priority="Critical"),
                                   call("update_ticket", {"ok": True}, id="TKT-1001", priority="Critical")]),
    # the failure told as it is, and the state it still has
    ("I could not change it: TKT-1001 is now still High.", [call("update_ticket", error="denied", priority="Critical")]),
    ("TKT-1001 is now assigned to Ana.", [call("update_ticket", error="denied", priority="Critical")]),
])
def test_a_new_state_that_was_set_or_is_not_the_failed_value_is_no_claim(text, calls):
    conv = transcript(("user", "Make TKT-1001 critical please"), ("assistant", text, calls))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == []


SCHEMA_TOOLS = {"update_item": {"effect": "write", "function": {"name": "update_item", "description": "Change an item.",
                                 "parameters": {"properties": {"due_date": {"type": "string", "format": "date"},
                                                               "status": {"type": "string",
                                                                          "enum": ["Open", "Completed", "Cancelled"]}}}}}}


def test_a_backed_claim_that_states_another_value_than_the_call_sent_is_claimed_but_not_done():
    conv = transcript(("user", "Move ACT-1 to 12 December 2026"),
                      ("assistant", "Done: updated ACT-1: due date is now 2026-12-12.",
                       [call("update_item", {"ok": True}, action_item_id="ACT-1", due_date="2026-12-11")]))
    assert find_claims(conv, SCHEMA_TOOLS) == {"claimed_not_done": [
        {"message_index": 1, "claim": "updated", "functionName": "update_item", "actual_index": 0,
         "argument": "due_date", "said": "2026-12-12", "sent": "2026-12-11",
         "text": "Done: updated ACT-1: due date is now 2026-12-12.", "basis": "value"}], "done_not_told": []}
    conv["messages"][1]["content"] = "Done: ACT-1 is due on 11 Dec 2026 now."
    assert find_claims(conv, SCHEMA_TOOLS) == {"claimed_not_done": [], "done_not_told": []}


def test_a_cancel_done_as_an_update_to_status_cancelled_backs_has_been_cancelled():
    conv = transcript(("user", "Cancel ACT-2"), ("assistant", "ACT-2 has been cancelled.",
                                                 [call("update_item", {"ok": True}, action_item_id="ACT-2",
                                                       status="Cancelled")]))
    assert find_claims(conv, SCHEMA_TOOLS) == {"claimed_not_done": [], "done_not_told": []}
    conv["messages"][1]["function_calls"][0]["arguments"]["status"] = "Completed"
    assert find_claims(conv, SCHEMA_TOOLS)["claimed_not_done"][0]["claim"] == "cancelled"


def test_the_turn_of_a_write_never_told_is_the_user_turns_so_far_when_the_call_has_none():
    made = {"functionName": "update_item", "arguments": {"status": "Open"}, "result": {"ok": True}}
    conv = transcript(("user", "hi"), ("assistant", "Hello."), ("user", "Look at ACT-3"),
                      ("assistant", "ACT-3 is in the list.", [made]))
    assert find_claims(conv, SCHEMA_TOOLS)["done_not_told"] == [
        {"actual_index": 0, "functionName": "update_item", "turn": 2}]


@pytest.mark.parametrize("text", ["It was opened by the night shift.", "Your manager updated it yesterday.",
                                  "Once you confirm, it will be cancelled.", "I can have it reassigned.",
                                  "Nothing was changed.", "None of them were updated.",
                                  "Requests logged after 6 pm are handled the next day.",
                                  "- Ticket cancelled\n- Ticket kept\nWhich do you prefer?"])
def test_what_someone_else_did_will_do_or_did_not_do_claims_nothing(text):
    conv = transcript(("user", "What about my ticket?"), ("assistant", text))
    assert find_claims(conv, TOOLS)["claimed_not_done"] == []


def test_a_list_read_back_with_assigned_to_claims_nothing():
    items = {"action_items": [{"id": "ACT-1", "title": "Fix printer", "status": "Open", "assignee": "ana@x.example",
                               "due_date": "2026-12-05"}]}
    conv = transcript(("user", "Which action items does TKT-1 have?"),
                      ("assistant", "Ticket TKT-1 has 1 action item(s):\n1. ACT-1: Fix printer (Open, assigned to "
                                    "ana@x.example, due 2026-12-05)", [call("list_action_items", items, ticket_id="TKT-1")]))
    assert find_claims(conv, {"list_action_items": {"effect": "read"}, **SCHEMA_TOOLS}) == {
        "claimed_not_done": [], "done_not_told": []}


def test_a_sentence_with_an_unbacked_claim_still_tells_the_write_it_names():
    conv = transcript(("user", "Cancel ORD-1 and refund it"),
                      ("assistant", "I cancelled ORD-1 and refunded the payment.",
                       [call("refund_order", {"ok": True}, order_id="ORD-1")]))
    assert find_claims(conv, {"refund_order": {"effect": "write"}}) == {
        "claimed_not_done": [{"message_index": 1, "claim": "cancelled",
                              "text": "I cancelled ORD-1 and refunded the payment.", "basis": "other_calls"}],
        "done_not_told": []}


def test_a_past_form_that_is_also_an_enum_value_is_backed_by_a_function_of_its_action():
    tools = {**SCHEMA_TOOLS, "cancel_item": {"effect": "write", "function": {"name": "cancel_item"}}}
    conv = transcript(("user", "Cancel ACT-4"), ("assistant", "I've cancelled ACT-4.",
                                                 [call("cancel_item", {"ok": True}, action_item_id="ACT-4")]))
    assert find_claims(conv, tools) == {"claimed_not_done": [], "done_not_told": []}


def tool(name, effect="write", **properties):
    """A tools.json entry; a property given as a list is an enum."""
    schema = {key: {"type": "string", **({"enum": value} if isinstance(value, list) else {})}
              for key, value in properties.items()}
    return {name: {"effect": effect, "function": {"name": name, "description": "",
                                                  "parameters": {"type": "object", "properties": schema}}}}


PLANS = ["Basic 10GB", "Plus 50GB", "Unlimited"]


def test_a_noun_that_says_the_future_only_before_to_is_no_modal_and_an_enum_value_may_be_spelt_with_spaces():
    tools = tool("change_plan", plan=PLANS, msisdn="")
    conv = transcript(("user", "Switch me to Plus 50GB"),
                      ("assistant", "Your plan change to **Plus 50GB** is confirmed.",
                       [call("change_plan", {"ok": True}, msisdn="0770", plan="Unlimited")]))
    assert [(item["said"], item["sent"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("Plus 50GB", "Unlimited")]
    disputes = tool("dispute_transaction", reason=["not_recognised", "duplicate"], transaction_id="")
    conv = transcript(("user", "I don't know TX-5"),
                      ("assistant", "I've opened dispute DSP-5 with the reason **Not recognised**.",
                       [call("dispute_transaction", {"dispute_id": "DSP-5"}, transaction_id="TX-5",
                             reason="duplicate")]))
    assert [(item["said"], item["sent"]) for item in find_claims(conv, disputes)["claimed_not_done"]] == [
        ("not_recognised", "duplicate")]


def test_a_means_is_no_agent_and_an_agent_follows_its_verb_before_and():
    conv = transcript(("user", "Reset my password"),
                      ("assistant", "Your password has been reset and a temporary one is on its way by SMS."))
    assert [item["claim"] for item in find_claims(conv, tool("reset_password"))["claimed_not_done"]] == ["reset"]


@pytest.mark.parametrize("text", [
    "12 Mar: urgency raised to High by the Service Desk",   # a participle with its agent, no auxiliary
    "All set!",                                               # discourse words alone
    "Plan changes made before the 20th apply from the next bill.",   # a bare plural: a class
    "| Plan | Plus 50GB | Unlimited |\n\nShall I go ahead?",   # a table before a question
])
def test_an_agent_without_auxiliary_a_discourse_clause_a_class_or_a_proposed_table_claims_nothing(text):
    tools = {**tool("update_incident", urgency=["Low", "High"]), **tool("change_plan", plan=PLANS)}
    conv = transcript(("user", "And?"), ("assistant", text))
    assert find_claims(conv, tools)["claimed_not_done"] == []


def test_a_bare_plural_with_nothing_after_it_is_still_a_claim():
    conv = transcript(("user", "Save it"), ("assistant", "Changes saved."))
    assert [item["claim"] for item in find_claims(conv, tool("update_profile"))["claimed_not_done"]] == ["saved"]


def test_an_identifier_argument_names_no_action():
    tools = {**tool("cancel_booking", booking_id=""), **tool("book_room", room="")}
    conv = transcript(("user", "Book room 1.10"),
                      ("assistant", "Booked! Room 1.10, reference BK-2.",
                       [call("cancel_booking", {"ok": True}, booking_id="BK-1"),
                        call("book_room", {"booking_id": "BK-2"}, room="R-1.10")]))
    assert [item["actual_index"] for item in find_claims(conv, tools)["done_not_told"]] == [0]


def test_a_clause_after_and_with_its_own_subject_and_verb_is_about_its_own_record():
    tools = {**tool("cancel_booking", booking_id=""), **tool("book_room", room="")}
    conv = transcript(("user", "Move BK-3 to room 2.11"),
                      ("assistant", "BK-3 is cancelled and Room 2.11 is booked (BK-4).",
                       [call("cancel_booking", {"ok": True}, booking_id="BK-3"),
                        call("book_room", {"booking_id": "BK-4"}, room="R-2.11")]))
    assert find_claims(conv, tools) == {"claimed_not_done": [], "done_not_told": []}


def test_a_second_verb_of_the_bot_is_judged_on_its_own_words_and_a_value_is_said_whole():
    tools = {**tool("create_incident", summary="", category=["Network", "Access"]),
             **tool("update_incident", assignment_group="")}
    conv = transcript(("user", "Log it and send it to Network Security"),
                      ("assistant", "I've logged INC-9 for the VPN drop-outs and assigned it to the Network Security "
                                    "team.",
                       [call("create_incident", {"ref": "INC-9"}, summary="VPN drop-outs", category="Network"),
                        call("update_incident", error="no such group", assignment_group="Network Security")]))
    assert [item["claim"] for item in find_claims(conv, tools)["claimed_not_done"]] == ["assigned"]


def test_an_effect_the_writes_result_reports_backs_a_claim_of_it():
    tools = tool("create_return", sku="")
    said = "A prepaid label has been emailed to you."
    for result, claims in (({"return_id": "RMA-1", "label_emailed": True}, []),
                           ({"return_id": "RMA-1", "label_emailed": False}, ["emailed"])):
        conv = transcript(("user", "Return KT-2"), ("assistant", said, [call("create_return", result, sku="KT-2")]))
        assert [item["claim"] for item in find_claims(conv, tools)["claimed_not_done"]] == claims


@pytest.mark.parametrize("text, told", [
    ("Your request #ABS-1310 is in.", True),                 # in place, with the identifier the write returned
    ("A replacement is on its way.", True),                  # in place, with the write's entity
    ("EU Roaming is no longer on your line.", True),         # an enum value it set, as the suite spells it
    ("You've used 3 sick days, not Unpaid ones.", False),    # the value in another spelling, or negated
    ("Your reference will be ABS-1310 once it is in.", False),   # later
])
def test_a_write_is_told_by_its_record_in_place_or_the_value_it_set(text, told):
    tools = {**tool("submit_absence", absence_type=["Sick", "Unpaid"]), **tool("order_replacement"),
             **tool("remove_bolt_on", bolt_on=["EU Roaming", "Extra 5GB"])}
    calls = {"ABS": call("submit_absence", {"request_id": "ABS-1310"}, absence_type="Sick"),
             "replacement": call("order_replacement", {"ok": True}, card="4410"),
             "Roaming": call("remove_bolt_on", {"ok": True}, bolt_on="EU Roaming")}
    made = [made for key, made in calls.items() if key in text] or [calls["ABS"]]
    conv = transcript(("user", "Go on"), ("assistant", text, made))
    assert find_claims(conv, tools)["done_not_told"] == ([] if told else [
        {"actual_index": 0, "functionName": made[0]["functionName"], "turn": 1}])


def test_an_action_named_as_a_noun_must_agree_with_the_values_sent():
    tools = {**tool("issue_refund", order_id=""), **tool("change_plan", plan=PLANS)}
    tools["issue_refund"]["function"]["parameters"]["properties"]["amount"] = {"type": "number"}
    tools["issue_refund"]["function"]["description"] = "Refund an amount to the customer."
    conv = transcript(("user", "Refund 100-5"), ("assistant", "Your refund of €29.99 is on its way.",
                                                 [call("issue_refund", {"ok": True}, order_id="100-5", amount=24.99)]))
    assert [(item["claim"], item["said"], item["sent"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("refund", "29.99", 24.99)]
    said = "Your switch to Basic 10GB takes effect on 1 June 2026."
    conv = transcript(("user", "Basic from 1 May"), ("assistant", said, [call("change_plan", {"ok": True}, plan="Basic 10GB",
                                                                           effective_date="2026-05-01")]))
    assert [(item["claim"], item["sent"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("switch", "2026-05-01")]
    conv = transcript(("user", "Refund 100-5"), ("assistant", "The refund policy is 30 days. I've refunded €24.99.",
                                                 [call("issue_refund", {"ok": True}, order_id="100-5", amount=24.99)]))
    assert find_claims(conv, tools) == {"claimed_not_done": [], "done_not_told": []}   # not the head of its phrase


@pytest.mark.parametrize("text, said", [("Room 2.05 is reserved from 14:00 to 15:00.", "14:00"),
                                        ("Room 2.05 is reserved from 15:00 to 16:00.", None),
                                        ("Room 2.05 is reserved from 9:00.", None),
                                        ("Room 2.05 is reserved on 3 April from 14:00.", "14:00"),
                                        ("Room 2.05 is reserved on 3 April from 15:00.", None)])
def test_a_time_of_day_said_must_be_one_the_call_sent(text, said):
    made = call("book_room", {"booking_id": "BK-1"}, room="R-2.05", start="15:00", end="16:00")
    if "9:00" in text:
        made = call("book_room", {"booking_id": "BK-1"}, room="R-2.05", start="09:00", end="10:00")
    if "April" in text:   # a time inside an ISO date-time
        made = call("book_room", {"booking_id": "BK-1"}, room="R-2.05", start="2026-04-03T15:00:00Z")
    conv = transcript(("user", "Book 2.05"), ("assistant", text, [made]))
    assert [item.get("said") for item in find_claims(conv, tool("book_room", room=""))["claimed_not_done"]] == (
        [said] if said else [])


@pytest.mark.parametrize("text, claims", [
    ("Great news — Room 7.02 is yours for Friday.", ["is yours"]),   # in place, but its booking failed
    ("Room 7.02 is in progress of being freed.", []),                  # "in" before a word: no record in place
    ("Room 7.02 is not yours yet, sorry.", []),
])
def test_a_record_said_to_be_in_place_after_its_write_failed_is_claimed_but_not_done(text, claims):
    conv = transcript(("user", "Room 7.02 on Friday"),
                      ("assistant", text, [call("book_room", error="Room unavailable", room="R-7.02")]))
    assert [item["claim"] for item in find_claims(conv, tool("book_room", room=""))["claimed_not_done"]] == claims


def test_a_write_whose_own_word_the_claim_is_failed_leaves_it_to_writes_of_that_word():
    tools = {**tool("update_incident", incident_id="", priority=["Low", "High"]),
             **tool("assign_incident", incident_id="", assignee="")}
    made = [call("update_incident", {"ok": True}, incident_id="INC-4", priority="High"),
            call("assign_incident", error="user not found", incident_id="INC-4", assignee="Tom Becker")]
    conv = transcript(("user", "Raise INC-4 and give it to Tom"),
                      ("assistant", "Priority is now High and I've assigned it to Tom Becker.", made))
    assert [item["claim"] for item in find_claims(conv, tools)["claimed_not_done"]] == ["assigned"]
    made[1] = call("assign_incident", {"ok": True}, incident_id="INC-4", assignee="Tom Becker")
    assert find_claims(conv, tools) == {"claimed_not_done": [], "done_not_told": []}


def test_a_write_that_did_not_set_the_value_said_does_not_agree_with_it():
    tools = {**tool("create_incident", summary="", priority=["High", "Critical"]),
             **tool("update_incident", incident_id="", priority=["High", "Critical"])}
    conv = transcript(
        ("user", "The projector is broken"),
        ("assistant", "INC-7 is logged.", [call("create_incident", {"incident_id": "INC-7"}, summary="Projector")]),
        ("user", "Make it critical"),
        ("assistant", "I've raised INC-7 to Critical.", [call("update_incident", {"ok": True}, incident_id="INC-7",
                                                              priority="High")]))
    assert [(item["said"], item["sent"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("Critical", "High")]


@pytest.mark.parametrize("text, claims", [
    ("Per our SLA, P1 tickets are acknowledged within 15 minutes and resolved within 4 hours.", []),
    ("TKT-9 was reviewed by the night shift and closed on Monday.", []),
    ("I've reviewed TKT-9 and closed it.", ["closed"])])
def test_a_participle_after_and_shares_the_doer_and_tense_of_the_verb_before_it(text, claims):
    conv = transcript(("user", "What about TKT-9?"), ("assistant", text))
    assert [item["claim"] for item in find_claims(conv, TOOLS)["claimed_not_done"]] == claims


@pytest.mark.parametrize("text, claims", [("Reassigned to Tier 2 on 5 March.", []),
                                          ("TKT-9 has been updated to end on 22 May 2026.", ["updated"])])
def test_a_day_after_what_was_set_dates_the_act_read_back(text, claims):
    conv = transcript(("user", "What happened on TKT-9?"),
                      ("assistant", text, [call("get_ticket", {"id": "TKT-9", "status": "Open"})]))
    assert [item["claim"] for item in find_claims(conv, TOOLS)["claimed_not_done"]] == claims


def test_a_write_said_with_an_identifier_nobody_produced_is_told_and_the_identifier_claimed():
    conv = transcript(("user", "I can't log into SAP"),
                      ("assistant", "I've created ticket TKT-999 for the SAP login.",
                       [call("create_ticket", {"id": "TKT-310"}, title="SAP login")]))
    found = find_claims(conv, TOOLS)
    assert ([item["claim"] for item in found["claimed_not_done"]], found["done_not_told"]) == (["created", "TKT-999"], [])


@pytest.mark.parametrize("text, silent", [("Your callback is set for 20 March.", []),
                                          ("Your ticket is set for 20 March.", [0])])
def test_a_change_said_of_the_record_a_write_made_tells_it_even_with_another_value(text, silent):
    tools = tool("schedule_callback", date="")
    conv = transcript(("user", "Call me on 19 March"),
                      ("assistant", text, [call("schedule_callback", {"ok": True}, date="2026-03-19")]))
    found = find_claims(conv, tools)
    assert ([item["claim"] for item in found["claimed_not_done"]],
            [item["actual_index"] for item in found["done_not_told"]]) == (["set"], silent)


@pytest.mark.parametrize("text", ["History of INC-5: Status changed from New to Open by the system on 2 March.",
                                  "History of INC-5: Priority set to Medium on 2 March."])
def test_history_read_back_tells_no_write_of_the_message(text):
    tools = {**tool("update_incident", incident_id="", status=["New", "Open", "In Progress"],
                    priority=["Medium", "High"]), **tool("get_audit_log", effect="read", incident_id="")}
    conv = transcript(("user", "History of INC-5? And start on it."),
                      ("assistant", text, [call("get_audit_log", {"events": [{"at": "2026-03-02"}]}, incident_id="INC-5"),
                                           call("update_incident", {"ok": True}, incident_id="INC-5",
                                                status="In Progress")]))
    assert find_claims(conv, tools) == {"claimed_not_done": [],
                                        "done_not_told": [{"actual_index": 1, "functionName": "update_incident",
                                                           "turn": 1}]}


def test_a_write_on_a_record_it_names_by_identifier_fits_a_sentence_naming_that_record():
    tools = {**tool("issue_refund", order_id="", amount=""), **tool("cancel_order", order_id="")}
    conv = transcript(("user", "Refund 64.90 EUR on order 778812"),
                      ("assistant", "I've refunded €64.90 for order 778812.",
                       [call("issue_refund", {"ok": True}, order_id="778812", amount=46.9)]))
    found = find_claims(conv, tools)
    assert ([(item["argument"], item["said"]) for item in found["claimed_not_done"]], found["done_not_told"]) == (
        [("amount", "64.90")], [])


@pytest.mark.parametrize("row, claims, silent", [("| Priority | High |", [], []),
                                                 ("- **Priority:** Critical", [("priority", "Critical")], []),
                                                 ("| Owner | Critical |", [], [0])])
def test_a_field_shown_with_an_enum_value_tells_the_write_and_must_be_the_value_sent(row, claims, silent):
    tools = tool("create_incident", title="", priority=["Low", "High", "Critical"])
    conv = transcript(("user", "Log the SAP outage"),
                      ("assistant", f"Here is INC-4:\n\n{row}",
                       [call("create_incident", {"number": "INC-4"}, title="SAP outage", priority="High")]))
    found = find_claims(conv, tools)
    assert ([(item["argument"], item["said"]) for item in found["claimed_not_done"]],
            [item["actual_index"] for item in found["done_not_told"]]) == (claims, silent)


def test_the_record_number_a_write_was_on_says_nothing_of_what_it_set():
    tools = tool("update_incident", number="", assignment_group="", priority=["Low", "High"])
    conv = transcript(("user", "Give INC0034500 to Network Operations"),
                      ("assistant", "INC0034500 is with Network Operations now.",
                       [call("update_incident", {"ok": True}, number="INC0034500",
                             assignment_group="Network Operations"),
                        call("update_incident", {"ok": True}, number="INC0034500", priority="Low")]))
    assert [item["actual_index"] for item in find_claims(conv, tools)["done_not_told"]] == [1]


def test_a_second_verb_after_and_keeps_another_doer_however_long_the_first_verbs_object():
    tools = tool("update_incident", number="", priority=["Low", "High"])
    conv = transcript(("user", "Did anyone look at INC-5?"),
                      ("assistant", "Yes, the network team reassigned it to their second-line on-call group this "
                                    "morning and raised it to High.",
                       [call("get_incident", {"number": "INC-5", "priority": "High"}, number="INC-5")]))
    assert find_claims(conv, {**tools, **tool("get_incident", effect="read", number="")})["claimed_not_done"] == []


@pytest.mark.parametrize("text, claims", [
    ("Once a ticket is set to Critical, the duty manager is paged and a bridge call is opened.", []),
    ("The ticket is Critical, the duty manager was paged and a bridge call was opened.", ["paged"])])
def test_a_sentence_that_opens_with_a_condition_says_what_happens_then_in_all_its_clauses(text, claims):
    conv = transcript(("user", "What happens at Critical?"), ("assistant", text))
    said = [item["claim"] for item in find_claims(conv, tool("open_bridge_call"))["claimed_not_done"]]
    assert [claim for claim in said if claim in ("paged", "opened")] == claims   # the sentence's first claim


def test_the_month_may_after_a_day_says_no_future():
    tools = tool("book_leave", start_date="", leave_type=["annual", "unpaid"])
    conv = transcript(("user", "Unpaid leave on 22 May please"),
                      ("assistant", "Your annual leave on 22 May is booked.",
                       [call("book_leave", {"ok": True}, start_date="2026-05-22", leave_type="unpaid")]))
    assert [(item["argument"], item["said"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("leave_type", "annual")]


@pytest.mark.parametrize("text, silent", [("Not yet. I only moved it to In Progress so the clock starts.", []),
                                          ("Not yet. It's with the team so the clock starts.", [0])])
def test_only_before_the_verb_keeps_the_bot_its_doer(text, silent):
    tools = tool("update_incident", number="", state=["New", "In Progress"])
    conv = transcript(("user", "Did you change the priority of INC-7?"),
                      ("assistant", text, [call("update_incident", {"ok": True}, number="INC-7", state="In Progress")]))
    assert [item["actual_index"] for item in find_claims(conv, tools)["done_not_told"]] == silent


@pytest.mark.parametrize("sent, claims", [("2026-08-13", [("date", "Friday the 14th")]), ("2026-08-14", [])])
def test_a_weekday_and_day_of_the_month_is_a_date(sent, claims):
    tools = tool("schedule_callback", number="", date="")
    conv = transcript(("user", "Call me on Friday the 14th"),
                      ("assistant", "Your callback is booked for Friday the 14th.",
                       [call("schedule_callback", {"ok": True}, number="INC-9", date=sent)]))
    assert [(item["argument"], item["said"]) for item in find_claims(conv, tools)["claimed_not_done"]] == claims


@pytest.mark.parametrize("written, numbers", [("1,450", {"1450", "1.45"}), ("5,00", {"5.00"}), ("1.450,50", {"1450.50"}),
                                              ("1,000,000", {"1000000"}), ("14.50", {"14.50"}), ("12.5.3", set())])
def test_a_number_as_written_may_be_read_with_a_decimal_comma_or_thousands_separators(written, numbers):
    from decimal import Decimal

    from lobeval.scoring.claim_words import readings
    assert readings(written) == {Decimal(number) for number in numbers}


AMOUNT_TOOLS = {"issue_refund": {"effect": "write", "function": {"name": "issue_refund", "parameters": {
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}}}}}


@pytest.mark.parametrize("text, sent, result, said", [
    ("I've refunded €42,40 on order 40-22918.", 42.4, None, None),          # a decimal comma
    ("I've refunded €5,00 on order 40-22918.", 5.0, None, None),
    ("I've refunded $1,580 on order 40-22918.", 1850, None, "1,580"),      # thousands separator, digits swapped
    ("I've refunded EUR 125.00 on order 40-22918.", 1250, None, "125.00"),
    ("I've refunded $1,234.56 on order 40-22918.", 1234.56, None, None),
    ("I've refunded 1.234,56 € on order 40-22918.", 1234.56, None, None),
    ("I've refunded 300 EUR; your balance is now 1,450 EUR.", 300, {"balance": 1450}, None),   # from the result
    ("I've refunded 300 points (worth $3.00) on order 40-22918.", 300, None, None),   # said again in other terms
])
def test_an_amount_said_in_another_format_is_compared_with_the_number_sent(text, sent, result, said):
    conv = transcript(("user", "Refund order 40-22918"),
                      ("assistant", text, [call("issue_refund", result or {"ok": True}, order_id="40-22918",
                                                amount=sent)]))
    assert [item["said"] for item in find_claims(conv, AMOUNT_TOOLS)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, said", [
    ("Chen is on call now, I have set the override from 8:00 PM to 12:00 AM.", "8:00 PM"),   # sent 18:00
    ("Chen is on call now, I have set the override from 6pm until midnight.", None),
    ("Chen is on call now, I have set the override from 6:00 p.m. to 12 a.m.", None),
    ("Chen is on call now, I have set the override for 4 July from 18:00 to 00:00.", None),
    ("Chen is on call now, I have set the override for 6 July from 18:00 to 00:00.", "6 July"),   # not a date sent
    ("Chen is on call now, I have set the override for 5 July from 18:00 to 00:00.", "5 July 18:00"),   # the end's date
    ("Chen is on call now, I have set the override for Saturday 4 July, 18:00 to 00:00.", "4 July"),   # a Friday
    ("Chen is on call now, I have set the override for 4 July, 00:00 to 18:00.", "4 July 00:00"),
])
def test_a_time_said_on_a_12_hour_clock_or_with_its_date_must_be_the_date_time_sent(text, said):
    tools = tool("set_override", user_id="", start="", end="")
    conv = transcript(("user", "Chen on call 4 July from 6pm"),
                      ("assistant", text, [call("set_override", {"ok": True}, user_id="cwei",
                                                start="2025-07-04T18:00:00", end="2025-07-05T00:00:00")]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, said", [
    ("Your pickup is booked for 30 November, 13:00–18:00.", None),
    ("Your pickup is booked for 30 November, between 12:00 and 16:00.", "12:00 and 16:00"),
    ("Your pickup is booked for 30 November, 13:00 to 16:00.", "13:00 to 16:00"),
    ("Your pickup is booked for 30 November, 08:00–12:00.", "08:00–12:00"),   # only a read returned it
    ("Your pickup is booked for 13:00–18:00 instead of 08:00–12:00.", None),   # the old window beside the new one
])
def test_a_time_window_said_must_be_the_window_sent(text, said):
    tools = {**tool("schedule_pickup", date="", window=""), **tool("get_pickup", effect="read")}
    conv = transcript(("user", "Pickup on 30 November"),
                      ("assistant", text, [call("get_pickup", {"window": "08:00-12:00"}),
                                           call("schedule_pickup", {"ok": True}, date="2026-11-30",
                                                window="13:00-18:00")]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, sent, said", [
    ("Your delivery is booked for 27/11.", "2026-11-27", None),
    ("Your delivery is booked for 12/01.", "2026-12-01", None),            # month first
    ("Your delivery is booked for 12/01.", "2027-01-12", None),            # day first
    ("Your delivery is booked for 12/01.", "2026-12-02", "12/01"),
    ("Your delivery is booked for 26.11.2026.", "2026-11-26", None),
    ("Your delivery is booked for 26.11.2026.", "2026-11-27", "26.11.2026"),
    ("Your delivery is booked for Friday 27 November.", "2026-11-27", None),   # a Friday
    ("Your delivery is booked for Thursday 27 November.", "2026-11-27", "27 November"),
    ("Your delivery is booked for Friday 0 November.", "2026-11-27", "0 November"),   # no such day
    ("Your delivery is booked today (26.11.2026) for 27 November.", "2026-11-27", None),   # today's date is no value
])
def test_a_date_said_with_its_weekday_or_as_day_and_month_must_be_the_day_sent(text, sent, said):
    tools = tool("reserve_delivery", date="")
    conv = transcript(("user", "Deliver it please"), ("assistant", text,
                                                      [call("reserve_delivery", {"ok": True}, date=sent)]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


PRIORITIES = ["1 - Critical", "2 - High", "3 - Moderate", "4 - Low"]


def test_an_enum_value_is_said_with_any_dash_and_a_letter_before_its_number():
    from lobeval.scoring.claim_words import value_pattern
    assert value_pattern("1 - Critical").search("raised to **P1 – Critical**")
    assert value_pattern("1 - Critical").search("raised to 1—critical")
    assert not value_pattern("2 - High").search("raised to **P1 – Critical**")
    assert not value_pattern("1 - Critical").search("raised to P21 - Critical")
    tools = tool("update_incident", number="", priority=PRIORITIES)
    conv = transcript(("user", "Highest priority please"),
                      ("assistant", "Priority raised to P1 Critical.",
                       [call("update_incident", {"ok": True}, number="INC-4", priority="2 - High")]))
    assert [(item["said"], item["sent"]) for item in find_claims(conv, tools)["claimed_not_done"]] == [
        ("1 - Critical", "2 - High")]


@pytest.mark.parametrize("text, said", [("I have raised a request for one monitor.", "one"),
                                        ("I have raised a request for two monitors.", None),
                                        ("I have raised a request for both monitors.", None),
                                        ("I have raised a request; the new one arrives Monday.", None)])
def test_a_quantity_said_as_a_word_must_be_the_whole_number_sent(text, said):
    tools = tool("raise_request", item="")
    tools["raise_request"]["function"]["parameters"]["properties"]["quantity"] = {"type": "integer"}
    conv = transcript(("user", "Two monitors"),
                      ("assistant", text, [call("raise_request", {"ok": True}, item="Monitor", quantity=2)]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("name, said", [("**Jorge Martínez**", "Jorge Martínez"), ("**Jorge Morales**", None),
                                        ("Jorge", None)])
def test_every_word_of_the_name_a_record_was_assigned_to_must_be_sent(name, said):
    tools = tool("reassign_incident", number="", assignment_group="", assigned_to="")
    conv = transcript(("user", "Give INC-8 to Jorge Morales"),
                      ("assistant", f"It is now assigned to {name}.",
                       [call("reassign_incident", {"ok": True}, number="INC-8", assignment_group="Desktop Support",
                             assigned_to="Jorge Morales")]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, said", [
    ("I have added the \"EU Roaming 5GB\" add-on to your line.", "ROAM_EU_5GB"),   # its words in any order, cut short
    ("I have added the \"World Roaming 2GB\" add-on to your line.", None),
    ("I have added the \"EU Roaming\" add-on to your line.", None),                 # not every word of a value
    ("I have added it with the bolt on 'my EU 5GB pack please'.", "EU_5GB"),  # inside a quote after its name
    ("I have added it, as you said: 'my EU 5GB pack please'.", None),             # the user's words
])
def test_an_enum_value_said_in_quotation_marks_in_another_form_must_be_the_value_sent(text, said):
    tools = tool("add_bolt_on", msisdn="", bolt_on=["ROAM_EU_5GB", "ROAM_WORLD_2GB", "EU_5GB"])
    conv = transcript(("user", "Add a roaming pack"),
                      ("assistant", text, [call("add_bolt_on", {"ok": True}, msisdn="447700900789",
                                                bolt_on="ROAM_WORLD_2GB")]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, said", [("Done! Card ending 8802 is frozen.", "8802"),
                                        ("Done! Card ending **3391** is frozen.", None),
                                        ("Done! The card ending in 33 91 is frozen.", None),   # digits grouped
                                        ("Done! Card ending 4417 is frozen.", None)])          # a read returned it
def test_the_last_digits_said_of_a_number_must_end_one_the_call_sent_or_a_read_returned(text, said):
    tools = {**tool("freeze_card", card_id=""), **tool("get_cards", effect="read")}
    conv = transcript(("user", "Freeze the Visa"),
                      ("assistant", text, [call("get_cards", {"cards": ["visa_4417"]}),
                                           call("freeze_card", {"status": "frozen"}, card_id="card_3391")]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


@pytest.mark.parametrize("text, said", [("I've removed both pairs from the order.", "both"),
                                        ("I've removed one pair from the order.", None)])
def test_a_count_in_words_is_compared_with_the_numbers_sent_as_numbers_not_digits_in_text(text, said):
    tools = tool("void_line", line_id="", date="")   # "L2" and "2026-01-02" hold a 2, as text
    conv = transcript(("user", "Take one pair off"),
                      ("assistant", text, [call("void_line", {"remaining_qty": 1}, line_id="L2", date="2026-01-02",
                                                quantity=1)]))
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ([said] if said else [])


def test_an_impossible_date_time_sent_is_no_moment_to_compare_with():
    tools = tool("set_override", user_id="", start="", end="")
    conv = transcript(("user", "Chen on call"),
                      ("assistant", "I have set the override until 5 July, 00:00.",
                       [call("set_override", {"ok": True}, user_id="cwei", start="2025-13-04T18:00:00",
                             end="2025-07-05T00:00:00")]))
    assert find_claims(conv, tools) == {"claimed_not_done": [], "done_not_told": []}
    conv["messages"][1]["content"] = "I have set the override until 5 July, 01:00."
    assert [item["said"] for item in find_claims(conv, tools)["claimed_not_done"]] == ["01:00"]
