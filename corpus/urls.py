"""URL normalisation and the URL-hash helpers every recipe keys on.

``normalize_url`` is C4's (TFDS c4_utils 3.1.0): it is the key of the URL dedup, of the
WebText-like join and of the train/validation split, so it must stay exactly as the
reference wrote it, quirks included (unanchored scheme strip, no lower-casing, the
fragment kept).

``canonical_url`` / ``url_key`` are WebText's: a fetchable normal form of a submitted
link and the key that merges its scheme, ``www.``, case, slash, fragment, tracking and
percent-encoding variants (rules in ``canonical_url``'s docstring).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import urllib.parse

import idna  # installed with tldextract (requirements.txt)

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


# --- WebText's URL normal form --------------------------------------------------------
#
# ``normalize_url`` above is frozen to C4's reference. WebText needs its own normal form:
# the GPT-2 paper does not say how it merged URLs, and users of the rebuilds report
# duplicates that differ only by scheme, ``www.``, trailing slash, fragment or ``utm_*``.
#
# ``canonical_url(url)`` is the URL to fetch: every spelling of a link that cannot change
# what the server sends collapses to one string, and the result is still a URL a fetcher
# can request. It keeps the scheme and a ``www.`` label, because a server may answer on
# only one of them (many old sites have no https; some hosts do not serve the bare domain).
#
# ``url_key(url)`` is the dedup key: the canonical URL without its scheme and without a
# leading ``www.`` label, so ``http://www.a.com/x/`` and ``https://a.com/x#top`` share the
# key ``a.com/x``. The link stage groups submissions by this key and fetches one canonical
# URL per group (``corpus.reddit.merge_submissions`` picks which, preferring https).
#
# canonical_url's rules, in the order they are applied (``None`` means "not a web link"):
#  1. Surrounding whitespace is stripped; a URL with a control character inside is None.
#  2. The scheme must be http or https (any case; written lower case); others are None.
#  3. There must be a host; a user name or password in the URL is None (a link with
#     userinfo is a phishing trick more often than a page: ``http://bank.com@evil.net``).
#  4. The host is lower-cased, a trailing dot dropped, an internationalised name written
#     in its IDNA A-label form (UTS 46 mapping, non-transitional, as browsers do), an IPv6
#     literal compressed and an IPv4 literal checked. A host without a dot (``localhost``),
#     with an empty or over-long label, or with a character outside ``[a-z0-9_-]`` is None.
#  5. The port is dropped when it is the scheme's default (80 for http, 443 for https);
#     a non-numeric or out-of-range port is None.
#  6. Percent-encoding is made uniform in the path, query and kept fragment: an escaped
#     unreserved character (``A-Z a-z 0-9 - . _ ~``) is decoded, every other escape gets
#     upper-case hex, characters a URL may not hold raw (space, non-ASCII, ``"<>\^`{|}``)
#     are UTF-8 percent-encoded, and a ``%`` that starts no escape becomes ``%25``. Escaped
#     reserved characters (``%2F``, ``%3F``, ``%26`` ...) stay escaped: they mean something
#     else than the raw character.
#  7. The path has its ``.`` and ``..`` segments resolved (RFC 3986 5.2.4) and loses its
#     trailing slashes; an empty path becomes ``/``. Case is kept: paths are case-sensitive.
#  8. The query is split on ``&``; empty pieces and tracking parameters
#     (``TRACKING_PARAMETERS``, ``TRACKING_PARAMETER_PREFIXES``, compared lower-case) are
#     dropped; ``+`` is a space (HTML form encoding) and is written ``%20`` like a raw
#     space; the rest are sorted by name, stably, so values of a repeated name keep their
#     order (servers read them as a list). An empty query loses its ``?``.
#  9. The fragment is dropped (browsers never send it), except a ``#!`` "hashbang": old
#     AJAX sites (Twitter until 2012) put the page itself there, and dropping it would merge
#     every such link on the site into one.


# RFC 3986 2.3: characters that never need escaping; an escaped one is decoded.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 3.3: characters a path may hold raw besides the unreserved ones.
_PATH_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
# RFC 3986 3.4, minus the ``&`` and ``=`` that split parameters and ``+`` (a space there).
_QUERY_PART_SAFE = _UNRESERVED | frozenset("!$'()*,;:@/?")
# RFC 3986 3.5: what a fragment (a kept ``#!`` one) may hold raw.
_FRAGMENT_SAFE = _PATH_SAFE | frozenset("?")
# The scheme's default port, dropped from the canonical URL (RFC 7230 2.7.1 and 2.7.2).
DEFAULT_PORTS = {"http": 80, "https": 443}
# Query parameters that only say where a click came from; they never change the page.
# Analytics campaigns (Google Analytics utm_*, HubSpot, Marketo, Mailchimp), ad-click ids
# (Google, Microsoft, Facebook, Yandex, TikTok, Twitter, LinkedIn), share buttons
# (Instagram igshid/igsh, NYT smid, generic share/ref/ref_src/ref_url/referrer).
TRACKING_PARAMETERS = frozenset({
    "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "ttclid", "twclid",
    "li_fat_id", "mc_cid", "mc_eid", "igshid", "igsh", "_ga", "_gl", "_hsenc", "_hsmi", "__hstc", "__hssc",
    "__hsfp", "hsctatracking", "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id", "rb_clickid", "wickedid",
    "ref", "ref_src", "ref_url", "referrer", "share", "smid", "cmpid", "ncid",
})
# Parameter-name prefixes with the same meaning (utm_source, utm_medium, utm_campaign ...).
TRACKING_PARAMETER_PREFIXES = ("utm_",)
# A leading host label that url_key drops: the same site answers with and without it.
WWW_LABEL = "www."
_HOST_LABEL_RE = re.compile(r"[a-z0-9_-]{1,63}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_HEX = frozenset("0123456789abcdefABCDEF")


def canonical_url(url: str) -> str | None:
    """WebText's fetchable normal form of a link, or ``None`` when it is not an http(s) URL.

    ``HTTP://WWW.Example.com:80/a/./b/?utm_source=x&b=2&a=1#top`` ->
    ``http://www.example.com/a/b?a=1&b=2``. The rules are listed above this function.
    """
    if not isinstance(url, str):
        return None
    url = url.strip()
    if not url or _CONTROL_RE.search(url):
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # a bad IPv6 literal or port
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.netloc or "@" in parts.netloc:
        return None
    host = canonical_host(parts.hostname or "")
    if host is None or port == 0:
        return None
    netloc = host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _remove_dot_segments(_normalize_escapes(parts.path, _PATH_SAFE)).rstrip("/") or "/"
    query = _canonical_query(parts.query)
    fragment = parts.fragment if parts.fragment.startswith("!") else ""
    url = f"{scheme}://{netloc}{path}"
    if query:
        url += "?" + query
    if fragment:
        url += "#" + _normalize_escapes(fragment, _FRAGMENT_SAFE)
    return url


def url_key(url: str) -> str | None:
    """The dedup key of a link: its canonical URL without scheme or a leading ``www.``.

    ``http://www.a.com/x/`` and ``https://a.com/x#top`` both give ``a.com/x``.
    """
    canonical = canonical_url(url)
    if canonical is None:
        return None
    rest = canonical.split("://", 1)[1]
    if rest.startswith(WWW_LABEL) and "." in rest.split("/", 1)[0][len(WWW_LABEL):]:
        rest = rest[len(WWW_LABEL):]
    return rest


def canonical_host(host: str) -> str | None:
    """A host name as canonical_url writes it (rule 4), or ``None`` when it is not valid.

    Brackets around an IPv6 literal are optional on input and present on output.
    """
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        try:
            return f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            return None
    if host.endswith("."):
        host = host[:-1]
    if not host.isascii():
        mapped = _idna_host(host)
        if mapped is None:
            return None
        host = mapped
    labels = host.split(".")
    if len(labels) < 2 or len(host) > 253 or not all(_HOST_LABEL_RE.fullmatch(label) for label in labels):
        return None
    if all(label.isdigit() for label in labels):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            return None
    return host


def _idna_host(host: str) -> str | None:
    """An internationalised host in A-labels (``bücher.de`` -> ``xn--bcher-kva.de``)."""
    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
        labels = [label if label.isascii() else idna.alabel(label).decode("ascii") for label in mapped.split(".")]
    except (idna.IDNAError, UnicodeError, ValueError):
        return None
    return ".".join(labels).lower()


def _normalize_escapes(text: str, safe: frozenset[str]) -> str:
    """Rule 6: one spelling for every character of a URL component."""
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%" and i + 2 < len(text) and text[i + 1] in _HEX and text[i + 2] in _HEX:
            decoded = chr(int(text[i + 1:i + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else "%" + text[i + 1:i + 3].upper())
            i += 3
            continue
        if char in safe:
            out.append(char)
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path: ``/a/./b/../c`` -> ``/a/c``."""
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:]:
        if segment == ".":
            continue
        if segment == "..":
            if kept:
                kept.pop()
            continue
        kept.append(segment)
    if segments[-1] in (".", ".."):
        kept.append("")  # "/a/b/.." names the folder "/a/"
    return "/" + "/".join(kept)


def _canonical_query(query: str) -> str:
    """Rule 8: tracking parameters out, escapes uniform, parameters sorted by name."""
    params = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, equals, value = piece.partition("=")
        name = _normalize_escapes(name.replace("+", " "), _QUERY_PART_SAFE)
        if _is_tracking_parameter(name):
            continue
        value = _normalize_escapes(value.replace("+", " "), _QUERY_PART_SAFE | {"="})
        params.append((name, f"{name}{equals}{value}"))
    params.sort(key=lambda param: param[0])
    return "&".join(text for _, text in params)


def _is_tracking_parameter(name: str) -> bool:
    plain = urllib.parse.unquote(name).lower()
    return plain in TRACKING_PARAMETERS or plain.startswith(TRACKING_PARAMETER_PREFIXES)
