"""benchmarks/suite_cpu.py: a command's CPU by kind of process, read from /proc while it runs."""
import json
import sys

import suite_cpu

# A second of CPU, then a pause: the CPU a process used after the last reading before it ended is
# not seen (the tool's docstring), and on a loaded machine the readings come further apart.
BURN = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\ntime.sleep(1.0)\n"


def test_the_cpu_of_a_commands_children_is_counted_by_kind(tmp_path, capsys):
    # A shell that starts two Pythons one after the other, each burning a second of CPU.
    script = tmp_path / "burn.py"
    script.write_text(BURN)
    out = tmp_path / "cpu.json"
    rc = suite_cpu.main(["--interval", "0.1", "--out", str(out), "--", "sh", "-c",
                         f"{sys.executable} {script} && {sys.executable} {script} && exit 3"])
    assert rc == 3  # the command's own exit status
    res = json.loads(out.read_text())
    assert res["exit_status"] == 3 and res["command"][:2] == ["sh", "-c"]
    assert 1.6 <= res["cpu_s"]["other python"] <= 2.6, res
    assert res["processes_started"]["other python"] == 2
    assert res["machine_cpu_s"] >= res["cpu_s"]["other python"] - 0.2
    assert "other python" in capsys.readouterr().out


def test_a_missing_command_is_refused_with_the_form_to_use(capsys):
    try:
        suite_cpu.main(["--interval", "1"])
    except SystemExit as e:
        assert e.code == 2
    assert "the command to measure is missing" in capsys.readouterr().err
