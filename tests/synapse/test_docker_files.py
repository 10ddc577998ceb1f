"""docker/ cannot be built on machines without a Docker engine, so its promises are
checked by reading: CPU-only torch first, the roles the entrypoint runs, the services."""

import subprocess
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def test_compose_has_pgvector_database_web_and_worker():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "web", "worker"}
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert services["web"]["command"] == ["web"]
    assert services["worker"]["command"] == ["worker"]
    for role in ("web", "worker"):
        environment = services[role]["environment"]
        assert environment["DATABASE_URL"].startswith("postgresql://")
        assert {"SECRET_KEY", "JWT_SIGNING_KEY", "SYNAPSE_CREDENTIALS_KEYS",
                "ALLOWED_HOSTS"} <= set(environment)
        # The worker sends the queued password-reset mail (minds.passwords).
        assert {"SYNAPSE_PUBLIC_URL", "EMAIL_HOST", "EMAIL_PORT"} <= set(environment)
        assert services[role]["depends_on"]["db"]["condition"] == "service_healthy"


def test_web_and_worker_count_metrics_into_one_folder():
    """One scrape of the web service sums the embedding worker's counters only when both
    containers write to one folder (docs/scaling.md, "Metrics")."""
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    folders = set()
    for role in ("web", "worker"):
        folder = services[role]["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert f"metrics:{folder}" in services[role]["volumes"]
        folders.add(folder)
    assert len(folders) == 1
    # In memory, writable by the image's user (uid 10001, docker/Dockerfile).
    options = compose["volumes"]["metrics"]["driver_opts"]
    assert options["type"] == "tmpfs" and "uid=10001" in options["o"].split(",")
    assert "--uid 10001" in (DOCKER / "Dockerfile").read_text()


def test_dockerfile_installs_cpu_torch_before_anything_else():
    lines = [line.strip() for line in (DOCKER / "Dockerfile").read_text().splitlines()]
    installs = [line for line in lines if "pip install" in line]
    assert "whl/cpu" in "\n".join(lines)
    assert "torch==2.13.0" in installs[0] and "$TORCH_INDEX" in installs[0]
    assert all("-c requirements/constraints.txt" in line for line in installs)
    copied = {line.split()[1] for line in lines if line.startswith("COPY ")}
    for path in copied - {"--chmod=0755"}:
        assert (DOCKER.parent / path).exists(), path
    assert "USER synapse" in lines


def test_entrypoint_is_valid_shell_with_web_and_worker_roles():
    entrypoint = DOCKER / "entrypoint.sh"
    assert subprocess.run(["sh", "-n", str(entrypoint)]).returncode == 0
    text = entrypoint.read_text()
    assert "wait_for_db" in text and "migrate --noinput" in text
    assert "gunicorn -c synapse/gunicorn_conf.py" in text
    assert "embed_worker" in text
