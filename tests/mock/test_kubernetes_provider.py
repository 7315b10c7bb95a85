"""A component whose Kubernetes objects would go through pulumi-kubernetes' default provider (the cluster the
kubeconfig's current context names) says so: the components guide's example under mocks, as written and with a
provider left out."""

from tests.harness import guide_example, run_program, stack_config, stack_names

WARNING = "no Kubernetes provider in its options"
GIVEN = 'DevicePlugin("nvidia", {"kind": "nvidia"}, opts=pulumi.ResourceOptions(provider=provider))'


def _guide(tmp_path, text: str) -> list[str]:
    main = tmp_path / "__main__.py"
    main.write_text(text.replace("eks_training.", ""))
    return run_program("dev", config={"aws:region": "us-west-2"}, main=main).warnings


def test_a_component_given_no_kubernetes_provider_is_named(tmp_path) -> None:
    example = guide_example()
    assert GIVEN in example
    assert not [w for w in _guide(tmp_path, example) if WARNING in w]
    left_out = _guide(tmp_path, example.replace(GIVEN, 'DevicePlugin("nvidia", {"kind": "nvidia"})'))
    (warning,) = [w for w in left_out if WARNING in w]
    assert warning.startswith("nvidia: ") and "pulumi:disable-default-providers" in warning


def test_the_program_gives_every_component_its_provider() -> None:
    assert {s: w for s in stack_names() for w in run_program(s).warnings if WARNING in w} == {}


def test_a_refresh_that_cannot_reach_the_cluster_keeps_every_object_in_the_state() -> None:
    """pulumi-kubernetes with ``deleteUnreachable`` drops every object it made from the state when it cannot read the
    API server's discovery (``Configure`` then ``Read`` in
    https://github.com/pulumi/pulumi-kubernetes/blob/94977969d64112b04e19945818a7d5d5f38f631d/provider/pkg/provider/provider.go):
    a `pulumi refresh` with expired credentials, another profile or a closed endpoint would then forget the jobs and
    the Helm releases, and the next `pulumi up` fail on names still in use. No stack's provider sets it; a destroy
    after the cluster is gone sets ``PULUMI_K8S_DELETE_UNREACHABLE`` itself (troubleshooting)."""
    providers = {s: run_program(s).one("pulumi:providers:kubernetes").inputs for s in stack_names()}
    assert {s: i["deleteUnreachable"] for s, i in providers.items() if "deleteUnreachable" in i} == {}
    assert all(i.get("enableServerSideApply") in (True, "true") for i in providers.values()), providers


def test_the_variable_that_would_drop_every_object_is_named_when_set(monkeypatch) -> None:
    """pulumi-kubernetes' SDK copies ``PULUMI_K8S_DELETE_UNREACHABLE`` into a provider that does not set it: the
    program says so, naming what to do; without it, nothing is said (the run drops the shell's PULUMI_K8S_*)."""
    from stacks.config import NAMESPACE

    config = {**stack_config("dev"), f"{NAMESPACE}:preflight": {"enabled": False}}
    quiet = run_program("dev", config=config)
    assert not [w for w in quiet.warnings if "PULUMI_K8S_DELETE_UNREACHABLE" in w]
    monkeypatch.setenv("PULUMI_K8S_DELETE_UNREACHABLE", "true")
    program = run_program("dev", config=config)
    assert program.one("pulumi:providers:kubernetes").inputs.get("deleteUnreachable") in (True, "true")
    (warning,) = [w for w in program.warnings if "PULUMI_K8S_DELETE_UNREACHABLE is set" in w]
    assert "Unset it and run `pulumi up` again" in warning
