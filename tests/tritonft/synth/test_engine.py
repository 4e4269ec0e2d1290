"""The mock engine harness itself: resources register, references resolve, outputs are faked per type."""

from __future__ import annotations

import pulumi

from tritonft.synth.engine import RecordingMocks, run_program


class _Box(pulumi.ComponentResource):
    def __init__(self, name: str) -> None:
        super().__init__("test:index:Box", name, {}, None)
        self.child = pulumi.CustomResource(
            "test:index:Thing", f"{name}-thing", {"size": 3}, pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({})


def test_components_and_children_are_recorded_with_their_inputs(mocks: RecordingMocks) -> None:
    run_program(lambda: _Box("b"))
    (thing,) = mocks.of_type("test:index:Thing")
    assert thing.name == "b-thing"
    assert thing.inputs == {"size": 3}
    assert [r.typ for r in mocks.resources] == ["test:index:Box", "test:index:Thing"]


def test_an_ecr_repository_reads_back_a_fake_repository_url(mocks: RecordingMocks) -> None:
    import pulumi_aws as aws

    seen: list[str] = []

    def build() -> pulumi.Output[str]:
        repo = aws.ecr.Repository("server")

        def remember(url: str) -> str:
            seen.append(url)
            return url

        return repo.repository_url.apply(remember)

    run_program(build)
    assert seen == ["123456789012.dkr.ecr.us-east-1.amazonaws.com/server"]


class _Guarded(pulumi.ComponentResource):
    def __init__(self, name: str) -> None:
        super().__init__("test:index:Guarded", name, {}, None)
        first = pulumi.CustomResource("test:index:Thing", f"{name}-first", {}, pulumi.ResourceOptions(parent=self))
        pulumi.CustomResource(
            "test:index:Thing",
            f"{name}-second",
            {},
            pulumi.ResourceOptions(parent=self, protect=True, depends_on=[first], retain_on_delete=True),
        )
        self.register_outputs({})


def test_resource_options_parent_protect_and_depends_on_are_recorded(mocks: RecordingMocks) -> None:
    run_program(lambda: _Guarded("g"))
    component, first, second = mocks.resources
    assert first.parent == component.urn
    assert second.protect and second.retain_on_delete
    assert second.depends_on == (first.urn,)
    assert not first.protect
    assert second.urn.endswith("test:index:Guarded$test:index:Thing::g-second")
