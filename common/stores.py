"""The stores behind non-local paths: Beam's ``FileSystems``, configured once per process from
the job's options (``--s3_endpoint_url``, ``--project``, ``--store_timeout_s``), one shared
client per S3 store, and a probe that ends a job in one line when a store does not answer.

Part of the IO layer that ``common.storage`` gathers (docs/architecture.md).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable
from typing import Any

from common.errors import InputError


def filesystems(path: str | None = None):
    """Beam's FileSystems, with ``memory://`` registered and S3 clients shared; with a
    ``path``, after checking its store answers (``check_store``)."""
    # Beam takes about a second to import: only a path that is not local loads it (here and below).
    from apache_beam.io.filesystems import FileSystems

    import common.memfs  # noqa: F401  (registers the memory:// filesystem)

    _share_s3_clients()
    if path is not None:
        check_store(path)
    return FileSystems


def beam_filesystem():
    """``apache_beam.io.filesystem`` (``CompressionTypes``, ``BeamIOError``), for paths that are not local."""
    from apache_beam.io import filesystem  # Beam: not for local paths (see filesystems)

    return filesystem


STORE_TIMEOUT_S = 30.0  # --store_timeout_s: how long a store may stay silent before the job ends


STORE_TIMEOUT_OPTION = "--store_timeout_s"


# The Beam FileSystems options (S3, GCS/GCP, HDFS) that every command accepts, and corpusforge's timeout.
STORE_OPTION_PREFIXES = ("--s3_", "--gcs_", "--hdfs_", "--project", STORE_TIMEOUT_OPTION)


_FLAG_STORE_OPTIONS = ("--s3_disable_ssl", "--hdfs_full_urls")  # take no value


class StoreError(InputError):
    """A store that cannot be used (unreachable, silent, refusing the credentials, a missing
    library): one line naming the store and what to check."""


_STORE: dict[str, Any] = {"options": None, "timeout_s": STORE_TIMEOUT_S}


_CHECKED: dict[tuple, StoreError | None] = {}


_S3_CLIENTS: dict[tuple, object] = {}


def split_store_args(argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the store options of ``argv`` with their values, the rest): for the commands that are
    no Beam job (``stats``, ``train``, ``eval``, ``finetune``, ``sample``)."""
    store, rest, argv = [], [], list(argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        flag = token.split("=", 1)[0]
        if token.startswith(STORE_OPTION_PREFIXES):
            store.append(token)
            if "=" not in token and flag not in _FLAG_STORE_OPTIONS and i + 1 < len(argv):
                store.append(argv[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return store, rest


def store_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{STORE_TIMEOUT_OPTION}: not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{STORE_TIMEOUT_OPTION}: must be a positive number of seconds, not {text}")
    return value


def configure(beam_args: Iterable[str] | None, timeout_s: float | None = None) -> None:
    """The one place a process gives FileSystems its store options (S3 endpoint and
    credentials, GCP project, HDFS namenode) and the store timeout, before it lists or reads
    anything. Every job calls it through ``pipelines.options.split_job_args``, the other
    commands after ``split_store_args``. Beam is imported only when options are given."""
    beam_args = list(beam_args or [])
    store, _ = split_store_args(beam_args)
    rest = []
    i = 0
    while i < len(beam_args):  # --store_timeout_s is corpusforge's, not a Beam option
        flag, _, value = beam_args[i].partition("=")
        if flag == STORE_TIMEOUT_OPTION:
            if not value and i + 1 < len(beam_args):
                value = beam_args[i + 1]
                i += 1
            timeout_s = store_timeout(value)
        else:
            rest.append(beam_args[i])
        i += 1
    _STORE["timeout_s"] = float(timeout_s or STORE_TIMEOUT_S)
    _CHECKED.clear()
    if not rest:
        return
    from apache_beam.options.pipeline_options import PipelineOptions  # Beam: only when remote options are given

    options = PipelineOptions(rest)
    _STORE["options"] = options
    filesystems().set_options(options)


def _store_options():
    """The options FileSystems works with: the configured ones, or the running pipeline's (on a worker)."""
    fs = filesystems()
    if fs._pipeline_options is not None:
        return fs._pipeline_options
    from apache_beam.options.value_provider import RuntimeValueProvider  # Beam: remote paths only

    return RuntimeValueProvider.runtime_options or _STORE["options"]


_OPTION_VALUES: dict[int, tuple] = {}


def _option(options, name: str):
    """One store option of ``options`` (Beam ``PipelineOptions`` or the dict a worker may get);
    a PipelineOptions object is read once (parsing it costs more than a file operation)."""
    if options is None:
        return None
    if isinstance(options, dict):
        return options.get(name)
    cached = _OPTION_VALUES.get(id(options))
    if cached is None or cached[0] is not options:
        cached = _OPTION_VALUES[id(options)] = (options, options.get_all_options(retain_unknown_options=True))
    return cached[1].get(name)


S3_SETTINGS = ("s3_endpoint_url", "s3_access_key_id", "s3_secret_access_key", "s3_session_token", "s3_region_name",
               "s3_api_version", "s3_verify", "s3_disable_ssl")


def s3_client(options, timeout_s: float | None = None, attempts: int = 3):
    """The boto3 S3 client of this process for these options: built once (about 0.1 s of CPU
    each), then shared by every file operation, by the launcher and by each worker."""
    settings = tuple(_option(options, name) for name in S3_SETTINGS)
    timeout_s = timeout_s or _STORE["timeout_s"]
    key = (os.getpid(), settings, timeout_s, attempts)
    client = _S3_CLIENTS.get(key)
    if client is None:
        import boto3  # apache-beam[aws]: only for s3:// paths
        from botocore.config import Config

        endpoint, key_id, secret, token, region, api_version, verify, disable_ssl = settings
        client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, aws_access_key_id=key_id, aws_secret_access_key=secret, aws_session_token=token,
            region_name=region, api_version=api_version, verify=verify, use_ssl=not disable_ssl,
            config=Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": attempts, "mode": "standard"}))
        _S3_CLIENTS[key] = client
    return client


def _share_s3_clients() -> None:
    """Make Beam's S3 filesystem (which builds a boto3 client for every file operation) take
    this process's shared client (``s3_client``)."""
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client  # apache-beam[aws]: absent without it
    except ImportError:
        return
    if getattr(boto3_client.Client, "shared_client", False):
        return

    class SharedClient(boto3_client.Client):
        shared_client = True

        def __init__(self, options):  # Beam's Client, with the process's client instead of a new one
            self.client = s3_client(options)
            self._download_request = None
            self._download_stream = None
            self._download_pos = 0

    boto3_client.Client = SharedClient  # type: ignore[misc]  # replaces Beam's class on purpose


def _store_of(path: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(path)
    return parts.scheme, parts.netloc


def check_store(path: str) -> None:
    """Raise ``StoreError`` (one line) when the store of ``path`` does not answer within the
    store timeout, refuses the credentials, or lacks its library; checked once per store and
    process, before the first operation on it."""
    scheme, name = _store_of(path)
    options = _store_options()
    key = (scheme, name, _option(options, "s3_endpoint_url"), _option(options, "hdfs_host"), _option(options, "hdfs_port"))
    if key not in _CHECKED:
        _CHECKED[key] = _probe(scheme, name, options, _STORE["timeout_s"])
    error = _CHECKED[key]
    if error is not None:
        raise error


def _probe(scheme: str, name: str, options, timeout_s: float) -> StoreError | None:
    """The store's first answer, within ``timeout_s`` of wall time whatever a client library
    retries or redirects (the check runs in a thread that is left behind when silent)."""
    import threading  # standard library; only for remote paths

    found: list = []
    thread = threading.Thread(target=lambda: found.append(_probe_store(scheme, name, options, timeout_s)),
                              name=f"check {scheme}://{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not found:
        return StoreError(f"{scheme}://{name}: {_address(scheme, options)} did not answer within {timeout_s:g} s: "
                          f"check {_SETTINGS_TO_CHECK.get(scheme, 'the store options')} or raise {STORE_TIMEOUT_OPTION}")
    return found[0]


_SETTINGS_TO_CHECK = {"s3": "--s3_endpoint_url (is the server up, is it an S3 port?)",
                      "hdfs": "--hdfs_host and --hdfs_port (the namenode's WebHDFS address)",
                      "gs": "the network and the Google Cloud credentials"}


def _address(scheme: str, options) -> str:
    if scheme == "s3":
        return _option(options, "s3_endpoint_url") or "the AWS endpoint"
    if scheme == "hdfs":
        return f"the namenode {_option(options, 'hdfs_host')}:{_option(options, 'hdfs_port')}"
    return "the store"


def _probe_store(scheme: str, name: str, options, timeout_s: float) -> StoreError | None:
    store = f"{scheme}://{name}"
    if scheme == "s3":
        return _probe_s3(store, name, options, timeout_s)
    if scheme == "gs":
        return _probe_gcs(store)
    if scheme == "hdfs":
        return _probe_hdfs(store, options, timeout_s)
    return None


def _probe_s3(store: str, bucket: str, options, timeout_s: float) -> StoreError | None:
    try:
        import botocore.exceptions as errors  # apache-beam[aws]
    except ImportError:
        return StoreError(f"{store}: S3 needs apache-beam[aws] (boto3): pip install 'apache-beam[aws]'")
    endpoint = _address("s3", options)
    try:
        s3_client(options, timeout_s, attempts=1).head_bucket(Bucket=bucket)
    except (errors.ConnectTimeoutError, errors.ReadTimeoutError):
        return StoreError(f"{store}: {endpoint} did not answer within {timeout_s:g} s: check {_SETTINGS_TO_CHECK['s3']} "
                          f"or raise {STORE_TIMEOUT_OPTION}")
    except errors.EndpointConnectionError as exc:
        return StoreError(f"{store}: cannot connect to {endpoint} ({exc.kwargs.get('error', exc)}): check --s3_endpoint_url "
                          "and that the server is running")
    except errors.NoCredentialsError:
        return StoreError(f"{store}: no S3 credentials: pass --s3_access_key_id and --s3_secret_access_key "
                          "(or set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
    except errors.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (401, 403) or "Denied" in code or "Signature" in code or "InvalidAccessKey" in code:
            return StoreError(f"{store}: {endpoint} refused the credentials ({code or status}): check --s3_access_key_id, "
                              "--s3_secret_access_key (and --s3_session_token)")
        if status == 404:
            return StoreError(f"{store}: no such bucket at {endpoint}: check the path and --s3_endpoint_url")
        return StoreError(f"{store}: {endpoint} answered {code or status}: check the bucket and the S3 options")
    except errors.BotoCoreError as exc:
        return StoreError(f"{store}: {endpoint}: {exc}: check the S3 options")
    return None


def _probe_gcs(store: str) -> StoreError | None:
    try:
        import google.auth  # apache-beam[gcp]
        from apache_beam.io.gcp import gcsfilesystem  # noqa: F401  (apache-beam[gcp])
    except ImportError:
        return StoreError(f"{store}: Google Cloud Storage needs apache-beam[gcp]: pip install 'apache-beam[gcp]'")
    try:
        google.auth.default()
    except google.auth.exceptions.DefaultCredentialsError:
        return StoreError(f"{store}: no Google Cloud credentials: run `gcloud auth application-default login` "
                          "or set GOOGLE_APPLICATION_CREDENTIALS")
    return None


def _probe_hdfs(store: str, options, timeout_s: float) -> StoreError | None:
    import http.client  # standard library; only for hdfs:// paths

    host, port = _option(options, "hdfs_host"), _option(options, "hdfs_port")
    if not host or not port:
        return StoreError(f"{store}: HDFS needs --hdfs_host and --hdfs_port (the namenode's WebHDFS address)")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    try:
        connection.request("GET", "/webhdfs/v1/?op=GETFILESTATUS")
        connection.getresponse().read()
    except TimeoutError:
        return StoreError(f"{store}: the namenode {host}:{port} did not answer within {timeout_s:g} s: check "
                          f"{_SETTINGS_TO_CHECK['hdfs']} or raise {STORE_TIMEOUT_OPTION}")
    except OSError as exc:
        return StoreError(f"{store}: cannot reach the namenode {host}:{port} ({exc}): check --hdfs_host and --hdfs_port")
    finally:
        connection.close()
    return None
