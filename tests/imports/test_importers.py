"""Published benchmark runs as run folders (issues #19, #43): τ-bench results files and τ²-bench runs, in both of
τ²-bench's layouts and the three shapes real runs are published in; the records, the suite, the functions'
definitions from τ²-bench's tools.py, nothing of a real run lost, and damaged input named down to the record and
field."""
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from lobeval.analysis.agreement import read_reference
from lobeval.core.errors import ConfigError, RecordError
from lobeval.workspace.benchmark_tools import known_effect, tau2_tools
from lobeval.imports.importers import guess_effect, import_tau2, import_tau_bench, parse_effects
from lobeval.core.records import read_cases, read_conversations, read_json
from lobeval.workspace.runs import read_config
from lobeval.workspace.suite import load_suite
from lobeval.drafting.suite_init import init_suite

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tau"
TAU_BENCH = FIXTURES / "tau_bench_retail.json"
TAU2 = FIXTURES / "tau2_airline"
RUN_FILES = ["config.json", "conversations.jsonl", "dataset.jsonl", "reference.jsonl", "suite"]
NO_TOOLS = ("tools.json: no descriptions, argument types or enums (the run keeps no tool definitions): give --tools "
            "with τ²-bench's src/tau2/domains/{domain}/tools.py (also for τ-bench's ports), or the bot's tools.json, "
            "OpenAPI document or MCP server")


def cases(run_dir):
    return {case.case_id: case for case in read_cases(run_dir / "dataset.jsonl")}


def conversations(run_dir):
    return {(record["case_id"], record["trial"]): record
            for _, _, record in read_conversations(run_dir / "conversations.jsonl")}


def verdicts(run_dir):
    return [(v["case_id"], v["trial"], v["reward"]) for v in read_reference(run_dir)]


def effects(run_dir):
    return {tool["function"]["name"]: tool["effect"] for tool in load_suite(run_dir / "suite").tools.values()}


def tau_bench_records():
    return json.loads(TAU_BENCH.read_text())


def write_records(tmp_path, records):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(records))
    return path


# --- τ-bench ------------------------------------------------------------------------------------------------

def test_a_tau_bench_run_becomes_a_run_folder(tmp_path):
    run = tmp_path / "tb"
    result = import_tau_bench(TAU_BENCH, run, domain="retail")
    assert sorted(path.name for path in run.iterdir()) == RUN_FILES
    assert (result.cases, result.conversations, result.format) == (4, 8, "tau-bench")

    dataset = cases(run)
    assert list(dataset) == ["0", "1", "2", "3"]
    assert dataset["0"].scenario_name == "retail"
    assert dataset["0"].user_instructions.startswith("You are Yusuf Rossi")
    assert dataset["0"].expected_function_calls == [
        {"functionName": "find_user_id_by_email", "arguments": {"email": "yusuf.rossi@example.com"}},
        {"functionName": "cancel_pending_order", "arguments": {"order_id": "#W100", "reason": "no longer needed"}}]
    assert dataset["2"].expected_outputs == ["54.04"]
    assert (dataset["0"].forbidden_function_calls, dataset["0"].ordered) == ([], False)

    recorded = conversations(run)
    assert len(recorded) == 8
    cancel = recorded["0", 0]
    assert [m["role"] for m in cancel["messages"]][:3] == ["user", "assistant", "user"]   # no system prompt
    assert [c["functionName"] for c in cancel["function_calls"]] == [
        "find_user_id_by_email", "get_order_details", "cancel_pending_order"]
    lookup, order, cancelled = cancel["function_calls"]
    assert cancelled["arguments"] == {"order_id": "#W100", "reason": "no longer needed"}   # parsed from the JSON string
    assert lookup["result"] == "yusuf_rossi_9620"   # text that is no JSON stays text
    assert order["result"]["items"] == [{"item_id": "111", "price": 54.04}]
    assert [c["turn"] for c in cancel["function_calls"]] == [2, 2, 3]
    assert cancel["termination"] == {"reason": "user_finished", "turns": 4}
    assert cancel["messages"][3]["function_calls"] == [lookup]   # the call sits on its assistant message too

    # an "Error: ..." result: attempted, not done; the retry reuses the call id and gets the second answer
    failed, retried = [c for c in recorded["1", 0]["function_calls"] if c["functionName"] != "think"]
    assert (failed["error"], failed["result"]) == ("Error: order not found", None)
    assert (retried["error"], retried["result"]["order_id"]) == (None, "#W200")
    assert recorded["3", 0]["termination"]["reason"] == "imported"   # transfer_to_human_agents ended the episode

    assert verdicts(run) == [("0", 0, 1.0), ("0", 1, 0.0), ("1", 0, 1.0), ("1", 1, 0.0), ("2", 0, 1.0),
                             ("2", 1, 0.0), ("3", 0, 1.0), ("3", 1, 1.0)]
    assert read_reference(run)[1]["reward_info"]["info"]["r_actions"] == 0.0

    suite = load_suite(run / "suite")
    assert (suite.name, suite.entities, suite.templates) == ("retail", {}, [])
    assert (suite.ignored_functions, suite.optional_effects) == (["think"], ["read"])
    assert effects(run) == {"find_user_id_by_email": "read", "cancel_pending_order": "write",
                            "modify_pending_order_address": "write", "get_product_details": "read",
                            "transfer_to_human_agents": "read", "get_order_details": "read", "think": "read"}
    config = read_config(run)
    assert config["imported"] == {"format": "tau-bench", "source": str(TAU_BENCH.resolve()), "guessed_effects": {},
                                  "tools": None, "notes": [NO_TOOLS.format(domain="retail")]}
    assert result.summary()[-1] == NO_TOOLS.format(domain="retail")   # the one line saying where schemas come from
    assert (config["run_id"], config["suite_name"], config["suite"]) == ("tb", "retail", str((run / "suite").resolve()))


def test_historical_trajectories_without_trials_are_numbered_in_order(tmp_path):
    records = [{key: value for key, value in record.items() if key != "trial"} for record in tau_bench_records()]
    import_tau_bench(write_records(tmp_path, records), tmp_path / "run")
    assert sorted(conversations(tmp_path / "run")) == [(task, trial) for task in "0123" for trial in (0, 1)]
    assert load_suite(tmp_path / "run" / "suite").name == "tau-bench"


def test_a_raised_agent_and_an_unfinished_episode_keep_their_endings(tmp_path):
    first, _, unfinished, *_ = tau_bench_records()
    raised = {"task_id": 0, "trial": 1, "reward": 0.0,
              "info": {"error": "RateLimitError: slow down", "traceback": "..."}, "traj": []}
    unfinished = {**unfinished, "trial": 0, "reward": 0.0, "info": {**unfinished["info"], "reward_info": None}}
    import_tau_bench(write_records(tmp_path, [first, raised, unfinished]), tmp_path / "run")
    recorded = conversations(tmp_path / "run")
    assert recorded["0", 1]["termination"]["reason"] == "target_error"
    assert recorded["0", 1]["error"] == "RateLimitError: slow down"
    assert recorded["1", 0]["termination"]["reason"] == "max_turns"
    notes = [v["reward_info"]["note"] for v in read_reference(tmp_path / "run")[1:]]
    assert notes == ["no reward was computed: the agent raised: RateLimitError: slow down",
                     "no reward was computed: the episode did not end within the step limit"]


def damage_arguments(records):
    records[2]["traj"][4]["tool_calls"][0]["function"]["arguments"] = '{"order_id": '


def damage_reward(records):
    del records[5]["reward"]


def damage_answer(records):
    records[0]["traj"][5]["tool_call_id"] = "call_zz"


def damage_trial(records):
    records[1]["trial"] = 0


def damage_task(records):
    records.append({"task_id": 9, "trial": 0, "reward": 0.0, "info": {"error": "boom"}, "traj": []})


@pytest.mark.parametrize("damage, record, field", [
    (damage_arguments, "record 2 (task 1, trial 0)", "traj[4].tool_calls[0].function.arguments"),
    (damage_reward, "record 5", "reward"),
    (damage_answer, "record 0 (task 0, trial 0)", "traj[5]"),
    (damage_trial, "record 1", "trial"),
    (damage_task, "record 8", "info.task"),
])
def test_a_damaged_tau_bench_record_is_named_and_nothing_is_written(tmp_path, damage, record, field):
    records = tau_bench_records()
    damage(records)
    source = write_records(tmp_path, records)
    with pytest.raises(RecordError) as caught:
        import_tau_bench(source, tmp_path / "run")
    assert (caught.value.file, caught.value.record, caught.value.field) == (str(source), record, field)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results.json"]   # no run folder, no staging left


def test_a_tau_bench_file_that_is_no_list_is_refused(tmp_path):
    source = tmp_path / "results.json"
    source.write_text('{"task_id": 0}')
    with pytest.raises(RecordError, match="must be a list of τ-bench results"):
        import_tau_bench(source, tmp_path / "run")


# --- τ²-bench -----------------------------------------------------------------------------------------------

def test_a_tau2_run_becomes_a_run_folder(tmp_path):
    run = tmp_path / "t2"
    result = import_tau2(TAU2, run)
    assert sorted(path.name for path in run.iterdir()) == RUN_FILES
    assert (result.cases, result.conversations, result.format) == (4, 8, "tau2")

    suite = load_suite(run / "suite")
    assert suite.name == "airline"   # the run's domain_name
    passengers = suite.tool("update_reservation_passengers")
    assert passengers["function"]["description"] == "Update the passengers of a reservation."
    assert passengers["function"]["parameters"]["properties"]["passengers"]["type"] == "array"
    assert effects(run) == {"get_reservation_details": "read", "cancel_reservation": "write",
                            "update_reservation_passengers": "write", "get_flight_status": "read",
                            "transfer_to_human_agents": "read", "think": "read"}

    dataset = cases(run)
    assert dataset["0"].user_instructions == ("Reason for call: You want to cancel reservation ABC123.\n"
                                              "Known info: You are Raj Patel, user id raj_patel_1234.\n"
                                              "Task instructions: Accept no alternative.")
    assert dataset["1"].persona == "Polite and brief."
    assert dataset["1"].expected_function_calls == [{"functionName": "update_reservation_passengers", "arguments": {
        "reservation_id": "XYZ789", "passengers": [{"first_name": "Ana", "last_name": "Lima", "dob": "1985-02-11"}]}}]
    # compare_args keeps the compared arguments; a reward basis without DB or ACTION makes the calls optional
    assert dataset["2"].expected_function_calls == [{"functionName": "get_flight_status",
                                                     "arguments": {"flight_number": "HAT001"}, "optional": True}]
    assert dataset["2"].expected_outputs == ["delayed"]

    recorded = conversations(run)
    [failed] = recorded["0", 1]["function_calls"]
    assert failed["arguments"] == {"reservation_id": "ABC123"}   # a JSON string in the file
    assert failed["error"].startswith("Error: Reservation ABC123 cannot be cancelled")
    status = recorded["2", 0]
    # the user's own call (check_boarding_pass) is not the bot's; both answers of one tool message are filled in
    assert [(c["functionName"], c["result"]) for c in status["function_calls"]] == [
        ("get_flight_status", "delayed"), ("get_reservation_details", {"reservation_id": "ABC123"})]
    assert [recorded[key]["termination"]["reason"] for key in [("0", 0), ("1", 1), ("2", 1), ("3", 0)]] == [
        "user_finished", "max_turns", "target_unavailable", "imported"]
    assert recorded["2", 1]["error"] == "τ²-bench ended the simulation: infrastructure_error"
    assert recorded["0", 0]["target"] == "gpt-4.1-mini"

    assert verdicts(run) == [("0", 0, 1.0), ("0", 1, 0.0), ("1", 0, 1.0), ("1", 1, 0.0), ("2", 0, 1.0),
                             ("2", 1, 0.0), ("3", 0, 1.0), ("3", 1, 1.0)]
    assert read_config(run)["imported"]["format"] == "tau2"


def test_the_folder_its_results_json_and_the_single_file_layout_import_alike(tmp_path):
    import_tau2(TAU2, tmp_path / "folder")
    import_tau2(TAU2 / "results.json", tmp_path / "file")
    single = read_json(TAU2 / "results.json")
    single["simulations"] = [read_json(path) for path in sorted((TAU2 / "simulations").glob("*.json"))]
    del single["simulation_index"]
    (tmp_path / "single.json").write_text(json.dumps(single))
    import_tau2(tmp_path / "single.json", tmp_path / "single")
    for name in ("dataset.jsonl", "conversations.jsonl", "reference.jsonl", "suite/tools.json"):
        texts = {(tmp_path / run / name).read_text() for run in ("folder", "file", "single")}
        assert len(texts) == 1, name


def damaged_tau2(tmp_path, change):
    copy = tmp_path / "tau2"
    shutil.copytree(TAU2, copy)
    change(copy)
    return copy


def edit(path, change):
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("change, file, record, field", [
    (lambda d: edit(d / "simulations" / "sim-1-0.json", lambda r: r.update(termination_reason="exploded")),
     "simulations/sim-1-0.json", "simulation sim-1-0", "termination_reason"),
    (lambda d: edit(d / "simulations" / "sim-0-1.json",
                    lambda r: r["messages"][2]["tool_calls"][0].update(arguments="{oops")),
     "simulations/sim-0-1.json", "simulation sim-0-1 (task 0, trial 1)", "messages[2].tool_calls[0].arguments"),
    (lambda d: edit(d / "simulations" / "sim-2-0.json", lambda r: r.update(task_id="99")),
     "simulations/sim-2-0.json", "simulation sim-2-0 (task 99, trial 0)", "task_id"),
    (lambda d: edit(d / "simulations" / "sim-0-0.json", lambda r: r.pop("reward_info")),
     "simulations/sim-0-0.json", "simulation sim-0-0 (task 0, trial 0)", "reward_info"),
    (lambda d: edit(d / "results.json", lambda r: r["tasks"][1].pop("id")), "results.json", "tasks[1]", "id"),
    (lambda d: (d / "simulations" / "sim-3-1.json").unlink(), "results.json", "simulation_index", None),
])
def test_a_damaged_tau2_record_is_named_and_nothing_is_written(tmp_path, change, file, record, field):
    source = damaged_tau2(tmp_path, change)
    with pytest.raises(RecordError) as caught:
        import_tau2(source, tmp_path / "run")
    assert (caught.value.file, caught.value.record, caught.value.field) == (str(source / file), record, field)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tau2"]


def test_a_missing_simulation_file_is_named(tmp_path):
    source = damaged_tau2(tmp_path, lambda d: (d / "simulations" / "sim-3-1.json").unlink())
    with pytest.raises(RecordError, match="no file for sim-3-1"):
        import_tau2(source, tmp_path / "run")


# --- effects and the run folder ----------------------------------------------------------------------------

def test_the_published_domains_tools_have_the_benchmarks_own_effects():
    # τ²-bench's marks (src/tau2/domains/*/tools.py): WRITE is a write; READ, THINK and GENERIC are reads
    assert [known_effect(name) for name in ("transfer_to_human_agents", "calculate", "think", "book_reservation",
                                            "get_flight_status", "exchange_delivered_order_items", "refuel_data",
                                            "toggle_airplane_mode", "check_sim_status", "escalate_case")] == [
        "read", "read", "read", "write", "read", "write", "write", "write", "read", None]


def test_only_unknown_tools_are_guessed_listed_and_overridden(tmp_path):
    assert [guess_effect(name) for name in ("get_user", "find_id", "list_all", "search_flights", "calculate",
                                            "think", "escalate_case")] == [
        "read", "read", "read", "read", "read", "read", "write"]
    assert parse_effects(["transfer_to_human_agents=read", "get_x=write"]) == {
        "transfer_to_human_agents": "read", "get_x": "write"}
    with pytest.raises(ConfigError, match="NAME=read or NAME=write"):
        parse_effects(["get_x=delete"])
    records = tau_bench_records()
    for record in records:   # a tool no published domain has
        for action in record["traj"]:
            for call in action.get("tool_calls") or []:
                if call["function"]["name"] == "get_product_details":
                    call["function"]["name"] = "escalate_case"
    result = import_tau_bench(write_records(tmp_path, records), tmp_path / "run")
    assert result.guessed == {"escalate_case": "write"}
    assert read_config(tmp_path / "run")["imported"]["guessed_effects"] == {"escalate_case": "write"}
    assert "guessed from the name (not a tool of a published domain): escalate_case=write" in result.summary()
    override = import_tau_bench(write_records(tmp_path, records), tmp_path / "run2",
                                effects={"escalate_case": "read", "transfer_to_human_agents": "write"})
    assert (override.guessed, effects(tmp_path / "run2")["escalate_case"]) == ({}, "read")
    assert effects(tmp_path / "run2")["transfer_to_human_agents"] == "write"   # an option wins over the table
    with pytest.raises(ConfigError, match="no function of that name"):
        import_tau_bench(TAU_BENCH, tmp_path / "other", effects={"cancel_everything": "write"})
    assert not (tmp_path / "other").exists()


def test_an_existing_run_folder_is_never_overwritten(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        import_tau_bench(TAU_BENCH, tmp_path / "run")
    assert [path.name for path in (tmp_path / "run").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    import_tau_bench(TAU_BENCH, tmp_path / "empty")   # an empty folder (a run id reserved) is filled
    assert sorted(path.name for path in (tmp_path / "empty").iterdir()) == RUN_FILES


# --- real runs: the three shapes τ²-bench runs are published in (tests/fixtures/tau/real, cut from leaderboard
# submissions of sierra-research/tau2-bench, MIT licence beside them) ----------------------------------------

REAL = FIXTURES / "real"
RESULTS = REAL / "toolorchestra_airline_cut.json"          # results: tasks whose ids the simulations mislabel
FLAGGED = REAL / "ironshell_airline_gpt54_cut.json"        # results: failed calls flagged error: true
SUBMISSION = REAL / "adaptive_agent_airline_submission_cut.json"   # {domain, agent, model, simulations}
LISTED = REAL / "adaptive_agent_medical_list_cut.json"             # a bare list of simulations
AIRLINE_TOOLS = FIXTURES / "tau2_domains" / "airline" / "tools.py"   # τ²-bench's own, as published


def raw_simulations(path):
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else data["simulations"]


def raw_transcript(simulation):
    """What the raw file says, read here without the importer: the user's messages with text and the assistant's
    messages in order, each with its calls (name, arguments, the tool's answer, failed: τ²-bench's error flag or
    its "Error: " text)."""
    answers = {}
    for message in simulation["messages"]:
        if message["role"] == "tool":
            for answer in message.get("tool_messages") or [message]:
                if answer.get("requestor", "assistant") == "assistant":
                    answers.setdefault(answer["id"], []).append(answer)
    said = []
    for message in simulation["messages"]:
        if message["role"] == "user" and message.get("content"):
            said.append(("user", message["content"], []))
        elif message["role"] == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                answer = answers[call["id"]].pop(0)
                arguments = call["arguments"] if isinstance(call["arguments"], dict) else json.loads(call["arguments"])
                text = answer.get("content")
                calls.append((call["name"], arguments, text,
                              bool(answer.get("error")) or (text or "").startswith("Error:")))
            said.append(("assistant", message.get("content") or "", calls))
    return said


def imported_transcript(conversation):
    """The same, from an imported conversation: a result as the text it was read from (parsed when JSON)."""
    said = []
    for message in conversation["messages"]:
        calls = [(call["functionName"], call["arguments"], call["error"] if call["error"] is not None
                  else call["result"], call["error"] is not None) for call in message.get("function_calls") or []]
        said.append((message["role"], message["content"], calls))
    return said


def parsed(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def losses(path, run_dir):
    """Every difference between a raw τ²-bench file and its imported run: message texts, call names, arguments,
    results and error flags, conversation by conversation (in the file's order); [] when nothing was lost."""
    found = []
    recorded = [record for _, _, record in read_conversations(run_dir / "conversations.jsonl")]
    if len(recorded) != len(raw_simulations(path)):
        return [f"{len(raw_simulations(path))} simulations, {len(recorded)} conversations"]
    for number, (simulation, conversation) in enumerate(zip(raw_simulations(path), recorded)):
        raw, imported = raw_transcript(simulation), imported_transcript(conversation)
        if [(role, text) for role, text, _ in raw] != [(role, text) for role, text, _ in imported]:
            found.append(f"simulation {number}: the messages differ")
        for index, ((_, _, want), (_, _, got)) in enumerate(zip(raw, imported)):
            for (name, arguments, text, failed), (name2, arguments2, outcome, failed2) in zip(want, got, strict=True):
                if (name, arguments, failed) != (name2, arguments2, failed2) or (
                        outcome != (text if failed else parsed(text))):
                    found.append(f"simulation {number} message {index}: call {name} differs")
        flat = [call for _, _, calls in imported for call in calls]
        if [(c["functionName"], c["arguments"]) for c in conversation["function_calls"]] != [c[:2] for c in flat]:
            found.append(f"simulation {number}: the conversation's calls are not its messages' calls")
        found += [f"simulation {number}: {c['functionName']} answered {c['result'][:40]!r} but is not failed"
                  for c in conversation["function_calls"] if c["error"] is None and isinstance(c["result"], str)
                  and c["result"].startswith("Error:")]
    return found


@pytest.mark.parametrize("source", [RESULTS, FLAGGED, SUBMISSION, LISTED], ids=lambda path: path.stem)
def test_every_message_call_result_and_error_flag_of_a_real_run_is_imported(tmp_path, source):
    import_tau2(source, tmp_path / "run", tools=str(AIRLINE_TOOLS) if "airline" in source.name else None)
    assert losses(source, tmp_path / "run") == []


def test_the_loss_check_finds_what_an_import_dropped(tmp_path):
    import_tau2(FLAGGED, tmp_path / "run")
    conversations = tmp_path / "run" / "conversations.jsonl"
    records = [json.loads(line) for line in conversations.read_text().splitlines()]
    for failed in [next(call for call in records[1]["function_calls"] if call["error"]),
                   next(call for message in records[1]["messages"] for call in message.get("function_calls") or []
                        if call["error"])]:
        failed["result"], failed["error"] = failed["error"], None    # what the importer did with "Error:" text
    records[0]["messages"][2]["content"] = records[0]["messages"][2]["content"][:-1]
    conversations.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert losses(FLAGGED, tmp_path / "run") == [
        "simulation 0: the messages differ", "simulation 1 message 9: call book_reservation differs",
        "simulation 1: book_reservation answered 'Error: Payment amount does not add up, t' but is not failed"]


def test_a_failed_call_is_failed_whether_the_run_flags_it_or_only_says_error(tmp_path):
    import_tau2(FLAGGED, tmp_path / "flagged")
    [flagged] = [c for c in conversations(tmp_path / "flagged")["25", 0]["function_calls"] if c["error"]]
    assert flagged == {**flagged, "functionName": "book_reservation", "result": None,
                       "error": "Error: Payment amount does not add up, total price is 375, but paid 299"}
    import_tau2(RESULTS, tmp_path / "text")   # the toolorchestra run keeps τ²'s text and drops the flag
    booked = [c for c in conversations(tmp_path / "text")["25", 0]["function_calls"]
              if c["functionName"] == "book_reservation"]
    assert [c["error"] is not None for c in booked] == [True, True, False]
    assert booked[0]["error"].startswith("Error: Payment amount does not add up, total price is 405")


def test_a_simulation_graded_against_another_task_is_imported_under_that_task(tmp_path):
    result = import_tau2(RESULTS, tmp_path / "run")
    # the file's simulation "12" talks to Emma Kim about EHGLP3 (task 0's scenario), and its reward_info holds task
    # 0's NL assertion; "13" and "20" hold the one assertion tasks 48 and 49 share ("Agent does not cancel 3RK2T9.")
    recorded = conversations(tmp_path / "run")
    assert sorted(recorded) == [("0", 0), ("25", 0), ("3", 0), ("48|49", 0), ("48|49", 1)]
    assert "EHGLP3" in recorded["0", 0]["messages"][1]["content"]
    assert read_config(tmp_path / "run")["imported"]["relinked"] == [
        "simulations[0]: 12 → 0", "simulations[1]: 13 → 48|49", "simulations[2]: 20 → 48|49",
        "simulations[3]: 7 → 25", "simulations[4]: 41 → 3"]
    assert result.summary()[-2].startswith("5 simulations name one task but were graded by τ²-bench against another")
    dataset = cases(tmp_path / "run")
    assert dataset["0"].user_instructions.startswith("Reason for call: You want to cancel reservation EHGLP3.")
    either = dataset["48|49"]   # its criteria are both tasks' (the same), its scenario one of two: unknown
    assert (either.scenario_known, either.user_instructions, either.reference) == (False, "", True)
    assert either.expected_function_calls == [{"functionName": "get_reservation_details",
                                               "arguments": {"reservation_id": "3RK2T9"}}]
    assert [(v["case_id"], v["trial"]) for v in read_reference(tmp_path / "run")] == sorted(recorded, key=[
        ("0", 0), ("48|49", 0), ("48|49", 1), ("25", 0), ("3", 0)].index)


def test_a_run_without_tasks_says_its_scenarios_are_unknown(tmp_path):
    result = import_tau2(SUBMISSION, tmp_path / "submission")
    assert result.summary()[-2].startswith("adaptive_agent_airline_submission_cut.json publishes no tasks: each "
                                           "case's user scenario and expected calls are unknown")
    dataset = cases(tmp_path / "submission")
    assert list(dataset) == ["7", "48"]
    assert [(c.scenario_known, c.reference, c.user_instructions, c.expected_function_calls)
            for c in dataset.values()] == [(False, False, "", [])] * 2
    recorded = conversations(tmp_path / "submission")
    assert recorded["7", 0]["termination"]["reason"] == "target_unavailable"   # infrastructure_error, not graded
    assert recorded["7", 0]["messages"] == []
    assert [(v["case_id"], v["reward"]) for v in read_reference(tmp_path / "submission")] == [("48", 1.0)]
    config = read_config(tmp_path / "submission")
    assert (config["suite_name"], config["target"]) == ("airline", "claude-opus-4-6")
    import_tau2(LISTED, tmp_path / "listed", domain="medical_triage")
    assert load_suite(tmp_path / "listed" / "suite").name == "medical_triage"
    assert [c.scenario_known for c in cases(tmp_path / "listed").values()] == [False, False]
    import_tau2(LISTED, tmp_path / "unnamed")
    assert load_suite(tmp_path / "unnamed" / "suite").name == "tau2"   # a list of simulations names no domain


def test_a_file_of_no_tau2_shape_is_refused(tmp_path):
    source = tmp_path / "run.json"
    source.write_text('"simulations"')
    with pytest.raises(RecordError) as caught:
        import_tau2(source, tmp_path / "run")
    assert str(caught.value) == (f"{source}: file: must be a τ²-bench run: a results object ({{info, tasks, "
                                 f"simulations}}), a submission ({{domain, simulations}}) or a list of simulations")
    source.write_text('{"domain": "airline", "simulations": {}}')
    with pytest.raises(RecordError, match="field 'simulations': must be a list"):
        import_tau2(source, tmp_path / "run")
    source.write_text(json.dumps([{**raw_simulations(SUBMISSION)[1], "reward_info": None}]))
    with pytest.raises(RecordError) as caught:
        import_tau2(source, tmp_path / "run")
    assert (caught.value.record, caught.value.field) == ("record 0 (task 48, trial 0)", "reward_info")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.json"]


# --- the functions' definitions: τ²-bench's tools.py, read without running it ------------------------------

def test_tau2_tools_py_gives_each_tool_its_description_argument_types_enums_and_effect():
    found = {function["name"]: (function, effect) for function, effect in tau2_tools(AIRLINE_TOOLS)}
    assert len(found) == 14 and "think" not in found   # τ²'s airline think tool is commented out
    assert {name: effect for name, (_, effect) in found.items() if effect == "write"} == {
        name: "write" for name in ("book_reservation", "cancel_reservation", "send_certificate",
                                   "update_reservation_baggages", "update_reservation_flights",
                                   "update_reservation_passengers")}
    assert found["calculate"][1] == found["transfer_to_human_agents"][1] == "read"   # GENERIC
    book, _ = found["book_reservation"]
    assert book["description"] == "Book a reservation."
    properties = book["parameters"]["properties"]
    assert properties["cabin"] == {"type": "string", "enum": ["business", "economy", "basic_economy"],
                                   "description": "The cabin class such as 'basic_economy', 'economy', or 'business'."}
    assert properties["insurance"]["enum"] == ["yes", "no"] and properties["flight_type"]["enum"] == [
        "round_trip", "one_way"]
    assert properties["total_baggages"] == {"type": "integer",
                                            "description": "The total number of baggage items to book the reservation."}
    assert properties["flights"]["items"] == {   # List[FlightInfo | dict]: the model's fields
        "type": "object", "required": ["flight_number", "date"], "properties": {
            "flight_number": {"type": "string", "description": "Flight number, such as 'HAT001'."},
            "date": {"type": "string", "description": "The date for the flight in the format 'YYYY-MM-DD', such as "
                                                      "'2024-05-01'."}}}
    assert properties["payment_methods"]["items"]["properties"]["amount"] == {
        "type": "integer", "description": "Payment amount in dollars"}
    assert book["parameters"]["required"] == list(properties)
    flights, _ = found["update_reservation_flights"]
    assert flights["parameters"]["properties"]["flights"]["description"] == (   # an Args entry over two lines
        "An array of objects containing details about each piece of flight in the ENTIRE new reservation. Even if "
        "the a flight segment is not changed, it should still be included in the array.")
    assert found["list_all_airports"][0]["parameters"] == {"type": "object", "properties": {}}
    Draft202012Validator.check_schema(book["parameters"])


def test_a_tools_py_is_read_by_the_rules_of_its_annotations(tmp_path):
    (tmp_path / "data_model.py").write_text(textwrap.dedent('''
        from enum import Enum
        Level = Annotated[Literal["gold", "silver"], Field(description="Membership level")]
        class Color(str, Enum):
            RED = "red"
            BLUE = "blue"
        class Base(BaseModel):
            id: str = Field(description="The id")
        class Item(Base):
            """An item."""
            note: Optional[str] = Field(None, description="A note")
            count: int = 1
        '''))
    (tmp_path / "tools.py").write_text(textwrap.dedent('''
        class Tools(ToolKitBase):
            def _helper(self, x: str) -> str:
                return x

            @is_tool(ToolType.THINK)
            def think(self, thought: str) -> str:
                """Think.

                Nothing is changed.

                Args:
                    thought (str): What to think
                        about, at length.

                Returns:
                    Nothing.
                """

            @is_tool(ToolType.WRITE)
            def paint(self, items: List[Item], color: Color, level: Level, limit: Optional[int] = None, *,
                      tags: list[str], extra: Dict[str, int] = None, other: "Item | None" = None) -> None:
                """Paint the items."""
        '''))
    (think, think_effect), (paint, paint_effect) = tau2_tools(tmp_path / "tools.py")
    assert (think_effect, paint_effect) == ("read", "write")
    assert think == {"name": "think", "description": "Think.\n\nNothing is changed.", "parameters": {
        "type": "object", "required": ["thought"],
        "properties": {"thought": {"type": "string", "description": "What to think about, at length."}}}}
    properties = paint["parameters"]["properties"]
    assert properties["items"] == {"type": "array", "items": {
        "type": "object", "description": "An item.", "required": ["id"], "properties": {
            "id": {"type": "string", "description": "The id"},
            "note": {"type": ["string", "null"], "description": "A note"}, "count": {"type": "integer"}}}}
    assert properties["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert properties["level"] == {"type": "string", "enum": ["gold", "silver"], "description": "Membership level"}
    assert properties["limit"] == {"type": ["integer", "null"]}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}
    assert properties["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert (properties["other"]["type"], properties["other"]["required"]) == (["object", "null"], ["id"])
    assert paint["parameters"]["required"] == ["items", "color", "level", "tags"]


@pytest.mark.parametrize("text, record, message", [
    ("def f(:\n", "line 1", "is not Python: invalid syntax"),
    ("class T:\n    def f(self): pass\n", "file", "defines no tool: no method is decorated @is_tool(ToolType.X)"),
    ("class T:\n    @is_tool(ToolType.DELETE)\n    def f(self): pass\n", "line 3",
     "ToolType.DELETE of f: expected one of READ, WRITE, THINK, GENERIC"),
])
def test_a_tools_py_that_cannot_be_read_is_named(tmp_path, text, record, message):
    (tmp_path / "tools.py").write_text(text)
    with pytest.raises(RecordError) as caught:
        tau2_tools(tmp_path / "tools.py")
    assert (caught.value.file, caught.value.record, caught.value.problem) == (
        str(tmp_path / "tools.py"), record, message)


def test_the_import_takes_the_tools_from_the_source_given_and_init_reads_the_same(tmp_path):
    result = import_tau2(FLAGGED, tmp_path / "run", tools=str(AIRLINE_TOOLS))
    suite = load_suite(tmp_path / "run" / "suite")
    assert suite.tool("book_reservation")["function"] == next(
        function for function, _ in tau2_tools(AIRLINE_TOOLS) if function["name"] == "book_reservation")
    assert suite.tool("list_all_airports")["effect"] == "read"   # defined, though this run never calls it
    assert not any(line.startswith("tools.json: no descriptions") for line in result.summary())
    assert read_config(tmp_path / "run")["imported"]["tools"] == str(AIRLINE_TOOLS)
    listed = import_tau2(LISTED, tmp_path / "medical", tools=str(AIRLINE_TOOLS))
    assert listed.summary()[-1] == (f"called but not defined by {AIRLINE_TOOLS} (only the arguments seen): "
                                    f"find_patient_by_name_dob")
    assert load_suite(tmp_path / "medical" / "suite").tool("find_patient_by_name_dob")["function"]["parameters"] == {
        "type": "object", "properties": {"date_of_birth": {}, "first_name": {}, "last_name": {}}}
    tau_bench = import_tau_bench(TAU_BENCH, tmp_path / "tau-bench", tools=str(AIRLINE_TOOLS))   # a retail run
    assert tau_bench.summary()[-1].startswith(f"called but not defined by {AIRLINE_TOOLS} (only the arguments seen): ")
    assert effects(tmp_path / "tau-bench")["book_reservation"] == "write"
    override = import_tau2(FLAGGED, tmp_path / "override", tools=str(AIRLINE_TOOLS),
                           effects={"transfer_to_human_agents": "write"})
    assert override.effects["transfer_to_human_agents"] == "write"   # --effect wins over the source
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "users.csv").write_text("user_id,name\nmia_li_3668,Mia Li\n")
    init_suite(tmp_path / "scenarios" / "air", str(AIRLINE_TOOLS), str(tmp_path / "csv"))   # lobeval init --tools
    initialised = json.loads((tmp_path / "scenarios" / "air" / "tools.json").read_text())
    imported = json.loads((tmp_path / "run" / "suite" / "tools.json").read_text())
    assert initialised == imported[:len(initialised)] and len(initialised) == 14
