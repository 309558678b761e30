"""The service as the tenant benchmarks run it: `serve` at its defaults on
loopback, over a database whose sites are rows, until the block ends."""

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time


@contextlib.contextmanager
def serving(binary, database_url, port):
    """Runs `binary serve` on 127.0.0.1:port (metrics on port + 1) and
    yields once /readyz answers 200; stops it on leaving."""
    env = dict(os.environ, DATABASE_URL=database_url, RUST_LOG="warn",
               SITEMAPD_BASE_URL="https://www.example.com/",
               SITEMAPD_LISTEN=f"127.0.0.1:{port}",
               SITEMAPD_METRICS_LISTEN=f"127.0.0.1:{port + 1}")
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                log.seek(0)
                sys.exit(f"the service did not become ready:\n{log.read().decode()}")
            time.sleep(0.05)
        yield server
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
