"""Authentication (passwords, JWTs), authorization (ownership, ACLs) and quotas of the node."""
