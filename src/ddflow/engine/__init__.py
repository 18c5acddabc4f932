"""The engine: operators and streams, the stepping worker, progress tracking and loop scopes,
exchanges between workers, their communicators, and checkpoints of a worker's state.

Below the incremental operators (``ddflow.operators``) and the user API (``ddflow.dataflow``);
imports only ``ddflow.core`` and ``ddflow.trace``."""
