"""The VPC the cluster lives in: a new one (public + private subnets, one NAT) or existing subnets."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.platform.aws.decisions import subnet_cidrs


def nth(values: pulumi.Input[list[str]], index: int) -> pulumi.Output[str]:
    """Element ``index`` of a list that is only known after deployment (zone names, subnet ids)."""
    return pulumi.Output.from_input(values).apply(lambda items: items[index])


@dataclass(frozen=True)
class NewVpc:
    """Create a VPC: private subnets for nodes and pods, public subnets for load balancers and the NAT gateway."""

    cidr: str = "10.0.0.0/16"
    az_count: int = 2
    """Availability zones used (2-4); EKS needs at least 2. The first ``az_count`` zones of the region are used."""


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
    """The VPC's primary CIDR block (NFS to the model store is allowed from it)."""
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
            state="available", opts=pulumi.InvokeOutputOptions(provider=provider, parent=self)
        )
        cluster_tag = {f"kubernetes.io/cluster/{cluster_name}": "shared"}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.cidr,
            enable_dns_hostnames=True,  # EFS mount targets and EKS private endpoints resolve by DNS
            enable_dns_support=True,
            tags={"Name": f"{name}-vpc"},
            opts=child,
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
        # One NAT gateway (cost over zone redundancy): nodes pull images and Hugging Face weights through it.
        # It depends on the internet gateway so that destroy removes the NAT (and its public IP) first.
        eip = aws.ec2.Eip(
            f"{name}-nat-ip",
            domain="vpc",
            tags={"Name": f"{name}-nat"},
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[igw]),
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=eip.id,
            subnet_id=public_subnets[0].id,
            tags={"Name": f"{name}-nat"},
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[igw]),
        )
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags={"Name": f"{name}-private"},
            opts=vpc_opts,
        )
        for i, subnet in enumerate(private_subnets):
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{i}-rta", subnet_id=subnet.id, route_table_id=private_rt.id, opts=vpc_opts
            )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets]).apply(list)
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets]).apply(list)
        self.private_subnet_count = len(private_subnets)
