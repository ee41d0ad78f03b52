"""The resolver: which parts a stage gets from the environment and its options."""
import pytest

from lobeval.core.errors import ConfigError
from lobeval.evaluation.evaluate import JUDGES_OFF, NO_JUDGE_MODEL
from lobeval.workflow.roles import check, resolve
from lobeval.models.testing import FakeOpenAI
from lobeval.simulation.users import ScriptedUser

from helpers import SAMPLE_SUITE

MODEL_VARS = ["LOBEVAL_MODEL", "LOBEVAL_USER_MODEL", "LOBEVAL_TARGET_MODEL", "LOBEVAL_JUDGE_MODEL",
              "LOBEVAL_EMBEDDING_MODEL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "LOBEVAL_BUDGET_USD"]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    for name in MODEL_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("LOBEVAL_CACHE_DIR", str(tmp_path))


def test_offline_every_model_part_is_off_and_says_why():
    parts = resolve("user", "completion_judge", "judges", "embedder", "root_cause_model")
    assert isinstance(parts.user, ScriptedUser)
    assert (parts.completion_judge, parts.embedder, parts.root_cause_model, parts.target) == (None, None, None, None)
    assert parts.judges == NO_JUDGE_MODEL
    assert resolve("judges", judges=["none"]).judges == JUDGES_OFF


@pytest.mark.parametrize("options, message", [
    ({"user": "llm"}, "--user llm needs a model: set LOBEVAL_USER_MODEL or LOBEVAL_MODEL"),
    ({"user": "robot"}, "unknown user simulator 'robot'; choose one of scripted, llm"),
])
def test_a_user_that_cannot_be_built_is_a_config_error(options, message):
    with pytest.raises(ConfigError, match=message):
        resolve("user", **options)


def test_judges_asked_for_by_name_need_a_model():
    with pytest.raises(ConfigError, match="--judges goal needs a judge model"):
        resolve("judges", judges=["goal"])


def test_unknown_parts_are_named():
    with pytest.raises(ConfigError, match="unknown part.s. wizard; choose from target, user"):
        resolve("wizard")


def test_with_models_every_part_is_built_on_its_role(monkeypatch):
    from lobeval.judges.judges import CompletionJudge, ConversationJudges
    from lobeval.simulation.users import LLMUser

    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LOBEVAL_MODEL", "gpt-4o-mini")
        monkeypatch.setenv("LOBEVAL_EMBEDDING_MODEL", "text-embedding-3-small")
        parts = resolve("target", "user", "completion_judge", "judges", "embedder", "root_cause_model",
                        user="llm", judges=["goal", "per_turn", "tool_call_accuracy"], suite=SAMPLE_SUITE)
    assert parts.target.name == "lobeval.samples.support_tickets:SupportTicketBot"
    assert isinstance(parts.user, LLMUser) and isinstance(parts.completion_judge, CompletionJudge)
    assert isinstance(parts.judges, ConversationJudges)
    assert parts.judges.selection == ["per_turn", "goal", "tool_call_accuracy"]
    assert len(parts.judges._azure.tool_definitions) == 14   # the suite's tools, for the Azure evaluators
    assert (parts.embedder.role, parts.embedder.config.model) == ("embedding", "text-embedding-3-small")
    assert parts.root_cause_model.role == "judge"


@pytest.mark.parametrize("options, message", [
    ({"user": "llm"}, "--user llm needs a model: set LOBEVAL_USER_MODEL or LOBEVAL_MODEL"),
    ({"user": "robot"}, "unknown user simulator 'robot'; choose one of scripted, llm"),
    ({"judges": ["goal"]}, "--judges goal needs a judge model"),
    ({"judges": ["all"]}, "--judges all needs a judge model"),
    ({"judges": ["gaol"]}, r"unknown judge\(s\) gaol"),
])
def test_the_check_refuses_what_building_the_parts_would(options, message):
    with pytest.raises(ConfigError, match=message):
        check(**options)
    with pytest.raises(ConfigError, match=message):
        resolve("user", "judges", **options)


def test_the_check_passes_offline_options_that_need_no_model():
    check()
    check(judges=["none"])


@pytest.mark.parametrize("variables, message", [
    ({"LOBEVAL_BUDGET_USD": "lots"}, "LOBEVAL_BUDGET_USD='lots' is not an amount of US dollars"),
    ({"LOBEVAL_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": ""}, "a model is named for role 'user'"),
    ({"LOBEVAL_TOOLS": "json"}, "^LOBEVAL_TOOLS='json': expected native or prompted$"),
])
def test_the_check_refuses_a_bad_environment(monkeypatch, variables, message):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        check(user="llm")


def test_the_check_builds_no_model_client(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a client was built")

    monkeypatch.setenv("LOBEVAL_MODEL", "gpt-4o-mini")
    monkeypatch.setattr("lobeval.workflow.roles.model_client", refuse)
    check(user="llm", judges=["goal"])
