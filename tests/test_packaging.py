"""beam_setup.py, tested the way a Beam worker uses it: sdist -> fresh venv -> import -> run.

Workers install requirements.txt only (no torch, no tokenizer libraries) unless the job
asks for an extra; the slow test resolves the sdist's dependencies from the package index for
a bare venv, installs it there and runs the C4 job, then the tokenize job with its extra.
"""

from __future__ import annotations

import email.parser
import gzip
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions, TypeOptions
from packaging.utils import canonicalize_name

from pipelines.beam_package import (
    WORKER_EXTRAS_FILE,
    build_worker_package,
    construction_check_options,
    stage_setup_file,
)

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("corpus", "dedup", "pipelines", "model")
MODEL_LIBRARIES = {"torch", "tokenizers", "tiktoken", "safetensors"}  # requirements-model.txt
EVAL_SCORERS = {"rouge-score", "sacrebleu"}  # requirements-model.txt too: eval's generative tasks (projects, not modules)
TOKENIZE_LIBRARIES = {"tokenizers", "tiktoken"}  # what model/tokenizer.py imports
WET = "warc/ccscalatools/filter_test_1.wet.gz"
BADWORDS = "badwords/en"
INSTALL_TIMEOUT_S = 1800  # a cold pip cache downloads apache-beam, pyarrow, pandas, ... (~300 MB)


def sdist_requirements(tarball: Path) -> tuple[set[str], dict[str, set[str]]]:
    """(projects every install gets, {extra: its projects}) from the sdist's PKG-INFO."""
    with tarfile.open(tarball) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")]
        metadata = email.parser.Parser().parsestr(tar.extractfile(member).read().decode("utf-8"))
    always, extras = set(), {}
    for requirement in metadata.get_all("Requires-Dist") or []:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if extra:
            extras.setdefault(extra.group(1), set()).add(name)
        else:
            always.add(name)
    return always, extras


def pip_into(python: Path) -> list[str]:
    """This environment's pip, installing into (and resolving for) the environment of ``python``."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


def sdist_wheel(tarball: Path, folder: Path) -> Path:
    """The wheel pip builds from ``tarball`` when it installs it, built with this environment's
    setuptools (``--no-build-isolation``: no build environment fetched from the index)."""
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(folder), str(tarball)]
    subprocess.run(build, check=True, capture_output=True, text=True)
    (wheel,) = folder.glob("corpusforge-*.whl")
    return wheel


def venv_site(python: Path, env: dict | None = None) -> Path:
    """The site-packages folder of the venv whose interpreter is ``python``."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.check_output([str(python), "-c", code], text=True, env=env).strip())


def link_installed(resolved: dict[str, str], view: Path) -> set[str]:
    """Symlink into ``view`` the files (as their RECORD lists them) of each distribution in
    ``resolved`` (name -> version) that this environment holds at that very version; returns the
    names linked. A folder on a venv's path through a ``.pth`` file, ``view`` then holds those
    distributions as pip would have unpacked them; pip installs the others."""
    linked = set()
    for name, version in resolved.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != version or dist.files is None:
            continue
        for file in dist.files:
            if ".." in file.parts:  # console scripts in bin/: the jobs run as `python -m`
                continue
            target = view / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(dist.locate_file(file))
        linked.add(name)
    return linked


@pytest.fixture(scope="module")
def worker_sdist(tmp_path_factory) -> Path:
    """The workers' sdist as ``--setup_file ./beam_setup.py`` builds it (no extra), once for the module."""
    return Path(build_worker_package(str(ROOT / "beam_setup.py"), str(tmp_path_factory.mktemp("dist"))))


@pytest.fixture(scope="module")
def tokenize_sdist(tmp_path_factory) -> Path:
    """The tokenize job's workers' sdist (the ``tokenize`` extra recorded), once for the module."""
    return Path(build_worker_package(str(ROOT / "beam_setup.py"), str(tmp_path_factory.mktemp("dist-tokenize")), extras=["tokenize"]))


def test_sdist_from_beam_setup_installs_into_a_fresh_venv(worker_sdist, tmp_path):
    tarball = worker_sdist
    with tarfile.open(tarball) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert expected <= names, expected - names
    assert {"setup.py", "requirements.txt", "requirements-model.txt", WORKER_EXTRAS_FILE} <= names

    # What `pip install <sdist>` does on a worker: build a wheel from the sdist, install it.
    # The build uses this environment's setuptools (a bare venv has no wheel builder), and this
    # environment's pip installs into the venv (`pip --python`): the venv needs no pip of its own.
    wheel = sdist_wheel(tarball, tmp_path / "wheels")
    venv = tmp_path / "worker-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a developer's PYTHONPATH=checkout is not the worker's
    subprocess.run([*pip_into(python), "install", "-q", "--no-deps", "--no-index", str(wheel)], env=bare, check=True, capture_output=True, text=True)
    # Dependencies come from this environment (the slow test below installs them from the
    # index); the five packages themselves must come from the sdist, never from this checkout.
    (venv_site(python, bare) / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = "import common, corpus, dedup, pipelines, model, common.storage, corpus.warc, corpus.shards, pipelines.cli, pipelines.sources; print('\\n'.join(m.__file__ for m in (common, corpus, dedup, pipelines, model)))"
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, env=bare, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    out = out.stdout.split()
    assert len(out) == 5 and all(path.startswith(str(venv)) for path in out), out
    requires = subprocess.check_output([*pip_into(python), "show", "corpusforge"], text=True, env=bare)
    assert "apache-beam" in requires and "warcio" in requires and "torch" not in requires


def test_default_worker_sdist_requires_no_model_library(worker_sdist):
    always, extras = sdist_requirements(worker_sdist)
    assert {"apache-beam", "warcio", "nltk", "pyarrow"} <= always
    assert not always & MODEL_LIBRARIES, always & MODEL_LIBRARIES
    # Still there by hand: pip install 'corpusforge-0.1.0.tar.gz[model]' / [tokenize].
    assert extras == {"model": MODEL_LIBRARIES | EVAL_SCORERS, "tokenize": TOKENIZE_LIBRARIES}


def test_tokenize_worker_sdist_requires_the_tokenizer_libraries_but_not_torch(tokenize_sdist):
    tarball = tokenize_sdist
    always, _ = sdist_requirements(tarball)
    assert always & MODEL_LIBRARIES == TOKENIZE_LIBRARIES
    assert {"apache-beam", "warcio"} <= always
    with tarfile.open(tarball) as tar:
        recorded = tar.extractfile(f"corpusforge-0.1.0/{WORKER_EXTRAS_FILE}").read().decode()
    assert [line for line in recorded.splitlines() if not line.startswith("#")] == ["tokenize"]


def test_unknown_worker_extra_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="unknown extra.*gpu.*known: tokenize, model"):
        build_worker_package(str(ROOT / "beam_setup.py"), str(tmp_path), extras=["gpu"])


def test_setup_file_option_becomes_an_extra_package():
    args = stage_setup_file(["--runner", "DataflowRunner", "--setup_file", str(ROOT / "beam_setup.py"), "--region", "us-central1"])
    assert "--setup_file" not in args
    assert args[:4] == ["--runner", "DataflowRunner", "--region", "us-central1"]
    assert args[4] == "--extra_package" and args[5].endswith("corpusforge-0.1.0.tar.gz") and Path(args[5]).is_file()
    assert not sdist_requirements(Path(args[5]))[0] & MODEL_LIBRARIES
    shutil.rmtree(Path(args[5]).parent)
    args = stage_setup_file(["--setup_file", str(ROOT / "beam_setup.py")], extras=("tokenize",))
    assert args[0] == "--extra_package" and sdist_requirements(Path(args[1]))[0] & MODEL_LIBRARIES == TOKENIZE_LIBRARIES
    shutil.rmtree(Path(args[1]).parent)
    assert stage_setup_file(["--setup_file", "./setup.py"]) == ["--setup_file", "./setup.py", "--no_pipeline_type_check"]


def pins(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}


def project_wheel(tmp_path: Path) -> Path:
    """The project's wheel, built from a copy of the files git tracks or would track (not the checkout itself)."""
    tree = tmp_path / "tree"
    listed = subprocess.check_output(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (ROOT / name).exists():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name, follow_symlinks=False)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(tmp_path / "wheels"), str(tree)]
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = (tmp_path / "wheels").glob("corpusforge-*.whl")
    return wheel


def test_setup_file_corpusforge_builds_the_worker_sdist_from_an_installed_wheel(tmp_path):
    # No checkout: the project's wheel, built from a copy of this tree and installed (not
    # editable) into a fresh venv whose other libraries come from this environment; then
    # `python -m pipelines.beam_package --setup_file corpusforge` run there, from an empty folder.
    wheel = project_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    bare = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NLTK_DATA")}
    subprocess.run([*pip_into(python), "install", "-q", "--no-deps", "--no-index", str(wheel)], env=bare, check=True, capture_output=True, text=True)
    site = venv_site(python, bare)
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert (site / "pipelines" / "data" / "beam_setup.py").read_bytes() == (ROOT / "beam_setup.py").read_bytes()
    # Every module of the checkout is in the wheel: a sub-package pyproject.toml does not list
    # (pipelines/beam/ once) would be missing from every installed corpusforge.
    sources = {str(p.relative_to(ROOT)) for pkg in (*PACKAGES, "common", "samplecrawl") for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= {str(p.relative_to(site)) for p in site.rglob("*.py")}, sorted(sources - {str(p.relative_to(site)) for p in site.rglob("*.py")})
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    done = subprocess.run([str(python), "-m", "pipelines.beam_package", "--setup_file", "corpusforge", "--dist-dir", str(tmp_path / "dist"),
                           "--extras", "tokenize"], cwd=empty, env=bare, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    tarball = Path(done.stdout.strip().splitlines()[-1])
    with tarfile.open(tarball) as tar:
        files = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name and m.isfile()}
        text = {name: tar.extractfile(files[name]).read().decode() for name in ("setup.py", "requirements.txt",
                                                                               "requirements-model.txt", WORKER_EXTRAS_FILE)}
    installed = {str(p.relative_to(site)) for pkg in PACKAGES for p in (site / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert installed <= set(files), installed - set(files)
    assert {"pipelines/worker_boot.py", "corpus/data/webtext_domain_blocklist.txt"} <= set(files)
    assert text["setup.py"] == (ROOT / "beam_setup.py").read_text()
    # The pins come back from the wheel's metadata (no comment survives it: not the checkout's files).
    for name in ("requirements.txt", "requirements-model.txt"):
        assert pins(text[name]) == pins((ROOT / name).read_text()) and "#" not in text[name], name
    assert pins(text[WORKER_EXTRAS_FILE]) == {"tokenize"}
    always, _ = sdist_requirements(tarball)
    assert {"apache-beam", "nltk"} | TOKENIZE_LIBRARIES <= always and "torch" not in always


def test_setup_file_corpusforge_in_a_checkout_is_the_checkouts_beam_setup(tmp_path):
    tarball = Path(build_worker_package("corpusforge", str(tmp_path)))
    with tarfile.open(tarball) as tar:
        (setup,) = [m for m in tar.getmembers() if m.name.endswith("/setup.py")]
        (requirements,) = [m for m in tar.getmembers() if m.name.endswith("/requirements.txt")]
        assert tar.extractfile(setup).read() == (ROOT / "beam_setup.py").read_bytes()
        assert tar.extractfile(requirements).read() == (ROOT / "requirements.txt").read_bytes()
    with pytest.raises(FileNotFoundError, match="no such file .*--setup_file corpusforge"):
        build_worker_package(str(tmp_path / "beam_setup.py"), str(tmp_path))


@pytest.mark.parametrize("given, expected", [
    ([], ["--no_pipeline_type_check"]),
    (["--pipeline_type_check"], ["--pipeline_type_check"]),
    (["--no_pipeline_type_check"], ["--no_pipeline_type_check"]),
    (["--runner", "DirectRunner"], ["--runner", "DirectRunner", "--no_pipeline_type_check"]),
])
def test_beams_construction_type_check_is_off_unless_asked_for(given, expected):
    args = construction_check_options(given)
    assert args == expected
    assert PipelineOptions(args).view_as(TypeOptions).pipeline_type_check == ("--pipeline_type_check" in given)


@pytest.mark.parametrize("argv", [["--help"], ["c4", "--help"], ["read", "--help"], ["tokenize", "--help"]])
def test_cli_help_imports_no_model_library(argv):
    """A worker (or a laptop without the `model` extra) runs the corpus jobs: their CLI path
    must never import torch; tokenize's never imports torch either."""
    code = ("import sys; from pipelines import cli\n"
            f"try: cli.main({argv!r})\nexcept SystemExit: pass\n"
            f"print('imported:', *(m for m in {sorted(MODEL_LIBRARIES)!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout[-500:]


def _run(command: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done


def _index_reachable() -> str | None:
    """None when pip reaches its package index, else why not."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "apache-beam", "--timeout", "30", "--retries", "1"],
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return "`pip index versions apache-beam` did not answer in 180 s"
    if done.returncode or "2.77.0" not in done.stdout:
        return f"`pip index versions apache-beam` failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return None


@pytest.mark.slow
def test_worker_sdist_installs_from_the_index_without_torch_and_runs_c4(real_data, worker_sdist, tokenize_sdist, tmp_path):
    """A worker's install: `pip install corpusforge-0.1.0.tar.gz` with its dependencies resolved
    from the package index for a bare venv, then the C4 job on a real WET file there; then the
    tokenize job's sdist, whose extra pip installs from the index: the tokenizer libraries only.

    What it proves and how: pip resolves the sdist for the bare venv against the index
    (``--dry-run --ignore-installed --report``: every project and version a worker gets), and
    no model library is among them. Of that resolution, what this environment holds at the
    very same version is linked into the venv's path rather than unpacked again (pip unpacking
    ~75 wheels took ~370 s of the suite under load and proves nothing of ours). pip then
    installs the sdist's wheel with its dependencies into the venv, finds the linked ones
    satisfied and installs the rest from the index; the venv then holds exactly the
    resolution (``pip list``), and no torch."""
    unreachable = _index_reachable()
    if unreachable:
        pytest.skip(f"the package index is unreachable, so a worker's install cannot be reproduced: {unreachable}")
    nltk_data = os.environ.get("NLTK_DATA") or str(real_data / "nltk_data")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(NLTK_DATA=nltk_data, MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    timings = {}

    started = time.monotonic()
    venv = tmp_path / "worker-venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=300)
    python = venv / "bin" / "python"
    corpusforge = [python, "-m", "pipelines.cli"]  # the worker sdist declares no console script
    # No byte-compiling of every installed module (apache-beam, pyarrow, pandas, ...): a worker
    # compiles what it imports when it first imports it.
    pip_install = [*pip_into(python), "install", "-q", "--no-compile"]
    _run([*pip_install, "--dry-run", "--ignore-installed", "--report", tmp_path / "resolved.json", worker_sdist],
         timeout=INSTALL_TIMEOUT_S, env=env, cwd=tmp_path)
    resolved = {canonicalize_name(d["metadata"]["name"]): d["metadata"]["version"]
                for d in json.loads((tmp_path / "resolved.json").read_text())["install"]}
    assert resolved.pop("corpusforge") == "0.1.0"
    assert {"apache-beam", "warcio", "nltk", "pyarrow"} <= set(resolved) and not set(resolved) & MODEL_LIBRARIES, sorted(resolved)
    timings["resolve"] = time.monotonic() - started

    started = time.monotonic()
    linked = link_installed(resolved, tmp_path / "site-view")
    (venv_site(python, env) / "zz_site_view.pth").write_text(f"{tmp_path / 'site-view'}\n")
    # What `pip install <sdist>` does: build the sdist's wheel (with this environment's
    # setuptools, as the test above), install it with its dependencies; the index only when
    # something resolved was not linked.
    wheel = sdist_wheel(worker_sdist, tmp_path / "wheels")
    offline = [] if set(resolved) - linked else ["--no-index"]
    _run([*pip_install, *offline, "--report", tmp_path / "installed.json", wheel], timeout=INSTALL_TIMEOUT_S, env=env, cwd=tmp_path)
    installed = {canonicalize_name(d["metadata"]["name"]) for d in json.loads((tmp_path / "installed.json").read_text())["install"]}
    assert installed == {"corpusforge"} | (set(resolved) - linked), (installed, set(resolved) - linked)
    listed = json.loads(_run([*pip_into(python), "list", "--format", "json"], timeout=300, env=env, cwd=tmp_path).stdout)
    assert {canonicalize_name(d["name"]): d["version"] for d in listed} == {**resolved, "corpusforge": "0.1.0"}
    timings["install"] = time.monotonic() - started

    probe = f"import importlib.util as u; print(' '.join(m for m in {sorted(MODEL_LIBRARIES)!r} if u.find_spec(m)))"
    assert _run([python, "-c", probe], timeout=120, env=env, cwd=tmp_path).stdout.split() == []
    no_torch = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    where = _run([python, "-c", "import pipelines; print(pipelines.__file__)"], timeout=120, env=env, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)), where  # the sdist's code, not this checkout's

    started = time.monotonic()
    out = tmp_path / "c4"
    _run([*corpusforge, "c4", "--input", real_data / WET, "--badwords", real_data / BADWORDS, "--output", out],
         timeout=600, env=env, cwd=tmp_path)
    timings["c4"] = time.monotonic() - started
    shard = out / "c4json" / "c4-train.00000-of-00001.json.gz"  # the default c4json parquet: a folder per format
    with gzip.open(shard, "rt", encoding="utf-8") as f:
        documents = [json.loads(line) for line in f if line.strip()]
    assert documents and all(d["text"] and d["url"] for d in documents)

    train = subprocess.run([*corpusforge, "train", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert train.returncode == 2 and "needs torch" in train.stderr and "corpusforge[model]" in train.stderr, train.stderr

    # The tokenize job's workers: the same sdist with the `tokenize` extra recorded.
    started = time.monotonic()
    _run([*pip_install, sdist_wheel(tokenize_sdist, tmp_path / "wheels-tokenize")], timeout=INSTALL_TIMEOUT_S, env=env, cwd=tmp_path)
    timings["install tokenize extra"] = time.monotonic() - started
    assert _run([python, "-c", probe], timeout=120, env=env, cwd=tmp_path).stdout.split() == sorted(TOKENIZE_LIBRARIES)
    started = time.monotonic()
    tokens = tmp_path / "tokens"
    _run([*corpusforge, "tokenize", "--input", shard, "--output", tokens, "--vocab_size", "300", "--val_docs", "1"],
         timeout=600, env=env, cwd=tmp_path)
    timings["tokenize"] = time.monotonic() - started
    meta = json.loads((tokens / "meta.json").read_text())
    assert meta["vocab_size"] == 300 and meta["splits"]["train"]["tokens"] > 0
    assert (tokens / "corpus_train_000000.bin").is_file()
    print("worker venv timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))


def test_a_clone_without_the_shared_data_or_punkt_skips_with_reasons(tmp_path):
    # The case: without ../shared, `make test` gave 15 failures and 117 errors. The
    # Makefile now exports the variables only when the folders exist; the tests skip and say why.

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "CORPUSFORGE_TEST_DATA")}
    env["HOME"] = str(tmp_path)  # no ~/nltk_data
    tests = ["tests/test_warc.py::test_resiliparse_warc_has_16_html_responses_in_50_records",
             "tests/test_c4.py::test_clean_page_keeps_good_lines_and_counts_sentences"]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
                            cwd=root, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "2 skipped" in result.stdout
    assert "CORPUSFORGE_TEST_DATA is not set" in result.stdout and "NLTK's punkt model is not installed" in result.stdout
    probe = tmp_path / "probe.mk"  # what a recipe of the Makefile sees in its environment
    probe.write_text("probe:\n\t@echo \"nltk=$$NLTK_DATA data=$$CORPUSFORGE_TEST_DATA\"\n")

    def exported(data: Path) -> str:
        return subprocess.run(["make", "-s", "-f", "Makefile", "-f", str(probe), "probe", f"DATA={data}"], cwd=root,
                              capture_output=True, text=True, timeout=120, env=env).stdout.strip()

    assert exported(tmp_path / "no-such-folder") == "nltk= data="
    shared = root.parent / "shared" / "data"
    if (shared / "nltk_data").is_dir():  # beside a checkout that has the data: both exported
        assert exported(shared) == f"nltk={shared}/nltk_data data={shared}"
