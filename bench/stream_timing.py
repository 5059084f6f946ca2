"""Times streamed answers, event by event, for bench/chat-stream.sh.

    python3 stream_timing.py URL HEADERS_JSON BODY_JSON RUNS

Reads server-sent events as they arrive (http.client, no buffering beyond a line) and prints
one JSON line: per run, the time to the first piece of text, to the end, the number of text
events and the tokens the answer reports (the host's `done` event, or an OpenAI usage chunk).
"""

import http.client
import json
import sys
import time
import urllib.parse


def run(url, headers, body):
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=300)
    started = time.perf_counter()
    connection.request("POST", parsed.path, body=json.dumps(body), headers=headers)
    response = connection.getresponse()
    assert response.status == 200, (response.status, response.read()[:300])
    first, pieces, tokens = None, 0, None
    name, data = None, []
    while True:
        line = response.readline()
        if not line:
            break
        line = line.decode().rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        if line or not data:
            continue
        # A blank line ends an event: its fields come in any order.
        text = "\n".join(data)
        if text == "[DONE]":
            break
        event = json.loads(text)
        piece = event.get("text") if name == "delta" else None
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or piece
        if piece:
            pieces += 1
            first = first or time.perf_counter()
        if name == "done":
            tokens = event["usage"]["completionTokens"]
            break
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        name, data = None, []
    ended = time.perf_counter()
    connection.close()
    return {"first": (first or ended) - started, "total": ended - started, "pieces": pieces, "tokens": tokens}


def main():
    url, headers, body, runs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
    headers = {"content-type": "application/json", **headers}
    print(json.dumps([run(url, headers, body) for _ in range(runs)]))


main()
