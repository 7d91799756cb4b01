"""beam_setup.py, tested the way a Beam worker uses it: sdist -> fresh venv -> import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

from pipelines.options import build_worker_package, stage_setup_file

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("corpus", "dedup", "pipelines", "model")


def test_sdist_from_beam_setup_installs_into_a_fresh_venv(tmp_path):
    tarball = Path(build_worker_package(str(ROOT / "beam_setup.py"), str(tmp_path / "dist")))
    with tarfile.open(tarball) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert expected <= names, expected - names
    assert {"setup.py", "requirements.txt"} <= names

    # What `pip install <sdist>` does on a worker: build a wheel from the sdist, install it.
    # The build uses this environment's setuptools (a bare venv has no wheel builder).
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(wheels), str(tarball)]
    subprocess.run(build, check=True, capture_output=True, text=True)
    (wheel,) = wheels.glob("corpusforge-*.whl")
    venv = tmp_path / "worker-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True, text=True)
    # Dependencies come from this environment (a worker would pip-install them); the four
    # packages themselves must come from the sdist, never from this checkout.
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = "import corpus, dedup, pipelines, model, corpus.warc, corpus.shards, pipelines.cli, pipelines.sources; print('\\n'.join(m.__file__ for m in (corpus, dedup, pipelines, model)))"
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == 4 and all(path.startswith(str(venv)) for path in out), out
    requires = subprocess.check_output([str(python), "-m", "pip", "show", "corpusforge"], text=True)
    assert "apache-beam" in requires and "warcio" in requires


def test_setup_file_option_becomes_an_extra_package():
    args = stage_setup_file(["--runner", "DataflowRunner", "--setup_file", str(ROOT / "beam_setup.py"), "--region", "us-central1"])
    assert "--setup_file" not in args
    assert args[:4] == ["--runner", "DataflowRunner", "--region", "us-central1"]
    assert args[4] == "--extra_package" and args[5].endswith("corpusforge-0.1.0.tar.gz") and Path(args[5]).is_file()
    shutil.rmtree(Path(args[5]).parent)
    assert stage_setup_file(["--setup_file", "./setup.py"]) == ["--setup_file", "./setup.py"]
