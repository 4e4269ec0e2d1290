"""The VPC the cluster lives in: a new one (public + private subnets, NAT, VPC endpoints) or existing subnets.

Egress, chosen for cost and for a zone's loss (``docs/aws.md`` has the figures):

* image layers from ECR come from S3: a free S3 *gateway* endpoint keeps every node's ~20 GiB server image pull off
  the NAT gateway's $0.045/GB processing charge; ECR's ``api`` and ``dkr`` *interface* endpoints (about $7.30 a
  month per zone each) keep the registry calls in the VPC too, so a node pulls from ECR with no NAT at all;
* what must reach the internet (Hugging Face downloads, public images) goes through NAT: one gateway per zone in
  prod (``natGateways: per-zone``; a zone's loss stops no other zone's egress), one elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.platform.aws.decisions import nat_gateway_count, subnet_cidrs, zone_filters

INTERFACE_ENDPOINTS = ("ecr.api", "ecr.dkr")
"""AWS services reached through interface endpoints in the private subnets (S3 has a gateway endpoint)."""


def nth(values: pulumi.Input[list[str]], index: int) -> pulumi.Output[str]:
    """Element ``index`` of a list that is only known after deployment (zone names, subnet ids)."""
    return pulumi.Output.from_input(values).apply(lambda items: items[index])


@dataclass(frozen=True)
class NewVpc:
    """Create a VPC: private subnets for nodes and pods, public subnets for load balancers and the NAT gateway."""

    cidr: str = "10.0.0.0/16"
    az_count: int = 2
    """Availability zones used (2-4); EKS needs at least 2. The first ``az_count`` standard zones of the region
    are used (Local and Wavelength Zones never count, so opting into one does not move the subnets)."""
    nat: str = "single"
    """``single`` NAT gateway or one ``per-zone``."""
    endpoints: bool = True
    """S3 gateway + ECR api/dkr interface endpoints (image pulls bypass NAT)."""
    protect: bool = False
    """Protect the VPC against ``pulumi destroy`` (prod)."""


@dataclass(frozen=True)
class ExistingVpc:
    """Use subnets that already exist (their route tables, NAT and ELB role tags are yours to provide)."""

    vpc_id: str
    private_subnet_ids: tuple[str, ...]
    """Where nodes run and EFS mount targets go: exactly one subnet per availability zone."""
    public_subnet_ids: tuple[str, ...] = ()
    """Subnets tagged ``kubernetes.io/role/elb=1`` for internet-facing load balancers (empty = private cluster)."""


@dataclass(frozen=True)
class NetworkArgs:
    vpc: NewVpc | ExistingVpc
    cluster_name: str
    """Physical EKS cluster name, for the ``kubernetes.io/cluster/<name>`` subnet tags."""
    provider: aws.Provider


class Network(pulumi.ComponentResource):
    """A VPC with public/private subnets across zones, or a view of an existing one."""

    vpc_id: pulumi.Output[str]
    """The VPC id."""
    vpc_cidr: pulumi.Output[str]
    """The VPC's primary CIDR block (HTTPS to the interface endpoints is allowed from it)."""
    private_subnet_ids: pulumi.Output[list[str]]
    """Subnets for nodes, pods and EFS mount targets (one per zone)."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Subnets for internet-facing load balancers."""
    private_subnet_count: int
    """How many private subnets there are (known before deployment: one EFS mount target each)."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-ft:aws:Network", name, {}, opts)
        if isinstance(args.vpc, ExistingVpc):
            self._existing(args.vpc, args.provider)
        else:
            self._create(name, args.vpc, args.cluster_name, args.provider)
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
            }
        )

    def _existing(self, vpc: ExistingVpc, provider: aws.Provider) -> None:
        found = aws.ec2.get_vpc_output(id=vpc.vpc_id, opts=pulumi.InvokeOutputOptions(provider=provider, parent=self))
        self.vpc_id = pulumi.Output.from_input(vpc.vpc_id)
        self.vpc_cidr = found.cidr_block
        self.private_subnet_ids = pulumi.Output.from_input(list(vpc.private_subnet_ids))
        self.public_subnet_ids = pulumi.Output.from_input(list(vpc.public_subnet_ids))
        self.private_subnet_count = len(vpc.private_subnet_ids)

    def _create(self, name: str, spec: NewVpc, cluster_name: str, provider: aws.Provider) -> None:
        private_cidrs, public_cidrs = subnet_cidrs(spec.cidr, spec.az_count)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        zones = aws.get_availability_zones_output(
            state="available",
            filters=[aws.GetAvailabilityZonesFilterArgs(name=key, values=values) for key, values in zone_filters()],
            opts=pulumi.InvokeOutputOptions(provider=provider, parent=self),
        )
        cluster_tag = {f"kubernetes.io/cluster/{cluster_name}": "shared"}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.cidr,
            enable_dns_hostnames=True,  # EFS mount targets and EKS private endpoints resolve by DNS
            enable_dns_support=True,
            tags={"Name": f"{name}-vpc"},
            opts=pulumi.ResourceOptions(parent=self, provider=provider, protect=spec.protect),
        )
        # Everything is a direct child of this component: `depends_on=[network]` then waits for (and on destroy
        # outlives) each of them, NAT route included. Children of children would not be covered.
        vpc_opts = child
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": f"{name}-igw"}, opts=vpc_opts)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={"Name": f"{name}-public"},
            opts=vpc_opts,
        )
        public_subnets: list[aws.ec2.Subnet] = []
        private_subnets: list[aws.ec2.Subnet] = []
        for i, (private_cidr, public_cidr) in enumerate(zip(private_cidrs, public_cidrs, strict=True)):
            zone = nth(zones.names, i)
            public = aws.ec2.Subnet(
                f"{name}-public-{i}",
                vpc_id=vpc.id,
                cidr_block=public_cidr,
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={"Name": f"{name}-public-{i}", "kubernetes.io/role/elb": "1", **cluster_tag},
                opts=vpc_opts,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{i}-rta", subnet_id=public.id, route_table_id=public_rt.id, opts=vpc_opts
            )
            public_subnets.append(public)
            private_subnets.append(
                aws.ec2.Subnet(
                    f"{name}-private-{i}",
                    vpc_id=vpc.id,
                    cidr_block=private_cidr,
                    availability_zone=zone,
                    tags={"Name": f"{name}-private-{i}", "kubernetes.io/role/internal-elb": "1", **cluster_tag},
                    opts=vpc_opts,
                )
            )
        # NAT gateways (one, or one per zone): each depends on the internet gateway so that destroy removes the NAT
        # (and its public IP) first. Each private subnet routes through its own zone's NAT when there is one.
        nats: list[aws.ec2.NatGateway] = []
        for i in range(nat_gateway_count(spec.nat, len(public_subnets))):
            suffix = "" if spec.nat == "single" else f"-{i}"
            eip = aws.ec2.Eip(
                f"{name}-nat-ip{suffix}",
                domain="vpc",
                tags={"Name": f"{name}-nat{suffix}"},
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[igw]),
            )
            nats.append(
                aws.ec2.NatGateway(
                    f"{name}-nat{suffix}",
                    allocation_id=eip.id,
                    subnet_id=public_subnets[i].id,
                    tags={"Name": f"{name}-nat{suffix}"},
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[igw]),
                )
            )
        private_rts: list[aws.ec2.RouteTable] = []
        for i, nat in enumerate(nats):
            suffix = "" if spec.nat == "single" else f"-{i}"
            private_rts.append(
                aws.ec2.RouteTable(
                    f"{name}-private-rt{suffix}",
                    vpc_id=vpc.id,
                    routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                    tags={"Name": f"{name}-private{suffix}"},
                    opts=vpc_opts,
                )
            )
        for i, subnet in enumerate(private_subnets):
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{i}-rta",
                subnet_id=subnet.id,
                route_table_id=private_rts[i % len(private_rts)].id,
                opts=vpc_opts,
            )
        if spec.endpoints:
            self._endpoints(name, vpc, private_subnets, private_rts, provider)
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets]).apply(list)
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets]).apply(list)
        self.private_subnet_count = len(private_subnets)

    def _endpoints(
        self,
        name: str,
        vpc: aws.ec2.Vpc,
        private_subnets: list[aws.ec2.Subnet],
        private_rts: list[aws.ec2.RouteTable],
        provider: aws.Provider,
    ) -> None:
        """S3 gateway endpoint on the private route tables; ECR interface endpoints in the private subnets."""
        opts = pulumi.ResourceOptions(parent=self, provider=provider)
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(provider=provider, parent=self)).region
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=_service_name(region, "s3"),
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags={"Name": f"{name}-s3"},
            opts=opts,
        )
        sg = aws.ec2.SecurityGroup(
            f"{name}-endpoints",
            vpc_id=vpc.id,
            description="HTTPS from the VPC to its AWS service endpoints",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp", from_port=443, to_port=443, cidr_blocks=[vpc.cidr_block], description="HTTPS"
                )
            ],
            tags={"Name": f"{name}-endpoints"},
            opts=opts,
        )
        for service in INTERFACE_ENDPOINTS:
            aws.ec2.VpcEndpoint(
                f"{name}-{service.replace('.', '-')}",
                vpc_id=vpc.id,
                service_name=_service_name(region, service),
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[s.id for s in private_subnets],
                security_group_ids=[sg.id],
                tags={"Name": f"{name}-{service}"},
                opts=opts,
            )


def _service_name(region: pulumi.Output[str], service: str) -> pulumi.Output[str]:
    return region.apply(lambda r: f"com.amazonaws.{r}.{service}")
