import os
import subprocess
import sys

import pytest

from lobeval.cli import main
from lobeval.generation.generate import generate
from helpers import ACTIONS, TEMPLATE, TICKETS, make_suite, read_jsonl


def generated(tmp_path, n=3, **suite_kw):
    suite = make_suite(tmp_path, **suite_kw)
    out = tmp_path / "dataset.jsonl"
    generate(suite, out, cases_per_scenario=n, seed=7)
    return read_jsonl(out)


def test_exact_placeholder_keeps_the_field_type_and_text_renders_it(tmp_path):
    case = generated(tmp_path, n=1)[0]
    args = case["expected_function_calls"][0]["arguments"]
    ticket = case["business_data"]["ticket"]
    assert isinstance(args["customer_visible"], bool)
    assert isinstance(args["estimate_hours"], int)
    assert args["customer_visible"] == ticket["customer_visible"]
    visible = "true" if ticket["customer_visible"] else "false"
    assert case["user_instructions"] == (f"Create '{ticket['title']}' (visible: {visible}), "
                                         f"then '{case['business_data']['action']['title']}'.")
    assert case["expected_outputs"] == [ticket["priority"]]


def test_ref_is_kept_for_run_time(tmp_path):
    case = generated(tmp_path, n=1)[0]
    assert case["expected_function_calls"][1]["arguments"]["ticket_id"] == {"$ref": "create_ticket.result.ticket_id"}


def test_child_is_sampled_among_the_sampled_parents_children(tmp_path):
    cases = generated(tmp_path, n=6)
    for case in cases:
        assert case["business_data"]["action"]["parent_ticket_id"] == case["business_data"]["ticket"]["id"]
    # TKT-3 has no action items, so a template that needs an action never samples it
    assert {case["business_data"]["ticket"]["id"] for case in cases} == {"TKT-1", "TKT-2"}


def test_roots_are_drawn_without_replacement_then_cycle(tmp_path):
    template = {**TEMPLATE, "user_instructions": "Look at {ticket.title}", "expected_function_calls": [],
                "expected_outputs": []}
    cases = generated(tmp_path, n=4, templates=[template])
    ids = [case["business_data"]["ticket"]["id"] for case in cases]
    assert sorted(ids[:3]) == ["TKT-1", "TKT-2", "TKT-3"] and ids[3] == ids[0]
    assert [case["case_id"] for case in cases] == [f"ticket_and_action-00{i}" for i in range(1, 5)]
    assert set(cases[0]["business_data"]) == {"ticket"}


def test_seed_field_names_and_plugin_prefix_are_accepted(tmp_path):
    template = {"scenarioType": "seedish", "instructions": "Do {ticket.title}",
                "task_completion_condition": "done",
                "expected_function_calls": [{"functionName": "TicketPlugin-get_ticket",
                                             "arguments": {"ticket_id": "{ticket.id}"}}]}
    case = generated(tmp_path, n=1, templates=[template])[0]
    assert (case["scenario_name"], case["user_instructions"], case["task_completion"]) == \
        ("seedish", f"Do {case['business_data']['ticket']['title']}", "done")


def test_csv_headers_are_mapped_to_snake_case(tmp_path):
    tickets = [{"ID": t["id"], "Title": t["title"], "Priority": t["priority"],
                "Customer Visible": t["customer_visible"], "estimateHours": t["estimate_hours"]} for t in TICKETS]
    case = generated(tmp_path, n=1, tickets=tickets)[0]
    assert set(case["business_data"]["ticket"]) == {"id", "title", "priority", "customer_visible", "estimate_hours"}


def _cli_generate(suite, out, seed, hash_seed):
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    subprocess.run([sys.executable, "-m", "lobeval", "generate", "--suite", str(suite), "--out", str(out),
                    "--seed", str(seed), "--cases-per-scenario", "4"], check=True, env=env, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("suite_name", ["toy", "sample"])
def test_same_inputs_give_byte_identical_output_whatever_the_hash_seed(tmp_path, suite_name):
    from helpers import SAMPLE_SUITE
    suite = make_suite(tmp_path) if suite_name == "toy" else SAMPLE_SUITE
    first = _cli_generate(suite, tmp_path / "a.jsonl", 5, hash_seed=1)
    second = _cli_generate(suite, tmp_path / "b.jsonl", 5, hash_seed=2)
    other_seed = _cli_generate(suite, tmp_path / "c.jsonl", 6, hash_seed=1)
    assert first == second
    assert first != other_seed


TEMPLATE_ERRORS = [
    ("unknown entity",
     {"user_instructions": "Hi {tickt.title}"}, "user_instructions", "unknown placeholder {tickt.title}"),
    ("unknown field",
     {"expected_outputs": ["{ticket.titel}"]}, "expected_outputs[0]", "has no column 'titel'"),
    ("unknown function",
     {"expected_function_calls": [{"functionName": "create_tiket", "arguments": {}}]},
     "expected_function_calls[0].functionName", "unknown function 'create_tiket'"),
    ("unknown argument",
     {"expected_function_calls": [{"functionName": "create_ticket", "arguments": {"titel": "x"}}]},
     "expected_function_calls[0].arguments.titel", "has no argument 'titel'"),
    ("enum outside the schema",
     {"expected_function_calls": [{"functionName": "create_ticket", "arguments": {"priority": "Urgent"}}]},
     "expected_function_calls[0].arguments.priority", "'Urgent' is not one of ['Low', 'Medium', 'High']"),
    ("wrong type of a literal",
     {"expected_function_calls": [{"functionName": "create_ticket", "arguments": {"estimate_hours": "four"}}]},
     "expected_function_calls[0].arguments.estimate_hours", "'four' is not of type 'integer'"),
    ("$ref to a function not expected before",
     {"expected_function_calls": [{"functionName": "create_action",
                                   "arguments": {"ticket_id": {"$ref": "create_ticket.result.ticket_id"}}}]},
     "expected_function_calls[0].arguments.ticket_id", "not an earlier expected call"),
    ("malformed $match",
     {"expected_function_calls": [{"functionName": "create_ticket",
                                   "arguments": {"title": {"$match": "roughly", "value": "x"}}}]},
     "expected_function_calls[0].arguments.title", "$match must be one of exact, fuzzy, semantic, any"),
    ("expected and forbidden",
     {"forbidden_function_calls": ["create_ticket"]},
     "expected_function_calls[0].functionName", "'create_ticket' is both expected and forbidden"),
    ("unknown forbidden function",
     {"forbidden_function_calls": ["drop_tables"]}, "forbidden_function_calls", "unknown function 'drop_tables'"),
    ("missing required field",
     {"task_completion": None}, "task_completion", "is required"),
]


@pytest.mark.parametrize("label, change, field, message", TEMPLATE_ERRORS, ids=[e[0] for e in TEMPLATE_ERRORS])
def test_bad_template_exits_2_naming_file_scenario_and_field_and_writes_nothing(
        tmp_path, capsys, label, change, field, message):
    template = {**TEMPLATE, **change}
    template = {k: v for k, v in template.items() if v is not None}
    suite = make_suite(tmp_path, templates=[template])
    out = tmp_path / "out" / "dataset.jsonl"
    assert main(["generate", "--suite", str(suite), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "templates.json" in err and "scenario 'ticket_and_action'" in err
    assert f"field '{field}'" in err and message in err
    assert not out.exists() and not list(tmp_path.rglob("*.tmp"))


DATA_ERRORS = [
    ("missing CSV column",
     {"actions": [{k: v for k, v in a.items() if k != "parent_ticket_id"} for a in ACTIONS]},
     "actions.csv", "field 'parent_ticket_id'", "missing CSV column"),
    ("child without a parent",
     {"actions": ACTIONS + [{"id": "ACT-9", "parent_ticket_id": "TKT-404", "title": "Orphan"}]},
     "actions.csv", "field 'parent_ticket_id'", "child without a parent: no ticket with id 'TKT-404'"),
    ("data value of the wrong type",
     {"tickets": [{**t, "customer_visible": "maybe" if t["id"] == "TKT-2" else t["customer_visible"]}
                  for t in TICKETS]},
     "templates.json", "field 'expected_function_calls[0].arguments.customer_visible'", "is not of type 'boolean'"),
    ("data value outside the enum",
     {"tickets": [{**t, "priority": "Urgent" if t["id"] == "TKT-2" else t["priority"]} for t in TICKETS]},
     "templates.json", "from ticket 'TKT-2'", "'Urgent' is not one of"),
    ("duplicate id",
     {"tickets": TICKETS + [TICKETS[0]]}, "tickets.csv", "field 'id'", "duplicate id 'TKT-1'"),
]


@pytest.mark.parametrize("label, data, file, where, message", DATA_ERRORS, ids=[e[0] for e in DATA_ERRORS])
def test_bad_data_exits_2_naming_file_record_and_field(tmp_path, capsys, label, data, file, where, message):
    suite = make_suite(tmp_path, **data)
    out = tmp_path / "dataset.jsonl"
    assert main(["generate", "--suite", str(suite), "--out", str(out), "--cases-per-scenario", "3"]) == 2
    err = capsys.readouterr().err
    assert file in err and where in err and message in err, err
    assert not out.exists()


def test_failed_generation_leaves_an_earlier_dataset_untouched(tmp_path):
    suite = make_suite(tmp_path, templates=[{**TEMPLATE, "user_instructions": "{nope.x}"}])
    out = tmp_path / "dataset.jsonl"
    out.write_text("earlier\n")
    assert main(["generate", "--suite", str(suite), "--out", str(out)]) == 2
    assert out.read_text() == "earlier\n"


def test_an_out_that_is_an_input_by_another_name_is_refused_and_an_earlier_dataset_is_replaced(tmp_path, capsys):
    suite = make_suite(tmp_path)
    link = tmp_path / "dataset.jsonl"
    link.symlink_to(suite / "templates.json")
    before = (suite / "templates.json").read_bytes()
    assert main(["generate", "--suite", str(suite), "--out", str(link)]) == 2
    assert f"{link}: --out: is an input of this command ({suite / 'templates.json'})" in capsys.readouterr().err
    assert (suite / "templates.json").read_bytes() == before
    out = tmp_path / "d.jsonl"
    assert main(["generate", "--suite", str(suite), "--out", str(out), "--seed", "1"]) == 0
    assert main(["generate", "--suite", str(suite), "--out", str(out), "--seed", "2"]) == 0
    assert {case["seed"] for case in read_jsonl(out)} == {2}
