"""URL normalisation and the URL-hash helpers every recipe keys on.

``normalize_url`` is C4's (TFDS c4_utils 3.1.0): it is the key of the URL dedup, of the
WebText-like join and of the train/validation split, so it must stay exactly as the
reference wrote it, quirks included (unanchored scheme strip, no lower-casing, the
fragment kept).
"""

from __future__ import annotations

import hashlib
import re

# C4 reference: strip "http(s)://" and a leading "www." anywhere in the URL (unanchored).
_SCHEME_RE = re.compile(r"https?://(www\.)?")
# C4 reference: a query starting with ?utm_, ?ref or ?feed is cut to the end of the URL.
_TRACKING_QUERY_RE = re.compile(r"\?(utm_|ref|feed).*")


def normalize_url(url: str) -> str:
    """C4's URL key: ``https://www.a.com/x/?utm_source=y`` -> ``a.com/x``."""
    url = _SCHEME_RE.sub("", url)
    url = _TRACKING_QUERY_RE.sub("", url)
    return url.rstrip("/")


def url_digest(url: str) -> bytes:
    """md5 of the URL's UTF-8 bytes; ordering digests orders the reference's hex digests."""
    return hashlib.md5(url.encode("utf-8", "surrogatepass")).digest()


def url_hash_int(url: str) -> int:
    """md5 of the URL as an integer, as C4 uses it for the train/validation split."""
    return int.from_bytes(url_digest(url), "big")
