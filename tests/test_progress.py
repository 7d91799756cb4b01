"""Progress of Beam jobs: the in-process tally, which runners are polled, what a poll logs."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest
from apache_beam.metrics.execution import MetricKey, MetricResult
from apache_beam.metrics.metricbase import MetricName
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import progress


def test_which_runs_the_tally_can_see_and_which_start_local_workers():
    assert progress.in_process(PipelineOptions([]))
    assert progress.in_process(PipelineOptions(["--direct_running_mode", "multi_threading"]))
    assert not progress.in_process(PipelineOptions(["--direct_running_mode", "multi_processing"]))
    assert not progress.in_process(PipelineOptions(["--runner", "DataflowRunner"]))
    assert progress.starts_local_workers(PipelineOptions(["--direct_running_mode", "multi_processing"]))
    assert progress.starts_local_workers(PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", "localhost:8099"]))
    assert not progress.starts_local_workers(PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", "flink.internal:8099"]))
    assert not progress.starts_local_workers(PipelineOptions(["--runner", "DataflowRunner"]))


def test_quiet_worker_args_only_for_local_workers_and_never_over_the_users_choice():
    local = ["--direct_running_mode", "multi_processing"]
    assert progress.quiet_worker_args(local)[-1] == "--default_sdk_harness_log_level=WARNING"
    assert progress.quiet_worker_args(local + ["--default_sdk_harness_log_level=DEBUG"]) == local + ["--default_sdk_harness_log_level=DEBUG"]
    assert progress.quiet_worker_args(["--runner", "DataflowRunner"]) == ["--runner", "DataflowRunner"]


def test_a_poll_logs_the_readers_counters_from_attempted_values():
    def counter(namespace, name, attempted):
        return MetricResult(MetricKey("step", MetricName(namespace, name)), committed=0, attempted=attempted)

    counters = [counter("read-archive", "files", 3), counter("read-archive", "files", 2), counter("read-archive", "records:conversion", 1500),
                counter("clean-page", "passed", 900), counter("read-archive", "error:truncated_gzip", 1)]
    assert progress.describe_metrics(counters) == "files 5, records:conversion 1,500"
    assert progress.describe_metrics([]) == ""


def test_the_tally_counts_files_and_records_in_steps():
    progress._tally.clear()
    for number in range(1, 2501):
        progress.record_read(number)
    progress.file_read(2500)
    progress.tally("written", 7)
    assert progress.snapshot() == {"files": 1, "records": 2500, "written": 7}
    assert progress.describe(progress.snapshot(), 4) == "1/4 files, 2,500 records, 7 documents written"
    progress._tally.clear()


def test_a_job_counting_other_things_says_what_they_are():
    counts = Counter({"dumps": 2, "submissions read": 150_000, "links fetched": 40, "files": 3})
    assert progress.describe(counts, 5, "dumps") == "2/5 dumps, 3 files, 40 links fetched, 150,000 submissions read"
    assert progress.describe(Counter(), None, "dumps") == "0 dumps"


def test_filtered_stderr_drops_worker_start_up_lines_and_keeps_the_rest(capfd):
    with progress.filtered_stderr():
        os.write(2, b"INFO:__main__:Logging handler created.\nreal problem: disk full\n")
        os.write(2, b"WARNING:root:apitools not found, and bigquery ...\nlast line without newline")
    err = capfd.readouterr().err
    assert err == "real problem: disk full\nlast line without newline"


class _RemoteJob:
    """A job handle as a runner outside this process returns it: ``cancel`` is recorded."""

    def __init__(self):
        self.cancelled = False
        self.state = "RUNNING"

    def cancel(self):
        self.cancelled = True

    def wait_until_finish(self):
        raise AssertionError("a job stopped during its submission is not waited for")


class _SignalledDuringSubmission:
    """A pipeline on the PortableRunner whose submission is interrupted by ``signum``."""

    def __init__(self, signum: int):
        self.options = PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", "jobs.internal:8099"])
        self.signum = signum
        self.job = _RemoteJob()

    def run(self):
        os.kill(os.getpid(), self.signum)  # delivered here, before the runner has returned the job's handle
        return self.job


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_a_remote_job_is_submitted_cancels_that_job(signum, caplog):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    pipeline = _SignalledDuringSubmission(signum)
    with pytest.raises(KeyboardInterrupt, match=signal.Signals(signum).name):
        progress.run_pipeline(pipeline, "job")
    assert pipeline.job.cancelled
    assert "asked the runner to cancel the job" in caplog.text
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_signal_during_an_in_process_run_stops_it_at_once():
    class Local:
        options = PipelineOptions([])

        def run(self):
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("the signal did not stop the run")

    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        progress.run_pipeline(Local(), "job")
