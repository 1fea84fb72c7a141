"""Strategies that misbehave, one way each, for the sandbox tests. Never run these
outside the sandbox.

Each hostile act happens in `index` (so it runs on the first call of a seed) and the
strategy then answers politely, so an act the boundary merely *contains* (it ran,
but could not reach anything) still gives a scored run. What to aim at comes from
`hostile_targets.py`, a module the tests write beside a copy of this file (which also
proves the strategy's own folder is on the import path):

    MARKER   a path outside the scratch folder the test watches (must stay absent)
    PORT     a port the test listens on, outside the sandbox (must see no connection)
    UNIX_SOCKET  a Unix socket the test listens on, outside (must see no connection)
    SECRETS  paths the strategy must not read (ledger, store, a secret file)
"""

import os
import socket
import subprocess
import sys

import hostile_targets as targets

from benchwarden.suites.retrieval.api import Item


class Polite:
    def index(self, sessions):
        self.first = sessions[0].text.split("\n")[0]

    def pack(self, question, limit, budget_chars):
        return [Item(self.first, (0, 0, len(self.first)))]


class WritesOutsideScratch(Polite):
    def index(self, sessions):
        super().index(sessions)
        with open(targets.MARKER, "w") as stream:
            stream.write("escaped")


class WritesBesideItself(Polite):
    def index(self, sessions):
        super().index(sessions)
        with open(os.path.join(os.path.dirname(__file__), "planted.py"), "w") as stream:
            stream.write("escaped = True\n")


class ConnectsOut(Polite):
    def index(self, sessions):
        super().index(sessions)
        client = socket.create_connection(("127.0.0.1", targets.PORT), timeout=3)  # the act
        try:
            client.sendall(b"escaped")
        except OSError:
            pass


class ConnectsToUnixSocket(Polite):
    """A service's Unix socket outside (a database, a container engine) is a file."""

    def index(self, sessions):
        super().index(sessions)
        client = socket.socket(socket.AF_UNIX)
        client.connect(targets.UNIX_SOCKET)  # the act; the listener may hang up at once
        try:
            client.sendall(b"escaped")
        except OSError:
            pass


class SubprocessEscapes(Polite):
    """A child process tries what the strategy itself may not: write the marker,
    connect out, and outlive the sandbox. Errors are swallowed, so the run goes on."""

    def index(self, sessions):
        super().index(sessions)
        script = (f"echo escaped > {targets.MARKER}; "
                  f"{sys.executable} -c \"import socket; "
                  f"socket.create_connection(('127.0.0.1', {targets.PORT}), 3)\"; "
                  f"setsid sh -c 'sleep 31.337; echo late > {targets.MARKER}' "
                  ">/dev/null 2>&1 &")
        subprocess.run(["sh", "-c", script], check=False, capture_output=True)


class CtypesSystem(Polite):
    """Native code calling libc's system(): it runs, inside the boundary."""

    def index(self, sessions):
        super().index(sessions)
        import ctypes

        libc = ctypes.CDLL(None)
        libc.system(f"echo escaped > {targets.MARKER}".encode())


class ReadsSecrets(Polite):
    """Returns whatever it could read of the ledger and the store as pack text."""

    def index(self, sessions):
        super().index(sessions)
        found = []
        for path in targets.SECRETS:
            try:
                with open(path, "rb") as stream:
                    found.append(stream.read(4000).decode("utf-8", "replace"))
            except OSError as error:
                found.append(f"unreadable: {type(error).__name__}")
        self.found = " | ".join(found)

    def pack(self, question, limit, budget_chars):
        return [self.found]
