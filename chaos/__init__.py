"""A fault harness for a LogBroker cluster and the checker of what it recorded.

``python -m chaos --duration 10m`` (``make chaos``) starts etcd and three nodes (each in a network
namespace of its own when the machine allows it), runs producers, a consumer, a consumer group and a
queue against them while a nemesis kills, pauses and cuts off nodes and etcd, then reads every
replica's copy and checks the history (decision 0209). Modules: ``history`` (the recorded
operations), ``checker`` (pure checks and the summary), ``network`` (namespaces and cuts),
``cluster`` (the processes), ``nemesis`` (the faults), ``workload`` (the clients), ``run`` (one
run, start to end), ``plot`` (the figure).
"""
