import asyncio

from lobeval.chat import chat_loop, chat_widget


def test_chat_loop_shows_replies_and_in_debug_every_call_until_quit():
    lines = iter(["1", "ana@example.org", "2026-12-21", "2026-12-24", "1", "yes", "/quit", "never read"])
    shown = []
    asyncio.run(chat_loop("toy_leave_bot:LeaveBot", debug=True, read=lambda _: next(lines), write=shown.append))
    assert shown[0].startswith("bot> Hi, I'm the HR helper")
    call = next(line for line in shown if line.startswith("  [book_leave("))
    assert '"employee_email": "ana@example.org"' in call and '-> {"booking_id": "LV-101"}' in call
    assert shown[-2].startswith("bot> Booked! Your reference is LV-101")
    assert shown[-1].startswith("[end state:")


def test_chat_widget_sends_on_enter_and_shows_escaped_text_and_every_call():
    async def talk(messages):
        log, box = chat_widget("toy_leave_bot:LeaveBot").children
        for message in messages:
            box.value = message
            assert box.value == ""          # cleared for the next message
            await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
        return log.value

    page = asyncio.run(talk(["<b>1</b>", "1", "ana@example.org", "2026-12-21", "2026-12-24", "1", "yes"]))
    assert page.startswith("<p><b>bot:</b> Hi, I&#x27;m the HR helper")
    assert "<p><b>you:</b> &lt;b&gt;1&lt;/b&gt;</p>" in page
    assert "[book_leave({&quot;employee_email&quot;: &quot;ana@example.org&quot;" in page
    assert "Booked! Your reference is LV-101" in page
