#!/usr/bin/env python3
"""Fills a running agent-host over its management API, for bench/growth.sh.

  growth_seed.py agents BASE KEY FIRST COUNT COMMANDS
      applies agents g00001.. (numbered from FIRST), each with COMMANDS simple_text commands
      (`hello` and c1..), two requests in flight
  growth_seed.py components BASE KEY FIRST COUNT WASM
      uploads COUNT distinct components made from WASM (each with its own custom section,
      so each has its own hash, compile and artifact), one at a time as the compile queue
      allows; prints their hashes, one a line
  growth_seed.py touch BASE KEY COUNT
      lists every agent's commands once, so each is in the read cache
"""

import http.client
import sys
import threading
import urllib.parse


def client(base):
    url = urllib.parse.urlsplit(base)
    return http.client.HTTPConnection(url.hostname, url.port, timeout=120)


def call(conn, method, path, key, body=None, content_type=None):
    headers = {"x-api-key": key}
    if content_type:
        headers["content-type"] = content_type
    conn.request(method, path, body=body, headers=headers)
    reply = conn.getresponse()
    text = reply.read()
    return reply.status, text


def username(i):
    return f"g{i:05d}"


def agent_toml(i, commands):
    lines = [f'username = "{username(i)}"', f'name = "Agent {i}"']
    for c in range(commands):
        name = "hello" if c == 0 else f"c{c}"
        lines += [
            "[[commands]]",
            f'command = "{name}"',
            'handler_type = "simple_text"',
            'parameters = [{ name = "name", type = "string", required = true }]',
            'config = { text = "Hello, {{name}}!" }',
        ]
    return "\n".join(lines) + "\n"


def in_parallel(base, jobs, work, workers=2):
    """Runs work(conn, job) for every job on `workers` keep-alive connections."""
    jobs = list(jobs)
    lock = threading.Lock()
    failures = []

    def worker():
        conn = client(base)
        while True:
            with lock:
                if not jobs or failures:
                    return
                job = jobs.pop()
            error = work(conn, job)
            if error:
                with lock:
                    failures.append(error)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(failures[0])


def seed_agents(base, key, first, count, commands):
    def apply(conn, i):
        status, text = call(conn, "POST", "/v1/account/agents", key, agent_toml(i, commands), "application/toml")
        if status not in (200, 201):
            return f"applying {username(i)}: {status} {text[:300]!r}"

    in_parallel(base, range(first, first + count), apply)


def leb128(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def variant(wasm, i):
    """The component with a custom section of its own appended (what it runs is unchanged)."""
    name = b"bench-variant"
    payload = leb128(len(name)) + name + i.to_bytes(4, "little")
    return wasm + b"\x00" + leb128(len(payload)) + payload


def seed_components(base, key, first, count, path):
    import json
    import time

    wasm = open(path, "rb").read()
    conn = client(base)
    for i in range(first, first + count):
        while True:
            status, text = call(conn, "POST", "/v1/account/plugins", key, variant(wasm, i), "application/wasm")
            if status == 503:  # the compile queue is full: as told, try again
                time.sleep(0.5)
                continue
            if status not in (200, 201):
                sys.exit(f"uploading variant {i}: {status} {text[:300]!r}")
            print(json.loads(text)["data"]["plugin"])
            break


def touch(base, key, count):
    def list_commands(conn, i):
        status, text = call(conn, "GET", f"/v1/agents/{username(i)}/commands", key)
        if status != 200:
            return f"listing {username(i)}: {status} {text[:300]!r}"

    in_parallel(base, range(1, count + 1), list_commands)


def main():
    what, base, key, *rest = sys.argv[1:]
    if what == "agents":
        seed_agents(base, key, int(rest[0]), int(rest[1]), int(rest[2]))
    elif what == "components":
        seed_components(base, key, int(rest[0]), int(rest[1]), rest[2])
    elif what == "touch":
        touch(base, key, int(rest[0]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
