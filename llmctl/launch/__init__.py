"""Launch and operate: ``up``, ``status``, ``down`` and logs, as a core with no UI.

``up()`` and ``down()`` are generators: they yield :class:`Step` (one-off
facts: validated, cluster started, deployed) and :class:`Progress` (a
snapshot of the apps being deployed) and end with a result. They raise
llmctl.errors types; they never print.

Modules: :mod:`.cluster` (the local Ray head llmctl owns), :mod:`.address`
(which cluster a command talks to), :mod:`.serve_api` (Serve's REST API),
:mod:`.deploy` (prepare, compose, up), :mod:`.watch` (unschedulable
replicas), :mod:`.reasons` (why a deployment failed), :mod:`.operate`
(status, down), :mod:`.logs`.
"""

from llmctl.launch.deploy import Prepared, check_models, compose, connect, prepare, up  # noqa: F401
from llmctl.launch.events import Progress, Step, UpEvent, UpResult  # noqa: F401
from llmctl.launch.operate import DownResult, StatusReport, down, status  # noqa: F401
from llmctl.launch.reasons import reason_from_message  # noqa: F401
