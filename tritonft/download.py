"""``tritonft download``: fetch exactly the files conversion and tokenization need, at a pinned revision.

Files go through the Hugging Face cache (``--cache-dir``, default: huggingface_hub's ``HF_HUB_CACHE``), which
makes downloads resumable (interrupted blobs are continued, finished ones are not fetched again) and works
offline (``HF_HUB_OFFLINE=1``) from a populated cache. ``--dest`` is then assembled atomically from the cached
snapshot (hard links where the filesystem allows, copies otherwise) with a ``download.json`` record (repo,
requested revision, resolved commit, and per file its size, mtime and sha256: :mod:`tritonft.download_record`); a
rerun for the same commit whose files are unchanged is a no-op.

Integrity: huggingface_hub checks only the size of what it downloaded. Every file placed in ``--dest`` is hashed
(on several threads, about 0.6 s of CPU per GB) and each weight file stored in Git LFS is compared with the
sha256 the Hub published for it (its LFS object id, which names the blob in the cache): a corrupt or truncated
blob is an error naming it, and nothing is placed in ``--dest``. The converter reuses these hashes instead of
reading the weights again.

Which files (:func:`select_files`): ``config.json`` (+ ``generation_config.json``), the weights — safetensors
(single ``model.safetensors`` or ``model-XXXXX-of-YYYYY.safetensors`` shards + index) when the repository has them,
otherwise the ``pytorch_model*.bin`` equivalents — and the tokenizer files (``tokenizer.json``,
``tokenizer_config.json``, ``special_tokens_map.json``, ``added_tokens.json``, ``spiece.model``, ``vocab.json``,
``merges.txt``). Other weight formats (Flax, TF, ONNX, fp16 variants) are never fetched.

The token comes from ``--token-file`` (a mounted Kubernetes secret) or the ``HF_TOKEN`` environment variable; it
is passed to huggingface_hub and never printed or written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tritonft.digest import sha256_file
from tritonft.download_record import RECORD, SCHEMA, file_entry, read_record, unchanged
from tritonft.errors import UserError

CONFIG_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "spiece.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)
CHAT_TEMPLATES = re.compile(r"^additional_chat_templates/[^/]+\.jinja$")
"""transformers' named chat templates (``CHAT_TEMPLATE_DIR``), beside ``chat_template.jinja`` (the default)."""
_SAFETENSORS = re.compile(r"^model(-\d{5}-of-\d{5})?\.safetensors$|^model\.safetensors\.index\.json$")
_TORCH = re.compile(r"^pytorch_model(-\d{5}-of-\d{5})?\.bin$|^pytorch_model\.bin\.index\.json$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def select_files(repo_files: Iterable[str]) -> list[str]:
    """The repository files to fetch (top level only, and the named chat templates of
    ``additional_chat_templates/``), safetensors preferred over ``pytorch_model.bin``."""
    files = sorted(set(repo_files))
    if "config.json" not in files:
        raise UserError("the repository has no config.json at its top level; it is not a transformers model repo")
    weights = [f for f in files if _SAFETENSORS.match(f)]
    if not any(f.endswith(".safetensors") for f in weights):
        weights = [f for f in files if _TORCH.match(f)]
    if not weights:
        raise UserError(
            "the repository has neither model*.safetensors nor pytorch_model*.bin at its top level; "
            "check --repo and --revision"
        )
    extras = [f for f in files if f in CONFIG_FILES or f in TOKENIZER_FILES or CHAT_TEMPLATES.match(f)]
    return sorted({*weights, *extras})


def read_token(token_file: Path | None) -> str | None:
    """``--token-file`` contents (stripped), else ``HF_TOKEN``, else ``None`` (public repositories)."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise UserError(
                f"--token-file {token_file} is not readable ({exc.strerror}); mount the secret there"
            ) from exc
        if not token:
            raise UserError(f"--token-file {token_file} is empty; it must hold a Hugging Face access token")
        return token
    return os.environ.get("HF_TOKEN") or None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True, help="Hugging Face repository id, e.g. google/flan-t5-base")
    parser.add_argument("--revision", required=True, help="commit sha (recommended) or tag/branch to pin")
    parser.add_argument("--dest", required=True, type=Path, help="directory that receives the model files")
    parser.add_argument("--token-file", type=Path, help="file holding the access token (default: $HF_TOKEN)")
    parser.add_argument("--cache-dir", type=Path, help="Hugging Face cache to download through (default: HF_HUB_CACHE)")


def _hub_error(exc: Exception, repo: str, revision: str) -> UserError:
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return UserError(
            f"{repo} is gated: accept its licence on the Hub and provide a token (--token-file or HF_TOKEN)"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(
            f"{repo} was not found (or is private and the token has no access); check --repo and the token"
        )
    if isinstance(exc, RevisionNotFoundError):
        return UserError(f"{repo} has no revision {revision!r}; check --revision")
    if isinstance(exc, LocalEntryNotFoundError):
        return UserError(
            f"{repo}@{revision} is not in the local cache and the Hub cannot be reached (offline?); "
            "download it once with network access or point --cache-dir at a populated cache"
        )
    return UserError(f"downloading {repo}@{revision} failed: {type(exc).__name__}: {exc}")


def _progress_class(stream: Any) -> Any:
    """A tqdm that prints a plain line at most every 5 s when stderr is not a terminal (Job logs)."""
    if stream.isatty():
        return None
    import time

    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    class LogLines(tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.update(file=stream, mininterval=0, disable=False)
            self._last_line = 0.0
            super().__init__(*args, **kwargs)

        def display(self, msg: str | None = None, pos: int | None = None) -> bool:
            now = time.monotonic()
            if now - self._last_line >= 5.0 or self.n == self.total:
                self._last_line = now
                stream.write(f"download: {self.format_meter(**self.format_dict)}\n")
                stream.flush()
            return True

    return LogLines


def _list_repo(repo: str, revision: str, token: str | None, cache_dir: Path | None) -> list[str]:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        return list(HfApi(token=token).list_repo_files(repo, revision=revision))
    except (OfflineModeIsEnabled, OSError, HfHubHTTPError) as exc:
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

        if isinstance(exc, GatedRepoError | RepositoryNotFoundError | RevisionNotFoundError):
            raise
        # No Hub: use what the cache holds for this revision.
        folder = Path(
            snapshot_download(repo, revision=revision, cache_dir=cache_dir, token=token, local_files_only=True)
        )
        return [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]


def hub_sha256(snapshot: Path, name: str) -> str | None:
    """The sha256 the Hub published for a cached file: the name of its blob when it is stored in Git LFS.

    (huggingface_hub names each blob by its etag: the LFS object id, a sha256, for LFS files; the 40-hex git blob
    id for small files kept in git, which is not a hash of the bytes alone.)
    """
    blob = (snapshot / name).resolve().name
    return blob if _HEX64.match(blob) else None


def _verify(directory: Path, files: list[str], snapshot: Path) -> dict[str, dict[str, Any]]:
    """Hash every file in ``directory`` (threads; hashlib releases the GIL), checking LFS files against the Hub."""
    started = time.monotonic()
    total = sum((directory / name).stat().st_size for name in files)
    print(f"download: hashing {len(files)} files ({total / 1e9:.2f} GB) to verify and record them", file=sys.stderr)

    def one(name: str) -> dict[str, Any]:
        expected = hub_sha256(snapshot, name)
        actual = sha256_file(directory / name)
        if expected is not None and actual != expected:
            raise UserError(
                f"{name}: sha256 {actual} differs from the {expected} the Hub published for it, so the cached "
                f"blob {(snapshot / name).resolve()} is corrupt or truncated; delete that blob and re-run to fetch "
                "it again (nothing was placed in --dest)"
            )
        return file_entry(directory / name, actual, hub_sha256=expected is not None)

    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="verify") as pool:
        entries = dict(zip(files, pool.map(one, files), strict=True))
    checked = [n for n, e in entries.items() if e["hub_sha256"]]
    size = sum(entries[n]["size"] for n in checked)
    print(
        f"download: verified {len(checked)} LFS file(s), {size / 1e9:.2f} GB, against the Hub's sha256 "
        f"in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return entries


def _materialise(snapshot: Path, files: list[str], dest: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Build ``dest`` beside itself, verify it, record it, and rename it into place (hard links where possible)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir()
        for name in files:
            source = (snapshot / name).resolve()
            if not source.is_file():
                raise UserError(f"{name} is missing from the cached snapshot {snapshot}; re-run with network access")
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, partial / name)
            except OSError:
                shutil.copyfile(source, partial / name)
        record = {**record, "files": _verify(partial, files, snapshot)}
        (partial / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            dest.rename(old)
            partial.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return record


def _up_to_date(dest: Path, record: dict[str, Any], files: list[str]) -> bool:
    """``dest`` holds this commit's files, each unchanged since it was recorded (no re-hashing)."""
    if not dest.exists():
        return False
    existing = read_record(dest)
    if existing is None:
        if dest.is_dir() and not any(dest.iterdir()):
            return False
        if not (dest / RECORD).is_file():
            raise UserError(
                f"--dest {dest} exists and was not written by `tritonft download`; remove it or pick another"
            )
        return False  # an older record format: download again (cheap: the cache has the blobs)
    same = all(existing.get(key) == record[key] for key in ("repo", "revision", "commit"))
    recorded = existing["files"]
    return same and set(recorded) == set(files) and all(unchanged(recorded[n], dest / n) for n in files)


def run(args: argparse.Namespace) -> int:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    token = read_token(args.token_file)
    try:
        files = select_files(_list_repo(args.repo, args.revision, token, args.cache_dir))
        print(f"download: {args.repo}@{args.revision}: {len(files)} files: {', '.join(files)}", file=sys.stderr)
        snapshot = Path(
            snapshot_download(
                args.repo,
                revision=args.revision,
                cache_dir=args.cache_dir,
                allow_patterns=files,
                token=token,
                tqdm_class=_progress_class(sys.stderr),
            )
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled, OSError) as exc:
        raise _hub_error(exc, args.repo, args.revision) from exc
    record = {"schema": SCHEMA, "repo": args.repo, "revision": args.revision, "commit": snapshot.name}
    if _up_to_date(args.dest, record, files):
        print(f"up to date: {args.dest} already holds {args.repo}@{snapshot.name}")
        return 0
    written = _materialise(snapshot, files, args.dest, record)
    total = sum(entry["size"] for entry in written["files"].values())
    print(f"downloaded {args.repo}@{snapshot.name} -> {args.dest} ({len(files)} files, {total} bytes)")
    return 0
