"""The claims check against the labelled conversations of tests/fixtures/claims (format: docs/formats.md, "Claims
benchmark"; how each set was written and what it measured: docs/metrics.md, section 9). labelled.jsonl was written
while the rules were made, held_out.jsonl after them and never used to change them; blind.jsonl .. blind45.jsonl were
written in rounds by someone who had not read the rules, measured as written, then used to fix them, and blind46 ..
blind53 (the last two rounds) were measured and never used to fix anything. Each file is one test: every conversation
the rules get right stays right, and those they still get wrong are the ones recorded in known_misses.json, each with
what it gets wrong (counted by `lobeval bench claims FILE`)."""
import json
from pathlib import Path

import pytest

from lobeval.workflow.bench import bench_claims, format_claims
from lobeval.scoring.claims import find_claims
from lobeval.core.vocabulary import function_key

FOLDER = Path(__file__).parents[1] / "fixtures" / "claims"
KNOWN_MISSES = json.loads((FOLDER / "known_misses.json").read_text(encoding="utf-8"))
SETS = ("labelled", "held_out", *(f"blind{n}" for n in ("", *range(2, 54))))


def said(found, truth):
    return [text for text in found if any(text in sentence or sentence in text for sentence in truth)]


def _clip(text):
    return text if len(text) <= 90 else text[:87] + "..."


def what_it_gets_wrong(record):
    """What the rules get wrong on one labelled conversation, as known_misses.json records it ("" when nothing)."""
    tools = {function_key(tool["function"]["name"]): tool for tool in record["tools"]}
    found = find_claims(record, tools)
    texts = list(dict.fromkeys(" ".join(item["text"].split()) for item in found["claimed_not_done"]))
    truth = record["expected"]["claimed_not_done"]
    wrong = [f"wrongly finds '{_clip(text)}'" for text in texts if not said([text], truth)]
    missed = [f"does not find '{_clip(sentence)}'" for sentence in truth if not said([sentence], texts)]
    told = [item["actual_index"] for item in found["done_not_told"]]
    untold = [] if told == record["expected"]["done_not_told"] else [
        f"done not told {told}, labelled {record['expected']['done_not_told']}"]
    return "; ".join([*wrong, *missed, *untold])


@pytest.mark.parametrize("name", SETS)
def test_a_labelled_round_gets_right_all_but_its_recorded_misses(name):
    records = [json.loads(line) for line in (FOLDER / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    outcomes = {f"{name}:{record['case_id']}": what_it_gets_wrong(record) for record in records}
    found = {key: wrong for key, wrong in outcomes.items() if wrong}
    expected = {key: wrong for key, wrong in KNOWN_MISSES.items() if key in outcomes}
    differences = [f"{key}: {found.get(key) or 'now right'} (recorded: {expected.get(key) or 'right'})"
                   for key in outcomes if found.get(key) != expected.get(key)]
    assert not differences, f"{len(differences)} of {len(records)} conversations of {name}.jsonl differ from " \
                            "known_misses.json:\n" + "\n".join(differences)


def test_every_recorded_miss_is_of_a_conversation_of_a_round():
    keys = {f"{name}:{json.loads(line)['case_id']}" for name in SETS
            for line in (FOLDER / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()}
    assert sorted(set(KNOWN_MISSES) - keys) == []


def test_the_labelled_set_is_big_enough_and_mostly_traps():
    records = [json.loads(line) for name in ("labelled", "held_out")
               for line in (FOLDER / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    traps = [r for r in records if r["kind"] not in ("told", "claim", "silent", "disagree")]
    assert len(records) >= 150 and len(traps) / len(records) >= 0.4
    assert {r["case_id"].split("-")[0] for r in records} == {"support", "hr", "orders"}


def test_bench_claims_counts_both_directions_and_false_alarms_by_kind(tmp_path):
    told = {"case_id": "c1", "kind": "told", "tools": [], "function_calls": [], "messages": [
        {"role": "user", "content": "Cancel ORD-1"},
        {"role": "assistant", "content": "I've cancelled ORD-1.", "function_calls": [
            {"functionName": "cancel_order", "arguments": {"order": "ORD-1"}, "result": {"ok": True}}]}],
        "expected": {"claimed_not_done": [], "done_not_told": []}}
    alarm = {**told, "case_id": "c2", "kind": "future", "messages": [
        {"role": "user", "content": "Cancel ORD-2"}, {"role": "assistant", "content": "ORD-2 was cancelled."}]}
    missed = {**told, "case_id": "c3", "kind": "silent", "messages": [
        {"role": "user", "content": "Show ORD-3"},
        {"role": "assistant", "content": "Here it is.", "function_calls": [
            {"functionName": "cancel_order", "arguments": {"order": "ORD-3"}, "result": {"ok": True}}]}],
        "expected": {"claimed_not_done": [], "done_not_told": [0]}}
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (told, alarm, missed)), encoding="utf-8")
    assert format_claims(bench_claims([path]))[:5] == [
        "claims: 3 labelled conversations",
        "claimed not done: precision 0.000 [0.000, 0.793] (0 of 1), recall — (0 of 0)",
        "done not told: precision 1.000 [0.207, 1.000] (1 of 1), recall 1.000 [0.207, 1.000] (1 of 1)",
        "false alarms by kind: future 1",
        "claimed not done, precision by basis: no_call 0.000 [0.000, 0.793] (0 of 1)"]   # c2's reply made no call


def test_a_bad_labelled_line_names_the_file_line_and_field(tmp_path):
    from lobeval.core.errors import RecordError

    path = tmp_path / "labelled.jsonl"
    path.write_text(json.dumps({"case_id": "c1", "messages": [], "function_calls": [],
                                "expected": {"done_not_told": ["first"]}}), encoding="utf-8")
    with pytest.raises(RecordError, match=r"labelled.jsonl: line 1: field 'expected.done_not_told\[0\]': must be an integer"):
        bench_claims([path])


def test_lobeval_bench_claims_prints_the_figures_of_the_projects_own_set_by_default(capsys):
    from lobeval.cli import main

    assert main(["bench", "claims"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"claims: {len((FOLDER / 'labelled.jsonl').read_text(encoding='utf-8').splitlines())} labelled " \
                     "conversations"
    assert out[1].startswith("claimed not done: precision ") and out[2].startswith("done not told: precision ")


def test_lobeval_bench_claims_takes_several_files_together_as_a_round(capsys):
    from lobeval.cli import main

    files = [str(FOLDER / f"blind{n}.jsonl") for n in (38, 39, 40, 41)]
    together = bench_claims(files)
    assert together["conversations"] == sum(bench_claims([file])["conversations"] for file in files) == 240
    assert together["directions"] == {
        direction: {count: sum(bench_claims([file])["directions"][direction][count] for file in files)
                    for count in ("found", "false", "missed", "disputed")} for direction in ("claimed_not_done", "done_not_told")}
    assert main(["bench", "claims", *files]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "claims: 240 labelled conversations"


def test_a_file_is_only_for_bench_claims(capsys):
    from lobeval.cli import main

    assert main(["bench", "simulate", "labelled.jsonl"]) == 2
    assert "bench simulate: FILE is for bench claims" in capsys.readouterr().err
