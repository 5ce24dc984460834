"""benchmarks/gpu_prelude.sh, sourced from a ``set -eu -o pipefail`` shell as a device run does, with small
fake wheels: it must install them, fall back to .whl/alt's datasets, report as lines and never end that shell.
The real wheels (cp312) install only on the GPU machine."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = ROOT / "benchmarks" / "gpu_prelude.sh"


def make_wheel(folder: Path, name: str, version: str, init: str) -> Path:
    """A minimal pure-Python wheel holding the package ``name`` with ``init`` as its ``__init__.py``."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": init,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def source(tmp_path: Path, wheels: Path, times: int = 1, how: str = 'source "$PRELUDE"',
           options: str = "set -eu -o pipefail") -> subprocess.CompletedProcess:
    """Runs ``how`` (by default: sources the prelude) ``times`` times in one shell (strict by default); after
    each, a line ``after: STATUS PYTHONPATH PWD``, STATUS being GPU_PRELUDE as a child process sees it."""
    step = f'{how}\necho "after: $(printenv GPU_PRELUDE) ${{PYTHONPATH:-unset}} $PWD"\n'
    env = {**os.environ, "PRELUDE": str(PRELUDE), "WHEELS": str(wheels), "GPU_SITE": str(tmp_path / "site")}
    env.pop("PYTHONPATH", None)
    env.pop("GPU_PRELUDE", None)
    return subprocess.run(["bash", "-c", f"{options}\n" + step * times], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_prelude_parses():
    assert subprocess.run(["bash", "-n", str(PRELUDE)], timeout=60).returncode == 0


def test_without_wheels_it_says_so_and_returns(tmp_path):
    result = source(tmp_path, tmp_path / "no-wheels-here")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"gpu_prelude: no wheels in {tmp_path / 'no-wheels-here'}; nothing installed")
    assert lines[1] == f"after: no-wheels unset {tmp_path}"
    assert not (tmp_path / "site").exists()


def test_it_installs_falls_back_to_alt_datasets_and_prints_the_versions(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "datasets", "5.2.0", "raise ImportError('this datasets needs pyarrow>=24')\n")
    make_wheel(wheels / "alt", "datasets", "4.4.2", "__version__ = '4.4.2'\n")
    site = tmp_path / "site"
    result = source(tmp_path, wheels, times=2)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "gpu_prelude: datasets does not import (ImportError: this datasets needs pyarrow>=24); installing "
        "datasets-4.4.2-py3-none-any.whl instead"
    )
    versions = lines[1]
    assert versions.startswith("gpu_prelude: python 3.") and ", datasets 4.4.2," in versions
    assert ", torch " in versions and ", mamba_ssm " in versions
    # ok only where everything imports (the GPU machine); here triton, fla and mamba_ssm are missing
    status = "failed" if "FAILED" in versions or "NOT loaded" in versions else "ok"
    assert lines[2] == f"after: {status} {site} {tmp_path}"  # PYTHONPATH set, the caller's folder unchanged
    # the second source: nothing reinstalled, PYTHONPATH not extended twice
    assert lines[3] == f"gpu_prelude: {site} already holds these wheels"
    assert lines[4] == versions
    assert lines[5] == lines[2]
    assert (site / "datasets" / "__init__.py").read_text() == "__version__ = '4.4.2'\n"


def test_a_failed_install_is_a_line_not_an_exit(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "broken-1.0-py3-none-any.whl").write_text("not a zip archive")
    result = source(tmp_path, wheels)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"gpu_prelude: pip install into {tmp_path / 'site'} failed: ")
    assert lines[0].endswith(f"log {tmp_path / 'site'}.pip.log")
    assert lines[1] == f"after: failed unset {tmp_path}"
    # without `set -e` the status says it too
    result = source(tmp_path, wheels, how='source "$PRELUDE"; echo "status $?"; true', options="set -u")
    assert result.stdout.splitlines()[1] == "status 1"
    # run instead of sourced, it says that the caller's PYTHONPATH cannot be set that way
    result = source(tmp_path, wheels, how='bash "$PRELUDE"')
    assert "gpu_prelude: run, not sourced: " in result.stdout
