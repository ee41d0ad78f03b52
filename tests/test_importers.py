"""Published benchmark runs as run folders (issue #19): τ-bench results files and τ²-bench runs, in both of
τ²-bench's layouts; the records, the suite, and damaged input named down to the record and field."""
import json
import shutil
from pathlib import Path

import pytest

from lobeval.agreement import read_reference
from lobeval.errors import ConfigError, RecordError
from lobeval.benchmark_tools import known_effect
from lobeval.importers import guess_effect, import_tau2, import_tau_bench, parse_effects
from lobeval.records import read_cases, read_conversations, read_json
from lobeval.runs import read_config
from lobeval.suite import load_suite

FIXTURES = Path(__file__).parent / "fixtures" / "tau"
TAU_BENCH = FIXTURES / "tau_bench_retail.json"
TAU2 = FIXTURES / "tau2_airline"
RUN_FILES = ["config.json", "conversations.jsonl", "dataset.jsonl", "reference.jsonl", "suite"]


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
    assert config["imported"] == {"format": "tau-bench", "source": str(TAU_BENCH.resolve()), "guessed_effects": {}}
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
