"""Runtimes: how a job (a dataflow over finite logs of changes) runs, on one worker in this
process, on local processes, or on Spark barrier tasks; one ``Runtime`` protocol and one
``JobConfig`` value for all of them, the job driver they share, and process tuning.

Above the dataflow API (``ddflow.dataflow``): a runtime builds the user's dataflow on each
of its workers and drives it."""
