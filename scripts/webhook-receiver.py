#!/usr/bin/env python3
"""A webhook receiver to try signed webhooks on one machine: it prints each delivery and
whether its signature verifies, with the `verify` function of docs/webhooks.md (read from
that page, so what it checks is what the page documents).

    scripts/webhook-receiver.py PORT SECRET_FILE

SECRET_FILE holds the endpoint's secret (`whsec_...`); it is read at each delivery, so it
may be written after the receiver starts (the secret exists once the endpoint does).
Answers 200 to a delivery that verifies, 400 to one that does not.
"""
import http.server
import json
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "webhooks.md"
recipe = re.search(r"<!-- verify-python -->\n```python\n(.*?)```", DOCS.read_text(), re.S).group(1)
namespace = {}
exec(recipe, namespace)
verify = namespace["verify"]

port, secret_file = int(sys.argv[1]), pathlib.Path(sys.argv[2])


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            event = verify(secret_file.read_text().strip(), dict(self.headers), body)
            print(f"verified {self.headers['webhook-id']}: {event['type']} {json.dumps(event['data'])}", flush=True)
            self.send_response(200)
        except (OSError, ValueError) as e:
            print(f"refused {self.headers.get('webhook-id')}: {e}", flush=True)
            self.send_response(400)
        self.end_headers()

    def log_message(self, *args):
        pass


print(f"receiving on http://127.0.0.1:{port}/", flush=True)
http.server.HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
