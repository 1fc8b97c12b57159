"""Ray Serve's facts, each spelled once (Ray 2.60): the states its REST API
reports, the names Serve LLM gives its deployments, where a model id sits in
an LLMConfig, the global options of a serve config (what a PUT carries beside
``applications``), and which hosts are loopback.

States: ``ray.serve.schema.ApplicationStatus`` and
``ray.serve._private.common.DeploymentStatus`` / ``ReplicaState``. Names:
``ray/llm/_internal/serve/core/server/builder.py`` (``LLMServer:<id>``,
``_get_deployment_name``) and ``core/ingress/ingress.py`` (``OpenAiIngress``).
Global options: ``ray.serve.schema.ServeDeploySchema``.

A bottom-layer module: it imports nothing from llmctl, so every layer can use it
(tests/test_facts.py checks that these strings are spelled nowhere else).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

# --------------------------------------------------------------------------
# states

# An application (GET /api/serve/applications/ -> applications.<name>.status)
APP_NOT_STARTED = "NOT_STARTED"
APP_DEPLOYING = "DEPLOYING"
APP_RUNNING = "RUNNING"
APP_DEPLOY_FAILED = "DEPLOY_FAILED"
APP_UNHEALTHY = "UNHEALTHY"
APP_DELETING = "DELETING"
APP_STATES = (APP_NOT_STARTED, APP_DEPLOYING, APP_RUNNING, APP_DEPLOY_FAILED, APP_UNHEALTHY, APP_DELETING)
# The states in which an app (or a deployment) has failed: Serve does not retry
# a failed app on the same config.
FAILED_STATES = (APP_DEPLOY_FAILED, APP_UNHEALTHY)
# The app states in which the deployed config is the one Serve goes on with: not
# failed, not being deleted, not yet to start.
KEPT_STATES = (APP_RUNNING, APP_DEPLOYING)

# A deployment (applications.<name>.deployments.<dep>.status)
DEP_UPDATING = "UPDATING"
DEP_HEALTHY = "HEALTHY"
DEP_UNHEALTHY = APP_UNHEALTHY
DEP_DEPLOY_FAILED = APP_DEPLOY_FAILED
DEP_UPSCALING = "UPSCALING"
DEP_DOWNSCALING = "DOWNSCALING"
DEPLOYMENT_STATES = (DEP_UPDATING, DEP_HEALTHY, DEP_UNHEALTHY, DEP_DEPLOY_FAILED, DEP_UPSCALING, DEP_DOWNSCALING)

# A replica (deployments.<dep>.replicas[].state)
REPLICA_STARTING = "STARTING"
REPLICA_UPDATING = DEP_UPDATING
REPLICA_RECOVERING = "RECOVERING"
REPLICA_RUNNING = APP_RUNNING
REPLICA_STOPPING = "STOPPING"
REPLICA_STOPPED = "STOPPED"
REPLICA_PENDING_MIGRATION = "PENDING_MIGRATION"
REPLICA_STATES = (REPLICA_STARTING, REPLICA_UPDATING, REPLICA_RECOVERING, REPLICA_RUNNING, REPLICA_STOPPING,
                  REPLICA_STOPPED, REPLICA_PENDING_MIGRATION)
# Replicas that hold resources (started, not yet stopped)
LIVE_REPLICA_STATES = (REPLICA_RUNNING, REPLICA_STARTING, REPLICA_UPDATING, REPLICA_STOPPING)


def is_failed(status: Any) -> bool:
    """An app or deployment state that means it failed (DEPLOY_FAILED, UNHEALTHY)."""
    return status in FAILED_STATES


# --------------------------------------------------------------------------
# deployment names

LLM_SERVER = "LLMServer"
_LLM_SERVER_PREFIX = LLM_SERVER + ":"
# Serve writes "LLMServer:<id>" as "LLMServer_<id>" in log file names
_LLM_SERVER_LOG_PREFIX = LLM_SERVER + "_"
DEFAULT_INGRESS = "OpenAiIngress"


def llm_deployment_name(model_id: Any) -> str:
    """Ray Serve LLM's LLMServer deployment name for a model id
    (core/server/builder.py: the class name, then ``_get_deployment_name``)."""
    return _LLM_SERVER_PREFIX + str(model_id).replace("/", "--").replace(".", "_")


def is_llm_server(deployment: Any) -> bool:
    """Whether a deployment name is an LLMServer's (not the ingress's)."""
    return isinstance(deployment, str) and deployment.startswith(_LLM_SERVER_PREFIX)


def llm_server_id(deployment: Any) -> Optional[str]:
    """The model part of an LLMServer deployment name (``LLMServer:qwen`` -> ``qwen``), else None."""
    return deployment[len(_LLM_SERVER_PREFIX):] if is_llm_server(deployment) else None


def deployment_from_log_name(name: str) -> str:
    """A deployment name as Serve writes it in a log file name, back to its own spelling."""
    if name.startswith(_LLM_SERVER_LOG_PREFIX):
        return _LLM_SERVER_PREFIX + name[len(_LLM_SERVER_LOG_PREFIX):]
    return name


def model_id_of(llm_config: Any) -> Optional[str]:
    """The model id of one LLMConfig mapping (``model_loading_config.model_id``), else None."""
    if not isinstance(llm_config, dict):
        return None
    mlc = llm_config.get("model_loading_config")
    mid = mlc.get("model_id") if isinstance(mlc, dict) else None
    return None if mid is None else str(mid)


# --------------------------------------------------------------------------
# a serve config's global options (ServeDeploySchema, beside ``applications``)

# Fixed once Serve started: a PUT that changes them is refused or ignored.
FIXED_GLOBALS = ("http_options", "grpc_options", "proxy_location")
# Applied by every PUT to a running Serve; Serve's GET does not show them
# (llmctl keeps what it last sent).
APPLIED_GLOBALS = ("controller_options", "logging_config", "tracing_config")
# Cluster-wide options Serve's GET shows as they are in effect.
SHOWN_GLOBALS = ("target_capacity", "proxy_location")
GLOBAL_OPTIONS = ("proxy_location", "http_options", "grpc_options", "controller_options", "logging_config",
                  "tracing_config", "target_capacity")
# http_options keys llmctl carries over from a running Serve
HTTP_KEYS = ("host", "port", "root_path", "request_timeout_s", "keep_alive_timeout_s")


# --------------------------------------------------------------------------
# hosts

LOOPBACK_HOST = "127.0.0.1"
LOCALHOST = "localhost"
# Hosts that mean "every interface": a client reaches them at the node's address
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def is_loopback(host: Any) -> bool:
    """Whether a host is this machine only: ``localhost``, 127.0.0.0/8, ``::1``."""
    if not isinstance(host, str) or not host:
        return False
    if host.lower() == LOCALHOST:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: Any) -> bool:
    """Whether a listening host means every interface (0.0.0.0, ::, empty)."""
    return isinstance(host, str) and host in WILDCARD_HOSTS
