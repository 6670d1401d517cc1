"""A TokenVerifier for the resource-server test, loaded by ``--auth-verifier
auth_verifier:make_verifier``: it stands in for an authorization server's introspection.

``good``: issued for the test's resource with scope ``mcp:run``; ``no-scope``: the right
resource, no scope; ``other-resource``: issued for another server.
"""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken

RESOURCE = "https://mcp.example.test/mcp"


class TableVerifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        table = {
            "good": (RESOURCE, ["mcp:run"]),
            "no-scope": (RESOURCE, []),
            "other-resource": ("https://elsewhere.example.test/mcp", ["mcp:run"]),
        }
        found = table.get(token)
        if found is None:
            return None
        resource, scopes = found
        return AccessToken(
            token=token, client_id=f"client-{token}", scopes=scopes, resource=resource
        )


def make_verifier() -> TableVerifier:
    return TableVerifier()
