"""--path.sysfs, --path.procfs and --path.rootfs (and config.toml's [path]) as a user
gives them: a directory that is not there is one line and exit 2; a good one is used.
config.toml's [energy] idle_w is checked the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.cli import main


@pytest.mark.parametrize("command", [["snapshot"], ["watch", "--count", "1"]])
@pytest.mark.parametrize("flag", ["--path.sysfs", "--path.procfs", "--path.rootfs"])
def test_a_missing_directory_is_one_line_exit_2(
        command: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUI_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    missing = tmp_path / "nope"
    assert main([*command, flag, str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"gputui: {flag} {missing}: no such directory\n"


def test_config_path_table_is_used_and_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[path]\nsysfs = "{tmp_path / "gone"}"\n')
    monkeypatch.setenv("GPUTUI_CONFIG", str(cfg))
    assert main(["snapshot", "--json"]) == 2
    gone = tmp_path / "gone"
    assert capsys.readouterr().err == f"gputui: --path.sysfs {gone}: no such directory\n"
    # The flag wins over the file.
    (tmp_path / "sys").mkdir()
    assert main(["snapshot", "--json", "--path.sysfs", str(tmp_path / "sys")]) == 0
    # A directory that is no procfs is said so, not read half-way.
    assert main(["snapshot", "--json", "--path.sysfs", str(tmp_path / "sys"),
                 "--path.procfs", str(tmp_path / "sys")]) == 2
    assert capsys.readouterr().err.endswith(
        f"--path.procfs {tmp_path / 'sys'}: not a procfs mount (no {tmp_path / 'sys/stat'})\n")
    cfg.write_text('[path]\nsysfs = 3\n')
    assert main(["snapshot", "--json"]) == 2
    assert "line 2: sysfs: must be a directory's path in quotes" in capsys.readouterr().err
    cfg.write_text('[path]\nsys = "/sys"\n')
    assert main(["snapshot", "--json"]) == 2
    assert "sys: unknown setting (known: sysfs, procfs, rootfs)" in capsys.readouterr().err
    cfg.write_text(f'[path]\nrootfs = "{tmp_path / "gone"}"\n')
    assert main(["snapshot", "--json"]) == 2
    assert capsys.readouterr().err == f"gputui: --path.rootfs {gone}: no such directory\n"


@pytest.mark.parametrize(("value", "problem"), [
    ("-5", "must be watts from 0 to 10000"), ("nan", "must be watts from 0 to 10000"),
    ('"60"', "must be watts from 0 to 10000"), ("true", "must be watts from 0 to 10000")])
def test_config_idle_power_is_checked(value: str, problem: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"[energy]\nidle_w = {value}\n")
    monkeypatch.setenv("GPUTUI_CONFIG", str(cfg))
    assert main(["snapshot", "--json"]) == 2
    assert f"line 2: idle_w: {problem}" in capsys.readouterr().err


def test_config_idle_power_and_rootfs_reach_the_sampler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.commands import snapshot
    from gputui.telemetry.model import Snapshot

    seen: list[tuple[object, object]] = []

    def take(paths: object, idle_w: object) -> Snapshot:
        seen.append((paths, idle_w))
        raise SystemExit(0)

    (tmp_path / "root").mkdir()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[energy]\nidle_w = 61.5\n[path]\nrootfs = "{tmp_path / "root"}"\n')
    monkeypatch.setenv("GPUTUI_CONFIG", str(cfg))
    monkeypatch.setattr(snapshot, "take_snapshot", take)
    with pytest.raises(SystemExit):
        main(["snapshot", "--json"])
    ((paths, idle_w),) = seen
    assert idle_w == 61.5 and paths.rootfs == tmp_path / "root"  # type: ignore[attr-defined]
