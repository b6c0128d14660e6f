"""Data sources of the `corpus` stage: registry, download or mirror, checksums, safe extraction.

A source is a name in `SOURCES` mapping to the files it consists of, each with its upstream HTTPS
URL and SHA-256 (the defaults are the table in `../shared/datasets/README.md`). `fetch` puts one
file at `<raw dir>/<file.path>`:

    destination already there with the right hash  -> nothing to do
    NLPZOO_DATA_MIRROR set                          -> copy <mirror>/<file.path>
    otherwise                                       -> download over HTTPS (progress bar, retries)

Either way the bytes go to a temp file next to the destination, are hashed while written, and are
renamed into place only if the hash matches; a mismatch raises `ChecksumError` and leaves nothing.

`safe_extract` unpacks zip and tar archives after checking every member (no absolute paths, no `..`,
no links), into a temp dir that then replaces the target as a whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import shutil
import stat
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import IO

from tqdm import tqdm

from nlpzoo.config import closest
from nlpzoo.errors import ChecksumError, ConfigError, DataError
from nlpzoo.io import atomic_dir, atomic_open

logger = logging.getLogger(__name__)

MIRROR_ENV = "NLPZOO_DATA_MIRROR"
BLOCK_SIZE = 1 << 20  # 1 MiB: read, hash and write in blocks of this size
TIMEOUT_S = 60.0  # per socket operation (connect, each read), not for the whole download
ATTEMPTS = 3  # downloads tried this often on transient network errors
RETRY_DELAY_S = 2.0  # wait before retry k is k * RETRY_DELAY_S

Write = Callable[[bytes], None]


@dataclass(frozen=True)
class RemoteFile:
    """One file of a source: `path` is relative (also its place in a mirror and in the raw dir)."""

    path: str
    url: str
    sha256: str


_MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
_GENSIM_TEST_DATA = (
    "https://raw.githubusercontent.com/piskvorky/gensim/develop/gensim/test/test_data/"
)


# Multi30k task 1, raw (cased, untokenized) captions: every file upstream publishes, by name.
_MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2017_flickr.de.gz": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "test_2017_flickr.en.gz": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
    "test_2017_flickr.fr.gz": "3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496",
    "test_2017_mscoco.de.gz": "799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338",
    "test_2017_mscoco.en.gz": "aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58",
    "test_2017_mscoco.fr.gz": "754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0",
    "test_2018_flickr.cs.gz": "7d0a9db904f94c554a8c58049a9f3a5357c27f46cc3d710d70cb0b4a2585b8c2",
    "test_2018_flickr.de.gz": "ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608",
    "test_2018_flickr.en.gz": "ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d",
    "test_2018_flickr.fr.gz": "fb2b83fcceb937a4f7e3e93c1c51c22aba92f1e342391e6b5ba392b16a920501",
}


def _multi30k(name: str, sha256: str) -> RemoteFile:
    return RemoteFile(f"multi30k/{name}", _MULTI30K_URL + name, sha256)


SOURCES: dict[str, tuple[RemoteFile, ...]] = {
    "brown": (
        RemoteFile(
            "brown.zip",
            "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/brown.zip",
            "9b275f9b3b95d7bd66ccfb7cd259f445a13bbe5d1f4107aba09fd3e8364bafa6",
        ),
    ),
    "multi30k": tuple(_multi30k(name, sha) for name, sha in _MULTI30K_SHA256.items()),
    "analogy": (
        RemoteFile(
            "questions-words.txt",
            "https://raw.githubusercontent.com/tmikolov/word2vec/master/questions-words.txt",
            "8c29b3332afc46f3fb8be04cb5297bf96f39aa7131272dff57869b4485b22a36",
        ),
    ),
    "wordsim353": (
        RemoteFile(
            "wordsim353.tsv",
            _GENSIM_TEST_DATA + "wordsim353.tsv",
            "f92a022fc2537793a15bc3a8c162ebcd74990e033a228bb6388cb71e4c0b1e1d",
        ),
    ),
    "simlex999": (
        RemoteFile(
            "simlex999.txt",
            _GENSIM_TEST_DATA + "simlex999.txt",
            "d5e0501971478a511430ee880bd0121e94ac701ba86d90544d83e6d2ba3db05d",
        ),
    ),
}


# --- mirror --------------------------------------------------------------------------------------


def mirror_from_env(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The offline mirror named by NLPZOO_DATA_MIRROR (absolute), or None when unset or empty."""
    value = environ.get(MIRROR_ENV, "")
    if not value:
        return None
    mirror = Path(value).expanduser().resolve()  # a relative value is taken from the cwd
    if not mirror.is_dir():
        raise DataError(
            f"{MIRROR_ENV}={value!r} names {mirror}, which does not exist or is not a directory; "
            f"fix the path or unset {MIRROR_ENV} to download"
        )
    return mirror


# --- checksums and fetching ----------------------------------------------------------------------


def sha256sum(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK_SIZE):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    file: RemoteFile, dest_root: Path, mirror: Path | None = None, *, progress: bool = True
) -> Path:
    """Put `file` at `dest_root/file.path`, verified; from `mirror` if given, else over HTTPS."""
    dest = Path(dest_root) / file.path
    if dest.is_file():
        if sha256sum(dest) == file.sha256:
            logger.debug("%s already present and verified", dest)
            return dest
        # Known bad: remove it now, so a failed fetch below cannot leave it looking usable.
        logger.warning("%s exists but its SHA-256 is wrong; fetching it again", dest)
        dest.unlink()

    if mirror is not None:
        src = Path(mirror) / file.path
        if not src.is_file():
            raise DataError(
                f"{file.path} not found in mirror {mirror} (looked for {src}); "
                f"add the file there or unset {MIRROR_ENV} to download"
            )
        logger.info("copying %s from mirror %s", file.path, mirror)
        with open(src, "rb") as f_in, _verified_writer(file, dest, f"mirror copy {src}") as write:
            while block := f_in.read(BLOCK_SIZE):
                write(block)
    else:
        _download(file, dest, progress=progress)
    return dest


@contextlib.contextmanager
def _verified_writer(file: RemoteFile, dest: Path, origin: str) -> Iterator[Write]:
    """Yield a `write(block)`; on exit rename to `dest` if the SHA-256 matches, else leave nothing.

    Parent directories created here are removed again when nothing ends up in them.
    """
    created = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
    digest = hashlib.sha256()
    try:
        with atomic_open(dest, "wb") as f:

            def write(block: bytes) -> None:
                digest.update(block)
                f.write(block)

            yield write
            actual = digest.hexdigest()
            if actual != file.sha256:  # raising here makes atomic_open drop the temp file
                raise ChecksumError(
                    f"checksum mismatch for {file.path} ({origin}): expected sha256 "
                    f"{file.sha256}, got {actual}; the file was not saved"
                )
    except BaseException:
        for parent in created:  # innermost first
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise
    logger.info("verified %s (sha256 %s)", dest, actual)


def _download(file: RemoteFile, dest: Path, *, progress: bool) -> None:
    """Stream `file.url` into `dest` via `_verified_writer`, retrying transient network errors."""
    if not file.url.lower().startswith("https://"):
        raise DataError(f"refusing to download {file.path} from {file.url!r}: only https:// URLs")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            logger.info("downloading %s from %s", file.path, file.url)
            with urllib.request.urlopen(file.url, timeout=TIMEOUT_S) as response:
                _stream(response, file, dest, progress=progress)
            return
        except urllib.error.HTTPError as err:
            if err.code < 500 and err.code != 429:  # 404, 403 ...: retrying will not help
                raise DataError(
                    f"could not download {file.path} from {file.url}: HTTP {err.code} {err.reason}"
                ) from err
            error: Exception = err
        except (
            urllib.error.URLError,
            TimeoutError,
            ConnectionError,
            http.client.HTTPException,
        ) as e:
            error = e
        if attempt == ATTEMPTS:
            raise DataError(
                f"could not download {file.path} from {file.url} after {ATTEMPTS} attempts: "
                f"{error}; check the network or set {MIRROR_ENV} to an offline copy"
            ) from error
        logger.warning("download of %s failed (%s); retrying", file.url, error)
        time.sleep(attempt * RETRY_DELAY_S)


def _stream(response: IO[bytes], file: RemoteFile, dest: Path, *, progress: bool) -> None:
    final_url = response.geturl()  # type: ignore[attr-defined]  # after redirects
    if not final_url.lower().startswith("https://"):
        raise DataError(f"download of {file.url} was redirected to non-https {final_url!r}")
    length = response.headers.get("Content-Length")  # type: ignore[attr-defined]
    total = int(length) if length and length.isdigit() else None
    show = progress and sys.stderr.isatty()
    received = 0
    with (
        _verified_writer(file, dest, f"downloaded from {file.url}") as write,
        tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=file.path,
            disable=not show,
        ) as bar,
    ):
        while block := response.read(BLOCK_SIZE):
            write(block)
            received += len(block)
            bar.update(len(block))
        if total is not None and received != total:  # a cut connection: transient, retry
            raise http.client.IncompleteRead(b"", total - received)


def fetch_sources(
    names: Sequence[str],
    raw_root: Path,
    mirror: Path | None,
    *,
    files: Mapping[str, Sequence[str]] | None = None,
) -> list[Path]:
    """Fetch every file of the named sources into `raw_root`; return their local paths.

    `files` restricts a source to some of its files, by base name ({"multi30k": ["train.de.gz"]}).
    Everything is validated before anything is fetched. Archives are not extracted here.
    """
    files = files or {}
    for name in [*names, *files]:
        _check_source_name(name)
    for name in files:
        if name not in names:
            raise ConfigError(
                f"data file selection given for source {name!r}, which is not among the sources "
                f"to fetch ({', '.join(names) or 'none'})"
            )
    selected: list[RemoteFile] = []
    for name in dict.fromkeys(names):  # de-duplicated, order kept
        available = {PurePosixPath(f.path).name: f for f in SOURCES[name]}
        wanted = files.get(name)
        if wanted is None:
            selected.extend(SOURCES[name])
            continue
        for base in wanted:
            if base not in available:
                raise ConfigError(
                    f"source {name!r} has no file {base!r}{_did_you_mean(base, available)}; "
                    f"its files: {', '.join(available)}"
                )
        selected.extend(available[base] for base in dict.fromkeys(wanted))
    return [fetch(f, Path(raw_root), mirror) for f in selected]


def _check_source_name(name: str) -> None:
    if name not in SOURCES:
        raise ConfigError(
            f"unknown data source {name!r}{_did_you_mean(name, SOURCES)}; "
            f"valid sources: {', '.join(SOURCES)}"
        )


def _did_you_mean(word: str, choices: Mapping[str, object] | Sequence[str]) -> str:
    close = closest(word, choices)
    return f" (did you mean {close!r}?)" if close else ""


# --- safe extraction -----------------------------------------------------------------------------


def safe_extract(archive: Path, target: Path) -> list[Path]:
    """Extract a zip or tar(.gz/.bz2/.xz) archive into `target`, replacing `target` as a whole.

    Every member is checked before anything is written: an absolute path, a `..` component or a
    link (tar symlink/hardlink, zip entry marked as symlink) raises DataError naming the member, and
    `target` is left as it was. Returns the extracted files (directories not listed).
    """
    archive, target = Path(archive), Path(target)
    if not archive.is_file():
        raise DataError(f"archive {archive} does not exist")
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                return _extract_zip(zf, archive, target)
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive, "r:*") as tf:
                return _extract_tar(tf, archive, target)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as err:
        raise DataError(f"archive {archive} is corrupt: {err}") from err
    raise DataError(f"{archive} is neither a zip nor a tar archive")


def _member_path(name: str, archive: Path) -> PurePosixPath:
    """The member's relative path; DataError if it is absolute or climbs out with `..`."""
    posix = name.replace("\\", "/")
    if posix.startswith("/") or PureWindowsPath(name).drive:
        raise DataError(f"refusing to extract {archive}: member {name!r} has an absolute path")
    rel = PurePosixPath(posix)
    if ".." in rel.parts:
        raise DataError(f"refusing to extract {archive}: member {name!r} contains '..'")
    return rel


def _extract_zip(zf: zipfile.ZipFile, archive: Path, target: Path) -> list[Path]:
    plan: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    for info in zf.infolist():
        rel = _member_path(info.filename, archive)
        if stat.S_ISLNK(info.external_attr >> 16):  # Unix mode lives in the high 16 bits
            raise DataError(f"refusing to extract {archive}: member {info.filename!r} is a symlink")
        plan.append((info, rel))
    with atomic_dir(target) as tmp:
        for info, rel in plan:
            out = tmp / rel
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as f_in, open(out, "wb") as f_out:
                shutil.copyfileobj(f_in, f_out, BLOCK_SIZE)
    return _extracted(target, [rel for info, rel in plan if not info.is_dir()])


def _extract_tar(tf: tarfile.TarFile, archive: Path, target: Path) -> list[Path]:
    plan: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
    for member in tf.getmembers():
        rel = _member_path(member.name, archive)
        if member.issym() or member.islnk():
            raise DataError(f"refusing to extract {archive}: member {member.name!r} is a link")
        if not (member.isfile() or member.isdir()):  # devices, fifos
            raise DataError(
                f"refusing to extract {archive}: member {member.name!r} is not a regular file"
            )
        plan.append((member, rel))
    with atomic_dir(target) as tmp:
        for member, rel in plan:
            out = tmp / rel
            if member.isdir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            f_in = tf.extractfile(member)
            if f_in is None:  # cannot happen for a regular file; keeps the type checker honest
                raise DataError(f"cannot read member {member.name!r} of {archive}")
            with f_in, open(out, "wb") as f_out:
                shutil.copyfileobj(f_in, f_out, BLOCK_SIZE)
    return _extracted(target, [rel for member, rel in plan if member.isfile()])


def _extracted(target: Path, rels: list[PurePosixPath]) -> list[Path]:
    paths = [target.joinpath(*rel.parts) for rel in dict.fromkeys(rels) if rel.parts]
    logger.info("extracted %d files into %s", len(paths), target)
    return paths
