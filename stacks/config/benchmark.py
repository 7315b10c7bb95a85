"""The ``benchmark`` section: experiments run in parallel, their results copied to S3, the environment torn down.

Each experiment is a job of the job model (:class:`~stacks.config.jobs.JobConfig`), written out in full or ``from``
another with the keys it changes (:func:`merged_experiments`). Experiments become jobs of the plan, measured side by
side, so some keys are refused (:data:`FORBIDDEN_JOB_KEYS`). ``results`` is where the collector copies them
(:class:`ResultsConfig`), and ``keep`` what is kept after the run (:class:`KeepConfig`). The run id (:func:`run_id`)
names the results folder and the output folders: ``python -m stacks.benchmark`` gives each run its own through
:data:`RUN_ENV`; a plain ``pulumi up`` uses a hash of the experiments, so an unchanged stack re-creates nothing.

The user's page: docs/how-to/benchmarks.md."""

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from pydantic import Field, field_validator, model_validator

from components.workloads.collector import COLLECTOR_GRACE_HOURS, DEFAULT_KEPT_OUTPUTS, DEFAULT_MAX_FILE_MIB
from components.workloads.spec import DEFAULT_TIMEOUT_HOURS
from stacks.config.base import S3_BUCKET_RE, S3_PATH_RE, S3_PREFIX_RE, Model, Number, entry_name_problem, split_s3_path
from stacks.config.errors import check, key, validate
from stacks.config.jobs import JobConfig

#: The environment variable the driver sets to give a run its id (``run-20260521-101500``).
RUN_ENV = "EKS_TRAINING_BENCHMARK_RUN"
#: A run id: a DNS label (it is an S3 folder, part of the output folders and a Kubernetes label value).
RUN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: The key an experiment names its base experiment with (the only key that is not a job's).
FROM_KEY = "from"
#: Job keys an experiment may not set, and why.
FORBIDDEN_JOB_KEYS: Mapping[str, str] = {
    "outputDir": "each run gives every experiment a fresh folder, benchmarks/<run>/<experiment>; remove it",
    "waitForCompletion": "the driver (`python -m stacks benchmark`) follows the experiments, `pulumi up` only creates "
    "them; remove it",
    "purpose": "an experiment is queued with the experiment priority (below training: the README's queues section); "
    "remove it",
}
#: The collector's name (a Kubernetes Job, its service account and Role): no job or experiment may take it.
COLLECTOR_NAME = "benchmark-collector"
#: Where the experiments write, relative to the shared volume.
OUTPUT_ROOT = "benchmarks"
#: Longest file the collector copies (one PutObject request; S3's single-request limit is 5 GiB,
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/upload-objects.html).
MAX_FILE_MIB_LIMIT = 5 * 1024


class ResultsConfig(Model):
    """Where the results go (key ``benchmark.results``)."""

    s3_path: Optional[str] = None
    """``s3://bucket/prefix/`` of an existing bucket; omit to have the stack create one (kept on destroy)."""
    prefix: Optional[str] = None
    """The results' prefix in the bucket the stack creates (default ``benchmarks/``)."""

    @field_validator("s3_path")
    @classmethod
    def _s3_path(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        m = S3_PATH_RE.match(v)
        if m is None or not S3_BUCKET_RE.match(m.group("bucket")):
            raise ValueError(
                f"{v!r} is not s3://bucket/prefix/ (a bucket name, then a prefix ending in '/'), "
                "e.g. s3://my-results/benchmarks/"
            )
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not S3_PREFIX_RE.match(v):
            raise ValueError(f"{v!r} is not a prefix such as benchmarks/ (segments ending in '/', no leading '/')")
        return v

    @model_validator(mode="after")
    def _one_bucket(self) -> "ResultsConfig":
        if self.s3_path is not None and self.prefix is not None:
            check(
                [
                    (
                        "prefix",
                        "only for the bucket the stack creates; with @{s3Path} the prefix is part of the "
                        "path, remove prefix",
                    )
                ]
            )
        return self

    @property
    def bucket(self) -> Optional[str]:
        """The existing bucket (``None``: the stack creates one)."""
        parts = split_s3_path(self.s3_path)
        return parts[0] if parts else None

    @property
    def base_prefix(self) -> str:
        """The prefix the runs' folders go under (ends in ``/``)."""
        parts = split_s3_path(self.s3_path)
        return parts[1] if parts else (self.prefix or "benchmarks/")


class KeepConfig(Model):
    """What is kept after the run (key ``benchmark.keep``)."""

    environment: bool = False
    """Leave the environment up after the run (the driver's ``--keep``); default: destroy it."""
    outputs: list[str] = Field(default_factory=lambda: list(DEFAULT_KEPT_OUTPUTS))
    """Output files copied besides metrics and logs: globs relative to the experiment's output folder."""
    max_file_mib: int = Field(default=DEFAULT_MAX_FILE_MIB, ge=1, le=MAX_FILE_MIB_LIMIT)
    """Larger output files are listed as skipped, not copied."""

    @field_validator("outputs")
    @classmethod
    def _outputs(cls, v: list[str]) -> list[str]:
        bad = [
            (f"[{i}]", f"{g!r} must be a glob relative to the output folder, e.g. '*.json' or 'logs/*.txt'")
            for i, g in enumerate(v)
            if not g or g.startswith("/") or ".." in g.split("/")
        ]
        check(bad)
        return v


class BenchmarkConfig(Model):
    """The benchmark (key ``benchmark``): experiments, where their results go and what is kept."""

    experiments: dict[str, dict[str, Any]] = Field(min_length=1)
    """Experiment name -> a job (the keys of a job), or ``from`` another experiment with the keys it changes."""
    results: ResultsConfig = Field(default_factory=ResultsConfig)
    """Where the collector copies each finished experiment (its config, output, metrics and logs)."""
    keep: KeepConfig = Field(default_factory=KeepConfig)
    """What is kept after the run."""
    collector_timeout_hours: Optional[Number] = Field(default=None, gt=0, le=720)
    """How long the collector waits for the experiments (default: the longest experiment's timeoutHours + 1)."""


@dataclass(frozen=True)
class BenchmarkSettings:
    """The validated benchmark: the experiments themselves are jobs of the stack config."""

    run: str
    """This run's id: the results folder ``<prefix><run>/`` and the experiments' output folders."""
    experiments: tuple[str, ...]
    """Experiment names in config order (each a job of the same name)."""
    results: ResultsConfig
    keep: KeepConfig
    collector_timeout_hours: float

    @property
    def bucket(self) -> Optional[str]:
        """The existing results bucket (``None``: the stack creates one)."""
        return self.results.bucket

    @property
    def run_prefix(self) -> str:
        """The run's folder in the bucket: ``<prefix><run>/``."""
        return f"{self.results.base_prefix}{self.run}/"


def experiment_path(name: str) -> str:
    """The config path of an experiment (``benchmark.experiments.<name>``)."""
    return f"benchmark.experiments.{name}"


def output_dir(run: str, experiment: str) -> str:
    """An experiment's output folder relative to the shared volume: ``benchmarks/<run>/<experiment>``."""
    return f"{OUTPUT_ROOT}/{run}/{experiment}"


def merged_experiments(experiments: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each experiment's job keys with its ``from`` chain applied (the base's keys, then its own), and the
    problems of the chains (an unknown base, a cycle). An experiment whose chain is broken is left out."""
    problems: list[str] = []
    out: dict[str, dict[str, Any]] = {}

    def resolve(name: str, seen: tuple[str, ...]) -> Optional[dict[str, Any]]:
        if name in out:
            return out[name]
        raw = experiments[name]
        if not isinstance(raw, dict):
            return None
        base = raw.get(FROM_KEY)
        own = {k: v for k, v in raw.items() if k != FROM_KEY}
        if base is None:
            out[name] = own
            return own
        where = key(f"{experiment_path(name)}.{FROM_KEY}")
        if not isinstance(base, str) or base not in experiments:
            others = ", ".join(sorted(n for n in experiments if n != name)) or "(no other experiment)"
            problems.append(f"{where}: {base!r} is not an experiment; name one of {others}")
            return None
        if base in seen:
            return None  # a cycle: reported below, once
        parent = resolve(base, (*seen, base))
        if parent is None:
            return None
        merged = {**parent, **own}
        out[name] = merged
        return merged

    reported: set[frozenset[str]] = set()
    for name in experiments:
        chain = [name]
        cur = experiments[name].get(FROM_KEY) if isinstance(experiments[name], dict) else None
        while isinstance(cur, str) and cur in experiments and cur not in chain:
            chain.append(cur)
            cur = experiments[cur].get(FROM_KEY) if isinstance(experiments[cur], dict) else None
        if cur == name and frozenset(chain) not in reported:
            reported.add(frozenset(chain))
            problems.append(
                f"{key(f'{experiment_path(name)}.{FROM_KEY}')}: the experiments are based on each other in a "
                f"cycle ({' -> '.join([*chain, name])}); write one of them out in full"
            )
    for name in experiments:
        resolve(name, (name,))
    return {n: out[n] for n in experiments if n in out}, problems


def default_run(experiments: Mapping[str, Any]) -> str:
    """``run-<hash>`` of the experiments' definitions: the same benchmark keeps its run id."""
    digest = hashlib.sha256(json.dumps(experiments, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"run-{digest}"


def run_id(experiments: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> tuple[str, Optional[str]]:
    """The run id (:data:`RUN_ENV` when set, else :func:`default_run`) and the problem with it, if any."""
    env = os.environ if environ is None else environ
    given = env.get(RUN_ENV)
    if given is None or given == "":
        return default_run(experiments), None
    if not RUN_RE.match(given):
        return default_run(experiments), (
            f"environment variable {RUN_ENV}={given!r} is not a run id: 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (e.g. run-20260521-101500); unset it or fix it"
        )
    return given, None


def _bases(name: str, raw: Mapping[str, Any]) -> list[str]:
    """The experiments ``name`` is based on, nearest first (stops at an unknown base or a cycle)."""
    out: list[str] = []
    cur = raw[name].get(FROM_KEY) if isinstance(raw[name], dict) else None
    while isinstance(cur, str) and cur in raw and cur != name and cur not in out:
        out.append(cur)
        cur = raw[cur].get(FROM_KEY) if isinstance(raw[cur], dict) else None
    return out


def validate_experiments(
    raw_experiments: Mapping[str, Any], job_names: list[str], run: str
) -> tuple[dict[str, JobConfig], list[str], set[str]]:
    """The experiments as jobs (output folder set), the problems found, and the paths that failed their own
    validation. ``job_names`` are the stack's jobs: an experiment may wait for them but not share their names.
    A problem an experiment inherits is reported once, at the experiment it comes from."""
    problems: list[str] = []
    for name in raw_experiments:
        path = experiment_path(name)
        why = entry_name_problem("jobs", name, "the experiment")
        if why is not None:
            problems.append(f"{key(path)}: {why}")
        if name in job_names:
            problems.append(
                f"{key(path)}: {key(f'jobs.{name}')} has the same name, and an experiment runs as a job of "
                "its name; rename one of them"
            )
        if name == COLLECTOR_NAME:
            problems.append(f"{key(path)}: {COLLECTOR_NAME} is the collector's name; rename the experiment")
    merged, chain_problems = merged_experiments(raw_experiments)
    problems.extend(chain_problems)
    own_problems: dict[str, list[str]] = {}
    jobs: dict[str, JobConfig] = {}
    for name, fields in merged.items():
        path = experiment_path(name)
        own = {k for k in raw_experiments[name] if k != FROM_KEY}
        found: list[str] = []
        for field, why in FORBIDDEN_JOB_KEYS.items():
            if field in own:
                found.append(f"{key(f'{path}.{field}')}: {why}")
        after = raw_experiments[name].get("after")
        for i, other in enumerate(after if isinstance(after, list) else []):
            if isinstance(other, str) and other in raw_experiments:
                found.append(
                    f"{key(f'{path}.after[{i}]')}: {other!r} is another experiment; experiments run side by side and "
                    "never wait for each other (they are compared); remove it, or make it a job of eks-training:jobs"
                )
        job, job_problems = validate(path, JobConfig, {k: v for k, v in fields.items() if k not in FORBIDDEN_JOB_KEYS})
        found.extend(job_problems)
        if job is not None:
            jobs[name] = job.model_copy(update={"output_dir": output_dir(run, name)})
        own_problems[name] = found
    failed = {experiment_path(n) for n in raw_experiments if n not in merged or own_problems.get(n)}
    out: dict[str, JobConfig] = {}
    for name in merged:
        if any(experiment_path(b) in failed for b in _bases(name, raw_experiments)):
            failed.add(experiment_path(name))  # the base's problem is reported at the base
            continue
        problems.extend(own_problems[name])
        if name in jobs and not own_problems[name]:
            out[name] = jobs[name]
    return out, problems, failed


def benchmark_settings(bench: BenchmarkConfig, run: str, experiments: Mapping[str, JobConfig]) -> BenchmarkSettings:
    """The settings of a validated benchmark (the collector waits as long as the longest experiment, plus its grace)."""
    timeout = bench.collector_timeout_hours
    if timeout is None:
        longest = max((j.timeout_hours for j in experiments.values()), default=float(DEFAULT_TIMEOUT_HOURS))
        timeout = longest + COLLECTOR_GRACE_HOURS
    return BenchmarkSettings(
        run=run,
        experiments=tuple(experiments),
        results=bench.results,
        keep=bench.keep,
        collector_timeout_hours=timeout,
    )
