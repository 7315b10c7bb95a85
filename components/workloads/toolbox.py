"""The toolbox image's scripts (the bundled ``training`` image's ``/app``) that the components' helper containers run.

Only constants, so that the configuration's rules can name them without loading the components."""

#: A job's wait for the jobs in its ``after`` (an init container).
WAIT_SCRIPT = "/app/wait_for_jobs.py"
#: A job's code download (an init container).
FETCH_SCRIPT = "/app/fetch_code.py"
#: An MPI launcher's wait for its workers (an init container).
WORKERS_WAIT_SCRIPT = "/app/wait_for_workers.py"
#: A dataset's staging.
STAGE_SCRIPT = "/app/stage_data.py"
#: The all-reduce health check.
BENCHMARK_SCRIPT = "/app/allreduce_bench.py"
#: The benchmark's collector.
COLLECT_SCRIPT = "/app/collect_results.py"
