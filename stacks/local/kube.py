"""What Kubernetes does to a container spec before the process starts, for running a pod's command on this
machine (the local runner, and the tests that run pods for real): ``$(VAR)`` expansion in ``env`` values, ``command``
and ``args``, and the downward API values of an Indexed Job's pod
(https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/)."""

from typing import Any, Mapping, Optional

from components.workloads.spec import expand_variables

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` -> its value when defined (else left as is); ``$$`` -> ``$``."""
    return expand_variables(text, env.get)


def container_env(container: Mapping[str, Any], *, index: Optional[int] = None) -> dict[str, str]:
    """The environment the container's process gets: entries in order, each expanded against the ones before
    it; ``fieldRef`` to the completion-index annotation resolved to ``index``."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = expand(str(entry["value"]), env)
            continue
        # the API's spelling (valueFrom.fieldRef.fieldPath) or the Pulumi SDK's (value_from.field_ref.field_path)
        source = entry.get("valueFrom") or entry.get("value_from") or {}
        ref = source.get("fieldRef") or source.get("field_ref") or {}
        field = ref.get("fieldPath") or ref.get("field_path") or ""
        if COMPLETION_INDEX_ANNOTATION in field:
            if index is None:
                raise ValueError("an Indexed Job pod needs its index")
            env[entry["name"]] = str(index)
        else:
            raise ValueError(f"unsupported env source {entry}")
    return env


def process_argv(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """``command`` + ``args`` with ``$(VAR)`` expanded, as the kubelet starts the process."""
    return [expand(str(x), env) for x in [*(container.get("command") or []), *(container.get("args") or [])]]
