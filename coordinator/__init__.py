"""Coordination: the Coordinator interface, the embedded LocalCoordinator and EtcdCoordinator."""
