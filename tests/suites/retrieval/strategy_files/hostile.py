"""Strategies that misbehave, one way each, for the sandbox tests. Never run these
outside the sandbox."""

import os
import socket

from benchwarden.suites.retrieval.api import Item


class Polite:
    def index(self, sessions):
        self.first = sessions[0].text.split("\n")[0]

    def pack(self, question, limit, budget_chars):
        return [Item(self.first, (0, 0, len(self.first)))]


class OpensSocket(Polite):
    def pack(self, question, limit, budget_chars):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


class SwallowsRefusal(Polite):
    def pack(self, question, limit, budget_chars):
        try:
            socket.socket()
        except Exception:
            pass
        return []


class SpawnsProcess(Polite):
    def index(self, sessions):
        import subprocess
        subprocess.run(["true"], check=False)


class UsesForkHelper(Polite):
    def index(self, sessions):
        import _posixsubprocess  # noqa: F401  (forks without an audit event of its own)


class CallsSystem(Polite):
    def index(self, sessions):
        os.system("true")


class WritesFile(Polite):
    target = "/tmp/benchwarden-sandbox-should-not-exist.txt"

    def index(self, sessions):
        with open(self.target, "w") as stream:
            stream.write("escaped")


class RemovesFile(Polite):
    def index(self, sessions):
        os.remove("/tmp/benchwarden-sandbox-does-not-matter")


class LoopsForever(Polite):
    def pack(self, question, limit, budget_chars):
        while True:
            pass


class Sleeps(Polite):
    def pack(self, question, limit, budget_chars):
        import time
        time.sleep(3600)


class AllocatesWithoutBound(Polite):
    def index(self, sessions):
        hoard = []
        while True:
            hoard.append(bytearray(32 * 1024 * 1024))


class ImportsCtypes(Polite):
    def index(self, sessions):
        import ctypes  # noqa: F401


class ImportsNumpy(Polite):
    def index(self, sessions):
        import numpy  # noqa: F401  (native code from outside the stdlib)


class OpensManyFiles(Polite):
    def index(self, sessions):
        self.handles = [open(__file__, "rb") for _ in range(200)]


class ReadsSecrets(Polite):
    def index(self, sessions):
        with open("/etc/hostname") as stream:
            self.first = stream.read()


class ReadsEnvironment(Polite):
    def pack(self, question, limit, budget_chars):
        leaked = " ".join(f"{key}={value}" for key, value in sorted(os.environ.items()))
        return [leaked]


class Crashes(Polite):
    def index(self, sessions):
        os._exit(9)


class PrintsToStdout(Polite):
    def pack(self, question, limit, budget_chars):
        print("this must not corrupt the protocol")
        return super().pack(question, limit, budget_chars)


class RaisesLimits(Polite):
    def index(self, sessions):
        import resource
        resource.setrlimit(resource.RLIMIT_CPU, (10_000, 10_000))


class ReturnsGarbage(Polite):
    def pack(self, question, limit, budget_chars):
        return 42
