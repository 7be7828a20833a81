"""Kafka's ACL model and authorizer (issue 14, point 4): ``model`` holds the enums with Kafka's
wire codes and the ``Authorizer`` protocol handlers call through ``RequestContext.authorized``."""
