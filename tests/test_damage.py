"""Seeded damage on the real shared archives (the generator: tests/damage.py): every
record wholly outside the damaged bytes must come out, nothing raises, and memory stays
bounded whatever a header claims."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import random
import re
import zlib

import pytest
from damage import (
    LENGTH_EDITS,
    Unseekable,
    damaged_variants,
    gzip_members,
    ids_in,
    intact_records_before,
    length_variants,
    with_member_replaced,
)

from corpus import gzip_stream
from corpus.records import DECODED_TOO_LARGE, RECORD_TOO_LARGE, WRONG_LENGTH, ReadError
from corpus.warc import (
    ReadStats,
    digest_matches,
    iter_records,
    read_archive,
)

WET = "warc/ccscalatools/filter_test_1.wet.gz"  # one gzip stream for the whole file
WARC = "warc/resiliparse/warcfile.warc.gz"  # one gzip member per record, 50 records


def record_ids(data: bytes, *, seekable: bool = True, **kwargs) -> tuple[list[str], list[ReadError]]:
    raw = io.BytesIO(data) if seekable else Unseekable(data)
    items = list(iter_records(raw, "damaged", **kwargs))
    ids = [r.get("warc-record-id") for r in items if not isinstance(r, ReadError)]
    return ids, [r for r in items if isinstance(r, ReadError)]


@pytest.fixture(scope="module")
def warc_bytes(real_data):
    return (real_data / WARC).read_bytes()


@pytest.fixture(scope="module")
def wet_bytes(real_data):
    return (real_data / WET).read_bytes()


def test_the_generator_sees_one_member_per_record_in_the_real_warc(warc_bytes):
    members = gzip_members(warc_bytes)
    assert len(members) == 50 and all(len(ids_in(text)) == 1 for _, _, text in members)
    ids, errors = record_ids(warc_bytes)
    assert len(ids) == 50 and not errors


@pytest.mark.parametrize("seekable", [True, False], ids=["seekable", "stream"])
def test_every_record_outside_seeded_damage_comes_out(warc_bytes, seekable):
    for name, damaged, required in damaged_variants(warc_bytes, seed=1, count=12):
        ids, errors = record_ids(damaged, seekable=seekable)
        assert set(required) <= set(ids), f"{name}: lost {sorted(set(required) - set(ids))}"
        assert errors, f"{name}: damage went unreported"


def test_a_bad_byte_in_a_one_stream_file_keeps_every_record_before_it(wet_bytes):
    damaged = bytearray(wet_bytes)
    damaged[91180] ^= 0xFF
    required = intact_records_before(wet_bytes, 91180)
    assert len(required) == 23
    ids, errors = record_ids(bytes(damaged))
    assert ids[: len(required)] == required
    assert any(e.reason == "corrupt_gzip" for e in errors)


def test_a_truncated_stream_does_not_swallow_the_intact_copy_after_it(wet_bytes):
    intact, _ = record_ids(wet_bytes)
    cut = wet_bytes[: len(wet_bytes) // 2]
    ids, errors = record_ids(cut + wet_bytes)
    assert ids[-len(intact):] == intact  # the whole copy, after what the cut half held
    assert errors


@pytest.mark.parametrize("kind", sorted(LENGTH_EDITS))
def test_a_wrong_content_length_loses_only_its_own_record(warc_bytes, kind):
    damaged, others = with_member_replaced(warc_bytes, 3, LENGTH_EDITS[kind])
    ids, errors = record_ids(damaged, max_record_bytes=8 << 20)
    assert set(others) <= set(ids)
    assert len(ids) >= 49 and errors


def test_a_content_length_over_the_limit_is_never_buffered(warc_bytes):
    damaged, others = with_member_replaced(warc_bytes, 3, lambda t: re.sub(rb"Content-Length: \d+", b"Content-Length: 900000000", t, count=1))
    ids, errors = record_ids(damaged)  # the default limit, 50 MB
    assert ids == others
    assert [e.reason for e in errors] == [RECORD_TOO_LARGE]


def _bomb_warc(decoded_bytes: int, encoding: str = "gzip") -> bytes:
    body = gzip.compress(b"\0" * decoded_bytes, mtime=0) if encoding == "gzip" else zlib.compress(b"\0" * decoded_bytes)
    http = (f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: {encoding}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    after = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body><p>Still here.</p></body></html>"

    def record(uri, block):
        head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{uri}>\r\nWARC-Target-URI: {uri}\r\n"
                f"WARC-Date: 2019-04-18T12:41:33Z\r\nContent-Length: {len(block)}\r\n\r\n").encode()
        return gzip.compress(head + block + b"\r\n\r\n", mtime=0)

    return record("http://bomb.example/", http) + record("http://after.example/", after)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_content_encoding_bomb_is_skipped_and_counted(tmp_path, encoding):
    path = tmp_path / "bomb.warc.gz"
    path.write_bytes(_bomb_warc(20 << 20, encoding))  # 20 MB of zeros in ~20 KB
    stats = ReadStats()
    items = list(read_archive(str(path), stats=stats, max_record_bytes=4 << 20))
    pages = [i for i in items if not isinstance(i, ReadError)]
    assert [p.url for p in pages] == ["http://after.example/"]
    assert stats.errors() == {DECODED_TOO_LARGE: 1}
    assert "more than 4194304 bytes" in next(i for i in items if isinstance(i, ReadError)).detail


def test_a_body_under_the_limit_still_decodes(tmp_path):
    path = tmp_path / "fine.warc.gz"
    path.write_bytes(_bomb_warc(1 << 20))
    pages = [i for i in read_archive(str(path), max_record_bytes=4 << 20) if not isinstance(i, ReadError)]
    assert len(pages) == 2 and len(pages[0].html) == 1 << 20


def test_seeded_wrong_lengths_lose_only_the_damaged_record(warc_bytes):
    for name, damaged, required in length_variants(warc_bytes, seed=5, count=20):
        ids, errors = record_ids(damaged)
        assert set(required) <= set(ids), f"{name}: lost {sorted(set(required) - set(ids))}"


def test_wrong_length_reason_is_named(warc_bytes):
    damaged, _ = with_member_replaced(warc_bytes, 3, lambda t: re.sub(
        rb"Content-Length: (\d+)", lambda m: b"Content-Length: %d" % (int(m[1]) + 1000), t, count=1))
    # One stream of records (no member boundary to stop at): the length runs into the next header.
    plain = b"".join(text for _, _, text in gzip_members(damaged))
    ids, errors = record_ids(plain)
    assert len(ids) == 49
    assert [e.reason for e in errors] == [WRONG_LENGTH]


def test_verify_digest_counts_block_and_payload_digests(real_data, warc_bytes, tmp_path):
    stats = ReadStats()
    list(read_archive(str(real_data / WARC), stats=stats, verify_digest=True))
    assert {k: v for k, v in stats.counts.items() if k.startswith("digest")} == {"digest:block_ok": 16, "digest:payload_ok": 16}

    def flip_html(text: bytes) -> bytes:  # one byte of a response's HTML, lengths unchanged
        at = text.index(b"<html") + 10 if b"<html" in text else len(text) - 10
        return text[:at] + bytes([text[at] ^ 0x01]) + text[at + 1:]

    index = next(i for i, (_, _, text) in enumerate(gzip_members(warc_bytes)) if b"WARC-Payload-Digest" in text and b"<html" in text)
    damaged, _ = with_member_replaced(warc_bytes, index, flip_html)
    path = tmp_path / "flipped.warc.gz"
    path.write_bytes(damaged)
    stats = ReadStats()
    pages = [p for p in read_archive(str(path), stats=stats, verify_digest=True) if not isinstance(p, ReadError)]
    assert stats.counts["digest:block_mismatch"] == 1 and stats.counts["digest:payload_mismatch"] == 1
    assert len(pages) == 16  # still read, as warcio does


def test_digest_forms():
    data = b"corpusforge"

    sha1 = hashlib.sha1(data).digest()
    assert digest_matches("sha1:" + base64.b32encode(sha1).decode(), data) is True
    assert digest_matches("sha1:" + sha1.hex(), data) is True
    assert digest_matches("sha256:" + hashlib.sha256(data).hexdigest(), data) is True
    assert digest_matches("sha1:" + base64.b32encode(sha1).decode(), data + b"!") is False
    assert digest_matches("crc99:abc", data) is None and digest_matches("sha1:!!not base32!!", data) is None


def test_zlib_ng_reads_damage_exactly_as_zlib(monkeypatch, warc_bytes, wet_bytes):
    """Gzip members are inflated with zlib-ng (pinned); where a damaged member breaks, what
    comes out before the bad byte, and every record and error after it, must be what zlib
    gives, or the recovery guarantees would depend on the inflater."""
    assert gzip_stream.inflate.__name__ == "zlib_ng.zlib_ng"  # the pinned inflater is the one in use
    rng = random.Random(11)
    variants = [damaged for _, damaged, _ in damaged_variants(warc_bytes, seed=3, count=12)]
    for _ in range(12):  # flipped bytes in the one-stream WET, where output runs up to the bad byte
        damaged = bytearray(wet_bytes)
        damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        variants.append(bytes(damaged))
    variants.append(wet_bytes[: len(wet_bytes) // 2] + wet_bytes)

    def everything(data, seekable):
        stats = ReadStats()
        items = list(read_archive("damaged", fileobj=io.BytesIO(data) if seekable else Unseekable(data), stats=stats, text_mode="c4"))
        return items, stats.counts  # Documents, HtmlPages (offsets included) and ReadErrors, and the counts

    with_ng = [everything(v, s) for v in variants for s in (True, False)]
    monkeypatch.setattr(gzip_stream, "inflate", zlib)
    with_zlib = [everything(v, s) for v in variants for s in (True, False)]
    assert with_ng == with_zlib
    assert sum(any(isinstance(i, ReadError) for i in items) for items, _ in with_zlib) >= 20


# -- seeded damage to what a job writes and reads back (tests/damage.py) ----------------------


def test_every_seeded_damage_to_a_bloom_filter_folder_is_refused(tmp_path):
    from damage import build_filter_folder, filter_variants, write_folder

    from dedup.bloom import BloomFileError, ngram_meta
    from dedup.partitioned import PartitionedBloom

    files = build_filter_folder(tmp_path / "one", seed=1)
    other = build_filter_folder(tmp_path / "two", seed=2)
    corpus = f"sha256:{1:064x}"
    assert PartitionedBloom.load(str(tmp_path / "one"), meta=ngram_meta(), corpus=corpus).parts == 2
    for number, (name, damaged) in enumerate(filter_variants(files, other, seed=3, count=27)):
        folder = tmp_path / f"v{number}"
        write_folder(folder, damaged)
        with pytest.raises(BloomFileError):
            PartitionedBloom.load(str(folder), meta=ngram_meta(), corpus=corpus)
            pytest.fail(f"{name}: accepted")
    with pytest.raises(BloomFileError, match="another corpus"):
        PartitionedBloom.load(str(tmp_path / "two"), meta=ngram_meta(), corpus=corpus)


def test_every_seeded_crafted_checkpoint_is_refused_by_resume_in_one_line(tmp_path, caplog):
    import logging

    from damage import checkpoint_variants, tiny_training_run

    from model.checkpoint import load_checkpoint, save_checkpoint
    from pipelines.cli import main as corpusforge_main

    path = tiny_training_run(tmp_path)
    state = load_checkpoint(path)
    for kept in (tmp_path / "run").glob("ckpt-*.pt"):  # no intact checkpoint to fall back to
        kept.unlink()
    # each of the 17 kinds of crafted state once: every kind is what is refused (each resume attempt costs about 0.2 s)
    for name, crafted in checkpoint_variants(state, seed=4, count=17):
        save_checkpoint(path, crafted)  # with a matching .sha256
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            assert corpusforge_main(["train", "--out", str(tmp_path / "run"), "--resume", "--max_steps", "3", "-q"]) == 2, name
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and not errors[0].exc_info, name
