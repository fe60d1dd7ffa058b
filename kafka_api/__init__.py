"""Kafka wire-protocol listener: record batch codec and request handling."""
