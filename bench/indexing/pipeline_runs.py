"""How bench/indexing/pipelines.py runs a pipeline: one child process, its wall time (start included) and the peak resident
memory of its process tree; and the peers' own venv (bench/.peers-venv), made on first use from pinned versions."""

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.proc_tree import process_tree  # noqa: E402 - the same tree as the tests' memory checks

ROOT = Path(__file__).resolve().parents[2]
PEERS_VENV = ROOT / "bench" / ".peers-venv"
PEERS_REQUIREMENTS = ROOT / "bench" / "peers" / "pipelines-peers.txt"
TORCH = "torch==2.13.0"  # installed first and alone: the CPU wheel (an unpinned torch pulls the CUDA one, GBs)


@dataclass(frozen=True)
class Measured:
    """One child's run: wall seconds from before its start to its end, the peak of its process tree's resident memory
    (MiB: each process's own peak, VmHWM, added up over the processes of the tree), its exit code and output."""

    wall_s: float
    peak_mib: float
    returncode: int
    stdout: str
    stderr: str


def _hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), None)
    except (OSError, ValueError):
        return None


def measure(cmd: list[str], env: dict[str, str], cwd: Path, name: str = "index", timeout_s: float = 7200) -> Measured:
    """Run `cmd` in `cwd` to its end (its output kept there in .NAME.stdout and .NAME.stderr); sample its tree's VmHWM
    every 50 ms (a process's peak stays readable until it is reaped: the last sample of each is its peak, short-lived
    helpers between two samples aside; shared libraries count once per process, so the sum is an upper bound)."""
    out_path, err_path = cwd / f".{name}.stdout", cwd / f".{name}.stderr"
    with out_path.open("w") as out, err_path.open("w") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        peaks: dict[int, int] = {}
        deadline = started + timeout_s
        while True:
            for pid in process_tree(proc.pid):
                if (hwm := _hwm_kib(pid)) is not None:
                    peaks[pid] = max(peaks.get(pid, 0), hwm)
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                if time.perf_counter() > deadline:
                    proc.kill()
                    proc.wait()
                    break
        wall = time.perf_counter() - started
    return Measured(wall, sum(peaks.values()) / 1024, proc.returncode, out_path.read_text(), err_path.read_text())


def peers_python() -> Path:
    """The peers' venv's python, the venv made first when missing (python -m venv, the CPU torch, then
    bench/peers/pipelines-peers.txt), refusing a CUDA build of torch."""
    python = PEERS_VENV / "bin" / "python"
    marker = PEERS_VENV / ".installed"
    if marker.exists() and marker.read_text() == PEERS_REQUIREMENTS.read_text():
        return python
    print(f"making the peers' venv {PEERS_VENV} (once; a few minutes)", file=sys.stderr)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, "-r", str(PEERS_REQUIREMENTS)], check=True)
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True).stdout
    cuda = [line for line in listed.splitlines() if line.lower().startswith(("nvidia-", "triton"))]
    if cuda:
        raise SystemExit(f"the peers' venv pulled CUDA packages ({', '.join(cuda)}): remove {PEERS_VENV}, install the CPU {TORCH} first")
    marker.write_text(PEERS_REQUIREMENTS.read_text())
    return python
