"""corpusforge: pipelines."""

from pipelines import library_notices

library_notices.install()  # before any job module imports Beam or starts Spark: the libraries' two notices
