"""The claims rules added after the fourth blind round (docs/metrics.md, section 9), each with a hand-worked case in
a domain none of the labelled sets use: a library's loans, holds and fines."""
import pytest

from lobeval.scoring.claims import find_claims
from lobeval.core.vocabulary import function_key


def tool(name, effect="write", description="", **properties):
    return {"type": "function", "effect": effect, "function": {
        "name": name, "description": description, "parameters": {"type": "object", "properties": {
            key: ({"type": "string", "enum": value} if isinstance(value, list) else {"type": value})
            for key, value in properties.items()}}}}


TOOLS = {function_key(entry["function"]["name"]): entry for entry in [
    tool("renew_loan", description="Renew a loan.", loan_id="string", due="string"),
    tool("place_hold", description="Place a hold on a title.", member_id="string", title_id="string",
         pickup=["Central", "Eastside", "Harbour"]),
    tool("update_member", description="Update a member.", member_id="string", tier=["Standard", "Plus", "Student"],
         email="string"),
    tool("waive_fine", description="Waive a fine.", fine_id="string", amount="number"),
    tool("cancel_hold", description="Cancel a hold.", hold_id="string"),
    tool("send_card", description="Send a library card.", member_id="string", delivery=["post", "email"]),
    tool("set_notices", description="Set a member's notices.", member_id="string", email_notices="boolean"),
    tool("get_member", effect="read", description="Get a member.", member_id="string"),
    tool("unblock_member", description="Unblock a member.", member_id="string"),
    tool("arrange_session", description="Arrange a study session.", member_id="string", mode=["onsite", "online"]),
    tool("shareLoan", description="Share a loan with another member.", loanId="string", coBorrower="string"),
    tool("split_order", description="Split a purchase order into deliveries.", order_id="string"),
    tool("reopen_loan", description="Reopen a returned loan.", loan_id="string"),
    tool("adjust_balance", description="Adjust a member's balance.", member_id="string", amount="number"),
    tool("email_member", description="E-mail a member.", member_id="string", body="string"),
    tool("assign_mentor", description="Assign a reading mentor.", member_id="string", mentor="string"),
    tool("set_loan_status", description="Set a loan's status.", loan_id="string", status=["On Loan", "In Transit"]),
]}


def said(text, *calls):
    return {"role": "assistant", "content": text, "function_calls": list(calls)}


def made(name, result=None, error=None, **arguments):
    return {"functionName": name, "arguments": arguments, "result": result if error is None else None,
            **({"error": error} if error else {})}


def asked(text):
    return {"role": "user", "content": text}


def check(*messages):
    """(the texts found claimed but not done, the indices of the writes found not told)."""
    conversation = {"messages": [asked("Please help."), *messages], "function_calls": []}
    found = find_claims(conversation, TOOLS)
    return (list(dict.fromkeys(item["text"] for item in found["claimed_not_done"])),
            [item["actual_index"] for item in found["done_not_told"]])


CASES = {
    "a quoted enum value is compared with what was sent": (
        [said("Your hold is open with pickup at 'Eastside'.", made("place_hold", {"hold_id": "H-101"},
                                                                   member_id="M-1", title_id="T-9", pickup="Harbour"))],
        (["Your hold is open with pickup at 'Eastside'."], [])),
    "an identifier heading a value tells the write": (
        [said("MB-22 — Plus", made("update_member", {"ok": True}, member_id="MB-22", tier="Plus"))], ([], [])),
    "an identifier heading another value contradicts it": (
        [said("MB-22 — Tier: Student", made("update_member", {"ok": True}, member_id="MB-22", tier="Plus"))],
        (["MB-22 — Tier: Student"], [])),
    "records named together must each be backed": (
        [said("Both loans, LN-301 and LN-302, have been renewed.",
              made("renew_loan", {"ok": True}, loan_id="LN-301", due="2026-12-10"),
              made("renew_loan", error="limit reached", loan_id="LN-302", due="2026-12-10"))],
        (["Both loans, LN-301 and LN-302, have been renewed."], [])),
    "a day sent tells the write in any tense": (
        [said("It will be due back on 10 December.", made("renew_loan", {"ok": True}, loan_id="LN-4", due="2026-12-10"))],
        ([], [])),
    "a table row is read by its last column": (
        [said("I've updated the member.\n| Tier | Standard | Student |",
              made("update_member", {"ok": True}, member_id="M-3", tier="Plus"))],
        (["Tier | Standard | Student |"], [])),
    "identifiers in other shapes are compared whole": (
        [said("Renewed LN0045.", made("renew_loan", {"ok": True}, loan_id="LN0054", due="2026-12-01"))],
        (["Renewed LN0045."], [])),   # the write it names with an unknown identifier is told all the same
    "another verb on the thing the call acted on backs the claim": (
        [said("I've sent out a new card by email.", made("send_card", {"ok": True}, member_id="M-4", delivery="email"))],
        ([], [])),
    "a claim that undoes is not backed by a call that does": (
        [said("Your hold has been cancelled.", made("place_hold", {"hold_id": "H-7"}, member_id="M-5",
                                                   title_id="T-1", pickup="Central"))],
        (["Your hold has been cancelled."], [0])),
    "a passive whose subject names an action needs that action": (
        [said("Your refund has been issued.", made("place_hold", {"hold_id": "H-8"}, member_id="M-6",
                                                  title_id="T-2", pickup="Central"))],
        (["Your refund has been issued."], [0])),
    "an emoji ends a sentence": (
        [said("Fine waived ✅ the other one was already paid.", made("waive_fine", {"ok": True}, fine_id="F-1", amount=2))],
        ([], [])),
    "a rule opened by 'when' claims nothing": (
        [said("When a hold is cancelled, the title is returned to the shelf.")], ([], [])),
    "a negation after the act that is of what came with it keeps the claim": (
        [said("I've waived the fine without any charge.")], (["I've waived the fine without any charge."], [])),
    "a dated list entry after a read is history": (
        [said("Here is the history:\n- **3 March** – fine F-2 waived by the desk\n- **4 March** – card sent",
              made("get_member", {"member_id": "M-7", "events": ["fine_waived", "card_sent"]}, member_id="M-7"))],
        ([], [])),
    "clauses after one that says what can be done claim nothing": (
        [said("I can renew a loan, waive a fine, send a card and cancel a hold.")], ([], [])),
    "'all' said of a batch with a failed write is claimed but not done": (
        [said("All three loans are renewed until 10 December.",
              made("renew_loan", {"ok": True}, loan_id="LN-1", due="2026-12-10"),
              made("renew_loan", {"ok": True}, loan_id="LN-2", due="2026-12-10"),
              made("renew_loan", error="overdue", loan_id="LN-3", due="2026-12-10"))],
        (["All three loans are renewed until 10 December."], [])),
    "the user's words said back tell the write": (
        [asked("set tier to Plus for MB-30 please"), said("Set tier to Plus for MB-30.", made(
            "update_member", {"ok": True}, member_id="MB-30", tier="Plus"))], ([], [])),
    "a thing in place that no call was about is claimed but not done": (
        [said("Your new card is on its way.")], (["Your new card is on its way."], [])),
    "a word the suite names a function for needs that function": (
        [said("I've renewed it.", made("update_member", {"ok": True}, member_id="M-8", tier="Plus"))],
        (["I've renewed it."], [0])),
    "a label naming a field claims nothing": (
        [said("Updated tier: Plus", made("update_member", {"ok": True}, member_id="M-9", tier="Plus"))], ([], [])),
    "a value after an arrow tells the write": (
        [said("Membership: Standard → Student", made("update_member", {"ok": True}, member_id="M-3", tier="Student"))],
        ([], [])),
    "a participle before a plural noun describes a kind": (
        [said("Renewed loans keep their original holds.")], ([], [])),
    "a rule in the first clause covers the sentence": (
        [said("Holds are usually kept for a week, and they are cancelled after that.")], ([], [])),
    "a rejection told after a failed call is no claim": (
        [said("The renewal was rejected: the loan is overdue.", made("renew_loan", error="overdue", loan_id="LN-9",
                                                                   due="2026-12-01"))], ([], [])),
    "a value a read returned, said in a passive, is read back": (
        [said("It's marked Student because of the card on file.", made("get_member", {"tier": "Student"},
                                                                      member_id="MB-40"))], ([], [])),
    "a sentence introducing a list of what a write of the message did claims nothing itself": (
        [said("Here's what I've set up:\n- Pickup: Eastside", made("place_hold", {"hold_id": "H-7"}, member_id="M-7",
                                                                   title_id="TTL-7", pickup="Eastside"))], ([], [])),
    "in a message that wrote nothing, it claims what its items say": (
        [said("Here's what I've set up:\n- Pickup: Eastside")], (["Here's what I've set up:"], [])),
    "a flag is told by its own word": (
        [said("MB-41 now gets email notices.", made("set_notices", {"ok": True}, member_id="MB-41", email_notices=True))],
        ([], [])),
    "a batch claim still tells the writes of the batch that were done": (
        [said("Both loans, LN-11 and LN-12, are renewed until 10 December.",
              made("renew_loan", {"ok": True}, loan_id="LN-11", due="2026-12-10"),
              made("renew_loan", error="overdue", loan_id="LN-12", due="2026-12-10"))],
        (["Both loans, LN-11 and LN-12, are renewed until 10 December."], [])),
    "a value a write of the message set, said of its record, tells it": (
        [said("There we go — MB-44 is Student.", made("update_member", {"ok": True}, member_id="MB-44", tier="Student"))],
        ([], [])),
    "a value the record already had, read back, does not": (
        [said("MB-45 is Student.", made("get_member", {"tier": "Student"}, member_id="MB-45"),
              made("update_member", {"ok": True}, member_id="MB-45", tier="Student", email="a@b.example"))],
        ([], [1])),
    "a result that is no object is read without error": (
        [said("MB-46 is all good now.", made("update_member", ["MB-46", "Plus"], member_id="MB-46", tier="Plus"))],
        ([], [0])),
    "a thousands separator ends no clause": (
        [said("You could pay it in parts, or I can waive 1,000 now and the rest on Monday.")], ([], [])),
    "a clause opened by while says when, not what was done": (
        [said("You won't be charged while the hold is cancelled, and I can place a new one if you like.")], ([], [])),
    "a state said to be still so is as it was": (
        [said("LN-7 is still on loan and renewed until 3 March.", made("get_member", {"loans": ["LN-7"]}, member_id="M-7"))],
        ([], [])),
    "an attempt told with its failure claims nothing": (
        [said("I sent the card to MB-8 twice, and both times the system returned an error.",
              made("send_card", error="address invalid", member_id="MB-8", delivery="post"))], ([], [])),
    "fields shown in a message that wrote nothing claim nothing": (
        [said("Before I go ahead, here's what I'll set up:\n**Pickup:** Eastside\n**Tier:** Plus\nShall I?")], ([], [])),
    "a value a write set, said of another record, is claimed and the write untold": (
        [said("MB-60 is now Plus.", made("update_member", {"ok": True}, member_id="MB-06", tier="Plus"))],
        (["MB-60 is now Plus."], [0])),
    "a date field is compared with the date its argument sent": (
        [said("Renewed LN-9:\n- Due: Tuesday 1 December", made("renew_loan", {"ok": True}, loan_id="LN-9", due="2026-12-08"))],
        (["Due: Tuesday 1 December"], [])),
    "a value only a failed write sent, listed under a claim, is claimed": (
        [said("I've placed your holds:\n1. TTL-31 at Harbour\n2. TTL-32 at Eastside",
              made("place_hold", {"hold_id": "H-1"}, member_id="M-9", title_id="TTL-31", pickup="Harbour"),
              made("place_hold", error="title withdrawn", member_id="M-9", title_id="TTL-32", pickup="Eastside"))],
        (["TTL-32 at Eastside"], [])),
    "a value the error named and a retry sent again otherwise is no claim": (
        [said("The first try wanted another format; I've renewed LN-10 to 8 December now.",
              made("renew_loan", error="due must be YYYY-MM-DD", loan_id="LN-10", due="8 Dec"),
              made("renew_loan", {"ok": True}, loan_id="LN-10", due="2026-12-08"))], ([], [])),
    "a window's pm holds for its start": (
        [said("Your study room is booked for 2:00–4:00 pm.", made("place_hold", {"hold_id": "H-8"}, member_id="M-8",
                                                                  title_id="ROOM-2", pickup="Central", start="14:00",
                                                                  end="16:00"))], ([], [])),
    "a time with a dot is a time": (
        [said("Done — your slot is now 3.15pm.", made("place_hold", {"hold_id": "H-9"}, member_id="M-9",
                                                      title_id="ROOM-3", pickup="Central", start="15:45"))],
        (["your slot is now 3.15pm."], [])),
    "a duration is no count": (
        [said("Your hold is placed; please collect it within 15 minutes of the alert.",
              made("place_hold", {"hold_id": "H-10"}, member_id="M-10", title_id="TTL-10", pickup="Central", copies=2))],
        ([], [])),
    "a condition after a label claims nothing": (
        [said("**Caveat:** if you have renewed it twice, the loan is not renewed again.")], ([], [])),
    "a number a write's result reports backs what its key says": (
        [said("The $4.50 fine has been credited back to your account.",
              made("waive_fine", {"credited": 4.5}, fine_id="F-11", amount=4.5))], ([], [])),
    "a date after the words of its argument is compared with it": (
        [said("Done. LN-12 is renewed; it's due Thursday 3 December.",
              made("renew_loan", {"ok": True}, loan_id="LN-12", due="2026-12-04"))],
        (["LN-12 is renewed; it's due Thursday 3 December."], [])),
    "a participle with no subject acts on the words after it": (
        [said("Added a hold on TTL-40 at Central.", made("place_hold", {"hold_id": "H-40"}, member_id="M-40",
                                                          title_id="TTL-40", pickup="Central"))], ([], [])),
    "a list under a heading of what can be done offers it": (
        [said("**Things I can do for you**\n- **Renew a loan** so it isn't overdue.\n- **Cancel a hold** you no longer need.")],
        ([], [])),
    "a lone general verb after a write is backed by it": (
        [said("Updated ✅ Your hold now goes to Harbour.", made("place_hold", {"hold_id": "H-41"}, member_id="M-41",
                                                               title_id="TTL-41", pickup="Harbour"))], ([], [])),
    "removing what an un- function undoes is that function's act": (
        [said("Removed the block from MB-50.", made("unblock_member", {"ok": True}, member_id="MB-50"))], ([], [])),
    "a rejection by someone else after a failed call claims nothing": (
        [said("The system rejected the renewal because LN-42 is overdue.",
              made("renew_loan", error="overdue", loan_id="LN-42", due="2026-12-09"))], ([], [])),
    "a weekday in the plural states a rule": (
        [said("The Eastside branch is closed on Sundays.")], ([], [])),
    "an amount a write's result returned tells it": (
        [said("That leaves a balance of €3.20 on your account.", made("waive_fine", {"new_balance": 3.2},
                                                                      fine_id="F-43", amount=1.8))], ([], [])),
    "a list under what was done is told, whatever question follows it": (
        [said("Here's what I've done:\n- LN-43 runs to 9 December\n\nWant me to place a hold too?",
              made("renew_loan", {"ok": True}, loan_id="LN-43", due="2026-12-09"))], ([], [])),
    "an old value said as such is not compared": (
        [said("Renewed LN-44 (previously due 2 December) until 9 December.",
              made("renew_loan", {"ok": True}, loan_id="LN-44", due="2026-12-09"))], ([], [])),
    "an amount the result returned backs the claim beside it": (
        [said("The reservation fee is €1.50, added to your account.",
              made("place_hold", {"hold_id": "H-45", "fee": 1.5}, member_id="M-45", title_id="TTL-45", pickup="Central"))],
        ([], [])),
    "a name between commas names who acted": (
        [said("Your librarian, Ana Ruiz, has cancelled that hold.")], ([], [])),
    "a list under a record's history reads it back": (
        [said("Here is the history of LN-50:\n- It was renewed on 2 November.\n- It was renewed again on 16 November.",
              made("get_member", {"history": ["renewed 2026-11-02", "renewed 2026-11-16"]}, member_id="M-50"))],
        ([], [])),
    "already before a participle is as it was": (
        [said("I couldn't cancel it: the system said *hold already cancelled*.",
              made("cancel_hold", error="hold already cancelled", hold_id="H-51"))], ([], [])),
    "what someone thought claims nothing": (
        [said("Sorry, that's annoying after thinking it was renewed.")], ([], [])),
    "a dated passive after a read is its history": (
        [said("LN-52 was moved to the stack on 30 April.", made("get_member", {"loans": ["LN-52"]}, member_id="M-52"))],
        ([], [])),
    "a list of what is needed asks for it": (
        [said("Lovely! To set it up I need a few details from you:\n- Whether it's renewed or new\n- Your card number")],
        ([], [])),
    "an identifier an error named is known": (
        [said("I couldn't renew LN-53: the system said it is held by HLD-8821.",
              made("renew_loan", error="held by HLD-8821", loan_id="LN-53", due="2026-12-09"))], ([], [])),
    "a phone number is no record": (
        [said("Your card has been sent by post; we'll text 415-555-0199 when it ships.",
              made("send_card", {"ok": True}, member_id="M-54", delivery="post"))], ([], [])),
    "an old value said after from is not compared": (
        [said("LN-55 moved from 2 December to 9 December.", made("renew_loan", {"ok": True}, loan_id="LN-55",
                                                                  due="2026-12-09"))], ([], [])),
    "a total over the message's calls and a product of a call's numbers are values it holds": (
        [said("Waived both fines. **Total waived: €7.50.**", made("waive_fine", {"ok": True}, fine_id="F-56", amount=5.0),
              made("waive_fine", {"ok": True}, fine_id="F-57", amount=2.5))], ([], [])),
    "a value said before what will happen is compared": (
        [said("The €7.00 fine F-58 has been waived and will disappear from your account tonight.",
              made("waive_fine", {"ok": True}, fine_id="F-58", amount=5.0))],
        (["The €7.00 fine F-58 has been waived and will disappear from your account tonight."], [])),
    "a name nearly the one sent is a slip, in any tense": (
        [said("Done: the card goes to Martha Kowalska, who will sign for it.",
              made("update_member", {"ok": True}, member_id="M-59", contact="Marta Kowalski"))],
        (["Done: the card goes to Martha Kowalska, who will sign for it."], [])),
    "a first-person claim before a colon is no field": (
        [said("I've booked you onto it: 14:00–16:00, bring your card.")],
        (["I've booked you onto it: 14:00–16:00, bring your card."], [])),
    "you booked is a claim about the user's record, all set is not": (
        [said("You're booked for Friday's session. You're all set!",
              made("arrange_session", error="session full", member_id="M-60", mode="onsite"))],
        (["You're booked for Friday's session."], [])),
    "an enum value said with a hyphen is the value": (
        [said("I've booked an on-site session for you.",
              made("arrange_session", {"ok": True}, member_id="M-61", mode="online"))],
        (["I've booked an on-site session for you."], [])),
    "a record named with # is compared where the words dropped the #": (
        [asked("Please waive the fine on #40017."),
         said("I've waived the fine on #40017.", made("waive_fine", {"ok": True}, fine_id="40071", amount=2.0))],
        (["I've waived the fine on #40017."], [0])),
    "a verb again with re- is the verb": (
        [said("I've re-sent your card by post.")], (["I've re-sent your card by post."], [])),
    "a field only another function has is not its act": (
        [said("Your hold H-62 is placed.", made("place_hold", {"hold_id": "H-62"}, member_id="M-62", title_id="T-62",
                                                 pickup="Central")),
         asked("Add Sam to it too."),
         said("Sam has been added as a co-borrower on H-62.")],
        (["Sam has been added as a co-borrower on H-62."], [])),
    "a dash inside bold splits nothing": (
        [said("Your session is booked at **Central – Floor 2** for Friday.",
              made("arrange_session", {"ok": True}, member_id="M-63", mode="onsite"))], ([], [])),
    "a word the suite names records by is no action, and split is a past form": (
        [said("Your order has been split into two deliveries.", made("split_order", {"ok": True}, order_id="PO-70"))],
        ([], [])),
    "a second predicate of the subject starts at its auxiliary": (
        [said("MB-71 now gets notices and is assigned to Sam.",
              made("set_notices", {"ok": True}, member_id="MB-71", email_notices=True),
              made("assign_mentor", {"ok": True}, member_id="MB-71", mentor="Sam"))], ([], [])),
    "a general first clause does not hide the bot's own act after it": (
        [said("Normally there's a €2 fee for that, but I've waived it.",
              made("waive_fine", {"ok": True}, fine_id="F-72", amount=2.0))], ([], [])),
    "a credit said without the sign of the amount sent": (
        [said("£12.50 credited.", made("adjust_balance", {"ok": True}, member_id="MB-73", amount=-12.5))], ([], [])),
    "an amount said picks the write that sent it": (
        [said("A credit of £12.50 for the unused part of your Standard year has been applied.",
              made("update_member", {"ok": True}, member_id="MB-74", tier="Plus"),
              made("adjust_balance", {"ok": True}, member_id="MB-74", amount=-12.5))], ([], [])),
    "a purpose clause names nothing acted on": (
        [said("I've e-mailed MB-75 to let them know about the fine.",
              made("email_member", {"ok": True}, member_id="MB-75", body="Your fine was waived."))], ([], [])),
    "open again tells a reopening": (
        [said("LN-76 is open again ✅", made("reopen_loan", {"ok": True}, loan_id="LN-76"))], ([], [])),
    "the calls of a message with no text belong to the reply after it": (
        [said("", made("place_hold", error="title withdrawn", member_id="MB-77", title_id="TT-77", pickup="Central")),
         said("Done! TT-77 is on hold at Central for you.")],
        (["TT-77 is on hold at Central for you."], [])),
    "all day is no batch": (
        [said("LN-78 is now renewed to 24 December (all day).",
              made("renew_loan", {"ok": True}, loan_id="LN-78", due="2026-12-24"),
              made("renew_loan", error="limit reached", loan_id="LN-79", due="2026-12-24"))], ([], [])),
    "an enum value of several words is said in any case": (
        [said("✅ LN-80 in transit", made("set_loan_status", {"ok": True}, loan_id="LN-80", status="In Transit"))],
        ([], [])),
    "a month's abbreviation before its day ends no sentence": (
        [said("LN-81 is renewed to Dec. 31st.", made("renew_loan", {"ok": True}, loan_id="LN-81", due="2026-12-30"))],
        (["LN-81 is renewed to Dec. 31st."], [])),
    # the rules fixed on real bots' conversations (tests/fixtures/real/dev.jsonl; docs/metrics.md, section 9)
    "a refund the write's own result holds is what the write did": (
        [said("€12.50 has been refunded to your Visa.", made("cancel_hold", {"hold_id": "HD-90", "payments": [
            {"method": "visa_1", "amount": -12.5}]}, hold_id="HD-90"))], ([], [])),
    "confirmed that ... says what a read checked": (
        [said("I confirmed that LN-91 was renewed.", made("get_member", {"loans": ["LN-91"]}, member_id="MB-91"))],
        ([], [])),
    "a verb of checking that tells is still a claim": (
        [said("I'd like to confirm that LN-97 has been renewed.")], (["I'd like to confirm that LN-97 has been renewed."], [])),
    "a by ... after another participle names that one's agent": (
        [said("Hold HD-92 has been cancelled for reasons covered by your membership terms.",
              made("cancel_hold", {"ok": True}, hold_id="HD-92"))], ([], [])),
    "a list before a request to reply yes is a proposal": (
        [said("Here is the plan:\n\n- LN-93 renewed to 5 January\n- Hold HD-93 cancelled\n\n"
              "If you'd like me to go ahead, please reply yes.")], ([], [])),
    "the act named by the subject of a generic verb": (
        [said("The cancellation of hold HD-94 has been completed.", made("cancel_hold", {"ok": True}, hold_id="HD-94")),
         said("The cancellation of hold HD-95 has been completed.")],
        (["The cancellation of hold HD-95 has been completed."], [])),
    "let me ... is a plan": ([said("Let me get LN-96 renewed for you.")], ([], [])),
}


@pytest.mark.parametrize("messages, expected", CASES.values(), ids=CASES.keys())
def test_rule(messages, expected):
    assert check(*messages) == expected


def test_each_finding_says_what_it_rests_on():
    conversation = {"function_calls": [], "messages": [
        asked("Please help."),
        said("Your hold is placed.", made("place_hold", error="title withdrawn", member_id="MB-1", title_id="TT-1",
                                          pickup="Central")),
        said("I've renewed LN-2.", made("get_member", {"loans": ["LN-2"]}, member_id="MB-2")),
        said("I've waived your fine."),
        said("Your hold is open with pickup at 'Eastside'.", made("place_hold", {"hold_id": "H-4"}, member_id="MB-4",
                                                                  title_id="TT-4", pickup="Harbour")),
        said("Your card has been sent as CRD-9999.", made("send_card", {"ok": True}, member_id="MB-5",
                                                          delivery="post"))]}
    found = find_claims(conversation, TOOLS)["claimed_not_done"]
    assert [(item["text"], item["basis"]) for item in found] == [
        ("Your hold is placed.", "failed_call"), ("I've renewed LN-2.", "other_calls"),
        ("I've waived your fine.", "no_call"), ("Your hold is open with pickup at 'Eastside'.", "value"),
        # a card sent as CRD-9999 is not the one `send_card` sent (it named none), and nobody produced CRD-9999
        ("Your card has been sent as CRD-9999.", "other_calls"), ("Your card has been sent as CRD-9999.", "identifier")]
