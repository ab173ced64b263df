"""`ragrail up`: runs every implemented service as a local process and keeps them running.

Each service is a child process (`python -m services.<name>`) with its log in
`<data_dir>/logs/<name>.log`. A child that dies is restarted on its own, with backoff, while
the others keep serving; Ctrl-C or SIGTERM stops them all, gateway first, each given time to
drain before it is killed.

The guard model and the extractive reader are published with the project (`models/`,
trainers/publish.py): a fresh clone serves every rail and the reader from the first start,
and nothing is trained unless asked. Asked (`ragrail up --train`), and only where no model of
the role is found (a RAGRAIL_MODELS_DIR without the published ones, say), the launcher trains
the guard model in the background (`python -m trainers.guardrails --all`, log in
`<data_dir>/logs/train-guardrails.log`) while its rails are pending, then sends the guardrails
service SIGHUP, which loads the model and runs every rail; then the reader the same way
(`python -m trainers.reader`, `train-reader.log`), which the gateway takes up by itself.

The parts: services.py (what runs and whether it serves), supervisor.py (starting, restarting,
stopping), models.py and training.py (a first start's models), metrics.py. This package's
names below are what the command line, the benchmarks and the tests use.
"""

from ragrail.launcher.metrics import RESTARTS, start_metrics
from ragrail.launcher.models import (
    guard_model_out,
    guard_model_problem,
    needs_guard_training,
    needs_reader_training,
    reader_in_use,
    reader_out,
)
from ragrail.launcher.services import (
    SERVICES,
    Child,
    ServiceDef,
    guard_model_state,
    is_ready,
    reranker_not_startable,
)
from ragrail.launcher.supervisor import Supervisor
from ragrail.launcher.training import (
    READER_TRAIN_ARGS_ENV,
    READER_TRAIN_LOG,
    READER_TRAINING,
    TRAIN_ARGS_ENV,
    TRAIN_LOG,
    training_command,
)

__all__ = [
    "READER_TRAINING",
    "READER_TRAIN_ARGS_ENV",
    "READER_TRAIN_LOG",
    "RESTARTS",
    "SERVICES",
    "TRAIN_ARGS_ENV",
    "TRAIN_LOG",
    "Child",
    "ServiceDef",
    "Supervisor",
    "guard_model_out",
    "guard_model_problem",
    "guard_model_state",
    "is_ready",
    "needs_guard_training",
    "needs_reader_training",
    "reader_in_use",
    "reader_out",
    "reranker_not_startable",
    "start_metrics",
    "training_command",
]
