"""corpus/fetch_policy.py on its own: the fetcher's decisions, no network (the client and the
whole fetch against a real local HTTP server are in tests/test_fetch.py)."""

from __future__ import annotations

import email.utils
import time
from types import SimpleNamespace

import pytest

from corpus.fetch_policy import (
    BAD_URL,
    HTTP_ERROR,
    OK,
    REFUSED_ADDRESS,
    REFUSED_SCHEME,
    TOO_MANY_REDIRECTS,
    FetchConfig,
    PageFailed,
    check_addresses,
    parse_target,
    refused_content_type,
    retry_after_seconds,
    retry_delay,
    robots_rules,
)


def test_parse_target_gives_host_port_request_target_and_host_header():
    target = parse_target("HTTP://Bücher.Example/a b?q=1 2")
    assert (target.scheme, target.host, target.port) == ("http", "xn--bcher-kva.example", 80)
    assert target.target == "/a%20b?q=1%202" and target.host_header == "xn--bcher-kva.example" and not target.ip_literal
    ipv6 = parse_target("https://[::1]:8443")
    assert (ipv6.host, ipv6.port, ipv6.target, ipv6.host_header, ipv6.ip_literal) == ("::1", 8443, "/", "[::1]:8443", True)


@pytest.mark.parametrize("url, outcome", [
    ("ftp://example.com/x", REFUSED_SCHEME), ("file:///etc/passwd", REFUSED_SCHEME), ("example.com", REFUSED_SCHEME),
    ("http:///path", BAD_URL), ("http://example.com:99999/", BAD_URL), ("http://exa%6Dple.com/", BAD_URL),
])
def test_parse_target_refuses_what_cannot_be_fetched(url, outcome):
    with pytest.raises(PageFailed) as failed:
        parse_target(url)
    assert failed.value.outcome == outcome


def test_every_resolved_address_is_checked_unless_allowed():
    config = FetchConfig()
    public = parse_target("http://example.com/")
    assert check_addresses(public, ["93.184.216.34"], config) == ["93.184.216.34"]
    with pytest.raises(PageFailed) as failed:
        check_addresses(public, ["93.184.216.34", "169.254.169.254"], config)  # one bad answer is enough
    assert failed.value.outcome == REFUSED_ADDRESS and "example.com -> 169.254.169.254" in failed.value.detail
    local = parse_target("http://127.0.0.1:8080/")
    with pytest.raises(PageFailed):
        check_addresses(local, ["127.0.0.1"], config)
    assert check_addresses(local, ["127.0.0.1"], FetchConfig(allow_hosts=frozenset({"127.0.0.1:8080"}))) == ["127.0.0.1"]
    with pytest.raises(PageFailed):  # allowed on another port only
        check_addresses(parse_target("http://127.0.0.1:9090/"), ["127.0.0.1"], FetchConfig(allow_hosts=frozenset({"127.0.0.1:8080"})))


def test_content_type_decides_before_the_body():
    config = FetchConfig()
    assert refused_content_type({"content-type": "Text/HTML; charset=utf-8"}, config) == ""
    assert refused_content_type({"content-type": "application/xhtml+xml"}, config) == ""
    assert refused_content_type({"content-type": "application/pdf"}, config) == "Content-Type 'application/pdf'"
    assert refused_content_type({}, config) == "no Content-Type"


def test_retry_backoff_grows_to_its_cap_and_obeys_retry_after():
    config = FetchConfig(retries=6, backoff_base_s=1.0, backoff_factor=2.0, backoff_cap_s=10.0)
    assert [retry_delay(attempt, None, config)[0] for attempt in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert retry_delay(7, None, config) == (None, "after 7 tries")
    assert retry_delay(1, 3.0, config) == (3.0, "")
    assert retry_delay(1, 60.0, config) == (None, "Retry-After 60s is over the 10s cap")


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = retry_after_seconds(email.utils.formatdate(time.time() + 3600, usegmt=True))
    assert 3500 < later <= 3600
    assert retry_after_seconds(email.utils.formatdate(time.time() - 3600, usegmt=True)) == 0.0


def fetched(outcome: str, status: int = 0, body: bytes = b"", detail: str = "") -> SimpleNamespace:
    return SimpleNamespace(outcome=outcome, status=status, body=body, detail=detail)


def test_robots_rules_follow_rfc_9309():
    config = FetchConfig(max_crawl_delay_s=5.0)
    rules = robots_rules(fetched(OK, 200, b"User-agent: *\nDisallow: /private\nCrawl-delay: 60\n"), "http://h/robots.txt", config)
    assert rules.allows("http://h/public", config.user_agent) and not rules.allows("http://h/private/x", config.user_agent)
    assert rules.crawl_delay == 5.0  # honoured up to max_crawl_delay_s
    for unavailable in (fetched(HTTP_ERROR, 404), fetched(TOO_MANY_REDIRECTS)):
        assert robots_rules(unavailable, "http://h/robots.txt", config).allows("http://h/x", config.user_agent)
    for unreachable in (fetched(HTTP_ERROR, 429), fetched(HTTP_ERROR, 503), fetched("dns_error", detail="no such host")):
        rules = robots_rules(unreachable, "http://h/robots.txt", config)
        assert not rules.allows("http://h/x", config.user_agent) and rules.detail.startswith("robots.txt unreachable")


def test_config_refuses_impossible_settings():
    for bad in ({"max_bytes": 0}, {"concurrency": 0}, {"deadline_s": 0}, {"retries": -1}):
        with pytest.raises(ValueError):
            FetchConfig(**bad)
