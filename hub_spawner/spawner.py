"""``ShoalSpawner``: a notebook gets a MIG slice only when the scheduler grants one, accounted to the user's team.

``start`` submits a ``kind: notebook`` job for the user's team and waits while the scheduler queues it (the spawn
page shows the reason, queue position and estimated start through ``progress``). The scheduler's executor runs the
job's command, which is the single-user server itself (``hub_spawner.launch``), pinned to the granted slice by the
executor's ``CUDA_VISIBLE_DEVICES``. So the scheduler launches, accounts and stops everything it granted; the spawner
only submits, watches and cancels. ``stop`` cancels the job, which releases the slice at once.

Two launchers (``launcher``): ``local`` (the scheduler's local executor runs the server as a process; the hub's
private environment travels in a file only its owner reads) and ``kubernetes`` (the scheduler's Kubernetes executor
runs it as a pod of ``image`` on the granted node and slice; the private environment travels in a Secret, and the
server is reached at the pod's DNS name — ``hub_spawner.kube``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

from jupyterhub.spawner import Spawner, SpawnException
from jupyterhub.utils import random_port
from traitlets import Bool, Callable, Dict, Enum, Float, Integer, List, Unicode, default
from traitlets.config import Config

from scheduler_core.model import parse_duration

from .examples import default_source
from .notebook_job import notebook_spec
from .profiles import DEFAULT_PROFILES, Profile, ProfileError, choose_profile, load_profiles, render_form
from .profiles import options_from_form as _options_from_form
from .progress import ROOM_REASONS, progress_event, startable_profiles
from .scheduler import NotebookJob, NotebookScheduler, SchedulerRefused, SchedulerUnavailable
from .teams import NoTeam, choose_team, teams_from_groups
from .zygote_supervisor import socket_path, warm_process

#: Bumped when the meaning of the saved state changes; ``load_state`` ignores state it cannot read.
STATE_VERSION = 1

#: Wait reasons that will not go away by waiting: the spawn fails at once with the scheduler's explanation.
REFUSING_REASONS = frozenset({"InvalidFlavour"})


def _default_secrets_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"shoal-hub-{os.getuid()}")


def _warm_socket(launcher: str, warm_start: bool, default_command: bool, secrets_dir: str) -> str | None:
    """Where the warm process for servers started so listens; ``None`` where warm starts do not apply: pods run
    the image's own server, and the warm process forks only the default command."""
    if launcher != "local" or not warm_start or not default_command:
        return None
    return socket_path(secrets_dir)


class ShoalSpawner(Spawner):  # type: ignore[misc]  # jupyterhub ships no type hints
    """Spawn each single-user server as a Shoal notebook job on a scheduler-granted MIG slice."""

    shoal_url = Unicode(
        help="Base URL of the Shoal API (default: $SHOAL_URL). The spawner calls it with the server's own hub "
             "token, so the job belongs to the hub user and their team.",
    ).tag(config=True)

    @default("shoal_url")
    def _default_shoal_url(self) -> str:
        return os.environ.get("SHOAL_URL", "http://127.0.0.1:8765")

    profile_list = List(
        Dict(), default_value=[dict(p) for p in DEFAULT_PROFILES],
        help="Profiles offered on the spawn page: dicts with slug, display_name, flavour, units, description, "
             "default. The choice is checked again on the server, whichever way it arrives.",
    ).tag(config=True)

    team_group_prefix = Unicode(
        "", help="Hub groups named PREFIX + TEAM make their members part of Shoal team TEAM.",
    ).tag(config=True)

    status_interval = Float(
        0.5, help="Seconds between reads of the notebook job's status while it waits and starts.",
    ).tag(config=True)

    notebook_time_limit = Unicode(
        "7d", help="Time limit of a notebook job (the idle reaper usually stops it long before).",
    ).tag(config=True)

    stop_grace_period = Float(
        10.0, help="Seconds a stopping notebook server gets between SIGTERM and SIGKILL.",
    ).tag(config=True)

    stop_timeout = Float(
        30.0, help="Seconds stop() waits for the scheduler to report the job finished.",
    ).tag(config=True)

    refuse_when_quota_full = Bool(
        True, help="Fail the spawn at once (with the reason) when the team's quota for the profile is full, "
                   "rather than queue behind the team's own notebooks.",
    ).tag(config=True)

    secrets_dir = Unicode(
        help="Directory (mode 0700) for the files that carry each server's hub token to its job.",
    ).tag(config=True)

    @default("secrets_dir")
    def _default_secrets_dir(self) -> str:
        return _default_secrets_dir()

    work_dir = Unicode(
        "~/shoal-notebooks/{username}",
        help="Working directory of the single-user server ({username} and the other Spawner fields expand).",
    ).tag(config=True)

    example_notebooks = Unicode(
        help="Directory whose *.ipynb are copied into a server's work_dir when it starts, each once and never over "
             "a file of that name (the user's edits); '' for none. Default: the repository's notebooks/ when Shoal "
             "runs from a checkout. Local launcher only (a Kubernetes image brings its own).",
    ).tag(config=True)

    @default("example_notebooks")
    def _default_example_notebooks(self) -> str:
        source = default_source()
        return str(source) if source is not None else ""

    warm_start = Bool(
        True, help="Local launcher: keep a warm process with the single-user server's imports done "
                   "(hub_spawner.zygote, started with the hub by deploy/jupyterhub_config.py, again if it died) and "
                   "fork each server from it, "
                   "with the server's own environment, directory and log; the notebook job's process relays "
                   "signals to it and ends as it ends. Servers start cold when it is off, absent or refuses, or "
                   "when `cmd` is not the default.",
    ).tag(config=True)

    warm_start_timeout = Float(
        30.0, help="Local launcher: seconds a notebook job's launcher waits for the warm process (still importing, "
                   "just after the hub started) before it starts the server cold.",
    ).tag(config=True)

    server_defaults = Bool(
        True, help="Local launcher: start servers with Shoal's defaults (hub_spawner.server_defaults): the "
                   "read-only extension manager, no news or update checks from the internet, no JupyterLab build "
                   "check, no jupyter_lsp server extension. Off: the environment's own Jupyter config alone.",
    ).tag(config=True)

    ready_check = Bool(
        True, help="Local launcher: start() returns once the server accepts connections on its port (tried every "
                   "`ready_check_interval`), so the hub's own check, which backs off exponentially, succeeds at its "
                   "first try; a job that ends meanwhile fails the spawn at once with the scheduler's message. "
                   "After `http_timeout` seconds the hub's own check takes over.",
    ).tag(config=True)

    ready_check_interval = Float(
        0.05, help="Seconds between the spawner's tries to connect to a starting server (`ready_check`).",
    ).tag(config=True)

    launcher = Enum(
        ["local", "kubernetes"], default_value="local",
        help="Who runs the server: 'local' (the scheduler's local executor, a process on its machine) or "
             "'kubernetes' (the scheduler's Kubernetes executor, a pod of `image` on the granted node and slice).",
    ).tag(config=True)

    namespace = Unicode(
        "shoal-jobs", help="Kubernetes launcher: the namespace of the scheduler's job pods (and of the Secrets "
                           "carrying each server's hub token).",
    ).tag(config=True)

    image = Unicode(
        "", help="Kubernetes launcher: the single-user image (needs jupyterhub-singleuser; Shoal's jobkit and "
                 "magics for %%gpujob).",
    ).tag(config=True)

    cluster_domain = Unicode("cluster.local", help="Kubernetes launcher: the cluster's DNS domain.").tag(config=True)

    notebook_port = Integer(8888, help="Kubernetes launcher: the port the server listens on in its pod.").tag(
        config=True)

    kube_client_factory = Callable(
        allow_none=True, default_value=None,
        help="Kubernetes launcher: Callable() -> kubernetes.client.ApiClient; default: the hub pod's own service "
             "account (in-cluster configuration).",
    ).tag(config=True)

    scheduler_factory = Callable(
        allow_none=True, default_value=None,
        help="Callable(spawner) -> NotebookScheduler; default: the Shoal client SDK on shoal_url with the "
             "server's hub token.",
    ).tag(config=True)

    @default("start_timeout")
    def _default_start_timeout(self) -> int:
        return 3600  # a notebook may queue for a slice; the spawn page shows why

    @default("cmd")
    def _default_cmd(self) -> list[str]:
        # ``jupyterhub-singleuser`` less the import that was most of its start (see ``hub_spawner.singleuser``).
        return [sys.executable, "-m", "hub_spawner.singleuser"]

    @default("options_form")
    def _default_options_form(self) -> Any:
        return ShoalSpawner._render_options_form

    @default("options_from_form")
    def _default_options_from_form(self) -> Any:
        return _options_from_form

    @default("apply_user_options")
    def _default_apply_user_options(self) -> Any:
        return ShoalSpawner._check_user_options

    @staticmethod
    def _check_user_options(spawner: ShoalSpawner, user_options: dict[str, Any]) -> None:
        """Refuse a bad choice when the spawn is requested (HTTP 400 with the reason), not after it started;
        ``start`` checks again, since this hook can be configured away."""
        try:
            choose_profile(spawner.profiles, user_options)
            choose_team(spawner.user.name, spawner.user_teams(), user_options.get("team"))
        except (ProfileError, NoTeam) as exc:
            raise SpawnException(str(exc), reason="user-options", status_code=400) from None

    # ------------------------------------------------------------------ state
    job_id = Unicode(allow_none=True, default_value=None)
    job_token = Unicode(allow_none=True, default_value=None)
    team = Unicode(allow_none=True, default_value=None)
    profile_slug = Unicode(allow_none=True, default_value=None)
    last_job_id = Unicode(allow_none=True, default_value=None)
    last_stop = Unicode("")
    env_file = Unicode(allow_none=True, default_value=None)
    status_poll_failures = Integer(0)

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        state["shoal_state_version"] = STATE_VERSION
        for key in ("job_id", "job_token", "team", "profile_slug", "env_file", "last_job_id", "last_stop"):
            value = getattr(self, key)
            if value:
                state[key] = value
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        version = state.get("shoal_state_version")
        if version is None and not state:
            return
        if version != STATE_VERSION:
            self.log.warning("ignoring %s's saved spawner state of version %r (this hub writes version %d)",
                             self._log_name, version, STATE_VERSION)
            return
        for key in ("job_id", "job_token", "team", "profile_slug", "env_file", "last_job_id", "last_stop"):
            if key in state:
                setattr(self, key, state[key])

    def clear_state(self) -> None:
        """Forget the running job; keep the last one and why it stopped, for the next spawn page."""
        super().clear_state()
        if self.job_id:
            self.last_job_id = self.job_id
        self.job_id = None
        self.job_token = None
        self.team = None
        self.profile_slug = None
        self.env_file = None

    # ------------------------------------------------------------------ form
    @property
    def profiles(self) -> list[Profile]:
        return load_profiles(self.profile_list)

    def user_teams(self) -> list[str]:
        return teams_from_groups((g.name for g in self.user.groups), self.team_group_prefix)

    @staticmethod
    def _render_options_form(spawner: ShoalSpawner) -> str:
        spawner._warm_up()   # the user is about to press Start: have the server's imports done by then
        return render_form(spawner.profiles, teams=spawner.user_teams(), notice=spawner.last_stop)

    # ------------------------------------------------------------------ scheduler seam
    _scheduler: NotebookScheduler | None = None

    def scheduler(self) -> NotebookScheduler:
        if self._scheduler is None:
            if self.scheduler_factory is not None:
                self._scheduler = self.scheduler_factory(self)
            else:
                from .shoal_client import ShoalClientScheduler
                token = self.job_token or self.api_token
                self._scheduler = ShoalClientScheduler(self.shoal_url, token)
        return self._scheduler

    async def _release_scheduler(self) -> None:
        if self._scheduler is not None:
            await self._scheduler.close()
            self._scheduler = None

    # ------------------------------------------------------------------ start
    _latest: NotebookJob | None = None
    _changed: asyncio.Event | None = None
    _alternatives: tuple[str, ...] = ()

    def _publish(self, job: NotebookJob) -> None:
        """Share the latest view of the job with ``progress``, which runs concurrently with ``start``."""
        self._latest = job
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.set()

    async def start(self) -> tuple[str, int]:
        try:
            profile = choose_profile(self.profiles, self.user_options or {})
        except ProfileError as exc:
            raise SpawnException(str(exc), reason="profile") from None
        try:
            team = choose_team(self.user.name, self.user_teams(), (self.user_options or {}).get("team"))
        except NoTeam as exc:
            raise SpawnException(str(exc), reason="team") from None

        self._changed = asyncio.Event()
        self._latest = None
        self.last_stop = ""
        self.team, self.profile_slug = team, profile.slug
        self.job_token = self.api_token
        await self._release_scheduler()  # a scheduler client from the last spawn holds the last token
        on_kubernetes = self.launcher == "kubernetes"
        if on_kubernetes:
            if not self.image:
                raise SpawnException("ShoalSpawner.image is not set: the Kubernetes launcher needs a single-user "
                                     "image", reason="config")
            self.port, self.ip = self.notebook_port, "0.0.0.0"   # each pod has its own address; the hub is outside
            command = [*self._pod_command(), *self.get_args()]
        else:
            if not self.port:
                self.port = random_port()
            self._warm_up()
            env_file = self._write_env_file()
            command = [sys.executable, "-m", "hub_spawner.launch", str(env_file), "--", *self.cmd, *self.get_args()]
        spec = notebook_spec(
            user=self.user.name, server_name=self.name, team=team, profile=profile, command=command,
            env={"JUPYTERHUB_USER": self.user.name}, image=self.image if on_kubernetes else None,
            time_limit=parse_duration(self.notebook_time_limit), grace_period=self.stop_grace_period,
        )
        try:
            job = await self.scheduler().submit(spec, idempotency_key=f"hub-{uuid.uuid4().hex}")
        except SchedulerRefused as exc:
            self._remove_env_file()
            raise SpawnException(_refusal_message(exc, team, profile), reason=f"shoal-{exc.code}") from None
        except SchedulerUnavailable as exc:
            self._remove_env_file()
            raise SpawnException(f"the GPU scheduler is not reachable ({exc}); try again in a minute",
                                 reason="shoal-unavailable", status_code=503) from None
        self.job_id = job.id
        self.log.info("%s: notebook job %s submitted for team %s on %s", self._log_name, job.id, team,
                      profile.flavour)
        self._publish(job)
        try:
            if on_kubernetes:
                # The pod waits for this Secret (a notebook's envFrom is not optional), so it may be made now.
                await self._kube_secrets().put(job.id, self._private_env(), labels={"shoal.io/hub-user": _label(
                    self.user.name)})
            job = await self._wait_until_running(job, profile)
            if not on_kubernetes and self.ready_check:
                job = await self._wait_until_listening(job, self.ip or "127.0.0.1", self.port)
        except BaseException:
            await self._cancel_quietly("the spawn did not complete")
            await self._remove_kube_secret()
            raise
        if on_kubernetes:
            from .kube import notebook_address
            return (notebook_address(job.id, self.namespace, self.cluster_domain), self.port)
        return (self.ip or "127.0.0.1", self.port)

    # ------------------------------------------------------------------ Kubernetes launcher
    _secrets: Any = None

    def _kube_secrets(self) -> Any:
        if self._secrets is None:
            from .kube import NotebookSecrets, in_cluster_client
            factory = self.kube_client_factory if self.kube_client_factory is not None else in_cluster_client
            self._secrets = NotebookSecrets(factory(), self.namespace)
        return self._secrets

    def _pod_command(self) -> list[str]:
        """``cmd`` as the pod runs it: a path on the hub's own machine (the local default) means nothing there."""
        local_default = self._default_cmd()
        return ["jupyterhub-singleuser"] if list(self.cmd) == local_default else list(self.cmd)

    def _private_env(self) -> dict[str, str]:
        """The hub's environment for the server, without what the hub process keeps for itself (``env_keep``: its
        PATH and locale are not the image's)."""
        return {k: str(v) for k, v in self.get_env().items() if v is not None and k not in self.env_keep}

    async def _remove_kube_secret(self) -> None:
        if self.launcher != "kubernetes" or not self.job_id:
            return
        try:
            await self._kube_secrets().delete(self.job_id)
        except Exception as exc:  # noqa: BLE001 - the API server's errors vary; the stop must go on
            self.log.warning("%s: deleting the Secret of job %s failed: %s", self._log_name, self.job_id, exc)

    async def _wait_until_running(self, job: NotebookJob, profile: Profile) -> NotebookJob:
        """Until the scheduler has granted the slice. The executor launches the server in the same step that
        binds it, so from ADMITTED on the hub's own wait for the server's HTTP answer takes over."""
        while True:
            if job.state in ("ADMITTED", "RUNNING"):
                return job
            if job.finished:
                raise SpawnException(f"your notebook job {job.id} ended before its server started "
                                     f"({job.state}): {job.message or 'no message from the scheduler'}",
                                     reason="shoal-job-ended")
            if job.pending and (job.reason in REFUSING_REASONS
                                or (job.reason == "QuotaFull" and self.refuse_when_quota_full)):
                raise SpawnException(_quota_message(job, profile), reason=f"shoal-{job.reason}")
            await asyncio.sleep(self.status_interval)
            job = await self._read_job(job.id)
            self._alternatives = await self._startable_now(job, profile)
            self._publish(job)

    async def _wait_until_listening(self, job: NotebookJob, ip: str, port: int) -> NotebookJob:
        """Until the granted server accepts connections; its job's status is read every ``status_interval`` so a
        server that exits (bad config, a crash) fails the spawn with the scheduler's word, not the hub's timeout."""
        deadline = time.monotonic() + self.http_timeout
        next_read = time.monotonic() + self.status_interval
        while time.monotonic() < deadline:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout=1.0)
            except (OSError, asyncio.TimeoutError):
                pass
            else:
                writer.close()
                return job
            if time.monotonic() >= next_read:
                job = await self._read_job(job.id)
                self._publish(job)
                next_read = time.monotonic() + self.status_interval
                if job.finished or job.pending:
                    raise SpawnException(f"your notebook server (job {job.id}) ended before it answered "
                                         f"({job.state}): {job.message or 'see the job log: shoal logs ' + job.id}",
                                         reason="shoal-job-ended")
            await asyncio.sleep(self.ready_check_interval)
        self.log.warning("%s: server of job %s not listening on %s:%d after %d s; the hub's check takes over",
                         self._log_name, job.id, ip, port, self.http_timeout)
        return job

    async def _startable_now(self, job: NotebookJob, profile: Profile) -> tuple[str, ...]:
        """Other profiles that could start now while this one waits for room (names, for the spawn page)."""
        if not job.pending or job.reason not in ROOM_REASONS:
            return ()
        try:
            room = await self.scheduler().room_now(job.team or profile.flavour)
        except (SchedulerRefused, SchedulerUnavailable) as exc:
            self.log.debug("%s: no room figures for other profiles: %s", self._log_name, exc)
            return ()
        return tuple(p.display_name for p in startable_profiles(self.profiles, profile.slug, room))

    async def _read_job(self, job_id: str) -> NotebookJob:
        """The job's status; a scheduler briefly unreachable is retried a few times before giving up."""
        for attempt in range(5):
            try:
                job = await self.scheduler().get(job_id)
                self.status_poll_failures = 0
                return job
            except SchedulerUnavailable:
                self.status_poll_failures += 1
                if attempt == 4:
                    raise
                await asyncio.sleep(self.status_interval * (attempt + 1))
        raise AssertionError("unreachable")

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        """One event per change of the job's status, from submission until the server runs."""
        last: dict[str, Any] | None = None
        while True:
            if self._changed is None:
                self._changed = asyncio.Event()
            job = self._latest
            if job is not None:
                event = dict(progress_event(job, time.time(), self._alternatives))
                if event != last:
                    last = event
                    yield event
                if job.state == "RUNNING" or job.finished:
                    return
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=self.status_interval * 5)
            except asyncio.TimeoutError:
                if not self._spawn_pending:
                    return

    # ------------------------------------------------------------------ poll / stop
    async def poll(self) -> int | None:
        if not self.job_id:
            return 0
        try:
            job = await self.scheduler().get(self.job_id)
        except SchedulerUnavailable as exc:
            self.log.warning("%s: cannot read job %s (%s); assuming it still runs", self._log_name, self.job_id, exc)
            return None
        except SchedulerRefused as exc:
            self.log.warning("%s: job %s is gone (%s)", self._log_name, self.job_id, exc.message)
            return 1
        if job.finished:
            self._note_stop(job)
            return job.exit_code if job.exit_code is not None else 1
        if job.pending and not self._spawn_pending:
            return 1  # re-queued after it ran (its node failed): the server is gone; the hub will say so
        return None

    async def stop(self, now: bool = False) -> None:
        """Cancel the notebook job: the scheduler signals the server and releases the slice at once."""
        if not self.job_id:
            return
        job = await self._cancel_quietly("stopped from the hub")
        deadline = time.monotonic() + (0 if now else self.stop_timeout)
        while job is not None and not job.finished and time.monotonic() < deadline:
            await asyncio.sleep(self.status_interval / 2)
            try:
                job = await self.scheduler().get(self.job_id)
            except (SchedulerUnavailable, SchedulerRefused):
                break
        if job is not None:
            self._note_stop(job)
        self._remove_env_file()
        await self._remove_kube_secret()
        await self._release_scheduler()

    async def _cancel_quietly(self, reason: str) -> NotebookJob | None:
        if not self.job_id:
            return None
        try:
            return await self.scheduler().cancel(self.job_id, reason=reason)
        except (SchedulerUnavailable, SchedulerRefused) as exc:
            self.log.warning("%s: cancel of job %s failed: %s", self._log_name, self.job_id, exc)
            return None

    def _note_stop(self, job: NotebookJob) -> None:
        """Keep the scheduler's word on why the job ended (the reaper's reason, say) for the next spawn page."""
        if job.message and job.message != "stopped from the hub":
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.finished_at or time.time()))
            self.last_stop = f"Your last server ({job.id}) stopped at {when}: {job.message}"

    # ------------------------------------------------------------------ warm starts (local launcher)
    def _warm_socket(self) -> str | None:
        """The warm process this spawner's servers may fork from, if warm starts apply to them."""
        return _warm_socket(self.launcher, self.warm_start, list(self.cmd) == self._default_cmd(), self.secrets_dir)

    @classmethod
    def warm_at_hub_start(cls, config: Config) -> bool:
        """Start the warm process as the hub starts, so the first spawn after ``make up`` forks too (it waited ~3 s
        of imports otherwise). Called at the end of ``jupyterhub_config.py`` with its ``c``, after any extra config,
        so it judges by the settings the spawners will have; their own ``_warm_up`` later finds this process
        running. Returns whether warm starts apply."""
        own, base = config.ShoalSpawner, config.Spawner
        path = _warm_socket(own.get("launcher", cls.launcher.default_value),
                            own.get("warm_start", cls.warm_start.default_value),
                            "cmd" not in own and "cmd" not in base,
                            own.get("secrets_dir") or _default_secrets_dir())
        if path is None:
            return False
        warm_process(path).ensure()
        return True

    def _warm_up(self) -> None:
        path = self._warm_socket()
        if path is not None:
            warm_process(path).ensure()

    # ------------------------------------------------------------------ the private environment file
    def _write_env_file(self) -> Path:
        directory = Path(self.secrets_dir)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        path = directory / f"{uuid.uuid4().hex}.json"
        env = {k: v for k, v in self.get_env().items() if v is not None}
        if not self.server_defaults:
            env["SHOAL_SERVER_DEFAULTS"] = "0"
        cwd = os.path.expanduser(self.format_string(self.work_dir)) if self.work_dir else None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"env": env, "cwd": cwd, "examples": self.example_notebooks or None,
                       "zygote": self._warm_socket(), "zygote_timeout": self.warm_start_timeout}, handle)
        self.env_file = str(path)
        return path

    def _remove_env_file(self) -> None:
        if self.env_file:
            Path(self.env_file).unlink(missing_ok=True)
            self.env_file = None


def _label(value: str) -> str:
    """A label value from a hub user name (which may hold '@' and other characters a label may not)."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in value)[:63].strip("-_.")
    return cleaned or "user"


def _refusal_message(exc: SchedulerRefused, team: str, profile: Profile) -> str:
    detail = "; ".join(f"{k}: {v}" for k, v in exc.fields.items())
    what = f"the scheduler refused a {profile.display_name} notebook for team {team}: {exc.message}"
    return f"{what} ({detail})" if detail else what


def _quota_message(job: NotebookJob, profile: Profile) -> str:
    why = job.reason_message or job.reason or ""
    return (f"Team {job.team or '?'} cannot have another {profile.display_name} now: {why}. "
            f"Pick a smaller profile, stop one of your team's other servers, or ask your team's admin "
            f"for more {profile.flavour} quota.")
