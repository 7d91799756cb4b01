"""A small, seeded sample crawl in Common Crawl's and Pushshift's shapes, for `make demo` and tests.

``write_sample_crawl(out_dir, seed, pages)`` writes, byte-identical for a given seed:

- WET files ``sample-0000N.warc.wet.gz``: a ``warcinfo`` record, then one ``conversion``
  record per text page (``WARC-Refers-To``, ``WARC-Identified-Content-Language``), as in
  CC-MAIN-2019-18; ``wet.paths.gz`` lists them relative to the output folder.
- WARC files ``sample-0000N.warc.gz`` with the same pages as ``request`` / ``response`` /
  ``metadata`` records, plus responses a WET file never shows (an image, a PDF, a 404,
  a 301); ``warc.paths.gz`` lists them.
- A Pushshift-style submission dump: ``RS_sample.ndjson`` and the same bytes as
  ``RS_sample.zst``, compressed with a 2**31 window like the real dumps.
- ``truth.json``: for every page its URL, kind tags (``PAGE_KINDS``), language, files and
  duplicate links; for every dump line what a reader should find there.

All prose comes from small template grammars written for this module. No sentence repeats
across pages unless a page kind says so (duplicates, near-duplicates, ``SHARED_LINES``).
Every gzip member has mtime 0 and every record ID is a hash of the seed, so the output
depends on ``seed`` and ``pages`` only.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import email.utils
import gzip
import hashlib
import html
import io
import itertools
import json
import logging
import os
import random
import re
import string
import struct
import sys
import time
import unicodedata
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import zstandard
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from common.storage import write_atomically

log = logging.getLogger(__name__)

DEFAULT_PAGES = 300
FILE_COUNT = 3
CRAWL = "CC-MAIN-2019-18"
# CC-MAIN-2019-18 was fetched from 18 to 26 April 2019; its WET files were made just after.
FETCH_START = dt.datetime(2019, 4, 18, tzinfo=dt.UTC)
FETCH_SECONDS = 9 * 24 * 3600
WET_EXTRACTED = "2019-04-27T03:12:45Z"
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# C4 drops pages longer than 1.9e5 characters and lines with a word over 1000 (c4_utils.py).
TOO_LONG_CHARS = 195_000
LONG_WORD_BYTES = 900  # base64 of 900 bytes is 1200 characters
# Newer Pushshift dumps are written with a 2**31 window (zstd --long=31); readers must
# allow it. Level 3 keeps writing cheap: level 19 with this window takes seconds and 1 GB.
PUSHSHIFT_WINDOW_LOG = 31
PUSHSHIFT_LEVEL = 3
# CC's WET header gives ISO 639-3 codes.
ISO_639_3 = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa"}
COOKIE_SHARE = 0.4
ASIDE_SHARE = 0.8
QUOTE_SHARE = 0.3
DRAW_ATTEMPTS = 500

PAGE_KINDS = {
    "english": "English text page",
    "article": "ordinary article from a topic grammar (hobby blog or local news)",
    "realnews": "page on one of the news domains listed in truth.json news_domains",
    "menu": "has navigation and other short lines without an end mark (Home, About us, Contact)",
    "ellipsis": "has a line ending with '...'",
    "policy": "has a cookie or policy notice of five or more words (uses cookies, privacy policy, terms of use)",
    "lorem_ipsum": "has a full sentence starting 'Lorem ipsum'",
    "curly_brace": "has code and a full sentence containing '{'",
    "javascript": "has the line 'Please enable JavaScript to view this page.'",
    "citation": "has Wikipedia citation marks such as [1], [edit], [citation needed]",
    "long_word": "has a line with one word longer than 1000 characters",
    "non_english": "main text not in English; the language field and a kind tag say which",
    "de": "German page",
    "fr": "French page",
    "es": "Spanish page",
    "exact_duplicate": "same text as duplicate_of, copied to another host",
    "same_url_recrawl": "same URL and text as duplicate_of, fetched at another time",
    "url_variant": "same text as duplicate_of at a variant of its URL; variant names the change",
    "near_duplicate": "near_duplicate_of with a few words changed (variant reworded) or a paragraph added "
                      "(variant extended)",
    "shared_line": "has one of truth.json shared_lines, which pages on many sites repeat",
    "badword": "has one word from the LDNOOBW English list (badword gives it)",
    "wikipedia": "page on a *.wikipedia.org host",
    "too_long": "text longer than 190,000 characters",
    "too_few_sentences": "only two full sentences; everything else is menu and notices",
    "latin1": "HTML served as ISO-8859-1",
    "xhtml": "served as application/xhtml+xml",
    "non_html": "an image or PDF response; only in the WARC files",
    "http_404": "a 404 response; only in the WARC files",
    "redirect": "a 301 response to location; only in the WARC files",
}

SUBMISSION_KINDS = {
    "page_link": "links to a page of the crawl (links_to gives its index)",
    "url_variant": "the link is a variant of the crawled page's URL",
    "repeat_url": "the same page is submitted several times, in different subreddits",
    "self": "self post (is_self true, url is the reddit permalink)",
    "media_file": "links to a .jpg, .png, .pdf or .zip file",
    "media_host": "links to youtube.com, youtu.be or imgur.com",
    "outside_crawl": "links to a page the crawl does not have",
    "over_18": "over_18 is true",
    "deleted": "author (and selftext of a self post) is [deleted] or [removed]",
    "missing_fields": "some usual fields are absent; missing names them",
    "after_2017": "created after 2017-12-31 (after WebText's link cut-off)",
    "malformed": "the line is truncated JSON",
}

Block = tuple[str, str]
Section = tuple[str, tuple[Block, ...]]


@dataclass(frozen=True)
class SampleCrawl:
    """Where ``write_sample_crawl`` put each file of the sample."""

    wet_paths: list[str]
    warc_paths: list[str]
    manifest_path: str
    warc_manifest_path: str
    submissions_path: str
    submissions_zst_path: str
    pages: int
    truth_path: str
    badwords_path: str  # a stand-in for the LDNOOBW list (a few of its entries), so the demo runs offline
    benchmark_path: str  # a small benchmark (JSONL) whose passages the crawl partly contains, for the audit demo


@dataclass(frozen=True)
class Site:
    """A website of the sample: its chrome, its language and the grammar its articles use."""

    name: str
    host: str
    scheme: str
    topic: str
    nav: tuple[str, ...]
    authors: tuple[str, ...]
    shared_line: int | None = None  # index into SHARED_LINES of the sentence its footer repeats
    language: str = "en"


@dataclass(frozen=True)
class Grammar:
    """Templates and slot values for one kind of article; ``{Slot}`` capitalises the value."""

    titles: tuple[str, ...]
    sentences: tuple[str, ...]
    quotes: tuple[str, ...]
    slots: Mapping[str, tuple[str, ...]]
    paragraphs: tuple[int, int]
    sentences_per_paragraph: tuple[int, int]
    tips: tuple[str, ...] = ()
    subheadings: tuple[str, ...] = ()
    focus: tuple[str, ...] = ()  # slots that keep one value through an article, so it stays on topic


@dataclass(frozen=True)
class Page:
    """One fetched URL: HTML rendered from ``sections``, or a raw ``payload`` for other responses."""

    key: str
    url: str
    timestamp: str
    kinds: tuple[str, ...]
    language: str | None
    title: str = ""
    sections: tuple[Section, ...] = ()
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    payload: bytes = b""
    location: str = ""
    duplicate_of: str = ""
    near_duplicate_of: str = ""
    variant: str = ""
    badword: str = ""
    main_snippet: str = ""
    boilerplate_snippet: str = ""


# --- the words ------------------------------------------------------------------------

SAYINGS = (
    "You only get out what you put in.",
    "Start small and keep good notes.",
    "Nothing good ever came from hurrying.",
    "Mistakes are the best teachers we have.",
    "Watch first, then act.",
    "Do less, but do it well.",
)

HOBBY_SENTENCES = (
    "{Person} told me that {nouns} always look their best {place}.",
    "If you {action} {time}, the results are usually far better than you would expect.",
    "Most beginners forget to {action}, and it is the mistake I see most often.",
    "{Time}, it is worth checking on the {nouns} every {n} days or so.",
    "Why do so few people pay attention to {nouns} {place}?",
    "The trick is to {action} with {tool} close at hand.",
    "I have tried {n} different ways to {action} over the years, and this one works best.",
    "{Person} swears by {tool}, although I am still not fully convinced.",
    "Last year we counted {n} {nouns} {place}, which was a small record for us.",
    "Nobody warned me how much patience it takes to {action} properly!",
    "{Time}, {person} likes to {action} before anyone else is awake.",
    "It sounds simple, but learning to {action} took me the best part of {n} years.",
    "Is it really worth the effort to {action} {time}?",
    "We spent {n} happy hours {place} talking about {nouns} and very little else.",
    "I keep {tool} by the door so that I never forget to {action}.",
    "There is no single right answer, but {nouns} reward anyone who takes the time to {action}.",
)
HOBBY_QUOTES = (
    'As {person} put it after {n} years of practice, "{saying}"',
    'When I asked {person} for advice, the answer was short: "{saying}"',
)
HOBBY_TIPS = (
    "Always {action} {time}.",
    "Try to {action} at least {n} times a month.",
    "Give yourself {n} minutes to {action} properly.",
    "Keep {tool} somewhere easy to reach {place}.",
    "Never skip the chance to {action} {time}!",
)
HOBBY_SUBHEADINGS = ("Getting started", "What went wrong", "A few tips", "What I would do differently", "The basics")
HOBBY_TITLES = (
    "A Beginner's Guide to {nouns}",
    "What I Learned About {nouns} This Year",
    "{N} Mistakes I Made With {nouns}",
    "Why I Stopped Worrying About {nouns}",
    "Notes on {nouns} {place}",
)

TOPIC_SLOTS = {
    "gardening": {
        "nouns": ("tomato seedlings", "climbing roses", "runner beans", "raised beds", "compost heaps",
                  "strawberry runners", "potted herbs", "dahlia tubers", "gooseberry bushes", "leek seedlings"),
        "action": ("thin out the seedlings", "turn the compost", "mulch around the roots", "pinch out the side shoots",
                   "water at the base rather than the leaves", "sow a second batch", "net the soft fruit against birds",
                   "feed with diluted seaweed", "divide the older clumps", "cut back the dead growth"),
        "place": ("in a sheltered corner of the allotment", "on a sunny kitchen windowsill",
                  "along the south-facing fence",
                  "in the cold frame by the shed", "under the old apple tree", "in deep clay pots by the back door",
                  "on the sloping bed near the gate", "in the unheated greenhouse"),
        "time": ("in late April", "after the last frost", "during a dry spell", "first thing in the morning",
                 "at the start of every month", "once the soil has warmed up", "in the middle of summer",
                 "before the autumn rains arrive"),
        "tool": ("a pair of sharp secateurs", "a watering can with a fine rose", "an old kitchen fork",
                 "a long-handled hoe", "a roll of garden twine", "a cheap soil thermometer"),
        "person": ("an old allotment neighbour", "my grandmother", "the head gardener at the community plot",
                   "a retired nurseryman", "the organiser of our seed swap", "a reader from the coast",
                   "my friend Hattie", "the man who runs the garden centre"),
    },
    "railways": {
        "nouns": ("steam locomotives", "branch line timetables", "signal boxes", "goods wagons", "narrow gauge engines",
                  "station clocks", "old platform benches", "tank engines", "heritage carriages", "level crossings"),
        "action": ("check the timetable twice", "stand well back from the platform edge",
                   "photograph the engines from the footbridge", "ask the volunteers about the restoration work",
                   "buy a day rover ticket", "note down the engine numbers", "walk the old trackbed",
                   "visit the engine shed on an open day", "read the working timetable", "book a footplate ride"),
        "place": ("on the viaduct above the valley", "at the far end of the platform", "near the old water tower",
                  "in the cutting below the church", "at the junction north of town", "beside the level crossing gates",
                  "in the yard behind the goods shed", "on the long climb to the summit"),
        "time": ("on a frosty January morning", "during the spring gala weekend",
                 "just after the first train of the day",
                 "late on a summer evening", "in the quiet weeks before Easter", "whenever the diesel is on shed",
                 "on the last weekend of the season", "after heavy rain"),
        "tool": ("a battered pocket notebook", "a long zoom lens", "a flask of strong tea", "a folding step stool",
                 "an old railway atlas", "a pair of binoculars"),
        "person": ("a retired signalman", "the stationmaster", "one of the volunteer drivers", "my uncle Desmond",
                   "a fellow enthusiast from the north", "the guard on the evening train",
                   "the lady who runs the station cafe", "a local historian"),
    },
    "cooking": {
        "nouns": ("sourdough loaves", "pan-fried mushrooms", "slow-cooked stews", "lemon tarts", "homemade dumplings",
                  "roasted root vegetables", "spiced lentil soups", "buttermilk pancakes", "fresh egg noodles",
                  "fruit crumbles"),
        "action": ("rest the dough overnight", "toast the spices in a dry pan", "season the dish at the very end",
                   "let the pan get properly hot", "weigh the flour instead of using cups", "taste as you go",
                   "salt the water generously", "chill the butter before rubbing it in",
                   "keep the lid on for the first hour", "cut the vegetables to the same size"),
        "place": ("in a heavy cast iron pot", "on the lowest shelf of the oven", "in a cool corner of the larder",
                  "at the back of the stove", "on a well-floured board", "in a wide shallow pan",
                  "on the kitchen table", "in a warm airing cupboard"),
        "time": ("on a cold Sunday afternoon", "the night before a big dinner", "at the height of the harvest",
                 "when the kitchen is quiet", "in the last ten minutes of cooking", "on busy weeknights",
                 "during the long winter months", "early on a Saturday"),
        "tool": ("a cheap digital scale", "a wooden spoon with a flat edge", "a heavy rolling pin",
                 "a sharp paring knife", "a battered enamel dish", "an old hand whisk"),
        "person": ("my grandfather", "a chef I once worked under", "the baker at the end of our street",
                   "a reader from Leeds", "my flatmate", "a cookery teacher at the evening class", "my aunt Rosalind",
                   "the farmer at the Saturday market"),
    },
    "astronomy": {
        "nouns": ("faint galaxies", "globular clusters", "lunar craters", "meteor showers", "double stars",
                  "planetary nebulae", "Jovian moons", "variable stars", "comet tails", "sunspot groups"),
        "action": ("let your eyes adapt to the dark", "use averted vision", "align the finder scope",
                   "start with a low power eyepiece", "sketch what you see", "check the weather forecast",
                   "log every observation", "collimate the mirror", "cover the red torch with tape",
                   "wait for the target to rise higher"),
        "place": ("in a field far from the streetlights", "on the flat roof of the observatory",
                  "at the dark sky site in the hills", "in the back garden", "on the headland above the bay",
                  "from a quiet lay-by on the moor", "beside the club observatory", "on the balcony of a city flat"),
        "time": ("on a moonless night", "just before dawn", "in the weeks around new moon",
                 "after midnight in late autumn", "on the first clear night of the month", "during the winter months",
                 "when the air is steady", "as soon as twilight ends"),
        "tool": ("a small refractor", "a pair of ten by fifty binoculars", "a red head torch", "a planisphere",
                 "a sturdy camera tripod", "a dew heater strip"),
        "person": ("the secretary of our astronomy club", "an old friend from university", "a visiting lecturer",
                   "my neighbour Priya", "a member of the local society", "the warden at the observatory",
                   "my daughter", "a veteran comet hunter"),
    },
    "cycling": {
        "nouns": ("gravel tracks", "steel touring frames", "tubeless tyres", "old mountain bikes", "hill climbs",
                  "winter commutes", "folding bikes", "coastal routes", "disc brakes", "handlebar bags"),
        "action": ("check the tyre pressure", "clean and oil the chain", "carry a spare inner tube",
                   "pace yourself on the first climb", "lower the saddle a few millimetres",
                   "plan a route with a cafe stop", "fit proper mudguards", "learn to fix a puncture",
                   "ride with a friend", "eat before you feel hungry"),
        "place": ("on the old drovers' road", "along the canal towpath", "through the forest trails north of town",
                  "on the coast road to the lighthouse", "over the moorland pass", "around the reservoir",
                  "on quiet country lanes", "through the city centre at rush hour"),
        "time": ("on a wet Tuesday in March", "early on a summer morning", "after a long week at work",
                 "in the depths of winter", "before the Sunday traffic builds", "on the longest day of the year",
                 "whenever the wind drops", "at the end of the season"),
        "tool": ("a mini pump", "a multi-tool with a chain breaker", "a pair of tyre levers", "a bright rear light",
                 "a waterproof map case", "a spare set of brake pads"),
        "person": ("a mechanic at the local bike shop", "my riding partner Tom", "the leader of our club ride",
                   "a reader from Cornwall", "my brother", "an old racing cyclist", "a courier I met at the lights",
                   "my physiotherapist"),
    },
    "beekeeping": {
        "nouns": ("honey bee colonies", "queen cells", "wax foundation sheets", "brood frames", "swarms",
                  "spring nectar flows", "hive stands", "drone combs", "winter clusters", "honey supers"),
        "action": ("inspect the brood frames", "add a super before the flow starts", "keep the smoker lit",
                   "mark the queen", "check for signs of disease", "feed a thin sugar syrup",
                   "move slowly around the hives", "reduce the entrance for winter",
                   "record what you see at each visit", "wear gloves that fit properly"),
        "place": ("at the bottom of the orchard", "behind the hedge in the top field",
                  "on the roof of the community centre", "in the corner of the walled garden", "near the lime trees",
                  "on a rooftop in the city", "beside the old stone wall", "in the apiary by the stream"),
        "time": ("on a warm still afternoon", "in the first week of May", "before the hawthorn flowers",
                 "late in the summer", "on a cold bright day in February", "once the cherry blossom opens",
                 "every seven to nine days", "after the main harvest"),
        "tool": ("a well-worn hive tool", "a bellows smoker", "a soft bee brush", "a notebook kept in the shed",
                 "a veil with good visibility", "a queen marking cage"),
        "person": ("the bee inspector", "an old beekeeper from the next village",
                   "my mentor at the beekeeping association", "a farmer who lends us a field", "my partner",
                   "a reader from Devon", "the swarm collector for our area", "a retired science teacher"),
    },
    "parenting": {
        "nouns": ("night feeds", "bedtime routines", "first words", "toddler tantrums", "nursery mornings",
                  "teething weeks", "rainy afternoons", "bath times", "school runs", "first steps"),
        "action": ("keep a simple diary of sleep times", "take turns with the night shift",
                   "read the same story every evening", "lower your expectations for a while",
                   "ask the health visitor for advice", "get outside once a day", "keep spare clothes in the car",
                   "sterilise the bottles each morning", "warm the milk slowly", "accept help when it is offered"),
        "place": ("in the back of the car", "at the kitchen table", "in the quiet room at the library",
                  "at the playground by the river", "in a dark and cool bedroom", "on long train journeys",
                  "at grandma's house", "in the waiting room at the clinic"),
        "time": ("in the first six weeks", "at three in the morning", "during the summer holidays",
                 "on the first day back", "when everyone is tired", "just before bedtime", "in the early evening",
                 "around the first birthday"),
        "tool": ("a cheap baby monitor", "a well-stocked changing bag", "a soft sling", "a white noise app",
                 "a battered picture book", "a thermos of tea"),
        "person": ("our health visitor", "my mother", "another parent at the playgroup", "a midwife we trust",
                   "my sister", "a reader from Glasgow", "our childminder", "a grandfather of six"),
    },
    "coding": {
        "nouns": ("config files", "unit tests", "log messages", "command line tools", "small scripts",
                  "database queries", "error handlers", "build scripts", "regular expressions", "JSON payloads"),
        "action": ("write the test before the fix", "read the error message slowly", "keep functions short",
                   "name things after what they do", "commit early and often", "delete code you no longer need",
                   "measure before optimising", "pin your dependencies", "log the inputs of a failing call",
                   "ask a colleague to review the change"),
        "place": ("in a fresh virtual environment", "on the build server", "in a scratch branch", "on an old laptop",
                  "inside the container", "in the staging environment", "at the top of the module",
                  "in the team wiki"),
        "time": ("before every release", "on a quiet Friday afternoon", "during code review",
                 "whenever a test fails twice", "at the start of a new project", "late at night",
                 "after an outage", "on the first day in a new team"),
        "tool": ("a good debugger", "a plain text editor", "a strict linter", "a simple profiler",
                 "a rubber duck on the desk", "a notebook of past bugs"),
        "person": ("a senior engineer on my team", "my first manager", "the maintainer of a popular library",
                   "a student in my evening class", "a colleague from the data team", "the on-call engineer",
                   "a reader from Berlin", "my pair programming partner"),
    },
}

NEWS_SLOTS = {
    "official": ("the council leader", "a spokesperson for the county council", "the chair of the parish council",
                 "the local member of parliament", "the head of highways", "a senior planning officer"),
    "project": ("the new footbridge over the river", "the library refurbishment", "the plan for a second bus route",
                "the expansion of the primary school", "the repairs to the harbour wall",
                "the redevelopment of the old market hall", "the proposed cycle lane on the high street",
                "the new health centre"),
    "town": ("Millbrook", "Ashcombe", "Drayford", "Wexley", "Pennridge", "Oldcastle", "Saltmarsh", "Hollins Cross"),
    "outcome": ("go ahead next spring", "cost more than first planned", "be delayed until the autumn",
                "be paid for by a national grant", "need another public consultation", "be finished before Christmas"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "month": ("January", "February", "March", "May", "June", "September", "October", "November"),
    "venue": ("town hall", "community centre", "church hall", "leisure centre", "school hall"),
    "incident": ("a break-in at a shop on the high street", "a collision between a van and a cyclist",
                 "a fire at an empty warehouse", "the theft of tools from an allotment shed",
                 "damage to a bus shelter"),
    "saying": ("We just want somebody to listen to us.", "It has been a long time coming.",
               "I will believe it when I see it.", "This town deserves better.", "It is good news for families here."),
}

GERMAN_SLOTS = {
    "monat": ("Januar", "März", "Mai", "Juni", "September", "Oktober", "November"),
    "ort": ("Talbach", "Oberwiesen", "Kirchheim am See", "Steinfeld", "Lindenau", "Bergrode"),
    "projekt": ("einen neuen Radweg", "die Sanierung der Grundschule", "ein kleines Hallenbad",
                "den Umbau des Marktplatzes", "eine zweite Buslinie", "die neue Brücke über den Bach"),
    "wochentag": ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag"),
    "saal": ("Bürgerhaus", "Gemeindesaal", "Gasthaus Krone", "Feuerwehrhaus"),
    "person": ("der Bürgermeister", "die Ortsvorsteherin", "ein Sprecher der Verwaltung",
               "die Vorsitzende des Bauausschusses", "eine Sprecherin der Bürgerinitiative"),
    "anwohner": ("eine Rentnerin", "ein junger Vater", "eine Lehrerin", "ein Landwirt", "eine Bäckerin"),
    "tag": tuple(str(day) for day in range(1, 29)),
}
FRENCH_SLOTS = {
    "ville": ("Saint-Aubin-sur-Vaudière", "Montclaret", "Les Ormeaux", "Villeneuve-la-Rivière", "Beaulieu",
              "Castelmont"),
    "projet": ("la rénovation de l'école primaire", "la construction d'une nouvelle passerelle",
               "l'agrandissement de la médiathèque", "le réaménagement de la place du marché",
               "la création d'une piste cyclable", "l'ouverture d'une deuxième ligne de bus"),
    "jour": ("lundi", "mardi", "mercredi", "jeudi", "vendredi"),
    "mois": ("janvier", "mars", "mai", "juin", "septembre", "octobre", "novembre"),
    "salle": ("salle des fêtes", "mairie", "maison des associations", "bibliothèque municipale"),
    "personne": ("le maire", "une adjointe au maire", "le président de l'association des riverains",
                 "une commerçante du centre-ville", "un agriculteur de la commune", "la directrice de l'école"),
    "habitant": ("une retraitée", "un jeune père de famille", "une institutrice", "un boulanger", "une infirmière"),
    "date": tuple(str(day) for day in range(2, 29)),
}
SPANISH_SLOTS = {
    "pueblo": ("Villaverde del Río", "San Martín de la Vega", "Robledo", "Fuentealta", "Castrillo", "Valdemora"),
    "proyecto": ("la reforma del colegio público", "la construcción de un nuevo puente",
                 "la ampliación de la biblioteca", "la remodelación de la plaza mayor",
                 "un carril bici en la avenida principal", "una segunda línea de autobús"),
    "dia": ("lunes", "martes", "miércoles", "jueves", "viernes"),
    "mes": ("enero", "marzo", "mayo", "junio", "septiembre", "octubre", "noviembre"),
    "sala": ("el centro cultural", "la casa de la cultura", "el salón de plenos", "la biblioteca municipal"),
    "persona": ("el alcalde", "la concejala de urbanismo", "un portavoz de la asociación de vecinos",
                "una comerciante del centro", "un agricultor de la zona", "la directora del colegio"),
    "vecino": ("una jubilada", "un joven padre", "una maestra", "un panadero", "una enfermera"),
    "fecha": tuple(str(day) for day in range(2, 29)),
}

GRAMMARS = {
    **{
        topic: Grammar(
            titles=HOBBY_TITLES, sentences=HOBBY_SENTENCES, quotes=HOBBY_QUOTES,
            slots={**slots, "saying": SAYINGS}, paragraphs=(3, 4), sentences_per_paragraph=(2, 3),
            tips=HOBBY_TIPS, subheadings=HOBBY_SUBHEADINGS, focus=("nouns",),
        )
        for topic, slots in TOPIC_SLOTS.items()
    },
    "local_news": Grammar(
        titles=("{project} in {town} to {outcome}", "Residents Divided Over {project} in {town}",
                "{town} Council Questioned Over {project}", "Police Appeal After {incident} in {town}",
                "Fresh Delay Hits {project} in {town}"),
        sentences=(
            "{Official} said on {weekday} that {project} in {town} would {outcome}.",
            "Residents of {town} have until the end of {month} to comment on {project}.",
            "The council expects {project} in {town} to cost about {n} thousand pounds.",
            "At a packed meeting in the {venue}, more than {n} people asked questions about {project}.",
            '"We have listened carefully to the people of {town}," said {official}.',
            "Opponents say {project} will bring more traffic to {town} without solving the real problems.",
            "Will {project} in {town} finally go ahead this time?",
            "A decision on {project} in {town} is expected when the planning committee meets on {weekday}.",
            "Shop owners in {town} said they would welcome {project} if the work is finished quickly.",
            "Police in {town} are appealing for witnesses after {incident} on {weekday} evening.",
            "Officers said {incident} in {town} was being treated as an isolated case.",
            "Anyone who saw {incident} near {town} is asked to call the local police station.",
            "{Official} admitted that {project} had taken {n} months longer than planned.",
        ),
        quotes=('One resident of {town}, who has lived there for {n} years, said: "{saying}"',),
        slots=NEWS_SLOTS, paragraphs=(5, 7), sentences_per_paragraph=(1, 2), focus=("town", "project"),
    ),
    "lokales": Grammar(
        titles=("{Ort}: Streit um {projekt}", "Gemeinderat in {ort} berät über {projekt}",
                "Neue Pläne für {projekt} in {ort}"),
        sentences=(
            "Im {monat} will die Gemeinde {ort} {projekt} auf den Weg bringen.",
            "Die Verwaltung rechnet für {projekt} mit Kosten von rund {n}0.000 Euro.",
            "Bei der Versammlung am {wochentag} im {saal} meldeten sich mehr als {n} Bürgerinnen und Bürger zu Wort.",
            "{Person} sagte, man nehme die Sorgen der Anwohner in {ort} sehr ernst.",
            "Kritiker in {ort} befürchten, dass der Bau vor allem mehr Verkehr bringen wird.",
            "Ob die Arbeiten für {projekt} noch vor dem Winter beginnen, ist derzeit unklar.",
            "Viele Geschäftsleute in {ort} begrüßen die Pläne, wünschen sich aber eine schnelle Umsetzung.",
            "Die nächste Sitzung des Gemeinderats in {ort} findet am {wochentag}, dem {tag}. {monat}, "
            "im Rathaus statt.",
            "{Anwohner} wohnt seit {n} Jahren in {ort} und hält die Pläne für vernünftig.",
            "Warum hat die Gemeinde {ort} so lange mit einer Entscheidung gewartet?",
        ),
        quotes=(), slots=GERMAN_SLOTS, paragraphs=(6, 8), sentences_per_paragraph=(1, 2),
        focus=("ort", "projekt"),
    ),
    "actualites": Grammar(
        titles=("{Ville} : le conseil municipal vote {projet}", "Débat animé autour de {projet} à {ville}",
                "Ce qui va changer à {ville} avec {projet}"),
        sentences=(
            "Le conseil municipal de {ville} a voté {projet} lors de sa séance de {jour}.",
            "Selon la mairie de {ville}, le chantier devrait coûter environ {n}0 000 euros.",
            "Plus de {n} habitants ont assisté à la réunion publique organisée à la {salle}.",
            "{Personne} a expliqué que les travaux à {ville} commenceraient au mois de {mois}.",
            "Certains riverains craignent que le projet n'apporte davantage de circulation à {ville}.",
            "Pourquoi la commune de {ville} a-t-elle attendu si longtemps avant d'agir ?",
            "Les commerçants de {ville} saluent l'initiative, mais demandent des travaux rapides.",
            "La prochaine réunion du conseil de {ville} aura lieu le {jour} {date} {mois} à la mairie.",
            "{Habitant} vit à {ville} depuis {n} ans et trouve le projet plutôt raisonnable.",
        ),
        quotes=(), slots=FRENCH_SLOTS, paragraphs=(6, 8), sentences_per_paragraph=(1, 2),
        focus=("ville", "projet"),
    ),
    "noticias": Grammar(
        titles=("{Pueblo} aprueba {proyecto}", "Debate en {pueblo} sobre {proyecto}",
                "Lo que cambiará en {pueblo} con {proyecto}"),
        sentences=(
            "El ayuntamiento de {pueblo} aprobó {proyecto} en el pleno del {dia}.",
            "Según fuentes municipales de {pueblo}, las obras costarán unos {n}0.000 euros.",
            "Más de {n} vecinos acudieron a la reunión celebrada en {sala}.",
            "{Persona} explicó que los trabajos en {pueblo} empezarán en {mes}.",
            "Algunos vecinos temen que el proyecto traiga más tráfico a {pueblo}.",
            "¿Por qué ha tardado tanto el ayuntamiento de {pueblo} en tomar una decisión?",
            "Los comerciantes de {pueblo} celebran la noticia, aunque piden que las obras sean rápidas.",
            "El próximo pleno de {pueblo} se celebrará el {dia} {fecha} de {mes} en el ayuntamiento.",
            "{Vecino} vive en {pueblo} desde hace {n} años y cree que el plan es razonable.",
        ),
        quotes=(), slots=SPANISH_SLOTS, paragraphs=(6, 8), sentences_per_paragraph=(1, 2),
        focus=("pueblo", "proyecto"),
    ),
}

SHARED_LINES = (
    "Sign up for our free weekly newsletter and never miss a story from our small team of writers.",
    "If you enjoyed reading this, please share it with a friend who might enjoy it too.",
)

# English cookie notices carry C4's policy phrases; the others have no end mark. Either
# way C4's line rules drop them, so only SHARED_LINES repeat as full sentences across sites.
CHROME = {
    "en": {
        "cookie": ("This site uses cookies to give you the best possible experience.",
                   "We use cookies to understand how visitors find their way around.",
                   "By continuing to browse you agree to our use of cookies.",
                   "Please take a moment to read our updated privacy policy.",
                   "By using this website you accept our terms of use and cookie policy."),
        "accept": "Accept",
        "related": "You might also like",
        "teasers": ("Five questions our readers keep asking...", "What we got wrong last spring...",
                    "A quiet weekend and a long list of jobs...", "The one thing I would never give up...",
                    "Our plans for the months ahead...", "Notes from a very wet week..."),
        "footer": ("About us", "Contact", "Privacy policy", "Terms of use"),
    },
    "de": {
        "cookie": ("Diese Website verwendet Cookies",),
        "accept": "Einverstanden",
        "related": "Lesen Sie auch",
        "teasers": ("Was der neue Haushalt für die Vereine bedeutet...",
                    "Sommerfest am Marktplatz: Das Programm im Überblick...",
                    "Zwei neue Ärzte für die Praxis am Bahnhof..."),
        "footer": ("Impressum", "Datenschutz", "Kontakt"),
    },
    "fr": {
        "cookie": ("Ce site utilise des cookies",),
        "accept": "J'accepte",
        "related": "À lire aussi",
        "teasers": ("Le programme complet de la fête du village...",
                    "Deux nouveaux médecins s'installent au centre-ville...",
                    "Ce que contient le budget de cette année..."),
        "footer": ("Mentions légales", "Confidentialité", "Contact"),
    },
    "es": {
        "cookie": ("Este sitio web utiliza cookies",),
        "accept": "Aceptar",
        "related": "Lee también",
        "teasers": ("El programa completo de las fiestas del pueblo...",
                    "Dos nuevos médicos llegan al centro de salud...",
                    "Lo que incluye el presupuesto de este año..."),
        "footer": ("Aviso legal", "Privacidad", "Contacto"),
    },
}
BYLINE = {"en": "By {author} | {date:%B %d, %Y}", "de": "Von {author} | {date:%d.%m.%Y}",
          "fr": "Par {author} | {date:%d/%m/%Y}", "es": "Por {author} | {date:%d/%m/%Y}"}

_EN_NAV = ("Home", "About us", "Archive", "Contact")
HOBBY_SITES = (
    Site("The Green Thumb Diary", "www.greenthumbdiary.com", "https", "gardening",
         ("Home", "Grow your own", "Flowers", "About us", "Contact"), ("Maggie Thorne",), shared_line=0),
    Site("Allotment Notes", "allotmentnotes.org.uk", "http", "gardening", _EN_NAV, ("Bill Ashworth",)),
    Site("Branch Line Weekly", "www.branchlineweekly.co.uk", "https", "railways",
         ("Home", "Heritage lines", "Photo galleries", "About us", "Contact"), ("Gerald Pike", "Anne Moss"),
         shared_line=1),
    Site("Signal Box Stories", "signalboxstories.net", "http", "railways", _EN_NAV, ("Ray Colley",)),
    Site("Supper at Seven", "www.supperatseven.com", "https", "cooking",
         ("Home", "Recipes", "Baking", "About us", "Contact"), ("Nadia Fenwick",), shared_line=0),
    Site("The Crumb Ledger", "crumbledger.com", "http", "cooking", _EN_NAV, ("Owen Lacey",)),
    Site("Dark Sky Logbook", "www.darkskylogbook.org", "https", "astronomy", _EN_NAV, ("Iris Calloway",),
         shared_line=1),
    Site("Backyard Orbits", "backyardorbits.com", "https", "astronomy", _EN_NAV, ("Sam Okoro",)),
    Site("Gravel and Gears", "www.gravelandgears.com", "https", "cycling",
         ("Home", "Routes", "Kit", "About us", "Contact"), ("Jo Whitlock",), shared_line=0),
    Site("Hive Hours", "hivehours.co.uk", "http", "beekeeping", _EN_NAV, ("Martha Quill",), shared_line=1),
    Site("Small Hours Parenting", "www.smallhoursparenting.com", "https", "parenting", _EN_NAV, ("Lucy Harlan",),
         shared_line=0),
    Site("Byte-Sized Tutorials", "www.bytesizedtutorials.com", "https", "coding",
         ("Home", "Tutorials", "Snippets", "About us", "Contact"), ("Dev Raman",)),
)
_NEWS_NAV = ("Home", "News", "Sport", "What's on", "Contact us")
NEWS_SITES = (
    Site("The Harbour Gazette", "www.harbourgazette.com", "https", "local_news", _NEWS_NAV,
         ("Claire Dunmore", "Peter Voss"), shared_line=0),
    Site("Northfield Times", "www.northfieldtimes.co.uk", "https", "local_news", _NEWS_NAV, ("Helen Marsh",)),
    Site("Riverbend Herald", "riverbendherald.com", "http", "local_news", _NEWS_NAV, ("Tom Ellery",),
         shared_line=1),
    Site("The Daily Lantern", "www.dailylantern.net", "https", "local_news", _NEWS_NAV, ("Ruth Abara",)),
)
FOREIGN_SITES = (
    Site("Talbacher Bote", "www.talbacher-bote.de", "https", "lokales",
         ("Startseite", "Lokales", "Sport", "Kultur", "Kontakt"), ("Jana Brinkmann",), language="de"),
    Site("Le Courrier de la Vaudière", "www.courrier-vaudiere.fr", "https", "actualites",
         ("Accueil", "Actualités", "Sports", "Culture", "Contact"), ("Claire Fontaine",), language="fr"),
    Site("El Diario del Valle", "www.diariodelvalle.es", "https", "noticias",
         ("Inicio", "Noticias", "Deportes", "Cultura", "Contacto"), ("Lucía Ortega",), language="es"),
)
THEME_DEMO_SITE = Site("Starter Theme Demo", "demo.startertheme.net", "https", "cooking",
                       ("Home", "Sample page", "Blog", "Contact"), ("Theme Author",))
WEATHER_SITE = Site("Hilltop Weather Station", "www.hilltopweather.org", "http", "weather",
                    ("Home", "Live data", "Archive", "Contact"), ("Station volunteers",))
SITES_BY_HOST = {site.host: site
                 for site in (*HOBBY_SITES, *NEWS_SITES, *FOREIGN_SITES, THEME_DEMO_SITE, WEATHER_SITE)}
# Mirror sites copy whole pages, chrome included, under a path naming the source host.
MIRROR_HOST = "www.pagemirror.info"

LOREM_LINES = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed tempor magna varius.",
    "Lorem ipsum dolor sit amet, vitae porta nisl blandit quis, nulla facilisi.",
    "Lorem ipsum dolor sit amet, ut feugiat lacus luctus sed, donec vel tellus.",
)
SHORT_PAGE_TITLES = ("Contact us", "Opening hours", "Subscribe", "Write for us")
JAVASCRIPT_LINE = "Please enable JavaScript to view this page."
BRACE_LINES = (
    "In Python an empty pair of braces like counts = {} gives you a new dictionary to fill.",
    "The whole rule fits on one line: .card { padding: 1rem; } and nothing else is needed.",
    "Write the check as if (total > limit) { stop(); } so the intent is obvious at a glance.",
)
CODE_SNIPPETS = (
    "def count_words(lines):\n    counts = {}\n    for line in lines:\n        for word in line.split():\n"
    "            counts[word] = counts.get(word, 0) + 1\n    return counts",
    ".card {\n    padding: 1rem;\n    border: 1px solid #d0d0d0;\n}",
    "int clamp(int value, int low, int high) {\n    if (value < low) { return low; }\n"
    "    if (value > high) { return high; }\n    return value;\n}",
)
LONG_WORD_INTROS = (
    "Here is the raw image data exactly as the upload form returned it:",
    "One reader pasted the encoded settings string below into the comments:",
    "The export tool produced this single unbroken block of characters:",
)
# A word on the LDNOOBW English list (C4's bad-words filter), used in a harmless sense.
BADWORD = "nipple"
# Entries of the LDNOOBW English list, written as the sample's bad-words file (the real list is
# fetched from its pinned URL or given with --badwords).
SAMPLE_BADWORDS = ("2g1c", "erotic", "nipple", "nipples", "strip club", "topless", "xxx")
BADWORD_LINES = (
    "Before every feed, check that the bottle nipple has no cracks or splits.",
    "If the milk drips out too fast, try a slower flow nipple for a few weeks.",
)
LATIN1_PARAGRAPH = (
    "Our favourite café on the corner serves a crème brûlée that is worth the walk. "
    "The owner, a naïve optimist by her own account, also makes a jalapeño soup every Friday. "
    "We asked for the recipe, but she only smiled and poured more coffee."
)
WIND_DIRECTIONS = ("north", "north-east", "east", "south-east", "south", "south-west", "west", "north-west")

WIKI_PLACES = ("Brackenfold", "Eastwick Marsh", "Little Ormsby", "Cranleigh Water", "Thornbury Edge",
               "Hallam Cross", "Wendlebury St Anne")
WIKI_SLOTS = {
    "district": ("Harlow Vale", "North Wexmoor", "Eldon", "South Fenwick"),
    "county": ("Westshire", "Marlingford", "Cotterdale"),
    "river": ("River Orrel", "Millstream", "River Calde", "Ashbrook"),
    "saint": ("St Michael", "St Helen", "All Saints", "St Bartholomew"),
    "century": ("12th", "13th", "14th", "15th"),
    "town": NEWS_SLOTS["town"],
    "author": ("Morris", "Hale", "Pritchard", "Okafor", "Lindqvist", "Barrow"),
}
WIKI_HISTORY = (
    "{subject} is first mentioned in a charter of {charter}, when it belonged to a small priory.",
    "The parish church of {saint} at {subject} dates from the {century} century and was restored in {restored}.",
    "A railway station opened at {subject} in {station_opened} but closed to passengers in {station_closed}.",
    "The old mill on the {river} at {subject} was converted into houses in {mill}.",
)
WIKI_GEOGRAPHY = (
    "{subject} lies on the {river}, about {miles} miles north of {town}.",
    "The parish of {subject} covers roughly {hectares} hundred hectares of farmland and woodland.",
    "At the {census} census {subject} had a population of {population}.",
    "{subject} has a primary school, a public house and a small post office.",
)
WIKI_LICENCE = ("Text on this page may be reused under a Creative Commons licence; "
                "see the Terms of Use and Privacy Policy for details.")
GERMAN_WIKI_SENTENCES = (
    "Talbach ist ein Ortsteil der Gemeinde Oberwald im Landkreis Steinfeld.[1]",
    "Der Ort wurde im Jahr 1243 erstmals in einer Urkunde des Klosters Lindenau erwähnt.[2]",
    "Die Dorfkirche stammt aus dem 14. Jahrhundert und wurde zuletzt 1987 umfassend renoviert.[3]",
    "Im Jahr 1871 erhielt Talbach einen Bahnhof an der Strecke nach Bergrode, der 1962 geschlossen wurde.",
    "Heute leben in dem Ort etwa 640 Menschen, von denen viele in den umliegenden Städten arbeiten.[4]",
    "Der Ortsname geht vermutlich auf einen alten Flurnamen für das Tal des gleichnamigen Baches zurück.",
    "Neben der Landwirtschaft prägen heute einige kleine Handwerksbetriebe das Ortsbild.",
    "Der Sportverein des Ortes wurde 1921 gegründet und unterhält einen Fußballplatz am Waldrand.",
)

SUBREDDITS = {
    "gardening": "gardening", "railways": "trains", "cooking": "Cooking", "astronomy": "Astronomy",
    "cycling": "bicycling", "beekeeping": "Beekeeping", "parenting": "Parenting", "coding": "programming",
    "local_news": "news", "lokales": "de", "actualites": "france", "noticias": "spain",
}
GENERAL_SUBREDDITS = ("todayilearned", "InternetIsBeautiful", "UpliftingNews", "europe", "bestof")
REDDIT_AUTHORS = ("quiet_heron", "tea_and_toast", "gravel_grinder_77", "orbit_watcher", "mossy_bench",
                  "late_train_again", "honeyfingers", "curly_kale_fan", "north_wind_42", "breadwinner_uk")
SELF_POSTS = (
    ("What is the best way to get started?", "I have read a lot but never actually tried. Where should I begin?"),
    ("Weekly discussion thread", "Share what you have been working on this week."),
    ("Is it just me or is this getting harder?", "Three years in and I still feel like a beginner."),
    ("Help needed with a small problem", "Something went wrong last weekend and I cannot work out why."),
    ("Endlich wieder Dampfbetrieb auf der Strecke 🚂", "Am Wochenende fährt die alte Lok – wer kommt mit?"),
)
# Scores at capture time: many tiny ones, a few large (GPT-2 keeps links with >= 3 karma).
SCORES = (0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 8, 13, 27, 100, 421)
FIRST_CREATED = int(dt.datetime(2015, 1, 1, tzinfo=dt.UTC).timestamp())
LAST_CREATED = int(dt.datetime(2019, 12, 31, 23, 59, 59, tzinfo=dt.UTC).timestamp())
WEBTEXT_CUTOFF = int(dt.datetime(2018, 1, 1, tzinfo=dt.UTC).timestamp())
FIRST_REDDIT_ID = int("2qzz00", 36)  # ids of early-2015 submissions look like this


# --- drafting: seeded choices that never repeat a sentence by chance -------------------

@dataclass(frozen=True)
class Voice:
    """One article's way of writing: its grammar, its slot values and its shuffled templates."""

    grammar: Grammar
    slots: Mapping[str, tuple[str, ...]]
    sentences: Iterator[str]
    quotes: Iterator[str]
    tips: Iterator[str]


@dataclass
class Drafts:
    """The seeded random source, plus every sentence and URL drawn so far."""

    rng: random.Random
    sentences: set[str] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)

    def sentence(self, templates: Iterator[str], slots: Mapping[str, tuple[str, ...]]) -> str:
        for _ in range(DRAW_ATTEMPTS):
            text = fill(next(templates), slots, self.rng)
            if text not in self.sentences:
                self.sentences.add(text)
                return text
        raise ValueError("the sample grammars ran out of new sentences; ask for fewer pages")

    def voice(self, grammar: Grammar, focused: bool = True) -> Voice:
        """What one article draws from: its templates, each used once before any repeats."""
        def deck(templates: tuple[str, ...]) -> Iterator[str]:
            return itertools.cycle(self.rng.sample(templates, len(templates)))

        slots = dict(grammar.slots)
        if focused:
            slots.update({name: (self.rng.choice(grammar.slots[name]),) for name in grammar.focus})
        return Voice(grammar, slots, deck(grammar.sentences), deck(grammar.quotes), deck(grammar.tips))

    def fetch_time(self) -> str:
        moment = FETCH_START + dt.timedelta(seconds=self.rng.randrange(FETCH_SECONDS))
        return moment.strftime(TIMESTAMP_FORMAT)


_FORMATTER = string.Formatter()


def fill(template: str, slots: Mapping[str, tuple[str, ...]], rng: random.Random) -> str:
    """Fill each ``{slot}`` once; ``{Slot}`` capitalises, ``{n}``/``{N}`` is a number from 2 to 40."""
    values = {}
    for _, name, _, _ in _FORMATTER.parse(template):
        if name and name not in values:
            values[name] = slot_value(name, slots, rng)
    return template.format(**values)


def slot_value(name: str, slots: Mapping[str, tuple[str, ...]], rng: random.Random) -> str:
    if name.lower() == "n":
        return str(rng.randint(2, 40))
    value = rng.choice(slots[name.lower()])
    return capitalize(value) if name[0].isupper() else value


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


_SMALL_WORDS = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "with", "from", "by", "over", "or"}


def title_case(text: str) -> str:
    words = text.split(" ")
    return " ".join(w if i and w in _SMALL_WORDS else capitalize(w) for i, w in enumerate(words))


def slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def published_date(rng: random.Random) -> dt.date:
    return dt.date(2015, 1, 1) + dt.timedelta(days=rng.randrange((dt.date(2019, 4, 17) - dt.date(2015, 1, 1)).days))


# --- page builders ---------------------------------------------------------------------

def paragraph(d: Drafts, voice: Voice) -> str:
    count = d.rng.randint(*voice.grammar.sentences_per_paragraph)
    sentences = [d.sentence(voice.sentences, voice.slots) for _ in range(count)]
    if voice.grammar.quotes and d.rng.random() < QUOTE_SHARE:
        sentences.append(d.sentence(voice.quotes, voice.slots))
    return " ".join(sentences)


def article_body(d: Drafts, voice: Voice) -> list[Block]:
    grammar = voice.grammar
    body: list[Block] = [("p", paragraph(d, voice)) for _ in range(d.rng.randint(*grammar.paragraphs))]
    if grammar.subheadings:
        body.insert(len(body) // 2, ("h2", d.rng.choice(grammar.subheadings)))
    if grammar.tips:
        body[-1:-1] = [("li", d.sentence(voice.tips, voice.slots)) for _ in range(3)]
    return body


def article_head(d: Drafts, site: Site, voice: Voice) -> tuple[str, str, dt.date]:
    """A title, a URL no other page has, and the publication date in that URL."""
    for _ in range(DRAW_ATTEMPTS):
        title = fill(d.rng.choice(voice.grammar.titles), voice.slots, d.rng)
        title = title_case(title) if site.language == "en" else capitalize(title)
        published = published_date(d.rng)
        url = f"{site.scheme}://{site.host}/{published:%Y/%m}/{slugify(title)}/"
        if url not in d.urls:
            d.urls.add(url)
            return title, url, published
    raise ValueError("the sample grammars ran out of new titles; ask for fewer pages")


def site_sections(d: Drafts, site: Site, article: list[Block], *,
                  shared: bool = True) -> tuple[tuple[Section, ...], tuple[str, ...], str]:
    """Wrap an article in the site's chrome: menu, maybe a cookie banner and related links, footer.

    Returns the sections, the kind tags the chrome adds, and a boilerplate line to snippet.
    """
    words = CHROME[site.language]
    kinds = ["menu"]
    copyright_line = f"© 2019 {site.name}"
    boilerplate = copyright_line
    sections: list[Section] = [("header", (("logo", site.name), *(("nav", item) for item in site.nav)))]
    if d.rng.random() < COOKIE_SHARE:
        boilerplate = d.rng.choice(words["cookie"])
        sections.append(("cookie", (("p", boilerplate), ("button", words["accept"]))))
        if site.language == "en":
            kinds.append("policy")
    sections.append(("article", tuple(article)))
    if d.rng.random() < ASIDE_SHARE:
        teasers = d.rng.sample(words["teasers"], 2)
        sections.append(("aside", (("h2", words["related"]), *(("li", teaser) for teaser in teasers))))
        kinds.append("ellipsis")
    footer: list[Block] = [("li", item) for item in words["footer"]]
    if shared and site.shared_line is not None:
        footer.append(("p", SHARED_LINES[site.shared_line]))
        kinds.append("shared_line")
    footer.append(("small", copyright_line))
    sections.append(("footer", tuple(footer)))
    return tuple(sections), tuple(kinds), boilerplate


def article_page(d: Drafts, site: Site, key: str, kinds: tuple[str, ...] = (), inserts: tuple[Block, ...] = (),
                 content_type: str = "text/html; charset=utf-8") -> Page:
    """An article from the site's grammar, with ``inserts`` placed among its paragraphs."""
    voice = d.voice(GRAMMARS[site.topic])
    title, url, published = article_head(d, site, voice)
    body = article_body(d, voice)
    for block in inserts:
        body.insert(d.rng.randint(0, len(body)), block)
    byline = BYLINE[site.language].format(author=d.rng.choice(site.authors), date=published)
    sections, chrome_kinds, boilerplate = site_sections(d, site, [("h1", title), ("byline", byline), *body])
    language_kinds = ("english",) if site.language == "en" else ("non_english", site.language)
    return Page(
        key=key, url=url, timestamp=d.fetch_time(), language=site.language, title=f"{title} | {site.name}",
        kinds=(*language_kinds, *kinds, *chrome_kinds), sections=sections, content_type=content_type,
        main_snippet=first_sentence(next(text for tag, text in body if tag == "p" and (tag, text) not in inserts)),
        boilerplate_snippet=boilerplate,
    )


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]


def short_page(d: Drafts, site: Site, title: str, key: str) -> Page:
    """A contact-style page with only two full sentences, so C4 drops it as too short."""
    voice = d.voice(GRAMMARS[site.topic], focused=False)
    sentences = [d.sentence(voice.sentences, voice.slots) for _ in range(2)]
    url = f"{site.scheme}://{site.host}/{slugify(title)}/"
    d.urls.add(url)
    article = [("h1", title), ("p", sentences[0]), ("p", sentences[1])]
    sections, chrome_kinds, boilerplate = site_sections(d, site, article, shared=False)
    return Page(key=key, url=url, timestamp=d.fetch_time(), language="en", title=f"{title} | {site.name}",
                kinds=("english", "too_few_sentences", *chrome_kinds), sections=sections,
                main_snippet=sentences[0], boilerplate_snippet=boilerplate)


def too_long_page(d: Drafts, key: str) -> Page:
    """A weather log whose text is longer than C4's 1.9e5-character limit."""
    site = WEATHER_SITE
    title = "Complete observation log since 2009"
    lines: list[Block] = [("h1", title)]
    length = len(title)
    moment = dt.datetime(2009, 1, 1)
    while length < TOO_LONG_CHARS:
        line = (f"Reading {len(lines)}: on {moment:%d %B %Y} at {moment:%H}:00 the air temperature was "
                f"{d.rng.uniform(-8, 31):.1f} degrees and the wind blew from the {d.rng.choice(WIND_DIRECTIONS)} "
                f"at {d.rng.randint(0, 70)} km/h.")
        lines.append(("p", line))
        length += len(line) + 1
        moment += dt.timedelta(hours=3)
    url = f"{site.scheme}://{site.host}/archive/full-log/"
    d.urls.add(url)
    sections, chrome_kinds, boilerplate = site_sections(d, site, lines)
    return Page(key=key, url=url, timestamp=d.fetch_time(), language="en", title=f"{title} | {site.name}",
                kinds=("english", "too_long", *chrome_kinds), sections=sections,
                main_snippet=lines[1][1], boilerplate_snippet=boilerplate)


def cite(sentences: list[str], counter: itertools.count, needed: int) -> list[str]:
    """Append Wikipedia citation marks: ``[k]`` to most sentences, ``[citation needed]`` to one."""
    return [s + ("[citation needed]" if i == needed else f"[{next(counter)}]") for i, s in enumerate(sentences)]


def wikipedia_page(d: Drafts, subject: str, host: str, key: str) -> Page:
    """An English Wikipedia article about an invented village, with citation and [edit] marks."""
    rng = d.rng
    facts = {name: rng.choice(values) for name, values in WIKI_SLOTS.items()}
    facts.update(subject=subject, charter=rng.randint(1086, 1300), restored=rng.randint(1850, 1990),
                 station_opened=rng.randint(1840, 1880), station_closed=rng.randint(1950, 1968),
                 mill=rng.randint(1970, 2010), miles=rng.randint(2, 12), hectares=rng.randint(3, 19),
                 census=rng.choice((2001, 2011)), population=rng.randint(180, 2400))
    counter = itertools.count(1)
    lead = f"{subject} is a village and civil parish in the {facts['district']} district of {facts['county']}, England."
    lead_para = " ".join(cite([lead], counter, needed=-1))
    history = " ".join(cite([t.format(**facts) for t in WIKI_HISTORY], counter, needed=2))
    geography = " ".join(cite([t.format(**facts) for t in WIKI_GEOGRAPHY], counter, needed=-1))
    references = [f"^ {rng.choice(WIKI_SLOTS['author'])}, {rng.choice('ABCDEGHJKLMPRST')}. "
                  f"({rng.randint(1950, 2015)}). A History of {subject} and Its Parish. p. {rng.randint(3, 300)}."
                  for _ in range(next(counter) - 1)]
    url = f"https://{host}/wiki/{subject.replace(' ', '_')}"
    d.urls.add(url)
    edited = FETCH_START - dt.timedelta(minutes=rng.randrange(60 * 24 * 60))
    article: list[Block] = [
        ("h1", subject), ("p", "From Wikipedia, the free encyclopedia"), ("p", "Jump to navigation"),
        ("p", "Jump to search"), ("p", lead_para),
        ("li", "1 History"), ("li", "2 Geography"), ("li", "3 References"),
        ("h2", "History[edit]"), ("p", history), ("h2", "Geography[edit]"), ("p", geography),
        ("h2", "References[edit]"), *(("li", ref) for ref in references),
        ("p", f'Retrieved from "{url}"'),
    ]
    nav = (("Main page", "Contents", "Random article", "About Wikipedia", "Contact us", "Donate")
           if ".m." not in host else ("Home", "Random", "Nearby", "Log in", "Settings"))
    sections = (
        ("header", (("logo", "Wikipedia"), *(("nav", item) for item in nav))),
        ("article", tuple(article)),
        ("footer", (("p", f"This page was last edited on {edited:%d %B %Y}, at {edited:%H:%M} (UTC)."),
                    ("p", WIKI_LICENCE), ("li", "Privacy policy"), ("li", "About Wikipedia"), ("li", "Disclaimers"))),
    )
    return Page(key=key, url=url, timestamp=d.fetch_time(), language="en", title=f"{subject} - Wikipedia",
                kinds=("english", "wikipedia", "citation", "menu", "policy"), sections=sections,
                main_snippet=lead_para, boilerplate_snippet=WIKI_LICENCE)


def german_wikipedia_page(d: Drafts, key: str) -> Page:
    subject = "Talbach (Oberwald)"
    url = f"https://de.wikipedia.org/wiki/{subject.replace(' ', '_')}"
    d.urls.add(url)
    edit = "[Bearbeiten | Quelltext bearbeiten]"
    lead, *rest = GERMAN_WIKI_SENTENCES
    article: list[Block] = [
        ("h1", subject), ("p", "Aus Wikipedia, der freien Enzyklopädie"), ("p", "Zur Navigation springen"),
        ("p", "Zur Suche springen"), ("p", lead), ("h2", f"Geschichte{edit}"), ("p", " ".join(rest[:4])),
        ("h2", f"Gegenwart{edit}"), ("p", " ".join(rest[4:])), ("h2", f"Einzelnachweise{edit}"),
        *(("li", f"^ Chronik des Landkreises Steinfeld, Band {n}. Steinfeld 19{80 + n}, S. {12 * n}.")
          for n in range(1, 5)),
    ]
    last_edited = "Diese Seite wurde zuletzt am 12. April 2019 um 09:14 Uhr bearbeitet."
    sections = (
        ("header", (("logo", "Wikipedia"), *(("nav", item) for item in
                                             ("Hauptseite", "Themenportale", "Zufälliger Artikel", "Spenden")))),
        ("article", tuple(article)),
        ("footer", (("p", last_edited), ("li", "Datenschutz"), ("li", "Über Wikipedia"), ("li", "Impressum"))),
    )
    return Page(key=key, url=url, timestamp=d.fetch_time(), language="de", title=f"{subject} – Wikipedia",
                kinds=("non_english", "de", "wikipedia", "citation", "menu"), sections=sections,
                main_snippet=lead, boilerplate_snippet=last_edited)


def png_bytes(rng: random.Random, width: int = 8, height: int = 8) -> bytes:
    """A small valid RGB PNG of random pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(width * 3)) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def pdf_bytes(text: str) -> bytes:
    """A one-page PDF showing ``text``, with a correct cross-reference table."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = (
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def status_page(d: Drafts, key: str, url: str, status: int, location: str = "") -> Page:
    """A 404 or 301 response: a small HTML body that never reaches a WET file."""
    if location:
        link = f'<a href="{html.escape(location)}">the new address</a>'
        body = f"<html><body><p>Moved permanently to {link}.</p></body></html>"
        kinds = ("redirect",)
    else:
        body = "<html><head><title>Not found</title></head><body><h1>Page not found</h1></body></html>"
        kinds = ("http_404",)
    return Page(key=key, url=url, timestamp=d.fetch_time(), language=None, kinds=kinds, status=status,
                payload=body.encode("utf-8"), location=location)


def build_specials(d: Drafts) -> list[Page]:
    """One or more pages of every kind a later stage tests, apart from duplicates."""
    rng = d.rng
    return [
        article_page(d, THEME_DEMO_SITE, "lorem-0", ("lorem_ipsum",), (("p", LOREM_LINES[0]),)),
        *(article_page(d, rng.choice(HOBBY_SITES), f"lorem-{i}", ("article", "lorem_ipsum"),
                       (("p", LOREM_LINES[i]),)) for i in (1, 2)),
        *(article_page(d, SITES_BY_HOST["www.bytesizedtutorials.com"], f"code-{i}", ("article", "curly_brace"),
                       (("p", BRACE_LINES[i]), ("pre", CODE_SNIPPETS[i]))) for i in range(3)),
        *(article_page(d, rng.choice(HOBBY_SITES), f"javascript-{i}", ("article", "javascript"),
                       (("p", JAVASCRIPT_LINE),)) for i in range(3)),
        *(article_page(d, rng.choice(HOBBY_SITES), f"long-word-{i}", ("article", "long_word"),
                       (("p", f"{intro} {base64.b64encode(rng.randbytes(LONG_WORD_BYTES)).decode()}"),))
          for i, intro in enumerate(LONG_WORD_INTROS)),
        *(replace(article_page(d, SITES_BY_HOST["www.smallhoursparenting.com"], f"badword-{i}",
                               ("article", "badword"), (("p", line),)), badword=BADWORD)
          for i, line in enumerate(BADWORD_LINES)),
        *(short_page(d, rng.choice(HOBBY_SITES), title, f"short-{i}")
          for i, title in enumerate(rng.sample(SHORT_PAGE_TITLES, 3))),
        *(article_page(d, foreign, f"{foreign.language}-{i}") for foreign in FOREIGN_SITES for i in range(3)),
        *(wikipedia_page(d, subject, host, f"wikipedia-{i}") for i, (subject, host) in enumerate(
            zip(rng.sample(WIKI_PLACES, 4), ("en.wikipedia.org",) * 3 + ("en.m.wikipedia.org",), strict=True))),
        german_wikipedia_page(d, "wikipedia-de"),
        too_long_page(d, "too-long"),
        article_page(d, SITES_BY_HOST["crumbledger.com"], "latin1", ("article", "latin1"), (("p", LATIN1_PARAGRAPH),),
                     "text/html; charset=ISO-8859-1"),
        article_page(d, rng.choice(HOBBY_SITES), "xhtml", ("article", "xhtml"),
                     content_type="application/xhtml+xml; charset=utf-8"),
        Page(key="image", url="https://www.greenthumbdiary.com/wp-content/uploads/2019/03/seed-tray.png",
             timestamp=d.fetch_time(), language=None, kinds=("non_html",), content_type="image/png",
             payload=png_bytes(rng)),
        Page(key="pdf", url="https://www.northfieldtimes.co.uk/documents/annual-report-2018.pdf",
             timestamp=d.fetch_time(), language=None, kinds=("non_html",), content_type="application/pdf",
             payload=pdf_bytes("Northfield Times annual report 2018")),
        status_page(d, "not-found", "https://www.supperatseven.com/2017/02/a-recipe-that-moved/", 404),
    ]


URL_VARIANTS = ("scheme", "www", "trailing_slash", "utm", "fragment")
REWORDINGS = {"usually": "generally", "really": "truly", "simple": "easy", "small": "modest", "happy": "pleasant",
              "often": "frequently", "said": "stated", "expects": "predicts", "more": "far more"}
REWORDABLE = re.compile(r"\b({})\b".format("|".join(REWORDINGS)))
# Copies made from ordinary articles: mirrored, re-fetched, URL variants, near-duplicates.
MIRROR_COPIES = 3
RECRAWLS = 3
NEAR_DUPLICATES = ("reworded", "extended", "reworded", "extended")
DUPLICATE_COUNT = MIRROR_COPIES + RECRAWLS + len(URL_VARIANTS) + len(NEAR_DUPLICATES)


def url_variant(url: str, variant: str) -> str:
    """The same page under another spelling of its URL (one of ``URL_VARIANTS``)."""
    parts = urlsplit(url)
    if variant == "scheme":
        other = "http" if parts.scheme == "https" else "https"
        return other + url[len(parts.scheme):]
    if variant == "www":
        host = parts.netloc[4:] if parts.netloc.startswith("www.") else "www." + parts.netloc
        return url.replace("://" + parts.netloc, "://" + host, 1)
    if variant == "trailing_slash":
        return url[:-1] if url.endswith("/") else url + "/"
    if variant == "utm":
        return url + "?utm_source=twitter&utm_medium=social"
    return url + "#comments"


def with_article(page: Page, change: Callable[[list[Block]], list[Block]]) -> Page:
    """``page`` with ``change(blocks) -> blocks`` applied to its article section."""
    sections = tuple((name, tuple(change(list(blocks))) if name == "article" else blocks)
                     for name, blocks in page.sections)
    return replace(page, sections=sections)


def reword(blocks: list[Block]) -> list[Block]:
    """Swap a few words in the first two paragraphs that have any of ``REWORDINGS``, and the headline."""
    changed = 0
    out = []
    for tag, text in blocks:
        if tag == "h1":
            text = "Updated: " + text
        elif tag == "p" and changed < 2 and REWORDABLE.search(text):
            text = reword_text(text)
            changed += 1
        out.append((tag, text))
    return out


def reword_text(text: str) -> str:
    return REWORDABLE.sub(lambda match: REWORDINGS[match.group(1)], text)


def near_duplicate(d: Drafts, page: Page, variant: str, key: str) -> Page:
    site = SITES_BY_HOST[urlsplit(page.url).netloc]
    if variant == "reworded":
        copy = replace(with_article(page, reword), title="Updated: " + page.title,
                       main_snippet=reword_text(page.main_snippet))
    else:
        extra = ("p", paragraph(d, d.voice(GRAMMARS[site.topic], focused=False)))
        copy = with_article(page, lambda blocks: blocks[:-1] + [extra] + blocks[-1:])
    url = page.url.rstrip("/") + "-v2/"
    d.urls.add(url)
    return replace(copy, key=key, url=url, timestamp=d.fetch_time(), kinds=page.kinds + ("near_duplicate",),
                   near_duplicate_of=page.key, variant=variant)


def other_fetch_time(d: Drafts, page: Page) -> str:
    while (timestamp := d.fetch_time()) == page.timestamp:
        pass
    return timestamp


def duplicate_pages(d: Drafts, originals: list[Page]) -> list[Page]:
    """Exact copies (mirror host, re-fetch, URL variants) and near copies of ``originals``."""
    originals = iter(originals)
    copies = []
    for i, page in zip(range(MIRROR_COPIES), originals, strict=False):
        parts = urlsplit(page.url)
        copies.append(replace(page, key=f"mirror-{i}", url=f"https://{MIRROR_HOST}/{parts.netloc}{parts.path}",
                              timestamp=d.fetch_time(), duplicate_of=page.key,
                              kinds=tuple(k for k in page.kinds if k != "realnews") + ("exact_duplicate",)))
    for i, page in zip(range(RECRAWLS), originals, strict=False):
        copies.append(replace(page, key=f"recrawl-{i}", timestamp=other_fetch_time(d, page), duplicate_of=page.key,
                              kinds=page.kinds + ("same_url_recrawl",)))
    for variant, page in zip(URL_VARIANTS, originals, strict=False):
        copies.append(replace(page, key=f"variant-{variant}", url=url_variant(page.url, variant),
                              timestamp=d.fetch_time(), duplicate_of=page.key, variant=variant,
                              kinds=page.kinds + ("url_variant",)))
    for i, (variant, page) in enumerate(zip(NEAR_DUPLICATES, originals, strict=False)):
        copies.append(near_duplicate(d, page, variant, f"near-{i}"))
    return copies


def build_pages(rng: random.Random, count: int) -> list[Page]:
    """``count`` pages in crawl order: every special kind, ordinary articles, and their copies."""
    d = Drafts(rng)
    specials = build_specials(d)
    ordinary_count = count - len(specials) - DUPLICATE_COUNT - 1  # the 1 is the redirect
    if ordinary_count < DUPLICATE_COUNT:
        raise ValueError(f"a sample crawl needs at least {len(specials) + 2 * DUPLICATE_COUNT + 1} pages")
    news_count = ordinary_count // 4
    ordinary = [article_page(d, rng.choice(NEWS_SITES), f"news-{i}", ("article", "realnews"))
                for i in range(news_count)]
    ordinary += [article_page(d, rng.choice(HOBBY_SITES), f"article-{i}", ("article",))
                 for i in range(ordinary_count - news_count)]
    target = rng.choice(ordinary).url
    redirect = status_page(d, "redirect", f"http://{urlsplit(target).netloc}/?p={rng.randint(100, 9999)}", 301,
                           location=target)
    pages = specials + ordinary + duplicate_pages(d, rng.sample(ordinary, DUPLICATE_COUNT)) + [redirect]
    rng.shuffle(pages)
    return pages


# --- rendering: the same page as WET text and as an HTTP response ----------------------

def page_lines(page: Page) -> list[str]:
    """The page's visible text, one line per block element, the title first (as CC's WET has it)."""
    lines = [page.title]
    for _, blocks in page.sections:
        for _, text in blocks:
            lines.extend(text.split("\n"))
    return lines


def page_text(page: Page) -> str:
    return "\n".join(page_lines(page))


def in_wet(page: Page) -> bool:
    """CC's WET files hold text conversions of successful HTML fetches only."""
    return page.status == 200 and bool(page.sections)


def page_charset(page: Page) -> str:
    match = re.search(r"charset=([\w-]+)", page.content_type)
    return match.group(1) if match else "utf-8"


def inline(text: str) -> str:
    """Escape text for HTML and mark Wikipedia's citation and edit links the way MediaWiki does."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"\[(\d+|citation needed)\]", r'<sup class="reference">[\1]</sup>', escaped)
    edit_mark = r"\[(edit|Bearbeiten \| Quelltext bearbeiten)\]"
    return re.sub(edit_mark, r'<span class="mw-editsection">[\1]</span>', escaped)


BLOCK_HTML = {
    "logo": '<a class="logo" href="/">{}</a>',
    "byline": '<p class="byline">{}</p>',
    "button": '<button type="button">{}</button>',
    "small": "<p><small>{}</small></p>",
    "h1": "<h1>{}</h1>",
    "h2": "<h2>{}</h2>",
    "p": "<p>{}</p>",
}
SECTION_HTML = {
    "header": ('<header class="site-header">', "</header>"),
    "cookie": ('<div id="cookie-banner" class="cookie-notice" role="dialog">', "</div>"),
    "article": ('<main id="content">\n<article>', "</article>\n</main>"),
    "aside": ('<aside class="related-posts">', "</aside>"),
    "footer": ('<footer class="site-footer">', "</footer>"),
}


def render_blocks(blocks: tuple[Block, ...]) -> str:
    parts = []
    for tag, group in itertools.groupby(blocks, key=lambda block: block[0]):
        texts = [text for _, text in group]
        if tag == "nav":
            items = "".join(f'<li><a href="/{slugify(text)}/">{html.escape(text, quote=False)}</a></li>'
                            for text in texts)
            parts.append(f'<nav class="menu"><ul>{items}</ul></nav>')
        elif tag == "li":
            parts.append("<ul>\n" + "\n".join(f"<li>{inline(text)}</li>" for text in texts) + "\n</ul>")
        elif tag == "pre":
            parts.extend(f"<pre><code>{html.escape(text, quote=False)}</code></pre>" for text in texts)
        else:
            parts.extend(BLOCK_HTML[tag].format(inline(text)) for text in texts)
    return "\n".join(parts)


def page_html(page: Page) -> str:
    charset = page_charset(page)
    lang = page.language
    if page.content_type.startswith("application/xhtml+xml"):
        opening = (f'<?xml version="1.0" encoding="{charset}"?>\n'
                   '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
                   '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n'
                   f'<html xmlns="http://www.w3.org/1999/xhtml" lang="{lang}" xml:lang="{lang}">')
    else:
        opening = f'<!DOCTYPE html>\n<html lang="{lang}">'
    head = (f'<head>\n<meta charset="{charset}" />\n<title>{html.escape(page.title, quote=False)}</title>\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1" />\n'
            '<link rel="stylesheet" href="/static/site.css" />\n'
            f'<script>var pageStats = {{path: "{urlsplit(page.url).path}", sent: false}};</script>\n</head>')
    body = "\n".join(f"{SECTION_HTML[name][0]}\n{render_blocks(blocks)}\n{SECTION_HTML[name][1]}"
                     for name, blocks in page.sections)
    return f"{opening}\n{head}\n<body>\n{body}\n</body>\n</html>\n"


def response_body(page: Page) -> bytes:
    return page.payload or page_html(page).encode(page_charset(page))


REASONS = {200: "OK", 301: "Moved Permanently", 404: "Not Found"}


def http_date(timestamp: str) -> str:
    fetched = dt.datetime.strptime(timestamp, TIMESTAMP_FORMAT).replace(tzinfo=dt.UTC)
    return email.utils.format_datetime(fetched, usegmt=True)


def response_headers(page: Page, body: bytes) -> StatusAndHeaders:
    headers = [("Date", http_date(page.timestamp)), ("Server", "nginx"), ("Content-Type", page.content_type),
               ("Content-Length", str(len(body)))]
    if page.location:
        headers.append(("Location", page.location))
    headers.append(("Connection", "close"))
    return StatusAndHeaders(f"{page.status} {REASONS[page.status]}", headers, protocol="HTTP/1.1")


def request_headers(page: Page) -> StatusAndHeaders:
    parts = urlsplit(page.url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = [("User-Agent", "CCBot/2.0 (https://commoncrawl.org/faq/)"),
               ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
               ("Accept-Language", "en-US,en;q=0.5"), ("Accept-Encoding", "gzip"), ("Host", parts.netloc),
               ("Connection", "Keep-Alive")]
    return StatusAndHeaders(f"GET {target or '/'} HTTP/1.1", headers, is_http_request=True)


def stable_number(*parts: object) -> int:
    return int.from_bytes(hashlib.sha1(":".join(map(str, parts)).encode("utf-8")).digest()[:4], "big")


def record_id(seed: int, *parts: object) -> str:
    """A WARC-Record-ID that depends only on the seed and what the record is."""
    digest = hashlib.sha1(":".join(map(str, ("corpusforge-sample", seed, *parts))).encode("utf-8")).digest()
    return f"<urn:uuid:{uuid.UUID(bytes=digest[:16], version=4)}>"


def fetch_metadata(page: Page) -> bytes:
    """CC's per-fetch ``metadata`` record: fetch time, detected charset and CLD2 languages."""
    lines = [f"fetchTimeMs: {50 + stable_number(page.url, page.timestamp) % 900}"]
    if in_wet(page):
        text_bytes = len(page_text(page).encode("utf-8"))
        language = {"code": page.language, "code-iso-639-3": ISO_639_3[page.language], "text-covered": 0.97}
        lines.append(f"charset-detected: {page_charset(page).upper()}")
        lines.append("languages-cld2: " + json.dumps({"reliable": True, "text-bytes": text_bytes,
                                                     "languages": [language]}, separators=(",", ":")))
    return "".join(line + "\r\n" for line in lines).encode("utf-8")


def warc_fields(fields: tuple[tuple[str, str], ...]) -> bytes:
    return "".join(f"{name}: {value}\r\n" for name, value in fields).encode("utf-8")


def warcinfo_record(writer: WARCWriter, filename: str, warcinfo_id: str, date: str,
                    fields: tuple[tuple[str, str], ...]):
    payload = warc_fields(fields)
    headers = {"WARC-Type": "warcinfo", "WARC-Date": date, "WARC-Record-ID": warcinfo_id, "WARC-Filename": filename}
    return writer.create_warc_record("", "warcinfo", payload=io.BytesIO(payload), length=len(payload),
                                     warc_headers_dict=headers)


WARC_INFO = (("isPartOf", CRAWL), ("publisher", "corpusforge (synthetic sample, not Common Crawl data)"),
             ("description", "Synthetic pages in the shape of a Common Crawl WARC file"),
             ("software", "corpusforge.sample"), ("format", "WARC File Format 1.0"))
WET_INFO = (("Software-Info", "corpusforge.sample"), ("Extracted-Date", http_date(WET_EXTRACTED)),
            ("isPartOf", CRAWL), ("publisher", "corpusforge (synthetic sample, not Common Crawl data)"),
            ("description", "Synthetic pages in the shape of a Common Crawl WET file"))


def warc_file(name: str, members: list[tuple[int, Page]], seed: int) -> bytes:
    """A gzipped WARC file: warcinfo, then request, response and metadata for every page."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    warcinfo_id = record_id(seed, name, "warcinfo")
    writer.write_record(warcinfo_record(writer, name, warcinfo_id, FETCH_START.strftime(TIMESTAMP_FORMAT), WARC_INFO))
    for index, page in members:
        body = response_body(page)
        request_id, response_id = record_id(seed, index, "request"), record_id(seed, index, "response")
        address = f"203.0.113.{1 + stable_number(urlsplit(page.url).netloc) % 254}"
        common = {"WARC-Date": page.timestamp, "WARC-Warcinfo-ID": warcinfo_id}
        request = writer.create_warc_record(page.url, "request", http_headers=request_headers(page), warc_headers_dict={
            "WARC-Type": "request", "WARC-Record-ID": request_id, **common, "WARC-IP-Address": address,
            "WARC-Target-URI": page.url})
        response = writer.create_warc_record(
            page.url, "response", payload=io.BytesIO(body), length=len(body),
            http_headers=response_headers(page, body), warc_headers_dict={
                "WARC-Type": "response", "WARC-Record-ID": response_id, **common, "WARC-Concurrent-To": request_id,
                "WARC-IP-Address": address, "WARC-Target-URI": page.url,
                "WARC-Identified-Payload-Type": page.content_type.split(";")[0]})
        metadata = fetch_metadata(page)
        fetch_record = writer.create_warc_record(
            page.url, "metadata", payload=io.BytesIO(metadata), length=len(metadata), warc_headers_dict={
                "WARC-Type": "metadata", "WARC-Record-ID": record_id(seed, index, "metadata"), **common,
                "WARC-Concurrent-To": response_id, "WARC-Target-URI": page.url})
        for record in (request, response, fetch_record):
            writer.write_record(record)
    return buffer.getvalue()


def wet_file(name: str, members: list[tuple[int, Page]], seed: int) -> bytes:
    """A gzipped WET file: warcinfo, then one text/plain ``conversion`` record per page."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    writer.write_record(warcinfo_record(writer, name, record_id(seed, name, "warcinfo"), WET_EXTRACTED, WET_INFO))
    for index, page in members:
        text = page_text(page).encode("utf-8")
        writer.write_record(writer.create_warc_record(
            page.url, "conversion", payload=io.BytesIO(text), length=len(text), warc_content_type="text/plain",
            warc_headers_dict={
                "WARC-Type": "conversion", "WARC-Target-URI": page.url, "WARC-Date": page.timestamp,
                "WARC-Record-ID": record_id(seed, index, "conversion"),
                "WARC-Refers-To": record_id(seed, index, "response"),
                "WARC-Identified-Content-Language": ISO_639_3[page.language], "Content-Type": "text/plain"}))
    return buffer.getvalue()


# --- the Pushshift-style submission dump -----------------------------------------------

REPEAT_GROUPS = 6
MEDIA_HOST_LINKS = 6
OUTSIDE_CRAWL_LINKS = 6
OVER_18_POSTS = 5
DELETED_POSTS = 4
MALFORMED_LINES = 2
MIN_SUBMISSIONS = 60
LINK_VARIANTS = ("scheme", "www", "trailing_slash", "utm")
# Field sets real dumps sometimes lack, one set per affected line.
MISSING_FIELDS = (("over_18",), ("is_self", "domain"), ("score",), ("num_comments", "selftext", "retrieved_on"))
MEDIA_FILES = ("https://i.imgur.com/{token}.jpg", "https://i.redd.it/{token}.jpg",
               "https://www.harbourgazette.com/files/council-minutes-{token}.pdf",
               "https://www.bytesizedtutorials.com/downloads/examples-{token}.zip")
MEDIA_HOSTS = ("https://www.youtube.com/watch?v={token}", "https://youtu.be/{token}", "https://imgur.com/a/{token}")
LINK_TITLES = ("Found this and thought of you all", "An interesting read", "Worth a look", "Saw this today")


def token(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def base36(number: int) -> str:
    digits = ""
    while number:
        number, rest = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rest] + digits
    return digits or "0"


def page_subreddit(rng: random.Random, page: Page) -> str:
    site = SITES_BY_HOST.get(urlsplit(page.url).netloc)
    return SUBREDDITS.get(site.topic) if site and site.topic in SUBREDDITS else rng.choice(GENERAL_SUBREDDITS)


def link_post(rng: random.Random, url: str, title: str, subreddit: str, score: int,
              kinds: list[str], links_to: int | None = None) -> dict:
    """A draft submission: its fields so far, its kind tags, and the page index it points at."""
    fields = {"author": rng.choice(REDDIT_AUTHORS), "created_utc": rng.randint(FIRST_CREATED, LAST_CREATED),
              "domain": urlsplit(url).netloc.removeprefix("www."), "is_self": False,
              "num_comments": rng.randint(0, 250), "over_18": False, "score": score, "selftext": "",
              "subreddit": subreddit, "title": title, "url": url}
    return {"fields": fields, "kinds": kinds, "links_to": links_to}


def draft_submissions(rng: random.Random, pages: list[Page]) -> list[dict]:
    linkable = [(index, page) for index, page in enumerate(pages) if in_wet(page)]
    count = max(MIN_SUBMISSIONS, len(pages) // 2)
    drafts = []
    for group, (index, page) in enumerate(rng.sample(linkable, REPEAT_GROUPS)):
        # The first group's scores sum to 4 but peak at 2: "sum >= 3" keeps it, "max >= 3" does not.
        scores = (1, 1, 2) if group == 0 else rng.sample(sorted(set(SCORES)), 3)
        subreddits = (page_subreddit(rng, page), *rng.sample(GENERAL_SUBREDDITS, 2))
        for n, (score, subreddit) in enumerate(zip(scores, subreddits, strict=True)):
            url = url_variant(page.url, rng.choice(LINK_VARIANTS)) if n else page.url
            kinds = ["page_link", "repeat_url"] + (["url_variant"] if n else [])
            drafts.append(link_post(rng, url, page.title.split(" | ")[0], subreddit, score, kinds, index))
    for index, page in enumerate(pages):
        if "non_html" in page.kinds:
            drafts.append(link_post(rng, page.url, rng.choice(LINK_TITLES), rng.choice(GENERAL_SUBREDDITS),
                                    rng.choice(SCORES), ["page_link", "media_file"], index))
    for template in MEDIA_FILES:
        drafts.append(link_post(rng, template.format(token=token(rng, 7)), rng.choice(LINK_TITLES),
                                rng.choice(GENERAL_SUBREDDITS), rng.choice(SCORES), ["media_file"]))
    for _ in range(MEDIA_HOST_LINKS):
        url = rng.choice(MEDIA_HOSTS).format(token=token(rng, 11))
        drafts.append(link_post(rng, url, rng.choice(LINK_TITLES), rng.choice(("videos", "pics", "funny")),
                                rng.choice(SCORES), ["media_host"]))
    for _ in range(OUTSIDE_CRAWL_LINKS):
        site = rng.choice(HOBBY_SITES + NEWS_SITES)
        url = f"{site.scheme}://{site.host}/p/{rng.randrange(10 ** 6)}/"
        drafts.append(link_post(rng, url, rng.choice(LINK_TITLES), SUBREDDITS[site.topic], rng.choice(SCORES),
                                ["outside_crawl"]))
    for number in range(count // 10):
        title, text = SELF_POSTS[number % len(SELF_POSTS)]
        draft = link_post(rng, "", title, rng.choice(list(SUBREDDITS.values())), rng.choice(SCORES), ["self"])
        draft["fields"].update(is_self=True, selftext=text)
        drafts.append(draft)
    while len(drafts) < count - MALFORMED_LINES:
        index, page = rng.choice(linkable)
        variant = rng.choice(LINK_VARIANTS) if rng.random() < 0.3 else ""
        url = url_variant(page.url, variant) if variant else page.url
        drafts.append(link_post(rng, url, page.title.split(" | ")[0], page_subreddit(rng, page), rng.choice(SCORES),
                                ["page_link"] + (["url_variant"] if variant else []), index))
    return drafts


def finish_submission(rng: random.Random, draft: dict, position: int) -> None:
    """Give a draft, in time order, its id and permalink, and write created_utc as dumps do."""
    fields = draft["fields"]
    fields["id"] = base36(FIRST_REDDIT_ID + position * 1000 + rng.randrange(1000))
    slug = slugify(fields["title"]).replace("-", "_")[:50].rstrip("_")
    fields["permalink"] = f"/r/{fields['subreddit']}/comments/{fields['id']}/{slug}/"
    if fields["is_self"]:
        fields["url"] = "https://www.reddit.com" + fields["permalink"]
        fields["domain"] = "self." + fields["subreddit"]
    created = fields["created_utc"]
    fields["retrieved_on"] = created + rng.randint(3600, 90 * 86400)
    if created >= WEBTEXT_CUTOFF:
        draft["kinds"].append("after_2017")
    # Pushshift wrote created_utc as an int, a float or a string in different months.
    fields["created_utc"] = rng.choices((created, float(created), str(created)), weights=(7, 2, 1))[0]


def mark_oddities(rng: random.Random, drafts: list[dict]) -> None:
    """Flag some drafts over_18, some deleted, and drop usual fields from a few (never a repeated URL's)."""
    singles = [draft for draft in drafts if "repeat_url" not in draft["kinds"]]
    chosen = rng.sample(singles, OVER_18_POSTS + DELETED_POSTS + len(MISSING_FIELDS))
    for draft in chosen[:OVER_18_POSTS]:
        draft["fields"]["over_18"] = True
        draft["kinds"].append("over_18")
    for draft in chosen[OVER_18_POSTS:OVER_18_POSTS + DELETED_POSTS]:
        draft["fields"]["author"] = "[deleted]"
        if draft["fields"]["is_self"]:
            draft["fields"]["selftext"] = rng.choice(("[deleted]", "[removed]"))
        draft["kinds"].append("deleted")
    for draft, missing in zip(chosen[OVER_18_POSTS + DELETED_POSTS:], MISSING_FIELDS, strict=False):
        for name in missing:
            del draft["fields"][name]
        draft["missing"] = list(missing)
        draft["kinds"].append("missing_fields")


def submission_truth(draft: dict) -> dict:
    fields = draft["fields"]
    created = int(float(fields["created_utc"]))
    return {
        "malformed": False, "id": fields["id"], "url": fields["url"], "subreddit": fields["subreddit"],
        "score": fields.get("score"), "created_utc": fields["created_utc"],
        "created": dt.datetime.fromtimestamp(created, dt.UTC).strftime(TIMESTAMP_FORMAT),
        "is_self": fields.get("is_self"), "over_18": fields.get("over_18"), "links_to": draft["links_to"],
        "kinds": draft["kinds"], "missing": draft.get("missing", []),
    }


def malformed_truth() -> dict:
    """The same keys as ``submission_truth``; a reader gets nothing from a truncated line."""
    return {"malformed": True, "id": None, "url": None, "subreddit": None, "score": None,
            "created_utc": None, "created": None, "is_self": None, "over_18": None, "links_to": None,
            "kinds": ["malformed"], "missing": []}


def submission_line(fields: dict) -> str:
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def build_submissions(rng: random.Random, pages: list[Page]) -> tuple[list[str], list[dict]]:
    """Dump lines in time order, with a few truncated lines among them, and what each should read as."""
    drafts = sorted(draft_submissions(rng, pages), key=lambda draft: draft["fields"]["created_utc"])
    for position, draft in enumerate(drafts):
        finish_submission(rng, draft, position)
    mark_oddities(rng, drafts)
    lines = [submission_line(draft["fields"]) for draft in drafts]
    truths = [submission_truth(draft) for draft in drafts]
    for _ in range(MALFORMED_LINES):
        whole = rng.choice(lines)
        position = rng.randint(0, len(lines))
        lines.insert(position, whole[: len(whole) // 2])
        truths.insert(position, malformed_truth())
    return lines, [{"line": number, **truth} for number, truth in enumerate(truths)]


def pushshift_zst(data: bytes) -> bytes:
    """Compress like the newer Pushshift dumps: one frame, no content size, a 2**31 window."""
    params = zstandard.ZstdCompressionParameters.from_level(
        PUSHSHIFT_LEVEL, window_log=PUSHSHIFT_WINDOW_LOG, write_content_size=False)
    buffer = io.BytesIO()
    # Streaming with an unknown size keeps the declared window; a one-shot call would shrink it.
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(buffer, closefd=False) as writer:
        writer.write(data)
    return buffer.getvalue()


# --- the files -------------------------------------------------------------------------

def page_truth(index: int, page: Page, wet_name: str | None, warc_name: str, index_of: Mapping[str, int]) -> dict:
    text = page_text(page) if wet_name else ""
    return {
        "index": index, "url": page.url, "timestamp": page.timestamp, "kinds": list(page.kinds),
        "language": page.language, "status": page.status, "content_type": page.content_type,
        "location": page.location or None, "wet_file": wet_name, "warc_file": warc_name,
        "chars": len(text),
        "text_sha1": hashlib.sha1(text.encode("utf-8")).hexdigest() if wet_name else None,
        "duplicate_of": index_of.get(page.duplicate_of), "near_duplicate_of": index_of.get(page.near_duplicate_of),
        "variant": page.variant or None, "badword": page.badword or None,
        "main_snippet": page.main_snippet or None, "boilerplate_snippet": page.boilerplate_snippet or None,
    }


def json_document(document: Mapping[str, object]) -> str:
    """JSON with each list entry on a line of its own: compact, yet easy to read and to diff."""
    members = []
    for key, value in document.items():
        if isinstance(value, list):
            entries = ",\n".join("  " + json.dumps(entry, ensure_ascii=False) for entry in value)
            members.append(f" {json.dumps(key)}: [\n{entries}\n ]")
        else:
            members.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(members) + "\n}\n"


# Page kinds whose text C4 keeps (their passages "leak" into the corpus) and kinds whose
# whole page C4 drops with text found nowhere else (their passages stay clean), for the
# sample benchmark. (Pages dropped for other reasons share template sentences with kept ones.)
LEAKED_KINDS = ("wikipedia", "article")
DROPPED_KINDS = ("non_english",)


def sample_benchmark(pages: list[dict], per_group: int = 10) -> str:
    """A JSONL benchmark of page passages: ``expected`` says whether the sample's C4 build
    should contain it (``leaked``: a page C4 keeps) or not (``clean``: a page C4 drops)."""
    rows = []
    for expected, kinds in (("leaked", LEAKED_KINDS), ("clean", DROPPED_KINDS)):
        chosen = [p for p in pages if p["main_snippet"] and p["language"] in ("en", "de", "fr", "es")
                  and any(k in p["kinds"] for k in kinds)
                  and not ({"exact_duplicate", "near_duplicate", "url_variant", "badword"} & set(p["kinds"]))
                  and (expected == "clean" or not set(DROPPED_KINDS) & set(p["kinds"]))]
        wiki_first = sorted(chosen, key=lambda p: ("wikipedia" not in p["kinds"], p["index"]))[:per_group]
        rows += [{"id": f"{expected}-{p['index']}", "text": p["main_snippet"], "expected": expected, "url": p["url"]} for p in wiki_first]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def gzip_lines(lines: list[str]) -> bytes:
    return gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), mtime=0)


def write_sample_crawl(out_dir: str | os.PathLike, seed: int = 0, pages: int = DEFAULT_PAGES) -> SampleCrawl:
    """Write the sample crawl for ``seed`` into ``out_dir`` and say where each file is."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    crawl = build_pages(rng, pages)
    wet_names = [f"sample-{number:05d}.warc.wet.gz" for number in range(FILE_COUNT)]
    warc_names = [f"sample-{number:05d}.warc.gz" for number in range(FILE_COUNT)]
    file_of = [index * FILE_COUNT // len(crawl) for index in range(len(crawl))]
    for number in range(FILE_COUNT):
        members = [(index, page) for index, page in enumerate(crawl) if file_of[index] == number]
        write_atomically(out / warc_names[number], warc_file(warc_names[number], members, seed))
        write_atomically(out / wet_names[number],
                         wet_file(wet_names[number], [(i, page) for i, page in members if in_wet(page)], seed))
    write_atomically(out / "wet.paths.gz", gzip_lines(wet_names))
    write_atomically(out / "warc.paths.gz", gzip_lines(warc_names))

    lines, submissions = build_submissions(rng, crawl)
    dump = "".join(line + "\n" for line in lines).encode("utf-8")
    write_atomically(out / "RS_sample.ndjson", dump)
    write_atomically(out / "RS_sample.zst", pushshift_zst(dump))

    index_of = {page.key: index for index, page in enumerate(crawl)}
    truth = {
        "seed": seed, "crawl": CRAWL, "page_kinds": PAGE_KINDS, "submission_kinds": SUBMISSION_KINDS,
        "shared_lines": list(SHARED_LINES),
        "news_domains": sorted(site.host.removeprefix("www.") for site in NEWS_SITES),
        "pages": [page_truth(index, page, wet_names[file_of[index]] if in_wet(page) else None,
                             warc_names[file_of[index]], index_of) for index, page in enumerate(crawl)],
        "submissions": submissions,
    }
    write_atomically(out / "truth.json", json_document(truth).encode("utf-8"))
    write_atomically(out / "benchmark.jsonl", sample_benchmark(truth["pages"]).encode("utf-8"))
    write_atomically(out / "badwords.txt", "".join(word + "\n" for word in SAMPLE_BADWORDS).encode("utf-8"))
    log.info("sample crawl for seed %d: %d pages (%d in WET files), %d submission lines, in %s",
             seed, len(crawl), sum(map(in_wet, crawl)), len(lines), out)
    return SampleCrawl(
        wet_paths=[str(out / name) for name in wet_names], warc_paths=[str(out / name) for name in warc_names],
        manifest_path=str(out / "wet.paths.gz"), warc_manifest_path=str(out / "warc.paths.gz"),
        submissions_path=str(out / "RS_sample.ndjson"), submissions_zst_path=str(out / "RS_sample.zst"),
        pages=len(crawl), truth_path=str(out / "truth.json"), badwords_path=str(out / "badwords.txt"),
        benchmark_path=str(out / "benchmark.jsonl"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m samplecrawl.crawl", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write the sample into")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default 0)")
    parser.add_argument("--pages", type=int, default=DEFAULT_PAGES, help=f"pages to generate (default {DEFAULT_PAGES})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    crawl = write_sample_crawl(args.out, seed=args.seed, pages=args.pages)
    log.info("wrote %s in %.2f s", crawl.truth_path, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
