"""Which of the host's environment variables a ``bash`` call, job, persistent shell or
terminal sees.

By default (``"scrubbed"``) only an allow-list of variables that say how to find things
and how to talk (``PASS_THROUGH``, ``LC_*``) comes through: the host process often holds
credentials in its environment (``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``AWS_*``, a
database URL with a password, a proxy URL with one, ``SSH_AUTH_SOCK``), and a model can
print any variable it sees. An allow-list, not a deny-list of suspicious names: a secret
under an unusual name (``DATABASE_URL``, ``HF_HUB``...) is not guessed. ``"inherit"``
passes the whole environment (what every call got before); a collection of names passes
those on top of the allow-list.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Literal

__all__ = ["PASS_THROUGH", "BashEnv", "host_env", "normalize_bash_env"]

# Where programs and files are, the user's identity and locale, the terminal, and the
# toolchains' homes: nothing here is a credential. Proxies are not (their URLs may carry
# one), nor is SSH_AUTH_SOCK (it signs as the user): pass them by name.
PASS_THROUGH = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "HOSTNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TMP",
        "TEMP",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONPATH",
        "JAVA_HOME",
        "GOPATH",
        "GOROOT",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "NVM_DIR",
        "NODE_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    }
)

BashEnv = Literal["scrubbed", "inherit"] | frozenset[str]


def normalize_bash_env(value: str | Iterable[str]) -> BashEnv:
    """``"scrubbed"``, ``"inherit"`` or the names to pass on top of the allow-list
    (``ValueError`` for anything else, e.g. a name with ``=``)."""
    if value == "scrubbed":
        return "scrubbed"
    if value == "inherit":
        return "inherit"
    if isinstance(value, str) or isinstance(value, Mapping):
        raise ValueError(
            f'bash_env must be "scrubbed", "inherit" or a collection of variable names, '
            f"got {value!r}"
        )
    names = frozenset(value)
    for name in names:
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ValueError(f"bash_env: invalid environment variable name {name!r}")
    return names


def host_env(policy: BashEnv, drop_prefix: str) -> dict[str, str]:
    """The host's variables ``policy`` lets through, minus those starting ``drop_prefix``
    (the managed variables, set fresh for each call)."""
    env = os.environ
    if policy == "inherit":
        return {k: v for k, v in env.items() if not k.startswith(drop_prefix)}
    extra = policy if isinstance(policy, frozenset) else frozenset()
    return {
        k: v
        for k, v in env.items()
        if (k in PASS_THROUGH or k.startswith("LC_") or k in extra)
        and not k.startswith(drop_prefix)
    }
