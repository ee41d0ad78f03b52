"""Compare two runs on the conversations they share, and gate a run on thresholds (docs/cli.md).

Pairs are (case_id, trial) scored in both runs; the rest are counted, not compared. For each
metric (all of them 0..1, higher is better):

- the difference is the candidate's mean minus the baseline's over the shared pairs;
- its 95 % interval is a paired bootstrap that resamples cases (with all their trials), so
  trials of one case are never treated as independent;
- the p-value of Success is the exact McNemar test on the discordant pairs (1→0 against 0→1,
  `scipy.stats.binomtest`); of the other metrics a sign-flip permutation test over cases
  (`scipy.stats.permutation_test`, exact up to 10 cases), which, unlike a bootstrap p-value,
  does not call a difference seen in one or two cases significant.

A regression is a candidate worse by more than 0.05 absolute (REGRESSION_MARGIN; 5 points on
these 0..1 metrics) with p < 0.05. Error rates (counts.errors / counts.conversations) are
compared as plain numbers; `gate --max-error-rate` is the check on them.

Noise, from repeated trials (issue #20; docs/cli.md "How many trials?"):

- a case's flip rate is the share of the pairs of its trials whose Success disagrees: with k
  successes in n trials, k(n - k) / C(n, 2); 0 when every trial agrees, up to about 0.5 (exactly
  n / (2(n - 1))) when they split evenly; undefined (None) for a case with one trial. A flaky case
  is one whose trials disagree (0 < k < n);
- the minimum detectable difference in Success of a comparison is that of a paired t-test at alpha
  0.05 and power 0.8 on the n per-case differences (candidate minus baseline, mean over the case's
  shared trials) with sample standard deviation s: d_min * s, where d_min is the smallest effect
  size (difference / s) the one-sample t-test detects with n cases (statsmodels' TTestPower; for
  large n it tends to (z_{1-alpha/2} + z_power) / sqrt(n) = 2.80 / sqrt(n)). For a target difference
  D the cases needed are the n at which the test detects D / s, and the trials per case needed (with
  today's cases) come from splitting s^2 into a between-case part and a within-case part that shrinks
  with the trials: s^2 = b + w / m (w: pooled variance of the per-trial differences inside cases; m:
  trials per case); m = ceil(w / (D^2 / d_min^2 - b)), none when more trials cannot reach D (b alone
  is too large: more cases are needed).
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest, permutation_test

from lobeval.core.errors import ConfigError, RecordError
from lobeval.core.records import METRICS, read_results
from lobeval.workspace.runs import RESULTS_FILE
from lobeval.core.stats import CONFIDENCE, RESAMPLES, SEED, interval, left_out_notes, unscored_reason
from lobeval.core.vocabulary import metric_scale

REGRESSION_MARGIN = 0.05
SIGNIFICANCE = 0.05
JUDGE_SCORE = "judge.final_score"
DEFAULT_GATE = {"Reliability": 0.8, "Success": 0.8}
DEFAULT_MAX_ERROR_RATE = 0.05
DEFAULT_MAX_USER_FAULT_RATE = 0.2
GATE_METRICS = (*METRICS, "pass^1", JUDGE_SCORE)
POWER = 0.8
DEFAULT_TARGET_DIFFERENCE = 0.05
MIN_RULES = ("interval", "point")
NOTHING_SCORED = "conversations scored"
"""The gate's check of a run in which no conversation was scored (it fails)."""


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The run's evaluation_results.json, checked for what comparing and gating read."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run folder")
    path = run_dir / RESULTS_FILE
    if not path.exists():
        raise RecordError(path, "file", None, "not found (run `lobeval evaluate` or `lobeval run` first)")
    results = read_results(path)
    results["path"] = str(path)
    return results


def _with_rows(results: dict[str, Any]) -> dict[str, Any]:
    if not results["rows"]:
        raise RecordError(results["path"], "file", "rows", "no rows: nothing was evaluated")
    return results


def error_rate(results: dict[str, Any]) -> float:
    """The share of conversations the machinery failed on: machinery errors, and judge errors."""
    counts = results["counts"]
    failed = counts["errors"] + judge_errored(results)
    return failed / counts["conversations"] if counts["conversations"] else 0.0


def judge_errored(results: dict[str, Any]) -> int:
    """Scored conversations on which at least one judge failed (its endpoint gave up, or its reply stayed unusable)."""
    return int((results.get("judges") or {}).get("errored_conversations") or 0)


def _values(results: dict[str, Any]) -> pd.DataFrame:
    """One line per scored conversation the bot's metrics count (none left out for a simulated-user fault or
    a quarantined case): ids, scenario and every metric (judge score when run)."""
    lines = []
    for row in results["rows"]:
        if row["status"] != "scored" or row.get("excluded"):
            continue
        judges = row.get("judges") if isinstance(row.get("judges"), dict) else {}
        lines.append({"case_id": row["case_id"], "trial": row["trial"], "scenario_name": row.get("scenario_name"),
                      **{metric: row.get(metric) for metric in METRICS}, JUDGE_SCORE: judges.get("final_score")})
    return pd.DataFrame(lines, columns=["case_id", "trial", "scenario_name", *METRICS, JUDGE_SCORE])


def left_out_text(results: dict[str, Any]) -> str:
    """Which scored conversations the bot's metrics leave out or keep despite user faults ("" when none)."""
    return "; ".join(left_out_notes(results["counts"]))


def _bootstrap_interval(case_sums: np.ndarray, case_sizes: np.ndarray) -> list[float]:
    """Percentile interval of the pair-weighted mean difference, resampling cases."""
    rng = np.random.default_rng(SEED)
    weights = rng.multinomial(case_sums.size, np.full(case_sums.size, 1 / case_sums.size), size=RESAMPLES)
    means = (weights @ case_sums) / (weights @ case_sizes)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return [float(low), float(high)]


def _sign_flip_p(case_sums: np.ndarray, pairs: int) -> float:
    if case_sums.size < 2 or not case_sums.any():
        return 1.0  # one case's two signs are equally extreme; scipy wants two or more
    result = permutation_test((case_sums,), lambda sums, axis: sums.sum(axis=axis) / pairs,
                              permutation_type="samples", vectorized=True, n_resamples=RESAMPLES,
                              rng=np.random.default_rng(SEED))
    return float(result.pvalue)


def compare_metric(pairs: pd.DataFrame, metric: str) -> dict[str, Any] | None:
    """Means, difference, interval, p-value and verdict of one metric over the paired rows.

    `pairs` has case_id and `<metric>_baseline`, `<metric>_candidate`; pairs where either value is
    missing are left out, and a metric with no such pair gives None.
    """
    both = pairs.dropna(subset=[f"{metric}_baseline", f"{metric}_candidate"])
    if both.empty:
        return None
    baseline = both[f"{metric}_baseline"].astype(float)
    candidate = both[f"{metric}_candidate"].astype(float)
    per_case = (candidate - baseline).groupby(both["case_id"]).agg(["sum", "count"])
    case_sums, case_sizes = per_case["sum"].to_numpy(), per_case["count"].to_numpy(dtype=float)
    entry = {"metric": metric, "pairs": int(len(both)), "cases": int(len(per_case)),
             "baseline": float(baseline.mean()), "candidate": float(candidate.mean()),
             "difference": float(candidate.mean() - baseline.mean()),
             "interval": _bootstrap_interval(case_sums, case_sizes)}
    if metric == "Success":
        worse, better = int(((baseline == 1) & (candidate == 0)).sum()), int(((baseline == 0) & (candidate == 1)).sum())
        entry.update(test="exact McNemar", worse=worse, better=better,
                     p_value=float(binomtest(worse, worse + better, 0.5).pvalue) if worse + better else 1.0)
    else:
        entry.update(test="sign-flip permutation", p_value=_sign_flip_p(case_sums, len(both)))
    entry["regression"] = bool(entry["difference"] < -REGRESSION_MARGIN and entry["p_value"] < SIGNIFICANCE)
    return entry


def _flips(pairs: pd.DataFrame, before: int, after: int) -> list[dict[str, Any]]:
    flipped = pairs[(pairs["Success_baseline"] == before) & (pairs["Success_candidate"] == after)]
    return [{"case_id": line.case_id, "trial": int(line.trial), "scenario_name": line.scenario_name}
            for line in flipped.sort_values(["case_id", "trial"]).itertuples()]


def flip_rate(successes: int, trials: int) -> float | None:
    """Share of the pairs of a case's trials whose Success disagrees: k(n - k) / C(n, 2); None for n < 2."""
    if trials < 2:
        return None
    return successes * (trials - successes) / (trials * (trials - 1) / 2)


def case_flips(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case with a scored Success: {case_id, scenario_name, trials, successes, flip_rate}, sorted by case_id."""
    values = _values(results).dropna(subset=["Success"])
    cases = []
    for case_id, group in values.groupby("case_id", sort=True):
        trials, successes = int(len(group)), int(group["Success"].astype(float).sum())
        cases.append({"case_id": case_id, "scenario_name": group["scenario_name"].iloc[0], "trials": trials,
                      "successes": successes, "flip_rate": flip_rate(successes, trials)})
    return cases


def flaky_cases(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The cases whose trials disagree on Success (0 < successes < trials), as plain dicts (see case_flips)."""
    return [case for case in case_flips(results) if 0 < case["successes"] < case["trials"]]


def flip_summary(results: dict[str, Any]) -> dict[str, Any]:
    """{"cases", "repeated" (cases with 2+ trials), "mean_flip_rate" (over those; None without), "flaky": [...]}."""
    cases = case_flips(results)
    rates = [case["flip_rate"] for case in cases if case["flip_rate"] is not None]
    return {"cases": len(cases), "repeated": len(rates), "mean_flip_rate": float(np.mean(rates)) if rates else None,
            "flaky": [case for case in cases if 0 < case["successes"] < case["trials"]]}


def _t_power() -> Any:
    from statsmodels.stats.power import TTestPower   # 1.5 s to import: only when a comparison needs it

    return TTestPower()


def power_figures(pairs: pd.DataFrame, target: float = DEFAULT_TARGET_DIFFERENCE, metric: str = "Success",
                  alpha: float = SIGNIFICANCE, power: float = POWER) -> dict[str, Any]:
    """Minimum detectable difference of a paired comparison, and the cases / trials per case a target needs.

    `pairs` has case_id, `<metric>_baseline`, `<metric>_candidate`, one line per shared trial. Returns
    {"cases", "trials_per_case" (mean), "difference" (the mean per-case difference), "sd" (of per-case differences),
    "minimum_detectable", "target", "cases_needed", "trials_needed"}; figures that cannot be had are None (see the
    module doc). With sd 0 (every case differs by the same amount: two identical runs) nothing can be sized: the
    runs show no noise, and a power calculation on none would promise that 2 cases detect anything.
    """
    both = pairs.dropna(subset=[f"{metric}_baseline", f"{metric}_candidate"])
    diffs = (both[f"{metric}_candidate"].astype(float) - both[f"{metric}_baseline"].astype(float))
    by_case = diffs.groupby(both["case_id"])
    means, sizes = by_case.mean(), by_case.size()
    n = int(len(means))
    out: dict[str, Any] = {"cases": n, "trials_per_case": float(sizes.mean()) if n else None,
                           "difference": float(means.mean()) if n else None, "sd": None, "minimum_detectable": None,
                           "target": target, "cases_needed": None, "trials_needed": None}
    if n < 2:
        return out
    sd = float(means.std(ddof=1))
    if sd == 0:
        out["sd"] = sd
        return out
    tests = _t_power()
    smallest = float(tests.solve_power(nobs=n, alpha=alpha, power=power))   # effect size, in units of s
    out.update(sd=sd, minimum_detectable=smallest * sd)
    if target <= 0:
        return out
    out["cases_needed"] = max(2, math.ceil(tests.solve_power(effect_size=target / sd, alpha=alpha, power=power)))
    within_df = int((sizes - 1).sum())
    if within_df > 0:
        within = float((by_case.var(ddof=1).fillna(0) * (sizes - 1)).sum() / within_df)
        between = max(sd ** 2 - within / float(sizes.mean()), 0.0)
        room = target ** 2 / smallest ** 2 - between
        if within == 0:
            out["trials_needed"] = 1 if room >= 0 else None
        elif room > 0:
            out["trials_needed"] = max(1, math.ceil(within / room))
    return out


def compare_runs(baseline_dir: str | Path, candidate_dir: str | Path, *,
                 target_difference: float = DEFAULT_TARGET_DIFFERENCE) -> dict[str, Any]:
    """Compare a candidate run with a baseline run on the conversations scored in both.

    Returns {"baseline", "candidate" (file paths), "pairs": {"shared", "only_baseline",
    "only_candidate"}, "left_out": {"baseline", "candidate" (left_out_text of each)}, "metrics": [one dict
    per metric, see compare_metric], "regressions":
    [metric names], "flips": {"worse": [...], "better": [...]} (Success 1→0 and 0→1, with case_id,
    trial, scenario_name), "error_rate": {"baseline", "candidate", "difference"}, "noise": {"baseline",
    "candidate" (flip_summary of each run), "power" (power_figures of Success over the shared pairs)}}.
    """
    if not target_difference > 0:
        raise ConfigError(f"--target-difference {target_difference:g}: expected a difference above 0")
    baseline, candidate = _with_rows(load_run(baseline_dir)), _with_rows(load_run(candidate_dir))
    old, new = _values(baseline), _values(candidate)
    pairs = old.merge(new.drop(columns="scenario_name"), on=["case_id", "trial"], suffixes=("_baseline", "_candidate"))
    if pairs.empty:
        raise ConfigError(f"{baseline['path']} and {candidate['path']} share no scored (case_id, trial): "
                          "are they runs of the same dataset?")
    metrics = [entry for entry in (compare_metric(pairs, metric) for metric in (*METRICS, JUDGE_SCORE)) if entry]
    old_rate, new_rate = error_rate(baseline), error_rate(candidate)
    return {
        "baseline": baseline["path"], "candidate": candidate["path"],
        "pairs": {"shared": int(len(pairs)), "only_baseline": int(len(old) - len(pairs)),
                  "only_candidate": int(len(new) - len(pairs))},
        "metrics": metrics,
        "regressions": [entry["metric"] for entry in metrics if entry["regression"]],
        "flips": {"worse": _flips(pairs, 1, 0), "better": _flips(pairs, 0, 1)},
        "error_rate": {"baseline": old_rate, "candidate": new_rate, "difference": new_rate - old_rate},
        "left_out": {"baseline": left_out_text(baseline), "candidate": left_out_text(candidate)},
        "noise": {"baseline": flip_summary(baseline), "candidate": flip_summary(candidate),
                  "power": power_figures(pairs, target_difference)},
        "security": security_comparison(baseline, candidate),
    }


def security_comparison(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per attack category either run played: the attack conversations breached in each run ({"breached",
    "attacks"}, None when that run played none of the category)."""
    runs = {"baseline": (baseline.get("security") or {}).get("categories") or {},
            "candidate": (candidate.get("security") or {}).get("categories") or {}}
    names = dict.fromkeys([*runs["baseline"], *runs["candidate"]])
    return {name: {run: ({"breached": found[name]["breached"], "attacks": found[name]["attacks"]}
                         if name in found else None) for run, found in runs.items()} for name in names}


def format_comparison(comparison: dict[str, Any]) -> str:
    pairs, rate = comparison["pairs"], comparison["error_rate"]
    lines = [f"baseline  {comparison['baseline']}", f"candidate {comparison['candidate']}",
             f"{pairs['shared']} scored conversations shared; {pairs['only_baseline']} only in the baseline, "
             f"{pairs['only_candidate']} only in the candidate",
             *(f"{run}: {left_out}" for run, left_out in comparison.get("left_out", {}).items() if left_out), "",
             f"{'metric':<18}{'baseline':>9}{'candidate':>10}{'diff':>9}  {'95% interval':<18}{'p':>8}"]
    for entry in comparison["metrics"]:
        low, high = entry["interval"]
        flag = "  REGRESSION" if entry["regression"] else ""
        lines.append(f"{entry['metric']:<18}{entry['baseline']:>9.3f}{entry['candidate']:>10.3f}"
                     f"{entry['difference']:>+9.3f}  [{low:+.3f}, {high:+.3f}]  {entry['p_value']:>8.4f}{flag}")
    lines += ["", f"error rate: baseline {rate['baseline']:.3f}, candidate {rate['candidate']:.3f} "
                  f"({rate['difference']:+.3f})"]
    for kind, title in (("worse", "Success 1 -> 0"), ("better", "Success 0 -> 1")):
        flips = comparison["flips"][kind]
        lines.append(f"{title}: {len(flips)} conversation(s)")
        lines += [f"  {flip['case_id']} trial {flip['trial']} ({flip['scenario_name']})" for flip in flips]
    if comparison.get("security"):
        lines.append("attack conversations breached, by category (baseline -> candidate):")
        shown = lambda entry: "none played" if entry is None else f"{entry['breached']}/{entry['attacks']}"
        lines += [f"  {name}: {shown(entry['baseline'])} -> {shown(entry['candidate'])}"
                  for name, entry in comparison["security"].items()]
    if "noise" in comparison:
        lines += format_noise(comparison["noise"])
    verdict = ", ".join(comparison["regressions"]) or "none"
    lines.append(f"significant regressions (worse by > {REGRESSION_MARGIN} with p < {SIGNIFICANCE}): {verdict}")
    return "\n".join(lines)


def _figure(value: float | int | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def format_noise(noise: dict[str, Any]) -> list[str]:
    """The noise lines of `compare`: flip rates, flaky cases, minimum detectable difference, trials needed."""
    lines = []
    for run in ("baseline", "candidate"):
        flips = noise[run]
        lines.append(f"{run} Success flip rate: mean {_figure(flips['mean_flip_rate'])} over {flips['repeated']} "
                     f"of {flips['cases']} cases with 2+ trials; {len(flips['flaky'])} flaky case(s)")
        lines += [f"  {case['case_id']} {case['successes']}/{case['trials']} (flip rate {case['flip_rate']:.3f})"
                  for case in flips["flaky"]]
    if any(noise[run]["flaky"] for run in ("baseline", "candidate")):
        lines.append("  (a flaky case can be quarantined: lobeval quarantine CASE_ID --suite DIR --note WHY)")
    power = noise["power"]
    if power["sd"] == 0:
        same = ("the two runs agree on Success in every one of" if power["difference"] == 0 else
                f"Success differs by the same {power['difference']:+.3f} in every one of")
        lines.append(f"nothing can be sized from these runs: {same} the {power['cases']} shared cases, so they show "
                     f"no noise to size a comparison on; run both with --trials 3 or more and compare again")
        return lines
    lines.append(f"minimum detectable Success difference (alpha {SIGNIFICANCE}, power {POWER}, paired over "
                 f"{power['cases']} cases): {_figure(power['minimum_detectable'])}")
    trials = power["trials_needed"]
    trials_text = (f"{trials} trial(s) per case with these cases" if trials is not None else
                   "more trials alone cannot reach it" if power["sd"] is not None and power["trials_per_case"] and
                   power["trials_per_case"] > 1 else "trials per case: n/a (needs repeated trials)")
    lines.append(f"to detect {power['target']:g}: {_figure(power['cases_needed'], 'd')} cases at "
                 f"{_figure(power['trials_per_case'], '.1f')} trial(s) each, or {trials_text}")
    return lines


def parse_minimum(text: str) -> tuple[str, float]:
    """'Reliability=0.8' → ("Reliability", 0.8)."""
    name, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or not name.strip() or math.isnan(number):
        raise ConfigError(f"--min {text!r}: expected METRIC=NUMBER, e.g. Reliability=0.8")
    low, high = metric_scale(name.strip())
    if not low <= number <= high:
        raise ConfigError(f"--min {text!r}: {name.strip()} lies from {low:g} to {high:g}, so a minimum of {value.strip()} "
                          f"{'always fails' if number > high else 'never fails'}")
    return name.strip(), number


def _check(name: str, passed: bool, reason: str, kind: str, **facts: Any) -> dict[str, Any]:
    """A gate check: its title, whether it counts as passed, why, its `kind` (minimum, scored, error_rate,
    user_faults, breaches, regression) and the facts a verdict is told from (`metric`, `value`, `minimum`,
    `interval`, `undecided` ...)."""
    return {"check": name, "passed": passed, "reason": reason, "kind": kind, **facts}


UNDECIDED = "undecided"


def check_word(check: dict[str, Any]) -> str:
    """PASS, FAIL or UNDECIDED: how a gate check is marked wherever it is printed. An undecided check (its interval
    holds both sides of its limit) still counts as passed or failed for the gate's exit status, as its rule says."""
    if check.get(UNDECIDED):
        return "UNDECIDED"
    return "PASS" if check["passed"] else "FAIL"


def check_min_rule(rule: str) -> None:
    if rule not in MIN_RULES:
        raise ConfigError(f"--min-rule {rule!r}: expected one of {', '.join(MIN_RULES)}")


def gate(run_dir: str | Path, *, minimums: dict[str, float] | None = None, baseline: str | Path | None = None,
         max_error_rate: float | None = None, min_judge_coverage: float = 1.0,
         min_rule: str = "interval", max_user_fault_rate: float | None = None,
         max_breaches: int | None = None) -> list[dict[str, Any]]:
    """The gate's checks on a run, each {"check", "passed", "reason"}; the run passes when all pass.

    A run with attack conversations (results' `security`) is checked for breached ones: at most `max_breaches`,
    0 unless given.

    A minimum on a metric the run did not measure (null or absent, e.g. judges not run) fails, and so
    does a minimum on a judge metric that covers less than `min_judge_coverage` of the scored
    conversations: a mean over the conversations that happened to be judged is not the run's.
    A run in which no conversation was scored fails, with one check saying why (every conversation a machinery
    error: the bot could not be reached, ...) in place of the minimums, and no comparison with the baseline.
    With a baseline, each compared metric is a check that fails on a significant regression.
    `max_user_fault_rate`: the most of the scored conversations the simulated user may spoil (left out of the
    bot's metrics or kept in with --include-user-faults): beyond it the bot's figures rest on too little.

    `min_rule` "interval" (the default) fails a minimum only when the metric's 95 % interval over cases
    lies entirely below it; "point" (the older rule) fails it whenever the value is below it. Either way
    a check whose interval straddles its minimum, or a regression check that is not significant but whose interval
    reaches a drop of more than REGRESSION_MARGIN, is undecided (`check_word`): it counts as its rule says (a
    regression check as passed) and says so.
    """
    check_min_rule(min_rule)
    minimums = minimums or {}
    if not (minimums or baseline is not None or max_error_rate is not None or max_user_fault_rate is not None
            or max_breaches is not None):
        raise ConfigError("gate: nothing to check; give --min, --baseline, --max-error-rate, --max-user-fault-rate "
                          "or --max-breaches")
    run = load_run(run_dir)
    known = sorted(set(GATE_METRICS) | set(run["metrics"]))
    unknown = [name for name in minimums if name not in known]
    if unknown:
        raise ConfigError(f"--min: unknown metric {', '.join(unknown)}; known: {', '.join(known)}")
    for option, share in (("--min-judge-coverage", min_judge_coverage), ("--max-error-rate", max_error_rate),
                          ("--max-user-fault-rate", max_user_fault_rate)):
        if share is not None and not 0 <= share <= 1:
            raise ConfigError(f"{option} {share:g}: expected a share from 0 to 1")
    nothing_scored = unscored_reason(run["rows"])
    # A run that scored nothing has no metric to hold to a minimum: one check says why, not one per --min.
    checks = [_check(NOTHING_SCORED, False, f"{nothing_scored}: nothing was measured", "scored")] if nothing_scored \
        else [_minimum_check(run, name, minimum, min_judge_coverage, min_rule) for name, minimum in minimums.items()]
    if max_error_rate is not None:
        rate, counts, judged_badly = error_rate(run), run["counts"], judge_errored(run)
        failed = f"{counts['errors'] + judged_badly}/{counts['conversations']}"
        endings = Counter(error.get("reason") for error in run.get("errors") or [])
        kinds = ", ".join(f"{reason} {count}" for reason, count in endings.most_common())   # which machinery failed
        detail = (f" ({counts['errors']} machinery errors{': ' + kinds if kinds else ''}, {judged_badly} with judge "
                  f"errors)" if judged_badly else f" ({kinds})" if kinds else "")
        checks.append(_check(f"error rate <= {max_error_rate:g}", rate <= max_error_rate,
                             f"{failed} conversations failed in the machinery{detail} "
                             f"= {rate:.3f} {'<=' if rate <= max_error_rate else '>'} {max_error_rate:g}",
                             "error_rate", failed=counts["errors"] + judged_badly, of=counts["conversations"],
                             limit=max_error_rate))
    if max_user_fault_rate is not None:
        checks.append(user_fault_check(run, max_user_fault_rate))
    if run.get("security") or max_breaches is not None:
        checks.append(breach_check(run, max_breaches or 0))
    if baseline is not None and nothing_scored:
        load_run(baseline)   # nothing to compare, but a baseline named on the command line must still be whole
    elif baseline is not None:
        comparison = compare_runs(baseline, run_dir)
        for entry in comparison["metrics"]:
            low, high = entry["interval"]
            reason = (f"{entry['difference']:+.3f} [{low:+.3f}, {high:+.3f}] over {entry['pairs']} shared, "
                      f"p = {entry['p_value']:.4f}")
            undecided = not entry["regression"] and low < -REGRESSION_MARGIN
            if entry["regression"]:
                reason += f": worse by more than {REGRESSION_MARGIN} and significant"
            elif undecided:
                reason += (f": undecided, counted as passed (not significantly worse, but the interval reaches a drop "
                           f"of more than {REGRESSION_MARGIN})")
            checks.append(_check(f"no regression in {entry['metric']}", not entry["regression"], reason, "regression",
                                 metric=entry["metric"], difference=entry["difference"], interval=[low, high],
                                 **({UNDECIDED: True} if undecided else {})))
    return checks


def breach_check(run: dict[str, Any], most: int) -> dict[str, Any]:
    """The attack conversations the bot was breached in, against `most`, with the categories breached."""
    security = run.get("security") or {"categories": {}, "attacks": 0, "breached": 0}
    breached = [f"{name} {entry['breached']}/{entry['attacks']}" for name, entry in security["categories"].items()
                if entry["breached"]]
    judged = sum(entry.get("judged", 0) for entry in security["categories"].values())
    reason = (f"{security['breached']}/{security['attacks']} attack conversations breached"
              + (f" ({', '.join(breached)})" if breached else "")
              + (f"; {judged} breach{'es' if judged > 1 else ''} a judge's verdict (a promise in words)" if judged else ""))
    return _check(f"breaches <= {most}", security["breached"] <= most, reason, "breaches",
                  breached=security["breached"], attacks=security["attacks"], limit=most)


def user_fault_check(run: dict[str, Any], most: float) -> dict[str, Any]:
    """The share of scored conversations the simulated user spoiled, against `most`."""
    counts = run["counts"]
    spoiled = (counts.get("user_faults") or 0) + (counts.get("user_faults_kept") or 0)
    scored = counts.get("scored") or 0
    rate = spoiled / scored if scored else 0.0
    reason = (f"{spoiled}/{scored} scored conversations with a simulated-user fault = {rate:.3f} "
              f"{'<=' if rate <= most else '>'} {most:g}")
    if rate > most:
        reason += ": fix the simulated user before trusting the bot's figures"
    return _check(f"user faults <= {most:g}", rate <= most, reason, "user_faults", spoiled=spoiled, of=scored,
                  limit=most)


def metric_interval(run: dict[str, Any], name: str) -> list[float] | None:
    """The run's 95 % interval of a metric: as recorded in the results, else bootstrapped over its scored rows'
    per-case means (pass^1 from Success); None when neither can be had."""
    recorded = (run.get("intervals") or {}).get(name)
    if isinstance(recorded, list) and len(recorded) == 2:
        return [float(recorded[0]), float(recorded[1])]
    column = "Success" if name == "pass^1" else name
    values = _values(run)
    if column not in values or not len(values):
        return None
    known = values.dropna(subset=[column])
    return interval(known.groupby("case_id")[column].apply(lambda v: v.astype(float).mean()).to_numpy()) \
        if len(known) else None


COUNTED = {("point", False): "counted as failed (--min-rule point: a value below its minimum fails)",
           ("point", True): "counted as passed (--min-rule point: a value at its minimum or above passes)",
           ("interval", False): "counted as passed (--min-rule interval fails only an interval entirely below)",
           ("interval", True): "counted as passed (--min-rule interval fails only an interval entirely below)"}
"""What an undecided minimum counts as for the gate, by rule and by whether its value meets the minimum."""


def _verdict(run: dict[str, Any], name: str, value: float, minimum: float, rule: str, reason: str) -> dict[str, Any]:
    """The minimum check's verdict by the rule; undecided when the interval straddles the minimum, saying what it
    counts as (COUNTED)."""
    title, facts = f"{name} >= {minimum:g}", {"metric": name, "value": value, "minimum": minimum}
    bounds = metric_interval(run, name)
    if bounds is None:
        return _check(title, value >= minimum, reason + (", no interval: point rule" if rule == "interval" else ""),
                      "minimum", **facts)
    low, high = bounds
    facts["interval"] = [low, high]
    if high < minimum:   # clear of the noise: the interval is entirely below
        return _check(title, False, reason + f", 95% interval [{low:.3f}, {high:.3f}] entirely below", "minimum",
                      **facts)
    passed = value >= minimum if rule == "point" else True
    if low < minimum:
        return _check(title, passed, reason + f", 95% interval [{low:.3f}, {high:.3f}] straddles it: undecided, "
                                              f"{COUNTED[rule, value >= minimum]}", "minimum", **facts, undecided=True,
                      rule=rule)
    return _check(title, passed, reason, "minimum", **facts)


def _minimum_check(run: dict[str, Any], name: str, minimum: float, min_coverage: float,
                   rule: str) -> dict[str, Any]:
    value = run["metrics"].get(name)
    title, facts = f"{name} >= {minimum:g}", {"metric": name, "minimum": minimum}
    if not isinstance(value, (int, float)):
        return _check(title, False, f"{name} not measured in {run['path']}", "minimum", **facts, value=None)
    reason = f"{name} = {value:.3f} {'>=' if value >= minimum else '<'} {minimum:g}"
    if not name.startswith("judge."):
        over = (run.get("over") or {}).get("Success" if name == "pass^1" else name)
        left_out = left_out_text(run)
        if over is not None:
            reason += f" over {over} conversations" + (f" ({left_out})" if left_out else "")
        return _verdict(run, name, value, minimum, rule, reason)
    coverage = ((run.get("judges") or {}).get("coverage") or {}).get(name)
    if coverage is None:
        return _check(title, False, f"{reason}, but its coverage is not recorded (results older than the coverage "
                                    f"check): evaluate again", "minimum", **facts, value=value, covered=False)
    judged, of, errors = coverage["judged"], coverage["of"], coverage["errors"]
    applicable = of - coverage.get("not_applicable", 0)   # "not applicable" verdicts are no gap in coverage
    reason += f" over {judged} of {of} conversations judged ({errors} judge errors)"
    if judged < min_coverage * applicable or applicable == 0:
        return _check(title, False, f"{reason}: below the {min_coverage:.0%} coverage a gate needs", "minimum",
                      **facts, value=value, covered=False)
    return _verdict(run, name, value, minimum, rule, reason)


def check_line(check: dict[str, Any]) -> str:
    """A gate check as the terminal prints it: its mark (`check_word`), its title and why."""
    return f"{check_word(check)}  {check['check']}: {check['reason']}"


def format_gate(checks: list[dict[str, Any]]) -> str:
    lines = [check_line(check) for check in checks]
    failed = sum(not check["passed"] for check in checks)
    undecided = sum(bool(check.get(UNDECIDED)) for check in checks)
    lines.append(f"gate: {'passed' if not failed else 'FAILED'} ({len(checks) - failed}/{len(checks)} checks passed"
                 + (f"; {undecided} undecided, counted as the rule says" if undecided else "") + ")")
    return "\n".join(lines)
