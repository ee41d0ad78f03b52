"""`lobeval lint`: cases no agent could pass, or any agent would pass, found before a run."""
import pytest

from lobeval.cli import main
from lobeval.generation.generate import generate
from lobeval.drafting.lint import case_problems, lint, perfect_conversation
from lobeval.core.records import write_jsonl
from lobeval.scoring.scoring import Rules
from helpers import SAMPLE_SUITE, read_jsonl

BOT = "lobeval.samples.support_tickets:SupportTicketBot"


def lint_case(**changes):
    case = {"case_id": "c-1", "scenario_name": "s", "user_instructions": "x",
            "expected_function_calls": [
                {"functionName": "create_ticket", "arguments": {"title": "A"}},
                {"functionName": "create_action", "arguments": {"ticket_id": {"$ref": "create_ticket.result.ticket_id"},
                                                                "title": {"$oneOf": ["x", "y"]}}}],
            "expected_outputs": ["TKT"]}
    return {**case, **changes}


def test_perfect_conversation_answers_its_own_references():
    conversation = perfect_conversation(lint_case())
    assert conversation["function_calls"][0]["result"] == {"ticket_id": "<create_ticket.result.ticket_id>"}
    assert conversation["function_calls"][1]["arguments"] == {"ticket_id": "<create_ticket.result.ticket_id>",
                                                              "title": "x"}
    assert case_problems(lint_case(), Rules()) == []


def test_lint_flags_broken_cases():
    tools = {"create_ticket": {"effect": "write", "function": {"parameters": {"properties": {"title": {}}}}}}
    broken = lint_case(expected_function_calls=[
        {"functionName": "create_action", "arguments": {"ticket_id": {"$ref": "create_ticket.result.ticket_id"}}},
        {"functionName": "create_ticket", "arguments": {"title": "A", "colour": "red"}}],
        forbidden_function_calls=["create_ticket"])
    # The same checks and messages as `lobeval generate` gives for a template, all of them.
    assert case_problems(broken, Rules(tools=tools)) == [
        ("expected_function_calls[0].functionName", "unknown function 'create_action' (not in tools.json)"),
        ("expected_function_calls[0].arguments.ticket_id",
         "$ref to 'create_ticket', which is not an earlier expected call of this scenario"),
        ("expected_function_calls[1].arguments.colour",
         "'create_ticket' has no argument 'colour' in tools.json (arguments: title)"),
        ("expected_function_calls[1].functionName", "'create_ticket' is both expected and forbidden"),
        ("expected_function_calls", "a perfect agent scores Success 0 (failed: calls_correct, no_forbidden_calls)")]
    # Expecting nothing at all: an empty conversation may succeed; expecting only optional look-ups too.
    assert case_problems(lint_case(expected_function_calls=[], expected_outputs=[]), Rules()) == []


def test_lint_reports_a_target_that_cannot_replay_the_expected_calls(tmp_path):
    dataset = write_jsonl(tmp_path / "d.jsonl", [lint_case()])
    assert lint(dataset, target="toy_leave_bot:LeaveBot") == [
        f"{dataset}: case c-1: field 'target': toy_leave_bot:LeaveBot offers no apply(): the expected calls cannot be "
        f"replayed"]


@pytest.mark.slow
def test_lint_command_on_the_sample_suite_and_a_broken_dataset(tmp_path, capsys):
    dataset = generate(SAMPLE_SUITE, tmp_path / "d.jsonl", cases_per_scenario=1, seed=5).path
    assert main(["lint", "--dataset", str(dataset), "--suite", str(SAMPLE_SUITE), "--target", BOT]) == 0
    assert "lint: 0 problem(s)" in capsys.readouterr().out
    cases = read_jsonl(dataset)
    cases[0]["expected_function_calls"][0]["arguments"]["department_code"] = "NOPE"
    write_jsonl(dataset, cases)
    assert main(["lint", "--dataset", str(dataset), "--suite", str(SAMPLE_SUITE), "--target", BOT]) == 2
    err = capsys.readouterr().err
    assert (f"{dataset}: case {cases[0]['case_id']}: field 'expected_function_calls[0]': create_support_ticket fails "
            f"on the target: 'NOPE' is not a valid department code") in err
