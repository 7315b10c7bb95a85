"""The API server's own validation of a Job, beyond the OpenAPI schema (which ``tests/mock/test_k8s_schema.py`` checks):
the rules of ``validateJobSpec`` / ``validatePodFailurePolicy`` in kubernetes ``pkg/apis/batch/validation/
validation.go`` (https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/apis/batch/validation/validation.go),
over every Job every stack registers, shipped and stress variant. A schema and a mock accept an unordered list of
exit codes; the real API server answered ``spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value:
[143,69]: must be ordered`` and ``pulumi up`` failed at the training job."""

from typing import Any, Iterator

import pytest

from tests.harness import Program, Registration, stack_names
from tests.variants import HELD_OUT, held_out_program, stress_program

STACKS = stack_names()
#: The limits and value sets of the same file (maxPodFailurePolicyRules, maxPodFailurePolicyOnExitCodesValues,
#: maxPodFailurePolicyOnPodConditionsPatterns, supportedPodFailurePolicy*).
MAX_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_CONDITION_PATTERNS = 20
ACTIONS = {"Count", "FailIndex", "FailJob", "Ignore"}
OPERATORS = {"In", "NotIn"}
CONDITION_STATUSES = {"True", "False", "Unknown"}


def _exit_code_problems(where: str, on: dict[str, Any], containers: set[str]) -> Iterator[str]:
    if on.get("operator") not in OPERATORS:
        yield f"{where}.operator: {on.get('operator')!r} is not one of {sorted(OPERATORS)}"
    name = on.get("containerName")
    if name is not None and name not in containers:
        yield f"{where}.containerName: {name!r} must be one of the container or initContainer names in the pod template"
    values = list(on.get("values") or [])
    if not values:
        yield f"{where}.values: at least one value is required"
    if len(values) > MAX_EXIT_CODE_VALUES:
        yield f"{where}.values: more than {MAX_EXIT_CODE_VALUES} values"
    if on.get("operator") == "In" and 0 in values:
        yield f"{where}.values: must not be 0 for the In operator"
    if len(set(values)) != len(values):
        yield f"{where}.values: {values} has a duplicate"
    if values != sorted(values):
        yield f"{where}.values: Invalid value: {values}: must be ordered"


def job_problems(r: Registration) -> Iterator[str]:
    """What the API server's Job validation refuses in ``r`` (a registered ``batch/v1`` Job)."""
    where = f"Job {r.name}: spec"
    spec = r.inputs.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    policy = spec.get("podFailurePolicy")
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        yield f"{where}.template.spec.restartPolicy: {pod.get('restartPolicy')!r}: valid values: OnFailure, Never"
    if spec.get("backoffLimitPerIndex") is not None and spec.get("completionMode") != "Indexed":
        yield f"{where}.backoffLimitPerIndex: requires indexed completion mode"
    if policy is None:
        return
    if pod.get("restartPolicy") != "Never":
        yield f"{where}.template.spec.restartPolicy: only 'Never' is supported when podFailurePolicy is specified"
    if spec.get("podReplacementPolicy") not in (None, "Failed"):
        yield f"{where}.podReplacementPolicy: only 'Failed' is supported when podFailurePolicy is specified"
    containers = {c["name"] for c in [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]}
    rules = policy.get("rules") or []
    if len(rules) > MAX_RULES:
        yield f"{where}.podFailurePolicy.rules: more than {MAX_RULES} rules"
    for i, rule in enumerate(rules):
        at = f"{where}.podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if action not in ACTIONS:
            yield f"{at}.action: {action!r} is not one of {sorted(ACTIONS)}"
        if action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            yield f"{at}.action: FailIndex requires the backoffLimitPerIndex to be set"
        on_codes, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if (on_codes is None) == (not on_conditions):
            yield f"{at}: specify exactly one of onExitCodes and onPodConditions"
        if on_codes is not None:
            yield from _exit_code_problems(f"{at}.onExitCodes", on_codes, containers)
        if len(on_conditions) > MAX_CONDITION_PATTERNS:
            yield f"{at}.onPodConditions: more than {MAX_CONDITION_PATTERNS} patterns"
        for j, pattern in enumerate(on_conditions):
            if pattern.get("status") not in CONDITION_STATUSES:
                yield (
                    f"{at}.onPodConditions[{j}].status: {pattern.get('status')!r} is not one of "
                    f"{sorted(CONDITION_STATUSES)}"
                )


def problems(program: Program) -> list[str]:
    return [p for r in program.of_type("kubernetes:batch/v1:Job") for p in job_problems(r)]


@pytest.mark.parametrize("variant", ["shipped", "stress"])
@pytest.mark.parametrize("stack", STACKS)
def test_every_job_passes_the_api_servers_job_validation(program_for: Any, stack: str, variant: str) -> None:
    program = program_for(stack, False) if variant == "shipped" else stress_program(stack)
    jobs = program.of_type("kubernetes:batch/v1:Job")
    assert jobs or program.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob"), f"{stack} registers no job"
    found = problems(program)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("stack", sorted(HELD_OUT))
def test_every_job_of_a_held_out_stack_passes_the_api_servers_job_validation(stack: str) -> None:
    """The same over the held-out stacks (tests/variants.py): configurations no preset resembles."""
    program = held_out_program(stack)
    assert program.of_type("kubernetes:batch/v1:Job"), f"{stack} registers no Job"
    found = problems(program)
    assert not found, "\n".join(found)


def test_the_job_check_refuses_what_the_api_server_refused() -> None:
    """Control: the training Job as it was registered before the fix (exit codes 143 then 69) is refused, with the
    API server's words; so are the other rules' cases."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "worker"}], "initContainers": [{"name": "wait-for-jobs"}]}

    def job(rules: list[dict[str, Any]], **spec: Any) -> Registration:
        inputs = {"spec": {"template": {"spec": dict(pod)}, "podFailurePolicy": {"rules": rules}, **spec}}
        return Registration(
            "kubernetes:batch/v1:Job", "train", "urn:train", "", True, False, "", [], {}, inputs, None, ""
        )

    def codes(values: list[int], operator: str = "In", container: str = "worker") -> dict[str, Any]:
        return {"action": "Ignore", "onExitCodes": {"containerName": container, "operator": operator, "values": values}}

    assert list(job_problems(job([codes([143, 69])]))) == [
        "Job train: spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [143, 69]: must be ordered"
    ]
    assert list(job_problems(job([codes([69, 143])]))) == []
    for bad in (
        [codes([0, 3])],
        [codes([3, 3])],
        [codes([2], container="main")],
        [codes([], operator="In")],
        [{"action": "Ignore"}],
        [{"action": "Restart", "onPodConditions": [{"type": "X", "status": "True"}]}],
        [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}],
    ):
        assert list(job_problems(job(bad))), bad
    assert list(job_problems(job([codes([1])], podReplacementPolicy="TerminatingOrFailed")))
