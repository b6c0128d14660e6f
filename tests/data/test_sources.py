"""Tests for nlpzoo.data.sources: registry, mirror copy, download, checksums, safe extraction."""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from nlpzoo.data import sources
from nlpzoo.data.sources import (
    SOURCES,
    RemoteFile,
    fetch,
    fetch_sources,
    mirror_from_env,
    safe_extract,
    sha256sum,
)
from nlpzoo.errors import ChecksumError, ConfigError, DataError

DEFAULT_MIRROR = Path(__file__).parents[2] / ".." / "shared" / "datasets"
# The files the shared mirror holds (the README's default table).
MIRRORED = {
    "brown.zip",
    "questions-words.txt",
    "wordsim353.tsv",
    "simlex999.txt",
    "multi30k/train.de.gz",
    "multi30k/train.en.gz",
    "multi30k/val.de.gz",
    "multi30k/val.en.gz",
    "multi30k/test_2016_flickr.de.gz",
    "multi30k/test_2016_flickr.en.gz",
}


@pytest.fixture(scope="module")
def shared_mirror() -> Path:
    value = os.environ.get("NLPZOO_DATA_MIRROR")
    mirror = Path(value) if value else DEFAULT_MIRROR
    assert mirror.is_dir(), (
        f"dataset mirror {mirror} does not exist: set NLPZOO_DATA_MIRROR to the folder holding "
        f"the files of ../shared/datasets/README.md"
    )
    return mirror.resolve()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _all_files() -> list[RemoteFile]:
    return [f for files in SOURCES.values() for f in files]


# --- registry ------------------------------------------------------------------------------------


def test_registry_shape() -> None:
    assert set(SOURCES) == {"brown", "multi30k", "analogy", "wordsim353", "simlex999"}
    files = _all_files()
    assert len({f.path for f in files}) == len(files), "duplicate paths"
    for f in files:
        assert f.url.startswith("https://"), f
        assert re.fullmatch(r"[0-9a-f]{64}", f.sha256), f
        assert not f.path.startswith("/") and ".." not in f.path.split("/")
        assert f.url.endswith("/" + f.path.split("/")[-1]), f
    multi30k = {f.path.removeprefix("multi30k/") for f in SOURCES["multi30k"]}
    splits = ["train", "val", "test_2016_flickr"]
    expected = {f"{s}.{lang}.gz" for s in splits for lang in ("de", "en", "fr", "cs")}
    expected |= {
        f"test_2017_{d}.{lang}.gz" for d in ("flickr", "mscoco") for lang in ("de", "en", "fr")
    }
    expected |= {f"test_2018_flickr.{lang}.gz" for lang in ("cs", "de", "en", "fr")}
    assert multi30k == expected
    pattern = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
    assert all(f.url == pattern + f.path.removeprefix("multi30k/") for f in SOURCES["multi30k"])
    by_path = {f.path: f for f in files}
    assert by_path["multi30k/test_2018_flickr.cs.gz"].sha256.startswith("7d0a9db9")
    assert by_path["brown.zip"].sha256.startswith("9b275f9b")


def test_registered_files_match_mirror(shared_mirror: Path) -> None:
    checked = []
    for f in _all_files():
        local = shared_mirror / f.path
        if local.exists():
            assert sha256sum(local) == f.sha256, f"{local} does not match the registry"
            checked.append(f.path)
    assert set(checked) >= MIRRORED, f"mirror lacks {sorted(MIRRORED - set(checked))}"


def test_registry_agrees_with_mirror_sha256sums(shared_mirror: Path) -> None:
    sums = shared_mirror / "SHA256SUMS"
    if not sums.exists():
        pytest.skip(f"{sums} not present in this mirror")
    registered = {f.path: f.sha256 for f in _all_files()}
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        assert registered[name.lstrip("*")] == digest, name


def test_sha256sum_streams_multiple_blocks(tmp_path: Path) -> None:
    data = os.urandom(sources.BLOCK_SIZE * 2 + 17)
    (tmp_path / "x").write_bytes(data)
    assert sha256sum(tmp_path / "x") == _sha(data)


# --- mirror --------------------------------------------------------------------------------------


def test_mirror_from_env_relative_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mirror").mkdir()
    monkeypatch.chdir(tmp_path)
    got = mirror_from_env({"NLPZOO_DATA_MIRROR": "mirror"})
    assert got is not None and got.is_absolute()
    assert got == (tmp_path / "mirror").resolve()


def test_mirror_from_env_unset_or_missing(tmp_path: Path) -> None:
    assert mirror_from_env({}) is None
    assert mirror_from_env({"NLPZOO_DATA_MIRROR": ""}) is None
    missing = tmp_path / "nope"
    with pytest.raises(DataError, match="does not exist") as info:
        mirror_from_env({"NLPZOO_DATA_MIRROR": str(missing)})
    assert str(missing) in str(info.value)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def _tiny_mirror(tmp_path: Path, data: bytes = b"hello mirror\n") -> tuple[Path, RemoteFile]:
    mirror = tmp_path / "mirror"
    (mirror / "sub").mkdir(parents=True)
    (mirror / "sub" / "small.txt").write_bytes(data)
    return mirror, RemoteFile("sub/small.txt", "https://example.invalid/small.txt", _sha(data))


def test_fetch_from_mirror_copies_then_noop(tmp_path: Path, no_network: None) -> None:
    mirror, rf = _tiny_mirror(tmp_path)
    dest_root = tmp_path / "raw"
    out = fetch(rf, dest_root, mirror, progress=False)
    assert out == dest_root / "sub" / "small.txt"
    assert out.read_bytes() == b"hello mirror\n"
    assert [p.name for p in out.parent.iterdir()] == ["small.txt"]  # no temp file left
    before = out.stat().st_mtime_ns
    os.utime(out, ns=(before - 10**9, before - 10**9))  # so a rewrite would be visible
    before = out.stat().st_mtime_ns
    (mirror / "sub" / "small.txt").unlink()  # a second fetch must not even look at the mirror
    assert fetch(rf, dest_root, mirror, progress=False) == out
    assert out.stat().st_mtime_ns == before


def test_fetch_mirror_checksum_mismatch_leaves_nothing(tmp_path: Path, no_network: None) -> None:
    mirror, rf = _tiny_mirror(tmp_path)
    wrong = RemoteFile(rf.path, rf.url, "0" * 64)
    dest_root = tmp_path / "raw"
    dest_root.mkdir()
    with pytest.raises(ChecksumError) as info:
        fetch(wrong, dest_root, mirror, progress=False)
    msg = str(info.value)
    assert "sub/small.txt" in msg and "0" * 64 in msg and rf.sha256 in msg
    assert list(dest_root.rglob("*")) == []  # no file, no temp file, no created subfolder


def test_fetch_replaces_corrupt_destination(tmp_path: Path, no_network: None) -> None:
    mirror, rf = _tiny_mirror(tmp_path)
    stale = tmp_path / "raw" / "sub" / "small.txt"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"truncated")
    assert fetch(rf, tmp_path / "raw", mirror, progress=False).read_bytes() == b"hello mirror\n"


def test_fetch_missing_in_mirror(tmp_path: Path, no_network: None) -> None:
    mirror, _ = _tiny_mirror(tmp_path)
    rf = RemoteFile("multi30k/train.fr.gz", "https://example.invalid/x", "0" * 64)
    with pytest.raises(DataError, match="not found in mirror") as info:
        fetch(rf, tmp_path / "raw", mirror, progress=False)
    assert str(mirror / "multi30k" / "train.fr.gz") in str(info.value)
    assert "NLPZOO_DATA_MIRROR" in str(info.value)


# --- download ------------------------------------------------------------------------------------


class FakeResponse(io.BytesIO):
    def __init__(self, data: bytes, url: str, reads: list[int] | None = None) -> None:
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))}
        self.url = url
        self.reads = reads if reads is not None else []

    def geturl(self) -> str:
        return self.url

    def read(self, size: int | None = -1) -> bytes:
        self.reads.append(-1 if size is None else size)
        return super().read(size)


def test_download_streams_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = os.urandom(sources.BLOCK_SIZE * 3 + 5)
    rf = RemoteFile("dl/blob.bin", "https://example.org/blob.bin", _sha(data))
    calls: list[tuple[str, float | None]] = []
    reads: list[int] = []

    def fake_urlopen(url: str, timeout: float | None = None) -> FakeResponse:
        calls.append((url, timeout))
        return FakeResponse(data, url, reads)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    out = fetch(rf, tmp_path, None, progress=False)
    assert out.read_bytes() == data
    assert calls == [(rf.url, sources.TIMEOUT_S)] and calls[0][1] is not None
    assert reads and all(0 < n <= sources.BLOCK_SIZE for n in reads)  # streamed, never read()
    assert os.listdir(tmp_path / "dl") == ["blob.bin"]


def test_download_mismatch_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rf = RemoteFile("blob.bin", "https://example.org/blob.bin", _sha(b"expected"))
    monkeypatch.setattr(
        urllib.request, "urlopen", lambda url, timeout=None: FakeResponse(b"x", url)
    )
    with pytest.raises(ChecksumError) as info:
        fetch(rf, tmp_path / "raw", None, progress=False)
    assert _sha(b"x") in str(info.value) and rf.sha256 in str(info.value)
    assert "blob.bin" in str(info.value)
    assert not (tmp_path / "raw").exists() or list((tmp_path / "raw").iterdir()) == []


def test_download_retries_transient_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "RETRY_DELAY_S", 0.0)
    rf = RemoteFile("blob.bin", "https://example.org/blob.bin", _sha(b"payload"))
    attempts = []

    def flaky(url: str, timeout: float | None = None) -> FakeResponse:
        attempts.append(url)
        if len(attempts) == 1:
            raise urllib.error.URLError(ConnectionResetError("reset"))
        return FakeResponse(b"payload", url)

    monkeypatch.setattr(urllib.request, "urlopen", flaky)
    assert fetch(rf, tmp_path, None, progress=False).read_bytes() == b"payload"
    assert len(attempts) == 2


def test_download_gives_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "RETRY_DELAY_S", 0.0)
    rf = RemoteFile("blob.bin", "https://example.org/blob.bin", _sha(b"payload"))
    attempts = []

    def down(url: str, timeout: float | None = None) -> FakeResponse:
        attempts.append(url)
        raise TimeoutError("timed out")

    monkeypatch.setattr(urllib.request, "urlopen", down)
    with pytest.raises(DataError, match="after 3 attempts"):
        fetch(rf, tmp_path, None, progress=False)
    assert len(attempts) == sources.ATTEMPTS == 3

    attempts.clear()

    def not_found(url: str, timeout: float | None = None) -> FakeResponse:
        attempts.append(url)
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]

    monkeypatch.setattr(urllib.request, "urlopen", not_found)
    with pytest.raises(DataError, match="404"):
        fetch(rf, tmp_path, None, progress=False)
    assert len(attempts) == 1  # a 404 is not retried
    assert list(tmp_path.iterdir()) == []


def test_download_refuses_plain_http(tmp_path: Path, no_network: None) -> None:
    rf = RemoteFile("blob.bin", "http://example.org/blob.bin", "0" * 64)
    with pytest.raises(DataError, match="https"):
        fetch(rf, tmp_path, None, progress=False)


def test_download_refuses_redirect_to_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rf = RemoteFile("blob.bin", "https://example.org/blob.bin", _sha(b"p"))
    monkeypatch.setattr(
        urllib.request,
        "urlopen",
        lambda url, timeout=None: FakeResponse(b"p", "http://evil.example/blob.bin"),
    )
    with pytest.raises(DataError, match="non-https"):
        fetch(rf, tmp_path, None, progress=False)
    assert list(tmp_path.iterdir()) == []


# --- fetch_sources -------------------------------------------------------------------------------


def test_fetch_sources_unknown_name() -> None:
    with pytest.raises(ConfigError) as info:
        fetch_sources(["multi30"], Path("unused"), None)
    msg = str(info.value)
    assert "'multi30'" in msg and "did you mean 'multi30k'" in msg
    for name in SOURCES:
        assert name in msg


def test_fetch_sources_subset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    files = []
    for name in ("a.txt", "b.txt", "c.txt"):
        (mirror / "tiny" / name).write_text(name)
        files.append(RemoteFile(f"tiny/{name}", f"https://x.invalid/{name}", _sha(name.encode())))
    monkeypatch.setitem(SOURCES, "tiny", tuple(files))
    raw = tmp_path / "raw"
    got = fetch_sources(["tiny"], raw, mirror, files={"tiny": ["c.txt", "a.txt"]})
    assert sorted(got) == [raw / "tiny" / "a.txt", raw / "tiny" / "c.txt"]
    assert not (raw / "tiny" / "b.txt").exists()
    with pytest.raises(ConfigError, match=r"'d\.txt'"):
        fetch_sources(["tiny"], raw, mirror, files={"tiny": ["d.txt"]})
    with pytest.raises(ConfigError, match="not among the sources"):
        fetch_sources(["tiny"], raw, mirror, files={"brown": ["brown.zip"]})
    assert sorted(fetch_sources(["tiny"], raw, mirror)) == [raw / f.path for f in files]


def test_fetch_sources_from_shared_mirror(shared_mirror: Path, tmp_path: Path) -> None:
    got = fetch_sources(["wordsim353", "simlex999"], tmp_path, shared_mirror)
    assert got == [tmp_path / "wordsim353.tsv", tmp_path / "simlex999.txt"]
    assert [sha256sum(p) for p in got] == [
        SOURCES["wordsim353"][0].sha256,
        SOURCES["simlex999"][0].sha256,
    ]


# --- safe_extract --------------------------------------------------------------------------------


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    return path


def _tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tf.addfile(info, io.BytesIO(m[1]))
    return path


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _symlink_tar(path: Path) -> Path:
    link = tarfile.TarInfo("docs/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    return _tar(path, [("docs/ok.txt", b"fine"), link])


def _hardlink_tar(path: Path) -> Path:
    link = tarfile.TarInfo("docs/hard")
    link.type = tarfile.LNKTYPE
    link.linkname = "../../outside"
    return _tar(path, [("docs/ok.txt", b"fine"), link])


def _symlink_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("docs/ok.txt", b"fine")
        info = zipfile.ZipInfo("docs/link")
        info.external_attr = (0o120777 << 16) | 0x10  # S_IFLNK | rwx, as Info-ZIP writes it
        zf.writestr(info, b"/etc/passwd")
    return path


# (archive maker, offending member, word the refusal must contain)
BAD_ARCHIVES = {
    "zip-dotdot": (
        lambda p: _zip(p / "a.zip", {"ok.txt": b"ok", "../evil": b"x"}),
        "../evil",
        "..",
    ),
    "zip-absolute": (
        lambda p: _zip(p / "a.zip", {"ok.txt": b"ok", "/abs/path": b"x"}),
        "/abs/path",
        "absolute",
    ),
    "zip-inner-dotdot": (lambda p: _zip(p / "a.zip", {"a/../../evil": b"x"}), "a/../../evil", ".."),
    "zip-symlink": (lambda p: _symlink_zip(p / "a.zip"), "docs/link", "symlink"),
    "tar-dotdot": (
        lambda p: _tar(p / "a.tar.gz", [("ok.txt", b"ok"), ("../evil", b"x")]),
        "../evil",
        "..",
    ),
    "tar-absolute": (
        lambda p: _tar(p / "a.tar.gz", [("/abs/path", b"x")]),
        "/abs/path",
        "absolute",
    ),
    "tar-symlink": (lambda p: _symlink_tar(p / "a.tar.gz"), "docs/link", "link"),
    "tar-hardlink": (lambda p: _hardlink_tar(p / "a.tar.gz"), "docs/hard", "link"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARCHIVES))
def test_safe_extract_refuses(tmp_path: Path, case: str) -> None:
    make, member, reason = BAD_ARCHIVES[case]
    archive = make(tmp_path)
    work = tmp_path / "work"
    existing = work / "existing"
    (existing / "keep").mkdir(parents=True)
    (existing / "keep" / "old.txt").write_text("old")
    before = _snapshot(work)

    with pytest.raises(DataError) as info:
        safe_extract(archive, existing)
    assert repr(member) in str(info.value) and reason in str(info.value).replace(repr(member), "")
    assert _snapshot(work) == before  # target untouched, no temp dir, nothing written outside

    with pytest.raises(DataError):
        safe_extract(archive, work / "fresh")
    assert not (work / "fresh").exists()
    assert not (tmp_path / "evil").exists() and not (tmp_path / "outside").exists()


def test_safe_extract_good_zip_replaces_target(tmp_path: Path) -> None:
    archive = _zip(
        tmp_path / "good.zip",
        {"brown/": b"", "brown/ca01": b"The/at Fulton/np\n", "brown/README": b"readme"},
    )
    target = tmp_path / "out"
    (target / "stale").mkdir(parents=True)
    (target / "stale" / "old.txt").write_text("old")
    got = safe_extract(archive, target)
    assert sorted(got) == [target / "brown" / "README", target / "brown" / "ca01"]
    assert (target / "brown" / "ca01").read_bytes() == b"The/at Fulton/np\n"
    assert not (target / "stale").exists()  # replaced as a whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.zip", "out"]  # no temp dirs left


def test_safe_extract_good_tar_gz(tmp_path: Path) -> None:
    folder = tarfile.TarInfo("corpus")
    folder.type = tarfile.DIRTYPE
    archive = _tar(
        tmp_path / "good.tar.gz",
        [folder, ("corpus/train.txt", b"a b c\n"), ("corpus/sub/valid.txt", b"d e\n")],
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    got = safe_extract(archive, out)
    assert got == [out / "corpus" / "train.txt", out / "corpus" / "sub" / "valid.txt"]
    assert (out / "corpus" / "sub" / "valid.txt").read_bytes() == b"d e\n"
    assert _snapshot(out).keys() == {
        "corpus",
        "corpus/train.txt",
        "corpus/sub",
        "corpus/sub/valid.txt",
    }


def test_safe_extract_not_an_archive(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("not an archive")
    with pytest.raises(DataError, match="neither a zip nor a tar"):
        safe_extract(tmp_path / "plain.txt", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_safe_extract_real_brown_zip_members_are_safe(shared_mirror: Path) -> None:
    # Only the member check (the prepare stage reads brown.zip directly, without extracting).
    with zipfile.ZipFile(shared_mirror / "brown.zip") as zf:
        names = zf.namelist()
    assert len([n for n in names if re.fullmatch(r"brown/c[a-r]\d\d", n)]) == 500
    for name in names:
        sources._member_path(name, Path("brown.zip"))
