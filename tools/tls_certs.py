#!/usr/bin/env python3
"""Throw-away certificates for trying Tessera's TLS (tests/integration/test_tls.py, bench/tls_overhead.py),
made with the openssl command (Debian's openssl package): a CA and leaf certificates it signs, for
127.0.0.1 and localhost, valid for two days. Not for production: use your own CA there.

    python3 tools/tls_certs.py --out /tmp/tls   # ca.pem/.key, server.pem/.key, client.pem/.key
"""

import argparse
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass
class Pair:
    cert: Path
    key: Path


def _openssl(*args, stdin=None):
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, input=stdin)


def make_ca(folder, name):
    folder = Path(folder)
    pair = Pair(folder / f"{name}.pem", folder / f"{name}.key")
    _openssl("req", "-x509", *_EC, "-days", "2", "-subj", f"/CN={name}", "-keyout", pair.key,
             "-out", pair.cert, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pair


def make_leaf(folder, name, ca, usage="serverAuth"):
    """A certificate signed by `ca` for 127.0.0.1 and localhost; usage serverAuth or clientAuth."""
    folder = Path(folder)
    pair = Pair(folder / f"{name}.pem", folder / f"{name}.key")
    request = folder / f"{name}.csr"
    extensions = folder / f"{name}.ext"
    extensions.write_text("basicConstraints=CA:FALSE\n"
                          "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          f"extendedKeyUsage={usage}\n")
    _openssl("req", *_EC, "-subj", f"/CN={name}", "-keyout", pair.key, "-out", request)
    _openssl("x509", "-req", "-in", request, "-CA", ca.cert, "-CAkey", ca.key, "-days", "2",
             "-set_serial", random.randrange(1, 2**62), "-extfile", extensions, "-out", pair.cert)
    request.unlink()
    extensions.unlink()
    return pair


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the files (made if missing)")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    ca = make_ca(out, "ca")
    for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        pair = make_leaf(out, name, ca, usage)
        print(f"{name}: {pair.cert} {pair.key}")
    print(f"ca: {ca.cert}")


if __name__ == "__main__":
    main()
