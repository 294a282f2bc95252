import subprocess
import sys


def wb(*args):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True)


def test_info_of_a_preset_prints_counts_breakdown_and_flops():
    out = wb("info", "fox_pro", "--context", "4096")
    assert out.returncode == 0, out.stderr
    assert "without input embedding 123,910,800" in out.stdout
    assert "attention.forget_gate" in out.stdout and "FLOPs/token" in out.stdout


def test_info_of_a_bad_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("attention: {qk_norm: bogus}\n")
    out = wb("info", str(bad))
    assert out.returncode == 2
    assert "attention.qk_norm: unknown kind 'bogus'; registered kinds: none, rmsnorm" in out.stderr
    missing = wb("info", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_info_names_the_slots_and_the_pruning_tolerance(tmp_path):
    spec = tmp_path / "m.yaml"
    spec.write_text("preset: fox_pro\nattention: {log_pruning_tolerance: -10}\n")
    out = wb("info", str(spec))
    assert out.returncode == 0, out.stderr
    assert "forget_gate=data_dependent" in out.stdout and "pruning ln eps -10" in out.stdout
