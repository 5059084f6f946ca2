#!/usr/bin/env python3
"""Holds IDLE idle connections and SLOW slowloris ones against HOST:PORT until killed, each from
127.0.1.x / 127.0.2.x (200 per address), opened again whenever the server closes it. With
`keepalive`, each idle connection first asks GET /health and reads the answer, so the server
holds it as a kept-alive connection waiting for its next request rather than a new one.
Usage: flood.py HOST:PORT IDLE SLOW [keepalive]"""
import resource
import selectors
import socket
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
idle, slow = int(sys.argv[2]), int(sys.argv[3])
keepalive = sys.argv[4:] == ["keepalive"]
HEALTH = f"GET /health HTTP/1.1\r\nhost: {host}\r\n\r\n".encode()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
sel = selectors.DefaultSelector()


def open_one(source, slowloris):
    while True:
        s = socket.socket()
        try:
            s.bind((source, 0))
            s.connect((host, int(port)))
        except OSError:
            s.close()
            time.sleep(0.05)
            continue
        if slowloris:
            s.sendall(b"POST /x402/base/seller HTTP/1.1\r\n")
        elif keepalive:
            try:
                s.settimeout(10)
                s.sendall(HEALTH)
                answer = s.recv(4096)
            except OSError:
                answer = b""
            if not answer.startswith(b"HTTP/1.1 200"):
                s.close()
                time.sleep(0.05)
                continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, (source, slowloris))
        return


for n in range(idle):
    open_one(f"127.0.1.{n // 200 + 2}", False)
for n in range(slow):
    open_one(f"127.0.2.{n % 50 + 2}", True)
print("open", flush=True)
last_byte = time.time()
while True:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            open_one(*key.data)
    if time.time() - last_byte >= 5:
        last_byte = time.time()
        for key in list(sel.get_map().values()):
            if key.data[1]:
                try:
                    key.fileobj.send(b"X")
                except OSError:
                    pass
