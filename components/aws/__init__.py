"""AWS building blocks of the ``platform: aws`` target: network, node groups, EFS model store, add-ons.

``components.platform_aws.AwsPlatform`` composes them into a :class:`components.cluster.ClusterTarget`.
"""
