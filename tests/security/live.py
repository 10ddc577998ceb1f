"""A real server on its own throwaway embedded cluster, for tests that need processes.

The cluster lives in a fresh SYNAPSE_DATA_DIR (not the test session's), is migrated and
given a user, a mind and a Mind Key with the project's own management commands, and is
destroyed at the end. Servers are gunicorn (synapse/gunicorn_conf.py) or runserver.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "live server password 7"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LiveCluster:
    data_dir: Path
    env: dict
    mind_id: str
    key: str
    username: str = "live_owner"

    def manage(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.strip()

    @property
    def postmaster_pid(self) -> int:
        return int((self.data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def make_cluster(**extra_env: str) -> LiveCluster:
    data_dir = Path(tempfile.mkdtemp(prefix="synapse-live-"))
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update({"SYNAPSE_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "synapse.settings",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DEBUG": "false",
                "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1", **extra_env})
    cluster = LiveCluster(data_dir, env, "", "")
    cluster.manage("migrate", "--noinput")
    cluster.manage("createsuperuser", "--noinput", "--username", cluster.username,
                   "--email", "live@example.com")
    cluster.mind_id = cluster.manage("create_mind", "Live Mind", "--owner", cluster.username)
    cluster.key = cluster.manage("issue_key", cluster.mind_id, "--name", "live agent")
    return cluster


def destroy_cluster(cluster: LiveCluster) -> None:
    from synapse import embedded_db

    embedded_db.destroy(cluster.data_dir)


class Server:
    """One server process; its combined stdout and stderr are kept in a file."""

    def __init__(self, cluster: LiveCluster, kind: str = "gunicorn", workers: int = 2,
                 threads: int = 4, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = cluster.data_dir / f"{kind}-{self.port}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        env = {**cluster.env, "SYNAPSE_BIND": f"127.0.0.1:{self.port}",
               "WEB_CONCURRENCY": str(workers), "SYNAPSE_THREADS": str(threads), **(env or {})}
        if kind == "gunicorn":
            args = [str(Path(sys.executable).with_name("gunicorn")), "-c",
                    "synapse/gunicorn_conf.py"]
        else:
            args = [sys.executable, "manage.py", "runserver", "--noreload",
                    f"127.0.0.1:{self.port}"]
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_ready()

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                httpx.get(self.url + "/auth/me", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise AssertionError(f"server did not start:\n{self.output()}")

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> str:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        return self.log_path.read_text(errors="replace")
