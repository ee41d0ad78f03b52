"""Judge calibration: how far each judge agrees with the analysts who checked its verdicts (docs/analysis.md).

The analysts' judge_verdict labels (docs/formats.md, written by the replay widget) pair what a judge said
with what the analyst says is right. Per judge and criterion `calibrate` gives the number of labels, the
exact agreement, Cohen's κ (quadratic-weighted on the 1–5 scales) and Krippendorff's α (ordinal on the
1–5 scales, nominal otherwise), each with a 95 % bootstrap interval over the conversations labelled, the confusion
matrix, and for the 1–5 scales the pass threshold on the judge's score that best matches the analysts.
A statistic that is undefined (every label the same value on both sides) is None, with the reason.
"""
from __future__ import annotations

from typing import Any

import krippendorff
import numpy as np
import pandas as pd

from lobeval.core.records import VERDICT_KEY, human_value, verdict_scales
from lobeval.core.stats import CONFIDENCE, RESAMPLES, SEED
from lobeval.core.vocabulary import PASSING_TURN_SCORE

SUMMARY_COLUMNS = ["judge", "criterion", "scale", "labels", "agreement", "agreement_low", "agreement_high",
                   "statistic", "kappa", "kappa_low", "kappa_high", "alpha", "alpha_low", "alpha_high",
                   "threshold", "threshold_agreement", "best_threshold", "best_kappa", "best_agreement", "note"]
UNDEFINED = "κ and α undefined: the judge and the analysts gave every label the same value"
NO_LABELS = ("no judge labels yet: agree or disagree with the judges' verdicts in the replay widget "
             "(notebooks/04_error_analysis.ipynb), then calibrate again")


def verdict_labels(labels: list[dict[str, Any]], judge_model: str | None = None,
                   judge_prompt: str | None = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The judge_verdict labels a calibration uses and how many others were left out: ({"replaced": n,
    "other_models": n, "other_prompts": n}). Of the labels with the same VERDICT_KEY the last in the file counts
    (the analyst changed their mind); with `judge_model`, only the labels on that model's verdicts; with
    `judge_prompt`, only those on verdicts given with that version of the judges' prompts (a label that does not
    say which is left out too: a changed prompt must not reuse an old calibration)."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    verdicts = [label for label in labels if label.get("kind") == "judge_verdict"]
    for label in verdicts:
        key = tuple(label.get(field) for field in VERDICT_KEY)
        latest.pop(key, None)   # re-inserted: the file order of the labels that count is kept
        latest[key] = label
    on_model = [label for label in latest.values() if judge_model is None or label.get("judge_model") == judge_model]
    kept = [label for label in on_model if judge_prompt is None or label.get("judge_prompt") == judge_prompt]
    return kept, {"replaced": len(verdicts) - len(latest), "other_models": len(latest) - len(on_model),
                  "other_prompts": len(on_model) - len(kept)}


# --- the statistics, on confusion tables (rows: the analyst's value, columns: the judge's) ------------------

def confusion_table(judge_codes: np.ndarray, human_codes: np.ndarray, size: int) -> np.ndarray:
    """Counts of (analyst, judge) value positions on a scale of `size` values."""
    table = np.zeros((size, size), dtype=np.int64)
    np.add.at(table, (human_codes, judge_codes), 1)
    return table


def agreements(tables: np.ndarray) -> np.ndarray:
    """The share of labels on which judge and analyst agree exactly, for each table of a stack (..., K, K)."""
    return np.trace(tables, axis1=-2, axis2=-1) / tables.sum(axis=(-2, -1))


def kappas(tables: np.ndarray, weighted: bool) -> np.ndarray:
    """Cohen's κ = 1 − Σ w·observed / Σ w·expected of each table, as sklearn's cohen_kappa_score computes it;
    w = (i − j)² (quadratic) or 1 off the diagonal. NaN where every label has the same value on both sides."""
    size = tables.shape[-1]
    positions = np.arange(size)
    weights = (positions[:, None] - positions[None, :]) ** 2 if weighted else 1 - np.eye(size)
    tables = tables.astype(float)
    rows, columns, total = tables.sum(axis=-1), tables.sum(axis=-2), tables.sum(axis=(-2, -1))
    expected = rows[..., :, None] * columns[..., None, :] / total[..., None, None]
    observed, chance = (weights * tables).sum(axis=(-2, -1)), (weights * expected).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance > 0, 1 - observed / chance, np.nan)


def alphas(tables: np.ndarray, ordinal: bool) -> np.ndarray:
    """Krippendorff's α = 1 − (n − 1)·Σ o·δ / Σ n_c·n_k·δ of each table (two coders, no value missing), as
    the krippendorff package computes it: o the coincidences (the table plus its transpose), n_c their margins.
    Ordinal δ(c, k) = (n_c + … + n_k − (n_c + n_k)/2)², nominal δ = 1 for c ≠ k. NaN where only one value
    occurs."""
    coincidences = (tables + np.swapaxes(tables, -2, -1)).astype(float)
    margins = coincidences.sum(axis=-1)
    size = tables.shape[-1]
    if ordinal:
        low = np.minimum.outer(np.arange(size), np.arange(size))
        high = np.maximum.outer(np.arange(size), np.arange(size))
        cumulative = np.cumsum(margins, axis=-1)
        between = cumulative[..., high] - cumulative[..., low] + margins[..., low]
        distances = (between - (margins[..., :, None] + margins[..., None, :]) / 2) ** 2
    else:
        distances = np.broadcast_to(1 - np.eye(size), coincidences.shape)
    total = margins.sum(axis=-1)
    observed = (coincidences * distances).sum(axis=(-2, -1))
    chance = (margins[..., :, None] * margins[..., None, :] * distances).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance > 0, 1 - (total - 1) * observed / chance, np.nan)


def resampled(tables: np.ndarray, seed: int = SEED) -> np.ndarray:
    """RESAMPLES bootstrap resamples, as tables (RESAMPLES, K, K), of the conversations behind `tables` (one
    (K, K) table of labels per conversation). Labels on one conversation are not independent (one analyst, one
    transcript), so a conversation is drawn with all its labels: drawing m conversations with replacement is
    one multinomial draw of how often each is taken."""
    count = len(tables)
    taken = np.random.default_rng(seed).multinomial(count, np.full(count, 1 / count), size=RESAMPLES)
    return np.einsum("rm,mkl->rkl", taken, tables)


def conversation_tables(judge_codes: np.ndarray, human_codes: np.ndarray, size: int,
                        conversations: list[Any]) -> np.ndarray:
    """One confusion table per conversation (in order of first label), stacked (m, K, K)."""
    index = {key: position for position, key in enumerate(dict.fromkeys(conversations))}
    tables = np.zeros((len(index), size, size), dtype=np.int64)
    np.add.at(tables, ([index[key] for key in conversations], human_codes, judge_codes), 1)
    return tables


def percentile_interval(values: np.ndarray) -> list[float] | None:
    """The 95 % percentile interval of the defined values (resamples where a statistic is undefined are
    skipped); None when none is."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    return [float(bound) for bound in np.percentile(values, [tail, 100 - tail])]


def kappa(judge_codes: np.ndarray, human_codes: np.ndarray, size: int, weighted: bool) -> float | None:
    """scikit-learn's Cohen's κ over the whole scale; None where undefined."""
    if np.isnan(kappas(confusion_table(judge_codes, human_codes, size), weighted)):
        return None
    from sklearn.metrics import cohen_kappa_score   # here: a run with no labels (stage 04's usual case) never loads it
    return float(cohen_kappa_score(human_codes, judge_codes, labels=list(range(size)),
                                   weights="quadratic" if weighted else None))


def alpha(judge_codes: np.ndarray, human_codes: np.ndarray, size: int, ordinal: bool) -> float | None:
    """The krippendorff package's α, judge and analyst the two coders; None where undefined."""
    if len(set(judge_codes) | set(human_codes)) < 2:
        return None
    counts = np.zeros((len(judge_codes), size), dtype=np.int64)
    np.add.at(counts, (np.arange(len(judge_codes)), judge_codes), 1)
    np.add.at(counts, (np.arange(len(human_codes)), human_codes), 1)
    return float(krippendorff.alpha(value_counts=counts, value_domain=np.arange(size),
                                    level_of_measurement="ordinal" if ordinal else "nominal"))


def thresholds(judge_scores: np.ndarray, human_scores: np.ndarray) -> pd.DataFrame:
    """For each threshold t of the 1–5 scale: how well "judge ≥ t" matches "analyst ≥ PASSING_TURN_SCORE"
    (agreement and κ of the pass/fail verdicts)."""
    steps = np.arange(1, 6)
    human_pass = (human_scores >= PASSING_TURN_SCORE).astype(int)
    tables = np.array([confusion_table((judge_scores >= step).astype(int), human_pass, 2) for step in steps])
    return pd.DataFrame({"threshold": steps, "agreement": agreements(tables), "kappa": kappas(tables, False)})


def best_threshold(table: pd.DataFrame) -> pd.Series:
    """The row of `thresholds` with the highest κ, then the highest agreement, then the current threshold."""
    # κ is undefined only where both sides give one and the same verdict on every label: a perfect match
    ranked = table.assign(rank_kappa=table["kappa"].fillna(1.0), current=table["threshold"] == PASSING_TURN_SCORE)
    order = ranked.sort_values(["rank_kappa", "agreement", "current"], ascending=False, kind="stable")
    return table.loc[order.index[0]]


def _codes(values: tuple[Any, ...], found: list[Any]) -> np.ndarray:
    """Each value's position on its scale (4.0 is 4)."""
    return np.array([values.index(value) for value in found], dtype=np.int64)


def criterion_figures(scale: str, values: tuple[Any, ...], judge_values: list[Any], human_values: list[Any],
                      conversations: list[Any]) -> dict[str, Any]:
    """The summary figures of one judge criterion from its labels' (judge, analyst) values on `values`;
    `conversations`: each label's conversation, the unit the bootstrap resamples."""
    judge_codes, human_codes = _codes(values, judge_values), _codes(values, human_values)
    size, ordered = len(values), scale == "1-5"
    table = confusion_table(judge_codes, human_codes, size)
    resamples = resampled(conversation_tables(judge_codes, human_codes, size, conversations))
    figures: dict[str, Any] = {
        "scale": scale, "labels": len(judge_codes), "agreement": float(agreements(table)),
        "statistic": "weighted κ" if ordered else "κ",
        "kappa": kappa(judge_codes, human_codes, size, ordered),
        "alpha": alpha(judge_codes, human_codes, size, ordered),
        "threshold": None, "threshold_agreement": None, "best_threshold": None, "best_kappa": None,
        "best_agreement": None}
    intervals = {"agreement": agreements(resamples), "kappa": kappas(resamples, ordered),
                 "alpha": alphas(resamples, ordered)}
    for name, found in intervals.items():
        low_high = percentile_interval(found) if figures[name] is not None else None
        figures[f"{name}_low"], figures[f"{name}_high"] = low_high or (None, None)
    figures["note"] = UNDEFINED if figures["kappa"] is None else ""
    if ordered:
        table = thresholds(np.array(judge_values, dtype=float), np.array(human_values, dtype=float))
        best = best_threshold(table)
        current = table.set_index("threshold").loc[PASSING_TURN_SCORE]
        figures.update(threshold=PASSING_TURN_SCORE, threshold_agreement=float(current["agreement"]),
                       best_threshold=int(best["threshold"]), best_agreement=float(best["agreement"]),
                       best_kappa=None if np.isnan(best["kappa"]) else float(best["kappa"]))
    return figures


def _shown_value(value: Any) -> Any:
    return "no failure" if value is None else value


def confusion_frame(values: tuple[Any, ...], judge_values: list[Any], human_values: list[Any]) -> pd.DataFrame:
    """Rows: the analyst's value, columns: the judge's, every value of the scale; cells: labels."""
    table = confusion_table(_codes(values, judge_values), _codes(values, human_values), len(values))
    shown = [_shown_value(value) for value in values]
    return pd.DataFrame(table, index=pd.Index(shown, name="analyst"), columns=pd.Index(shown, name="judge"))


def calibrate(labels: list[dict[str, Any]], judge_model: str | None = None,
              judge_prompt: str | None = None) -> dict[str, Any]:
    """Per judge and criterion with labels: {"summary": a DataFrame (SUMMARY_COLUMNS, one line each),
    "confusion": {(judge, criterion): `confusion_frame`}, "labels": the labels used, "replaced",
    "other_models", "other_prompts": the labels left out (`verdict_labels`), "judge_model", "judge_prompt"}.
    `labels` as `read_labels` gives them."""
    used, left_out = verdict_labels(labels, judge_model, judge_prompt)
    lines, confusion = [], {}
    for judge, criteria in verdict_scales().items():
        for criterion, (scale, values) in criteria.items():
            mine = [label for label in used if (label["judge"], label["criterion"]) == (judge, criterion)]
            if not mine:
                continue
            judge_values = [label["judge_value"] for label in mine]
            human_values = [human_value(label) for label in mine]
            conversations = [(label.get("run_id"), label["case_id"], label["trial"]) for label in mine]
            lines.append({"judge": judge, "criterion": criterion,
                          **criterion_figures(scale, values, judge_values, human_values, conversations)})
            confusion[(judge, criterion)] = confusion_frame(values, judge_values, human_values)
    return {"summary": pd.DataFrame(lines, columns=SUMMARY_COLUMNS), "confusion": confusion, "labels": len(used),
            **left_out, "judge_model": judge_model, "judge_prompt": judge_prompt}


def metric_name(judge: str, criterion: str) -> str | None:
    """The run metric a judge criterion's verdicts make (judge.helpfulness, judge.goal, judge.<azure>); None
    for behaviour failures, which make none."""
    return None if judge == "behaviour_failure" else f"judge.{criterion}"


def report_calibration(labels: list[dict[str, Any]], judge_model: str | None = None,
                       judge_prompt: str | None = None) -> dict[str, dict[str, Any]]:
    """{metric name: {"labels", "agreement", "kappa" (None where undefined), "statistic"}} for each judge metric
    with labels on `judge_model`'s verdicts with `judge_prompt`; a metric missing is not calibrated.
    judge.final_score and judge.turn_success_ratio are derived from the others and never in it."""
    summary = calibrate(labels, judge_model, judge_prompt)["summary"]
    return {metric_name(line["judge"], line["criterion"]): {
        "labels": int(line["labels"]), "agreement": float(line["agreement"]),
        "kappa": None if pd.isna(line["kappa"]) else float(line["kappa"]), "statistic": line["statistic"]}
        for line in summary.to_dict("records") if metric_name(line["judge"], line["criterion"]) is not None}


def _estimate(value: float | None, low: float | None, high: float | None) -> str:
    if value is None or pd.isna(value):
        return "undefined"
    return f"{value:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None and not pd.isna(low) else "")


def counted_text(result: dict[str, Any]) -> str:
    """What `calibrate` counted: the labels used, on which judge model, and those left out."""
    model = f"judge model {result['judge_model']}" if result["judge_model"] else "every judge model"
    if result.get("judge_prompt"):
        model += f", prompts {result['judge_prompt']}"
    return (f"judge calibration: {result['labels']} label{'' if result['labels'] == 1 else 's'} ({model}); left out: "
            f"{result['other_models']} on another judge model, {result.get('other_prompts', 0)} on other judge "
            f"prompts, {result['replaced']} replaced by a later label")


def no_labels_text(result: dict[str, Any]) -> str:
    """Why `calibrate` found no label to count: none given yet (NO_LABELS), or every one left out as given on
    another judge model or other judge prompts, with how many and why."""
    other_models, other_prompts = result["other_models"], result.get("other_prompts", 0)
    if not other_models and not other_prompts:
        return NO_LABELS
    reasons = [f"{count} {why}" for count, why in ((other_models, "on another judge model"),
                                                   (other_prompts, "on other judge prompts")) if count]
    on = (f"judge model {result['judge_model']}" if result["judge_model"] else "every judge model") + (
        f" with prompts {result['judge_prompt']}" if result.get("judge_prompt") else "")
    total = other_models + other_prompts
    return (f"no judge label counts for this run ({on}): all {total} were left out, {' and '.join(reasons)}: "
            f"a label is about the verdict of the judge model and prompts that gave it, and a changed judge must not "
            f"reuse an old calibration; agree or disagree with this run's verdicts in the replay widget "
            f"(notebooks/04_error_analysis.ipynb), then calibrate again")


def format_calibration(result: dict[str, Any]) -> str:
    """`calibrate`'s result as text for the command line: what was counted, one line per judge criterion, the
    confusion matrices."""
    lines = [counted_text(result)]
    if not result["labels"]:
        return "\n".join([*lines, no_labels_text(result)])
    lines.append("95 % intervals: the labelled conversations resampled, each with all its labels")
    for line in result["summary"].to_dict("records"):
        counted = f"{line['labels']} label{'' if line['labels'] == 1 else 's'}"
        text = (f"{line['judge']}/{line['criterion']} ({line['scale']}): {counted}, agreement "
                f"{_estimate(line['agreement'], line['agreement_low'], line['agreement_high'])}, {line['statistic']} "
                f"{_estimate(line['kappa'], line['kappa_low'], line['kappa_high'])}, α "
                f"{_estimate(line['alpha'], line['alpha_low'], line['alpha_high'])}")
        if line["best_threshold"] is not None and not pd.isna(line["best_threshold"]):
            text += (f"; pass at ≥ {line['threshold']:g}: agreement {line['threshold_agreement']:.2f}, best at "
                     f"≥ {int(line['best_threshold'])}: agreement {line['best_agreement']:.2f}")
        lines.append(text + (f" ({line['note']})" if line["note"] else ""))
    for (judge, criterion), frame in result["confusion"].items():
        lines += ["", f"{judge}/{criterion}: rows the analyst's value, columns the judge's", frame.to_string()]
    return "\n".join(lines)
