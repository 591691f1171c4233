"""Kafka's ACLs, sans-IO: the model (``model``) and the authorizer's decision
(``authorizer``). The store keeps the bindings as ACL records; the server asks the
authorizer per request (docs/SECURITY.md)."""

from offsetlog.acl.authorizer import Authorizer, parse_super_users
from offsetlog.acl.model import (
    ANONYMOUS,
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_error,
    concrete,
)

__all__ = ["ANONYMOUS", "CLUSTER_NAME", "AclBinding", "AclFilter", "Authorizer", "Operation",
           "PatternType", "Permission", "ResourceType", "binding_error", "concrete",
           "parse_super_users"]
