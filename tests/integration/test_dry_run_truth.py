"""`setup --dry-run` tells the truth: it stops where the real run would, with the same exit code, and it says
"would download" only when the servers did not say the file is missing (issue 28, section 3)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of
from tests.support.fetching import PATH_SET, URL_PATH, fetch
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball


def dry_run(tmp_path: Path, url: str, *args: str) -> Result:
    argv = ["-w", str(tmp_path / "ws"), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET]
    return CliRunner().invoke(app, [*argv, "setup", "--dry-run", "--ignore-host", "--skip-build", *args])


def llvm_item(result: Result) -> dict:
    [item] = [i for i in result_of(result.stdout)["items"] if i["area"] == "artifacts"]
    return item


def stop_message(result: Result) -> str:
    error = error_of(result.stdout)
    return " ".join([error["message"], *error["details"]])


def test_a_dry_run_stops_with_exit_4_when_the_server_says_the_download_is_not_there(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    url = http_server.url(URL_PATH)  # nothing served there: HEAD and the Range request get 404
    result = dry_run(tmp_path, url, "--json")
    assert result.exit_code == 4, result.stdout
    assert error_of(result.stdout)["code"] == "artifact"
    message = stop_message(result)
    assert "setup would stop at artifacts" in message and "HTTP 404" in message and url in message
    real = fetch(tmp_path, url)  # the real run stops there too, with the same code
    assert real.exit_code == 4, real.stderr


def test_a_dry_run_stops_when_every_mirror_and_the_original_say_gone(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve(URL_PATH, b"", Faults(status=410))
    mirror = http_server.url("/mirror")
    result = dry_run(tmp_path, url, "--json", "--mirror", f"{http_server.base_url}/={mirror}/")
    assert result.exit_code == 4, result.stdout
    assert "HTTP 410" in stop_message(result) and "HTTP 404" in stop_message(result)


def test_a_dry_run_would_download_when_only_a_mirror_lacks_the_file(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    tarball = llvm_tarball()
    url = http_server.serve(URL_PATH, tarball.data)
    mirror = http_server.url("/mirror")  # serves nothing: 404, and the download goes on to the original
    result = dry_run(tmp_path, url, "--json", "--mirror", f"{http_server.base_url}/={mirror}/")
    assert result.exit_code == 0, result.stdout
    assert llvm_item(result)["action"] == f"download llvm {len(tarball.data) / 1000:.0f} KB"


def test_a_dry_run_whose_probe_could_not_decide_still_would_download_and_says_why(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve(URL_PATH, b"", Faults(status=503))  # a server error is retried by the real run
    result = dry_run(tmp_path, url, "--json")
    assert result.exit_code == 0, result.stdout
    item = llvm_item(result)
    assert item["will"] == "created" and item["action"] == "download llvm (size unknown)"
    assert "HTTP 503" in item["reason"]


def test_a_dry_run_where_head_is_not_allowed_asks_with_a_range_request(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    tarball = llvm_tarball()
    url = http_server.serve(URL_PATH, tarball.data, Faults(head_status=405))
    result = dry_run(tmp_path, url, "--json")
    assert result.exit_code == 0, result.stdout
    assert llvm_item(result)["action"] == f"download llvm {len(tarball.data) / 1000:.0f} KB"


def test_a_dry_run_whose_server_refuses_connections_still_would_download(tmp_path: Path, refused_port: int) -> None:
    result = dry_run(tmp_path, f"http://127.0.0.1:{refused_port}{URL_PATH}", "--json")
    assert result.exit_code == 0, result.stdout
    item = llvm_item(result)
    assert item["will"] == "created" and "ConnectionError" in item["reason"]
