"""The new VPC under the mock engine: which zones, how egress leaves (NAT per zone or one), what skips NAT."""

from __future__ import annotations

from components.platform.aws.network import NewVpc
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

NAT = "aws:ec2/natGateway:NatGateway"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"


def _route_table_of(mocks: RecordingMocks, subnet: str) -> str:
    (association,) = [a for a in mocks.of_type(ASSOCIATION) if a.inputs["subnetId"] == f"{subnet}-id"]
    return str(association.inputs["routeTableId"])


def test_only_standard_zones_are_listed_so_a_local_zone_opt_in_moves_no_subnet(mocks: RecordingMocks) -> None:
    build_platform()
    (call,) = [c for c in mocks.calls if c.token == "aws:index/getAvailabilityZones:getAvailabilityZones"]
    assert call.args["state"] == "available"
    assert call.args["filters"] == [
        {"name": "opt-in-status", "values": ["opt-in-not-required"]},
        {"name": "zone-type", "values": ["availability-zone"]},
    ]


def test_per_zone_nat_gives_each_private_subnet_its_own_zones_gateway(mocks: RecordingMocks) -> None:
    build_platform(vpc=NewVpc(az_count=3, nat="per-zone"))
    assert len(mocks.of_type(NAT)) == 3
    for i in range(3):
        nat = mocks.named(f"tft-net-nat-{i}")
        public = mocks.named(f"tft-net-public-{i}")
        assert nat.inputs["subnetId"] == f"{public.name}-id"
        table = mocks.named(f"tft-net-private-rt-{i}")
        assert table.inputs["routes"] == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": f"{nat.name}-id"}]
        assert _route_table_of(mocks, f"tft-net-private-{i}") == f"{table.name}-id"
        # each private subnet shares its zone with the public subnet its NAT lives in
        assert mocks.named(f"tft-net-private-{i}").inputs["availabilityZone"] == public.inputs["availabilityZone"]


def test_single_nat_routes_every_private_subnet_through_one_gateway(mocks: RecordingMocks) -> None:
    build_platform(vpc=NewVpc(az_count=3, nat="single"))
    (nat,) = mocks.of_type(NAT)
    tables = {_route_table_of(mocks, f"tft-net-private-{i}") for i in range(3)}
    assert tables == {"tft-net-private-rt-id"}
    assert mocks.named("tft-net-private-rt").inputs["routes"][0]["natGatewayId"] == f"{nat.name}-id"


def test_image_pulls_skip_nat_through_s3_and_ecr_endpoints(mocks: RecordingMocks) -> None:
    build_platform(vpc=NewVpc(az_count=2, nat="per-zone"))
    endpoints = {e.inputs["serviceName"]: e for e in mocks.of_type(ENDPOINT)}
    assert set(endpoints) == {
        "com.amazonaws.us-east-1.s3",
        "com.amazonaws.us-east-1.ecr.api",
        "com.amazonaws.us-east-1.ecr.dkr",
    }
    s3 = endpoints["com.amazonaws.us-east-1.s3"]
    assert s3.inputs["vpcEndpointType"] == "Gateway"  # no hourly or per-GB charge
    assert sorted(s3.inputs["routeTableIds"]) == ["tft-net-private-rt-0-id", "tft-net-private-rt-1-id"]
    private = sorted(f"tft-net-private-{i}-id" for i in range(2))
    for service in ("ecr.api", "ecr.dkr"):
        ecr = endpoints[f"com.amazonaws.us-east-1.{service}"]
        assert ecr.inputs["vpcEndpointType"] == "Interface"
        assert ecr.inputs["privateDnsEnabled"] is True  # the registry's own names resolve to the endpoint
        assert sorted(ecr.inputs["subnetIds"]) == private
    (rule,) = mocks.named("tft-net-endpoints").inputs["ingress"]
    assert (rule["fromPort"], rule["toPort"], rule["cidrBlocks"]) == (443, 443, ["10.0.0.0/16"])


def test_endpoints_can_be_left_out(mocks: RecordingMocks) -> None:
    build_platform(vpc=NewVpc(endpoints=False))
    assert mocks.of_type(ENDPOINT) == []
