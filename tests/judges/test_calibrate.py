"""Judge calibration: each statistic on hand-computed cases, the bootstrap, the best threshold, the labels counted."""
import numpy as np
import pytest

from lobeval.judges.calibrate import (
    NO_LABELS, UNDEFINED, alpha, alphas, calibrate, confusion_table, conversation_tables, counted_text, criterion_figures,
    format_calibration, kappa, kappas, report_calibration, resampled, thresholds, verdict_labels,
)

SCORES = (1, 2, 3, 4, 5)


def verdict(judge_value, human_value, *, judge="per_turn", criterion="helpfulness", case_id="c-1", message_index=1,
            judge_model="judge-a", run_id="r1", **changes):
    label = {"kind": "judge_verdict", "case_id": case_id, "trial": 0, "judge": judge, "criterion": criterion,
             "judge_value": judge_value, "verdict": "agree" if judge_value == human_value else "disagree",
             "human_value": human_value, "judge_model": judge_model, "run_id": run_id}
    if judge in ("per_turn", "behaviour_failure"):
        label["message_index"] = message_index
    return {**label, **changes}


def many(pairs, **fields):
    return [verdict(judge, human, case_id=f"c-{number}", **fields) for number, (judge, human) in enumerate(pairs)]


# --- the statistics, computed by hand --------------------------------------------------------------

def test_kappa_of_a_two_by_two_table():
    # analyst (rows) × judge (columns): [[2, 1], [0, 1]]; p_o = 3/4, p_e = (3·2 + 1·2)/16 = 1/2, κ = 1/2
    judge, human = np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])
    assert confusion_table(judge, human, 2).tolist() == [[2, 1], [0, 1]]
    assert kappa(judge, human, 2, weighted=False) == pytest.approx(0.5)
    assert kappas(confusion_table(judge, human, 2), weighted=False) == pytest.approx(0.5)


def test_quadratic_weighted_kappa_on_the_five_point_scale():
    # judge 1, 2, 3 and analyst 1, 2, 4: Σ w·observed = (4 − 3)² = 1;
    # Σ w·expected = (5 + 2 + 14)/3 = 7 → κ = 1 − 1/7
    judge, human = np.array([0, 1, 2]), np.array([0, 1, 3])
    assert kappa(judge, human, 5, weighted=True) == pytest.approx(6 / 7)
    assert kappas(confusion_table(judge, human, 5), weighted=True) == pytest.approx(6 / 7)
    assert kappa(judge, human, 5, weighted=False) == pytest.approx(kappas(confusion_table(judge, human, 5), False))


def test_krippendorff_alpha_nominal_and_ordinal():
    # nominal: coincidences [[4, 1], [1, 2]], n = 8: α = 1 − 7·2 / (2·5·3) = 16/30
    judge, human = np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])
    assert alpha(judge, human, 2, ordinal=False) == pytest.approx(16 / 30)
    assert alphas(confusion_table(judge, human, 2), ordinal=False) == pytest.approx(16 / 30)
    # ordinal, judge 1, 2, 3 and analyst 1, 2, 4: margins 2, 2, 1, 1, 0 (n = 6); Σ o·δ = 2·δ(3, 4) = 2·1;
    # Σ n_c·n_k·δ = 2·(16 + 24.5 + 40.5 + 4.5 + 12.5 + 1) = 198 → α = 1 − 5·2/198
    judge, human = np.array([0, 1, 2]), np.array([0, 1, 3])
    assert alpha(judge, human, 5, ordinal=True) == pytest.approx(1 - 10 / 198)
    assert alphas(confusion_table(judge, human, 5), ordinal=True) == pytest.approx(1 - 10 / 198)


@pytest.mark.parametrize("size, ordered", [(5, True), (2, False), (8, False)])
def test_the_vectorised_statistics_are_sklearns_and_krippendorffs(size, ordered):
    rng = np.random.default_rng(7)
    for _ in range(30):
        count = int(rng.integers(2, 30))
        judge = rng.integers(0, size, count)
        human = np.clip(judge + rng.integers(-1, 2, count), 0, size - 1)
        table = confusion_table(judge, human, size)
        for exact, fast in ((kappa(judge, human, size, ordered), kappas(table, ordered)),
                            (alpha(judge, human, size, ordered), alphas(table, ordered))):
            assert np.isnan(fast) if exact is None else exact == pytest.approx(float(fast))


def alone(labels: list) -> list[int]:
    """Each label on a conversation of its own."""
    return list(range(len(labels)))


def test_the_bootstrap_draws_a_conversation_with_all_its_labels():
    # conversation a: five labels, all agreed; b: five, all disagreed. Drawn whole, a resample is {a,a} (agreement
    # 1.0, chance 1/4), {b,b} (0.0, 1/4) or {a,b} (0.5): the 95 % interval is [0, 1]. Drawn label by label it
    # would be about 0.5 ± 0.3, as if ten independent analysts had spoken.
    judge, human = [4] * 10, [4] * 5 + [2] * 5
    figures = criterion_figures("1-5", SCORES, judge, human, ["a"] * 5 + ["b"] * 5)
    assert (figures["agreement"], figures["agreement_low"], figures["agreement_high"]) == (0.5, 0.0, 1.0)
    independent = criterion_figures("1-5", SCORES, judge, human, alone(judge))
    assert 0.1 < independent["agreement_low"] < 0.5 < independent["agreement_high"] < 0.9


def test_one_value_throughout_leaves_kappa_and_alpha_undefined_with_the_reason():
    figures = criterion_figures("1-5", SCORES, [4, 4, 4], [4, 4, 4], alone([4, 4, 4]))
    assert figures["agreement"] == 1.0 and figures["agreement_low"] == figures["agreement_high"] == 1.0
    assert (figures["kappa"], figures["kappa_low"], figures["alpha"], figures["alpha_high"]) == (None,) * 4
    assert figures["note"] == UNDEFINED


def test_the_bootstrap_is_seeded_skips_undefined_resamples_and_holds_the_estimate():
    judge, human = [4] * 9 + [2], [4] * 9 + [3]
    figures = criterion_figures("1-5", SCORES, judge, human, alone(judge))
    assert figures == criterion_figures("1-5", SCORES, judge, human, alone(judge))
    draws = resampled(conversation_tables(np.array(judge) - 1, np.array(human) - 1, 5, alone(judge)))
    assert draws.shape == (2000, 5, 5) and (draws.sum(axis=(1, 2)) == 10).all()
    assert np.isnan(kappas(draws, True)).any()   # resamples without the one disagreement: skipped
    assert figures["kappa_low"] <= figures["kappa"] <= figures["kappa_high"] <= 1
    assert figures["agreement_low"] <= figures["agreement"] == 0.9 <= figures["agreement_high"]
    assert figures["alpha_low"] <= figures["alpha"] <= figures["alpha_high"]


def test_the_best_threshold_is_the_one_that_matches_the_analysts_pass_or_fail():
    # analysts pass the last two; "judge ≥ 4" matches them exactly, the current "≥ 3" passes one more
    judge, human = [2, 3, 3, 4, 5], [2, 2, 2, 4, 5]
    table = thresholds(np.array(judge), np.array(human))
    assert table["agreement"].tolist() == [0.4, 0.4, 0.6, 1.0, 0.8]
    assert table.loc[3, "kappa"] == 1.0 and table.loc[0, "kappa"] == 0.0   # "≥ 1" passes all: no better than chance
    figures = criterion_figures("1-5", SCORES, judge, human, alone(judge))
    assert (figures["threshold"], figures["threshold_agreement"]) == (3, 0.6)
    assert (figures["best_threshold"], figures["best_agreement"], figures["best_kappa"]) == (4, 1.0, 1.0)


def test_ties_keep_the_current_threshold_and_other_scales_have_none():
    # the analysts pass both: "≥ 1", "≥ 2", "≥ 3" match them on every label (κ undefined), "≥ 4" on one (κ 0)
    figures = criterion_figures("1-5", SCORES, [3, 4], [3, 4], alone([3, 4]))
    assert (figures["best_threshold"], figures["best_agreement"], figures["best_kappa"]) == (3, 1.0, None)
    goal = criterion_figures("0/1", (0, 1), [1, 1, 0, 0], [1, 0, 0, 0], alone([1, 1, 0, 0]))
    assert (goal["statistic"], goal["kappa"], goal["best_threshold"], goal["threshold"]) == ("κ", 0.5, None, None)


# --- the labels: which count, per judge and criterion ---------------------------------------------------

def test_a_later_label_replaces_an_earlier_one_and_other_models_are_left_out():
    labels = [verdict(4, 2, note="too kind"), verdict(4, 4, note="on second thought"),
              verdict(3, 3, judge_model="judge-b", case_id="c-2"),
              {"kind": "allowed_extra_call", "functionName": "f"},
              verdict(3, 3, run_id="r2")]   # another run: another verdict
    kept, left = verdict_labels(labels, "judge-a")
    assert [label.get("note") for label in kept] == ["on second thought", None]
    assert left == {"replaced": 1, "other_models": 1, "other_prompts": 0}
    assert verdict_labels(labels)[1] == {"replaced": 1, "other_models": 0, "other_prompts": 0}


def test_calibrate_gives_a_line_and_a_confusion_matrix_per_judge_criterion():
    labels = [*many([(4, 4), (2, 3), (5, 5)]), *many([(1, 1), (1, 0)], judge="goal", criterion="goal"),
              verdict("repetition", None, judge="behaviour_failure", criterion="category"),
              verdict(None, None, judge="behaviour_failure", criterion="category", case_id="c-9"),
              verdict(1, 1, judge="task_adherence", criterion="task_adherence", judge_model="judge-b"),
              {"kind": "judge_verdict", "case_id": "c-7", "trial": 0, "judge": "goal", "criterion": "goal",
               "judge_value": 0, "verdict": "disagree", "judge_model": "judge-a"}]   # human_value 1, derived
    result = calibrate(labels, judge_model="judge-a")
    summary = result["summary"].set_index(["judge", "criterion"])
    assert list(summary.index) == [("per_turn", "helpfulness"), ("behaviour_failure", "category"), ("goal", "goal")]
    assert (result["labels"], result["other_models"], result["replaced"]) == (8, 1, 0)
    helpful = summary.loc[("per_turn", "helpfulness")]
    assert (helpful["scale"], helpful["labels"], helpful["statistic"]) == ("1-5", 3, "weighted κ")
    assert summary.loc[("goal", "goal"), "agreement"] == pytest.approx(1 / 3)
    goal = result["confusion"][("goal", "goal")]
    assert goal.loc[1, 0] == 1 and goal.loc[0, 1] == 1 and goal.loc[1, 1] == 1 and goal.to_numpy().sum() == 3
    failures = result["confusion"][("behaviour_failure", "category")]
    assert failures.index[-1] == failures.columns[-1] == "no failure" and failures.shape == (8, 8)
    assert failures.loc["no failure", "repetition"] == 1 and failures.loc["no failure", "no failure"] == 1
    helpfulness = result["confusion"][("per_turn", "helpfulness")]
    assert (helpfulness.index.name, helpfulness.columns.name, list(helpfulness.columns)) == ("analyst", "judge",
                                                                                            [1, 2, 3, 4, 5])
    assert helpfulness.loc[3, 2] == 1


def test_the_report_gets_agreement_and_kappa_by_run_metric_and_nothing_for_failures_or_derived_figures():
    labels = [*many([(4, 4), (2, 3), (5, 5)]), *many([(1, 1), (1, 0), (0, 0)], judge="goal", criterion="goal"),
              verdict("repetition", None, judge="behaviour_failure", criterion="category"),
              *many([(4, 4), (3, 3)], judge="intent_resolution", criterion="intent_resolution")]
    found = report_calibration(labels, "judge-a")
    assert set(found) == {"judge.helpfulness", "judge.goal", "judge.intent_resolution"}
    assert found["judge.goal"] == {"labels": 3, "agreement": pytest.approx(2 / 3), "kappa": pytest.approx(0.4),
                                   "statistic": "κ"}
    assert found["judge.helpfulness"]["statistic"] == "weighted κ"
    assert report_calibration(labels, "judge-b") == {}


def test_the_text_says_what_was_counted_or_how_to_add_labels():
    assert NO_LABELS in format_calibration(calibrate([]))
    labels = [*many([(4, 4), (2, 3), (5, 5)]), verdict(4, 4, judge_model="judge-b", case_id="c-9")]
    text = format_calibration(calibrate(labels, judge_model="judge-a"))
    assert ("3 labels (judge model judge-a); left out: 1 on another judge model, 0 on other judge prompts, "
            "0 replaced") in text
    assert "per_turn/helpfulness (1-5): 3 labels, agreement 0.67 [" in text and "weighted κ" in text
    assert "best at ≥ " in text and "rows the analyst's value, columns the judge's" in text
    assert "undefined" in format_calibration(calibrate(many([(4, 4), (4, 4)])))


def test_hundreds_of_labels_on_five_criteria_give_five_lines_with_their_intervals():
    rng = np.random.default_rng(1)
    judged = rng.integers(1, 6, 600)
    pairs = [(int(score), int(np.clip(score + rng.integers(-1, 2), 1, 5))) for score in judged]
    labels = [label for criterion in ("helpfulness", "coherence", "verbosity", "relevance", "faithfulness")
              for label in many(pairs, criterion=criterion)]
    summary = calibrate(labels)["summary"]
    assert len(summary) == 5 and (summary["labels"] == 600).all()
    for statistic in ("agreement", "kappa", "alpha"):
        assert (summary[f"{statistic}_low"] <= summary[statistic]).all()
        assert (summary[statistic] <= summary[f"{statistic}_high"]).all()


def test_a_changed_judge_prompt_does_not_reuse_the_old_calibration():
    old = [verdict(4, 4, case_id=f"c-{n}", judge_prompt="aaaa11112222") for n in range(3)]
    new = [verdict(4, 2, case_id="c-9", judge_prompt="bbbb33334444")]
    unknown = [verdict(3, 3, case_id="c-8")]   # a label that does not say which prompts
    used, left = verdict_labels([*old, *new, *unknown], "judge-a", "bbbb33334444")
    assert [label["case_id"] for label in used] == ["c-9"]
    assert left == {"replaced": 0, "other_models": 0, "other_prompts": 4}
    result = calibrate([*old, *new, *unknown], "judge-a", "bbbb33334444")
    assert counted_text(result) == ("judge calibration: 1 label (judge model judge-a, prompts bbbb33334444); left out: "
                                    "0 on another judge model, 4 on other judge prompts, 0 replaced by a later label")


def test_the_judges_prompt_version_is_a_digest_of_their_instructions(monkeypatch):
    from lobeval.judges import judges

    version = judges.prompt_version()
    assert version == judges.PROMPT_VERSION and len(version) == 12
    monkeypatch.setitem(judges.PARTS, "goal", (judges.PARTS["goal"][0] + " Be lenient.", judges.PARTS["goal"][1]))
    assert judges.prompt_version() != version
