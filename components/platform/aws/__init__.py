"""AWS building blocks of the ``platform: aws`` target: network, node groups, EFS model store, add-ons.

``components.platform.aws.platform.AwsPlatform`` composes them into a
:class:`components.common.target.ClusterTarget`.
"""
