"""``read_image`` and the attachment store it saves images to (an image file in, an image
content block out).

Image headers are parsed here (PNG, JPEG, WebP, GIF) for the media type and dimensions; the
bytes are stored unchanged (this build does not downscale, so ``originalDimensions`` never
appears) and the model-facing image block names the stored attachment.
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

from codemode.engine import ToolDefinition, ToolOutput, text

from .._catalog import define_catalog_tool
from .._common import is_blank
from .._config import ToolsConfig
from .._errors import FsError, io_error
from ._io import check_regular, open_readable, read_fd

__all__ = ["AttachmentStore", "MemoryAttachmentStore", "build_read_image", "sniff_image"]

_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@runtime_checkable
class AttachmentStore(Protocol):
    """Where ``read_image`` keeps image bytes; ``save`` returns the attachment id."""

    async def save(self, data: bytes, *, media_type: str, name: str) -> str:
        """Store ``data`` durably and return its attachment id."""
        ...


class MemoryAttachmentStore:
    """Keeps attachments in memory, content-addressed (the same bytes get the same id)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[bytes, str, str]] = {}

    async def save(self, data: bytes, *, media_type: str, name: str) -> str:
        """Store ``data`` and return ``att-<digest>``."""
        attachment_id = "att-" + hashlib.sha256(data).hexdigest()[:24]
        self._items[attachment_id] = (data, media_type, name)
        return attachment_id

    def get(self, attachment_id: str) -> tuple[bytes, str, str] | None:
        """``(bytes, media type, name)`` of a stored attachment, or ``None``."""
        return self._items.get(attachment_id)


def sniff_image(data: bytes) -> tuple[str, int, int] | None:
    """``(media type, width, height)`` from the header, ``None`` if not a known image.

    A recognised format whose header is cut short raises ``ValueError``.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        if len(data) < 24:
            raise ValueError("truncated PNG header")
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a"):
        if len(data) < 10:
            raise ValueError("truncated GIF header")
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data.startswith(b"\xff\xd8"):
        return ("image/jpeg", *_jpeg_size(data))
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ("image/webp", *_webp_size(data))
    return None


def _jpeg_size(data: bytes) -> tuple[int, int]:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            at += 1
            continue
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            at += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _SOF:
            if at + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    raise ValueError("no JPEG frame header")


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise ValueError("unknown WebP chunk")


def _load(cfg: ToolsConfig, raw: str, cap: int) -> tuple[str, bytes]:
    """``(display path, bytes)`` of the image ``raw`` names, read from its descriptor."""
    with cfg.workspace.open(raw) as handle:
        path = handle.display
        st = handle.st
        if st is None:
            raise FsError(f'cannot read "{path}": not found', "FS_NOT_FOUND")
        check_regular(st, path, "read", allow_hardlinks=cfg.allow_hardlinks)
        if st.st_size > cap:
            raise FsError(
                f'cannot read "{path}": {st.st_size} bytes exceeds the {cap}-byte limit',
                "FS_TOO_LARGE",
            )
        fd = open_readable(handle)
        try:
            data = read_fd(fd, cap)
        finally:
            os.close(fd)
    if len(data) > cap:
        raise FsError(
            f'cannot read "{path}": {len(data)} bytes exceeds the {cap}-byte limit', "FS_TOO_LARGE"
        )
    return path, data


def build_read_image(cfg: ToolsConfig) -> ToolDefinition:
    """The ``read_image`` tool bound to ``cfg`` (requires ``cfg.attachments``)."""
    store = cfg.attachments
    assert store is not None

    async def execute(args: Any, ctx: Any) -> Any:
        file_path = args["file_path"]
        if is_blank(file_path):
            raise FsError("file_path must be a non-empty string", "FS_INVALID_ARGS")
        ext = os.path.splitext(file_path)[1].lower()
        declared = _EXTENSIONS.get(ext)
        if declared is None:
            raise FsError(
                f'cannot read "{file_path}": read_image only accepts PNG/JPEG/WebP/GIF paths',
                "FS_INVALID_ARGS",
            )
        if declared not in cfg.accepted_image_types:
            raise FsError(
                f'cannot read "{file_path}": {declared} images are not accepted by this deployment',
                "FS_INVALID_ARGS",
            )
        try:
            path, data = await anyio.to_thread.run_sync(_load, cfg, file_path, cfg.image_max_bytes)
        except OSError as exc:
            raise io_error(exc, "read", file_path) from exc
        try:
            sniffed = sniff_image(data)
        except (ValueError, struct.error):
            raise FsError(
                f'cannot read "{path}": the image header is corrupt or truncated', "FS_NOT_IMAGE"
            ) from None
        if sniffed is None or sniffed[0] != declared:
            raise FsError(
                f'cannot read "{path}": the {ext} extension declares {declared}, but the bytes '
                "use a different image format; rename the file to match its actual format if "
                "it is PNG/JPEG/WebP/GIF, or convert it to one of those formats",
                "FS_NOT_IMAGE",
            )
        media_type, width, height = sniffed
        limit = cfg.image_max_side_px
        if width > limit or height > limit:
            raise FsError(
                f'cannot read "{path}": at least one image side exceeds the {limit}px limit; '
                "downscale the image and read the smaller copy",
                "FS_TOO_LARGE",
            )
        name = os.path.basename(path)
        attachment_id = await store.save(data, media_type=media_type, name=name)
        image = {
            "attachmentId": attachment_id,
            "mediaType": media_type,
            "bytes": len(data),
            "width": width,
            "height": height,
            "name": name,
        }
        return {"path": path, "image": image}

    def render(args: Any, value: Any) -> list[dict[str, Any]]:
        image = value["image"]
        summary = (
            f"{image['mediaType']} image, {image['width']}x{image['height']} px, "
            f"{image['bytes']} bytes"
        )
        return [
            text(
                f"<path>{value['path']}</path>\n<type>image</type>\n<content>\n{summary}\n</content>"
            ),
            {"type": "image", "attachment": dict(image)},
        ]

    dims = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "width": {"type": "integer", "required": True},
            "height": {"type": "integer", "required": True},
        },
    }
    output_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "path": {"type": "string", "required": True},
            "image": {
                "type": "object",
                "additionalProperties": False,
                "required": True,
                "properties": {
                    "attachmentId": {"type": "string", "required": True},
                    "mediaType": {
                        "type": "string",
                        "enum": sorted(set(_EXTENSIONS.values())),
                        "required": True,
                    },
                    "bytes": {"type": "integer", "required": True},
                    "width": {"type": "integer", "required": True},
                    "height": {"type": "integer", "required": True},
                    "name": {"type": "string"},
                    "originalDimensions": dims,
                },
            },
        },
    }
    return define_catalog_tool(
        "read_image",
        output=ToolOutput(schema=output_schema, render=render),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        present_call=lambda args: {
            "card": "generic",
            "title": f"Read image {args['file_path']}",
            "kind": "read",
            "locations": [{"path": args["file_path"]}],
        },
    )
