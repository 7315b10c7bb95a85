"""The files of a run's folder ``s3://<bucket>/<prefix><run>/``, as the collector (training/collect_results.py)
writes them and the driver reads them (a test ties both sides)."""

RUN_FILE = "run.json"
CLUSTER_FILE = "cluster.json"
STORAGE_FILE = "storage.json"
PROGRESS_FILE = "progress.json"
DONE_FILE = "collector.json"
EXPERIMENTS_DIR = "experiments"
METRICS_FILE = "metrics.json"
#: The driver's summary, beside the experiments.
SUMMARY_DIR = "summary"
SUMMARY_FILES = ("summary.txt", "summary.csv", "summary.json", "summary.png")


def metrics_key(experiment: str) -> str:
    """An experiment's merged metrics, relative to the run's folder."""
    return f"{EXPERIMENTS_DIR}/{experiment}/output/{METRICS_FILE}"
