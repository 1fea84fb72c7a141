"""A small headless-Chromium driver for the HTML report tests, over the DevTools protocol.

Chromium runs with the network off (every request goes to a dead proxy, loopback
included) and a fresh profile; the page is loaded from a file:// URL. The driver
collects console messages, uncaught exceptions, log entries and every network request
the page tries, evaluates expressions in the page, and takes a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp


def chromium_path() -> str | None:
    configured = os.environ.get("BENCHWARDEN_TEST_CHROMIUM")
    if configured and Path(configured).exists():
        return configured
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    # network off: everything, loopback included, goes to a port nobody listens on
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
)


@dataclass
class PageVisit:
    console: list[dict[str, Any]] = field(default_factory=list)  # {level, text}
    exceptions: list[str] = field(default_factory=list)
    log_entries: list[dict[str, Any]] = field(default_factory=list)  # {level, text, url}
    requests: list[str] = field(default_factory=list)  # URLs the page asked for
    values: dict[str, Any] = field(default_factory=dict)  # expression -> value

    @property
    def errors(self) -> list[str]:
        found = [f"console.{m['level']}: {m['text']}" for m in self.console
                 if m["level"] in ("error", "assert", "warning")]
        found += [f"exception: {text}" for text in self.exceptions]
        found += [f"log {e['level']}: {e['text']} {e.get('url', '')}" for e in self.log_entries
                  if e["level"] in ("error", "warning")]
        return found


class _DevTools:
    def __init__(self, socket: aiohttp.ClientWebSocketResponse, visit: PageVisit) -> None:
        self.socket = socket
        self.visit = visit
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: dict[str, asyncio.Event] = {}

    async def pump(self) -> None:
        async for message in self.socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
                continue
            self._event(data.get("method", ""), data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(arg.get("value", arg.get("description", "")))
                            for arg in params.get("args", []))
            self.visit.console.append({"level": params.get("type", ""), "text": text})
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.visit.exceptions.append(
                details.get("exception", {}).get("description") or details.get("text", "?"))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.visit.log_entries.append({"level": entry.get("level"), "text": entry.get("text"),
                                           "url": entry.get("url", "")})
        elif method == "Network.requestWillBeSent":
            self.visit.requests.append(params.get("request", {}).get("url", ""))
        self.events.setdefault(method, asyncio.Event()).set()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[ident] = future
        await self.socket.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def wait_for(self, method: str, timeout: float = 30) -> None:
        await asyncio.wait_for(self.events.setdefault(method, asyncio.Event()).wait(), timeout)


async def _visit(binary: str, page: Path, expressions: dict[str, str], screenshot: Path | None,
                 full_page: Path | None, width: int, height: int, settle_s: float,
                 fragment: str = "") -> PageVisit:
    profile = tempfile.mkdtemp(prefix="bw-chromium-")
    process = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         f"--window-size={width},{height}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    visit = PageVisit()
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        for _ in range(1200):  # a loaded CI machine can take a while to start a browser
            if port_file.exists() and port_file.read_text().strip():
                break
            if process.poll() is not None:
                raise RuntimeError(f"chromium exited with {process.returncode}")
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("chromium did not open its DevTools port")
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            target = next(t for t in targets if t.get("type") == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                tools = _DevTools(socket, visit)
                pump = asyncio.create_task(tools.pump())
                try:
                    for domain in ("Page", "Runtime", "Log", "Network"):
                        await tools.call(f"{domain}.enable")
                    await tools.call("Emulation.setDeviceMetricsOverride", width=width,
                                     height=height, deviceScaleFactor=1, mobile=False)
                    tools.events.pop("Page.loadEventFired", None)  # only our page's load counts
                    await tools.call("Page.navigate", url=page.resolve().as_uri() + fragment)
                    await tools.wait_for("Page.loadEventFired")
                    for _ in range(100):
                        state = await tools.call(
                            "Runtime.evaluate", returnByValue=True,
                            expression="location.protocol + document.readyState")
                        if state.get("result", {}).get("value") == "file:complete":
                            break
                        await asyncio.sleep(0.05)
                    else:
                        raise RuntimeError("the page did not finish loading")
                    await asyncio.sleep(settle_s)  # let late handlers (img onerror, timers) run
                    if screenshot is not None:  # before any interaction moves the page
                        shot = await tools.call("Page.captureScreenshot", format="png")
                        screenshot.write_bytes(base64.b64decode(shot["data"]))
                    if full_page is not None:
                        metrics = await tools.call("Page.getLayoutMetrics")
                        size = metrics.get("cssContentSize") or metrics["contentSize"]
                        shot = await tools.call(
                            "Page.captureScreenshot", format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": width,
                                  "height": min(size["height"], 16000), "scale": 1})
                        full_page.write_bytes(base64.b64decode(shot["data"]))
                    for name, expression in expressions.items():
                        result = await tools.call("Runtime.evaluate", expression=expression,
                                                  returnByValue=True, awaitPromise=True)
                        if "exceptionDetails" in result:
                            visit.values[name] = RuntimeError(
                                result["exceptionDetails"].get("text"))
                        else:
                            visit.values[name] = result.get("result", {}).get("value")
                finally:
                    pump.cancel()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return visit


def visit_page(page: Path, expressions: dict[str, str], *, screenshot: Path | None = None,
               full_page: Path | None = None, width: int = 1400, height: int = 2000,
               settle_s: float = 0.3, fragment: str = "") -> PageVisit:
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("no chromium binary")
    return asyncio.run(asyncio.wait_for(
        _visit(binary, page, expressions, screenshot, full_page, width, height, settle_s,
               fragment), 90))
