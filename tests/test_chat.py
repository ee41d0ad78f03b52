import asyncio

from lobeval.chat import chat_loop


def test_chat_loop_shows_replies_and_in_debug_every_call_until_quit():
    lines = iter(["1", "ana@example.org", "2026-12-21", "2026-12-24", "1", "yes", "/quit", "never read"])
    shown = []
    asyncio.run(chat_loop("toy_leave_bot:LeaveBot", debug=True, read=lambda _: next(lines), write=shown.append))
    assert shown[0].startswith("bot> Hi, I'm the HR helper")
    call = next(line for line in shown if line.startswith("  [book_leave("))
    assert '"employee_email": "ana@example.org"' in call and '-> {"booking_id": "LV-101"}' in call
    assert shown[-2].startswith("bot> Booked! Your reference is LV-101")
    assert shown[-1].startswith("[end state:")
