"""Write ``tests/tritonft/engines/fastertransformer/ft_gemm_args.json``: the argument lists of FasterTransformer's GEMM
tuners, read from FT's source.

Usage (with a FasterTransformer git directory, e.g. the one the ``fetch`` tool brings)::

    python scripts/extract_ft_gemm_args.py /path/to/FasterTransformer.git [commit] \\
        > tests/tritonft/engines/fastertransformer/ft_gemm_args.json

``commit`` defaults to ``FT_COMMIT`` (``tritonft/engines/fastertransformer/versions.py``: the commit the server
image builds). Every file is read with ``git show <commit>:<path>`` so the fixture names exactly one version of FT,
and every fact carries its ``path:line`` so a reviewer can check it against the source. The tests compare the
command lines the stack renders with these lists; the fixture is committed, FT's source is not.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tritonft.engines.fastertransformer.versions import FT_COMMIT

PROGRAMS = {
    "t5_gemm": "src/fastertransformer/models/t5/t5_gemm.cc",
    "gpt_gemm": "src/fastertransformer/models/multi_gpu_gpt/gpt_gemm.cc",
}
CMAKE = {
    "t5_gemm": "src/fastertransformer/models/t5/CMakeLists.txt",
    "gpt_gemm": "src/fastertransformer/models/multi_gpu_gpt/CMakeLists.txt",
}
WRITERS = {
    "t5_gemm": "src/fastertransformer/utils/gemm_test/t5_gemm_func.cc",
    "gpt_gemm": "src/fastertransformer/utils/gemm_test/gpt_gemm_func.cc",
}
ALGO_MAP_H = "src/fastertransformer/utils/cublasAlgoMap.h"
ALGO_MAP_CC = "src/fastertransformer/utils/cublasAlgoMap.cc"
CUDA_UTILS_H = "src/fastertransformer/utils/cuda_utils.h"
GUIDES = {
    "t5": ("docs/t5_guide.md", "./bin/t5_gemm "),
    "gpt2": ("docs/gpt_guide.md", "./bin/gpt_gemm "),
    "gptj": ("docs/gptj_guide.md", "./bin/gpt_gemm "),
}
"""FT's guide for each family and the tuner invocation it documents (GPT-J is tuned with ``gpt_gemm``)."""
TRITON_MODELS = {
    "t5": "src/fastertransformer/triton_backend/t5/T5TritonModel.cc",
    "gpt2": "src/fastertransformer/triton_backend/multi_gpu_gpt/ParallelGptTritonModel.cc",
    "gptj": "src/fastertransformer/triton_backend/gptj/GptJTritonModel.cc",
}

# `const int batch_size = atoi(argv[1]);` and `const int tp = argc < 15 ? 1 : atoi(argv[14]);`
_ARG = re.compile(
    r"const\s+[\w:]+\s+(?P<name>\w+)\s*=\s*"
    r"(?:static_cast<[\w:]+>\()?(?:\(bool\)\()?(?:argc\s*<\s*(?P<argc>\d+)\s*\?\s*(?P<default>\w+)\s*:\s*)?"
    r"(?:\(bool\)\()?atoi\(argv\[(?P<index>\d+)\]\)"
)
_ARGC = re.compile(r"if \(argc < (?P<min>\d+) \|\| argc > (?P<max>\d+)\)")
_ENUM_MEMBER = re.compile(r"^\s*(?P<name>\w+_DATATYPE)\s*=\s*(?P<value>\d+)")
_DEFINE = re.compile(r'#define GEMM_CONFIG "(?P<name>[^"]+)"')


def _show(git_dir: str, commit: str, path: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    return out.splitlines()


def _lines_matching(lines: list[str], needle: str) -> list[int]:
    return [n for n, line in enumerate(lines, 1) if needle in line]


def program(git_dir: str, commit: str, name: str) -> dict[str, Any]:
    """One tuner's ``argv`` layout: index, variable name, optional default, and the line that reads it."""
    path = PROGRAMS[name]
    lines = _show(git_dir, commit, path)
    args: list[dict[str, Any]] = []
    argc: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        if (m := _ARGC.search(line)) and not argc:
            argc = {"min": int(m["min"]), "max": int(m["max"]), "line": n}
        if m := _ARG.search(line):
            entry: dict[str, Any] = {"index": int(m["index"]), "name": m["name"], "at": f"{path}:{n}"}
            if m["default"] is not None:
                entry["default"] = int(m["default"]) if m["default"].isdigit() else m["default"]
            args.append(entry)
    if not argc or not args:
        raise SystemExit(f"{path}@{commit}: no argc check or no argv reads found; the parser needs updating")
    indexes = [a["index"] for a in args]
    if indexes != list(range(1, len(args) + 1)):
        raise SystemExit(f"{path}@{commit}: argv indexes {indexes} are not 1..{len(args)}")
    example = next(line for line in lines if "e.g. ./bin/" in line)
    cmake = CMAKE[name]
    (target_line,) = _lines_matching(_show(git_dir, commit, cmake), f"add_executable({name} ")
    return {
        "source": path,
        "argc": {"min": argc["min"], "max": argc["max"], "at": f"{path}:{argc['line']}"},
        "args": args,
        "usage_example": example.split('"')[1],
        "cmake_target": f"{cmake}:{target_line}",
        "writes_config": [
            f"{WRITERS[name]}:{n}" for n in _lines_matching(_show(git_dir, commit, WRITERS[name]), "fopen(GEMM_CONFIG")
        ],
    }


def data_types(git_dir: str, commit: str) -> dict[str, Any]:
    """``CublasDataType``: the integer each tuner's ``data_type`` argument takes."""
    lines = _show(git_dir, commit, CUDA_UTILS_H)
    (start,) = _lines_matching(lines, "enum CublasDataType")
    values: dict[str, int] = {}
    for line in lines[start:]:
        if "}" in line:
            break
        if m := _ENUM_MEMBER.match(line):
            values[m["name"]] = int(m["value"])
    return {"at": f"{CUDA_UTILS_H}:{start}", "values": values}


def config_file(git_dir: str, commit: str) -> dict[str, Any]:
    """The file name, where FT defines it, where the Triton models open it (a relative path: the working dir)."""
    header = _show(git_dir, commit, ALGO_MAP_H)
    ((n, name),) = [(n, m["name"]) for n, line in enumerate(header, 1) if (m := _DEFINE.search(line))]
    loader = _show(git_dir, commit, ALGO_MAP_CC)
    read_at = {
        family: f"{path}:{line}"
        for family, path in TRITON_MODELS.items()
        for line in _lines_matching(_show(git_dir, commit, path), f'cublasAlgoMap("{name}")')
    }
    return {
        "name": name,
        "defined_at": f"{ALGO_MAP_H}:{n}",
        "opened_at": f"{ALGO_MAP_CC}:{_lines_matching(loader, 'fopen(config_filename_')[0]}",
        "missing_warning_at": f"{ALGO_MAP_CC}:{_lines_matching(loader, 'is not found; using default GEMM algo')[0]}",
        "empty_file_exits_at": f"{ALGO_MAP_CC}:{_lines_matching(loader, 'fgets fail')[0]}",
        "read_by_triton_models_at": read_at,
    }


def families(git_dir: str, commit: str) -> dict[str, Any]:
    """Which tuner FT's own guide runs for each family, with the guide's line."""
    out: dict[str, Any] = {}
    for family, (path, needle) in GUIDES.items():
        first = _lines_matching(_show(git_dir, commit, path), needle)[0]
        out[family] = {"program": needle.split("/")[-1].strip(), "documented_at": f"{path}:{first}"}
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    git_dir = argv[1]
    commit = argv[2] if len(argv) == 3 else FT_COMMIT
    fixture = {
        "repository": "NVIDIA/FasterTransformer",
        "commit": commit,
        "generated_by": "scripts/extract_ft_gemm_args.py",
        "data_types": data_types(git_dir, commit),
        "config_file": config_file(git_dir, commit),
        "families": families(git_dir, commit),
        "programs": {name: program(git_dir, commit, name) for name in PROGRAMS},
    }
    print(json.dumps(fixture, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
