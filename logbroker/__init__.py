"""The broker node: config, replica manager, produce/fetch, groups, queues, client and CLI."""
