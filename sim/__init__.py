"""The deterministic simulation harness (``python -m sim``): the broker's own code on a virtual-time
event loop, an in-memory network and an in-memory etcd, every choice drawn from one seeded random
generator, so a failing schedule replays exactly from its seed. Nothing of the broker imports it."""
