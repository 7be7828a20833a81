"""A headless Chromium driven over the Chrome DevTools Protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on fds 3 and 4), so the browser test
needs no driver binary and no Python package: Debian's ``chromium`` is enough.

``Browser`` launches it and keeps one page. Every console error the page produces (an
exception, ``console.error``, a failed load the browser logs) is collected in ``errors``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CALL_TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Above any fd the child will have, so the dup2 onto 3 and 4 cannot clobber them.
        high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 100)
        high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 100)
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def onto_3_and_4() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",  # root in CI
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-extensions",
            "--disable-component-update",
            "--window-size=1400,900",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        try:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(3, 4),
                preexec_fn=onto_3_and_4,  # before the reader thread exists
            )
        except BaseException:
            for fd in (to_chrome_w, from_chrome_r):
                os.close(fd)
            raise
        finally:
            os.close(high_r)
            os.close(high_w)
        self._out = os.fdopen(to_chrome_w, "wb", buffering=0)
        self._in = from_chrome_r
        self._lock = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._next = 0
        self._closed = False
        self.errors: list[str] = []
        # The reader thread owns self._in and closes it: closing it from another thread while
        # the reader may still call os.read would read whatever file next got that number.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
            self.session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=self.session)
        except BaseException:  # the caller gets no Browser to close: no browser left behind
            self.close()
            raise

    # -- the pipe ----------------------------------------------------------------------------

    def _read(self) -> None:
        try:
            self._read_until_eof()
        finally:
            os.close(self._in)
            with self._lock:
                self._closed = True
                self._lock.notify_all()

    def _read_until_eof(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                message = json.loads(raw)
                with self._lock:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self._on_event(message)
                        self._events.append(message)
                    self._lock.notify_all()

    def _on_event(self, m: dict[str, Any]) -> None:
        method, params = m.get("method"), m.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(f"exception: {details.get('exception', {}).get('description')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            self.errors.append(f"console.error: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            self._out.write(json.dumps(message).encode() + b"\0")
        except BrokenPipeError:  # the browser closed its end: as a reply that never came
            raise CdpError(f"{method}: no reply (browser closed: True)") from None
        deadline = time.monotonic() + CALL_TIMEOUT_S
        with self._lock:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise CdpError(f"{method}: no reply (browser closed: {self._closed})")
                self._lock.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    # -- the page ----------------------------------------------------------------------------

    def goto(self, url: str) -> None:
        """Navigate and wait for the load event."""
        with self._lock:
            start = len(self._events)
        result = self.call("Page.navigate", {"url": url}, session=self.session)
        if result.get("errorText"):
            raise CdpError(f"navigating to {url}: {result['errorText']}")
        deadline = time.monotonic() + CALL_TIMEOUT_S
        with self._lock:
            while not any(
                e.get("method") == "Page.loadEventFired" and e.get("sessionId") == self.session
                for e in self._events[start:]
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError(f"{url}: no load event")
                self._lock.wait(left)

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self, selector: str) -> str | None:
        value = self.js(f"document.querySelector({json.dumps(selector)})?.innerText ?? null")
        return None if value is None else str(value)

    def screenshot(self, path: Path) -> Path:
        width, height = self.js(
            "[document.documentElement.clientWidth, document.body.getBoundingClientRect().height]"
        )
        clip = {"x": 0, "y": 0, "width": width, "height": max(height, 1), "scale": 1}
        params = {"format": "png", "captureBeyondViewport": True, "clip": clip}
        data = self.call("Page.captureScreenshot", params, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        # OSError: a browser already gone leaves no reader on the pipe (BrokenPipeError), and the
        # fds and the process are to be cleaned up all the same
        with contextlib.suppress(CdpError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        # The browser is gone, so the reader sees EOF and closes its end; if a straggling child
        # still holds the pipe's other end, the fd stays open rather than closed under a read.
        self._reader.join(10)
