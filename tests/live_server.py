"""A `quickdraft serve` subprocess on a free port of 127.0.0.1, for the live-server tests."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time

import httpx


class LiveServer:
    """Starts ``python -m quickdraft serve --port 0 ...`` and waits until /health says ready."""

    def __init__(self, target, *args: str, api_key: str | None = None, ready_timeout: float = 180.0):
        cmd = [sys.executable, "-m", "quickdraft", "serve", "--target", str(target), "--port", "0", "--threads", "2",
               *args]
        if api_key:
            cmd += ["--api-key", api_key]
        env = dict(os.environ)
        env.pop("QUICKDRAFT_API_KEY", None)
        self.api_key = api_key
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.output: list[str] = []
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + ready_timeout
        self.base_url = None
        while self.base_url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                raise RuntimeError("quickdraft serve printed no URL:\n" + "".join(self.output))
            if line is None:
                raise RuntimeError("quickdraft serve exited:\n" + "".join(self.output))
            if "http://" in line:
                self.base_url = line.split("http://", 1)[1].split()[0].removesuffix("/v1")
                self.base_url = "http://" + self.base_url
        self.host, self.port = self.base_url[len("http://"):].rsplit(":", 1)
        self.port = int(self.port)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("quickdraft serve exited:\n" + "".join(self.output))
            try:
                if httpx.get(self.base_url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.close()
        raise RuntimeError("quickdraft serve did not become ready:\n" + "".join(self.output))

    def _read(self, lines: queue.Queue) -> None:
        for line in self.proc.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self, **kw):
        """An ``openai.OpenAI`` client for this server (no retries: a 429 must show)."""
        import openai

        return openai.OpenAI(base_url=self.base_url + "/v1", api_key=self.api_key or "unused", max_retries=0,
                             timeout=120, **kw)

    def post(self, path: str, json=None, content=None, **kw) -> httpx.Response:
        headers = {**self.headers(), **kw.pop("headers", {})}
        return httpx.post(self.base_url + path, json=json, content=content, headers=headers, timeout=120, **kw)

    def get(self, path: str, **kw) -> httpx.Response:
        headers = {**self.headers(), **kw.pop("headers", {})}
        return httpx.get(self.base_url + path, headers=headers, timeout=60, **kw)

    def metric(self, name: str, **labels) -> float:
        """The value of one sample in /metrics (0 when absent)."""
        want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
        for line in self.get("/metrics").text.splitlines():
            if line.startswith(want + " "):
                return float(line.split()[-1])
        return 0.0

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def raw_stream_and_hang_up(self, body: bytes, read_bytes: int = 1) -> bytes:
        """Sends a POST over a bare socket, reads at least read_bytes of the answer, and closes."""
        with socket.create_connection((self.host, self.port), timeout=60) as s:
            head = (f"POST /v1/completions HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n")
            for k, v in self.headers().items():
                head += f"{k}: {v}\r\n"
            s.sendall(head.encode() + b"\r\n" + body)
            got = b""
            while len(got) < read_bytes:
                part = s.recv(65536)
                if not part:
                    break
                got += part
            return got

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "LiveServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_error(r: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> dict:
    """Asserts r is OpenAI's error object with this status (and param, code); returns the error."""
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    return err
