"""HTTPS on the REST ports, configured as in TorchServe: `https://` addresses with
`private_key_file` + `certificate_file` (PEM, PKCS#8 or traditional RSA) or a `keystore`.
The certificate is self-signed and made here; every client verifies against it."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
import requests

import harness

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")]

HANDLERS = Path(__file__).resolve().parent / "handlers"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    files = {name: d / name for name in ("key.pem", "cert.pem", "rsa-key.pem", "store.p12")}
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(files["key.pem"]), "-out", str(files["cert.pem"]))
    openssl("rsa", "-in", str(files["key.pem"]), "-traditional", "-out", str(files["rsa-key.pem"]))
    openssl("pkcs12", "-export", "-in", str(files["cert.pem"]), "-inkey", str(files["key.pem"]), "-name", "tserve",
            "-passout", "pass:s3cret", "-out", str(files["store.p12"]))
    assert "BEGIN RSA PRIVATE KEY" in files["rsa-key.pem"].read_text()
    return files


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    return store


def https_config(**extra: object) -> dict[str, object]:
    return {key: f"https://127.0.0.1:{harness.free_port()}" for key in ("inference_address", "management_address", "metrics_address")
            } | extra


def url(server: harness.Server, key: str) -> str:
    return str(server.config[key])


def exercise(server: harness.Server, cert: Path) -> None:
    inference, management, metrics = (url(server, k) for k in ("inference_address", "management_address", "metrics_address"))
    assert requests.get(f"{inference}/ping", verify=str(cert), timeout=30).json() == {"status": "Healthy"}
    r = requests.post(f"{management}/models", params={"url": "echo.mar", "initial_workers": 1, "synchronous": "true"},
                      verify=str(cert), timeout=120)
    assert r.status_code == 200, r.text
    r = requests.post(f"{inference}/predictions/echo", data=b"over tls", verify=str(cert), timeout=60)
    assert r.status_code == 200 and r.json()["text"] == "over tls"
    assert requests.get(f"{management}/models", verify=str(cert), timeout=30).json()["models"][0]["modelName"] == "echo"
    assert requests.get(f"{metrics}/metrics", verify=str(cert), timeout=30).status_code == 200


def test_pem_key_and_certificate(pki: dict[str, Path], store: Path) -> None:
    config = https_config(private_key_file=pki["key.pem"], certificate_file=pki["cert.pem"])
    with harness.Server(store, config=config) as server:
        exercise(server, pki["cert.pem"])
        # plain HTTP on the https port gets no answer; an unverified client is refused by its own check
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(url(server, "inference_address").replace("https", "http") + "/ping", timeout=10)
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(url(server, "inference_address") + "/ping", timeout=10)
        assert "https://127.0.0.1:" in server.logs() + server.output()


def test_traditional_rsa_key(pki: dict[str, Path], store: Path) -> None:
    config = https_config(private_key_file=pki["rsa-key.pem"], certificate_file=pki["cert.pem"])
    with harness.Server(store, config=config) as server:
        exercise(server, pki["cert.pem"])


def test_keystore(pki: dict[str, Path], store: Path) -> None:
    config = https_config(keystore=pki["store.p12"], keystore_pass="s3cret", keystore_type="PKCS12")
    with harness.Server(store, config=config) as server:
        exercise(server, pki["cert.pem"])
        ctx = ssl.create_default_context(cafile=str(pki["cert.pem"]))
        host, port = url(server, "inference_address").removeprefix("https://").split(":")
        import socket

        with socket.create_connection((host, int(port)), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_mixed_http_and_https(pki: dict[str, Path], store: Path) -> None:
    config = {"inference_address": f"https://127.0.0.1:{harness.free_port()}",
              "private_key_file": pki["key.pem"], "certificate_file": pki["cert.pem"]}
    with harness.Server(store, config=config) as server:
        assert requests.get(f"{config['inference_address']}/ping", verify=str(pki["cert.pem"]), timeout=30).status_code == 200
        assert requests.get(f"{server.management_url}/models", timeout=30).status_code == 200


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"certificate_file": "CERT"}, "private_key_file"),
        ({"private_key_file": "/nonexistent/key.pem", "certificate_file": "CERT"}, "/nonexistent/key.pem"),
        ({"keystore": "STORE", "keystore_pass": "wrong"}, "keystore"),
    ],
)
def test_misconfiguration_fails_clearly(pki: dict[str, Path], store: Path, extra: dict[str, str], message: str) -> None:
    extra = {k: str(pki["cert.pem"]) if v == "CERT" else str(pki["store.p12"]) if v == "STORE" else v for k, v in extra.items()}
    server = harness.Server(store, config=https_config(**extra), start_timeout=60)
    with pytest.raises(RuntimeError) as failed:
        server.start()
    assert message in str(failed.value)


def test_without_certificate_a_self_signed_one_is_made(store: Path, tmp_path: Path) -> None:
    """TorchServe's fallback: no key, certificate or keystore configured."""
    config = {"inference_address": f"https://127.0.0.1:{harness.free_port()}"}
    with harness.Server(store, config=config) as server:
        host, port = config["inference_address"].removeprefix("https://").split(":")
        pem = ssl.get_server_certificate((host, int(port)), timeout=10)
        (tmp_path / "served.pem").write_text(pem)
        assert requests.get(f"{config['inference_address']}/ping", verify=str(tmp_path / "served.pem"), timeout=30).ok
        assert "self-signed certificate" in server.output()
