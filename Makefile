# Every target does its own set-up; `make test` is quick when nothing is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
QUICK ?=

.PHONY: test docs lint bench bench-deps bench-node bench-guard run cluster chaos sim system-deps clean spark-example jvm
# The set-up steps install into one .venv: one at a time, in the order a target names them.
.NOTPARALLEL:

# Each target installs the extras it needs (decision 0279), one stamp per set: $(VENV)/.installed-A+B
# installs ".[A,B]" and marks each of A and B as installed too, so `make run` after `make test`
# installs nothing and `make test` after `make run` adds what the tests need.
comma := ,
BOOTSTRAP ?= scripts/bootstrap-venv.sh
SERVER := $(VENV)/.installed-server
SPARK := $(VENV)/.installed-spark
TESTING := $(VENV)/.installed-server+spark+test+docs
DOCS := $(VENV)/.installed-server+docs
BENCHING := $(VENV)/.installed-server+spark+bench
LINTING := $(VENV)/.installed-server+spark+bench+test+dev
CHAOS := $(VENV)/.installed-server+bench

$(VENV)/.installed-%: setup.cfg pyproject.toml $(BOOTSTRAP)
	VENV=$(VENV) $(BOOTSTRAP) $(subst +,$(comma),$*)
	for extra in $(subst +, ,$*); do touch $(VENV)/.installed-$$extra; done
	touch $@

system-deps:
	scripts/ensure-system-deps.sh

# The JVM segment reader (format "logbroker-segments"): compiled against pyspark's own jars,
# rebuilt when a source changes; a build product, not committed.
JVM_JAR := spark_connector/jvm/build/logbroker-spark-segments.jar
JVM_SOURCES := $(shell find spark_connector/jvm/src -type f 2>/dev/null)

$(JVM_JAR): $(SPARK) $(JVM_SOURCES) scripts/build-jvm.sh | system-deps
	scripts/build-jvm.sh $(PY) $@

jvm: $(JVM_JAR)

test: $(TESTING) system-deps $(JVM_JAR)
	$(PY) -m pytest

# The documentation site (mkdocs.yml, pages in docs/) into site/, strict: a broken link, anchor or
# nav entry fails (decision 0305). The references made from the code are made while it builds.
docs: $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

lint: $(LINTING)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The peer servers (nats-server, rabbitmq-server) from Debian's packages when missing, and the
# peers' Python clients (the `bench` extra).
bench-deps: $(BENCHING)
	scripts/ensure-bench-deps.sh

# The standard set against LogBroker (over HTTP and through its Kafka listener), NATS JetStream and
# RabbitMQ; results, REPORT.md and plots in benchmarks/results/. QUICK=1: a short run.
bench: bench-deps
	$(PY) -m benchmarks all $(if $(QUICK),--quick,)
	$(PY) -m benchmarks encryption $(if $(QUICK),--quick,)
	$(PY) -m benchmarks compaction $(if $(QUICK),--quick,)

# LogBroker's own benchmarks (no peers): the log, one node, auth on/off, encryption on/off, compaction, groups, queues, Spark, and
# a three-node cluster on etcd (forwarding and metadata costs).
bench-node: $(BENCHING) $(JVM_JAR)
	$(PY) -m benchmarks log $(if $(QUICK),--quick,)
	$(PY) -m benchmarks node $(if $(QUICK),--quick,)
	$(PY) -m benchmarks auth $(if $(QUICK),--quick,)
	$(PY) -m benchmarks encryption $(if $(QUICK),--quick,)
	$(PY) -m benchmarks compaction $(if $(QUICK),--quick,)
	$(PY) -m benchmarks groups $(if $(QUICK),--quick,)
	$(PY) -m benchmarks queue $(if $(QUICK),--quick,)
	$(PY) -m benchmarks spark $(if $(QUICK),--quick,)
	$(PY) -m benchmarks cluster $(if $(QUICK),--quick,)

# The regression gate (decision 0255): main's tip (or BASELINE=<ref>) in a temporary worktree against
# this working tree (or CANDIDATE=<ref>), the quick scenarios interleaved and repeated; exits 1 when
# the working tree is worse beyond the measured noise. SCENARIOS=latency,produce narrows it, REPEAT=
# sets the pairs (8), NICE=-10 raises the runs' priority on a busy machine (root). Not a CI step:
# run it before you stop a change that touches a request path.
BASELINE ?= main
bench-guard: $(BENCHING) $(JVM_JAR)
	$(PY) -m benchmarks guard --baseline $(BASELINE) $(if $(CANDIDATE),--candidate $(CANDIDATE),) \
		$(if $(SCENARIOS),--scenarios $(SCENARIOS),) $(if $(REPEAT),--repeat $(REPEAT),) $(if $(NICE),--nice $(NICE),)

# Another port for `make run`: RUN_PORT=8090 RUN_GRPC_PORT=9192 RUN_KAFKA_PORT=9193 make run (or as make arguments).
RUN_PORT ?= 8080
RUN_GRPC_PORT ?= 9092
RUN_KAFKA_PORT ?= 9093
RUN_URL := http://127.0.0.1:$(RUN_PORT)
DEV_ADMIN := admin
DEV_PASSWORD := dev-admin-password
TOKEN_CURL := curl -s -XPOST $(RUN_URL)/v1/auth/token -H 'Content-Type: application/json' -d '{\"username\":\"$(DEV_ADMIN)\",\"password\":\"$(DEV_PASSWORD)\"}'

# The admin's password reaches the node through its environment: a command line is public (/proc/*/cmdline).
run: export LOGBROKER_ADMIN_PASSWORD := $(DEV_PASSWORD)
run: $(SERVER)
	@echo "LogBroker: one node, embedded coordinator, data in ./.data/node-1"
	@echo "  URL:    $(RUN_URL)   (OpenAPI: $(RUN_URL)/v1/openapi.json)"
	@echo "  console: $(RUN_URL)/console   (log in as the admin below)   API explorer: $(RUN_URL)/docs"
	@echo "  gRPC:   127.0.0.1:$(RUN_GRPC_PORT)   (logbroker.v1.Broker, reflection on; the same token as metadata 'authorization: Bearer ...')"
	@echo "  Kafka:  127.0.0.1:$(RUN_KAFKA_PORT)   (SASL PLAIN as the admin below: kcat -b 127.0.0.1:$(RUN_KAFKA_PORT) -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN -X sasl.username=$(DEV_ADMIN) -X sasl.password=$(DEV_PASSWORD) -L)"
	@echo "  admin:  $(DEV_ADMIN) / $(DEV_PASSWORD)   (development credentials; auth is on)"
	@echo "  token:  export TOKEN=\$$($(TOKEN_CURL) | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')"
	@echo "  try:    curl -s -XPOST $(RUN_URL)/v1/topics -H \"Authorization: Bearer \$$TOKEN\" -H 'Content-Type: application/json' -d '{\"name\":\"demo\",\"partitions\":3}'"
	@echo "          curl -s -XPOST $(RUN_URL)/v1/topics/demo/records -H \"Authorization: Bearer \$$TOKEN\" -H 'Content-Type: application/json' -d '{\"records\":[{\"value\":\"hello\",\"partition\":0}]}'"
	@echo "          curl -s '$(RUN_URL)/v1/topics/demo/partitions/0/records?offset=0' -H \"Authorization: Bearer \$$TOKEN\""
	@echo "  metrics: curl -s $(RUN_URL)/metrics -H \"Authorization: Bearer \$$TOKEN\"   (an admin's token; a scraper: --metrics-token, or --metrics-public true)"
	@echo "  CLI:    export LOGBROKER_USER=$(DEV_ADMIN) LOGBROKER_PASSWORD=$(DEV_PASSWORD); .venv/bin/logbroker topic list"
	$(PY) -m logbroker serve --node-id 1 --http-host 127.0.0.1 --http-port $(RUN_PORT) --grpc-port $(RUN_GRPC_PORT) --kafka-port $(RUN_KAFKA_PORT) --coordinator local --auth on \
		--admin-user $(DEV_ADMIN)

# A real etcd and three nodes on loopback (auth on, mutual TLS between nodes, one shared signing key,
# etcd over TLS with client certificates), data in ./.data/cluster (kept across runs); Ctrl-C stops
# them all. Ports: see logbroker/dev_cluster.py.
cluster: $(SERVER) system-deps
	$(PY) -m logbroker.dev_cluster

# A long chaos run (decision 0209): etcd and three nodes in network namespaces (partition faults are
# skipped, and the summary says so, where namespaces are refused) under producers, a consumer, a
# group and a queue while a nemesis kills, pauses and cuts them off; the checker's summary, the
# history (JSONL) and a plot in chaos/results/. Run as root for the namespaces. DURATION: 10m.
# ENCRYPTION=1: every node with one key ring, records encrypted at rest (decision 0316).
DURATION ?= 10m
ENCRYPTION ?=
chaos: $(CHAOS) system-deps
	$(PY) -m chaos --duration $(DURATION) --out chaos/results $(if $(ENCRYPTION),--encryption,)

# The deterministic simulation (decisions 0355, 0365): SEEDS seeded fault schedules of three nodes in
# JOBS processes, each failing seed printed with how to replay it (`python -m sim --seed S`).
# `make test` runs the same 500 seeds (tests/sim/test_cluster_run.py).
SEEDS ?= 500
JOBS ?= 2
sim: $(SERVER)
	$(PY) -m sim --seeds $(SEEDS) --jobs $(JOBS)

# The Spark example pipeline against `make run`'s broker (start that first, in another terminal).
spark-example: $(SPARK) system-deps $(JVM_JAR)
	$(PY) -m spark_connector.examples.events_per_minute --url $(RUN_URL) --seed 5000 --once \
		--username $(DEV_ADMIN) --password $(DEV_PASSWORD)

clean:
	rm -rf $(VENV) site spark_connector/jvm/build .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
