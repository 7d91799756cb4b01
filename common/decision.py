"""The one shape every rule returns: what it keeps, what it counted, what it dropped.

A rule in ``corpus/`` or ``dedup/`` is a plain function ``rule(record) -> Decision``; the
Beam step (``pipelines/steps.py``) that runs it adds ``counts`` to the stage's counters,
samples ``dropped`` per reason into _stats.json and passes ``record`` on when it is not
None. ``units`` declares what each counter counts (``pages``, ``lines``, ``spans``,
``links``, ``submissions``, ...; ``other`` for a tally that is no decision), so the counter table's shares
are computed within one unit and never guessed from a counter's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAGES, LINES, SPANS, LINKS, SUBMISSIONS, DOCUMENTS, OTHER = "pages", "lines", "spans", "links", "submissions", "documents", "other"
# The counters of what a stage keeps and drops, as the C4 reference (TFDS c4_utils) names them
PASSED, FILTERED = "passed", "filtered"

# Decision.keep's (counts, units) per (unit, counter): the keep path allocates no tuples.
_KEPT: dict[str, dict[str, tuple]] = {}


@dataclass(frozen=True, slots=True)  # slots: 25% cheaper to build, and rules build one per record
class Decision:
    """What one rule did to one record. Frozen: a rule returns a new record
    (``dataclasses.replace``), never changes the one it was given."""

    record: Any  # the record passed on, or None when the rule dropped it
    counts: tuple[tuple[str, int], ...] = ()  # (counter name, n)
    dropped: tuple[tuple[str, str], ...] = ()  # (counter name, example text)
    units: tuple[tuple[str, str], ...] = ()  # (counter name, unit)

    @classmethod
    def keep(cls, record, counter: str | None = None, unit: str = PAGES) -> Decision:
        """``record`` goes on; ``counter`` (if given) counts one ``unit``."""
        if counter is None:
            return cls(record)
        try:
            counts, units = _KEPT[unit][counter]
        except KeyError:
            counts, units = _KEPT.setdefault(unit, {}).setdefault(counter, (((counter, 1),), ((counter, unit),)))
        return cls(record, counts, (), units)

    @classmethod
    def drop(cls, reason: str, example: str = "", unit: str = PAGES) -> Decision:
        """The record is dropped for ``reason``: one ``unit`` counted, ``example`` sampled."""
        return cls(None, ((reason, 1),), ((reason, example),), ((reason, unit),))

    @property
    def kept(self) -> bool:
        return self.record is not None

    @classmethod
    def tally(cls, counter: str, n: int = 1, unit: str = OTHER) -> Decision:
        """Nothing passed on and nothing dropped: ``n`` of ``counter`` counted (a file read,
        a listed URL with no page): a count that is no decision on a record."""
        return cls(None, ((counter, n),), (), ((counter, unit),))
