# Two commands set up a fresh machine: `make render` (the main job, offline) and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
STACK  ?= local
# the real node's Debian packages (trainer_infra/sandbox/node.py PACKAGES)
NODE_PACKAGES := containerd runc containernetworking-plugins iptables busybox-static mmdebstrap libcap2-bin python3-pip ipset conntrack

.PHONY: render validate test lint typecheck unit bench bench-pulumi bench-scheduling docs kueue-write-back clean e2e e2e-pulumi e2e-node e2e-node-deps e2e-recovery e2e-upgrade e2e-fleet e2e-karpenter e2e-sandbox sandbox-up sandbox-down

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,gcp,aws,azure]"
	touch $(STAMP)

render: $(STAMP)  ## validate and render stacks/Pulumi.$(STACK).yaml offline into build/$(STACK)/
	$(PY) -m trainer_infra validate --stack $(STACK)
	$(PY) -m trainer_infra render --stack $(STACK) --out build/$(STACK)

validate: $(STAMP)
	$(PY) -m trainer_infra validate --stack $(STACK)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy trainer_infra tests

unit: $(STAMP)
	$(PY) -m pytest -q -n 2

test: lint typecheck unit  ## what CI runs

bench: $(STAMP)  ## render 1,000 teams × 10/50 pools beside Pulumi's mock-engine floor (CPU s, ratio)
	$(PY) -m tests.bench

e2e: $(STAMP)  ## the real `pulumi preview/up`, every platform scenario on what it installed, day two up to `destroy` (root); fleet/failures/simulate beside it (builds once into ~/.cache; E2E_PULUMI=0 runs only those; tests/e2e/pipeline.py)
	$(PY) -m tests.e2e.run

e2e-pulumi: $(STAMP) e2e-node-deps  ## `make e2e`, failing instead of skipping when the Pulumi part (its controllers run on a real node) cannot run
	E2E_PULUMI=1 $(PY) -m tests.e2e.run

e2e-node-deps:  ## Debian's containerd, runc, CNI plugins, iptables, busybox-static, ipset and conntrack for the real node (root)
	dpkg -s $(NODE_PACKAGES) >/dev/null 2>&1 || { apt-get update -q && apt-get install -y --no-install-recommends $(NODE_PACKAGES); }

e2e-node: $(STAMP) e2e-node-deps  ## a real node (kubelet + containerd) beside the kwok nodes, without the platform: a pod pulls from the mirror and runs, cluster DNS and Services (root)
	E2E_NODE=1 $(PY) -m tests.e2e.run -m e2e tests/e2e/test_node.py tests/e2e/test_node_network.py

e2e-recovery: $(STAMP)  ## an interrupted `pulumi up` (engine killed, API server stopped, skip-checkpoints) and `destroy`, and the documented recovery (root; `.ci/nightly` runs it; docs/recovery.md gives its time)
	$(PY) -m tests.e2e.run -m e2e tests/e2e/test_pulumi_recovery.py

e2e-upgrade: $(STAMP) e2e-node-deps  ## JobSet 0.11.1 → 0.12.0, then Kueue 0.18.3 → 0.19.2 (E2E_UPGRADE_KUEUE=0 skips it), then Trainer 2.2.0 → 2.2.1, by `pulumi up` with jobs running, pending and held; measures the refusal window (root; `.ci/nightly` runs it; docs/versions.md gives its time)
	$(PY) -m tests.e2e.run -m e2e tests/e2e/test_pulumi_upgrade.py

e2e-fleet: $(STAMP) e2e-node-deps  ## the fleet by one real `pulumi up` (manager + 2 workers, then a third joins, tokens rotate, the third drains and leaves), its MultiKueue scenarios, a stranded job recovered (root; `.ci/nightly` runs it; docs/fleet.md gives its time)
	$(PY) -m tests.e2e.run -m e2e tests/e2e/test_pulumi_fleet.py

e2e-karpenter: $(STAMP)  ## Karpenter's core with its kwok provider launches the karpenter pool's nodes (labels, taints) for a team's admitted TrainJob and removes them when empty (builds Karpenter once with GOTOOLCHAIN=go1.27.3; `.ci/nightly` runs it; tests/e2e/README.md gives its time)
	$(PY) -m tests.e2e.run -m e2e tests/e2e/test_karpenter_kwok.py

bench-pulumi: $(STAMP) e2e-node-deps  ## first up of a 1,000-team synthetic stack in team stacks, checkpoints vs PULUMI_SKIP_CHECKPOINTS, one-team preview (BENCH_TEAMS, BENCH_SHARDS, BENCH_JOBS; root)
	$(PY) -m tests.e2e.run -m e2e tests/e2e/test_pulumi_scale.py tests/e2e/test_pulumi_shards.py

bench-scheduling: $(STAMP)  ## a seeded 2,000-job trace on the real Kueue: derived queues vs one flat FIFO queue vs static partitions (needs the e2e binaries; 43–55 min per configuration at 200× on 2 idle cores, bounded at 75)
	$(PY) -m tests.bench_scheduling

sandbox-up: $(STAMP) e2e-node-deps  ## try the platform without a cluster: the real `pulumi up` of the local stack on a real node (root; docs/sandbox.md)
	$(PY) -m trainer_infra sandbox up

sandbox-down: $(STAMP)  ## stop it all; fails naming anything left (the team volumes are kept)
	$(PY) -m trainer_infra sandbox down

e2e-sandbox: $(STAMP) e2e-node-deps  ## sandbox-up; as team members: the first job, resume, OOM, NetworkPolicy and hostile-tenant attacks, every CPU runtime, the model out, the notebook; sandbox-down leaves nothing (root; CI runs this session inside `make e2e`, E2E_SANDBOX=1)
	E2E_SANDBOX=1 $(PY) -m tests.e2e.run -m e2e tests/e2e/test_sandbox_up.py tests/e2e/test_sandbox_training.py \
		tests/e2e/test_sandbox_network.py tests/e2e/test_sandbox_attacks.py tests/e2e/test_sandbox_limits.py tests/e2e/test_sandbox_llm.py \
		tests/e2e/test_sandbox_runtimes.py tests/e2e/test_sandbox_pids.py tests/e2e/test_sandbox_progress.py \
		tests/e2e/test_sandbox_queue.py tests/e2e/test_sandbox_model_out.py tests/e2e/test_sandbox_notebook.py

docs: $(STAMP)  ## regenerate docs/configuration.md and the migration mapping table from the code
	$(PY) -m tests.update_docs

kueue-write-back: $(STAMP)  ## regenerate the fields Kueue's write-back of a TrainJob drops (tenancy/admission/write_back.yaml; Go, module proxy)
	$(PY) -m tests.tenancy.write_back.generate

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
