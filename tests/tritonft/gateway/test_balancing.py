"""The gateway's client-side balancing over a Triton service's pods (pure parts and DNS)."""

from __future__ import annotations

import asyncio

import pytest

from tritonft.gateway.triton import Triton, dns_resolver, plan_targets, split_target


def test_dns_gives_every_address_of_the_name_with_the_urls_port() -> None:
    assert asyncio.run(dns_resolver("localhost:8001")()) in (["127.0.0.1:8001"], ["127.0.0.1:8001", "[::1]:8001"])


def test_a_new_address_is_opened_and_a_dropped_one_closed() -> None:
    assert plan_targets(["10.0.0.1:8001", "10.0.0.2:8001"], ["10.0.0.3:8001", "10.0.0.2:8001"]) == (
        ["10.0.0.2:8001", "10.0.0.3:8001"],
        ["10.0.0.3:8001"],
        ["10.0.0.1:8001"],
    )


def test_an_empty_dns_answer_keeps_the_pods_it_had() -> None:
    assert plan_targets(["10.0.0.1:8001"], []) == (["10.0.0.1:8001"], [], [])


@pytest.mark.parametrize("url", ["t5-small-pods.triton.svc", "t5:grpc", ":8001"])
def test_a_url_without_host_and_port_is_refused_naming_the_form(url: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        split_target(url)


def test_an_ipv6_target_keeps_its_brackets() -> None:
    assert split_target("[::1]:8001") == ("::1", 8001)


def test_calls_go_to_each_resolved_address_in_turn() -> None:
    async def resolve() -> list[str]:
        return ["127.0.0.1:1", "127.0.0.1:2"]

    async def picks() -> list[str]:
        triton = Triton("svc:8001", resolve=resolve)
        await triton.refresh()
        stubs = [triton._next_stub() for _ in range(4)]
        owners = {id(stub): target for target, (_, stub) in triton._channels.items()}
        await triton.close()
        return [owners[id(stub)] for stub in stubs]

    assert asyncio.run(picks()) == ["127.0.0.1:1", "127.0.0.1:2"] * 2
