"""The TLS context of the project's HTTP clients (httpx's default: certifi's CAs, or
SSL_CERT_FILE's and SSL_CERT_DIR's), built once per value of those variables.

httpx builds a context for every client it makes: ~20 ms of loading CA certificates and
~0.8 MiB of memory outside Python's allocator for as long as the client lives. A process that
keeps a client per peer (the overlord's per task host, a task's per schema registry) pays that
for each; sharing the context, a client costs a few KiB."""

from __future__ import annotations

import functools
import os
import ssl

import httpx


def client_context() -> ssl.SSLContext:
    return _context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the same variables, as every httpx client does
