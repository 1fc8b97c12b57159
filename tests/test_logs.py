"""Reading a Serve app's logs from a local session directory (the files Ray
writes, laid out as Ray 2.60 lays them out): the one reading path that
`llmctl logs` and the failure text of `up` share. No cluster: the status is
given, as `up` has it."""

from __future__ import annotations

import os
import time

from llmctl.launch import cluster, logs
from llmctl.launch.address import Target

APP = "fix_app"
DEP = "LLMServer:tiny"


def _session(tmp_path):
    logs_dir = tmp_path / "session_latest" / "logs"
    (logs_dir / "serve").mkdir(parents=True)
    old = logs_dir / "serve" / f"replica_{APP}_LLMServer_tiny_aaa.log"
    old.write_text("INFO old replica line\n")
    os.utime(old, (time.time() - 100, time.time() - 100))
    (logs_dir / "serve" / f"replica_{APP}_LLMServer_tiny_bbb.log").write_text("INFO new replica line 1\nINFO new replica line 2\n")
    (logs_dir / "serve" / f"replica_{APP}_OpenAiIngress_ccc.log").write_text("INFO ingress line\n")
    (logs_dir / "serve" / "controller_123.log").write_text(f"INFO Deploying app '{APP}'.\nINFO something else\n")
    # the failed replica (pid 4242) ended; another worker of the app too (pid 5151)
    (logs_dir / "worker-aa-01000000-4242.out").write_text(f":actor_name:ServeReplica:{APP}:{DEP}\nINFO vllm starting\n")
    (logs_dir / "worker-aa-01000000-4242.err").write_text(
        f":actor_name:ServeReplica:{APP}:{DEP}\nTraceback (most recent call last):\nValueError: too small\n")
    (logs_dir / "worker-bb-01000000-5151.err").write_text(f":actor_name:ServeReplica:{APP}:{DEP}\nValueError: earlier\n")
    (logs_dir / "worker-cc-01000000-6161.out").write_text(":actor_name:ServeReplica:other:LLMServer:x\nnot ours\n")
    state = cluster.ClusterState(
        pid=1, pid_create_time=1.0, ports={"serve_http": 1}, dashboard_url="http://127.0.0.1:1", gcs_address="127.0.0.1:2",
        temp_dir=str(tmp_path), serve_http_port=1, num_cpus=1, num_gpus=0, log_file="/dev/null", started_at=0.0,
    )  # fmt: skip
    status = {"applications": {APP: {"status": "DEPLOY_FAILED", "deployments": {DEP: {"status": "DEPLOY_FAILED", "replicas": []}}}}}
    return Target(state.dashboard_url, state), status


def test_replica_log_tail_reads_the_newest_serve_log_and_the_process_output(tmp_path):
    target, status = _session(tmp_path)
    text = logs.replica_log_tail(target, 4242, lines=20, app=APP, deployment=DEP, status=status)
    assert text.splitlines() == ["INFO new replica line 1", "INFO new replica line 2", "INFO vllm starting",
                                 "Traceback (most recent call last):", "ValueError: too small"]
    # no pid (the message named none): the Serve log only
    assert logs.replica_log_tail(target, None, app=APP, deployment=DEP, status=status).splitlines()[0] == "INFO new replica line 1"


def test_sources_label_ended_replicas_and_filter_the_controller(tmp_path):
    target, status = _session(tmp_path)
    srcs, _ = logs._sources(None, target, APP, status=status)
    labels = sorted(s.label for s in srcs)
    assert labels == ["controller", "replica LLMServer:tiny aaa", "replica LLMServer:tiny bbb", "replica OpenAiIngress ccc",
                      f"stderr {DEP} (ended)", f"stderr {DEP} (ended)", f"stdout {DEP} (ended)"]
    ended = {s.pid for s in srcs if s.label.endswith("(ended)")}
    assert ended == {4242, 5151}
    (controller,) = [s for s in srcs if s.label == "controller"]
    assert logs._filter(controller, logs._read(controller, 10, None)) == [f"INFO Deploying app '{APP}'."]
