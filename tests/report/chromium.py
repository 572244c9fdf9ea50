"""A minimal headless-Chromium driver over the DevTools protocol on a pipe (no websocket, no extra package).

``--remote-debugging-pipe`` makes Chromium read JSON commands from fd 3 and write replies/events to
fd 4, each message ended by a NUL byte. Enough to load a page, record every network request and
console message, read the DOM and take a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    """(level, text) of console API calls, log entries and uncaught exceptions."""
    screenshot: bytes = b""
    values: dict[str, Any] = field(default_factory=dict)
    """Results of the JavaScript expressions asked for (evaluated in the page after load)."""


class Chromium:
    def __init__(self, binary: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="ampbench-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # runs in the child before exec: fd 3 = commands in, fd 4 = replies out
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self._proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "--window-size=1280,900", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while time.time() < end:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
                self.events.append(reply)
            ready, _, _ = select.select([self._from_child], [], [], 0.5)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buf += chunk
        raise TimeoutError(method)

    def load(self, path: Path, expressions: dict[str, str] | None = None, settle: float = 1.0) -> PageLoad:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=s)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=s)
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=s)
        end = time.time() + 30
        while not any(ev.get("method") == "Page.loadEventFired" for ev in self.events) and time.time() < end:
            self.call("Runtime.evaluate", {"expression": "1"}, session=s)  # pumps events
            time.sleep(0.1)
        time.sleep(settle)
        out = PageLoad()
        for name, expr in (expressions or {}).items():
            r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=s)
            out.values[name] = r.get("result", {}).get("value")
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=s)
        out.screenshot = base64.b64decode(shot["data"])
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Network.requestWillBeSent":
                out.requests.append(p["request"]["url"])
            elif m == "Runtime.consoleAPICalled":
                out.console.append((p.get("type", ""), " ".join(str(a.get("value", "")) for a in p.get("args", []))))
            elif m == "Log.entryAdded":
                out.console.append((p["entry"].get("level", ""), p["entry"].get("text", "")))
            elif m == "Runtime.exceptionThrown":
                out.console.append(("error", json.dumps(p.get("exceptionDetails", {}))[:300]))
        return out
