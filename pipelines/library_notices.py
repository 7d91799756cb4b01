"""The two notices the engine libraries print on every run, whatever the job and whatever the
user did, silenced where they come from and nowhere else. ``pipelines/__init__.py`` installs
both filters (``install``), so they are in place before any job module imports Apache Beam
and before a Spark session starts: under ``corpusforge``, under ``spark-submit
spark_main.py`` and for a program that imports a job. Tests: ``tests/test_library_notices.py``.

- Apache Beam, at ``import apache_beam``: ``apitools not found, and bigquery client libraries
  are not available despite the import not raising an ImportError.``, logged on the root
  logger by ``apache_beam/io/gcp/internal/clients/bigquery/__init__.py`` when the optional GCP
  client libraries (``apache-beam[gcp]``) are absent; no corpusforge job uses BigQuery. A
  filter on the root logger drops that record: that message from that file. Any other record
  passes, the same words logged from anywhere else included.
- PySpark, at the session's first call into the JVM (py4j's argument converters import
  ``pyspark.testing.utils``, which checks the pandas version when it loads): the
  FutureWarning ``PySpark does not yet fully support pandas >= 3.0.0 ...`` (requirements.txt
  pins pandas 3.1.1; the jobs use no pandas API of PySpark). A warnings filter ignores that
  message from that module only: the same warning from PySpark's pandas APIs that a user
  calls (``toPandas``, pandas UDFs: other modules) still shows, and so does every other warning.
"""

from __future__ import annotations

import logging
import os
import re
import warnings

BEAM_APITOOLS_MESSAGE = "apitools not found"  # how Beam's record begins
BEAM_APITOOLS_SOURCE = "apache_beam/io/gcp/internal/clients/bigquery/__init__.py"  # the file that logs it
PYSPARK_PANDAS_MESSAGE = "PySpark does not yet fully support pandas >= 3.0.0"  # how PySpark's warning begins
PYSPARK_PANDAS_MODULE = "pyspark.testing.utils"  # the module the warning is attributed to (stacklevel=2)


class BeamApitoolsNotice(logging.Filter):
    """Drops Beam's import-time ``apitools not found`` record (root logger, that one file)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.pathname.replace(os.sep, "/").endswith(BEAM_APITOOLS_SOURCE)
                    and record.getMessage().startswith(BEAM_APITOOLS_MESSAGE))


def install() -> None:
    """Both filters, once per process (again: nothing added)."""
    root = logging.getLogger()
    if not any(isinstance(f, BeamApitoolsNotice) for f in root.filters):
        root.addFilter(BeamApitoolsNotice())
    warnings.filterwarnings("ignore", message=re.escape(PYSPARK_PANDAS_MESSAGE), category=FutureWarning,
                            module=re.escape(PYSPARK_PANDAS_MODULE) + r"\Z")
