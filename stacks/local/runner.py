"""Run a stack's jobs on this machine: the pods' commands and environments, built by the same functions the
components use, as local processes.

Each job's N pods become N processes on 127.0.0.1 (CPU only), with the command and environment their pods get,
expanded as Kubernetes expands them (:mod:`stacks.local.kube`); ``/data``, ``/app``, ``/workspace`` and ``/tmp`` map
to folders here. An ``etcd-v2`` rendezvous gets a local etcd (:mod:`stacks.local.etcd`); datasets are staged by
``stage_data.py`` or taken from a local folder (:mod:`stacks.local.datasets`); jobs run in the order their ``after``
gives, their pods as processes started and stopped by :mod:`stacks.local.processes`. Not run here: the all-reduce
checks, TensorBoard, code from ``s3://``. It reports each job's start, progress (:mod:`stacks.local.report`), end and
results; ``<work>`` keeps its state between runs (a finished run is not run again, an interrupted one resumes;
:attr:`LocalRunner.fresh` starts over). The path mapping and what is not run, and why: "The local runner" in
docs/explanation/programs.md."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, cast

from components.conventions import APP_DIR, SHARED_MOUNT
from components.workloads.pods import COMPLETION_INDEX_ENV, env_list
from components.workloads.pytorch import LAUNCHER_DONE_MARKER
from components.workloads.spec import WORKSPACE, JobSpec, WorkerPlacement, stop_grace_seconds
from components.workloads.tensorboard import tensorboard_command
from components.workloads.waits import KUBERNETES_GRACE_S
from stacks.kinds import KINDS, LocalContext, PlannedJob
from stacks.local.datasets import DatasetStaging, _stamp
from stacks.local.etcd import LocalEtcd
from stacks.local.kube import container_env, expand
from stacks.local.processes import NOT_IN_PODS, Pod, process_env, stop
from stacks.local.report import LocalRunError, LogFollower, PodProgress, failure, results, tail
from stacks.plan import JobPlan, Plan, job_order
from stacks.plan.jobspec import job_spec
from stacks.ports import free_port

#: What stands for the namespace, the claim and the image reference (they only name things in a cluster).
LOCAL = "local"


def local_mpi_prefix() -> str:
    """This machine's Open MPI installation (the folder above the ``bin`` of ``mpirun`` on PATH): the launcher runs
    mpirun by its absolute path there, as the pods run the image's."""
    found = shutil.which("mpirun")
    if found is None:
        raise LocalRunError("mpirun not found: install Open MPI to run MPI jobs locally")
    return str(Path(found).parent.parent)


@dataclass
class LocalRunner(DatasetStaging, LocalEtcd):
    """Runs the jobs of ``plan`` under ``work``. Its bases hold the datasets' staging
    (:class:`~stacks.local.datasets.DatasetStaging`) and the local etcd (:class:`~stacks.local.etcd.LocalEtcd`)."""

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
        if left := [k for k in NOT_IN_PODS if os.environ.get(k)]:
            self.say(f"the jobs' processes start without your shell's {', '.join(left)}, as a pod has its image's")
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

    def finished_before(self, job: JobPlan, output: Path) -> bool:
        """The job's processes end at once on its run folder ``output``: its launcher skips a finished run."""
        return KINDS[job.kind].skips_finished_runs(job) and (output / LAUNCHER_DONE_MARKER).is_file()

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
        finished = self.finished_before(job, output)
        if finished:
            self.say(
                f"job {job.name}: its run in {output} finished ({LAUNCHER_DONE_MARKER}), so its processes end at once; "
                f"--fresh {job.name} starts it over"
            )
        pods = self.pods(job)
        output.mkdir(parents=True, exist_ok=True)
        self.record_run(job, output)
        state = "finished before" if finished else "started"
        self.say(
            f"job {job.name} ({job.kind}): {state}, {self.pods_text(job, pods)}, output {output}, logs "
            f"{', '.join(str(p.log) for p in pods)}"
        )
        started = time.monotonic()
        try:
            self.wait(pods, timeout_s=self.timeout_s or 3600.0 * job.config.timeout_hours)
        except LocalRunError as exc:
            self.say(f"job {job.name}: failed after {time.monotonic() - started:.0f} s: {exc.reason}")
            raise
        took = f"{time.monotonic() - started:.0f} s"
        if finished:
            self.say(f"job {job.name}: ended in {took}, running nothing (its run had finished; every process exited 0)")
        else:
            self.say(f"job {job.name}: completed in {took} (every process exited 0)")
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

    def pods_text(self, job: JobPlan, pods: Sequence[Pod]) -> str:
        """What stands for the job's pods, as the start line says it (:meth:`JobKind.local_pods_text`)."""
        nodes = KINDS[job.kind].local_nodes(job, self.nodes or None)
        return KINDS[job.kind].local_pods_text(len(pods), nodes, self.placement(job, nodes)["procs_per_node"])

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
        followers = [PodProgress(LogFollower(p.log), p.job) for p in pods]
        try:
            while True:
                codes = [p.process.poll() if p.process else None for p in pods]
                self.show_progress(pods, followers)
                failed = [(p, code) for p, code in zip(pods, codes) if code not in (None, 0)]
                if failed:
                    pod, code = failed[0]
                    reason, fix = failure(tail(pod.log, 20000), code, pod.argv[0] if pod.argv else "", pod.job)
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

    def say(self, text: str) -> None:
        """A progress line."""
        print(f"[local] {text}", file=self.out, flush=True)


__all__ = ["APP_DIR", "LOCAL", "LocalRunner", "local_mpi_prefix"]
