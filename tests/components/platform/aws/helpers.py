"""Shared helpers for the AWS tests: build components under the mock engine and look at what they registered."""

from __future__ import annotations

from typing import Any

from components.platform.aws.platform import AwsPlatform, AwsPlatformArgs
from components.platform.image import TritonImage, TritonImageArgs
from tritonft.synth.engine import RecordingMocks, Registered, run_program

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[4]


def build_platform(environment: str = "dev", **overrides: Any) -> dict[str, Any]:
    """Run AwsPlatform (name ``tft``) to quiescence; returns ``{"platform": AwsPlatform}``."""
    built: dict[str, Any] = {}

    def program() -> Any:
        platform = AwsPlatform("tft", AwsPlatformArgs(region="us-west-2", environment=environment, **overrides))
        built["platform"] = platform
        return platform.namespace

    run_program(program)
    return built


def build_platform_and_images(environment: str = "dev", **image_overrides: Any) -> dict[str, Any]:
    built: dict[str, Any] = {}

    def program() -> Any:
        platform = AwsPlatform("tft", AwsPlatformArgs(region="us-west-2", environment=environment))
        images = TritonImage(
            "img",
            TritonImageArgs(environment=environment, aws_provider=platform.aws_provider, **image_overrides),
        )
        built["platform"], built["images"] = platform, images

        def keep(refs: list[str]) -> list[str]:
            built["server_image"], built["tools_image"] = refs
            return refs

        return __import__("pulumi").Output.all(images.server_image, images.tools_image).apply(keep)

    run_program(program)
    return built


def provider_ref(mocks: RecordingMocks, typ: str) -> str:
    """The reference (``urn::id``) custom resources carry for the single provider of type ``typ``."""
    (provider,) = mocks.of_type(typ)
    return f"{provider.urn}::{provider.name}-id"


def aws_resources(mocks: RecordingMocks) -> list[Registered]:
    return [r for r in mocks.resources if r.custom and r.typ.startswith("aws:")]
