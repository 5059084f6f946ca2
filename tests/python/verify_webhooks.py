"""Verifies webhook deliveries as a receiver would: with the `verify` function exactly as
docs/webhooks.md gives it (read from that file, so the documented recipe is what is tested)
and with the Standard Webhooks reference library.

argv[1]: {"secret": "whsec_...", "deliveries": [{"headers": {...}, "body": "..."}]}
Prints {"documented": [ids], "library": [ids], "refused": [errors]}.
"""
import json
import pathlib
import re
import sys

from standardwebhooks import Webhook

docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
recipe = re.search(r"<!-- verify-python -->\n```python\n(.*?)```", docs.read_text(), re.S).group(1)
namespace = {}
exec(recipe, namespace)
documented_verify = namespace["verify"]

request = json.loads(sys.argv[1])
secret = request["secret"]
out = {"documented": [], "library": [], "refused": []}
for delivery in request["deliveries"]:
    body = delivery["body"].encode()
    headers = delivery["headers"]
    try:
        documented_verify(secret, headers, body)
        out["documented"].append(headers["webhook-id"])
    except ValueError as e:
        out["refused"].append(f"documented: {e}")
    try:
        Webhook(secret).verify(body, headers)
        out["library"].append(headers["webhook-id"])
    except Exception as e:  # the library's own error type
        out["refused"].append(f"library: {e}")
print(json.dumps(out))
