"""benchmarks/tune.py's command line and table format, without a GPU (the search itself runs on one)."""
import pytest

import tune


def test_shapes_option_names_the_field_and_the_format(capsys):
    assert tune.common.parse_shape("8,12,4096,64") == (8, 12, 4096, 64)
    for bad in ("8,12", "8,12,4096,x", "8,0,4096,64"):
        with pytest.raises(SystemExit):
            tune.main(["--shapes", bad, "--quick"])
        assert f"--shapes: '{bad}' is not B,H,N,D" in capsys.readouterr().err


def test_tables_with_and_without_the_forward_run_ahead_flag_install():
    old = tune._config({"fwd": [128, 64, 4, 3], "dkdv": [128, 64, 4, 2], "dq": [64, 64, 4, 2]})
    new = tune._config({"fwd": [64, 64, 4, 3, True], "dkdv": [128, 64, 4, 2], "dq": [64, 64, 4, 2]})
    assert not old.fwd_ahead and new.fwd_ahead
    assert (new.fwd.block_m, new.fwd.num_stages) == (64, 3)
