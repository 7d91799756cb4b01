"""A job declared once: an engine-free list of typed steps, with their labels and counter
namespaces, that each engine interprets (``pipelines.beam.plan`` for Apache Beam,
``pipelines.spark.plan`` for native Spark) into the same bytes and the same counters.

A plan reads crawl files, runs steps over the records, writes shards and the errors file::

    Plan("c4", ReadFiles("Read pages", reader), (
        Rule("1 Length filter", c4.TOO_LONG_FILTER, c4.length_filter),
        NewestPerKey("3", "pages", c4.url_dedup_key, c4.newest_capture, c4.DUPLICATE_URL_FILTER, c4.keep_newest),
        DedupeText("6", "lines", c4.MIN_NUM_SENTENCES, punkt),
        Rule("8 langdetect en", c4.ENGLISH_FILTER, detect_english),
    ), WriteShards("c4", formats, (("train", 1024), ("validation", 8)), split_of=c4.split_index, ...))

Step kinds (each engine has one interpretation of each):

- ``ReadFiles``: one file per unit of work; a ``FileReader`` made once per worker yields
  records and error dicts and counts into a ``FileCounts``, flushed after each file (also
  when reading fails: a failing worker still reports what it counted).
- ``Rule``: ``rule(record) -> Decision`` per record (``common.decision``), counted in its
  namespace(s), drops sampled. Adding a rule to a recipe is one ``Rule`` line.
- ``NewestPerKey``: a keyed combine over staged records (``pipelines.staged_files``: only
  references and keys cross the shuffle): records keyed by ``key(record) = (group, *rank)``,
  the best of each group by ``better`` and how many it had, judged by the keyed ``rule``;
  optionally co-grouped with a list of keys from a file (``JoinListed``) before the
  survivors are read back.
- ``DedupeText``: C4's line or 3-sentence-span dedup (``dedup.text.dedupe_rule``), claims
  shuffled without page text.
- ``WriteShards``: the records (or ``to_document`` of them, per split by ``split_of``) as
  sorted, numbered shards (``pipelines.shard_io``), every split's manifest entries for
  ``_SUCCESS``; the errors file beside them.

Engine-free: no Beam, no Spark (the launcher of a Spark job loads this, not Beam).
Tests: ``tests/test_plan.py``; the byte-identity tests of every job that runs on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pipelines.tally import Tally


class FileCounts:
    """What reading one file counted, by namespace tuple: ``tally(namespaces)`` for decisions
    (counts, units, sampled drops), ``add(namespaces, counts, unit)`` for a reader's own
    tallies (records, errors). The engine flushes it once the file is read."""

    def __init__(self):
        self.tallies: dict[tuple[str, ...], Tally] = {}

    def tally(self, namespaces: str | tuple[str, ...]) -> Tally:
        key = namespace_tuple(namespaces)
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = Tally()
        return tally

    def add(self, namespaces: str | tuple[str, ...], counts, unit: str) -> None:
        if not counts:
            return
        tally = self.tally(namespaces)
        tally.counts.update(counts)
        tally.units.update((name, unit) for name in counts)

    def items(self):
        """``(namespaces, Tally)`` of every tally that counted something."""
        return [(namespaces, tally) for namespaces, tally in self.tallies.items() if tally.counts]


class FileReader(Protocol):
    """What ``ReadFiles`` runs: one per worker, over many files."""

    def read(self, index: int, path: str, counted: FileCounts) -> Iterator[Any]:
        """The records of file number ``index`` and error dicts (``ReadError.to_dict()``)."""
        ...

    def close(self) -> None:
        ...


def namespace_tuple(namespaces: str | tuple[str, ...]) -> tuple[str, ...]:
    return (namespaces,) if isinstance(namespaces, str) else tuple(namespaces)


@dataclass(frozen=True)
class ReadFiles:
    """``(index, path)`` of every input file -> records; ``reader()`` makes the worker's reader."""

    label: str
    reader: Callable[[], FileReader]


@dataclass(frozen=True)
class Rule:
    """``rule(record) -> Decision`` over every record."""

    label: str
    namespaces: str | tuple[str, ...]
    rule: Callable


@dataclass(frozen=True)
class JoinListed:
    """After ``NewestPerKey``'s combine: every group co-grouped with the lines of ``path``
    (``normalise(line)`` is a group key), judged by ``rule(key, (bests, listed))``."""

    label: str
    path: str
    normalise: Callable[[str], str]
    namespaces: str | tuple[str, ...]
    rule: Callable
    what: str = "listed keys"


@dataclass(frozen=True)
class NewestPerKey:
    """Records staged under ``<out>/_temporary/stage/<stage>``; ``key(record)`` is
    ``(group, *rank)``; per group, the best ``(*rank, ref)`` by ``better(a, b)`` (which
    returns one of them) and how many there were, judged by ``rule(group, (best, n))``;
    optionally ``join``; the survivors read back, each once."""

    step: str
    stage: str
    key: Callable
    better: Callable[[tuple, tuple], tuple]
    namespaces: str | tuple[str, ...]
    rule: Callable
    join: JoinListed | None = None
    what: str = "pages"
    group_name: str = "key"


@dataclass(frozen=True)
class DedupeText:
    """C4's text dedup: ``mode`` "lines" or "spans", pages under ``min_num_sentences``
    dropped after it, sentences split with ``punkt`` (``corpus.sentences.PunktModel``)."""

    step: str
    mode: str
    min_num_sentences: int
    punkt: Any

    @property
    def label(self) -> str:
        return f"{self.step} Dedupe {self.mode}"


@dataclass(frozen=True)
class WriteShards:
    """The records as ``<name>-<split>.NNNNN-of-MMMMM.<ext>`` shards. With ``split_of``
    (record -> index into ``splits``), each split's records go through ``to_document``,
    counted in the split's namespace; without, the records are the documents of
    ``splits[0]``."""

    name: str
    formats: tuple[str, ...]
    splits: tuple[tuple[str, int], ...]
    split_of: Callable | None = None
    to_document: Callable | None = None
    step: str = ""

    def split_label(self, split: str) -> str:
        return f"{self.step} {split} documents".strip()


Step = Rule | NewestPerKey | DedupeText


@dataclass(frozen=True)
class Plan:
    """One job: read, steps in order, write."""

    job: str
    read: ReadFiles
    steps: tuple[Step, ...]
    write: WriteShards

    def __post_init__(self):
        for step in self.steps:
            if not isinstance(step, Rule | NewestPerKey | DedupeText):
                raise TypeError(f"{self.job}: {step!r} is not a step kind every engine interprets")
        if self.write.split_of is not None and self.write.to_document is None:
            raise TypeError(f"{self.job}: WriteShards with split_of needs to_document")
