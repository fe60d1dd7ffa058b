"""Usage records for analytics and billing: what each user moved, asked and stored, per topic and hour.

``Meter`` is the one place where a user's bytes are charged to their quota and counted for usage
(so the two always agree); ``UsageLedger`` keeps this node's counts by hour; ``UsageRecorder``
writes them to the coordinator periodically and samples storage; ``report`` merges every node's
records into the rows ``GET /v1/usage`` answers (decision 0298).
"""
