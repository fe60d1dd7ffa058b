"""The deterministic simulation harness (``python -m sim``): the broker's own code on a virtual-time
event loop (``loop``), an in-memory network (``network``), etcd (``etcd``) and disk (``disk``), the
process clocks and ids made the run's (``world``), whole nodes on them (``cluster``); every choice
drawn from one seeded random generator, so a failing schedule replays exactly from its seed
(``run``, ``trace``). Nothing of the broker imports it (docs/design/simulation.md).
"""
