"""``serve-mcp --http`` guarded: bearer tokens (none, wrong, right, generated), the OAuth
resource-server side (a TokenVerifier, protected-resource metadata), refusing a network
bind without authentication, Host/Origin checks, TLS with a self-signed certificate, and a
clean exit on SIGINT/SIGTERM. Real server processes on loopback, real HTTP clients."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import signal
import ssl
import subprocess
from importlib import metadata
from pathlib import Path

import httpx2
import pytest
from serve_support import (
    INIT,
    JSON_HEADERS,
    NOTES,
    TOKEN,
    client,
    http_serve,
    run,
    serve_mcp,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HERE = Path(__file__).parent
AUTH = {"CM_TEST_TOKEN": TOKEN}


def post_init(url: str, **headers: str) -> httpx2.Response:
    return httpx2.post(url, json=INIT, headers={**JSON_HEADERS, **headers}, timeout=30)


async def test_bearer_token_none_wrong_and_right(tmp_path: Path) -> None:
    with http_serve(
        tmp_path,
        "--builtin-tools",
        "-w",
        str(tmp_path),
        "--auth-token-env",
        "CM_TEST_TOKEN",
        env=AUTH,
    ) as served:
        missing = post_init(served.url)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer ")
        assert missing.json()["error"] == "invalid_token"
        for wrong in (TOKEN[:-1] + "X", TOKEN[:-1], TOKEN + "X", "x" * len(TOKEN), "y"):
            answer = post_init(served.url, authorization=f"Bearer {wrong}")
            assert answer.status_code == 401, wrong
        assert post_init(served.url, authorization=f"Basic {TOKEN}").status_code == 401
        assert post_init(served.url, authorization=f"Bearer {TOKEN}").status_code == 200
        async with client(served.url) as c:
            assert (await run(c, "return 40 + 2")).structured_content == {"logs": [], "result": 42}
        log = served.log()
        assert "refused POST /mcp from 127.0.0.1: 401 no valid bearer token" in log
        # The secret is never logged.
        assert TOKEN not in log


def test_contradicting_auth_flags_are_usage_errors(tmp_path: Path) -> None:
    for extra, needle in (
        (["--auth-token-generate", "--insecure-no-auth"], "--insecure-no-auth contradicts"),
        (["--auth-token-generate", "--auth-token-env", "X"], "choose one of"),
        (["--auth-resource-url", "https://x.test/mcp"], "go together"),
        (["--tls-cert", "/nonexistent"], "go together"),
    ):
        proc = subprocess.run(
            serve_mcp("-u", NOTES, "--http", "127.0.0.1:0", *extra),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and needle in proc.stderr, (extra, proc.stderr)
        assert proc.stdout == ""
    proc = subprocess.run(
        serve_mcp("-u", NOTES, "--auth-token-generate"), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "applies to --http only" in proc.stderr


async def test_generated_token(tmp_path: Path) -> None:
    with http_serve(tmp_path, "-u", NOTES, "--auth-token-generate") as served:
        log = served.log()
        found = served.wait_for_log(r"bearer token \(shown once[^)]*\): (\S+)")
        token = found.group(1)
        assert len(token) >= 40 and log.count(token) == 1
        assert post_init(served.url).status_code == 401
        async with client(served.url, token) as c:
            note = await run(c, "return await tools['get-note']({'id': 4})")
            assert not note.is_error, text_of(note)
        assert served.log().count(token) == 1


def test_a_network_bind_refuses_to_start_without_authentication(tmp_path: Path) -> None:
    # Refused while parsing the flags: nothing binds.
    for address in ("0.0.0.0:0", "[::]:0", "10.1.2.3:0", "192.168.0.1:0"):
        proc = subprocess.run(
            serve_mcp("-u", NOTES, "--http", address), capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert "reachable from other machines" in proc.stderr
        assert "--auth-token-env" in proc.stderr and "--insecure-no-auth" in proc.stderr
    # With a token but a wildcard bind, the Host names clients use must be given.
    proc = subprocess.run(
        serve_mcp("-u", NOTES, "--http", "0.0.0.0:0", "--auth-token-generate"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--allowed-host" in proc.stderr


async def test_insecure_no_auth_warns_on_every_start(tmp_path: Path) -> None:
    for _ in range(2):
        with http_serve(tmp_path, "-u", NOTES, "--insecure-no-auth") as served:
            served.wait_for_log(r"WARNING: serving 127\.0\.0\.1:0 without authentication")
            async with client(served.url, None) as c:
                assert not (await run(c, "return 1")).is_error


async def test_loopback_keeps_rebinding_protection_and_lists_extend_it(tmp_path: Path) -> None:
    with http_serve(
        tmp_path,
        "-u",
        NOTES,
        "--allowed-host",
        "mcp.example.test",
        "--allowed-origin",
        "https://app.example.test",
    ) as served:
        port = served.port
        assert post_init(served.url).status_code == 200
        assert post_init(served.url, host=f"10.1.2.3:{port}").status_code == 421
        assert post_init(served.url, host="evil.example.test").status_code == 421
        assert post_init(served.url, host=f"mcp.example.test:{port}").status_code == 200
        assert post_init(served.url, host="mcp.example.test").status_code == 200
        assert post_init(served.url, origin="http://evil.example.test").status_code == 403
        assert post_init(served.url, origin="https://app.example.test").status_code == 200
        assert post_init(served.url, origin=f"http://127.0.0.1:{port}").status_code == 200
        log = served.log()
        assert "421 foreign Host header" in log and "403 forbidden" in log


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_tls_with_a_self_signed_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    with http_serve(
        tmp_path,
        "-u",
        NOTES,
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--auth-token-env",
        "CM_TEST_TOKEN",
        env=AUTH,
    ) as served:
        assert served.url.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(cert))
        async with client(served.url, verify=trust) as c:
            assert (await run(c, "return 'over tls'")).structured_content["result"] == "over tls"
        # An unverified certificate is refused by a default client; plain HTTP gets no MCP.
        with pytest.raises(httpx2.ConnectError):
            httpx2.post(served.url, json=INIT, headers=JSON_HEADERS, timeout=10)
        plain = served.url.replace("https://", "http://")
        with pytest.raises(httpx2.HTTPError):
            httpx2.post(plain, json=INIT, headers=JSON_HEADERS, timeout=10)


async def test_resource_server_metadata_and_a_token_verifier(tmp_path: Path) -> None:
    resource = "https://mcp.example.test/mcp"
    with http_serve(
        tmp_path,
        "-u",
        NOTES,
        "--auth-verifier",
        "auth_verifier:make_verifier",
        "--auth-issuer-url",
        "https://auth.example.test",
        "--auth-resource-url",
        resource,
        "--auth-scope",
        "mcp:run",
        env={"PYTHONPATH": str(HERE)},
    ) as served:
        base = served.url.rsplit("/mcp", 1)[0]
        meta = httpx2.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=10)
        assert meta.status_code == 200
        body = meta.json()
        assert body["resource"] == resource
        assert body["authorization_servers"] == ["https://auth.example.test"]
        assert body["scopes_supported"] == ["mcp:run"]
        challenge = post_init(served.url)
        assert challenge.status_code == 401
        assert "resource_metadata=" in challenge.headers["www-authenticate"]
        # Issued for another resource: refused; lacking the scope: 403; right: served.
        assert post_init(served.url, authorization="Bearer other-resource").status_code == 401
        assert post_init(served.url, authorization="Bearer no-scope").status_code == 403
        async with client(served.url, "good") as c:
            assert (await run(c, "return 7")).structured_content["result"] == 7


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_signals_exit_cleanly_with_one_line(tmp_path: Path, signum: int) -> None:
    with http_serve(tmp_path, "--builtin-tools", "-w", str(tmp_path), stop=signum) as served:
        async with client(served.url, None) as c:
            assert not (await run(c, "return 1")).is_error
        before = served.log()
    after = served.log()[len(before) :]
    assert served.proc.returncode == 128 + signum
    assert "Traceback" not in served.log()
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    # The session the client opened closed when it left; then the one exit line.
    assert after.strip().splitlines()[-1] == f"codemode: {word}"
    assert [line for line in after.splitlines() if "Error" in line] == []


async def test_server_info_output_schema_and_description(tmp_path: Path) -> None:
    with http_serve(tmp_path, "--builtin-tools", "-w", str(tmp_path)) as served:
        answer = post_init(served.url)
        data = [line for line in answer.text.splitlines() if line.startswith("data:")]
        info = json.loads(data[0][5:])["result"]["serverInfo"]
        assert info == {"name": "codemode", "version": metadata.version("codemode")}
        async with client(served.url, None) as c:
            (run_code,) = (await c.list_tools()).tools
            assert run_code.output_schema["required"] == ["logs"]
            assert set(run_code.output_schema["properties"]) == {"logs", "result"}
            # The arguments are stated once (the SDK section), not twice.
            assert run_code.description.count("two required arguments") == 1
            assert "bash" in run_code.description and "terminal_open" in run_code.description
            result = await run(c, "print('hi')\nreturn {'a': 1}")
            assert result.structured_content == {"logs": ["hi"], "result": {"a": 1}}


def test_builtin_tools_alone_and_nothing_to_serve(tmp_path: Path) -> None:
    proc = subprocess.run(
        serve_mcp("--http", "127.0.0.1:0"), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "nothing to serve" in proc.stderr
    helped = subprocess.run(
        serve_mcp("--help"),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert helped.returncode == 0
    for word in ("bash", "terminals", "web_fetch", "todo_write", "glob"):
        assert word in helped.stdout, word


def test_the_verifier_module_is_loaded_by_name(tmp_path: Path) -> None:
    proc = subprocess.run(
        serve_mcp("-u", NOTES, "--http", "127.0.0.1:0", "--auth-verifier", "nope:thing"),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(HERE)},
    )
    assert proc.returncode == 2 and "--auth-verifier 'nope:thing'" in proc.stderr
