"""``python -m stacks.benchmark --stack NAME``: a benchmark run from one command.

``pulumi up`` through the Pulumi Automation API (the stack's experiments start side by side and a collector Job
copies each finished one to S3), a progress display of every experiment's phase and elapsed time (read from the
collector's ``progress.json`` in S3), the wait for the collector (``collector.json``), a summary (a table in the
terminal, CSV, JSON and a PNG chart of throughput, time and cost, written to the run's ``summary/`` folder and to a
local folder), then ``pulumi destroy`` in a ``finally`` block: an experiment failing, a timeout or Ctrl-C still tear
the environment down, unless ``--keep`` (or ``benchmark.keep.environment``).

:mod:`stacks.benchmark.driver` holds the sequencing, with the stack (``up``/``destroy``/``outputs``) and the
results store injected at their boundary; :mod:`stacks.benchmark.cli` the command line and the real Automation API
and S3 objects; :mod:`stacks.benchmark.summary` the summary writers.
"""
