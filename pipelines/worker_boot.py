"""One SDK worker's start, as Beam's container boot program does it, for the worker pool of
``pipelines.portable``: a program, run as a file by the worker's Python.

    WORKER_PYTHON worker_boot.py --install_root DIR --id=... --provision_endpoint=... \\
        --artifact_endpoint=... --control_endpoint=... --logging_endpoint=...

1. asks the runner's provision service for the job (its options, its staged artifacts);
2. fetches the staged artifacts through the artifact retrieval service (what ``--setup_file``,
   ``--extra_package`` and Beam's own setup.py staging put there);
3. ``pip install --no-deps`` of the job's packages (the names of ``extra_packages.txt`` in
   their order, then ``workflow.tar.gz``) into a folder of ``--install_root`` named by the
   packages' contents, once however many workers of the job start (a file lock);
4. replaces itself (same process id) with ``apache_beam.runners.worker.sdk_worker_main``,
   that folder first on ``PYTHONPATH`` and the job's options in ``PIPELINE_OPTIONS``.

The worker's Python holds the requirements (Beam, the libraries the rules use) and need
not hold corpusforge: the job brings its own code. A staged ``requirements.txt`` is not
installed (the worker holds the requirements, and a worker has no package index to reach).

This file imports nothing of corpusforge (the worker's Python may not have it): only the
standard library, grpc and Beam.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys

import grpc
from apache_beam.portability import common_urns
from apache_beam.portability.api import (
    beam_artifact_api_pb2,
    beam_artifact_api_pb2_grpc,
    beam_provision_api_pb2,
    beam_provision_api_pb2_grpc,
    beam_runner_api_pb2,
)
from google.protobuf import json_format

EXTRA_PACKAGES_FILE = "extra_packages.txt"  # Beam's stager: the --extra_package names, in order
WORKFLOW_TARBALL = "workflow.tar.gz"  # Beam's stager: the sdist built from a --setup_file named setup.py
INSTALLED_MARK = ".installed"
POOL_WORKER_MARK = "--corpusforge_pool_worker"  # on the worker's command line (benchmarks/c4_scale.py)


def provision(endpoint: str, worker_id: str):
    with grpc.insecure_channel(endpoint) as channel:
        stub = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel)
        return stub.GetProvisionInfo(beam_provision_api_pb2.GetProvisionInfoRequest(), metadata=[("worker_id", worker_id)]).info


def staged_name(artifact) -> str | None:
    """The file name a staged artifact has on a worker (its STAGING_TO role), or ``None``."""
    if artifact.role_urn == common_urns.artifact_roles.STAGING_TO.urn:
        payload = beam_runner_api_pb2.ArtifactStagingToRolePayload()
        payload.ParseFromString(artifact.role_payload)
        return payload.staged_name
    if artifact.role_urn == common_urns.artifact_roles.PIP_REQUIREMENTS_FILE.urn:
        return "requirements.txt"
    return None


def fetch(endpoint: str, dependencies, folder: str) -> dict[str, str]:
    """Each named artifact of ``dependencies`` written under ``folder``: name -> path."""
    os.makedirs(folder, exist_ok=True)
    files = {}
    with grpc.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
        stub = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(channel)
        for artifact in dependencies:
            name = staged_name(artifact)
            if not name or os.path.basename(name) != name:
                continue
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                for chunk in stub.GetArtifact(beam_artifact_api_pb2.GetArtifactRequest(artifact=artifact)):
                    f.write(chunk.data)
            files[name] = path
    return files


def job_packages(files: dict[str, str]) -> list[str]:
    """The staged packages to install, in the order Beam's boot program installs them."""
    packages = []
    if EXTRA_PACKAGES_FILE in files:
        with open(files[EXTRA_PACKAGES_FILE], encoding="utf-8") as f:
            packages += [files[name] for name in (line.strip() for line in f) if name in files]
    if WORKFLOW_TARBALL in files:
        packages.append(files[WORKFLOW_TARBALL])
    return packages


def install(packages: list[str], install_root: str) -> str:
    """``packages`` installed (``pip install --no-deps``) into a folder of ``install_root``
    named by their contents; returns it. Workers of one job share it: the first installs
    under a lock, the others wait and reuse it."""
    digest = hashlib.sha256()
    for path in packages:
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    os.makedirs(install_root, exist_ok=True)
    target = os.path.join(install_root, digest.hexdigest()[:16])
    with open(target + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(target, INSTALLED_MARK)):
            return target
        shutil.rmtree(target, ignore_errors=True)  # a worker killed mid-install left it half done
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                   "--disable-pip-version-check", "--no-cache-dir", "--target", target, *packages]
        # pip's output to stderr: the pool never reads a worker's stdout (a full pipe would block it)
        result = subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr)
        if result.returncode:
            raise SystemExit(f"worker boot: pip install of the job's packages ({', '.join(map(os.path.basename, packages))}) "
                             f"failed with status {result.returncode} on {sys.executable}")
        open(os.path.join(target, INSTALLED_MARK), "w").close()
    return target


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="worker_boot.py")
    parser.add_argument("--install_root", required=True, help="where the jobs' staged packages are installed")
    for flag in ("id", "logging_endpoint", "artifact_endpoint", "provision_endpoint", "control_endpoint"):
        parser.add_argument(f"--{flag}", default="")
    args, _ = parser.parse_known_args(argv)
    info = provision(args.provision_endpoint, args.id)
    env = dict(os.environ)
    files = fetch(args.artifact_endpoint or args.provision_endpoint, info.dependencies,
                  os.path.join(args.install_root, "staged", args.id))
    packages = job_packages(files)
    if packages:
        folder = install(packages, args.install_root)
        env["PYTHONPATH"] = os.pathsep.join([folder] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    shutil.rmtree(os.path.join(args.install_root, "staged", args.id), ignore_errors=True)
    env["WORKER_ID"] = args.id
    env["PIPELINE_OPTIONS"] = json_format.MessageToJson(info.pipeline_options)
    env["CONTROL_API_SERVICE_DESCRIPTOR"] = f'url: "{args.control_endpoint}"'
    env["LOGGING_API_SERVICE_DESCRIPTOR"] = f'url: "{args.logging_endpoint}"'
    sys.stdout.flush()
    sys.stderr.flush()
    # The last argument (sdk_worker_main reads none) names the process for ps and the benchmarks' tally.
    os.execve(sys.executable, [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main", f"{POOL_WORKER_MARK}={args.id}"], env)


if __name__ == "__main__":
    main(sys.argv[1:])
