"""Root causes: a language model reads the failure clusters with conversation excerpts and names the causes.

The reply is validated (pydantic, and every conversation it cites must be one it was shown); a
reply still unusable after a retry raises `LLMError`: the caller records it, and no cause is made up.
The caller passes the client (the judge role's model, see docs/models.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lobeval.analysis.analyse import failure_signatures
from lobeval.models.llm import LLMClient, LLMError, Usage, parse_json_object
from lobeval.core.records import write_json
from lobeval.core.render import excerpt

MAX_CLUSTERS = 20
MAX_CONVERSATIONS = 12

PROMPT = """You analyse why a business chatbot failed automated tests. The chatbot serves users by
calling functions (creating and updating records, looking things up). Each test conversation was
scored against the function calls it should have made.

Below are the failure clusters found by the scorer, the most severe kinds first: each groups
failures with the same signature (kind of failure, function, argument, category) and counts how
often it happened. Kinds: missed_call (a required call never made), extra_call (a call nobody asked
for), failed_call (the call was made but returned an error), wrong_argument / missing_argument /
extra_argument (in a call that was made), forbidden_call, missing_output (a fact the user was never
told), behaviour (a judge's verdict on a reply), said_not_sent (the bot told one value and its call sent another),
claimed_not_done (the bot said it did something it
did not do).
After the clusters come excerpts of example conversations, each headed by its id and the failures
found in it; lines are numbered by user turn.

Find the root causes behind these failures: the few underlying reasons in the chatbot's behaviour
(a misunderstood field, a missing confirmation step, a wrong default, ...), not one entry per
symptom. Merge clusters that share a cause. Base every cause on what the excerpts show; if the
evidence does not tell why something failed, say so in the description rather than guessing.

Answer with a JSON object and nothing else:
{"root_causes": [{"title": "<short name>",
                  "description": "<what goes wrong and why, with the evidence>",
                  "severity": "critical" | "high" | "medium" | "low",
                  "conversations": ["<conversation ids exactly as given, e.g. case-001#0>"],
                  "turns": [<user-turn numbers where it shows>],
                  "suggested_fix": "<what to change in the chatbot>"}]}
Severity: critical = wrong or unsafe changes to business data or false information; high = the
user's task is not done; medium = done, but with friction or missing information; low = cosmetic."""


class RootCause(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    severity: Literal["critical", "high", "medium", "low"]
    conversations: list[str] = Field(min_length=1)
    turns: list[int] = []
    suggested_fix: str = Field(min_length=1)


class RootCauses(BaseModel):
    root_causes: list[RootCause]


CRITICAL_BEHAVIOUR = ("unsafe_action", "unsafe_state", "false_information")


def severity_rank(kind: str, category: str) -> int:
    """0: forbidden or unsafe actions and false claims; 1: wrong or missing arguments; 2: missed calls; 3: the rest."""
    if (kind in ("forbidden_call", "claimed_not_done", "said_not_sent") or (kind == "behaviour" and category in CRITICAL_BEHAVIOUR)
            or (kind == "extra_call" and category == "write")):
        return 0
    return {"wrong_argument": 1, "missing_argument": 1, "missed_call": 2}.get(kind, 3)


def by_severity(clusters: pd.DataFrame) -> pd.DataFrame:
    """The clusters most severe first; within a severity in their given order (the larger first)."""
    ranks = [severity_rank(kind, category) for kind, category in zip(clusters["kind"], clusters["category"])]
    return clusters.iloc[sorted(range(len(clusters)), key=lambda i: ranks[i])]


def choose_conversations(clusters: pd.DataFrame, available: set[str]) -> list[str]:
    """The example conversations to show, at most MAX_CONVERSATIONS: first one for every cluster not
    yet covered, in the clusters' order, then their other examples. Only `available` ones count."""
    examples = [[example for example in cluster if example in available] for cluster in clusters["examples"]]
    ids: list[str] = []
    for found in examples:
        if found and not set(found) & set(ids):
            ids.append(found[0])
    for found in examples:
        ids += [example for example in found if example not in ids]
    return ids[:MAX_CONVERSATIONS]


def build_prompt(clusters: pd.DataFrame, failures: pd.DataFrame,
                 conversations: dict[tuple[str, int], dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    """The chat messages for the model, and the conversation ids it is shown (the only ones it may cite).
    The clusters and excerpts are chosen most severe first, so a rare unsafe action is not crowded out."""
    clusters = by_severity(clusters).head(MAX_CLUSTERS)
    parts = ["FAILURE CLUSTERS (count, conversations affected, signature, example conversations)"]
    for cluster in clusters.itertuples(index=False):
        signature = " ".join(f"{name}={value}" for name in ("kind", "function", "argument", "category")
                             if (value := getattr(cluster, name)))
        parts.append(f"- {cluster.count}x in {cluster.conversations} conversations: {signature}; "
                     f"examples {', '.join(cluster.examples)}")
    shown = choose_conversations(clusters, {f"{case_id}#{trial}" for case_id, trial in conversations})
    for conversation_id in shown:
        case_id, trial = conversation_id.rsplit("#", 1)
        conversation = conversations[(case_id, int(trial))]
        mine = failures[(failures["case_id"] == case_id) & (failures["trial"] == int(trial))]
        found = "; ".join(" ".join(str(value) for value in (row.kind, row.function, row.argument, row.category)
                                   if value) for row in mine.itertuples(index=False))
        parts += ["", f"CONVERSATION {conversation_id} (scenario {conversation.get('scenario_name')}); "
                      f"failures: {found}", *excerpt(conversation)]
    return [{"role": "system", "content": PROMPT}, {"role": "user", "content": "\n".join(parts)}], shown


def parse_root_causes(text: str, known: list[str]) -> list[dict[str, Any]]:
    """The validated causes from a reply; ValueError naming the problem when the reply is unusable."""
    try:
        causes = RootCauses.model_validate(parse_json_object(text)).root_causes
    except ValidationError as exc:
        raise ValueError(f"reply does not match the schema: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") \
            from None
    unknown = sorted({cited for cause in causes for cited in cause.conversations} - set(known))
    if unknown:
        raise ValueError(f"reply cites conversations it was not shown: {', '.join(unknown)}")
    return [cause.model_dump() for cause in causes]


async def root_causes(clusters: pd.DataFrame, results: dict[str, Any],
                      conversations: dict[tuple[str, int], dict[str, Any]], client: LLMClient,
                      usage: tuple[Usage, ...] = ()) -> list[dict[str, Any]]:
    """Deduplicated root causes of the clustered failures (`analyse.failure_clusters`); [] without a
    call when there are none. Usage is counted on `client.usage` and on each of `usage`."""
    if clusters.empty:
        return []
    messages, shown = build_prompt(clusters, failure_signatures(results), conversations)
    try:
        return await client.ask_json(messages, lambda text: parse_root_causes(text, shown), usage=usage)
    except LLMError as exc:   # the endpoint gave up, or its reply stayed unusable
        raise LLMError(f"root causes: {exc}") from None


def write_root_causes(path: str | Path, causes: list[dict[str, Any]], status: str = "run") -> Path:
    """`root_causes.json` next to the results, written whole or not at all: the causes and how the analysis
    ended ("run", or "error: ..." with no causes), so that the report can say why there are none."""
    return write_json(path, {"schema_version": 1, "status": status, "root_causes": causes})


async def run_root_causes(clusters: pd.DataFrame, results: dict[str, Any],
                          conversations: dict[tuple[str, int], dict[str, Any]], out: str | Path,
                          client: LLMClient | None) -> dict[str, Any]:
    """What the notebook shows and glues: {"status", "path", "causes", "usage"} (usage: this step's).

    status: "run" (causes written to `out`), "not run: no model configured" (`client` None: nothing
    written), the judges' status when they were switched off (`--judges none` sends nothing to the judge model,
    whose role this is; nothing written), or "error: ..." when the endpoint gave up or its reply stayed unusable
    (written to `out` with no causes: the report names the error).
    """
    from lobeval.evaluation.evaluate import JUDGES_OFF

    if client is None:
        return {"status": "not run: no model configured", "path": None, "causes": [], "usage": None}
    if (results.get("judges") or {}).get("status") == JUDGES_OFF:
        return {"status": JUDGES_OFF, "path": None, "causes": [], "usage": None}
    usage = Usage()
    try:
        causes = await root_causes(clusters, results, conversations, client, usage=(usage,))
    except LLMError as exc:
        status = f"error: {exc}"
        return {"status": status, "path": str(write_root_causes(out, [], status)), "causes": [],
                "usage": usage.to_dict()}
    return {"status": "run", "path": str(write_root_causes(out, causes)), "causes": causes, "usage": usage.to_dict()}
