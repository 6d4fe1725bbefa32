"""The CPU report: instruction sets read from /proc/cpuinfo on x86 and ARM, the int8 kernel they allow, and where
lodex shows them (status, the startup line)."""

import json

from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.encoders.cpu import cpu_info, parse_cpuinfo

_ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse2 avx fma avx2 bmi2 sha_ni
processor\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse2 avx fma avx2 bmi2 sha_ni
"""
_ICELAKE = "model name : Intel(R) Xeon(R) Platinum 8375C\nflags : avx2 fma avx512f avx512bw avx512_vnni\n"
_SAPPHIRE = "model name : Intel(R) Xeon(R) Platinum 8488C\nflags : avx2 fma avx512f avx512bw avx512_vnni avx_vnni amx_tile amx_int8\n"
_GRAVITON3 = "processor : 0\nBogoMIPS : 2100.00\nFeatures : fp asimd aes crc32 atomics asimddp sve i8mm bf16\nCPU part : 0xd40\n"


def test_instruction_sets_and_the_int8_kernel_they_allow() -> None:
    zen3 = parse_cpuinfo(_ZEN3, logical_cpus=2, machine="x86_64")
    assert zen3.features == ["avx2", "fma"] and zen3.int8_kernel.startswith("AVX2 (no VNNI")
    assert zen3.physical_cores == 1 and zen3.logical_cpus == 2  # two hyperthreads of one core
    assert "flags: avx2 fma" in zen3.line() and "AMD EPYC 7763" in zen3.line()
    assert parse_cpuinfo(_ICELAKE, 8).int8_kernel == "AVX-512 VNNI"
    assert parse_cpuinfo(_SAPPHIRE, 8).int8_kernel == "AMX"
    graviton = parse_cpuinfo(_GRAVITON3, 4, "aarch64")
    assert graviton.features == ["asimddp", "i8mm"] and graviton.int8_kernel == "ARM i8mm"
    assert parse_cpuinfo("", 3).int8_kernel.startswith("none") and parse_cpuinfo("", 3).physical_cores == 3


def test_status_reports_this_cpu(cli_home) -> None:
    runner = CliRunner()
    (cli_home / "docs").mkdir()
    (cli_home / "docs" / "a.txt").write_text("lift and drag of a swept wing")
    indexed = runner.invoke(app, ["index", "docs"])
    assert indexed.exit_code == 0, indexed.output
    assert cpu_info().line() in indexed.output  # the startup line names the CPU and its flags
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert status["cpu"] == cpu_info().to_dict() and status["cpu"]["int8_kernel"]
    assert "int8" in runner.invoke(app, ["status"]).stdout
