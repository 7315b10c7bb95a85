"""A job's environment as Kubernetes expands it: each ``$(NAME)`` in an env value refers only to variables defined
before it, so the program lists a variable after the ones its value names."""

import pytest

from components.workloads.pods import env_list
from components.workloads.spec import variable_references
from stacks.local.kube import container_env, expand


def test_a_value_that_names_another_variable_comes_after_it() -> None:
    """``CKPT_DIR`` sorts before ``OUTPUT_DIR`` but names it: listed after, the kubelet (the local runner's stand-in)
    expands it; names in a cycle come last (one of the two stays as written, as on a cluster)."""
    env = {"OUTPUT_DIR": "/out", "CKPT_DIR": "$(OUTPUT_DIR)/ckpt", "B": "$(C)", "C": "$(B)", "Z": "z"}
    listed = env_list(env, with_index=True)
    assert [e["name"] for e in listed] == ["JOB_INDEX", "OUTPUT_DIR", "CKPT_DIR", "Z", "B", "C"]
    assert container_env({"env": listed}, index=0)["CKPT_DIR"] == "/out/ckpt"


def test_without_references_the_order_is_by_name() -> None:
    env = {"b": "2", "a": "1", "c": "$$(a)"}
    assert [e["name"] for e in env_list(env)] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "text, names, expanded",
    [
        ("$(A)", ["A"], "<A>"),
        ("$$(A)", [], "$(A)"),
        ("$$$(A)", ["A"], "$<A>"),
        ("x$(A)y$(B_c)", ["A", "B_c"], "x<A>y<B_c>"),
        ("$(A", [], "$(A"),
        ("$A $", [], "$A $"),
        ("$(B-c) $(D $(E)", ["B-c", "D $(E"], "<B-c> <D $(E>"),
    ],
)
def test_the_references_are_those_kubernetes_expands(text: str, names: list[str], expanded: str) -> None:
    """As kubernetes expand.go reads them: ``$$`` escapes, a name runs to the first ``)``, a lone ``$`` stays; the local
    runner expands them the same way."""
    assert variable_references(text) == names
    assert expand(text, {n: f"<{n}>" for n in names}) == expanded


def test_a_name_the_pod_does_not_have_stays_as_written() -> None:
    assert expand("$(OUTPTU_DIR) $$(A) $$", {"OUTPUT_DIR": "/o"}) == "$(OUTPTU_DIR) $(A) $"
