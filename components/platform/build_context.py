"""What a Docker build sees of this repository, as pure functions (no Pulumi, no Docker).

The docker-build provider decides whether to rebuild an image from a hash of the Dockerfile's bytes and of every
file of the build context that the ignore file lets through, with each file's path and mode
(``hashBuildContext`` in pulumi-docker-build's ``provider/internal/context.go``). The ignore file is the
Dockerfile's own ``<Dockerfile>.dockerignore`` when it exists, else the context's ``.dockerignore``
(``getIgnorePatterns``, the same precedence as Docker's BuildKit). The image's tag is derived here from exactly
those bytes (plus the build arguments, the platform and the cache reference, the other inputs the provider
diffs), so the tag changes exactly when the provider rebuilds: a rebuild never pushes an existing tag to an
``IMMUTABLE`` ECR repository, and an unchanged image is never rebuilt.

:func:`unresolved_sources` checks a Dockerfile's ``COPY``/``ADD`` sources against the same view of the context
(parsed with Docker's own Dockerfile parser), so an image whose ``COPY`` names a path outside its context fails a
test, not the first ``pulumi up``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from tritonft.errors import UserError


@dataclass(frozen=True)
class IgnorePattern:
    """One line of an ignore file: a cleaned pattern, and whether it was an exception (``!``)."""

    pattern: str
    exception: bool


def ignore_file(context: Path, dockerfile: Path) -> Path | None:
    """The ignore file a build of ``dockerfile`` in ``context`` uses: ``<Dockerfile>.dockerignore`` first, then
    ``<context>/.dockerignore``; None when neither exists."""
    for candidate in (dockerfile.with_name(dockerfile.name + ".dockerignore"), context / ".dockerignore"):
        if candidate.is_file():
            return candidate
    return None


def parse_ignore(text: str) -> tuple[IgnorePattern, ...]:
    """The patterns of an ignore file, as moby's ``ignorefile.ReadAll`` reads them: ``#`` lines and blank lines
    skipped, ``!`` marks an exception, each pattern path-cleaned with a leading ``/`` dropped."""
    patterns: list[IgnorePattern] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        if exception:
            line = line[1:].strip()
            if not line:
                continue
        cleaned = str(PurePosixPath(line)).lstrip("/") if line not in ("/", ".") else "."
        patterns.append(IgnorePattern(cleaned or ".", exception))
    return tuple(patterns)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    """moby/patternmatcher's pattern language: ``**`` any number of path segments, ``*`` and ``?`` within one
    segment, ``[...]`` classes; the whole path must match."""
    out = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
                i = end
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return re.compile("".join(out))


def excluded(path: str, patterns: Sequence[IgnorePattern]) -> bool:
    """Whether the ignore patterns leave ``path`` (relative, ``/``-separated) out of the context: the last pattern
    that matches the path or one of its parent directories decides (``MatchesOrParentMatches``)."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for p in patterns:
        if p.pattern == ".":
            matched = True
        else:
            rx = _regex(p.pattern)
            matched = any(rx.match(c) for c in candidates)
        if matched:
            result = not p.exception
    return result


def _may_reinclude_below(directory: Sequence[str], pattern: IgnorePattern) -> bool:
    """Whether exception ``pattern`` could match a path below ``directory`` (its segments): each of the directory's
    segments must match the pattern's segment at its depth; a ``**`` or a pattern that ends first may match anything."""
    segments = pattern.pattern.split("/")
    for depth, name in enumerate(directory):
        if depth >= len(segments) or "**" in segments[depth]:
            return True
        if not _regex(segments[depth]).match(name):
            return False
    return True


def context_files(context: Path, patterns: Sequence[IgnorePattern]) -> tuple[str, ...]:
    """Every regular file (or symlink) under ``context`` that the build sends, relative and in path order.

    A directory the patterns exclude is not entered unless an exception could bring back something below it (as
    Docker's own walk skips it): the tools image's context is the repository root, with ``.venv`` and ``.git``."""
    exceptions = [p for p in patterns if p.exception]
    files: list[str] = []

    def walk(directory: Path, rel: tuple[str, ...]) -> None:
        for entry in os.scandir(directory):
            parts = (*rel, entry.name)
            path = "/".join(parts)
            if entry.is_dir(follow_symlinks=False):
                if not excluded(path, patterns) or any(_may_reinclude_below(parts, p) for p in exceptions):
                    walk(Path(entry.path), parts)
            elif excluded(path, patterns):
                continue
            elif entry.is_symlink() and entry.is_dir():
                raise UserError(
                    f"images: '{path}' in the build context '{context}' is a symlink to a directory, which the "
                    "docker-build provider cannot hash (it reads it as a file: 'is a directory'); replace it with "
                    "the directory, or leave it out with the ignore file"
                )
            elif entry.is_symlink() and not os.path.exists(entry.path):
                raise UserError(
                    f"images: '{path}' in the build context '{context}' is a symlink to nothing; the docker-build "
                    "provider's walk silently stops at it and hashes none of the files after it in its folder (its "
                    "rebuild decision would miss their changes): remove it, or leave it out with the ignore file"
                )
            else:
                files.append(path)

    walk(context, ())
    # The order of the tag's digest: by path segments (as pathlib sorts), not by the joined string.
    return tuple(sorted(files, key=lambda path: path.split("/")))


@dataclass(frozen=True)
class BuildView:
    """One image build as the docker-build provider sees it."""

    context: Path
    dockerfile: Path
    ignore: Path | None
    files: tuple[str, ...]
    """What the context sends (after the ignore file)."""


def build_view(context: Path, dockerfile: Path) -> BuildView:
    """The files a build of ``dockerfile`` in ``context`` sends, by the provider's rules."""
    if not context.is_dir():
        raise UserError(f"images: build context '{context}' is not a directory; build from the repository root")
    if not dockerfile.is_file():
        raise UserError(f"images: Dockerfile '{dockerfile}' not found; build from the repository root")
    ignore = ignore_file(context, dockerfile)
    patterns = parse_ignore(ignore.read_text(encoding="utf-8")) if ignore else ()
    return BuildView(context, dockerfile, ignore, context_files(context, patterns))


def context_tag(view: BuildView, inputs: Mapping[str, str], prefix: str) -> str:
    """A tag from the bytes the provider's rebuild decision reads: the Dockerfile, each sent file's path, mode and
    content, and the other inputs it diffs (``inputs``: build arguments, platform, cache reference)."""
    digest = hashlib.sha256()
    digest.update(view.dockerfile.read_bytes())
    for rel in view.files:
        path = view.context / rel
        mode = path.lstat().st_mode if path.is_symlink() else path.stat().st_mode
        digest.update(rel.encode() + b"\x00" + stat.filemode(mode).encode() + b"\x00")
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.exists() else b"")
    for key in sorted(inputs):
        digest.update(f"{key}={inputs[key]}\x00".encode())
    return f"{prefix}-{digest.hexdigest()[:20]}"


@dataclass(frozen=True)
class CopySource:
    """A ``COPY``/``ADD`` source read from the build context (``--from`` copies and URLs are not)."""

    line: int
    instruction: str
    source: str


def copy_sources(dockerfile: Path) -> tuple[CopySource, ...]:
    """The context sources of every ``COPY``/``ADD``, parsed by Docker's own parser (the ``dockerfile``
    package wraps BuildKit's Go parser)."""
    # dev dependency (a C extension without stubs): the check runs in the tests, not inside ``pulumi up``
    import dockerfile as parser  # type: ignore[import-not-found]

    sources: list[CopySource] = []
    for cmd in parser.parse_file(str(dockerfile)):
        if cmd.cmd.upper() not in ("COPY", "ADD"):
            continue
        if any(flag.startswith("--from") for flag in cmd.flags):
            continue
        if cmd.heredocs:
            continue
        *srcs, _dest = cmd.value
        for src in srcs:
            if cmd.cmd.upper() == "ADD" and re.match(r"^[a-z][a-z0-9+.-]*://|^git@", src):
                continue
            sources.append(CopySource(int(cmd.start_line), cmd.cmd.upper(), src))
    return tuple(sources)


def resolves(source: str, files: Sequence[str]) -> bool:
    """Whether a ``COPY`` source names something the context sends: the file itself, a directory holding sent
    files, or a wildcard matching one of them (``filepath.Match`` rules within each segment)."""
    src = str(PurePosixPath(source)).lstrip("/")
    if src in (".", ""):
        return bool(files)
    for rel in files:
        parts = rel.split("/")
        for i in range(len(parts)):
            prefix = "/".join(parts[: i + 1])
            if prefix == src or (any(c in src for c in "*?[") and _segments_match(src, prefix)):
                return True
    return False


def _segments_match(pattern: str, path: str) -> bool:
    pattern_parts, path_parts = pattern.split("/"), path.split("/")
    return len(pattern_parts) == len(path_parts) and all(
        fnmatch.fnmatchcase(part, pat) for pat, part in zip(pattern_parts, path_parts, strict=True)
    )


def unresolved_sources(view: BuildView) -> tuple[CopySource, ...]:
    """The ``COPY``/``ADD`` sources of the view's Dockerfile that its context (after the ignore file) lacks."""
    return tuple(s for s in copy_sources(view.dockerfile) if not resolves(s.source, view.files))
