"""The toolbox image's scripts (the bundled ``training`` image's ``/app``) that the components' helper containers run.

Only constants, so that the configuration's rules can name them without loading the components."""

from components.conventions import APP_DIR

#: A job's wait for the jobs in its ``after`` (an init container).
WAIT_SCRIPT = f"{APP_DIR}/wait_for_jobs.py"
#: A job's code download (an init container).
FETCH_SCRIPT = f"{APP_DIR}/fetch_code.py"
#: An MPI launcher's wait for its workers (an init container).
WORKERS_WAIT_SCRIPT = f"{APP_DIR}/wait_for_workers.py"
#: A dataset's staging.
STAGE_SCRIPT = f"{APP_DIR}/stage_data.py"
#: The all-reduce health check.
BENCHMARK_SCRIPT = f"{APP_DIR}/allreduce_bench.py"
#: The benchmark's collector.
COLLECT_SCRIPT = f"{APP_DIR}/collect_results.py"
