"""``images/nccl-tests/nccl_report.py`` (the MPI benchmark's launcher command) on output in nccl-tests' format,
built here from the format its docstring describes (a ``#`` header naming the columns, the out-of-place block
then the in-place block, ``mpirun --tag-output`` prefixes, plain and exponent numbers, ``N/A``, the average bus
bandwidth line); and ``allreduce_bench.py``'s pieces that make it an ``all_reduce_perf`` stand-in under
``mpirun`` (its result table, read back by the same parser, and the rank layout from OpenMPI's variables).
The real ``mpirun`` run is in ``test_jobs_real.py``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

import tests.training_support  # noqa: F401  (puts training/ on sys.path)

# isort: split


REPO = Path(__file__).resolve().parents[2]
NCCL_REPORT = REPO / "images" / "nccl-tests" / "nccl_report.py"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


report = _load(NCCL_REPORT, "nccl_report")
import allreduce_bench as bench  # noqa: E402  (training/ is on sys.path through tests.training_support)

HEADER = [
    "# a benchmark's preamble: version, ranks and devices",
    "#                  out-of-place                    in-place",
    "#   size   count   type  redop  root   time  algbw  busbw  #wrong    time  algbw  busbw  #wrong",
    "#    (B) (elements)                    (us) (GB/s) (GB/s)            (us) (GB/s) (GB/s)",
]
ROWS = [
    "      64      16  float    sum    -1  12.50   0.01   0.01       0   12.00   0.01   0.01       0",
    "    1024     256  float    sum    -1  20.00   0.05   0.09       0   19.50   0.05   0.10       0",
    " 1048576  262144  float    sum    -1  2.5e+02  4.19  7.86      0  2.4e+02  4.37  8.19       0",
]
AVG = "# Avg bus bandwidth    : 2.71"


def table(rows: list[str] = ROWS, tag: str = "") -> list[str]:
    """A result table (each line prefixed with ``tag``, as ``mpirun --tag-output`` does)."""
    return [f"{tag}{line}\n" for line in [*HEADER, *rows, AVG, "# Out of bounds values : 0 OK"]]


def test_parse_reads_both_blocks_by_column_name() -> None:
    parsed = report.parse(table())
    assert parsed["avg_busbw_gbps"] == 2.71
    sizes = [r["size"] for r in parsed["rows"]]
    assert sizes == [64, 1024, 1048576]
    big = parsed["rows"][-1]
    assert big["count"] == 262144 and big["type"] == "float" and big["redop"] == "sum" and big["root"] == -1
    assert big["out_of_place_time"] == 250.0 and big["out_of_place_algbw"] == 4.19 and big["out_of_place_busbw"] == 7.86
    assert big["in_place_time"] == 240.0 and big["in_place_busbw"] == 8.19
    assert big["out_of_place_wrong"] == 0 and big["in_place_wrong"] == 0


def test_parse_strips_mpirun_tags_and_skips_what_is_not_a_row() -> None:
    noise = ["a line from rank 1 before the table\n", "1024 not a row\n"]
    tagged = noise + table(tag="[1,0]<stdout>:") + ["[1,1]<stderr>:some warning\n"]
    assert report.parse(tagged) == report.parse(table())
    assert report.parse(ROWS) == {"rows": [], "avg_busbw_gbps": None}, "rows before any header are not results"


def test_summary_verdicts_and_exit_codes() -> None:
    parsed = report.parse(table())
    ok = report.summarize(parsed, 8.0, 0)
    assert ok["exit_code"] == 0 and ok["busbw_gbps_at_max_size"] == 8.19 and ok["max_size_bytes"] == 1048576
    below = report.summarize(parsed, 9.0, 0)
    assert below["exit_code"] == report.EXIT_BELOW == 3 and "below 9.0" in below["reason"]
    wrong_row = ROWS[-1].replace("7.86      0", "7.86      5")
    wrong = report.summarize(report.parse(table(ROWS[:-1] + [wrong_row])), None, 0)
    assert wrong["exit_code"] == report.EXIT_WRONG == 4 and wrong["reason"].startswith("5 wrong")
    assert report.summarize(report.parse(HEADER), None, 0)["exit_code"] == report.EXIT_NO_RESULTS == 5
    failed = report.summarize(parsed, None, 137)
    assert failed["exit_code"] == 137 and failed["reason"] == "the benchmark exited 137"
    na_row = ROWS[-1].replace("2.5e+02  4.19  7.86      0", "N/A  N/A  N/A  N/A")
    only_in_place = report.summarize(report.parse(table(ROWS[:-1] + [na_row])), None, 0)
    assert only_in_place["busbw_gbps_at_max_size"] == 8.19 and only_in_place["exit_code"] == 0


def test_main_runs_the_command_passes_its_output_through_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in command that prints a table (the real all-reduce under mpirun is in test_jobs_real.py)."""
    printer = tmp_path / "printer.py"
    printer.write_text(f"import sys\nsys.stdout.write({''.join(table())!r})\nsys.exit(int(sys.argv[1]))\n")
    out = tmp_path / "r" / "nccl-tests.json"
    code = report.main(["--output-json", str(out), "--min-busbw-gbps", "8", "--", sys.executable, str(printer), "0"])
    assert code == 0
    stdout = capsys.readouterr().out
    assert ROWS[-1] in stdout, "the benchmark's output is passed through"
    written = json.loads(out.read_text())
    assert written["exit_code"] == 0 and len(written["results"]) == 3
    assert json.loads(stdout.strip().splitlines()[-1]) == {k: v for k, v in written.items() if k != "results"}
    assert report.main(["--", sys.executable, str(printer), "3"]) == 3, "the command's own failure wins"
    assert report.main(["--output-json", str(out)]) == report.EXIT_USAGE
    assert report.main(["--"]) == report.EXIT_USAGE


def test_allreduce_bench_table_reads_back_through_the_parser() -> None:
    results = [
        bench.SizeResult(1 << 20, 1 << 18, 2000.0, 1900.0, 0.5243, 0.5243, 0),
        bench.SizeResult(1 << 21, 1 << 19, 3500.0, 3400.0, 0.5992, 0.5992, 0),
    ]
    parsed = report.parse(line + "\n" for line in bench.nccl_tests_table(results, 2))
    assert [r["size"] for r in parsed["rows"]] == [1 << 20, 1 << 21]
    for row, result in zip(parsed["rows"], results):
        assert row["count"] == result.count and row["type"] == "float" and row["redop"] == "sum"
        assert row["in_place_time"] == pytest.approx(result.time_us, abs=0.05)
        assert row["in_place_algbw"] == pytest.approx(result.algbw_gbps, abs=1e-4)
        assert row["in_place_busbw"] == pytest.approx(result.busbw_gbps, abs=1e-4)
        assert row["in_place_wrong"] == 0
        assert row["out_of_place_time"] is None and row["out_of_place_busbw"] is None, "not measured: N/A"
    assert parsed["avg_busbw_gbps"] == pytest.approx((0.5243 + 0.5992) / 2, abs=1e-4)
    summary = report.summarize(parsed, None, 0)
    assert summary["exit_code"] == 0 and summary["busbw_gbps_at_max_size"] == pytest.approx(0.5992)


def test_rank_layout_from_torchrun_mpirun_or_nothing() -> None:
    torchrun = bench.process_layout(
        {"WORLD_SIZE": "16", "RANK": "9", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8", "GROUP_WORLD_SIZE": "2"}
    )
    assert torchrun == bench.ProcessLayout("torchrun", 9, 16, 1, 8, 2)
    ompi = {
        "OMPI_COMM_WORLD_SIZE": "16",
        "OMPI_COMM_WORLD_RANK": "11",
        "OMPI_COMM_WORLD_LOCAL_RANK": "3",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
        "MASTER_ADDR": "bench-worker-0.bench.training.svc",
        "MASTER_PORT": "29500",
    }
    assert bench.process_layout(ompi) == bench.ProcessLayout("mpirun", 11, 16, 3, 8, 2)
    with pytest.raises(ValueError, match="without MASTER_ADDR and MASTER_PORT"):
        bench.process_layout({k: v for k, v in ompi.items() if not k.startswith("MASTER")})
    assert bench.process_layout({}) == bench.ProcessLayout("single", 0, 1, 0, 1, 1)


def test_metrics_json_has_the_projects_fields(tmp_path: Path) -> None:
    """``--metrics-json`` writes the fields of training/metrics.py (the same schema and field list) with the bus
    bandwidth at the largest size, as the benchmark's collector and summary read them."""
    import metrics as shared

    printer = tmp_path / "printer.py"
    printer.write_text(f"import sys\nsys.stdout.write({''.join(table())!r})\n")
    path = tmp_path / "out" / "metrics.json"
    assert report.main(["--metrics-json", str(path), "--", sys.executable, str(printer)]) == 0
    written = json.loads(path.read_text())
    assert report.METRICS_SCHEMA == shared.SCHEMA and report.METRICS_FIELDS == shared.FIELDS
    assert set(shared.FIELDS) <= set(written) and written["schema"] == shared.SCHEMA
    assert (
        written["program"] == "nccl_report.py" and written["busbw_gbps"] == 8.19 and written["avg_busbw_gbps"] == 2.71
    )
    assert written["throughput"] is None and written["wall_time_s"] >= 0


def test_allreduce_bench_writes_its_bus_bandwidth_as_metrics(tmp_path: Path) -> None:
    summary = {
        "busbw_at_max_size_gbps": 12.5,
        "world_size": 16,
        "max_size_bytes": 1 << 30,
        "avg_busbw_gbps": 9.0,
        "backend": "nccl",
        "passed": True,
    }
    path = bench.write_bandwidth_metrics(tmp_path / "m.json", summary, 3.21)
    written = json.loads(path.read_text())
    assert written["busbw_gbps"] == 12.5 and written["world_size"] == 16 and written["wall_time_s"] == 3.21
    assert written["program"] == "allreduce_bench.py" and written["throughput"] is None
    assert bench.parse_args(["--metrics-json", str(tmp_path / "m.json")]).metrics_json == tmp_path / "m.json"
