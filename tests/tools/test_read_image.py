"""``read_image``: header sniffing, attachment storage, the two-block render, errors."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from codemode.tools import MemoryAttachmentStore
from codemode.tools.fs._images import sniff_image
from tests.tools.conftest import Harness, error_of

pytestmark = pytest.mark.anyio


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + struct.pack("<I", bits)
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def test_sniffing() -> None:
    assert sniff_image(png(3, 2)) == ("image/png", 3, 2)
    assert sniff_image(gif(7, 5)) == ("image/gif", 7, 5)
    assert sniff_image(jpeg(640, 480)) == ("image/jpeg", 640, 480)
    assert sniff_image(webp_vp8x(300, 200)) == ("image/webp", 300, 200)
    assert sniff_image(webp_vp8l(16, 9)) == ("image/webp", 16, 9)
    assert sniff_image(b"plain text") is None
    with pytest.raises(ValueError):
        sniff_image(b"\x89PNG\r\n\x1a\n")


@pytest.fixture
def images(workspace: Path, output_dir: Path) -> tuple[Harness, MemoryAttachmentStore]:
    store = MemoryAttachmentStore()
    return Harness(workspace, output_dir, accepts_images=True, attachments=store), store


async def test_reads_an_image(
    images: tuple[Harness, MemoryAttachmentStore], workspace: Path
) -> None:
    harness, store = images
    data = png(4, 3)
    (workspace / "pic.PNG").write_bytes(data)
    result = await harness.ok("read_image", {"file_path": "pic.PNG"})
    image = result.value["image"]
    assert result.value["path"] == str(workspace / "pic.PNG")
    assert image["mediaType"] == "image/png"
    assert (image["width"], image["height"], image["bytes"]) == (4, 3, len(data))
    assert image["name"] == "pic.PNG"
    assert store.get(image["attachmentId"]) == (data, "image/png", "pic.PNG")
    assert result.content == [
        {
            "type": "text",
            "text": f"<path>{workspace / 'pic.PNG'}</path>\n<type>image</type>\n<content>\n"
            f"image/png image, 4x3 px, {len(data)} bytes\n</content>",
        },
        {"type": "image", "attachment": dict(image)},
    ]
    for name, blob in [("a.gif", gif(1, 1)), ("b.jpeg", jpeg(2, 2)), ("c.webp", webp_vp8x(5, 5))]:
        (workspace / name).write_bytes(blob)
        await harness.ok("read_image", {"file_path": name})


async def test_errors(
    images: tuple[Harness, MemoryAttachmentStore], workspace: Path, output_dir: Path
) -> None:
    harness, _store = images
    (workspace / "fake.png").write_bytes(gif(1, 1))
    (workspace / "dir.png").mkdir()
    (workspace / "huge.png").write_bytes(png(9000, 1))
    (workspace / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    cases = [
        ({"file_path": " "}, ("file_path must be a non-empty string", "FS_INVALID_ARGS")),
        (
            {"file_path": "notes.txt"},
            (
                'cannot read "notes.txt": read_image only accepts PNG/JPEG/WebP/GIF paths',
                "FS_INVALID_ARGS",
            ),
        ),
        (
            {"file_path": "missing.png"},
            (f'cannot read "{workspace / "missing.png"}": not found', "FS_NOT_FOUND"),
        ),
        (
            {"file_path": "dir.png"},
            (f'cannot read "{workspace / "dir.png"}": not a regular file', "FS_NOT_REGULAR_FILE"),
        ),
        (
            {"file_path": "fake.png"},
            (
                f'cannot read "{workspace / "fake.png"}": the .png extension declares image/png, '
                "but the bytes use a different image format; rename the file to match its actual "
                "format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats",
                "FS_NOT_IMAGE",
            ),
        ),
        (
            {"file_path": "huge.png"},
            (
                f'cannot read "{workspace / "huge.png"}": at least one image side exceeds the '
                "8000px limit; downscale the image and read the smaller copy",
                "FS_TOO_LARGE",
            ),
        ),
        (
            {"file_path": "cut.png"},
            (
                f'cannot read "{workspace / "cut.png"}": the image header is corrupt or truncated',
                "FS_NOT_IMAGE",
            ),
        ),
        ({}, ('invalid arguments: missing required property "file_path"', "INVALID_ARGS")),
    ]
    for args, expected in cases:
        assert error_of(await harness.fail("read_image", args)) == expected, args
    (workspace / "big.gif").write_bytes(gif(1, 1) + b"\x00" * (5 * 1024 * 1024))
    message, code = error_of(await harness.fail("read_image", {"file_path": "big.gif"}))
    assert code == "FS_TOO_LARGE"
    assert message.endswith(f"bytes exceeds the {5 * 1024 * 1024}-byte limit")


async def test_card_and_concurrency(images: tuple[Harness, MemoryAttachmentStore]) -> None:
    from codemode.engine import AbortController, ToolExecutionInput

    harness, _store = images
    tool = harness.rt.get("read_image")
    assert tool is not None and tool.present_call is not None
    assert tool.present_call({"file_path": "a.png"}) == {
        "card": "generic",
        "title": "Read image a.png",
        "kind": "read",
        "locations": [{"path": "a.png"}],
    }
    call = ToolExecutionInput(
        call_id="c",
        name="read_image",
        arguments={"file_path": "a.png"},
        signal=AbortController().signal,
    )
    assert harness.rt.execution_mode(call) == "parallel"
