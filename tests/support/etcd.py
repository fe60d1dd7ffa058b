"""A real etcd for tests: ``logbroker.etcd_process`` (shared with the benchmarks), under the names
the tests import."""

from __future__ import annotations

from logbroker.etcd_process import EtcdServer, etcd_binary, free_port, running_etcd

__all__ = ["EtcdServer", "etcd_binary", "free_port", "running_etcd"]
